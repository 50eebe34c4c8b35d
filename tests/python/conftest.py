"""Fixtures of the Python tests: `kafka` and `make_topic`, shared with tests/interop (see
tests/kafka_fixtures.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kafka_fixtures import (  # noqa: E402,F401
    ExternalKafka, SecureKafka, kafka, make_topic, secure_kafka, unique_topic_name)

"""Fixtures of the interoperability tests: the broker (`kafka`, `make_topic`, shared with
tests/python) and `clients`, which starts lagless, Java and librdkafka client processes and stops
whatever is still running when the test ends."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from kafka_fixtures import (  # noqa: E402,F401
    ExternalKafka, SecureKafka, kafka, make_topic, secure_kafka, unique_topic_name)
import clients as clients_mod  # noqa: E402


@pytest.fixture(scope="session")
def lagless_tool() -> Path:
    return clients_mod.build_lagless_tool()


@pytest.fixture(scope="session")
def java_client(tmp_path_factory) -> list:
    return clients_mod.build_java_client(tmp_path_factory.mktemp("interop-java"))


@pytest.fixture
def clients(kafka, lagless_tool, java_client, tmp_path):
    c = clients_mod.Clients(kafka.bootstrap, lagless_tool, java_client, tmp_path)
    try:
        yield c
    finally:
        c.stop_all()

"""Shared pytest fixtures: a real Kafka broker for the Python test suites (tests/python,
tests/interop), loaded by their conftest.py files.

`kafka` uses $LAGLESS_BOOTSTRAP when set (a broker started by the outer command, e.g.
`python3 tests/kafka_broker.py run -- pytest tests/python`), else starts one 1-node broker for the
whole session.  `make_topic(partitions=1, rf=None)` creates a uniquely named topic.

`secure_kafka` is the same for a broker with the security listeners (`run --security`): it uses
$LAGLESS_SECURITY_DIR when set, else starts one for the session.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_broker  # noqa: E402


class ExternalKafka:
    """A broker this session did not start: same surface as KafkaCluster for tests."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def create_topic(self, name, partitions=1, rf=None, configs=None, exist_ok=False):
        return kafka_broker.create_topic(self.bootstrap, name, partitions, rf, configs, exist_ok)

    def metadata(self, topics=None):
        return kafka_broker.metadata(self.bootstrap, topics)

    def list_topics(self):
        return kafka_broker.list_topics(self.bootstrap)


class SecureKafka(ExternalKafka):
    """A broker with the security listeners, described by its security.json (see
    kafka_broker.KafkaCluster): `bootstrap` is its PLAINTEXT listener (for topics),
    listener("SASL_SSL") another listener's bootstrap, file("ca") a path, `users` {name: password}."""

    def __init__(self, security_dir: str | os.PathLike):
        self.dir = Path(security_dir)
        self.info = json.loads((self.dir / kafka_broker.SECURITY_FILE).read_text())
        super().__init__(self.info["plaintext_bootstrap"])
        self.users = {u["name"]: u["password"] for u in self.info["users"]}

    def listener(self, name: str) -> str:
        return self.info["listeners"][name]["bootstrap"]

    def file(self, name: str) -> str:
        return self.info["files"][name]


@pytest.fixture(scope="session")
def secure_kafka():
    security_dir = os.environ.get("LAGLESS_SECURITY_DIR")
    if security_dir:
        yield SecureKafka(security_dir)
        return
    with kafka_broker.KafkaCluster(nodes=1, security=True) as cluster:
        yield SecureKafka(cluster.security_dir)


@pytest.fixture(scope="session")
def kafka():
    bootstrap = os.environ.get("LAGLESS_BOOTSTRAP")
    if bootstrap:
        yield ExternalKafka(bootstrap)
        return
    with kafka_broker.KafkaCluster(nodes=1) as cluster:
        yield cluster


def unique_topic_name(prefix: str = "t") -> str:
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", prefix)[:200]
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_topic(kafka, request):
    """make_topic(partitions=1, rf=None, configs=None, prefix=<test name>) -> a new topic's name."""

    def make(partitions: int = 1, rf: int | None = None, configs=None, prefix: str | None = None) -> str:
        name = unique_topic_name(prefix or request.node.name)
        kafka.create_topic(name, partitions=partitions, rf=rf, configs=configs)
        return name

    return make

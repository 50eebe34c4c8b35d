"""Broker-backed tests of the lagless Python package.

They need a running Kafka broker: LAGLESS_BOOTSTRAP=host:port (start one with
`python3 tests/kafka_broker.py start --dir /tmp/py-broker` from the repository root).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Iterator, List

import pytest

import lagless


def pytest_sessionstart(session: pytest.Session) -> None:
    if not os.environ.get("LAGLESS_BOOTSTRAP"):
        pytest.exit(
            "LAGLESS_BOOTSTRAP is not set: these tests need a Kafka broker; start one with "
            "`python3 tests/kafka_broker.py start --dir /tmp/py-broker` and export "
            "LAGLESS_BOOTSTRAP=<the bootstrap=... address it prints>",
            returncode=2,
        )


@pytest.fixture(scope="session")
def bootstrap() -> str:
    return os.environ["LAGLESS_BOOTSTRAP"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_topic(bootstrap: str):
    def make(partitions: int = 1, prefix: str = "py") -> str:
        name = unique(prefix)
        lagless.create_topic(bootstrap, name, partitions)
        return name

    return make


@pytest.fixture
def group() -> str:
    return unique("py-group")


@pytest.fixture
def consumers() -> Iterator[List[lagless.Consumer]]:
    """Consumers a test makes; closed at the end whatever happened."""
    made: List[lagless.Consumer] = []
    yield made
    for c in made:
        try:
            c.close(timeout=5)
        except lagless.LaglessError:
            pass


def produce(bootstrap: str, topic: str, n: int, partition: "int | None" = None, prefix: str = "v") -> None:
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(n):
            p.produce(topic, value=f"{prefix}{i}".encode(), key=f"k{i}".encode(), partition=partition)
        p.flush(30)


def consume_n(c: lagless.Consumer, n: int, deadline_s: float = 30.0) -> List[lagless.Message]:
    """`n` messages from `consume()`, failing the test after `deadline_s`."""
    out: List[lagless.Message] = []
    deadline = time.monotonic() + deadline_s
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} messages"
        out.extend(c.consume(min(500, n - len(out)), timeout=0.5))
    return out

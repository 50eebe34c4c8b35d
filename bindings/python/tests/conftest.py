"""Broker-backed tests of the lagless Python package.

They need a running Kafka broker: LAGLESS_BOOTSTRAP=host:port (start one with
`python3 tests/kafka_broker.py start --dir /tmp/py-broker` from the repository root).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Dict, Iterator, List, Set

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


# KIP-333 recovery takeovers (test_recovery, test_aio, test_batch): a one-partition topic whose
# group committed COMMITTED while the log ends at LOG_END, taken over by a member with
# enable.parallel.rebalance; FRESH records are produced after the takeover.
COMMITTED = 70
LOG_END = 2070  # the log end when the partition is taken over
FRESH = 100  # records produced after the takeover


def member_config(bootstrap: str, group: str, recovery: bool = False, **extra: object) -> Dict[str, object]:
    """A group member's config: earliest, manual commits, a 6 s session; with `recovery`,
    parallel rebalance on (min.lag 10); `extra` on top."""
    config: Dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    if recovery:
        config["enable.parallel.rebalance"] = True
        config["parallel.rebalance.min.lag"] = 10
    config.update(extra)
    return config


def member(bootstrap: str, group: str, recovery: bool) -> lagless.Consumer:
    return lagless.Consumer(member_config(bootstrap, group, recovery))


def commit_as_departed_member(
    bootstrap: str, topic: str, group: str, offset: int, metadata: str = ""
) -> None:
    """Commits `offset` (with `metadata`) of partition 0 as a member that then leaves: the group's
    state when the partition's previous owner is gone."""
    with member(bootstrap, group, recovery=False) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while not c.assignment():
            assert time.monotonic() < deadline, "the first member got no assignment"
            c.poll(0.1)
        c.commit([lagless.TopicPartition(topic, 0, offset, metadata)])


def taken_over_with_backlog(bootstrap: str, make_topic, group: str, metadata: str = "") -> str:
    """A one-partition topic whose group committed COMMITTED (with `metadata`) while the log ends
    at LOG_END."""
    topic = make_topic(1, prefix="py-recovery")
    produce(bootstrap, topic, COMMITTED, partition=0)
    commit_as_departed_member(bootstrap, topic, group, COMMITTED, metadata)
    produce(bootstrap, topic, LOG_END - COMMITTED, partition=0)
    return topic


def lowest_undelivered(delivered: Set[int]) -> int:
    """The lowest offset from COMMITTED on not in `delivered`: the low-water mark a commit of
    the consumed positions stores."""
    o = COMMITTED
    while o in delivered:
        o += 1
    return o

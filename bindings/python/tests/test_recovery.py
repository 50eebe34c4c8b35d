"""KIP-333 recovery streams (``enable.parallel.rebalance``) through the Python package: a member
taking over a partition whose committed offset lags the log end drains the backlog in a recovery
stream while the main stream starts at the log end. Every test counts every offset."""

from __future__ import annotations

import time
from typing import List, Set

import lagless
from conftest import produce

COMMITTED = 70
LOG_END = 2070  # the log end when the partition is taken over


def member(bootstrap: str, group: str, recovery: bool) -> lagless.Consumer:
    config = {
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
    return lagless.Consumer(config)


def commit_as_departed_member(bootstrap: str, topic: str, group: str, offset: int) -> None:
    """Commits `offset` of partition 0 as a member that then leaves: the group's state when the
    partition's previous owner is gone."""
    with member(bootstrap, group, recovery=False) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while not c.assignment():
            assert time.monotonic() < deadline, "the first member got no assignment"
            c.poll(0.1)
        c.commit([lagless.TopicPartition(topic, 0, offset)])


def taken_over_with_backlog(bootstrap: str, make_topic, group: str) -> str:
    """A one-partition topic whose group committed COMMITTED while the log ends at LOG_END."""
    topic = make_topic(1, prefix="py-recovery")
    produce(bootstrap, topic, COMMITTED, partition=0)
    commit_as_departed_member(bootstrap, topic, group, COMMITTED)
    produce(bootstrap, topic, LOG_END - COMMITTED, partition=0)
    return topic


def test_a_commit_mid_recovery_makes_the_next_owner_resume_after_what_was_returned(
    bootstrap, make_topic, group, consumers
):
    """poll() returns one record at a time, and commit() without offsets must count only the
    records returned: the committed offset, and the token that tells the next lagless owner where
    each stream of the partition resumes (a token claiming records that were never returned would
    make that owner skip them)."""
    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    first = member(bootstrap, group, recovery=True)
    consumers.append(first)
    first.subscribe([topic])
    got: List[lagless.Message] = []
    deadline = time.monotonic() + 60
    while len(got) < 5:
        assert time.monotonic() < deadline, f"got {len(got)} of 5 records"
        m = first.poll(0.5)
        if m is not None:
            got.append(m)
    # No record was produced after the takeover: all five come from the backlog, in order.
    assert [(m.offset, m.from_recovery) for m in got] == [(o, True) for o in range(COMMITTED, COMMITTED + 5)]
    first.commit()
    com = first.committed([tp], timeout=10)[0]
    assert com.offset == COMMITTED + 5
    # lagless1;m=<main next>;r=<start>-<end>@<next>: the main stream has returned nothing yet, the
    # recovery range resumes right after the fifth record.
    assert com.metadata == f"lagless1;m={LOG_END};r={COMMITTED}-{LOG_END}@{COMMITTED + 5}"
    first.close()

    second = member(bootstrap, group, recovery=True)
    consumers.append(second)
    second.subscribe([topic])
    delivered: Set[int] = set()
    deadline = time.monotonic() + 60
    while len(delivered) < LOG_END - COMMITTED - 5:
        assert time.monotonic() < deadline, (
            f"the next owner got {len(delivered)} of {LOG_END - COMMITTED - 5} records; the first "
            f"missing is {min(set(range(COMMITTED + 5, LOG_END)) - delivered)}"
        )
        for m in second.consume(500, timeout=0.5):
            assert m.offset not in delivered, f"offset {m.offset} delivered twice"
            delivered.add(m.offset)
    assert delivered == set(range(COMMITTED + 5, LOG_END))

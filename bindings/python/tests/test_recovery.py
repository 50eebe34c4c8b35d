"""KIP-333 recovery streams (``enable.parallel.rebalance``) through the Python package: a member
taking over a partition whose committed offset lags the log end drains the backlog in a recovery
stream while the main stream starts at the log end. Every test counts every offset."""

from __future__ import annotations

import time
from typing import List, Set

import pytest

import lagless
from conftest import produce

COMMITTED = 70
LOG_END = 2070  # the log end when the partition is taken over
FRESH = 100  # records produced after the takeover


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


def committed_offset(c: lagless.Consumer, tp: lagless.TopicPartition) -> int:
    return c.committed([tp], timeout=10)[0].offset


def lowest_undelivered(delivered: Set[int]) -> int:
    o = COMMITTED
    while o in delivered:
        o += 1
    return o


def test_takeover_with_backlog_flags_recovery_records_and_reports_the_stream(
    bootstrap, make_topic, group, consumers
):
    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    c = member(bootstrap, group, recovery=True)
    consumers.append(c)
    assert c.child_consumer_is_alive() is False
    with pytest.raises(lagless.IllegalStateError, match="not assigned"):
        c.recovery_active(tp)
    c.subscribe([topic])

    delivered: Set[int] = set()
    last_main = last_recovery = -1
    backlog_left = LOG_END - COMMITTED
    seen_active = False
    fresh_during_recovery = commits_checked = since_commit = polls = 0
    deadline = time.monotonic() + 120
    while len(delivered) < LOG_END + FRESH - COMMITTED:
        assert time.monotonic() < deadline, f"{len(delivered)} records, {backlog_left} of the backlog left"
        # poll() and consume() in turn: both return everything the core counts as consumed.
        polls += 1
        if polls % 2:
            m = c.poll(0.2)
            msgs: List[lagless.Message] = [m] if m is not None else []
        else:
            msgs = c.consume(7, timeout=0.2)
        for m in msgs:
            assert m.partition == 0 and COMMITTED <= m.offset < LOG_END + FRESH
            assert m.offset not in delivered, f"offset {m.offset} delivered twice"
            delivered.add(m.offset)
            since_commit += 1
            if m.offset < LOG_END:
                assert m.from_recovery, f"backlog record {m.offset} not flagged"
                assert m.offset > last_recovery, "recovery stream out of order"
                last_recovery = m.offset
                backlog_left -= 1
            else:
                assert not m.from_recovery, f"fresh record {m.offset} flagged as recovered"
                assert m.offset > last_main, "main stream out of order"
                last_main = m.offset
                fresh_during_recovery += backlog_left > 0
        try:
            active = c.recovery_active(tp)
        except lagless.IllegalStateError:
            assert not delivered, "the partition delivered records but is not assigned"
            continue
        assert isinstance(active, bool)
        assert active == c.child_consumer_is_alive()
        if delivered:
            # Running exactly while backlog records are outstanding.
            assert active == (backlog_left > 0)
        if active and not seen_active:
            seen_active = True
            # The takeover saw the log end at LOG_END: what comes from here on is fresh.
            produce(bootstrap, topic, FRESH, partition=0, prefix="fresh")
        if seen_active:
            # The position is the main stream's, which started at the takeover's log end.
            assert c.position([tp], timeout=10)[0].offset == (LOG_END if last_main < 0 else last_main + 1)
        if since_commit >= 150 or (len(delivered) == LOG_END + FRESH - COMMITTED and since_commit):
            c.commit()
            assert committed_offset(c, tp) == lowest_undelivered(delivered), "the low-water mark"
            since_commit = 0
            commits_checked += 1

    assert seen_active
    assert delivered == set(range(COMMITTED, LOG_END + FRESH)), "every offset from the committed one on"
    assert c.recovery_active(tp) is False
    assert c.child_consumer_is_alive() is False
    assert committed_offset(c, tp) == LOG_END + FRESH
    assert commits_checked >= 10
    with pytest.raises(lagless.IllegalStateError):
        c.recovery_active(lagless.TopicPartition(topic, 1))
    with pytest.raises(lagless.IllegalStateError):
        c.recovery_active(lagless.TopicPartition("py-not-assigned", 0))
    with pytest.raises(TypeError):
        c.recovery_active((topic, 0))  # type: ignore[arg-type]
    c.close()
    with pytest.raises(lagless.ClosedError):
        c.recovery_active(tp)
    print(f"{fresh_during_recovery} of {FRESH} fresh records came while the backlog drained")


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
    assert first.recovery_active(tp)
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

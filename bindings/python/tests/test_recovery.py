"""KIP-333 recovery streams (``enable.parallel.rebalance``) through the Python package: a member
taking over a partition whose committed offset lags the log end drains the backlog in a recovery
stream while the main stream starts at the log end. Every test counts every offset."""

from __future__ import annotations

import time
from typing import List, Set

import pytest

import lagless
import lagless.aio
from conftest import (
    COMMITTED,
    FRESH,
    LOG_END,
    lowest_undelivered,
    member,
    produce,
    member_config,
    taken_over_with_backlog,
)


def poll_one_at_a_time(c: lagless.Consumer, n: int) -> List[lagless.Message]:
    """`n` records from `poll()`, which returns one at a time."""
    got: List[lagless.Message] = []
    deadline = time.monotonic() + 60
    while len(got) < n:
        assert time.monotonic() < deadline, f"got {len(got)} of {n} records"
        m = c.poll(0.5)
        if m is not None:
            got.append(m)
    return got


def committed_offset(c: lagless.Consumer, tp: lagless.TopicPartition) -> int:
    return c.committed([tp], timeout=10)[0].offset


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
    got = poll_one_at_a_time(first, 5)
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


# KIP-333 recovery streams keep their state in the commit metadata (the `lagless1;...` token).
# What a user's own metadata does to them:
def drain(c: lagless.Consumer, first: int, end: int) -> Set[int]:
    delivered: Set[int] = set()
    deadline = time.monotonic() + 60
    while len(delivered) < end - first:
        assert time.monotonic() < deadline, f"got {len(delivered)} of {end - first} records"
        for m in c.consume(500, timeout=0.5):
            assert first <= m.offset < end, f"offset {m.offset} outside [{first}, {end})"
            assert m.offset not in delivered, f"offset {m.offset} delivered twice"
            # Nothing was produced after the takeover: every record is backlog, and the backlog
            # goes to a recovery stream (so the metadata was read, as a token or not).
            assert m.from_recovery, f"backlog record {m.offset} not from the recovery stream"
            delivered.add(m.offset)
    return delivered


@pytest.mark.parametrize(
    "metadata",
    [
        "checkpoint=41",  # not a token
        "lagless1;garbage",  # a corrupt token
        f"lagless1;m={LOG_END};r=",  # a token claiming more than the committed offset
    ],
)
def test_user_metadata_cannot_make_a_recovery_takeover_skip_records(
    bootstrap, make_topic, group, consumers, metadata
):
    topic = taken_over_with_backlog(bootstrap, make_topic, group, metadata)
    c = member(bootstrap, group, recovery=True)
    consumers.append(c)
    c.subscribe([topic])
    # The metadata is ignored (with a warning): the takeover starts at the committed offset.
    assert drain(c, COMMITTED, LOG_END) == set(range(COMMITTED, LOG_END))


def test_a_commit_into_a_running_recovery_keeps_the_token_not_the_user_metadata(
    bootstrap, make_topic, group, consumers
):
    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    first = member(bootstrap, group, recovery=True)
    consumers.append(first)
    first.subscribe([topic])
    got = poll_one_at_a_time(first, 5)
    assert [m.offset for m in got] == list(range(COMMITTED, COMMITTED + 5))
    assert first.recovery_active(tp)
    token = f"lagless1;m={LOG_END};r={COMMITTED}-{LOG_END}@{COMMITTED + 5}"
    # Past the low-water mark of a running recovery: the low-water mark and a token are committed
    # instead of what was given. The token claims only what was returned below the offset given:
    # the records from it on are owed again.
    (done,) = first.commit([lagless.TopicPartition(topic, 0, COMMITTED + 8, "mine")])
    cut = f"lagless1;m={COMMITTED + 8};r={COMMITTED}-{COMMITTED + 8}@{COMMITTED + 5}"
    assert (done.offset, done.metadata) == (COMMITTED + 5, cut)  # what was stored
    (com,) = first.committed([tp], timeout=10)
    assert (com.offset, com.metadata) == (COMMITTED + 5, cut)
    (done,) = first.commit([lagless.TopicPartition(topic, 0, LOG_END, "mine")])
    assert (done.offset, done.metadata) == (COMMITTED + 5, token)
    (com,) = first.committed([tp], timeout=10)
    assert (com.offset, com.metadata) == (COMMITTED + 5, token)
    # At or below it: committed as given, metadata included; the next owner starts there.
    (done,) = first.commit([lagless.TopicPartition(topic, 0, COMMITTED + 5, "mine")])
    assert (done.offset, done.metadata) == (COMMITTED + 5, "mine")
    (done,) = first.commit([lagless.TopicPartition(topic, 0, COMMITTED + 2, "mine")])
    assert (done.offset, done.metadata) == (COMMITTED + 2, "mine")
    (com,) = first.committed([tp], timeout=10)
    assert (com.offset, com.metadata) == (COMMITTED + 2, "mine")
    first.close()

    second = member(bootstrap, group, recovery=True)
    consumers.append(second)
    second.subscribe([topic])
    assert drain(second, COMMITTED + 2, LOG_END) == set(range(COMMITTED + 2, LOG_END))


def test_a_recovery_thread_drains_the_backlog_and_commits_wait_for_its_next_call(
    bootstrap, make_topic, group, consumers
):
    """``parallel.rebalance.recovery.poll``: the backlog on a thread of its own calling
    ``recovery_poll()``, fresh records on the polling thread. Every offset comes once, each on its
    stream's thread; a commit on the polling thread while the recovery thread holds a batch stops
    at the batch's first offset; ``wakeup()`` ends a waiting ``recovery_poll()``."""
    import threading

    plain = member(bootstrap, group, recovery=True)
    consumers.append(plain)
    with pytest.raises(lagless.IllegalStateError, match="parallel.rebalance.recovery.poll=true"):
        plain.recovery_poll(timeout=0)
    # The async consumer's consume() is its only way out for records: it refuses the setting.
    for v in (True, "TRUE"):
        with pytest.raises(lagless.ConfigError) as e:
            lagless.aio.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "enable.parallel.rebalance": True,
                    "parallel.rebalance.recovery.poll": v,
                }
            )
        assert e.value.key == "parallel.rebalance.recovery.poll"

    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    c = lagless.Consumer(
        member_config(
            bootstrap,
            group,
            recovery=True,
            **{"max.poll.records": 50, "parallel.rebalance.recovery.poll": True},
        )
    )
    consumers.append(c)
    c.subscribe([topic])

    recovered: List[int] = []
    held: "list[int]" = []
    holding = threading.Event()
    looked = threading.Event()
    errors: List[BaseException] = []

    def recovery_thread() -> None:
        try:
            batches = 0
            while True:
                try:
                    msgs = c.recovery_poll(50, timeout=1.0)
                except lagless.WakeupError:
                    return
                for m in msgs:
                    assert m.from_recovery and m.offset < LOG_END
                    assert not recovered or m.offset == recovered[-1] + 1, "recovery stream out of order"
                    recovered.append(m.offset)
                if msgs:
                    batches += 1
                    if batches == 2:
                        # Hold the second batch unprocessed while the polling thread commits.
                        held.append(msgs[0].offset)
                        holding.set()
                        looked.wait(60)
        except BaseException as e:  # reported by the polling thread
            errors.append(e)

    t = threading.Thread(target=recovery_thread)
    t.start()
    main: List[int] = []
    deadline = time.monotonic() + 120
    while not holding.is_set():
        assert time.monotonic() < deadline and not errors, errors
        assert c.poll(0.1) is None
    produce(bootstrap, topic, FRESH, partition=0, prefix="fresh")
    c.commit()
    assert committed_offset(c, tp) == held[0] > COMMITTED
    looked.set()
    while len(main) < FRESH or len(recovered) < LOG_END - COMMITTED:
        assert time.monotonic() < deadline and not errors, errors
        for m in c.consume(50, timeout=0.1):
            assert not m.from_recovery and m.offset == LOG_END + len(main)
            main.append(m.offset)
    time.sleep(0.2)
    c.wakeup()
    t.join(30)
    assert not t.is_alive() and not errors, errors
    with pytest.raises(lagless.WakeupError):
        c.poll(0)
    assert recovered == list(range(COMMITTED, LOG_END))
    # The wakeup's call said the last batch was processed.
    c.commit()
    assert committed_offset(c, tp) == LOG_END + FRESH
    c.close()
    with pytest.raises(lagless.ClosedError):
        c.recovery_poll(timeout=0)

"""How core results reach Python, checked without a broker answering: core errors as their
exception classes with attributes, partition lists, empty polls in every shape, a closed
consumer's and producer's ClosedError from every call. Nothing here connects: the consumers
point at a port nobody listens on, and no call made of them needs a broker."""

from __future__ import annotations

from typing import Callable, List, Tuple

import pytest

import lagless
from lagless import OFFSET_INVALID, TopicPartition

NOWHERE = "127.0.0.1:9"


def consumer(**extra: str) -> lagless.Consumer:
    return lagless.Consumer({"bootstrap.servers": NOWHERE, **extra})


def test_an_idle_consumer_gives_empty_results_in_every_shape():
    c = consumer()
    try:
        assert c.poll(0) is None
        assert c.consume(3, 0) == []
        assert c.consume(0, 0) == []
        assert len(c.consume_batch(3, 0)) == 0
        assert c.assignment() == [] and c.paused() == [] and c.subscription() == []
        assert c.member_id() is None
        assert c.child_consumer_is_alive() is False
    finally:
        c.close(0)


def test_partition_lists_come_back_with_their_partitions_and_no_offset():
    c = consumer()
    try:
        c.assign([TopicPartition("orders", 1), TopicPartition("orders", 0)])
        got = c.assignment()
        assert sorted((t.topic, t.partition) for t in got) == [("orders", 0), ("orders", 1)]
        assert all(isinstance(t, TopicPartition) and t.offset == OFFSET_INVALID for t in got)
        assert all(t.metadata is None and t.error is None for t in got)
        c.pause([TopicPartition("orders", 1)])
        paused = c.paused()
        assert [(t.topic, t.partition, t.offset) for t in paused] == [("orders", 1, OFFSET_INVALID)]
        c.resume(paused)
        assert c.paused() == []
    finally:
        c.close(0)


def test_core_errors_arrive_as_their_classes_with_their_attributes():
    c = consumer()
    try:
        with pytest.raises(lagless.IllegalStateError) as e:
            c.recovery_poll(2, 0)
        err = e.value
        assert (err.name, err.retriable, err.fatal, err.kafka_code) == (
            "ILLEGAL_STATE",
            False,
            False,
            None,
        )
        assert err.code == dict((n, code) for code, n in lagless._lagless._error_kinds())["ILLEGAL_STATE"]
        assert "recovery" in str(err)
        with pytest.raises(lagless.IllegalStateError):
            c.enforce_rebalance("no subscription")
        with pytest.raises(lagless.ConfigError) as bad:
            lagless.Consumer({"bootstrap.servers": NOWHERE, "no.such.key": "1"})
        assert bad.value.key == "no.such.key" and bad.value.name == "CONFIG"
    finally:
        c.close(0)


def test_recovery_poll_with_its_setting_times_out_empty():
    c = consumer(**{"enable.parallel.rebalance": "true", "parallel.rebalance.recovery.poll": "true"})
    try:
        assert c.recovery_poll(2, 0) == []
    finally:
        c.close(0)


def test_every_call_of_a_closed_consumer_raises_closed_error():
    c = consumer(**{"group.id": "g"})
    c.close(0)
    c.close(0)  # closing again does nothing
    tp = TopicPartition("orders", 0, 5)
    calls: List[Tuple[str, Callable[[], object]]] = [
        ("poll", lambda: c.poll(0)),
        ("consume", lambda: c.consume(2, 0)),
        ("consume_batch", lambda: c.consume_batch(2, 0)),
        ("recovery_poll", lambda: c.recovery_poll(2, 0)),
        ("subscribe", lambda: c.subscribe(["orders"])),
        ("unsubscribe", lambda: c.unsubscribe()),
        ("assign", lambda: c.assign([tp])),
        ("commit", lambda: c.commit(offsets=[tp])),
        ("commit async", lambda: c.commit(offsets=[tp], asynchronous=True)),
        ("committed", lambda: c.committed([tp], timeout=0)),
        ("position", lambda: c.position([tp], timeout=0)),
        ("seek", lambda: c.seek(tp)),
        ("seek_to_beginning", lambda: c.seek_to_beginning([tp])),
        ("pause", lambda: c.pause([tp])),
        ("learner_ready", lambda: c.learner_ready([tp])),
        ("prepare_to_leave", lambda: c.prepare_to_leave()),
        ("recovery_active", lambda: c.recovery_active(tp)),
        ("get_watermark_offsets", lambda: c.get_watermark_offsets(tp, timeout=0)),
        ("offsets_for_times", lambda: c.offsets_for_times([tp], timeout=0)),
        ("beginning_offsets", lambda: c.beginning_offsets([tp], timeout=0)),
        ("end_offsets", lambda: c.end_offsets([tp], timeout=0)),
        ("partitions_for", lambda: c.partitions_for("orders", timeout=0)),
        ("enforce_rebalance", lambda: c.enforce_rebalance()),
    ]
    for what, call in calls:
        with pytest.raises(lagless.ClosedError) as e:
            call()
        assert e.value.name == "CLOSED", what
    # Iteration ends at a closed consumer instead of raising.
    assert list(c) == []


def test_commit_arguments_are_checked_before_the_core_is_asked():
    c = consumer(**{"group.id": "g"})
    try:
        with pytest.raises(TypeError):
            c.commit(offsets=[TopicPartition("orders", 0, 1)], message=object())  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            c.commit(offsets=[("orders", 0)])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            c.commit(callback=1)  # type: ignore[arg-type]
    finally:
        c.close(0)


def test_a_closed_producer_raises_closed_error_and_serves_no_callback():
    p = lagless.Producer({"bootstrap.servers": NOWHERE})
    p.close(0)
    with pytest.raises(lagless.ClosedError):
        p.produce("orders", b"v")
    with pytest.raises(lagless.ClosedError):
        p.send("orders", b"v")
    assert p.poll(0) == 0


def test_a_timeout_longer_than_a_duration_holds_means_no_limit():
    # 1e300 seconds is finite but more than a Duration holds: it means "no limit", like None.
    c = consumer()
    try:
        c.wakeup()  # so the poll without limit returns at once
        with pytest.raises(lagless.WakeupError):
            c.poll(1e300)
        c.wakeup()
        with pytest.raises(lagless.WakeupError):
            c.consume(2, 1e300)
    finally:
        c.close(0)
    p = lagless.Producer({"bootstrap.servers": NOWHERE})
    try:
        p.flush(1e300)  # nothing buffered: done at once
        assert p.poll(1e-300) == 0
    finally:
        p.close(0)

"""Offset lookups and moves against a real broker: offsets_for_times, beginning_offsets and
end_offsets, seek_to_beginning and seek_to_end, enforce_rebalance, commit metadata, and the
exceptions bad input raises."""

from __future__ import annotations

import logging
import time
from typing import List

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

import lagless
from conftest import consume_n, produce, unique

# Timestamps of the records produced by `produce_timed`: an hour ago, then 10 ms apart.
BASE = int(time.time() * 1000) - 3_600_000


def produce_timed(bootstrap: str, topic: str, partition: int, n: int) -> None:
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(n):
            p.produce(topic, value=f"v{i}".encode(), partition=partition, timestamp=BASE + 10 * i)
        p.flush(30)


def tps(topic: str, *partitions: int) -> List[lagless.TopicPartition]:
    return [lagless.TopicPartition(topic, p) for p in partitions]


def at(topic: str, partition: int, offset: int) -> lagless.TopicPartition:
    return lagless.TopicPartition(topic, partition, offset)


def test_offsets_for_times_gives_the_first_offset_at_or_after_each_timestamp_in_the_order_given(
    bootstrap, make_topic, consumers
):
    topic = make_topic(3)
    produce_timed(bootstrap, topic, 0, 50)
    produce_timed(bootstrap, topic, 1, 50)
    # Not assigned, no group: a lookup needs neither.
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    res = c.offsets_for_times(
        # Between two records: the later one. Exactly on one: that one. An empty partition: none.
        [at(topic, 2, 0), at(topic, 0, BASE + 55), at(topic, 1, BASE + 60)],
        timeout=10,
    )
    assert all(isinstance(tp, lagless.TopicPartition) for tp in res)
    assert [(tp.topic, tp.partition, tp.offset) for tp in res] == [
        (topic, 2, lagless.OFFSET_END),
        (topic, 0, 6),
        (topic, 1, 6),
    ]
    assert [tp.offset for tp in c.offsets_for_times([at(topic, 0, 0)])] == [0]
    assert [tp.offset for tp in c.offsets_for_times([at(topic, 0, BASE + 490)])] == [49]
    # Later than the last record: OFFSET_END (-1), as the broker answers and confluent-kafka says.
    assert [tp.offset for tp in c.offsets_for_times([at(topic, 0, BASE + 491)])] == [-1]
    assert c.offsets_for_times([]) == []


def test_offsets_for_times_answer_is_where_seek_resumes(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce_timed(bootstrap, topic, 0, 50)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign(tps(topic, 0))
    (found,) = c.offsets_for_times([at(topic, 0, BASE + 201)], timeout=10)
    c.seek(found)
    m = consume_n(c, 1)[0]
    assert (m.offset, m.timestamp) == (21, BASE + 210)


def test_offsets_for_times_rejects_bad_partitions_and_timestamps(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    # TopicPartition's default offset is OFFSET_INVALID: a timestamp nobody set is an error.
    with pytest.raises(lagless.InvalidArgumentError, match=rf"timestamp for {topic}-0 must be >= 0, got -1001"):
        c.offsets_for_times(tps(topic, 0), timeout=10)
    with pytest.raises(lagless.InvalidArgumentError, match=rf"partition of `{topic}` must be >= 0, got -1"):
        c.offsets_for_times([at(topic, -1, 0)], timeout=10)
    with pytest.raises(lagless.InvalidArgumentError, match=rf"topic `{topic}` has no partition 5"):
        c.offsets_for_times([at(topic, 5, 0)], timeout=10)
    with pytest.raises(lagless.InvalidArgumentError, match=rf"{topic}-0 is given twice, with timestamps 5 and 6"):
        c.offsets_for_times([at(topic, 0, 5), at(topic, 0, 6)], timeout=10)
    missing = unique("py-no-such-topic")
    with pytest.raises(lagless.UnknownTopicError) as e:
        c.offsets_for_times([at(missing, 0, 0)], timeout=10)
    assert e.value.topic == missing
    assert missing in str(e.value)
    with pytest.raises(TypeError, match="TopicPartition"):
        c.offsets_for_times([(topic, 0, 0)], timeout=10)  # type: ignore[list-item]


def test_beginning_and_end_offsets_follow_the_log_start_and_the_high_watermark(
    bootstrap, make_topic, consumers
):
    topic = make_topic(3)
    produce(bootstrap, topic, 30, partition=0)
    produce(bootstrap, topic, 7, partition=1)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    order = tps(topic, 2, 0, 1)
    end = c.end_offsets(order, timeout=10)
    assert [(tp.partition, tp.offset) for tp in end] == [(2, 0), (0, 30), (1, 7)]
    begin = c.beginning_offsets(order, timeout=10)
    assert [(tp.partition, tp.offset) for tp in begin] == [(2, 0), (0, 0), (1, 0)]
    # TopicPartitions hash by (topic, partition): the list makes a dict at once.
    assert {tp: tp.offset for tp in end}[lagless.TopicPartition(topic, 1)] == 7
    # A partition given twice is answered twice (and asked of the broker once).
    assert [tp.offset for tp in c.end_offsets(tps(topic, 1, 0, 1), timeout=10)] == [7, 30, 7]

    # Move partition 0's log start: the beginning offset is the log's, not 0.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_records([CkTopicPartition(topic, 0, 12)]).values():
        f.result(30)
    begin = c.beginning_offsets(tps(topic, 0, 1), timeout=10)
    assert [tp.offset for tp in begin] == [12, 0]
    assert [tp.offset for tp in c.end_offsets(tps(topic, 0), timeout=10)] == [30]
    assert c.get_watermark_offsets(lagless.TopicPartition(topic, 0), timeout=10) == (12, 30)


def test_beginning_and_end_offsets_reject_bad_partitions(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    for lookup in (c.beginning_offsets, c.end_offsets):
        with pytest.raises(lagless.InvalidArgumentError, match=rf"partition of `{topic}` must be >= 0, got -1"):
            lookup([lagless.TopicPartition(topic)], timeout=10)  # partition defaults to -1
        with pytest.raises(lagless.InvalidArgumentError, match=rf"topic `{topic}` has no partition 3"):
            lookup(tps(topic, 0, 3), timeout=10)
        missing = unique("py-no-such-topic")
        with pytest.raises(lagless.UnknownTopicError) as e:
            lookup(tps(missing, 0), timeout=10)
        assert e.value.topic == missing


def test_seek_to_end_skips_what_is_there_and_seek_to_beginning_reads_it_again(
    bootstrap, make_topic, consumers
):
    topic = make_topic(2)
    produce(bootstrap, topic, 10, partition=0)
    produce(bootstrap, topic, 5, partition=1)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    both = tps(topic, 0, 1)
    c.assign(both)
    assert len(consume_n(c, 3)) == 3

    c.seek_to_end(both)
    assert [tp.offset for tp in c.position(both, timeout=10)] == [10, 5]
    assert c.consume(100, timeout=1.0) == []
    produce(bootstrap, topic, 1, partition=0, prefix="fresh")
    (m,) = consume_n(c, 1)
    assert (m.partition, m.offset, m.value) == (0, 10, b"fresh0")

    # The offsets given are ignored: the log start is looked up.
    c.seek_to_beginning([at(topic, 0, 7), at(topic, 1, 3)])
    got = {(m.partition, m.offset) for m in consume_n(c, 16)}
    assert got == {(0, o) for o in range(11)} | {(1, o) for o in range(5)}
    assert c.consume(100, timeout=0.5) == []


def test_seek_to_beginning_and_end_raise_for_a_partition_not_assigned(bootstrap, make_topic, consumers):
    topic = make_topic(2)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    c.assign(tps(topic, 0))
    for seek in (c.seek_to_beginning, c.seek_to_end):
        with pytest.raises(lagless.IllegalStateError, match=rf"{topic}-1 is not assigned to this consumer"):
            seek(tps(topic, 0, 1))
        with pytest.raises(lagless.IllegalStateError, match="py-not-assigned-0 is not assigned"):
            seek(tps("py-not-assigned", 0))
        with pytest.raises(TypeError, match="TopicPartition"):
            seek([topic])  # type: ignore[list-item]
    c.close()
    with pytest.raises(lagless.ClosedError):
        c.seek_to_end(tps(topic, 0))


def test_enforce_rebalance_makes_the_listener_see_a_new_assignment(
    bootstrap, make_topic, group, consumers, caplog
):
    topic = make_topic(2)
    assigned: List[List[int]] = []
    # cooperative-sticky alone: a cooperative member (the default list, with range, is eager).
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "partition.assignment.strategy": "cooperative-sticky"})
    consumers.append(c)
    with pytest.raises(lagless.IllegalStateError, match="needs a subscription"):
        c.enforce_rebalance()
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.append(sorted(p.partition for p in parts)))
    deadline = time.monotonic() + 60
    while not assigned:
        assert time.monotonic() < deadline, "no first assignment"
        c.poll(0.1)
    assert assigned[-1] == [0, 1]
    member = c.member_id()
    before = len(assigned)
    level = logging.getLogger("lagless").getEffectiveLevel()
    caplog.set_level(logging.INFO, logger="lagless")
    lagless.set_log_level(logging.INFO)
    try:
        c.enforce_rebalance("py-lookups asked")
        deadline = time.monotonic() + 60
        while len(assigned) == before:
            assert time.monotonic() < deadline, "enforce_rebalance() started no rebalance"
            c.poll(0.1)
    finally:
        lagless.set_log_level(level)
    # cooperative-sticky, one member: it keeps both partitions and newly gets none.
    assert assigned[before:] == [[]]
    assert sorted(p.partition for p in c.assignment()) == [0, 1]
    assert c.member_id() == member
    # The reason reaches the log (and the JoinGroup request).
    joins = [r.getMessage() for r in caplog.records if "joining the group" in r.getMessage()]
    assert any("reason=enforced: py-lookups asked" in j for j in joins), joins
    c.close()
    with pytest.raises(lagless.ClosedError):
        c.enforce_rebalance()


def test_commit_metadata_round_trips_and_an_oversized_one_raises_kafka_error(
    bootstrap, make_topic, group, consumers
):
    topic = make_topic(2)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumers.append(c)
    c.assign(tps(topic, 0, 1))
    meta = "checkpoint=41;host=a"
    c.commit([lagless.TopicPartition(topic, 0, 5, meta), at(topic, 1, 3)])
    got = c.committed(tps(topic, 0, 1), timeout=10)
    assert [(tp.offset, tp.metadata) for tp in got] == [(5, meta), (3, "")]
    # The broker's offset.metadata.max.bytes is 4096 by default.
    with pytest.raises(lagless.KafkaError) as e:
        c.commit([lagless.TopicPartition(topic, 0, 6, "x" * 5000)])
    assert e.value.name == "OFFSET_METADATA_TOO_LARGE"
    assert (e.value.topic, e.value.partition) == (topic, 0)
    assert [(tp.offset, tp.metadata) for tp in c.committed(tps(topic, 0), timeout=10)] == [(5, meta)]

"""`Consumer.consume_batch()` and `MessageBatch` against a real broker: the columns hold what
`consume()` hands out, Arrow imports them without copies, and positions, commits and errors
behave as with `consume()`."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Optional, Tuple

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lagless
from conftest import COMMITTED, LOG_END, consume_n, member, taken_over_with_backlog

Row = Tuple[str, int, int, int, Optional[bytes], Optional[bytes]]


def produce_mixed(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """`n` records spread over the partitions: every 7th without a key, every 10th without a
    value, all with headers (which a batch leaves out)."""
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(n):
            key = None if i % 7 == 0 else f"k{i}".encode()
            value = None if i % 10 == 3 else (f"v{i}-" + "x" * (i % 50)).encode()
            p.produce(topic, value=value, key=key, partition=i % partitions, headers=[("h", b"x")])
        p.flush(30)


def earliest(bootstrap: str, group: str) -> lagless.Consumer:
    return lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def bit(bitmap: memoryview, i: int) -> bool:
    return bool(bitmap[i // 8] >> (i % 8) & 1)


def rows_of(b: lagless.MessageBatch) -> List[Row]:
    """The batch's records read from its buffer-protocol columns alone."""
    names = b.topic_names
    ids, parts, offs, ts = b.topic_ids, b.partitions, b.offsets, b.timestamps
    kd, ko, kv = b.key_data, b.key_offsets, b.key_validity
    vd, vo, vv = b.value_data, b.value_offsets, b.value_validity
    rows = []
    for i in range(len(b)):
        key = bytes(kd[ko[i] : ko[i + 1]]) if bit(kv, i) else None
        value = bytes(vd[vo[i] : vo[i + 1]]) if bit(vv, i) else None
        rows.append((names[ids[i]], parts[i], offs[i], ts[i], key, value))
    return rows


def batches_until(c: lagless.Consumer, n: int, per_call: int = 500, deadline_s: float = 30.0) -> List[lagless.MessageBatch]:
    out: List[lagless.MessageBatch] = []
    got = 0
    deadline = time.monotonic() + deadline_s
    while got < n:
        assert time.monotonic() < deadline, f"got {got} of {n} records"
        b = c.consume_batch(per_call, timeout=0.5)
        out.append(b)
        got += len(b)
    return out


def test_batch_columns_hold_what_consume_hands_out(bootstrap, make_topic, group, consumers):
    topic = make_topic(3, prefix="py-batch")
    n = 2000
    produce_mixed(bootstrap, topic, n, 3)
    c = earliest(bootstrap, group)
    consumers.append(c)
    c.subscribe([topic])
    batches = batches_until(c, n)
    rows = [r for b in batches for r in rows_of(b)]
    assert len(rows) == n
    # Every offset of every partition exactly once, in order within a partition.
    for p in range(3):
        offs = [r[2] for r in rows if r[1] == p]
        assert offs == list(range(len(offs))), f"partition {p}"
    assert sum(len([r for r in rows if r[1] == p]) for p in range(3)) == n

    # The same records read by consume() in another group.
    c2 = earliest(bootstrap, group + "-msgs")
    consumers.append(c2)
    c2.subscribe([topic])
    msgs = consume_n(c2, n)
    by_msg: Dict[Tuple[int, int], Row] = {
        (m.partition, m.offset): (m.topic, m.partition, m.offset, m.timestamp, m.key, m.value) for m in msgs
    }
    assert {(r[1], r[2]): r for r in rows} == by_msg
    assert any(r[4] is None for r in rows) and any(r[5] is None for r in rows)

    b = next(b for b in batches if len(b) > 10)
    assert b.offsets.format == "q" and b.timestamps.format == "q"
    assert b.partitions.format == "i" and b.topic_ids.format == "i"
    assert b.value_offsets.format == "i" and b.value_data.format == "B"
    assert b.offsets.readonly and len(b.offsets) == len(b) and len(b.value_offsets) == len(b) + 1
    assert b.topic_names == [topic]
    first = rows_of(b)[0]
    assert (b.key(0), b.value(0)) == (first[4], first[5])
    with pytest.raises(IndexError):
        b.value(len(b))
    assert not any(bit(b.from_recovery, i) for i in range(len(b)))
    # The columns outlive the batch object: the memoryviews keep their memory.
    offsets = b.offsets
    expect = offsets.tolist()
    del b, batches
    assert offsets.tolist() == expect


def test_pyarrow_and_polars_import_the_batch_without_copies(bootstrap, make_topic, consumers):
    topic = make_topic(2, prefix="py-batch-arrow")
    produce_mixed(bootstrap, topic, 600, 2)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, p) for p in range(2)])
    b = next(b for b in batches_until(c, 1) if len(b))
    rb = pa.record_batch(b)
    assert rb.num_rows == len(b)
    assert rb.schema.names == ["topic", "partition", "offset", "timestamp", "key", "value", "from_recovery"]
    assert rb.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert rb.schema.field("topic").type == pa.dictionary(pa.int32(), pa.string())

    # Zero copy: each Arrow buffer is the memory behind the batch's memoryview.
    def addr(mv: memoryview) -> int:
        return pa.py_buffer(mv).address

    col = rb.column
    assert col("offset").buffers()[1].address == addr(b.offsets)
    assert col("partition").buffers()[1].address == addr(b.partitions)
    assert col("timestamp").buffers()[1].address == addr(b.timestamps)
    assert col("value").buffers()[0].address == addr(b.value_validity)
    assert col("value").buffers()[1].address == addr(b.value_offsets)
    assert col("value").buffers()[2].address == addr(b.value_data)
    assert col("key").buffers()[2].address == addr(b.key_data)
    assert col("topic").indices.buffers()[1].address == addr(b.topic_ids)
    # 64-byte aligned, as the Arrow format recommends.
    assert all(buf.address % 64 == 0 for buf in col("value").buffers() if buf is not None)

    # The same content as the columns (and so as consume(), by the test above).
    rows = rows_of(b)
    assert col("offset").to_pylist() == [r[2] for r in rows]
    assert col("key").to_pylist() == [r[4] for r in rows]
    assert col("value").to_pylist() == [r[5] for r in rows]
    assert col("topic").to_pylist() == [topic] * len(b)
    assert col("value").null_count == sum(r[5] is None for r in rows) > 0
    total = pc.sum(pc.binary_length(col("value"))).as_py()
    assert total == sum(len(r[5] or b"") for r in rows) == len(b.value_data)

    # pa.array() gives the struct array; the imported data outlives the batch.
    arr = pa.array(b)
    assert pa.types.is_struct(arr.type) and len(arr) == len(b)
    del b
    assert arr.field("offset").to_pylist() == [r[2] for r in rows]
    assert rb.column("value").to_pylist() == [r[5] for r in rows]

    b2 = c.consume_batch(500, timeout=10)
    assert len(b2) > 0
    df = pl.DataFrame(b2)
    assert df.height == len(b2)
    assert df["offset"].to_list() == b2.offsets.tolist()
    assert pl.from_arrow(pa.record_batch(b2))["value"].to_list() == [r[5] for r in rows_of(b2)]


def test_commit_after_consume_batch_commits_the_handed_out_position(bootstrap, make_topic, group, consumers):
    topic = make_topic(1, prefix="py-batch-commit")
    produce_mixed(bootstrap, topic, 50, 1)
    c = earliest(bootstrap, group)
    consumers.append(c)
    tp = lagless.TopicPartition(topic, 0)
    c.assign([tp])
    got: List[int] = []
    deadline = time.monotonic() + 20
    while not got:
        assert time.monotonic() < deadline
        got = c.consume_batch(20, timeout=0.5).offsets.tolist()
    # At most num_messages, though the core fetched all 50.
    assert got == list(range(len(got))) and len(got) <= 20
    assert c.position([tp])[0].offset == len(got)
    res = c.commit()
    assert res is not None and [(t.partition, t.offset) for t in res] == [(0, len(got))]
    assert c.committed([tp], timeout=10)[0].offset == len(got)
    # A second consumer of the group goes on after the committed position.
    c.close()
    c2 = earliest(bootstrap, group)
    consumers.append(c2)
    c2.assign([tp])
    rest = [o for b in batches_until(c2, 50 - len(got)) for o in b.offsets.tolist()]
    assert rest == list(range(len(got), 50))


def test_empty_batches_and_a_waiting_batch_releases_the_gil(bootstrap, make_topic, consumers):
    topic = make_topic(1, prefix="py-batch-empty")
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0)])
    assert len(c.consume_batch(0, timeout=5)) == 0
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.monotonic()
    b = c.consume_batch(500, timeout=1.0)
    waited = time.monotonic() - start
    stop.set()
    t.join()
    assert len(b) == 0 and 0.9 <= waited < 5
    assert ticks > 100, "the thread did not run while consume_batch() waited"
    rb = pa.record_batch(b)
    assert rb.num_rows == 0 and rb.column("value").to_pylist() == []
    assert b.offsets.tolist() == [] and b.value_offsets.tolist() == [0]


def test_a_partition_error_is_raised_from_consume_batch(bootstrap, consumers):
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "task.timeout.ms": 1000})
    consumers.append(c)
    c.assign([lagless.TopicPartition("no-such-topic-py-batch", 0)])
    deadline = time.monotonic() + 20
    with pytest.raises((lagless.UnknownTopicError, lagless.PartitionStuckError)) as e:
        while time.monotonic() < deadline:
            c.consume_batch(500, timeout=0.2)
    assert e.value.topic == "no-such-topic-py-batch"


def test_recovery_stream_records_come_flagged_and_a_commit_mid_recovery_counts_the_batch(
    bootstrap, make_topic, group, consumers
):
    """KIP-333: the records of a takeover's backlog come in batches as from consume(), with the
    from_recovery bit set, and commit() after a batch writes the token for exactly what the batch
    handed out (as test_recovery checks for poll())."""
    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    first = member(bootstrap, group, recovery=True)
    consumers.append(first)
    first.subscribe([topic])
    got: List[int] = []
    deadline = time.monotonic() + 60
    while not got:
        assert time.monotonic() < deadline, "no batch from the recovery stream"
        b = first.consume_batch(5, timeout=0.5)
        got = b.offsets.tolist()
    assert got == list(range(COMMITTED, COMMITTED + 5))
    assert all(bit(b.from_recovery, i) for i in range(len(b)))
    assert pa.record_batch(b).column("from_recovery").to_pylist() == [True] * 5
    first.commit()
    com = first.committed([tp], timeout=10)[0]
    assert com.offset == COMMITTED + 5
    assert com.metadata == f"lagless1;m={LOG_END};r={COMMITTED}-{LOG_END}@{COMMITTED + 5}"
    first.close()

    second = member(bootstrap, group, recovery=True)
    consumers.append(second)
    second.subscribe([topic])
    delivered: List[int] = []
    deadline = time.monotonic() + 60
    while len(delivered) < LOG_END - COMMITTED - 5:
        assert time.monotonic() < deadline, f"the next owner got {len(delivered)} records"
        delivered.extend(second.consume_batch(500, timeout=0.5).offsets.tolist())
    assert sorted(delivered) == list(range(COMMITTED + 5, LOG_END))

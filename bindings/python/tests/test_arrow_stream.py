"""`MessageBatch.__arrow_c_stream__` against a real broker: the Arrow C stream of a batch yields
the batch as one record batch with `__arrow_c_array__`'s columns, shares the batch's memory
instead of copying it, and is read by pyarrow, polars and DuckDB."""

from __future__ import annotations

import ctypes
import gc
import sys
import time
from typing import Dict, List, Optional, Tuple

import polars as pl
import pyarrow as pa
import pytest

import lagless

NAMES = ["topic", "partition", "offset", "timestamp", "key", "value", "from_recovery"]
N = 60
PARTITIONS = 2
# (partition, key, value) of record i.
Record = Tuple[int, Optional[bytes], Optional[bytes]]


def record(i: int) -> Record:
    """Record i: no key for every 7th, a null value (tombstone) for every 10th, values of
    different lengths."""
    key = None if i % 7 == 0 else f"k{i}".encode()
    value = None if i % 10 == 4 else (f"v{i}-" + "y" * i).encode()
    return i % PARTITIONS, key, value


def produce_known(bootstrap: str, topic: str) -> Dict[int, List[Record]]:
    """Produces records 0..N and returns them per partition, in offset order."""
    per_partition: Dict[int, List[Record]] = {p: [] for p in range(PARTITIONS)}
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(N):
            part, key, value = record(i)
            p.produce(topic, value=value, key=key, partition=part)
            per_partition[part].append((part, key, value))
        p.flush(30)
    return per_partition


def consume_all(bootstrap: str, topic: str, consumers: List[lagless.Consumer]) -> List[lagless.MessageBatch]:
    """The non-empty batches of `consume_batch()` until all N records are read."""
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, p) for p in range(PARTITIONS)])
    out: List[lagless.MessageBatch] = []
    got = 0
    deadline = time.monotonic() + 30
    while got < N:
        assert time.monotonic() < deadline, f"got {got} of {N} records"
        b = c.consume_batch(500, timeout=0.5)
        if len(b):
            out.append(b)
            got += len(b)
    assert got == N
    return out


class StreamOnly:
    """Exposes only `__arrow_c_stream__` of a batch, so an importer must take the stream path
    (pyarrow, polars and DuckDB would otherwise take `__arrow_c_array__` where they can)."""

    def __init__(self, batch: lagless.MessageBatch) -> None:
        self.batch = batch

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.batch.__arrow_c_stream__(requested_schema)


def capsule_name_is(capsule: object, name: bytes) -> bool:
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    is_valid.restype = ctypes.c_int
    return bool(is_valid(capsule, name))


def addr(mv: memoryview) -> int:
    return pa.py_buffer(mv).address


@pytest.fixture
def batches(bootstrap, make_topic, consumers) -> Tuple[str, Dict[int, List[Record]], List[lagless.MessageBatch]]:
    topic = make_topic(PARTITIONS, prefix="py-arrow-stream")
    produced = produce_known(bootstrap, topic)
    return topic, produced, consume_all(bootstrap, topic, consumers)


def test_arrow_stream_yields_the_batch_as_one_record_batch(batches):
    topic, produced, bs = batches
    cap = bs[0].__arrow_c_stream__()
    assert capsule_name_is(cap, b"arrow_array_stream")
    del cap

    read: Dict[int, List[Record]] = {p: [] for p in range(PARTITIONS)}
    for b in bs:
        via_array = pa.record_batch(b)
        reader = pa.RecordBatchReader.from_stream(b)
        assert reader.schema == via_array.schema
        assert reader.schema.names == NAMES
        assert reader.schema.field("topic").type == pa.dictionary(pa.int32(), pa.string())
        assert reader.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
        got = list(reader)
        # One record batch, then the end of the stream.
        assert len(got) == 1
        rb = got[0]
        assert rb.num_rows == len(b)
        assert rb.equals(via_array)
        assert rb.column("topic").to_pylist() == [topic] * len(b)
        assert rb.column("offset").to_pylist() == b.offsets.tolist()
        for p, k, v in zip(rb.column("partition").to_pylist(), rb.column("key").to_pylist(), rb.column("value").to_pylist()):
            read[p].append((p, k, v))
    # Everything produced, per partition in order, null values and keys included.
    assert read == produced
    assert any(v is None for recs in read.values() for _, _, v in recs)


def test_arrow_stream_shares_the_batch_memory(batches):
    _, _, bs = batches
    b = bs[0]
    rb = pa.RecordBatchReader.from_stream(b).read_next_batch()
    via_array = pa.record_batch(b)
    col = rb.column
    # The stream's buffers are the batch's own memory, the same the array export hands out: a
    # copy anywhere on the stream path would give another address.
    assert col("value").buffers()[2].address == addr(b.value_data)
    assert col("value").buffers()[2].address == via_array.column("value").buffers()[2].address
    assert col("value").buffers()[1].address == addr(b.value_offsets)
    assert col("value").buffers()[0].address == addr(b.value_validity)
    assert col("key").buffers()[2].address == addr(b.key_data)
    assert col("offset").buffers()[1].address == addr(b.offsets)
    assert col("partition").buffers()[1].address == addr(b.partitions)
    assert col("timestamp").buffers()[1].address == addr(b.timestamps)
    assert col("topic").indices.buffers()[1].address == addr(b.topic_ids)
    assert col("from_recovery").buffers()[1].address == addr(b.from_recovery)


def flush_deferred_decrefs() -> None:
    """A stream released where pyo3 did not see the GIL held defers its Python decrefs to the
    next call into the extension: make one."""
    gc.collect()
    lagless.TopicPartition("t", 0)


def test_arrow_stream_outlives_the_batch_and_a_dropped_stream_frees_it(bootstrap, batches, consumers):
    topic, _, bs = batches
    # The bytes object behind a value column is referenced by the batch (its memoryview column)
    # and by the one owner all Arrow buffers over it share; we hold one more, getrefcount one.
    b = bs[0]
    values = b.value_data.obj
    flush_deferred_decrefs()
    assert sys.getrefcount(values) == 4

    # A capsule dropped without being read releases the stream and with it the memory.
    cap = b.__arrow_c_stream__()
    bs.clear()
    del b
    flush_deferred_decrefs()
    assert sys.getrefcount(values) == 3  # the stream alone keeps the memory alive
    del cap
    flush_deferred_decrefs()
    assert sys.getrefcount(values) == 2

    # A stream read after its batch is gone, then released, lets the memory go as well.
    b = consume_all(bootstrap, topic, consumers)[0]
    expected = pa.record_batch(b).to_pylist()
    values = b.value_data.obj
    cap = b.__arrow_c_stream__()
    del b
    flush_deferred_decrefs()
    assert sys.getrefcount(values) == 3
    reader = pa.RecordBatchReader._import_from_c_capsule(cap)
    del cap
    table = reader.read_all()
    assert table.num_rows == len(expected) and table.to_pylist() == expected
    assert sys.getrefcount(values) == 3  # now held by the imported table
    del reader, table
    flush_deferred_decrefs()
    assert sys.getrefcount(values) == 2


def test_arrow_stream_can_be_made_and_read_twice(batches):
    _, _, bs = batches
    b = bs[0]
    first = pa.RecordBatchReader.from_stream(b).read_all()
    second = pa.RecordBatchReader.from_stream(b).read_all()
    assert first.num_rows == second.num_rows == len(b)
    assert first.equals(second)
    # Two live streams of one batch at the same time, read in either order.
    s1, s2 = b.__arrow_c_stream__(), b.__arrow_c_stream__()
    r2 = pa.RecordBatchReader._import_from_c_capsule(s2)
    r1 = pa.RecordBatchReader._import_from_c_capsule(s1)
    assert r2.read_all().equals(first) and r1.read_all().equals(first)


def test_arrow_stream_into_pyarrow_table_and_polars(batches):
    _, _, bs = batches
    for b in bs:
        expected = pa.record_batch(b)
        t = pa.table(StreamOnly(b))
        assert t.num_rows == len(b) and t.to_batches()[0].equals(expected)
        df = pl.DataFrame(StreamOnly(b))
        assert df.columns == NAMES and df.height == len(b)
        assert df["offset"].to_list() == b.offsets.tolist()
        assert df["value"].to_list() == expected.column("value").to_pylist()
        assert df["key"].to_list() == expected.column("key").to_pylist()
        df2 = pl.from_arrow(pa.RecordBatchReader.from_stream(b))
        assert isinstance(df2, pl.DataFrame) and df2.equals(df)


def test_arrow_stream_into_duckdb(batches):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is installed by run-tests.sh; skipped only where it is not")
    topic, produced, bs = batches
    total_rows = total_bytes = total_values = 0
    for b in bs:
        batch = StreamOnly(b)  # noqa: F841 (DuckDB finds it by name)
        n, value_bytes, non_null = duckdb.sql(
            "select count(*), coalesce(sum(octet_length(value)), 0), count(value) from batch"
        ).fetchall()[0]
        assert n == len(b)
        assert value_bytes == len(b.value_data)
        assert non_null == len(b) - pa.record_batch(b).column("value").null_count
        # The batch object itself too (DuckDB picks the stream or the array path).
        direct = b  # noqa: F841
        assert duckdb.sql("select count(*) from direct").fetchall() == [(len(b),)]
        rel = duckdb.from_arrow(StreamOnly(b))
        assert rel.aggregate("count(*)").fetchall() == [(len(b),)]
        per_partition = dict(duckdb.sql("select partition, count(*) from batch group by partition").fetchall())
        assert sum(per_partition.values()) == len(b)
        total_rows += n
        total_bytes += value_bytes
        total_values += non_null
    assert total_rows == N
    all_records = [r for recs in produced.values() for r in recs]
    assert total_bytes == sum(len(v or b"") for _, _, v in all_records)
    assert total_values == sum(v is not None for _, _, v in all_records)


def test_arrow_stream_of_an_empty_batch_is_one_empty_record_batch(bootstrap, make_topic, consumers):
    topic = make_topic(1, prefix="py-arrow-stream-empty")
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0)])
    b = c.consume_batch(500, timeout=0.5)
    assert len(b) == 0
    # The documented choice: one record batch of zero rows (not zero record batches), so a
    # reader always sees the schema and one batch per consume_batch().
    got = list(pa.RecordBatchReader.from_stream(b))
    assert len(got) == 1 and got[0].num_rows == 0
    assert got[0].schema.names == NAMES and got[0].equals(pa.record_batch(b))
    assert pl.DataFrame(StreamOnly(b)).height == 0
    duckdb = pytest.importorskip("duckdb", reason="duckdb is installed by run-tests.sh; skipped only where it is not")
    batch = StreamOnly(b)  # noqa: F841
    assert duckdb.sql("select count(*), sum(octet_length(value)) from batch").fetchall() == [(0, None)]

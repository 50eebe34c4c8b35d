"""isolation.level from Python, against transactions written by librdkafka (confluent-kafka's
transactional producer): read_committed delivers exactly the committed records, in order per
partition, never reads past an open transaction, and ends (position, committed offset) past
the last transaction marker, so lag reaches 0; read_uncommitted delivers every data record."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Dict, List

import confluent_kafka

import lagless
from conftest import unique

PARTITIONS = 3
TRANSACTIONS = 12
PER_PARTITION = 25  # records per partition in each transaction


def aborted(t: int) -> bool:
    # Every third transaction aborted, the last one included, so each partition's log ends with
    # aborted records and an ABORT marker: the position must still reach its end (kafkajs #1256).
    return t % 3 == 2


def write_transactions(bootstrap: str, topic: str) -> Dict[int, List[bytes]]:
    """Writes TRANSACTIONS transactions over every partition; the committed values per partition."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("py-txn"),
                                  "linger.ms": 5})
    p.init_transactions(30)
    committed: Dict[int, List[bytes]] = defaultdict(list)
    for t in range(TRANSACTIONS):
        p.begin_transaction()
        for part in range(PARTITIONS):
            for i in range(PER_PARTITION):
                p.produce(topic, value=f"t{t}-p{part}-{i}".encode(), partition=part)
        if aborted(t):
            # librdkafka drops what it has not sent yet when a transaction is aborted: flush
            # first, so that the aborted records are in the log for the consumer to skip.
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            for part in range(PARTITIONS):
                committed[part].extend(f"t{t}-p{part}-{i}".encode() for i in range(PER_PARTITION))
    return committed


def read_all(c: lagless.Consumer, want: int, quiet_s: float = 1.0) -> List[lagless.Message]:
    """Messages until `want` came (60 s at most), then `quiet_s` more of polling for any extra."""
    out: List[lagless.Message] = []
    deadline = time.monotonic() + 60
    while len(out) < want:
        assert time.monotonic() < deadline, f"got {len(out)} of {want} messages"
        out.extend(c.consume(500, timeout=0.5))
    until = time.monotonic() + quiet_s
    while time.monotonic() < until:
        out.extend(c.consume(500, timeout=0.2))
    return out


def by_partition(msgs: List[lagless.Message]) -> Dict[int, List[bytes]]:
    got: Dict[int, List[bytes]] = defaultdict(list)
    for m in msgs:
        got[m.partition].append(m.value or b"")
    return got


def test_read_committed_delivers_exactly_the_committed_transactions_and_ends_past_the_markers(
    bootstrap, make_topic, group, consumers
):
    topic = make_topic(PARTITIONS)
    committed = write_transactions(bootstrap, topic)
    n_committed = sum(len(v) for v in committed.values())
    assert n_committed == 8 * PARTITIONS * PER_PARTITION  # 600
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "isolation.level": "read_committed"})
    consumers.append(c)
    c.subscribe([topic])
    msgs = read_all(c, n_committed)
    got = by_partition(msgs)
    for part in range(PARTITIONS):
        assert got[part] == committed[part], f"partition {part}: {len(got[part])} records"
    assert len(msgs) == n_committed
    tps = [lagless.TopicPartition(topic, p) for p in range(PARTITIONS)]
    # No transaction is open: the last stable offset is the high watermark, past the last
    # ABORT marker; the position and the committed offset get there (lag 0, kafka4s #684).
    ends = {tp.partition: tp.offset for tp in c.end_offsets(tps, timeout=10)}
    highs = {p: c.get_watermark_offsets(lagless.TopicPartition(topic, p), timeout=10)[1]
             for p in range(PARTITIONS)}
    # 12 transactions of 25 records and one marker each.
    assert ends == highs == {p: TRANSACTIONS * (PER_PARTITION + 1) for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    while {tp.partition: tp.offset for tp in c.position(tps)} != ends:
        assert time.monotonic() < deadline, f"positions {c.position(tps)} never reached {ends}"
        c.consume(500, timeout=0.2)
    c.commit(asynchronous=False)
    assert {tp.partition: tp.offset for tp in c.committed(tps, timeout=10)} == ends

    # read_uncommitted: every data record, aborted ones included, no control record.
    u = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                          "isolation.level": "read_uncommitted"})
    consumers.append(u)
    u.assign([lagless.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    every = read_all(u, TRANSACTIONS * PARTITIONS * PER_PARTITION)
    assert len(every) == TRANSACTIONS * PARTITIONS * PER_PARTITION  # 900
    for part, values in by_partition(every).items():
        assert values == [f"t{t}-p{part}-{i}".encode()
                          for t in range(TRANSACTIONS) for i in range(PER_PARTITION)]


def test_read_committed_waits_at_an_open_transaction_and_goes_on_once_it_ends(
    bootstrap, make_topic, consumers
):
    topic = make_topic(1)
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                    "transactional.id": unique("py-open"), "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce(topic, value=f"open-{i}".encode(), partition=0)
    txn.flush(30)
    # Records after the open transaction, outside any transaction.
    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(5):
            p.produce(topic, value=f"plain-{i}".encode(), partition=0)
        p.flush(30)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                          "isolation.level": "read_committed"})
    consumers.append(c)
    tp = lagless.TopicPartition(topic, 0)
    # The last stable offset is the open transaction's first offset (0): the end of the log
    # and the high watermark at read_committed; at read_uncommitted the high watermark is past
    # the plain records (15).
    assert [t.offset for t in c.end_offsets([tp], timeout=10)] == [0]
    assert c.get_watermark_offsets(tp, timeout=10)[1] == 0
    u = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(u)
    assert [t.offset for t in u.end_offsets([tp], timeout=10)] == [15]
    assert u.get_watermark_offsets(tp, timeout=10)[1] == 15
    c.assign([lagless.TopicPartition(topic, 0, 0)])
    held: List[lagless.Message] = []
    until = time.monotonic() + 1.5
    while time.monotonic() < until:
        held.extend(c.consume(100, timeout=0.2))
    assert held == [], [m.value for m in held]
    txn.abort_transaction(30)
    got = read_all(c, 5, quiet_s=0.5)
    assert [m.value for m in got] == [f"plain-{i}".encode() for i in range(5)]
    assert [m.offset for m in got] == list(range(10, 15))
    # Past the ABORT marker (offset 15): the end is 16 and the position gets there.
    assert [t.offset for t in c.end_offsets([tp], timeout=10)] == [16]
    deadline = time.monotonic() + 30
    while c.position([tp])[0].offset != 16:
        assert time.monotonic() < deadline, f"position {c.position([tp])} never reached 16"
        c.consume(100, timeout=0.2)

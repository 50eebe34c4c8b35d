"""The transactional producer from Python (confluent-kafka's method names), read back by
confluent-kafka's consumer (librdkafka) at read_committed:

- a committed and an aborted transaction: read_committed delivers exactly the committed records;
- consume-transform-produce: a group member's offsets sent to the transaction are committed with
  it (and not with an aborted one); the output holds each input record once;
- a record the broker refuses (larger than the topic's max.message.bytes: MESSAGE_TOO_LARGE)
  makes the commit raise TransactionAbortableError; after the abort the next transaction commits;
- fencing: a second producer with the same transactional.id fences the first, whose next calls
  raise KafkaError PRODUCER_FENCED with ``fatal`` set (not TransactionAbortableError).

Each topic ends with one record per partition written after the transactions, outside them (the
"sentinel"): a reader that saw every partition's sentinel has seen everything before it, so the
counts below need no quiet period."""

from __future__ import annotations

import time
from collections import Counter
from typing import Dict, List, Optional, Tuple

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import lagless
from conftest import member_config, unique

PARTITIONS = 3
SENTINEL = b"sentinel"
T = 30.0


def transactional(bootstrap: str, txn_id: str) -> lagless.Producer:
    return lagless.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                             "linger.ms": 5, "transaction.timeout.ms": 30000})


def write_sentinels(bootstrap: str, topic: str) -> None:
    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        for part in range(PARTITIONS):
            p.send(topic, value=b"", key=SENTINEL, partition=part)


def read_all(bootstrap: str, topic: str, isolation: str) -> List[Tuple[int, bytes, bytes]]:
    """(partition, key, value) of every record before the sentinels, read by confluent-kafka
    from the start of each partition at `isolation`; 60 s at most."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("py-txn-reader"),
                                  "isolation.level": isolation, "enable.auto.commit": False})
    out: List[Tuple[int, bytes, bytes]] = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(PARTITIONS)])
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < PARTITIONS:
            assert time.monotonic() < deadline, f"{len(out)} records, sentinels of {sorted(seen)} only"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                raise confluent_kafka.KafkaException(m.error())
            part, key = m.partition(), m.key() or b""
            assert part is not None and part not in seen, f"a record after partition {part}'s sentinel"
            if key == SENTINEL:
                seen.add(part)
            else:
                out.append((part, key, m.value() or b""))
    finally:
        c.close()
    return out


def test_a_committed_and_an_aborted_transaction_are_read_committed_exactly(bootstrap, make_topic):
    topic = make_topic(PARTITIONS, prefix="py-txn")
    outcomes: List[Optional[lagless.LaglessError]] = []

    def delivered(err: Optional[lagless.LaglessError], _meta: Optional[Tuple[str, int, int]]) -> None:
        outcomes.append(err)

    with transactional(bootstrap, unique("py-txn")) as p:
        p.init_transactions(T)
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, value=b"v", key=f"committed-{i}".encode(), partition=i % PARTITIONS,
                      on_delivery=delivered)
        p.commit_transaction(T)
        # The commit ran the delivery callbacks of its records.
        assert outcomes == [None] * 30
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, value=b"v", key=f"aborted-{i}".encode(), partition=i % PARTITIONS)
        p.flush(T)  # in the log before the abort: read_committed must skip them
        p.abort_transaction(T)
    write_sentinels(bootstrap, topic)

    committed = read_all(bootstrap, topic, "read_committed")
    every = read_all(bootstrap, topic, "read_uncommitted")
    print(f"read_committed {len(committed)} records, read_uncommitted {len(every)}")
    assert sorted(k for _, k, _ in committed) == sorted(f"committed-{i}".encode() for i in range(30))
    assert len(committed) == 30
    assert Counter(k.split(b"-")[0] for _, k, _ in every) == {b"committed": 30, b"aborted": 20}
    # In the order sent, per partition.
    for part in range(PARTITIONS):
        assert [k for q, k, _ in committed if q == part] == \
            [f"committed-{i}".encode() for i in range(part, 30, PARTITIONS)]


def test_consume_transform_produce_commits_the_offsets_with_the_transaction(
    bootstrap, make_topic, group, consumers
):
    source, sink = make_topic(PARTITIONS, prefix="py-ctp-in"), make_topic(PARTITIONS, prefix="py-ctp-out")
    inputs = 90
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as plain:
        for i in range(inputs):
            plain.produce(source, value=f"{i}".encode(), key=f"in-{i}".encode(), partition=i % PARTITIONS)
        plain.flush(T)
    c = lagless.Consumer(member_config(bootstrap, group, **{"isolation.level": "read_committed"}))
    consumers.append(c)
    c.subscribe([source])
    tps = [lagless.TopicPartition(source, part) for part in range(PARTITIONS)]
    p = transactional(bootstrap, unique("py-ctp"))
    p.init_transactions(T)
    consumed, rounds, aborted_records = 0, 0, 0
    deadline = time.monotonic() + 90
    try:
        while consumed < inputs:
            assert time.monotonic() < deadline, f"consumed {consumed} of {inputs}"
            msgs = c.consume(20, timeout=0.5)
            if not msgs:
                continue
            group_metadata = c.consumer_group_metadata()
            p.begin_transaction()
            offsets: Dict[int, int] = {}
            for m in msgs:
                p.produce(sink, value=(m.value or b"") + b"-out", key=m.key, partition=m.partition)
                offsets[m.partition] = max(offsets.get(m.partition, 0), m.offset + 1)
            p.send_offsets_to_transaction(
                [lagless.TopicPartition(source, part, o) for part, o in offsets.items()], group_metadata, T)
            rounds += 1
            if rounds == 1:
                # Aborted: its records are in the log but not read_committed, its offsets not
                # committed; the records are read again from where the group stands.
                p.flush(T)
                p.abort_transaction(T)
                aborted_records = len(msgs)
                assert [tp.offset for tp in c.committed(tps, timeout=10)] == [lagless.OFFSET_INVALID] * 3
                for part in offsets:
                    c.seek(lagless.TopicPartition(source, part, 0))
                continue
            p.commit_transaction(T)
            consumed += len(msgs)
            committed = {tp.partition: tp.offset for tp in c.committed(tps, timeout=10)}
            assert all(committed[part] == o for part, o in offsets.items()), (committed, offsets)
    finally:
        p.close(T)
    committed = [tp.offset for tp in c.committed(tps, timeout=10)]
    ends = [tp.offset for tp in c.end_offsets(tps, timeout=10)]
    write_sentinels(bootstrap, sink)
    out = read_all(bootstrap, sink, "read_committed")
    every = read_all(bootstrap, sink, "read_uncommitted")
    print(f"{rounds} transactions (the first aborted with {aborted_records} records); committed "
          f"offsets {committed}, end offsets {ends}; output read_committed {len(out)}, "
          f"read_uncommitted {len(every)}")
    assert committed == ends == [inputs // PARTITIONS] * PARTITIONS
    assert sorted(v for _, _, v in out) == sorted(f"{i}-out".encode() for i in range(inputs))
    assert Counter(k for _, k, _ in out) == Counter(f"in-{i}".encode() for i in range(inputs))
    assert aborted_records > 0 and len(every) == inputs + aborted_records


#: A record the partition leader refuses on a `small_batches_topic` (MESSAGE_TOO_LARGE).
TOO_LARGE = b"x" * 4096


def small_batches_topic(bootstrap: str, prefix: str) -> str:
    """A topic whose leader refuses batches over 1 KiB (MESSAGE_TOO_LARGE), far below the
    producer's own max.request.size (1 MiB): the refusal comes from the broker."""
    topic = unique(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"max.message.bytes": "1024"})])[topic].result(30)
    return topic


def test_a_record_the_broker_refuses_makes_the_transaction_abortable(bootstrap):
    topic = small_batches_topic(bootstrap, "py-txn-too-large")
    outcomes: Dict[bytes, Optional[lagless.LaglessError]] = {}

    def delivered(key: bytes):
        def cb(err: Optional[lagless.LaglessError], _meta: Optional[Tuple[str, int, int]]) -> None:
            outcomes[key] = err
        return cb

    with transactional(bootstrap, unique("py-txn-too-large")) as p:
        p.init_transactions(T)
        p.begin_transaction()
        for i in range(10):
            key = f"aborted-{i}".encode()
            p.produce(topic, value=b"v", key=key, partition=i % PARTITIONS, on_delivery=delivered(key))
        p.flush(T)  # written, each partition in the transaction; then the refused record alone
        p.produce(topic, value=TOO_LARGE, key=b"too-large", partition=0, on_delivery=delivered(b"too-large"))
        with pytest.raises(lagless.TransactionAbortableError) as raised:
            p.commit_transaction(T)
        print(f"the commit: {type(raised.value).__name__}: {raised.value}; the record: {outcomes[b'too-large']!r}")
        assert "MESSAGE_TOO_LARGE" in str(raised.value)
        refused = outcomes.pop(b"too-large")
        assert isinstance(refused, lagless.KafkaError)
        assert (refused.name, refused.kafka_code, refused.fatal) == ("MESSAGE_TOO_LARGE", 10, False)
        assert outcomes == {f"aborted-{i}".encode(): None for i in range(10)}
        # Abortable, not fatal: only an abort is allowed now, then the producer goes on.
        with pytest.raises(lagless.TransactionAbortableError):
            p.produce(topic, value=b"late")
        p.abort_transaction(T)
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=b"v", key=f"committed-{i}".encode(), partition=i % PARTITIONS)
        p.commit_transaction(T)
    write_sentinels(bootstrap, topic)

    committed = read_all(bootstrap, topic, "read_committed")
    every = read_all(bootstrap, topic, "read_uncommitted")
    print(f"read_committed {len(committed)} records, read_uncommitted {len(every)}")
    assert sorted(k for _, k, _ in committed) == sorted(f"committed-{i}".encode() for i in range(10))
    assert Counter(k.split(b"-")[0] for _, k, _ in every) == {b"committed": 10, b"aborted": 10}


def test_a_second_producer_fences_the_first_with_a_fatal_error(bootstrap, make_topic):
    topic = make_topic(PARTITIONS, prefix="py-fenced")
    txn_id = unique("py-fenced")
    first = transactional(bootstrap, txn_id)
    second = transactional(bootstrap, txn_id)
    try:
        first.init_transactions(T)
        first.begin_transaction()
        for i in range(10):
            first.produce(topic, value=b"v", key=f"first-{i}".encode(), partition=i % PARTITIONS)
        first.flush(T)
        second.init_transactions(T)
        with pytest.raises(lagless.LaglessError) as raised:
            first.commit_transaction(T)
        e = raised.value
        print(f"the fenced producer's commit: {type(e).__name__} {e.name} fatal={e.fatal}: {e}")
        # What a confluent-kafka loop asks with fatal() and txn_requires_abort().
        assert isinstance(e, lagless.KafkaError) and not isinstance(e, lagless.TransactionAbortableError)
        assert (e.name, e.kafka_code, e.fatal, e.retriable) == ("PRODUCER_FENCED", 90, True, False)
        # Fatal: every later call fails the same way.
        for call in (lambda: first.produce(topic, value=b"late"), lambda: first.abort_transaction(T),
                     first.begin_transaction):
            with pytest.raises(lagless.KafkaError) as again:
                call()
            assert (again.value.name, again.value.fatal) == ("PRODUCER_FENCED", True)
        second.begin_transaction()
        for i in range(5):
            second.produce(topic, value=b"v", key=f"second-{i}".encode(), partition=i % PARTITIONS)
        second.commit_transaction(T)
    finally:
        second.close(T)
        try:
            first.close(5)
        except lagless.LaglessError:
            pass
    write_sentinels(bootstrap, topic)
    committed = read_all(bootstrap, topic, "read_committed")
    every = read_all(bootstrap, topic, "read_uncommitted")
    print(f"read_committed {len(committed)} records, read_uncommitted {len(every)}")
    assert sorted(k for _, k, _ in committed) == sorted(f"second-{i}".encode() for i in range(5))
    assert len(every) == 15, "the fenced producer's 10 records are in the log, aborted"


def test_transactional_calls_refuse_what_is_not_a_transaction(bootstrap, make_topic, group, consumers):
    topic = make_topic(1, prefix="py-txn-state")
    with lagless.Producer({"bootstrap.servers": bootstrap}) as plain:
        with pytest.raises(lagless.IllegalStateError):
            plain.init_transactions(T)
    c = lagless.Consumer(member_config(bootstrap, group))
    consumers.append(c)
    with pytest.raises(lagless.IllegalStateError):
        c.consumer_group_metadata()
    c.subscribe([topic])
    metadata = c.consumer_group_metadata()
    assert isinstance(metadata, lagless.ConsumerGroupMetadata) and group in repr(metadata)
    with transactional(bootstrap, unique("py-txn-state")) as p:
        with pytest.raises(lagless.IllegalStateError):
            p.begin_transaction()  # before init_transactions
        p.init_transactions(T)
        with pytest.raises(lagless.IllegalStateError):
            p.produce(topic, value=b"outside")  # no transaction open
        p.begin_transaction()
        with pytest.raises(lagless.InvalidArgumentError):
            p.send_offsets_to_transaction([lagless.TopicPartition(topic, 0)], metadata, T)
        with pytest.raises(TypeError):
            p.send_offsets_to_transaction([lagless.TopicPartition(topic, 0, 1)], object(), T)  # type: ignore[arg-type]
        p.abort_transaction(T)

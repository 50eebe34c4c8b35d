"""The asyncio producer's transactions (lagless.aio), read back by confluent-kafka's consumer at
read_committed:

- a consume-transform-produce loop of lagless.aio.Consumer and lagless.aio.Producer, as
  test_transactions.py's blocking one. The first transaction is aborted (its records written
  first), the others commit with the group's offsets: the output holds each input record once,
  and the group's committed offsets reach the input's end offsets;
- a record the broker refuses (MESSAGE_TOO_LARGE) makes ``await commit_transaction()`` raise
  TransactionAbortableError; after the abort the next transaction commits."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Dict, List, Tuple

import pytest

import lagless
import lagless.aio
from conftest import member_config, unique
from test_transactions import PARTITIONS, T, TOO_LARGE, read_all, small_batches_topic, write_sentinels

INPUTS = 90


async def consume_transform_produce(bootstrap: str, source: str, sink: str, group: str) -> Tuple[int, int, List[int], List[int]]:
    """(transactions, records of the aborted one, committed offsets, end offsets) of the loop."""
    tps = [lagless.TopicPartition(source, part) for part in range(PARTITIONS)]
    async with lagless.aio.Consumer(member_config(bootstrap, group, **{"isolation.level": "read_committed"})) as c:
        c.subscribe([source])
        p = lagless.aio.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("py-aio-ctp"),
                                  "linger.ms": 5, "transaction.timeout.ms": 30000})
        try:
            await p.init_transactions(T)
            consumed, rounds, aborted_records = 0, 0, 0
            deadline = time.monotonic() + 90
            while consumed < INPUTS:
                assert time.monotonic() < deadline, f"consumed {consumed} of {INPUTS}"
                msgs = await c.consume(20, timeout=0.5)
                if not msgs:
                    continue
                group_metadata = c.consumer_group_metadata()
                await p.begin_transaction()
                offsets: Dict[int, int] = {}
                for m in msgs:
                    offsets[m.partition] = max(offsets.get(m.partition, 0), m.offset + 1)
                written = await asyncio.gather(*(
                    p.send(sink, value=(m.value or b"") + b"-out", key=m.key, partition=m.partition) for m in msgs))
                assert len(set(written)) == len(msgs)
                await p.send_offsets_to_transaction(
                    [lagless.TopicPartition(source, part, o) for part, o in offsets.items()], group_metadata, T)
                rounds += 1
                if rounds == 1:
                    # Written (every send() returned its offset) and aborted: not read_committed,
                    # its offsets not committed; the records are read again from the start.
                    await p.abort_transaction(T)
                    aborted_records = len(msgs)
                    assert [tp.offset for tp in await c.committed(tps, timeout=10)] == \
                        [lagless.OFFSET_INVALID] * PARTITIONS
                    for part in offsets:
                        c.seek(lagless.TopicPartition(source, part, 0))
                    continue
                await p.commit_transaction(T)
                consumed += len(msgs)
                committed = {tp.partition: tp.offset for tp in await c.committed(tps, timeout=10)}
                assert all(committed[part] == o for part, o in offsets.items()), (committed, offsets)
        finally:
            await p.close(T)
        committed_offsets = [tp.offset for tp in await c.committed(tps, timeout=10)]
        ends = [tp.offset for tp in await c.end_offsets(tps, timeout=10)]
    return rounds, aborted_records, committed_offsets, ends


def test_an_asyncio_consume_transform_produce_loop_writes_each_input_once(bootstrap, make_topic, group):
    source, sink = make_topic(PARTITIONS, prefix="py-aio-ctp-in"), make_topic(PARTITIONS, prefix="py-aio-ctp-out")
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as plain:
        for i in range(INPUTS):
            plain.produce(source, value=f"{i}".encode(), key=f"in-{i}".encode(), partition=i % PARTITIONS)
        plain.flush(T)

    async def bounded() -> Tuple[int, int, List[int], List[int]]:
        return await asyncio.wait_for(consume_transform_produce(bootstrap, source, sink, group), 120)

    rounds, aborted_records, committed, ends = asyncio.run(bounded())
    write_sentinels(bootstrap, sink)
    out = read_all(bootstrap, sink, "read_committed")
    every = read_all(bootstrap, sink, "read_uncommitted")
    print(f"{rounds} transactions (the first aborted with {aborted_records} records); committed "
          f"offsets {committed}, end offsets {ends}; output read_committed {len(out)}, "
          f"read_uncommitted {len(every)}")
    assert committed == ends == [INPUTS // PARTITIONS] * PARTITIONS
    assert sorted(v for _, _, v in out) == sorted(f"{i}-out".encode() for i in range(INPUTS))
    assert Counter(k for _, k, _ in out) == Counter(f"in-{i}".encode() for i in range(INPUTS))
    assert aborted_records > 0 and len(every) == INPUTS + aborted_records


def test_asyncio_transactional_calls_refuse_what_is_not_a_transaction(bootstrap, make_topic):
    topic = make_topic(1, prefix="py-aio-txn-state")

    async def main() -> None:
        p = lagless.aio.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("py-aio-txn-state")})
        try:
            with pytest.raises(lagless.IllegalStateError):
                await p.begin_transaction()  # before init_transactions()
            await p.init_transactions(T)
            with pytest.raises(lagless.IllegalStateError):
                await p.send(topic, value=b"outside")  # no transaction open
            await p.begin_transaction()
            await p.send(topic, value=b"inside")
            await p.abort_transaction(T)
        finally:
            await p.close(T)
        async with lagless.aio.Producer({"bootstrap.servers": bootstrap}) as plain:
            with pytest.raises(lagless.IllegalStateError):
                await plain.init_transactions(T)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_record_the_broker_refuses_makes_the_asyncio_transaction_abortable(bootstrap):
    topic = small_batches_topic(bootstrap, "py-aio-txn-too-large")

    async def main() -> None:
        async with lagless.aio.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("py-aio-too-large"),
                                         "linger.ms": 5}) as p:
            await p.init_transactions(T)
            await p.begin_transaction()
            written = await asyncio.gather(*(
                p.send(topic, value=b"v", key=f"aborted-{i}".encode(), partition=i % PARTITIONS) for i in range(10)))
            assert len(set(written)) == 10
            with pytest.raises(lagless.KafkaError) as refused:
                await p.send(topic, value=TOO_LARGE, key=b"too-large", partition=0)
            assert (refused.value.name, refused.value.kafka_code, refused.value.fatal) == ("MESSAGE_TOO_LARGE", 10, False)
            with pytest.raises(lagless.TransactionAbortableError) as raised:
                await p.commit_transaction(T)
            print(f"the commit: {type(raised.value).__name__}: {raised.value}")
            assert "MESSAGE_TOO_LARGE" in str(raised.value)
            await p.abort_transaction(T)
            await p.begin_transaction()
            await asyncio.gather(*(
                p.send(topic, value=b"v", key=f"committed-{i}".encode(), partition=i % PARTITIONS) for i in range(10)))
            await p.commit_transaction(T)

    asyncio.run(asyncio.wait_for(main(), 60))
    write_sentinels(bootstrap, topic)
    committed = read_all(bootstrap, topic, "read_committed")
    every = read_all(bootstrap, topic, "read_uncommitted")
    print(f"read_committed {len(committed)} records, read_uncommitted {len(every)}")
    assert sorted(k for _, k, _ in committed) == sorted(f"committed-{i}".encode() for i in range(10))
    assert Counter(k.split(b"-")[0] for _, k, _ in every) == {b"committed": 10, b"aborted": 10}

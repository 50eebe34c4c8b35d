"""Server-side regex subscriptions (KIP-848's SubscribedTopicRegex, ``subscribe_regex``) from
Python, blocking and asyncio, against the broker: the group coordinator matches the regex against
whole topic names, so the matching topics' partitions are assigned and read, every produced offset
exactly once, and similarly named topics the regex does not match whole are never read; a regex
the coordinator cannot compile makes the next poll fail with an error naming it.

Every wait has a deadline; records are counted by (topic, partition, offset) from the producer's
delivery reports.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Dict, List, Set, Tuple

import pytest

import lagless
import lagless.aio

from conftest import unique

Record = Tuple[str, int, int]  # (topic, partition, offset)
PER_TOPIC = 60
INVALID_REGULAR_EXPRESSION = 128  # Kafka's error code


def regex_config(bootstrap: str) -> Dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": unique("py-rx-group"),
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def regex_topics(bootstrap: str) -> Tuple[str, List[str], List[str]]:
    """A regex and the topics it matches whole (2 partitions each), and two it does not: one it
    matches a prefix of, one it matches a suffix of (as an unanchored search would)."""
    prefix = unique("py-rx")
    regex = f"{prefix}-orders-[a-z]+"
    matching = [f"{prefix}-orders-a", f"{prefix}-orders-b"]
    others = [f"{prefix}-orders-a-retry", f"old-{prefix}-orders-a"]
    for t in matching + others:
        lagless.create_topic(bootstrap, t, 2)
    return regex, matching, others


def produce_tracked(bootstrap: str, topics: List[str], n: int) -> Set[Record]:
    """`n` keyed records to each topic; the (topic, partition, offset) of each, as delivered."""
    delivered: List[Tuple[object, object]] = []
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for t in topics:
            for i in range(n):
                p.produce(t, value=f"v{i}".encode(), key=f"k{i}".encode(),
                          on_delivery=lambda err, meta: delivered.append((err, meta)))
        p.flush(30)
    assert [e for e, _ in delivered if e is not None] == []
    written = {meta for _, meta in delivered}
    assert len(written) == n * len(topics)
    return written  # type: ignore[return-value]


def check_reads(reads: "Counter[Record]", written: Set[Record], matching: List[str],
                assigned: Set[Tuple[str, int]]) -> None:
    want = {r for r in written if r[0] in matching}
    twice = {r: k for r, k in reads.items() if k > 1}
    strays = {r for r in reads if r[0] not in matching}
    assert not strays, f"read from topics the regex does not match: {sorted(strays)[:5]}"
    assert set(reads) == want, f"{len(want - set(reads))} not read, {len(set(reads) - want)} unknown"
    assert not twice, f"read more than once: {sorted(twice.items())[:5]}"
    assert assigned == {(t, p) for t in matching for p in (0, 1)}, assigned


def test_blocking_regex_subscription_reads_every_matching_offset_once(bootstrap, consumers):
    regex, matching, others = regex_topics(bootstrap)
    written = produce_tracked(bootstrap, matching + others, PER_TOPIC)
    c = lagless.Consumer(regex_config(bootstrap))
    consumers.append(c)
    assigned: Set[Tuple[str, int]] = set()

    def on_assign(_c, partitions) -> None:
        assigned.update((tp.topic, tp.partition) for tp in partitions)

    def on_revoke(_c, partitions) -> None:
        assigned.difference_update((tp.topic, tp.partition) for tp in partitions)

    c.subscribe_regex(regex, on_assign=on_assign, on_revoke=on_revoke)
    want = {r for r in written if r[0] in matching}
    reads: "Counter[Record]" = Counter()
    deadline = time.monotonic() + 60
    while not want <= set(reads):
        assert time.monotonic() < deadline, f"read {len(set(reads) & want)} of {len(want)}"
        for m in c.consume(500, timeout=0.5):
            reads[(m.topic, m.partition, m.offset)] += 1
    check_reads(reads, written, matching, assigned)
    assert sorted(c.subscription()) == sorted(matching)
    print(f"blocking: read {sum(reads.values())} records of {len(want)} produced to "
          f"{len(matching)} matching topics; {len(written) - len(want)} in non-matching topics unread")


def test_blocking_invalid_regex_fails_poll_naming_it(bootstrap, consumers):
    c = lagless.Consumer(regex_config(bootstrap))
    consumers.append(c)
    c.subscribe_regex("[")  # RE2/J cannot compile it: the coordinator's to refuse
    started = time.monotonic()
    with pytest.raises(lagless.LaglessError) as e:
        while time.monotonic() - started < 30:
            c.poll(0.2)
    took = time.monotonic() - started
    assert e.value.kafka_code == INVALID_REGULAR_EXPRESSION, repr(e.value)
    assert e.value.name == "INVALID_REGULAR_EXPRESSION", repr(e.value)
    assert "`[`" in str(e.value), str(e.value)
    assert took < 30, f"poll() did not fail within 30 s ({took:.1f} s)"
    # Every later poll says it again, until the application subscribes anew.
    with pytest.raises(lagless.LaglessError) as again:
        c.poll(0.1)
    assert again.value.kafka_code == INVALID_REGULAR_EXPRESSION
    print(f"blocking: poll() failed {took:.2f} s after subscribe_regex('['): {e.value}")


def run(coro, limit: float = 90.0):
    """Runs `coro` on a new loop, failing the test after `limit` seconds."""

    async def bounded():
        return await asyncio.wait_for(coro, limit)

    return asyncio.run(bounded())


def test_asyncio_regex_subscription_reads_every_matching_offset_once(bootstrap):
    regex, matching, others = regex_topics(bootstrap)
    written = produce_tracked(bootstrap, matching + others, PER_TOPIC)
    want = {r for r in written if r[0] in matching}
    assigned: Set[Tuple[str, int]] = set()

    async def on_assign(_c, partitions) -> None:  # a coroutine listener
        assigned.update((tp.topic, tp.partition) for tp in partitions)

    async def on_revoke(_c, partitions) -> None:
        assigned.difference_update((tp.topic, tp.partition) for tp in partitions)

    async def main() -> "Counter[Record]":
        reads: "Counter[Record]" = Counter()
        async with lagless.aio.Consumer(regex_config(bootstrap)) as c:
            c.subscribe_regex(regex, on_assign=on_assign, on_revoke=on_revoke)
            deadline = time.monotonic() + 60
            while not want <= set(reads):
                assert time.monotonic() < deadline, f"read {len(set(reads) & want)} of {len(want)}"
                for m in await c.consume(500, timeout=0.5):
                    reads[(m.topic, m.partition, m.offset)] += 1
            assert sorted(c.subscription()) == sorted(matching)
            check_reads(reads, written, matching, assigned)
        return reads

    reads = run(main())
    print(f"asyncio: read {sum(reads.values())} records of {len(want)} produced to "
          f"{len(matching)} matching topics; {len(written) - len(want)} in non-matching topics unread")


def test_asyncio_invalid_regex_fails_consume_naming_it(bootstrap):
    async def main() -> Tuple[lagless.LaglessError, float]:
        async with lagless.aio.Consumer(regex_config(bootstrap)) as c:
            c.subscribe_regex("[")
            started = time.monotonic()
            try:
                while time.monotonic() - started < 30:
                    await c.consume(10, timeout=0.2)
            except lagless.LaglessError as e:
                return e, time.monotonic() - started
            raise AssertionError("consume() did not fail within 30 s")

    e, took = run(main(), limit=60)
    assert e.kafka_code == INVALID_REGULAR_EXPRESSION, repr(e)
    assert e.name == "INVALID_REGULAR_EXPRESSION", repr(e)
    assert "`[`" in str(e), str(e)
    print(f"asyncio: consume() failed {took:.2f} s after subscribe_regex('['): {e}")

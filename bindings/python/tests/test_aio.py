"""lagless.aio against the broker: group membership with a coroutine listener, expiry and
rejoin, cancellation, several clients on one loop, a learner warming up on the loop, an unclosed
consumer, close() inside a listener, per-partition errors.

Plain asyncio: each test runs its coroutine with asyncio.run. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
from typing import Awaitable, Callable, Dict, List, Set, Tuple

import pytest

import lagless
import lagless.aio

from conftest import (
    COMMITTED,
    FRESH,
    LOG_END,
    lowest_undelivered,
    member_config,
    produce,
    taken_over_with_backlog,
)

Offset = Tuple[int, int]  # (partition, offset)


def run(coro, limit: float = 30.0):
    """Runs `coro` on a new loop, failing the test after `limit` seconds."""

    async def bounded():
        return await asyncio.wait_for(coro, limit)

    return asyncio.run(bounded())


async def send_all(
    bootstrap: str, topic: str, n: int, partitions: int, pace: float = 0.0, start: int = 0
) -> None:
    """Records `start`..`n` round-robin over `partitions`, through lagless.aio.Producer; each
    awaited."""
    async with lagless.aio.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2}) as p:
        pending = []
        for i in range(start, n):
            pending.append(asyncio.ensure_future(p.send(topic, value=f"v{i}", key=f"k{i}", partition=i % partitions)))
            if pace and i % 50 == 49:
                await asyncio.sleep(pace)
        delivered = await asyncio.gather(*pending)
        assert len(set(delivered)) == n - start
        await p.flush(10)


def expected(n: int, partitions: int) -> Set[Offset]:
    return {(i % partitions, i // partitions) for i in range(n)}


async def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> Dict[int, int]:
    c = lagless.aio.Consumer(member_config(bootstrap, group))
    try:
        got = await c.committed([lagless.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        await c.close()


def test_aio_group_commit_on_revoke(bootstrap, make_topic, group):
    """Two aio consumers in one group; a coroutine listener commits on revoke. Every offset is
    consumed exactly once, no partition is owned by both at once, the committed offsets are
    the log ends."""
    P, N = 4, 2000
    topic = make_topic(P, prefix="py-aio-group")
    owned: Dict[str, Set[int]] = {"a": set(), "b": set()}
    overlaps: List[str] = []
    seen: List[Offset] = []

    class Listener(lagless.aio.RebalanceListener):
        def __init__(self, name: str) -> None:
            self.name = name

        async def on_partitions_assigned(self, consumer, partitions):
            other = owned["b" if self.name == "a" else "a"]
            for tp in partitions:
                if tp.partition in other:
                    overlaps.append(f"{self.name} got {tp.partition} while the other owns it")
            owned[self.name] |= {tp.partition for tp in partitions}

        async def on_partitions_revoked(self, consumer, partitions):
            await asyncio.sleep(0.01)  # the loop goes on meanwhile
            await consumer.commit()
            owned[self.name] -= {tp.partition for tp in partitions}

    async def member(c: lagless.aio.Consumer, done: asyncio.Event) -> None:
        while not done.is_set():
            for m in await c.consume(200, timeout=0.2):
                seen.append((m.partition, m.offset))

    async def main() -> None:
        done = asyncio.Event()
        a = lagless.aio.Consumer(member_config(bootstrap, group))
        b = lagless.aio.Consumer(member_config(bootstrap, group))
        a.subscribe([topic], Listener("a"))
        await send_all(bootstrap, topic, N // 2, P)
        ta = asyncio.ensure_future(member(a, done))
        deadline = time.monotonic() + 20
        while len(seen) < N // 4:
            assert time.monotonic() < deadline, f"a consumed {len(seen)} records"
            await asyncio.sleep(0.01)
        b.subscribe([topic], Listener("b"))
        tb = asyncio.ensure_future(member(b, done))
        # The second half while the group rebalances and after.
        await send_all(bootstrap, topic, N, P, pace=0.01, start=N // 2)
        while not owned["b"] or len(set(seen)) < N:
            assert time.monotonic() < deadline, (owned, len(set(seen)))
            await asyncio.sleep(0.01)
        done.set()
        await asyncio.gather(ta, tb)
        assert owned["a"] and owned["b"], owned  # both took part
        await a.close()
        await b.close()
        assert not owned["a"] and not owned["b"], owned  # close revoked (and committed) all
        assert await committed_offsets(bootstrap, group, topic, P) == {p: N // P for p in range(P)}

    run(main())
    assert not overlaps, overlaps
    assert set(seen) == expected(N, P)
    assert len(seen) == N, f"{len(seen) - N} duplicates"


def test_aio_slow_handler_is_expired_and_rejoins(bootstrap, make_topic, group):
    """A handler that awaits longer than max.poll.interval.ms: the member is expired
    (on_partitions_lost), rejoins, and goes on; every record is seen at least once."""
    P, N = 2, 400
    topic = make_topic(P, prefix="py-aio-slow")
    produce(bootstrap, topic, N)
    events: List[str] = []

    class Listener(lagless.aio.RebalanceListener):
        async def on_partitions_assigned(self, consumer, partitions):
            events.append("assigned")

        async def on_partitions_lost(self, consumer, partitions):
            events.append("lost")

    async def main() -> Set[Offset]:
        seen: Set[Offset] = set()
        cfg = member_config(bootstrap, group, **{"max.poll.interval.ms": 1500, "max.poll.records": 50})
        async with lagless.aio.Consumer(cfg) as c:
            c.subscribe([topic], Listener())
            slow_done = False
            deadline = time.monotonic() + 25
            while len(seen) < N:
                assert time.monotonic() < deadline, (len(seen), events)
                msgs = await c.consume(50, timeout=0.5)
                seen |= {(m.partition, m.offset) for m in msgs}
                if msgs and not slow_done:
                    slow_done = True
                    await asyncio.sleep(3.0)  # the slow handler: twice max.poll.interval.ms
        return seen

    seen = run(main())
    assert len(seen) == N  # N distinct offsets: every record
    assert "lost" in events, events
    assert events.index("lost") < len(events) - 1 and events[events.index("lost") + 1] == "assigned", events


async def check_commit_stops_at_handed_out(c: lagless.aio.Consumer, got: List[Offset]) -> None:
    """What commit() without offsets commits stops at what was handed out (`got`), held records
    or not; so does position(), the next offset a consume() hands out."""
    done = await c.commit()
    assert done is not None
    for tp in done:
        handed = [o for p, o in got if p == tp.partition]
        if handed:
            assert tp.offset == max(handed) + 1, (tp, max(handed))
    for tp in await c.position(done):
        handed = [o for p, o in got if p == tp.partition]
        if handed:
            assert tp.offset == max(handed) + 1, ("position", tp, max(handed))


async def read_while_cancelling(
    c: lagless.aio.Consumer,
    producer: "asyncio.Future[None]",
    n: int,
    got: List[Offset],
    take: Callable[[], Awaitable[List[Offset]]],
    on_cancelled: Callable[[int], Awaitable[bool]],
) -> Tuple[int, int]:
    """Reads into `got` until it holds `n` offsets (or the producer is done and nothing came for
    3 s), each `take()` (a consume call returning the offsets it read) under a wait_for of
    0.5-3 ms, so that many are cancelled. After a cancellation it waits until the cancelled
    native call returned and asks `on_cancelled(cancellations so far)` whether records were left
    held. Returns (cancellations, those with records held)."""
    cancelled = held = 0
    deadline = time.monotonic() + 30
    last_new = time.monotonic()
    i = 0
    while len(got) < n:
        assert time.monotonic() < deadline, f"got {len(got)} of {n}, {cancelled} cancelled"
        if producer.done() and time.monotonic() - last_new > 3:
            break  # nothing more comes: the caller's assertions say what is missing
        i += 1
        try:
            offsets = await asyncio.wait_for(take(), 0.0005 * (1 + i % 6))
        except asyncio.TimeoutError:
            cancelled += 1
            await asyncio.wait_for(c._idle.wait(), 5)
            held += await on_cancelled(cancelled)
            continue
        if offsets:
            last_new = time.monotonic()
        got.extend(offsets)
    return cancelled, held


def test_aio_cancelled_consume_loses_nothing(bootstrap, make_topic, group):
    """consume() cancelled by wait_for over and over while records flow: every offset comes
    exactly once, and commit() without offsets never passes a record not handed out."""
    P, N = 3, 3000
    topic = make_topic(P, prefix="py-aio-cancel")

    async def main() -> Tuple[List[Offset], int, int, Dict[int, int]]:
        got: List[Offset] = []
        async with lagless.aio.Consumer(member_config(bootstrap, group, **{"max.poll.records": 100})) as c:
            c.subscribe([topic])
            producer = asyncio.ensure_future(send_all(bootstrap, topic, N, P, pace=0.03))

            async def take() -> List[Offset]:
                return [(m.partition, m.offset) for m in await c.consume(7, None)]

            async def on_cancelled(cancelled: int) -> bool:
                # The worker got records for the cancelled call (they may come after the
                # cancellation): held for the next consume().
                has_held = bool(c._held)
                if has_held or cancelled % 25 == 0:
                    await check_commit_stops_at_handed_out(c, got)
                return has_held

            cancelled, held = await read_while_cancelling(c, producer, N, got, take, on_cancelled)
            await producer
            await c.commit()
        return got, cancelled, held, await committed_offsets(bootstrap, group, topic, P)

    got, cancelled, held, committed = run(main(), 40)
    print(f"{cancelled} consume() calls cancelled, {held} of them with records held")
    assert cancelled >= 50, f"only {cancelled} cancellations"
    assert held >= 1, "no cancelled consume() had records: the test did not test"
    assert len(got) == N, f"{len(got) - N} duplicates"
    assert set(got) == expected(N, P)
    assert committed == {p: N // P for p in range(P)}


def batch_offsets(batch: lagless.MessageBatch) -> List[Offset]:
    """The (partition, offset) of each record of `batch`, from its columns."""
    return list(zip(batch.partitions, batch.offsets))


def test_aio_consume_batch_cancelled_loses_nothing(bootstrap, make_topic, group):
    """consume_batch() cancelled by wait_for over and over while records flow: every offset comes
    exactly once; a batch got for a cancelled call comes from the next consume_batch(), and
    until then consume() refuses (it would hand records out of order) while commit() without
    offsets and position() stop before it. The batches import into pyarrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    P, N = 3, 3000
    topic = make_topic(P, prefix="py-aio-batch-cancel")

    async def main() -> Tuple[List[Offset], int, int, int, Dict[int, int]]:
        got: List[Offset] = []
        value_bytes = 0
        async with lagless.aio.Consumer(member_config(bootstrap, group, **{"max.poll.records": 100})) as c:
            c.subscribe([topic])
            producer = asyncio.ensure_future(send_all(bootstrap, topic, N, P, pace=0.03))

            async def take() -> List[Offset]:
                nonlocal value_bytes
                batch = await c.consume_batch(7, None)
                if len(batch):
                    value_bytes += pc.sum(pc.binary_length(pa.record_batch(batch).column("value"))).as_py()
                return batch_offsets(batch)

            async def on_cancelled(cancelled: int) -> bool:
                if c._held_batch is None:
                    return False
                with pytest.raises(lagless.IllegalStateError, match="consume_batch"):
                    await c.consume(1, 0)
                await check_commit_stops_at_handed_out(c, got)
                return True

            cancelled, held = await read_while_cancelling(c, producer, N, got, take, on_cancelled)
            await producer
            await c.commit()
        return got, cancelled, held, value_bytes, await committed_offsets(bootstrap, group, topic, P)

    got, cancelled, held, value_bytes, committed = run(main(), 40)
    print(f"{cancelled} consume_batch() calls cancelled, {held} of them with a batch held")
    assert cancelled >= 50, f"only {cancelled} cancellations"
    assert held >= 1, "no cancelled consume_batch() had records: the test did not test"
    assert len(got) == N, f"{len(got) - N} duplicates"
    assert set(got) == expected(N, P)
    assert value_bytes == sum(len(f"v{i}") for i in range(N))
    assert committed == {p: N // P for p in range(P)}


def test_aio_consume_batch_of_assigned_partitions_and_a_held_consume(bootstrap, make_topic):
    """consume_batch() without a group (assign): the batches hold every record once. Records
    held by a cancelled consume() must be taken with consume() first: consume_batch() says so."""
    P, N = 2, 400
    topic = make_topic(P, prefix="py-aio-batch-assign")

    async def main() -> List[Offset]:
        await send_all(bootstrap, topic, N, P)
        got: List[Offset] = []
        async with lagless.aio.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
            c.assign([lagless.TopicPartition(topic, p, 0) for p in range(P)])
            deadline = time.monotonic() + 20
            while len(got) < N // 2:
                assert time.monotonic() < deadline, f"got {len(got)} of {N}"
                got.extend(batch_offsets(await c.consume_batch(50, 1.0)))
            # Hold records as a cancelled consume() would leave them.
            c._held.extend(await c.consume(5, 5.0))
            assert c._held
            with pytest.raises(lagless.IllegalStateError, match="consume\\(\\) first"):
                await c.consume_batch(50, 0)
            while c._held:
                got.extend((m.partition, m.offset) for m in await c.consume(3, 0))
            while len(got) < N:
                assert time.monotonic() < deadline, f"got {len(got)} of {N}"
                got.extend(batch_offsets(await c.consume_batch(50, 1.0)))
            empty = await c.consume_batch(50, 0.2)
            assert len(empty) == 0
        return got

    got = run(main(), 40)
    assert len(got) == N, f"{len(got) - N} duplicates"
    assert set(got) == expected(N, P)


def test_aio_two_consumers_and_a_producer_on_one_loop(bootstrap, make_topic):
    """One asyncio app: a producer and two consumers (of two groups) on one loop; each consumer
    reads every record once (`async for`)."""
    P, N = 2, 1000
    topic = make_topic(P, prefix="py-aio-app")

    async def reader(group: str) -> List[Offset]:
        out: List[Offset] = []
        async with lagless.aio.Consumer(member_config(bootstrap, group)) as c:
            c.subscribe([topic])
            it = c.__aiter__()
            while len(out) < N:
                try:
                    m = await asyncio.wait_for(it.__anext__(), 5.0)
                except asyncio.TimeoutError:
                    break  # nothing came for 5 s: the assertions below say what is missing
                out.append((m.partition, m.offset))
        return out

    async def main():
        return await asyncio.gather(
            reader(f"{topic}-g1"), reader(f"{topic}-g2"), send_all(bootstrap, topic, N, P, pace=0.005)
        )

    one, two, _ = run(main())
    for got in (one, two):
        assert set(got) == expected(N, P), f"{len(expected(N, P) - set(got))} missing"
        assert len(got) == N


def test_aio_learner_warms_up_on_the_loop(bootstrap, make_topic, group):
    """learner-sticky group: a coroutine on_partitions_learning awaits a 2 s warm-up while a
    ticker task on the same loop measures how late it wakes; then the partitions move."""
    P = 4
    topic = make_topic(P, prefix="py-aio-learn")
    produce(bootstrap, topic, 200)
    strategy = {"partition.assignment.strategy": "learner-sticky,cooperative-sticky"}
    warmups: List[float] = []
    lateness: List[float] = []

    class Learner(lagless.aio.RebalanceListener):
        def __init__(self) -> None:
            self.owned: Set[int] = set()

        async def on_partitions_assigned(self, consumer, partitions):
            self.owned |= {tp.partition for tp in partitions}

        async def on_partitions_revoked(self, consumer, partitions):
            await consumer.commit()
            self.owned -= {tp.partition for tp in partitions}

        async def on_partitions_learning(self, consumer, partitions):
            start = time.monotonic()
            await asyncio.sleep(2.0)  # the warm-up
            warmups.append(time.monotonic() - start)

    async def ticker(stop: asyncio.Event) -> None:
        period = 0.01
        while not stop.is_set():
            t = time.monotonic()
            await asyncio.sleep(period)
            lateness.append(time.monotonic() - t - period)

    async def drive(c: lagless.aio.Consumer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await c.consume(100, timeout=0.1)

    async def main() -> None:
        la, lb = Learner(), Learner()
        async with lagless.aio.Consumer(member_config(bootstrap, group, **strategy)) as a, lagless.aio.Consumer(
            member_config(bootstrap, group, **strategy)
        ) as b:
            a.subscribe([topic], la)
            stop = asyncio.Event()
            ta = asyncio.ensure_future(drive(a, stop))
            deadline = time.monotonic() + 15
            while la.owned != set(range(P)):
                assert time.monotonic() < deadline, la.owned
                await asyncio.sleep(0.05)
            b.subscribe([topic], lb)
            tick = asyncio.ensure_future(ticker(stop))
            tb = asyncio.ensure_future(drive(b, stop))
            deadline = time.monotonic() + 20
            while not lb.owned:
                assert time.monotonic() < deadline, (la.owned, lb.owned, warmups)
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(ta, tb, tick)
            assert la.owned.isdisjoint(lb.owned) and la.owned | lb.owned == set(range(P))

    run(main())
    assert warmups and all(w >= 1.9 for w in warmups), warmups
    worst = max(lateness)
    print(f"ticker lateness during the warm-up: max {worst * 1000:.1f} ms over {len(lateness)} ticks")
    assert worst < 0.2, f"the loop was blocked {worst * 1000:.0f} ms"


def aio_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lagless-aio-consumer"]


def test_aio_unclosed_consumer_is_collected_and_leaves(bootstrap, make_topic, group):
    """An aio consumer dropped without close(): its worker thread ends and it leaves the group
    at once (another member gets every partition well before the 30 s session and rebalance
    timeouts); an interpreter exiting with one open does not hang."""
    P = 2
    topic = make_topic(P, prefix="py-aio-gc")
    produce(bootstrap, topic, 10)
    slow = {"session.timeout.ms": 30000, "max.poll.interval.ms": 30000, "heartbeat.interval.ms": 1000}

    class Holder(lagless.aio.RebalanceListener):
        def __init__(self, consumer) -> None:
            self.consumer = consumer  # a cycle through the listener
            self.assigned: Set[int] = set()

        async def on_partitions_assigned(self, consumer, partitions):
            self.assigned |= {tp.partition for tp in partitions}

    async def main() -> None:
        before = len(aio_threads())
        c = lagless.aio.Consumer(member_config(bootstrap, group, **slow))
        holder = Holder(c)
        c.subscribe([topic], holder)
        deadline = time.monotonic() + 15
        while not holder.assigned:
            assert time.monotonic() < deadline
            await c.consume(10, timeout=0.2)
        assert len(aio_threads()) == before + 1
        del c, holder
        gc.collect()
        deadline = time.monotonic() + 10
        while len(aio_threads()) > before:
            assert time.monotonic() < deadline, "the worker thread of a collected consumer runs on"
            await asyncio.sleep(0.05)
        other = Holder(None)
        async with lagless.aio.Consumer(member_config(bootstrap, group, **slow)) as d:
            d.subscribe([topic], other)
            deadline = time.monotonic() + 12
            while other.assigned != set(range(P)):
                assert time.monotonic() < deadline, "the collected consumer did not leave the group"
                await d.consume(10, timeout=0.2)

    run(main())

    script = f"""
import asyncio, lagless.aio
async def main():
    c = lagless.aio.Consumer({member_config(bootstrap, group + '-exit', **slow)!r})
    c.subscribe([{topic!r}])
    await c.consume(5, timeout=5)
    asyncio.ensure_future(c.consume(5, None))  # pending at exit
    await asyncio.sleep(0.1)
    global keep
    keep = c
asyncio.run(main())
print("done")
"""
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "done" in out.stdout, out.stderr
    assert time.monotonic() - start < 20

    async def after_exit() -> None:
        # The exited process left the group: a new member gets everything at once.
        other = Holder(None)
        async with lagless.aio.Consumer(member_config(bootstrap, group + "-exit", **slow)) as d:
            d.subscribe([topic], other)
            deadline = time.monotonic() + 12
            while other.assigned != set(range(P)):
                assert time.monotonic() < deadline, "the consumer open at exit did not leave the group"
                await d.consume(10, timeout=0.2)

    run(after_exit())


def test_aio_close_inside_listener_fails_clearly(bootstrap, make_topic, group):
    """close() (and consume()) awaited inside a listener callback raise IllegalStateError there
    (it comes out of consume()), instead of waiting for themselves; the consumer closes normally
    afterwards."""
    topic = make_topic(1, prefix="py-aio-close")
    produce(bootstrap, topic, 5)
    raised: List[BaseException] = []

    class Closer(lagless.aio.RebalanceListener):
        async def on_partitions_assigned(self, consumer, partitions):
            with pytest.raises(lagless.IllegalStateError, match="inside a rebalance listener"):
                await consumer.consume(1, 0)  # a consume() runs this callback already
            try:
                await consumer.close()
            except lagless.IllegalStateError as e:
                raised.append(e)
                raise

    async def main() -> None:
        c = lagless.aio.Consumer(member_config(bootstrap, group))
        c.subscribe([topic], Closer())
        deadline = time.monotonic() + 15
        with pytest.raises(lagless.IllegalStateError, match="inside a rebalance listener"):
            while True:
                assert time.monotonic() < deadline, "the listener never ran"
                await c.consume(5, timeout=0.2)
        got: List[lagless.Message] = []
        while len(got) < 5:
            assert time.monotonic() < deadline
            got += await c.consume(5, timeout=0.2)
        await asyncio.wait_for(c.close(), 10)
        with pytest.raises(lagless.ClosedError):
            await c.consume(1, 0)

    run(main())
    assert len(raised) == 1


def test_aio_partition_error_is_raised_from_consume(bootstrap, make_topic, group):
    """A partition without a committed offset and auto.offset.reset=none: consume() raises the
    core's NoOffsetError, as the blocking consume() does: for a group member (the worker thread's
    consume) and for a manual assignment (buffered records taken on the loop)."""
    topic = make_topic(1, prefix="py-aio-err")
    produce(bootstrap, topic, 3)

    async def main(subscribe: bool) -> None:
        cfg = member_config(bootstrap, f"{group}-{subscribe}", **{"auto.offset.reset": "none"})
        async with lagless.aio.Consumer(cfg) as c:
            if subscribe:
                c.subscribe([topic])
            else:
                c.assign([lagless.TopicPartition(topic, 0)])
            with pytest.raises(lagless.NoOffsetError):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    await c.consume(5, timeout=0.5)

    run(main(True))
    run(main(False))


def test_aio_recovery_stream_with_cancellations(bootstrap, make_topic, group):
    """KIP-333 through lagless.aio: a partition taken over with a backlog drains it in a
    recovery stream (records flagged) while the main stream goes on; consume() is cancelled now
    and then. Every offset from the committed one on comes exactly once, and a commit without
    offsets stops at the lowest offset not handed out."""
    topic = taken_over_with_backlog(bootstrap, make_topic, group)
    tp = lagless.TopicPartition(topic, 0)
    cfg = member_config(bootstrap, group, recovery=True)

    async def main() -> Tuple[List[int], int, int, int]:
        delivered: List[int] = []
        seen_active = False
        cancelled = commits = held = 0
        async with lagless.aio.Consumer(cfg) as c:
            c.subscribe([topic])
            deadline = time.monotonic() + 30
            i = 0
            while len(set(delivered)) < LOG_END + FRESH - COMMITTED:
                assert time.monotonic() < deadline, f"{len(delivered)} records"
                i += 1
                has_held = False
                try:
                    msgs = await asyncio.wait_for(c.consume(5, 0.2), 0.0001 * (i % 4) if i % 2 else 1.0)
                except asyncio.TimeoutError:
                    cancelled += 1
                    has_held = bool(c._held)
                    held += has_held
                    msgs = []
                for m in msgs:
                    assert m.from_recovery == (m.offset < LOG_END), m.offset
                    delivered.append(m.offset)
                if not seen_active and c.assignment() and c.recovery_active(tp):
                    seen_active = True
                    # The takeover saw the log end at LOG_END: what comes from here on is fresh.
                    produce(bootstrap, topic, FRESH, partition=0, prefix="fresh")
                # committed() takes the core about 0.5 s: a dozen checks, mostly with records held.
                if delivered and commits < 12 and (i % 25 == 0 or (not msgs and has_held)):
                    await c.commit()
                    got = (await c.committed([tp], timeout=10))[0].offset
                    assert got == lowest_undelivered(set(delivered)), "the low-water mark"
                    commits += 1
            assert seen_active
            await c.commit()
            final = (await c.committed([tp], timeout=10))[0].offset
        return delivered, cancelled, held, final

    delivered, cancelled, held, final = run(main())
    print(f"{cancelled} consume() calls cancelled, {held} with records held")
    # How many calls a timeout cancels depends on how fast records arrive (a call that finds
    # records held returns before any timeout): enough to have exercised cancellation.
    assert cancelled >= 5 and held >= 1, (cancelled, held)
    assert len(delivered) == len(set(delivered)), "a record came twice"
    assert set(delivered) == set(range(COMMITTED, LOG_END + FRESH))
    assert final == LOG_END + FRESH


def test_aio_producer_full_buffer_does_not_block_the_loop(bootstrap, make_topic):
    """A buffer.memory far smaller than what is sent: send() waits for room off the loop (a
    ticker on the loop stays on time), every record is delivered, and a record the native
    producer refuses raises from its send()."""
    topic = make_topic(2, prefix="py-aio-full")
    N = 10000
    lateness: List[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            t = time.monotonic()
            await asyncio.sleep(0.005)
            lateness.append(time.monotonic() - t - 0.005)

    async def main() -> List[Tuple[int, int]]:
        cfg = {"bootstrap.servers": bootstrap, "buffer.memory": 32768, "batch.size": 8192, "linger.ms": 5}
        async with lagless.aio.Producer(cfg) as p:
            stop = asyncio.Event()
            tick = asyncio.ensure_future(ticker(stop))
            value = b"x" * 1000
            delivered = await asyncio.gather(*(p.send(topic, value=value, partition=i % 2) for i in range(N)))
            with pytest.raises(lagless.InvalidArgumentError):
                await p.send(topic, value=b"x", partition=7)
            stop.set()
            await tick
            return delivered

    delivered = run(main())
    assert sorted(delivered) == sorted((p, o) for p in range(2) for o in range(N // 2))
    worst = max(lateness)
    print(f"ticker lateness while the buffer was full: max {worst * 1000:.1f} ms over {len(lateness)} ticks")
    assert worst < 0.2, f"the loop was blocked {worst * 1000:.0f} ms"


def test_aio_metrics_and_prometheus_count_what_consume_returned(bootstrap, make_topic):
    """lagless.aio.Consumer has the blocking consumer's snapshot: after 30 records of one
    partition read with consume(), its position and records consumed are 30 in metrics() and in
    the Prometheus text, and lagless.prometheus.ConsumerCollector takes it."""
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry
    from lagless.prometheus import ConsumerCollector

    N = 30
    topic = make_topic(1, prefix="py-aio-metrics")

    async def main():
        await send_all(bootstrap, topic, N, 1)
        async with lagless.aio.Consumer({"bootstrap.servers": bootstrap, "client.id": "aio-metrics"}) as c:
            c.assign([lagless.TopicPartition(topic, 0, 0)])
            got = 0
            deadline = time.monotonic() + 20
            while got < N:
                assert time.monotonic() < deadline, f"got {got} of {N}"
                got += len(await c.consume(10, 1.0))
            assert got == N
            registry = CollectorRegistry()
            registry.register(ConsumerCollector(c))
            labels = {"client_id": "aio-metrics", "topic": topic, "partition": "0"}
            scraped = registry.get_sample_value("lagless_consumer_position", labels)
            return c.metrics(), c.metrics_prometheus(), scraped

    m, text, scraped = run(main(), 40)
    (p,) = [p for p in m["partitions"] if p["topic"] == topic]
    assert (p["position"], p["records_consumed"], p["consumer_lag"]) == (N, N, 0), p
    assert m["records_consumed_total"] == N, m
    assert scraped == N
    assert f'lagless_consumer_position{{client_id="aio-metrics",topic="{topic}",partition="0"}} {N}' in text, text

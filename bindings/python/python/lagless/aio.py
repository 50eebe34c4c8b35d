"""asyncio front of lagless: :class:`Consumer` and :class:`Producer` for asyncio applications.

>>> import lagless.aio
>>> async def main() -> None:
...     async with lagless.aio.Consumer({"bootstrap.servers": "localhost:9092", "group.id": "g"}) as c:
...         c.subscribe(["orders"])
...         async for msg in c:
...             print(msg.offset, msg.value)

How it works:

- Each consumer has one worker thread that runs the blocking native ``consume()`` (the GIL
  released while it waits) only while an ``await consume()`` asks for records; it completes the
  awaiting future through ``loop.call_soon_threadsafe``. No busy polling, no thread per message.
- The rebalance listener runs inside ``await consume()`` (and ``close()``, ``unsubscribe()``),
  in order: the worker hands each callback to the event loop and waits for it, so a coroutine
  listener may ``await consumer.commit()`` in ``on_partitions_revoked`` (the commit then runs on
  the worker thread, as in the blocking API) and ``on_partitions_learning`` may await a warm-up
  while the loop serves other tasks. Plain functions work too; they run on the event loop.
- A cancelled ``consume()`` loses nothing: the worker is woken (``wakeup()``), and records it
  got anyway are held and returned first by the next ``consume()`` (a cancelled
  ``consume_batch()``'s batch, by the next ``consume_batch()``). Held records count as not
  consumed: ``commit()`` without offsets, ``position()`` and ``close()`` stop before them.
- A per-partition error of the native ``consume()`` is raised from ``await consume()``.
- An unclosed consumer that is garbage collected stops its worker thread and leaves its group;
  the worker threads of consumers still open at interpreter exit are stopped as well.

The :class:`Producer`'s ``await send()`` returns when the record is delivered: the native
producer writes a byte to a socket the event loop watches when delivery reports are due, and the
loop completes the futures. Records go to the native producer on a thread of the producer's
own, so a full ``buffer.memory`` never blocks the loop.
Its transactional calls (``init_transactions()``, ``begin_transaction()``,
``send_offsets_to_transaction()`` with ``Consumer.consumer_group_metadata()``,
``commit_transaction()``, ``abort_transaction()``) are coroutines: the blocking native calls run
on the loop's default executor once every ``send()`` before them reached the native producer.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import inspect
import queue
import socket
import threading
import time
import weakref
from types import TracebackType
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from . import _lagless
from ._errors import ClosedError, ConfigError, IllegalStateError, LaglessError, WakeupError
from ._lagless import ConsumerGroupMetadata, Message, MessageBatch, TopicPartition
from ._listener import RebalanceListener as _BlockingListener

__all__ = ["Consumer", "Producer", "RebalanceListener"]

T = TypeVar("T")
_PartitionsCallback = Callable[["Consumer", List[TopicPartition]], Any]
_Payload = Union[bytes, bytearray, str, None]
_Headers = Union[Iterable[Tuple[str, _Payload]], Mapping[str, _Payload]]


class RebalanceListener:
    """Told when the consumer's assignment changes; subclass it and override what you need.

    Each method may be a coroutine (``async def``) or a plain function. It runs on the event
    loop inside the ``await consume()`` (or ``close()``, ``unsubscribe()``) that brought the
    change, in order; the consumer waits for it before it goes on, so committing in
    ``on_partitions_revoked`` works as in the blocking API. An exception raised here does not
    stop the assignment change; it is raised from that ``consume()`` once the change is done.
    """

    def on_partitions_assigned(
        self, consumer: "Consumer", partitions: List[TopicPartition]
    ) -> Optional[Awaitable[None]]:
        """Partitions newly given to this member (called once per rebalance, possibly empty)."""
        return None

    def on_partitions_revoked(
        self, consumer: "Consumer", partitions: List[TopicPartition]
    ) -> Optional[Awaitable[None]]:
        """Partitions this member gives up; commit their offsets here if you commit by hand."""
        return None

    def on_partitions_learning(
        self, consumer: "Consumer", partitions: List[TopicPartition]
    ) -> Optional[Awaitable[None]]:
        """Learner assignments: partitions this member will own once ready. A coroutine may
        await its warm-up here; the loop serves other tasks meanwhile (see
        :meth:`lagless.RebalanceListener.on_partitions_learning`)."""
        return None

    def on_partitions_lost(
        self, consumer: "Consumer", partitions: List[TopicPartition]
    ) -> Optional[Awaitable[None]]:
        """Partitions that may already belong to another member; calls
        ``on_partitions_revoked`` unless overridden, as the Java client does."""
        return self.on_partitions_revoked(consumer, partitions)


_STOP = object()


class _CallbackDone:
    __slots__ = ("task",)

    def __init__(self, task: "asyncio.Future[Any]") -> None:
        self.task = task


class _Job:
    """A call to run on the worker thread; its outcome completes `fut` on `loop`."""

    __slots__ = ("fn", "loop", "fut", "abandoned")

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop, fut: "asyncio.Future[Any]") -> None:
        self.fn = fn
        self.loop = loop
        self.fut = fut
        # Set (on the loop) when the awaiting coroutine was cancelled: a wakeup of ours may
        # end the native call, and its outcome is held instead of returned.
        self.abandoned = False

    def run(self) -> None:
        try:
            result, error = self.fn(), None
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine)
            result, error = None, e
        try:
            self.loop.call_soon_threadsafe(_settle, self.fut, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more


def _settle(fut: "asyncio.Future[Any]", result: Any, error: Optional[BaseException]) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class _Worker:
    """The thread that owns a consumer's blocking native calls that wait (consume, close) and
    the listener callbacks those make. References the Python consumer only weakly."""

    def __init__(self, native: _lagless.Consumer) -> None:
        self.native: Optional[_lagless.Consumer] = native
        self.jobs: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        # While a listener callback runs on the loop, the worker serves calls from this queue
        # (a commit inside on_partitions_revoked runs here, on the thread inside consume()).
        self.callback_jobs: "Optional[queue.SimpleQueue[Any]]" = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        # The task running the current listener callback (on the loop).
        self.callback_task: "Optional[asyncio.Task[Any]]" = None
        self.stopped = False
        # close() is under way: a consume() still waiting ends with ClosedError.
        self.closing = False
        # A wakeup() made for a cancelled consume() that no native call has taken yet.
        self.own_wakeup = False
        self.thread = threading.Thread(target=self._run, name="lagless-aio-consumer", daemon=True)
        self.thread.start()
        _workers.add(self)

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is _STOP:
                break
            job.run()
        native, self.native = self.native, None
        if native is not None:
            # Not closed by the application (garbage collected, or the interpreter exits):
            # leave the group now. The listener is not called (its consumer is gone).
            try:
                native.close(timeout=5.0)
            except BaseException:  # noqa: BLE001
                pass
        del native

    def submit(self, job: _Job) -> None:
        if self.stopped:
            raise ClosedError("the consumer is closed", name="CLOSED")
        self.jobs.put(job)

    def stop(self) -> None:
        """Ends the thread after the job it runs (any thread; idempotent)."""
        if self.stopped:
            return
        self.stopped = True
        native = self.native
        if native is not None:
            try:
                native.wakeup()
            except BaseException:  # noqa: BLE001
                pass
        cb = self.callback_jobs
        if cb is not None:
            cb.put(_STOP)
        self.jobs.put(_STOP)

    def in_callback(self) -> bool:
        return self.callback_jobs is not None

    def run_callback(self, fn: Callable[..., Any], args: Tuple[Any, ...]) -> None:
        """On the worker thread, inside a native call: runs `fn(*args)` on the event loop (and
        awaits it there if it returns an awaitable), serving calls meanwhile; re-raises."""
        loop = self.loop
        if loop is None or loop.is_closed() or self.stopped:
            return
        done: "queue.SimpleQueue[Any]" = queue.SimpleQueue()

        async def call() -> None:
            self.callback_task = asyncio.current_task()
            r = fn(*args)
            if inspect.isawaitable(r):
                await r

        def start() -> None:
            task = loop.create_task(call())
            task.add_done_callback(lambda t: done.put(_CallbackDone(t)))

        self.callback_jobs = done
        try:
            loop.call_soon_threadsafe(start)
            while True:
                item = done.get()
                if isinstance(item, _CallbackDone):
                    task = item.task
                    break
                if item is _STOP:
                    # Stopping while a callback runs: do not wait for it.
                    raise ClosedError("the consumer is being stopped", name="CLOSED")
                item.run()
        except RuntimeError:
            return  # the loop was closed
        finally:
            self.callback_jobs = None
            self.callback_task = None
        if task.cancelled():
            raise asyncio.CancelledError()
        exc = task.exception()
        if exc is not None:
            raise exc


_workers: "weakref.WeakSet[_Worker]" = weakref.WeakSet()


def _stop_workers() -> None:
    workers = list(_workers)
    for w in workers:
        w.stop()
    for w in workers:
        w.thread.join(timeout=10.0)


atexit.register(_stop_workers)


class _Bridge:
    """The listener the native consumer calls (on the worker thread): forwards each event to
    the application's listener and callables on the event loop, with the aio consumer."""

    def __init__(self, worker: _Worker, consumer: "Consumer") -> None:
        # The consumer weakly and the listener through it: the worker thread keeps the native
        # consumer (and this) alive, and must not keep the application's consumer alive.
        self._worker = worker
        self._consumer = weakref.ref(consumer)

    def _forward(self, method: Optional[str], which: int, partitions: List[TopicPartition]) -> None:
        consumer = self._consumer()
        if consumer is None:
            return
        listener, on_assign, on_revoke, on_lost = consumer._callbacks
        callable_ = (on_assign, on_revoke, on_lost or on_revoke, None)[which]
        fn: Optional[Callable[..., Any]] = None
        if listener is not None and method is not None:
            if method == "on_partitions_lost" and (
                type(listener).on_partitions_lost is _BlockingListener.on_partitions_lost
            ):
                # The blocking base class calls on_partitions_revoked and drops what it returns.
                method = "on_partitions_revoked"
            fn = getattr(listener, method, None)
        for f in (fn, callable_):
            if f is not None:
                self._worker.run_callback(f, (consumer, partitions))

    def on_partitions_assigned(self, _native: Any, partitions: List[TopicPartition]) -> None:
        self._forward("on_partitions_assigned", 0, partitions)

    def on_partitions_revoked(self, _native: Any, partitions: List[TopicPartition]) -> None:
        self._forward("on_partitions_revoked", 1, partitions)

    def on_partitions_lost(self, _native: Any, partitions: List[TopicPartition]) -> None:
        self._forward("on_partitions_lost", 2, partitions)

    def on_partitions_learning(self, _native: Any, partitions: List[TopicPartition]) -> None:
        self._forward("on_partitions_learning", 3, partitions)


def _key(topic: str, partition: int) -> Tuple[str, int]:
    return (topic, partition)


def _batch_starts(batch: MessageBatch) -> Dict[Tuple[str, int], Tuple[int, bool]]:
    """The lowest offset of each partition in `batch`, and whether that record is a recovery
    stream's."""
    names = batch.topic_names
    topic_ids, partitions, offsets = batch.topic_ids, batch.partitions, batch.offsets
    recovery_bits = batch.from_recovery
    first: Dict[Tuple[str, int], Tuple[int, bool]] = {}
    for i in range(len(batch)):
        k = (names[topic_ids[i]], partitions[i])
        o = offsets[i]
        f = first.get(k)
        if f is None or o < f[0]:
            first[k] = (o, bool(recovery_bits[i // 8] >> (i % 8) & 1))
    return first


class Consumer:
    """A Kafka consumer for asyncio; the configuration and semantics of :class:`lagless.Consumer`.

    Use it from one event loop. Methods that wait for the network are coroutines; the others
    (subscribe, assign, seek, pause, resume, ...) return at once as in the blocking API.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        # consume() is the only way records come out here: with the recovery records kept for
        # recovery_poll() they would never come out at all.
        v = config.get("parallel.rebalance.recovery.poll", False)
        if v is True or (isinstance(v, str) and v.strip().lower() == "true"):
            raise ConfigError(
                "the async consumer delivers recovery records through consume(); "
                "`parallel.rebalance.recovery.poll` is for the blocking Consumer.recovery_poll()",
                code=1,
                name="CONFIG",
                key="parallel.rebalance.recovery.poll",
            )
        self._native = _lagless.Consumer(config)
        self._worker = _Worker(self._native)
        self._held: Deque[Message] = collections.deque()
        # The batch of a cancelled consume_batch(): the next consume_batch() returns it.
        self._held_batch: Optional[MessageBatch] = None
        self._held_error: Optional[BaseException] = None
        self._idle: Optional[asyncio.Event] = None
        self._closing = False
        self._closed = False
        self._subscribed = False
        self._callbacks: Tuple[Any, Optional[_PartitionsCallback], Optional[_PartitionsCallback], Optional[_PartitionsCallback]] = (None, None, None, None)
        self._finalizer = weakref.finalize(self, self._worker.stop)

    # -- plumbing ---------------------------------------------------------------------------

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        w = self._worker
        if w.loop is None or w.loop.is_closed():
            w.loop = loop
            self._idle = asyncio.Event()
            self._idle.set()
        elif w.loop is not loop:
            raise IllegalStateError("this consumer is used from another event loop", name="ILLEGAL_STATE")
        return loop

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the consumer is closed", name="CLOSED")

    async def _call(self, fn: Callable[[], T]) -> T:
        """Runs a native call that may wait, off the loop: on the worker thread while it is
        inside a listener callback (so a commit in on_partitions_revoked acts where the
        blocking API's would), else on the loop's default executor."""
        loop = self._bind_loop()
        cb = self._worker.callback_jobs
        if cb is not None:
            fut: "asyncio.Future[T]" = loop.create_future()
            cb.put(_Job(fn, loop, fut))
            return await fut
        return await loop.run_in_executor(None, fn)

    def _in_own_callback(self) -> bool:
        """Whether the calling task is this consumer's listener callback (other tasks may call
        in while one runs: they wait for the consume() that runs it)."""
        w = self._worker
        task = w.callback_task
        return task is not None and asyncio.current_task() is task

    def _drop_held(self, partitions: Iterable[TopicPartition]) -> None:
        keys = {_key(tp.topic, tp.partition) for tp in partitions}
        if self._held and keys:
            self._held = collections.deque(m for m in self._held if _key(m.topic, m.partition) not in keys)
        if self._held_batch is not None and keys & set(_batch_starts(self._held_batch)):
            # A batch cannot lose some of its rows: the other partitions go back to its first
            # records, and the whole batch is dropped.
            self._rewind_batch(skip=keys)

    def _held_starts(self) -> Dict[Tuple[str, int], Tuple[int, bool]]:
        """The lowest held offset of each partition, and whether that record is a recovery
        stream's (a recovery stream's and the main stream's records may be held together)."""
        first: Dict[Tuple[str, int], Tuple[int, bool]] = {}
        for m in self._held:
            k = _key(m.topic, m.partition)
            f = first.get(k)
            if f is None or m.offset < f[0]:
                first[k] = (m.offset, m.from_recovery)
        if self._held_batch is not None:
            first.update(_batch_starts(self._held_batch))
        return first

    def _rewind_batch(self, skip: Iterable[Tuple[str, int]] = ()) -> None:
        """Moves the native positions back to the held batch's first record of each partition
        (but those of `skip`) and forgets the batch: it was never handed out."""
        batch, self._held_batch = self._held_batch, None
        if batch is None:
            return
        skipped = set(skip)
        for k, (offset, from_recovery) in _batch_starts(batch).items():
            if k not in skipped and not from_recovery:
                try:
                    self._native.seek(TopicPartition(k[0], k[1], offset))
                except LaglessError:
                    pass

    def _rewind_held(self, partitions: Optional[Iterable[TopicPartition]] = None) -> None:
        """Moves the native positions back to the first held record of each partition (of
        `partitions`, or all) and forgets those records: they were never handed out."""
        keys = None if partitions is None else {_key(tp.topic, tp.partition) for tp in partitions}
        batch = self._held_batch
        if batch is not None and (keys is None or keys & set(_batch_starts(batch))):
            self._rewind_batch()
        for k, (offset, from_recovery) in self._held_starts().items():
            if keys is not None and k not in keys:
                continue
            if not from_recovery:
                try:
                    self._native.seek(TopicPartition(k[0], k[1], offset))
                except LaglessError:
                    pass
        if keys is None:
            self._held.clear()
        else:
            self._drop_held(TopicPartition(t, p) for t, p in keys)

    def _take_held(self, n: int) -> List[Message]:
        if not self._held:
            err, self._held_error = self._held_error, None
            assert err is not None
            raise err
        out: List[Message] = []
        while self._held and len(out) < max(1, n):
            out.append(self._held.popleft())
        return out

    # -- consuming --------------------------------------------------------------------------

    async def consume(self, num_messages: int = 1, timeout: Optional[float] = None) -> List[Message]:
        """Up to ``num_messages`` messages, waiting up to ``timeout`` seconds (None: until some
        come); an empty list when the timeout passed. The rebalance listener runs inside.
        Cancelling it loses nothing: what the consumer got meanwhile comes from the next call."""
        self._check_open()
        if self._closing:
            raise ClosedError("the consumer is being closed", name="CLOSED")
        if self._in_own_callback():
            raise IllegalStateError(
                "consume() cannot be called inside a rebalance listener callback: the callback "
                "runs inside a consume() already",
                name="ILLEGAL_STATE",
            )
        self._bind_loop()
        if self._held or self._held_error is not None:
            return self._take_held(num_messages)
        assert self._idle is not None
        # A cancelled call's native consume may still be finishing: wait for it, then take
        # what it got.
        await self._idle.wait()
        self._check_open()
        if self._held or self._held_error is not None:
            return self._take_held(num_messages)
        self._check_no_held_batch("consume()")
        if not self._subscribed:
            # No group, so no listener: records already buffered are taken on the loop thread
            # (a native call that does not wait), which spares two thread switches a batch.
            msgs = self._native.consume(num_messages, 0)
            if msgs or timeout == 0:
                try:
                    await asyncio.sleep(0)  # let other tasks run between batches
                except asyncio.CancelledError:
                    self._held.extendleft(reversed(msgs))
                    raise
                return msgs
        return await self._consume_native(num_messages, timeout)

    def _check_no_held_batch(self, call: str) -> None:
        if self._held_batch is not None:
            raise IllegalStateError(
                f"{call} cannot be called while the batch of a cancelled consume_batch() is held: "
                "take it with consume_batch() first (its records were never handed out)",
                name="ILLEGAL_STATE",
            )

    async def consume_batch(self, num_messages: int = 500, timeout: Optional[float] = None) -> MessageBatch:
        """Up to ``num_messages`` records as one :class:`lagless.MessageBatch` (columns for
        pyarrow, polars and DuckDB, as the blocking ``Consumer.consume_batch()``), waiting up to
        ``timeout`` seconds (None: until some come); an empty batch when the timeout passed. The
        rebalance listener runs inside. Cancelling it loses nothing: a batch the consumer got
        meanwhile is returned by the next ``consume_batch()`` (``consume()`` raises
        IllegalStateError until then, and records held by a cancelled ``consume()`` must be
        taken with ``consume()`` before a ``consume_batch()``)."""
        self._check_open()
        if self._closing:
            raise ClosedError("the consumer is being closed", name="CLOSED")
        if self._in_own_callback():
            raise IllegalStateError(
                "consume_batch() cannot be called inside a rebalance listener callback: the "
                "callback runs inside a consume_batch() already",
                name="ILLEGAL_STATE",
            )
        self._bind_loop()
        assert self._idle is not None
        await self._idle.wait()
        self._check_open()
        if self._held or self._held_error is not None:
            if self._held:
                raise IllegalStateError(
                    "consume_batch() cannot be called while records of a cancelled consume() are "
                    "held: take them with consume() first (they were never handed out)",
                    name="ILLEGAL_STATE",
                )
            err, self._held_error = self._held_error, None
            assert err is not None
            raise err
        if self._held_batch is not None:
            batch, self._held_batch = self._held_batch, None
            return batch
        if not self._subscribed:
            # As consume(): records already buffered are taken on the loop thread.
            batch = self._native.consume_batch(num_messages, 0)
            if len(batch) or timeout == 0:
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    if len(batch):
                        self._held_batch = batch
                    raise
                return batch
        got = await self._consume_native(num_messages, timeout, batch=True)
        if got is None:  # the worker stopped: the consumer is going away
            raise ClosedError("the consumer is being closed", name="CLOSED")
        return got

    async def _consume_native(self, n: int, timeout: Optional[float], batch: bool = False) -> Any:
        loop = self._bind_loop()
        native = self._native
        worker = self._worker
        idle = self._idle
        held = self._held
        assert idle is not None
        inner: "asyncio.Future[List[Message]]" = loop.create_future()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout

        take = native.consume_batch if batch else native.consume

        def hold(got: Any) -> None:
            """Keeps what a call nobody awaits any more got, for the next call."""
            if batch:
                if got is not None and len(got):
                    self._held_batch = got
            else:
                held.extend(got)

        def poll() -> Any:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    return take(n, left)
                except WakeupError:
                    if worker.closing:
                        raise ClosedError("the consumer is being closed", name="CLOSED") from None
                    if not worker.own_wakeup:
                        raise  # the application's wakeup()
                    # Ours, for a cancelled consume(): this one, or an earlier one whose native
                    # call had returned before the wakeup came.
                    worker.own_wakeup = False
                    if job.abandoned or worker.stopped:
                        return None if batch else []

        job = _Job(poll, loop, inner)

        def settle(f: "asyncio.Future[List[Message]]") -> None:
            idle.set()
            if job.abandoned and not f.cancelled():
                # Nobody takes this outcome: the next consume() does.
                err = f.exception()
                if err is None:
                    hold(f.result())
                elif not isinstance(err, (WakeupError, ClosedError)):
                    self._held_error = err

        inner.add_done_callback(settle)
        idle.clear()
        try:
            worker.submit(job)
        except BaseException:
            idle.set()
            raise
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            if not inner.done():
                job.abandoned = True
                worker.own_wakeup = True
                native.wakeup()
            elif not inner.cancelled() and inner.exception() is None:
                if batch:
                    hold(inner.result())
                else:
                    held.extendleft(reversed(inner.result()))
            raise

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    async def __anext__(self) -> Message:
        """The next message; the iteration ends when the consumer is closed."""
        self._check_no_held_batch("iterating the consumer")
        while True:
            if self._held and not self._closing:
                return self._held.popleft()
            try:
                msgs = await self.consume(500, None)
            except ClosedError:
                raise StopAsyncIteration from None
            if msgs:
                # The rest is held: handed out by the next calls, not counted as consumed.
                self._held.extendleft(reversed(msgs[1:]))
                return msgs[0]

    # -- group membership and assignment ------------------------------------------------------

    def subscribe(
        self,
        topics: Union[str, Iterable[str]],
        listener: Optional[Union[RebalanceListener, _BlockingListener, Any]] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None:
        """Joins the group ``group.id`` (at the next ``consume()``) and reads what it assigns of
        ``topics``. The listener's methods and the callables may be coroutines."""
        self._check_open()
        self._callbacks = (listener, on_assign, on_revoke, on_lost)
        self._native.subscribe(topics, _Bridge(self._worker, self))  # type: ignore[arg-type]
        self._subscribed = True

    def subscribe_pattern(
        self,
        pattern: str,
        listener: Optional[Union[RebalanceListener, _BlockingListener, Any]] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None:
        """Subscribes to every topic whose whole name matches ``pattern``."""
        self._check_open()
        self._callbacks = (listener, on_assign, on_revoke, on_lost)
        self._native.subscribe_pattern(pattern, _Bridge(self._worker, self))  # type: ignore[arg-type]
        self._subscribed = True

    def subscribe_regex(
        self,
        regex: str,
        listener: Optional[Union[RebalanceListener, _BlockingListener, Any]] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None:
        """Subscribes to the topics whose whole name matches ``regex``, matched by the group
        coordinator (KIP-848, RE2/J); needs ``group.protocol=consumer``."""
        self._check_open()
        self._callbacks = (listener, on_assign, on_revoke, on_lost)
        self._native.subscribe_regex(regex, _Bridge(self._worker, self))  # type: ignore[arg-type]
        self._subscribed = True

    def subscription(self) -> List[str]:
        return self._native.subscription()

    async def unsubscribe(self) -> None:
        """Leaves the group (revoking through the listener)."""
        self._check_open()
        self._bind_loop()
        self._rewind_held()
        await self._on_worker(self._native.unsubscribe)
        self._subscribed = False

    async def _on_worker(self, fn: Callable[[], T]) -> T:
        """Runs `fn` on the worker thread once no consume() is pending (for native calls that
        call the listener)."""
        loop = self._bind_loop()
        if self._in_own_callback():
            raise IllegalStateError(
                "this call cannot be made inside a rebalance listener callback: it waits for the "
                "consume() that runs the callback",
                name="ILLEGAL_STATE",
            )
        assert self._idle is not None
        while not self._idle.is_set():
            await self._idle.wait()
        fut: "asyncio.Future[T]" = loop.create_future()
        self._idle.clear()
        idle = self._idle
        fut.add_done_callback(lambda _f: idle.set())
        self._worker.submit(_Job(fn, loop, fut))
        return await asyncio.shield(fut)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        self._native.assign(partitions)

    def assignment(self) -> List[TopicPartition]:
        return self._native.assignment()

    def seek(self, partition: TopicPartition) -> None:
        """Moves the next read of the partition to ``partition.offset``; drops its held records."""
        self._drop_held([partition])
        self._native.seek(partition)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._drop_held(partitions)
        self._native.seek_to_beginning(partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._drop_held(partitions)
        self._native.seek_to_end(partitions)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stops returning messages of ``partitions`` until ``resume()``; held ones come again
        after it."""
        partitions = list(partitions)
        self._rewind_held(partitions)
        self._native.pause(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._native.resume(partitions)

    def paused(self) -> List[TopicPartition]:
        return self._native.paused()

    def metrics(self) -> Dict[str, Any]:
        """What the consumer is doing now, as :meth:`lagless.Consumer.metrics` (does not wait:
        the snapshot is read under the consumer's short locks)."""
        return self._native.metrics()

    def metrics_prometheus(self) -> str:
        """The same snapshot in the Prometheus text format, as
        :meth:`lagless.Consumer.metrics_prometheus`; ``lagless.prometheus.ConsumerCollector``
        takes this consumer too."""
        return self._native.metrics_prometheus()

    def learner_ready(self, partitions: Iterable[TopicPartition]) -> int:
        return self._native.learner_ready(partitions)

    def prepare_to_leave(self) -> bool:
        return self._native.prepare_to_leave()

    def recovery_active(self, partition: TopicPartition) -> bool:
        return self._native.recovery_active(partition)

    def child_consumer_is_alive(self) -> bool:
        return self._native.child_consumer_is_alive()

    def member_id(self) -> Optional[str]:
        return self._native.member_id()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The member's place in its group now, for ``Producer.send_offsets_to_transaction``:
        take it right after the ``consume()`` that returned the records whose offsets the
        transaction sends. Raises IllegalStateError without a subscription."""
        return self._native.consumer_group_metadata()

    def enforce_rebalance(self, reason: Optional[str] = None) -> None:
        self._native.enforce_rebalance(reason)

    def wakeup(self) -> None:
        """Makes a pending (or the next) ``consume()`` raise WakeupError."""
        self._native.wakeup()

    # -- offsets ------------------------------------------------------------------------------

    async def commit(
        self,
        offsets: Optional[Iterable[TopicPartition]] = None,
        asynchronous: bool = False,
        callback: Optional[Callable[[Optional[LaglessError], List[TopicPartition]], Any]] = None,
        *,
        message: Optional[Message] = None,
    ) -> Optional[List[TopicPartition]]:
        """As :meth:`lagless.Consumer.commit`. Without offsets, commits the positions of what
        was handed out (held records of a cancelled ``consume()`` are not). An asynchronous
        commit's callback (which may be a coroutine) runs on the event loop."""
        self._check_open()
        loop = self._bind_loop()
        native = self._native
        if offsets is None and message is None and (self._held or self._held_batch is not None):
            starts = self._held_starts()
            adjusted = []
            for tp in native._consumed_offsets():
                start = starts.get(_key(tp.topic, tp.partition))
                if start is not None and start[0] < tp.offset:
                    # Without the recovery token, which would count the held records as read:
                    # the next owner resumes at the lowest held offset.
                    tp = TopicPartition(tp.topic, tp.partition, start[0], "")
                adjusted.append(tp)
            offsets = adjusted
        if offsets is not None:
            offsets = list(offsets)
        cb = None
        if callback is not None:
            user_cb = callback

            def on_loop(err: Optional[LaglessError], tps: List[TopicPartition]) -> None:
                r = user_cb(err, tps)
                if inspect.isawaitable(r):
                    asyncio.ensure_future(r)

            def cb(err: Optional[LaglessError], tps: List[TopicPartition]) -> None:
                try:
                    loop.call_soon_threadsafe(on_loop, err, tps)
                except RuntimeError:
                    pass

        return await self._call(lambda: native.commit(offsets, asynchronous, cb, message=message))

    async def committed(self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None) -> List[TopicPartition]:
        partitions = list(partitions)
        return await self._call(lambda: self._native.committed(partitions, timeout))

    async def position(self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None) -> List[TopicPartition]:
        """The offset of the next message ``consume()`` returns for each of ``partitions``."""
        partitions = list(partitions)
        found = await self._call(lambda: self._native.position(partitions, timeout))
        starts = self._held_starts()
        for tp in found:
            start = starts.get(_key(tp.topic, tp.partition))
            if start is not None and start[0] < tp.offset:
                tp.offset = start[0]
        return found

    async def get_watermark_offsets(self, partition: TopicPartition, timeout: Optional[float] = None) -> Tuple[int, int]:
        return await self._call(lambda: self._native.get_watermark_offsets(partition, timeout))

    async def offsets_for_times(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        partitions = list(partitions)
        return await self._call(lambda: self._native.offsets_for_times(partitions, timeout))

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        partitions = list(partitions)
        return await self._call(lambda: self._native.beginning_offsets(partitions, timeout))

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        partitions = list(partitions)
        return await self._call(lambda: self._native.end_offsets(partitions, timeout))

    async def partitions_for(self, topic: str, timeout: Optional[float] = None) -> List[int]:
        return await self._call(lambda: self._native.partitions_for(topic, timeout))

    # -- closing ------------------------------------------------------------------------------

    async def close(self, timeout: Optional[float] = None) -> None:
        """Commits (with auto-commit), revokes through the listener, leaves the group and stops
        the worker thread. Raises IllegalStateError inside a listener callback (closing there
        would wait for itself); closing again does nothing."""
        if self._in_own_callback():
            raise IllegalStateError(
                "close() cannot be called inside a rebalance listener callback: it waits for the "
                "consume() that runs the callback; close after that consume() returned",
                name="ILLEGAL_STATE",
            )
        if self._closed or self._closing:
            return
        self._bind_loop()
        assert self._idle is not None
        self._closing = True
        self._worker.closing = True
        if not self._idle.is_set():
            self._native.wakeup()
        # Records held were never handed out: neither auto-commit nor the revocation commits them.
        while not self._idle.is_set():
            await self._idle.wait()
        self._rewind_held()
        self._held_error = None
        try:
            await self._on_worker(lambda: self._native.close(timeout))
        finally:
            self._closed = True
            self._finalizer()  # stops the worker thread
            await asyncio.get_running_loop().run_in_executor(None, self._worker.thread.join, 10.0)

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()


class Producer:
    """A Kafka producer for asyncio; the configuration of :class:`lagless.Producer`.

    ``await send(...)`` returns ``(partition, offset)`` once the broker acknowledged the record.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._native = _lagless.Producer(config)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._rsock: Optional[socket.socket] = None
        self._wsock: Optional[socket.socket] = None
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(
            target=_producer_thread, args=(self._native, self._queue), name="lagless-aio-producer", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, _stop_producer, self._native, self._queue, None, None, None)

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            r, w = socket.socketpair()
            r.setblocking(False)
            w.setblocking(False)
            self._rsock, self._wsock, self._loop = r, w, loop
            loop.add_reader(r.fileno(), self._deliveries)
            self._native._set_delivery_fd(w.fileno())
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _stop_producer, self._native, self._queue, loop, r, w)
        elif self._loop is not loop:
            raise IllegalStateError("this producer is used from another event loop", name="ILLEGAL_STATE")
        return loop

    def _deliveries(self) -> None:
        rsock = self._rsock
        assert rsock is not None
        try:
            while rsock.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        self._native.poll(0)

    async def send(
        self,
        topic: str,
        value: _Payload = None,
        key: _Payload = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
        timestamp: Optional[int] = None,
    ) -> Tuple[int, int]:
        """Sends one record; returns (partition, offset) once it is delivered, or raises."""
        if self._closed:
            raise ClosedError("the producer is closed", name="CLOSED")
        loop = self._bind_loop()
        fut: "asyncio.Future[Tuple[int, int]]" = loop.create_future()
        self._queue.put((topic, value, key, partition, headers, timestamp, _Delivery(loop, fut)))
        return await fut

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Sends everything queued and waits until every record is acknowledged or failed."""
        loop = self._bind_loop()
        fut: "asyncio.Future[None]" = loop.create_future()
        self._queue.put(_Delivery(loop, fut))  # reached once everything before it is queued
        await fut
        await loop.run_in_executor(None, self._native.flush, timeout)

    async def partitions_for(self, topic: str) -> List[int]:
        loop = self._bind_loop()
        return await loop.run_in_executor(None, self._native.partitions_for, topic)

    # -- transactions ---------------------------------------------------------------------------
    # The blocking calls of the native producer, on the loop's default executor (as flush()),
    # each after every send() queued before it reached the native producer: a record sent
    # before commit_transaction() belongs to the transaction it commits.

    async def _sends_queued(self) -> asyncio.AbstractEventLoop:
        """Waits until every send() queued so far was handed to the native producer."""
        if self._closed:
            raise ClosedError("the producer is closed", name="CLOSED")
        loop = self._bind_loop()
        fut: "asyncio.Future[None]" = loop.create_future()
        self._queue.put(_Delivery(loop, fut))
        await fut
        return loop

    async def init_transactions(self, timeout: Optional[float] = None) -> None:
        """Gets the producer id of ``transactional.id`` from its transaction coordinator; fences
        every older producer with the same id and aborts the transaction it left open. Once,
        before the first transaction. Every transactional call waits up to ``timeout`` seconds,
        by default ``delivery.timeout.ms``; one cut short by it may be awaited again."""
        loop = await self._sends_queued()
        await loop.run_in_executor(None, self._native.init_transactions, timeout)

    async def begin_transaction(self) -> None:
        """Starts a transaction: records sent until ``commit_transaction()`` or
        ``abort_transaction()`` belong to it. Local: no request is sent."""
        await self._sends_queued()
        self._native.begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Iterable[TopicPartition],
        group_metadata: ConsumerGroupMetadata,
        timeout: Optional[float] = None,
    ) -> None:
        """Sends the consumer's offsets (each partition's next offset to read) to the open
        transaction: the group of ``group_metadata`` (``Consumer.consumer_group_metadata()``)
        commits them if and only if the transaction commits."""
        given = list(offsets)
        loop = await self._sends_queued()
        await loop.run_in_executor(None, self._native.send_offsets_to_transaction, given, group_metadata, timeout)

    async def commit_transaction(self, timeout: Optional[float] = None) -> None:
        """Flushes the transaction's records and commits it. TransactionAbortableError: await
        ``abort_transaction()``, then begin the next one. An error with ``fatal`` set (KafkaError
        PRODUCER_FENCED when a newer producer with the same ``transactional.id`` fenced this
        one): only ``close()`` remains."""
        loop = await self._sends_queued()
        await loop.run_in_executor(None, self._native.commit_transaction, timeout)

    async def abort_transaction(self, timeout: Optional[float] = None) -> None:
        """Aborts the open transaction: records not sent yet fail (their ``send()`` raises
        TransactionAbortableError); read_committed consumers never see its records and its
        offsets are not committed."""
        loop = await self._sends_queued()
        await loop.run_in_executor(None, self._native.abort_transaction, timeout)

    async def close(self, timeout: Optional[float] = None) -> None:
        """Flushes (up to ``timeout`` seconds, default 30) and stops the producer."""
        if self._closed:
            return
        loop = self._bind_loop()
        fut: "asyncio.Future[None]" = loop.create_future()
        self._queue.put(_Delivery(loop, fut))
        await fut
        self._closed = True
        try:
            await loop.run_in_executor(None, self._native.close, timeout)
            self._deliveries()
        finally:
            self._finalizer()
            await loop.run_in_executor(None, self._thread.join, 10.0)

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()


class _Delivery:
    """The delivery callback of one record: completes its future on its loop, from whichever
    thread runs it (the loop's reader, or flush()/close() on an executor thread)."""

    __slots__ = ("loop", "fut")

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: "asyncio.Future[Any]") -> None:
        self.loop = loop
        self.fut = fut

    def __call__(self, err: Optional[BaseException], meta: Optional[Tuple[str, int, int]]) -> None:
        result = None if meta is None else (meta[1], meta[2])
        self.finish(result, err)

    def finish(self, result: Any, err: Optional[BaseException]) -> None:
        try:
            if asyncio._get_running_loop() is self.loop:
                _settle(self.fut, result, err)
            else:
                self.loop.call_soon_threadsafe(_settle, self.fut, result, err)
        except RuntimeError:
            pass  # the loop is closed


def _producer_thread(native: _lagless.Producer, q: "queue.SimpleQueue[Any]") -> None:
    """Hands queued records to the native producer, which may wait for room in buffer.memory:
    here, not on the event loop."""
    while True:
        item = q.get()
        if item is _STOP:
            return
        if isinstance(item, _Delivery):
            item.finish(None, None)
            continue
        topic, value, key, partition, headers, timestamp, delivery = item
        try:
            native.produce(topic, value, key, partition, headers, timestamp, delivery)
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine)
            delivery.finish(None, e)


def _stop_producer(
    native: _lagless.Producer,
    q: "queue.SimpleQueue[Any]",
    loop: Optional[asyncio.AbstractEventLoop],
    r: Optional[socket.socket],
    w: Optional[socket.socket],
) -> None:
    q.put(_STOP)
    native._set_delivery_fd(None)
    if loop is not None and r is not None and not loop.is_closed():
        try:
            loop.remove_reader(r.fileno())
        except (RuntimeError, ValueError):
            pass
    for s in (r, w):
        if s is not None:
            s.close()

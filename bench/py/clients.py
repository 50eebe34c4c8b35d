#!/usr/bin/env python3
"""The Python clients of bench/run, one call pattern per mode:

    python clients.py MODE <bootstrap> <topic> <partitions> <records>

MODE: confluent-consume-len, confluent-poll, confluent-consume, kafka-python-iter, kafka-python-poll,
aiokafka-getone, aiokafka-getmany, lagless-poll, lagless-consume, lagless-consume-batch, lagless-aio,
confluent-aio.

Same line protocol as core/examples/bench_consume.rs: START <cpu ticks>, PROGRESS <records>,
RESULT <records> <bytes> <seconds> <cpu ticks>; ticks are utime+stime from /proc/self/stat.
Every client reads from offset 0 with manual assignment, no group, CRC checks on, and the same
fetch sizes (fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB, fetch.max.wait 500 ms).
"""
import os
import sys
import time

FETCH_MAX = 52428800
PARTITION_FETCH_MAX = 1048576
FETCH_WAIT_MS = 500
# librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (default 1000 ms) once
# its local queue holds queued.min.messages (100,000): a reader faster than that refill then
# idles most of each second. 10 ms, as a user tuning librdkafka for throughput would set it.
RDKAFKA_QUEUE_BACKOFF_MS = 10
BATCH = 500
IDLE_LIMIT = 60.0


def cpu_ticks() -> int:
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Meter:
    def __init__(self, want: int):
        self.want, self.n, self.bytes = want, 0, 0
        self.last_data = time.monotonic()
        self.next_report = self.last_data + 1.0

    def start(self):
        print(f"START {cpu_ticks()}", flush=True)
        self.t0 = time.perf_counter()

    def add(self, n: int, nbytes: int):
        now = time.monotonic()
        if n == 0:
            if now - self.last_data > IDLE_LIMIT:
                sys.exit(f"no records for {IDLE_LIMIT:.0f} s after {self.n} of {self.want}")
            return
        self.n += n
        self.bytes += nbytes
        self.last_data = now
        if now >= self.next_report:
            print(f"PROGRESS {self.n}", flush=True)
            self.next_report = now + 1.0

    def done(self) -> bool:
        return self.n >= self.want

    def finish(self):
        secs = time.perf_counter() - self.t0
        print(f"RESULT {self.n} {self.bytes} {secs:.6f} {cpu_ticks()}", flush=True)


def extra_config() -> dict:
    """bench/run --tls: the security settings from BENCH_CONFIG, one key=value a line."""
    lines = os.environ.get("BENCH_CONFIG", "").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def size(m_key, m_value) -> int:
    return (len(m_key) if m_key is not None else 0) + (len(m_value) if m_value is not None else 0)


def confluent(mode, bootstrap, topic, partitions, meter):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({
        "bootstrap.servers": bootstrap, "client.id": "bench-" + mode,
        "group.id": "bench-unused", "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.max.bytes": FETCH_MAX, "max.partition.fetch.bytes": PARTITION_FETCH_MAX,
        "receive.message.max.bytes": FETCH_MAX + 1024 * 1024,
        "fetch.wait.max.ms": FETCH_WAIT_MS, "check.crcs": True,
        "fetch.queue.backoff.ms": RDKAFKA_QUEUE_BACKOFF_MS,
        **extra_config(),
    })
    meter.start()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    if mode == "confluent-consume-len":
        # confluent-kafka's C-level consume(500) loop, no per-message Python work beyond
        # an error check; bytes are summed by len() of each message (a C call).
        while not meter.done():
            msgs = c.consume(BATCH, 1.0)
            nbytes = 0
            for m in msgs:
                if m.error():
                    sys.exit(f"error: {m.error()}")
                nbytes += len(m)
            meter.add(len(msgs), nbytes)
    elif mode == "confluent-consume":
        while not meter.done():
            msgs = c.consume(BATCH, 1.0)
            nbytes = 0
            for m in msgs:
                if m.error():
                    sys.exit(f"error: {m.error()}")
                nbytes += size(m.key(), m.value())
            meter.add(len(msgs), nbytes)
    else:  # confluent-poll
        while not meter.done():
            m = c.poll(1.0)
            if m is None:
                meter.add(0, 0)
                continue
            if m.error():
                sys.exit(f"error: {m.error()}")
            meter.add(1, size(m.key(), m.value()))
    meter.finish()
    c.close()


def kafka_python(mode, bootstrap, topic, partitions, meter):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="bench-" + mode, group_id=None,
        enable_auto_commit=False, auto_offset_reset="earliest",
        fetch_max_bytes=FETCH_MAX, max_partition_fetch_bytes=PARTITION_FETCH_MAX,
        fetch_max_wait_ms=FETCH_WAIT_MS, check_crcs=True, consumer_timeout_ms=1000,
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    meter.start()
    c.assign(tps)
    c.seek_to_beginning(*tps)
    if mode == "kafka-python-poll":
        while not meter.done():
            batches = c.poll(timeout_ms=1000, max_records=BATCH)
            n = nbytes = 0
            for recs in batches.values():
                n += len(recs)
                for r in recs:
                    nbytes += size(r.key, r.value)
            meter.add(n, nbytes)
    else:  # kafka-python-iter: the per-record iterator (consumer_timeout_ms ends it when idle)
        while not meter.done():
            for r in c:
                meter.add(1, size(r.key, r.value))
                if meter.done():
                    break
            else:
                meter.add(0, 0)
    meter.finish()
    c.close()


def aiokafka(mode, bootstrap, topic, partitions, meter):
    import asyncio
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, client_id="bench-" + mode, group_id=None,
            enable_auto_commit=False, auto_offset_reset="earliest",
            fetch_max_bytes=FETCH_MAX, max_partition_fetch_bytes=PARTITION_FETCH_MAX,
            fetch_max_wait_ms=FETCH_WAIT_MS, check_crcs=True,
        )
        await c.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        meter.start()
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        if mode == "aiokafka-getmany":
            while not meter.done():
                batches = await c.getmany(timeout_ms=1000, max_records=BATCH)
                n = nbytes = 0
                for recs in batches.values():
                    n += len(recs)
                    for r in recs:
                        nbytes += size(r.key, r.value)
                meter.add(n, nbytes)
        else:  # aiokafka-getone
            while not meter.done():
                try:
                    r = await asyncio.wait_for(c.getone(), 1.0)
                except asyncio.TimeoutError:
                    meter.add(0, 0)
                    continue
                meter.add(1, size(r.key, r.value))
        meter.finish()
        await c.stop()

    asyncio.run(run())


def confluent_aio(mode, bootstrap, topic, partitions, meter):
    """confluent-kafka's asyncio consumer (confluent_kafka.aio.AIOConsumer, 2.12+): await
    consume(500), key and value read."""
    import asyncio
    try:
        from confluent_kafka.aio import AIOConsumer
    except ImportError:
        sys.exit("confluent-aio: this confluent-kafka has no confluent_kafka.aio.AIOConsumer")
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    async def run():
        c = AIOConsumer({
            "bootstrap.servers": bootstrap, "client.id": "bench-" + mode,
            "group.id": "bench-unused", "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.max.bytes": FETCH_MAX, "max.partition.fetch.bytes": PARTITION_FETCH_MAX,
            "receive.message.max.bytes": FETCH_MAX + 1024 * 1024,
            "fetch.wait.max.ms": FETCH_WAIT_MS, "check.crcs": True,
            "fetch.queue.backoff.ms": RDKAFKA_QUEUE_BACKOFF_MS,
            **extra_config(),
        })
        meter.start()
        await c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while not meter.done():
            msgs = await c.consume(BATCH, 1.0)
            nbytes = 0
            for m in msgs:
                if m.error():
                    sys.exit(f"error: {m.error()}")
                nbytes += size(m.key(), m.value())
            meter.add(len(msgs), nbytes)
        meter.finish()
        await c.close()

    asyncio.run(run())


def lagless_aio(mode, bootstrap, topic, partitions, meter):
    """lagless.aio.Consumer: await consume(500), key and value read (as lagless-consume)."""
    import asyncio
    import lagless
    import lagless.aio

    async def run():
        c = lagless.aio.Consumer({
            "bootstrap.servers": bootstrap, "client.id": "bench-" + mode,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.max.bytes": FETCH_MAX, "max.partition.fetch.bytes": PARTITION_FETCH_MAX,
            "fetch.max.wait.ms": FETCH_WAIT_MS, "check.crcs": True,
        })
        meter.start()
        c.assign([lagless.TopicPartition(topic, p, lagless.OFFSET_BEGINNING) for p in range(partitions)])
        while not meter.done():
            msgs = await c.consume(BATCH, timeout=1.0)
            nbytes = 0
            for m in msgs:
                nbytes += size(m.key, m.value)
            meter.add(len(msgs), nbytes)
        meter.finish()
        await c.close()

    asyncio.run(run())


def lagless_py(mode, bootstrap, topic, partitions, meter):
    import lagless
    if mode == "lagless-consume-batch":
        # Imported before the clock starts, as every client's own modules are: importing
        # pyarrow takes longer than reading a quick-mode dataset.
        import pyarrow as pa
    c = lagless.Consumer({
        "bootstrap.servers": bootstrap, "client.id": "bench-" + mode,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.max.bytes": FETCH_MAX, "max.partition.fetch.bytes": PARTITION_FETCH_MAX,
        "fetch.max.wait.ms": FETCH_WAIT_MS, "check.crcs": True,
    })
    meter.start()
    c.assign([lagless.TopicPartition(topic, p, lagless.OFFSET_BEGINNING) for p in range(partitions)])
    if mode == "lagless-consume":
        while not meter.done():
            msgs = c.consume(BATCH, timeout=1.0)
            nbytes = 0
            for m in msgs:
                nbytes += size(m.key, m.value)
            meter.add(len(msgs), nbytes)
    elif mode == "lagless-consume-batch":
        # One MessageBatch per call, imported by pyarrow without copies. The key and value bytes
        # are the difference of the last and first entries of each column's offsets buffer, read
        # from pyarrow's buffer (nulls take no bytes): pyarrow.compute's binary_length + sum cost
        # ~50 us a column per batch (~0.2 us a 100 B record for both), pyarrow's own time.
        while not meter.done():
            batch = c.consume_batch(BATCH, timeout=1.0)
            n = len(batch)
            nbytes = 0
            if n:
                rb = pa.record_batch(batch)
                for col in ("key", "value"):
                    offsets = memoryview(rb.column(col).buffers()[1]).cast("i")
                    nbytes += offsets[n] - offsets[0]
            meter.add(n, nbytes)
    else:  # lagless-poll
        while not meter.done():
            m = c.poll(1.0)
            if m is None:
                meter.add(0, 0)
                continue
            meter.add(1, size(m.key, m.value))
    meter.finish()
    c.close()


MODES = {
    "confluent-consume-len": confluent, "confluent-poll": confluent, "confluent-consume": confluent,
    "kafka-python-iter": kafka_python, "kafka-python-poll": kafka_python,
    "aiokafka-getone": aiokafka, "aiokafka-getmany": aiokafka,
    "lagless-poll": lagless_py, "lagless-consume": lagless_py, "lagless-consume-batch": lagless_py,
    "lagless-aio": lagless_aio, "confluent-aio": confluent_aio,
}


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in MODES:
        sys.exit(f"usage: clients.py {{{','.join(MODES)}}} <bootstrap> <topic> <partitions> <records>")
    mode, bootstrap, topic, partitions, want = sys.argv[1:]
    MODES[mode](mode, bootstrap, topic, int(partitions), Meter(int(want)))


if __name__ == "__main__":
    main()

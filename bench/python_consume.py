#!/usr/bin/env python3
"""lagless vs confluent-kafka (librdkafka): consume(500) over the same pre-produced topic.

    LAGLESS_BOOTSTRAP=127.0.0.1:9092 python3 bench/python_consume.py [--records 200000] [--size 100]

Both clients read every partition from the beginning with a manual assignment (no group), ask
for batches of 500 and touch each message's value (the application would), so both pay for
turning payloads into Python bytes. Reported: records/s and MB/s of payload, best of --rounds
rounds, each round a fresh consumer (connection set-up and the first fetch included).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import lagless

try:
    import confluent_kafka
except ImportError:  # pragma: no cover - reported below
    confluent_kafka = None


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    lagless.create_topic(bootstrap, topic, partitions)
    value = b"x" * size
    with lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}) as p:
        for i in range(records):
            p.produce(topic, value=value, partition=i % partitions)
        p.flush(120)


def run_lagless(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    c.assign([lagless.TopicPartition(topic, p, lagless.OFFSET_BEGINNING) for p in range(partitions)])
    n = 0
    nbytes = 0
    start = time.perf_counter()
    while n < records:
        batch = c.consume(500, timeout=1.0)
        n += len(batch)
        for m in batch:
            nbytes += len(m.value)
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def run_confluent(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    assert confluent_kafka is not None
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False}
    )
    c.assign(
        [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
    )
    nbytes = 0
    n = 0
    start = time.perf_counter()
    while n < records:
        for m in c.consume(500, timeout=1.0):
            if m.error():
                continue
            n += 1
            nbytes += len(m.value())
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGLESS_BOOTSTRAP"))
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100, help="value size in bytes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not args.bootstrap:
        ap.error("give --bootstrap or set LAGLESS_BOOTSTRAP")
    topic = f"bench-py-{uuid.uuid4().hex[:8]}"
    t = time.perf_counter()
    produce(args.bootstrap, topic, args.partitions, args.records, args.size)
    print(f"produced {args.records} records of {args.size} B to {topic} in {time.perf_counter() - t:.1f} s")
    clients = [("lagless", run_lagless)]
    if confluent_kafka is not None:
        clients.append((f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})", run_confluent))
    else:
        print("confluent-kafka is not installed: pip install confluent-kafka")
    best = {name: float("inf") for name, _ in clients}
    for _ in range(args.rounds):
        for name, fn in clients:
            best[name] = min(best[name], fn(args.bootstrap, topic, args.partitions, args.records))
    mb = args.records * args.size / 1e6
    for name, _ in clients:
        s = best[name]
        print(f"{name:60s} {args.records / s:12,.0f} records/s {mb / s:8.1f} MB/s  ({s:.2f} s, best of {args.rounds})")


if __name__ == "__main__":
    main()

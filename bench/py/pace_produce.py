#!/usr/bin/env python3
"""Steady load for the rebalance figure of bench/run:
    pace_produce.py <bootstrap> <topic> <partitions> <records per second> <seconds>
Sends 100-byte records round-robin over the partitions at a fixed rate (confluent-kafka producer)."""
import sys
import time

from confluent_kafka import Producer


def main():
    bootstrap, topic, partitions, rate, seconds = sys.argv[1:6]
    partitions, rate, seconds = int(partitions), float(rate), float(seconds)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    value = b"r" * 100
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        due = t0 + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(min(due - now, 0.01))
            continue
        p.produce(topic, value, partition=i % partitions)
        p.poll(0)
        i += 1
    p.flush(10)
    print(f"sent {i}", flush=True)


if __name__ == "__main__":
    main()

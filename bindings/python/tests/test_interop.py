"""lagless and librdkafka (confluent-kafka) as members of one group, with the range assignor."""

from __future__ import annotations

import threading
import time
from typing import Dict, Set

import confluent_kafka

import lagless
from conftest import produce


def test_lagless_and_confluent_kafka_split_the_partitions(bootstrap, make_topic, group, consumers):
    topic = make_topic(4)
    stop = threading.Event()
    ck_owned: Set[int] = set()
    ck_seen: Dict[int, Set[int]] = {}
    ck_errors = []
    lock = threading.Lock()

    def run_confluent() -> None:
        ck = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "range",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
            }
        )

        def on_assign(c, parts):
            with lock:
                ck_owned.update(p.partition for p in parts)

        def on_revoke(c, parts):
            with lock:
                ck_owned.difference_update(p.partition for p in parts)

        ck.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not stop.is_set():
                m = ck.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    ck_errors.append(m.error())
                    continue
                with lock:
                    ck_seen.setdefault(m.partition(), set()).add(m.offset())
        finally:
            ck.close()

    t = threading.Thread(target=run_confluent, daemon=True)
    t.start()
    owned: Set[int] = set()
    seen: Dict[int, Set[int]] = {}
    c = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "range",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumers.append(c)
    c.subscribe(
        [topic],
        on_assign=lambda _, ps: owned.update(p.partition for p in ps),
        on_revoke=lambda _, ps: owned.difference_update(p.partition for p in ps),
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with lock:
                split = len(owned) == 2 and len(ck_owned) == 2
            if split:
                break
            assert time.monotonic() < deadline, f"no split: lagless {owned}, librdkafka {ck_owned}"
            c.poll(0.1)
        with lock:
            assert owned.isdisjoint(ck_owned) and owned | ck_owned == {0, 1, 2, 3}
        per_partition = 50
        for p in range(4):
            produce(bootstrap, topic, per_partition, partition=p)
        deadline = time.monotonic() + 60
        while True:
            for m in c.consume(500, timeout=0.1):
                seen.setdefault(m.partition, set()).add(m.offset)
            with lock:
                total = sum(map(len, seen.values())) + sum(map(len, ck_seen.values()))
            if total >= 4 * per_partition:
                break
            assert time.monotonic() < deadline, f"consumed {total} of {4 * per_partition}"
        with lock:
            # Each partition has exactly one owner, and that owner read all of it.
            assert set(seen) == owned and set(ck_seen) == ck_owned
            for p, offs in list(seen.items()) + list(ck_seen.items()):
                assert offs == set(range(per_partition)), f"partition {p}"
            assert not ck_errors
    finally:
        stop.set()
        t.join(15)

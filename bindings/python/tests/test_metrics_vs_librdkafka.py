"""lagless' metrics beside librdkafka's statistics (confluent-kafka's stats_cb), the same
partitions read to the same place by both: the watermarks agree, and lagless' `consumer_lag`
(end offset minus position) agrees with librdkafka's `consumer_lag_stored` (end offset minus the
offset stored after the last record delivered; librdkafka's `consumer_lag` runs from the
committed offset instead). Where they differ (a partition nothing was read from yet) the test
pins both numbers; README.md's "Metrics" says the same."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Tuple

import confluent_kafka

import lagless
from conftest import produce, unique

# The partition fields both clients report: (hi_offset, ls_offset, lo_offset, lag), the lag
# being lagless' consumer_lag and librdkafka's consumer_lag_stored.
Fields = Tuple[int, int, int, int]


class Stats:
    """librdkafka's statistics, kept as they come from poll() (statistics.interval.ms 100)."""

    def __init__(self) -> None:
        self.last: Dict[str, Any] = {}
        self.count = 0

    def __call__(self, text: str) -> None:
        self.last = json.loads(text)
        self.count += 1

    def partition(self, topic: str, p: int) -> Fields:
        s = self.last["topics"][topic]["partitions"][str(p)]
        return (s["hi_offset"], s["ls_offset"], s["lo_offset"], s["consumer_lag_stored"])


def rdkafka(bootstrap: str, stats: Stats, **extra: Any) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rdk-stats"),
                                     "enable.auto.commit": False, "statistics.interval.ms": 100,
                                     "stats_cb": stats, **extra})


def lagless_fields(c: lagless.Consumer, topic: str, p: int) -> Fields:
    m = next(x for x in c.metrics()["partitions"] if x["topic"] == topic and x["partition"] == p)
    return (m["hi_offset"], m["ls_offset"], m["lo_offset"], m["consumer_lag"])


def until(what: str, done: Callable[[], bool], step: Callable[[], None], deadline_s: float = 30) -> None:
    deadline = time.monotonic() + deadline_s
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        step()


def lagless_read(c: lagless.Consumer, want: Dict[int, int], got: Dict[int, int]) -> None:
    def step() -> None:
        for m in c.consume(500, timeout=0.2):
            got[m.partition] = got.get(m.partition, 0) + 1
    until(f"records per partition {want} (have {got})", lambda: got == want, step)


def rdkafka_read(c: confluent_kafka.Consumer, want: Dict[int, int], got: Dict[int, int]) -> None:
    def step() -> None:
        for m in c.consume(500, timeout=0.2):
            assert m.error() is None, m.error()
            got[m.partition()] = got.get(m.partition(), 0) + 1
    until(f"records per partition {want} (have {got})", lambda: got == want, step)


def settled(topic: str, parts: List[int], stats: Stats, r: confluent_kafka.Consumer,
            lc: lagless.Consumer, want: Dict[int, Fields]) -> Dict[int, Tuple[Fields, Fields]]:
    """Polls both (delivering nothing new) until lagless reports `want`, and librdkafka has
    emitted statistics after that; (lagless, librdkafka) fields per partition."""
    until(f"lagless metrics {want}",
          lambda: {p: lagless_fields(lc, topic, p) for p in parts} == want,
          lambda: lc.consume(10, timeout=0.2))
    seen = stats.count
    until("librdkafka statistics after that", lambda: stats.count >= seen + 3,
          lambda: r.consume(10, timeout=0.2))
    return {p: (lagless_fields(lc, topic, p), stats.partition(topic, p)) for p in parts}


def test_watermarks_and_lag_agree_with_librdkafka_on_plain_records(bootstrap, make_topic, consumers):
    topic = make_topic(3)
    produce(bootstrap, topic, 12, partition=0)
    produce(bootstrap, topic, 5, partition=1)
    # Partition 2 stays empty.
    stats = Stats()
    r = rdkafka(bootstrap, stats)
    lc = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(lc)
    try:
        r.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(3)])
        lc.assign([lagless.TopicPartition(topic, p, 0) for p in range(3)])
        rdkafka_read(r, {0: 12, 1: 5}, {})
        lagless_read(lc, {0: 12, 1: 5}, {})
        both = settled(topic, [0, 1, 2], stats, r, lc,
                       {0: (12, 12, 0, 0), 1: (5, 5, 0, 0), 2: (0, 0, 0, 0)})
        print("plain records (lagless, librdkafka):", both)
        for p in (0, 1):
            assert both[p][0] == both[p][1], f"partition {p}: {both[p]}"
        # Nothing read from partition 2: the same watermarks; librdkafka knows no offset to
        # measure from (-1), lagless measures from its position 0.
        assert both[2][0][:3] == both[2][1][:3], both[2]
        assert (both[2][0][3], both[2][1][3]) == (0, -1), both[2]
    finally:
        r.close()


def test_under_read_committed_both_run_the_lag_to_the_last_stable_offset_past_the_markers(
    bootstrap, make_topic, consumers
):
    topic = make_topic(1)
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                    "transactional.id": unique("py-stats-txn"), "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce(topic, value=f"c-{i}".encode(), partition=0)
    txn.commit_transaction(30)  # offsets 0-9, its COMMIT marker at 10
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, value=f"o-{i}".encode(), partition=0)
    txn.flush(30)  # offsets 11-15, open: the last stable offset is 11
    stats = Stats()
    r = rdkafka(bootstrap, stats, **{"isolation.level": "read_committed"})
    lc = lagless.Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    consumers.append(lc)
    try:
        r.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        lc.assign([lagless.TopicPartition(topic, 0, 0)])
        r_got: Dict[int, int] = {}
        l_got: Dict[int, int] = {}
        rdkafka_read(r, {0: 10}, r_got)
        lagless_read(lc, {0: 10}, l_got)
        open_txn = settled(topic, [0], stats, r, lc, {0: (16, 11, 0, 0)})[0]
        txn.commit_transaction(30)  # its marker at 16: everything is stable
        rdkafka_read(r, {0: 15}, r_got)
        lagless_read(lc, {0: 15}, l_got)
        done = settled(topic, [0], stats, r, lc, {0: (17, 17, 0, 0)})[0]
        print("read_committed, open transaction (lagless, librdkafka):", open_txn)
        print("read_committed, all committed (lagless, librdkafka):", done)
        # Both positions are past the COMMIT markers (no lag stuck at 1, kafka4s #684).
        assert open_txn[0] == open_txn[1], open_txn
        assert done[0] == done[1], done
    finally:
        r.close()

"""`statistics.interval.ms` and `stats_cb` as confluent-kafka has them: the statistics JSON (a str)
every interval, called from poll()/consume() on the polling thread with the GIL; what the
callback raises comes out of that poll, as from confluent-kafka's poll()."""
from __future__ import annotations

import json
import threading
import time
from typing import List

import pytest

import lagless
from conftest import produce


def test_stats_cb_gets_the_json_every_interval_on_the_polling_thread(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 10, partition=0)
    calls: List[tuple] = []

    def on_stats(doc: str) -> None:
        calls.append((threading.get_ident(), time.monotonic(), json.loads(doc)))

    c = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 200,
            "stats_cb": on_stats,
        }
    )
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 10:
        assert time.monotonic() < deadline, f"consumed {got} of 10"
        got += len(c.consume(10, timeout=0.2))
    before = len(calls)
    start = time.monotonic()
    assert c.poll(2.0) is None  # one poll, nothing left to read: it wakes for each interval
    window = time.monotonic() - start
    during = calls[before:]
    print(f"{len(during)} calls in one poll of {window:.2f} s ({before} before)")
    assert 4 <= len(during) <= 1 + int(window / 0.2)
    assert {t for t, _, _ in calls} == {threading.get_ident()}
    gaps = [b[1] - a[1] for a, b in zip(calls, calls[1:])]
    assert gaps and min(gaps) >= 0.19, gaps
    last = during[-1][2]
    (p,) = last["partitions"]
    assert (p["topic"], p["partition"], p["position"], p["hi_offset"], p["consumer_lag"]) == (topic, 0, 10, 10, 0)


def test_an_exception_of_stats_cb_comes_out_of_poll_and_no_record_is_lost(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 30, partition=0)
    raised = []

    def on_stats(doc: str) -> None:
        if len(raised) < 3:
            raised.append(doc)
            raise ValueError(f"stats_cb failure {len(raised)}")

    c = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 10,
            "max.poll.records": 1,
            "stats_cb": on_stats,
        }
    )
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0)])
    offsets: List[int] = []
    errors: List[str] = []
    errors_at: List[int] = []
    deadline = time.monotonic() + 30
    # Until every record came and the callback raised its three times (mid-stream or after).
    while len(offsets) < 30 or len(errors) < 3:
        assert time.monotonic() < deadline, f"consumed {len(offsets)} of 30, errors {errors}"
        try:
            m = c.poll(0.5)
        except ValueError as e:
            errors.append(str(e))
            errors_at.append(len(offsets))
            continue
        if m is not None:
            offsets.append(m.offset)
    assert errors == ["stats_cb failure 1", "stats_cb failure 2", "stats_cb failure 3"]
    print(f"errors came after {errors_at} records")
    assert offsets == list(range(30))


def test_stats_cb_must_be_callable_and_the_interval_sane(bootstrap):
    with pytest.raises(TypeError, match="stats_cb"):
        lagless.Consumer({"bootstrap.servers": bootstrap, "stats_cb": "not callable"})
    with pytest.raises(TypeError, match="stats_cb.*callable"):
        lagless.Producer({"bootstrap.servers": bootstrap, "stats_cb": "not callable"})
    with pytest.raises(TypeError, match="stats_cb.*only a Consumer or a Producer"):
        lagless.AdminClient({"bootstrap.servers": bootstrap, "stats_cb": print})
    with pytest.raises(lagless.ConfigError, match=r"statistics\.interval\.ms.*`5`"):
        lagless.Producer({"bootstrap.servers": bootstrap, "statistics.interval.ms": 5})
    with pytest.raises(lagless.ConfigError, match=r"statistics\.interval\.ms.*`5`"):
        lagless.Consumer({"bootstrap.servers": bootstrap, "statistics.interval.ms": 5})


def test_producer_stats_cb_gets_the_json_with_the_records_delivered(bootstrap, make_topic):
    """The producer's stats_cb runs inside poll()/flush() on the calling thread, as
    librdkafka's producer serves it from rd_kafka_poll; the JSON is Producer.metrics()'s."""
    topic = make_topic(1, prefix="py-pstats")
    calls: List[tuple] = []

    def on_stats(json_str: str) -> None:
        calls.append((threading.get_ident(), json.loads(json_str)))

    delivered: List[int] = []
    p = lagless.Producer(
        {"bootstrap.servers": bootstrap, "client.id": "py-pstats", "statistics.interval.ms": 100,
         "stats_cb": on_stats}
    )
    try:
        for i in range(25):
            p.produce(topic, value=f"v{i}",
                      on_delivery=lambda err, md: delivered.append(1) if err is None else None)
        p.flush(30)
        assert len(delivered) == 25
        before = len(calls)
        deadline = time.monotonic() + 10
        while len(calls) == before and time.monotonic() < deadline:
            p.poll(0.05)
    finally:
        p.close()
    assert len(calls) > before, "no statistics after the flush"
    thread, last = calls[-1]
    assert thread == threading.get_ident()
    assert last["type"] == "producer" and last["client_id"] == "py-pstats", last
    assert last["records_sent_total"] == 25, last
    assert last["records_failed_total"] == 0, last
    assert last["records_outstanding"] == 0, last


def test_an_exception_of_the_producer_stats_cb_comes_out_of_poll(bootstrap):
    def on_stats(json_str: str) -> None:
        raise ValueError("producer stats_cb failure")

    p = lagless.Producer(
        {"bootstrap.servers": bootstrap, "statistics.interval.ms": 50, "stats_cb": on_stats}
    )
    try:
        with pytest.raises(ValueError, match="producer stats_cb failure"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                p.poll(0.05)
    finally:
        p.close()

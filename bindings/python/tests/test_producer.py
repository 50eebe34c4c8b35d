"""The producer's Python surface: delivery callbacks on the caller's thread, payload types."""

from __future__ import annotations

import threading

import pytest

import lagless


def test_delivery_callbacks_run_in_flush_on_the_calling_thread(bootstrap, make_topic):
    topic = make_topic(2)
    seen = []
    caller = threading.get_ident()

    def on_delivery(err, meta):
        assert threading.get_ident() == caller
        seen.append((err, meta))

    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(10):
            p.produce(topic, value=bytearray(b"v%d" % i), key="k", headers={"a": "b"}, on_delivery=on_delivery)
        p.flush(30)
    assert len(seen) == 10
    assert all(err is None for err, _ in seen)
    # One key: one partition, consecutive offsets.
    assert sorted(m[2] for _, m in seen) == list(range(10))
    assert len({m[1] for _, m in seen}) == 1 and all(m[0] == topic for _, m in seen)


def test_bad_payload_and_partition_are_rejected(bootstrap, make_topic):
    topic = make_topic(1)
    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        with pytest.raises(TypeError):
            p.produce(topic, value=123)  # type: ignore[arg-type]
        with pytest.raises(lagless.InvalidArgumentError):
            p.send(topic, b"x", partition=5)
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Producer({"bootstrap.servers": bootstrap, "group.id": "consumers-only"})
    assert e.value.key == "group.id"


def test_enable_idempotence_both_ways(bootstrap, make_topic):
    topic = make_topic(1)
    # Asked for with acks=1: the config error names acks and its value, as Java's does.
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": "true", "acks": "1"})
    assert e.value.key == "acks"
    assert "enable.idempotence" in str(e.value) and "1" in str(e.value)
    # On (the default) and off, records are delivered with their offsets.
    for settings in ({}, {"enable.idempotence": "true"}, {"enable.idempotence": "false", "acks": "1"}):
        seen = []
        with lagless.Producer({"bootstrap.servers": bootstrap, **settings}) as p:
            for i in range(5):
                p.produce(topic, value=b"v%d" % i, on_delivery=lambda err, meta: seen.append((err, meta)))
            p.flush(30)
        assert [err for err, _ in seen] == [None] * 5, settings
        offsets = [m[2] for _, m in seen]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5, settings


def test_metrics_count_what_was_delivered_and_the_brokers(bootstrap, make_topic):
    topic = make_topic(2)
    p = lagless.Producer({"bootstrap.servers": bootstrap, "client.id": "py-metrics-out", "linger.ms": 5})
    before = p.metrics()
    assert (before["type"], before["records_sent_total"], before["produce_latency"]) == ("producer", 0, None)
    for i in range(40):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    p.flush(30)
    m = p.metrics()
    assert m["client_id"] == "py-metrics-out"
    assert (m["records_sent_total"], m["records_failed_total"], m["records_outstanding"]) == (40, 0, 0)
    assert 2 <= m["batches_sent_total"] <= 40
    assert m["produce_latency"]["count"] >= 1
    nodes = [b for b in m["brokers"] if b["node_id"] is not None]
    assert nodes and nodes[0]["state"] == "up", m["brokers"]
    assert nodes[0]["requests"] >= m["produce_latency"]["count"]

"""The Prometheus exposition against a real broker: Consumer.metrics_prometheus() read by
prometheus_client's own parser, and lagless.prometheus.ConsumerCollector in a registry, give the
values the test counted and the ones Consumer.metrics() has."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from typing import Dict, List, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import lagless
from conftest import member_config, produce
from lagless.prometheus import ConsumerCollector

# Partition 0 gets P0 records of which the test consumes P0_TAKEN (then pauses it) and commits
# P0_COMMITTED; partition 1 gets P1, all consumed and committed.
P0, P0_TAKEN, P0_COMMITTED, P1 = 10, 6, 4, 7

Key = Tuple[str, ...]


def samples(text: str) -> Dict[str, Dict[Key, float]]:
    """Each sample of the text, as prometheus_client's parser reads it: sample name -> sorted
    label items -> value. Fails unless every family is a counter or gauge with HELP and samples
    and the lagless_consumer_ prefix."""
    out: Dict[str, Dict[Key, float]] = {}
    families = list(text_string_to_metric_families(text))
    assert families, text
    for family in families:
        assert family.name.startswith("lagless_consumer_"), family.name
        assert family.type in ("counter", "gauge"), (family.name, family.type)
        assert family.documentation, family.name
        assert family.samples, family.name
        for s in family.samples:
            key = tuple(f"{k}={v}" for k, v in sorted(s.labels.items()))
            assert key not in out.setdefault(s.name, {}), (s.name, key)
            out[s.name][key] = s.value
    return out


def labels(**kv: object) -> Key:
    return tuple(f"{k}={v}" for k, v in sorted(kv.items()))


def consume_some_and_commit(
    bootstrap: str, make_topic, group: str, consumers
) -> Tuple[lagless.Consumer, str, str, int]:
    """A group member that consumed P0_TAKEN records of partition 0 (then paused it) and all of
    partition 1, and committed P0_COMMITTED and P1. Returns it, the topic, its client.id and the
    key + value bytes of what it consumed."""
    topic = make_topic(2, prefix="py-prom")
    produce(bootstrap, topic, P0, partition=0)
    produce(bootstrap, topic, P1, partition=1, prefix="value-")
    client_id = f"py-prom-{uuid.uuid4().hex[:8]}"
    c = lagless.Consumer(member_config(bootstrap, group, **{"client.id": client_id}))
    consumers.append(c)
    c.subscribe([topic])
    got = {0: 0, 1: 0}
    consumed_bytes = 0
    deadline = time.monotonic() + 60
    while got != {0: P0_TAKEN, 1: P1}:
        assert time.monotonic() < deadline, f"consumed {got}"
        for m in c.consume(1, timeout=0.5):
            got[m.partition] += 1
            consumed_bytes += len(m.key or b"") + len(m.value or b"")
            if m.partition == 0 and got[0] == P0_TAKEN:
                c.pause([lagless.TopicPartition(topic, 0)])
    c.commit([lagless.TopicPartition(topic, 0, P0_COMMITTED), lagless.TopicPartition(topic, 1, P1)])
    return c, topic, client_id, consumed_bytes


def test_the_text_parses_with_the_official_parser_and_has_the_counted_values(
    bootstrap, make_topic, group, consumers
):
    c, topic, client_id, consumed_bytes = consume_some_and_commit(bootstrap, make_topic, group, consumers)
    text = c.metrics_prometheus()
    print(text)
    s = samples(text)
    me = labels(client_id=client_id, group_id=group)

    def part(p: int) -> Key:
        return labels(client_id=client_id, group_id=group, topic=topic, partition=p)

    assert s["lagless_consumer_records_consumed_total"] == {me: P0_TAKEN + P1}
    assert s["lagless_consumer_bytes_consumed_total"] == {me: consumed_bytes}
    assert s["lagless_consumer_assigned_partitions"] == {me: 2}
    assert s["lagless_consumer_records_lag"] == {part(0): P0 - P0_TAKEN, part(1): 0}
    assert s["lagless_consumer_committed_offset"] == {part(0): P0_COMMITTED, part(1): P1}
    assert s["lagless_consumer_position"] == {part(0): P0_TAKEN, part(1): P1}
    assert s["lagless_consumer_high_watermark"] == {part(0): P0, part(1): P1}
    assert s["lagless_consumer_partition_records_consumed_total"] == {part(0): P0_TAKEN, part(1): P1}
    assert s["lagless_consumer_partition_paused"] == {part(0): 1, part(1): 0}
    states = s["lagless_consumer_group_state"]
    assert states[labels(client_id=client_id, group_id=group, state="stable")] == 1
    assert sum(states.values()) == 1, states
    assert s["lagless_consumer_group_assigned_partitions"] == {me: 2}
    assert s["lagless_consumer_group_generation"][me] >= 1
    assert s["lagless_consumer_group_rebalances_total"][me] >= 1
    assert s["lagless_consumer_group_max_poll_interval_seconds"] == {me: 300.0}
    # Not failing, no recovery stream: no sample, and no family.
    for absent in ("partition_failing_seconds", "partition_recovery_backlog"):
        assert f"lagless_consumer_{absent}" not in s, absent

    # Each value is the one of its field in Consumer.metrics() (README.md's mapping).
    m = c.metrics()
    assert s["lagless_consumer_buffered_bytes"] == {me: m["buffered_bytes"]}
    assert s["lagless_consumer_fetch_buffer_max_bytes"] == {me: m["fetch_buffer_max_bytes"]}
    assert s["lagless_consumer_group_generation"] == {me: m["group"]["generation_id"]}
    assert s["lagless_consumer_group_rebalances_total"] == {me: m["group"]["rebalance_cnt"]}
    # The JSON's milliseconds are whole: the seconds agree to the millisecond.
    (duration,) = s["lagless_consumer_group_last_rebalance_duration_seconds"].values()
    assert 0 <= duration - m["group"]["rebalance_duration_ms"] / 1000 < 0.001
    fields = {
        "position": "position",
        "committed_offset": "committed_offset",
        "high_watermark": "hi_offset",
        "last_stable_offset": "ls_offset",
        "log_start_offset": "lo_offset",
        "records_lag": "consumer_lag",
        "partition_records_consumed_total": "records_consumed",
        "partition_bytes_consumed_total": "bytes_consumed",
    }
    for p in m["partitions"]:
        for name, field in fields.items():
            assert s[f"lagless_consumer_{name}"][part(p["partition"])] == p[field], (name, p)


def test_the_collector_in_a_registry_gives_the_same_values(bootstrap, make_topic, group, consumers):
    c, topic, client_id, _ = consume_some_and_commit(bootstrap, make_topic, group, consumers)
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(c))

    def value(name: str, **kv: object) -> "float | None":
        return registry.get_sample_value(name, {k: str(v) for k, v in kv.items()})

    part = {"client_id": client_id, "group_id": group, "topic": topic}
    assert value("lagless_consumer_records_lag", **part, partition=0) == P0 - P0_TAKEN
    assert value("lagless_consumer_records_lag", **part, partition=1) == 0
    assert value("lagless_consumer_committed_offset", **part, partition=0) == P0_COMMITTED
    assert value("lagless_consumer_committed_offset", **part, partition=1) == P1
    assert value("lagless_consumer_partition_records_consumed_total", **part, partition=0) == P0_TAKEN
    assert (
        value("lagless_consumer_records_consumed_total", client_id=client_id, group_id=group)
        == P0_TAKEN + P1
    )

    # generate_latest's text, read back by the parser: the same families and counted values.
    out = generate_latest(registry).decode()
    s = samples(out)
    direct = samples(c.metrics_prometheus())
    assert sorted(s) == sorted(direct)
    for name in (
        "lagless_consumer_records_lag",
        "lagless_consumer_committed_offset",
        "lagless_consumer_position",
        "lagless_consumer_records_consumed_total",
        "lagless_consumer_partition_records_consumed_total",
    ):
        assert s[name] == direct[name], name


def test_one_collector_merges_several_consumers_into_one_family_each(bootstrap, make_topic, consumers):
    topic = make_topic(1, prefix="py-prom")
    ids: List[str] = []
    for _ in range(2):
        ids.append(f"py-prom-{uuid.uuid4().hex[:8]}")
        c = lagless.Consumer({"bootstrap.servers": bootstrap, "client.id": ids[-1]})
        c.assign([lagless.TopicPartition(topic, 0)])
        consumers.append(c)
    registry = CollectorRegistry()
    registry.register(ConsumerCollector(*consumers))
    out = generate_latest(registry).decode()
    assert out.count("# TYPE lagless_consumer_records_consumed_total counter\n") == 1, out
    s = samples(out)
    assert s["lagless_consumer_records_consumed_total"] == {labels(client_id=i): 0 for i in ids}
    assert s["lagless_consumer_assigned_partitions"] == {labels(client_id=i): 1 for i in ids}
    assert s["lagless_consumer_partition_records_consumed_total"] == {
        labels(client_id=i, topic=topic, partition=0): 0 for i in ids
    }


def test_without_prometheus_client_the_import_error_says_what_to_install():
    script = (
        "import sys\n"
        "for name in ('prometheus_client', 'prometheus_client.parser', 'prometheus_client.registry',"
        " 'prometheus_client.metrics_core'):\n"
        "    sys.modules[name] = None\n"
        "import lagless\n"
        "try:\n"
        "    import lagless.prometheus\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    print('imported')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "pip install prometheus-client" in out.stdout, out.stdout


def test_a_producer_renders_its_counts_and_the_collector_takes_it_beside_a_consumer(
    bootstrap, make_topic, consumers
):
    """Producer.metrics_prometheus() read by the official parser carries the records the test
    delivered; one ConsumerCollector holds a producer and a consumer, each with its families."""
    topic = make_topic(1, prefix="py-prom-producer")
    client_id = f"py-prom-p-{uuid.uuid4().hex[:8]}"
    p = lagless.Producer({"bootstrap.servers": bootstrap, "client.id": client_id})
    try:
        delivered: List[int] = []
        for i in range(12):
            p.produce(topic, value=f"v{i}",
                      on_delivery=lambda err, md: delivered.append(md[2]) if err is None else None)
        p.flush(30)
        assert sorted(delivered) == list(range(12))
        text = p.metrics_prometheus()
        families = list(text_string_to_metric_families(text))
        assert families, text
        got: Dict[str, Dict[Key, float]] = {}
        for family in families:
            assert family.name.startswith("lagless_producer_"), family.name
            assert family.type in ("counter", "gauge"), (family.name, family.type)
            assert family.documentation, family.name
            assert family.samples, family.name
            for s in family.samples:
                key = tuple(f"{k}={v}" for k, v in sorted(s.labels.items()))
                got.setdefault(s.name, {})[key] = s.value
        me = labels(client_id=client_id)
        m = p.metrics()
        assert got["lagless_producer_records_sent_total"][me] == 12 == m["records_sent_total"]
        assert got["lagless_producer_records_failed_total"][me] == 0
        assert got["lagless_producer_records_outstanding"][me] == 0
        assert got["lagless_producer_batches_sent_total"][me] == m["batches_sent_total"] >= 1
        assert got["lagless_producer_buffer_memory_bytes"][me] == m["buffer_memory"]
        # The broker that took the records: connected, with the requests it answered.
        up = [k for k, v in got["lagless_producer_broker_state"].items() if "state=up" in k and v == 1]
        assert up, got["lagless_producer_broker_state"]
        assert got["lagless_producer_produce_latency_avg_seconds"][me] > 0

        c = lagless.Consumer({"bootstrap.servers": bootstrap, "client.id": client_id + "-c"})
        consumers.append(c)
        registry = CollectorRegistry()
        registry.register(ConsumerCollector(c, p))
        assert registry.get_sample_value(
            "lagless_producer_records_sent_total", {"client_id": client_id}
        ) == 12
        assert registry.get_sample_value(
            "lagless_consumer_records_consumed_total", {"client_id": client_id + "-c"}
        ) == 0
        out = generate_latest(registry).decode()
        names = {f.name for f in text_string_to_metric_families(out)}
        assert "lagless_producer_records_sent" in names and "lagless_consumer_records_consumed" in names, names
    finally:
        p.close()

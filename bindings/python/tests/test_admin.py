"""AdminClient against a real broker: topics (create, describe, grow, delete), offsets, configs,
consumer groups and their committed offsets, per-item errors beside successes in one call, and
what raises (a broker nobody listens at, bad arguments)."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, TypeVar

import pytest

import lagless
from conftest import consume_n, produce, unique

T = TypeVar("T")


def eventually(what: str, probe: Callable[[], T], ok: Callable[[T], bool], within: float = 15.0) -> T:
    """`probe()` until `ok` holds of its answer: a new topic or group reaches every part of the
    broker's metadata a little after the call that made it returns."""
    deadline = time.monotonic() + within
    while True:
        got = probe()
        if ok(got):
            return got
        assert time.monotonic() < deadline, f"{what}: last answer {got!r}"
        time.sleep(0.2)


@pytest.fixture
def admin(bootstrap: str):
    return lagless.AdminClient({"bootstrap.servers": bootstrap})


def described(admin: lagless.AdminClient, topic: str) -> Dict[str, Any]:
    def probe() -> Any:
        return admin.describe_topics([topic], request_timeout=10)[topic]

    d = eventually(
        f"topic {topic} described with leaders",
        probe,
        lambda d: isinstance(d, dict) and all(p["leader"] >= 0 for p in d["partitions"]) and d["partitions"],
    )
    assert isinstance(d, dict)
    return d


def test_created_topics_are_described_with_their_partitions_and_a_second_create_fails_alone(admin):
    a, b = unique("py-admin-a"), unique("py-admin-b")
    first = admin.create_topics([lagless.NewTopic(a, 3, 1)], request_timeout=15)
    assert first == {a: None}
    d = described(admin, a)
    assert d["name"] == a
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert all(p["replicas"] == p["isr"] and len(p["replicas"]) == 1 for p in d["partitions"])
    assert d["is_internal"] is False

    again = admin.create_topics([lagless.NewTopic(a, 3, 1), lagless.NewTopic(b, 2, 1)], request_timeout=15)
    assert list(again) == [a, b]
    assert again[b] is None
    err = again[a]
    assert isinstance(err, lagless.KafkaError), again
    assert err.kafka_code == 36 and err.name == "TOPIC_ALREADY_EXISTS", err
    assert a in str(err)
    assert len(described(admin, b)["partitions"]) == 2

    assert a in admin.list_topics(request_timeout=10).topics
    assert "__consumer_offsets" not in admin.list_topics(request_timeout=10).topics

    missing = unique("py-admin-missing")
    answers = admin.describe_topics([a, missing], request_timeout=10)
    assert isinstance(answers[a], dict)
    assert isinstance(answers[missing], lagless.UnknownTopicError), answers


def test_create_partitions_grows_a_topic_and_refuses_to_shrink_one(admin, make_topic):
    grow, shrink = make_topic(2), make_topic(3)
    answers = admin.create_partitions(
        [lagless.NewPartitions(grow, 5), lagless.NewPartitions(shrink, 1)], request_timeout=15
    )
    assert answers[grow] is None
    err = answers[shrink]
    assert isinstance(err, lagless.KafkaError) and err.kafka_code == 37, answers
    eventually(
        f"{grow} has 5 partitions",
        lambda: described(admin, grow),
        lambda d: [p["partition"] for p in d["partitions"]] == [0, 1, 2, 3, 4],
    )
    assert len(described(admin, shrink)["partitions"]) == 3


def test_list_offsets_gives_the_log_start_and_end_after_a_known_count(admin, bootstrap, make_topic):
    topic = make_topic(2)
    produce(bootstrap, topic, 7, partition=0)
    produce(bootstrap, topic, 3, partition=1)
    tp0, tp1 = lagless.TopicPartition(topic, 0), lagless.TopicPartition(topic, 1)
    latest = admin.list_offsets({tp0: lagless.OffsetSpec.latest(), tp1: lagless.OffsetSpec.latest()})
    assert {k.partition: v["offset"] for k, v in latest.items()} == {0: 7, 1: 3}  # type: ignore[index]
    earliest = admin.list_offsets({tp0: lagless.OffsetSpec.earliest(), tp1: lagless.OffsetSpec.earliest()})
    assert {k.partition: v["offset"] for k, v in earliest.items()} == {0: 0, 1: 0}  # type: ignore[index]
    future = admin.list_offsets({tp0: lagless.OffsetSpec.for_timestamp(int(time.time() * 1000) + 3_600_000)})
    assert future[tp0] == {"offset": -1, "timestamp": -1}
    missing = lagless.TopicPartition(topic, 9)
    mixed = admin.list_offsets({tp1: lagless.OffsetSpec.latest(), missing: lagless.OffsetSpec.latest()})
    assert mixed[tp1] == {"offset": 3, "timestamp": -1}
    assert isinstance(mixed[missing], lagless.LaglessError), mixed


def test_a_groups_committed_offsets_are_listed_altered_and_deleted(admin, bootstrap, make_topic, group, consumers):
    topic = make_topic(2)
    produce(bootstrap, topic, 6, partition=0)
    produce(bootstrap, topic, 4, partition=1)
    tp0, tp1 = lagless.TopicPartition(topic, 0), lagless.TopicPartition(topic, 1)
    c = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "admin-test-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumers.append(c)
    c.subscribe([topic])
    consume_n(c, 10)
    c.commit([lagless.TopicPartition(topic, 0, 5), lagless.TopicPartition(topic, 1, 2)])

    groups = admin.list_consumer_groups(request_timeout=10)
    listed = [g for g in groups if g["group_id"] == group]
    assert len(listed) == 1, groups
    assert listed[0]["protocol_type"] == "consumer"

    desc = admin.describe_consumer_groups([group], request_timeout=10)[group]
    assert isinstance(desc, dict), desc
    assert desc["state"] == "Stable", desc
    assert len(desc["members"]) == 1, desc
    member = desc["members"][0]
    assert member["client_id"] == "admin-test-member"
    assert member["member_id"] == c.member_id()
    assert sorted(member["assignment"]) == [tp0, tp1]

    committed = admin.list_consumer_group_offsets(group, request_timeout=10)
    assert {k: v.offset for k, v in committed.items()} == {tp0: 5, tp1: 2}  # type: ignore[union-attr]

    # The coordinator refuses offsets from outside while a member runs.
    refused = admin.alter_consumer_group_offsets(group, [lagless.TopicPartition(topic, 0, 1)], request_timeout=10)
    assert isinstance(refused[tp0], lagless.LaglessError), refused

    c.close(timeout=10)
    altered = admin.alter_consumer_group_offsets(
        group, [lagless.TopicPartition(topic, 0, 1), lagless.TopicPartition(topic, 1, 3, "why")], request_timeout=10
    )
    assert altered == {tp0: None, tp1: None}
    back = admin.list_consumer_group_offsets(group, [tp0, tp1], request_timeout=10)
    assert [(k.partition, v.offset, v.metadata) for k, v in back.items()] == [(0, 1, ""), (1, 3, "why")]  # type: ignore[union-attr]
    empty = admin.describe_consumer_groups([group], request_timeout=10)[group]
    assert isinstance(empty, dict) and empty["state"] == "Empty" and empty["members"] == [], empty

    assert admin.delete_consumer_group_offsets(group, [tp0], request_timeout=10) == {tp0: None}
    after = admin.list_consumer_group_offsets(group, request_timeout=10)
    assert {k: v.offset for k, v in after.items()} == {tp1: 3}  # type: ignore[union-attr]
    one = admin.list_consumer_group_offsets(group, [tp0], request_timeout=10)
    assert one[tp0].offset == lagless.OFFSET_INVALID  # type: ignore[union-attr]


def test_a_topics_configs_are_described_and_altered_key_by_key(admin, make_topic):
    topic = make_topic(1)
    res = lagless.ConfigResource("topic", topic)
    configs = admin.describe_configs([res], request_timeout=10)[res]
    assert isinstance(configs, dict), configs
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["retention.ms"]["is_default"] is True

    assert admin.incremental_alter_configs({res: {"retention.ms": "123456"}}, request_timeout=10) == {res: None}
    configs = admin.describe_configs([lagless.ConfigResource("TOPIC", topic)], request_timeout=10)[res]
    assert isinstance(configs, dict)
    assert configs["retention.ms"] == {"value": "123456", "read_only": False, "is_default": False, "is_sensitive": False}

    missing = lagless.ConfigResource("topic", unique("py-admin-missing"))
    answers = admin.incremental_alter_configs(
        {res: {"retention.ms": None}, missing: {"retention.ms": "1000"}}, request_timeout=10
    )
    assert answers[res] is None
    assert isinstance(answers[missing], lagless.LaglessError), answers
    configs = admin.describe_configs([res], request_timeout=10)[res]
    assert isinstance(configs, dict) and configs["retention.ms"]["is_default"] is True

    bad_key = admin.incremental_alter_configs({res: {"no.such.config": "1"}}, request_timeout=10)
    err = bad_key[res]
    assert isinstance(err, lagless.KafkaError) and "no.such.config" in str(err), bad_key


def test_deleted_topics_go_and_a_second_delete_fails_alone(admin, make_topic):
    gone, other = make_topic(1), make_topic(1)
    assert admin.delete_topics([gone], request_timeout=15) == {gone: None}
    eventually(f"{gone} no longer listed", lambda: admin.list_topics(request_timeout=10).topics, lambda ts: gone not in ts)
    answers = admin.delete_topics([gone, other], request_timeout=15)
    assert answers[other] is None
    err = answers[gone]
    assert isinstance(err, lagless.KafkaError) and err.kafka_code == 3, answers


def test_describe_cluster_names_the_broker_it_was_bootstrapped_from(admin, bootstrap):
    c = admin.describe_cluster(request_timeout=10)
    assert c["cluster_id"]
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    assert any(b["port"] == int(port) for b in c["brokers"]), c
    assert c["controller_id"] in {b["id"] for b in c["brokers"]} or c["controller_id"] == -1


def test_a_broker_nobody_listens_at_raises_within_the_timeout_naming_the_address():
    admin = lagless.AdminClient({"bootstrap.servers": "127.0.0.1:1"})
    start = time.monotonic()
    with pytest.raises(lagless.LaglessError) as info:
        admin.create_topics([lagless.NewTopic(unique("py-admin-never"), 1, 1)], request_timeout=2)
    took = time.monotonic() - start
    assert took < 4, took
    assert "127.0.0.1:1" in str(info.value), info.value
    with pytest.raises(lagless.LaglessError) as info:
        admin.list_consumer_groups(request_timeout=1)
    assert "127.0.0.1:1" in str(info.value), info.value


def test_bad_arguments_raise_naming_what_is_wrong(admin, bootstrap):
    with pytest.raises(lagless.ConfigError) as cfg:
        lagless.AdminClient({"bootstrap.servers": bootstrap, "no.such.key": "1"})
    assert cfg.value.key == "no.such.key"
    cases = [
        (lambda: admin.create_topics([lagless.NewTopic("", 1, 1)]), "empty"),
        (lambda: admin.create_topics([lagless.NewTopic("t", 0, 1)]), "num_partitions"),
        (lambda: admin.create_topics([lagless.NewTopic("t", 1, 0)]), "replication_factor"),
        (lambda: admin.create_topics([lagless.NewTopic("t", 1, 1), lagless.NewTopic("t", 2, 1)]), "twice"),
        (lambda: admin.create_partitions([lagless.NewPartitions("t", 0)]), "new_total_count"),
        (lambda: admin.delete_topics(["a", ""]), "empty"),
        (lambda: admin.describe_consumer_groups([""]), "empty"),
        (lambda: admin.list_consumer_group_offsets(""), "group id"),
        (lambda: admin.alter_consumer_group_offsets("g", [lagless.TopicPartition("t", 0)]), "offset"),
        (lambda: admin.alter_consumer_group_offsets("g", [lagless.TopicPartition("t", -1, 3)]), "partition -1"),
        (lambda: admin.delete_consumer_group_offsets("g", []), "empty"),
        (lambda: lagless.ConfigResource("cluster", "x"), "restype"),
        (lambda: lagless.ConfigResource("broker", "one"), "node id"),
        (lambda: lagless.OffsetSpec.for_timestamp(-5), "timestamp"),
        (lambda: admin.incremental_alter_configs({lagless.ConfigResource("topic", "t"): {}}), "no config change"),
    ]
    for call, words in cases:
        with pytest.raises(lagless.InvalidArgumentError) as info:
            call()
        assert words in str(info.value), (words, info.value)
    with pytest.raises(TypeError):
        admin.delete_topics("just-one-topic")
    with pytest.raises(TypeError):
        admin.create_topics(lagless.NewTopic("t", 1, 1))  # type: ignore[arg-type]


def test_a_client_metrics_subscription_is_a_config_resource():
    r = lagless.ConfigResource("client_metrics", "all-consumers")
    assert (r.restype, r.name) == ("client_metrics", "all-consumers")
    assert r == lagless.ConfigResource("CLIENT_METRICS", "all-consumers")
    with pytest.raises(lagless.InvalidArgumentError, match="subscription name is empty"):
        lagless.ConfigResource("client_metrics", "")
    with pytest.raises(lagless.InvalidArgumentError, match="client_metrics"):
        lagless.ConfigResource("group", "g")


def test_list_topics_gives_cluster_metadata_with_each_partitions_leader_replicas_and_isrs(admin, make_topic):
    topic = make_topic(3)
    described(admin, topic)  # every partition has its leader by now
    md = admin.list_topics(request_timeout=10)
    assert isinstance(md, lagless.ClusterMetadata), md
    assert md.cluster_id and md.brokers, vars(md)
    assert md.controller_id in md.brokers and md.orig_broker_id is None, vars(md)
    for broker_id, b in md.brokers.items():
        assert isinstance(b, lagless.BrokerMetadata) and b.id == broker_id and b.host and b.port > 0
    t = md.topics[topic]
    assert isinstance(t, lagless.TopicMetadata) and t.topic == topic and t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    for pid, p in t.partitions.items():
        assert isinstance(p, lagless.PartitionMetadata) and p.id == pid and p.error is None
        assert p.leader in md.brokers, (p.leader, md.brokers)
        assert p.replicas == [p.leader] and p.isrs == [p.leader], vars(p)
    assert "__consumer_offsets" not in md.topics


def test_append_and_subtract_change_one_item_of_a_list_config(admin, make_topic):
    topic = make_topic(1)
    res = lagless.ConfigResource("topic", topic)
    op = lagless.AlterConfigOpType
    assert [op.SET, op.DELETE, op.APPEND, op.SUBTRACT] == [0, 1, 2, 3]  # Kafka's codes

    def policy() -> str:
        configs = admin.describe_configs([res], request_timeout=10)[res]
        assert isinstance(configs, dict), configs
        return configs["cleanup.policy"]["value"]

    assert policy() == "delete"
    answers = admin.incremental_alter_configs({res: {"cleanup.policy": (op.APPEND, "compact")}}, request_timeout=10)
    assert answers == {res: None}
    assert policy() == "delete,compact"
    answers = admin.incremental_alter_configs({res: {"cleanup.policy": (op.SUBTRACT, "delete")}}, request_timeout=10)
    assert answers == {res: None}
    assert policy() == "compact"
    # The pair forms of SET and DELETE are the str and None forms.
    assert admin.incremental_alter_configs({res: {"cleanup.policy": (op.SET, "delete")}}, request_timeout=10) == {res: None}
    assert policy() == "delete"
    assert admin.incremental_alter_configs({res: {"retention.ms": (op.SET, "5000")}}, request_timeout=10) == {res: None}
    assert admin.incremental_alter_configs({res: {"retention.ms": (op.DELETE, None)}}, request_timeout=10) == {res: None}
    configs = admin.describe_configs([res], request_timeout=10)[res]
    assert isinstance(configs, dict) and configs["retention.ms"]["is_default"] is True
    with pytest.raises(lagless.InvalidArgumentError, match="APPEND of `cleanup.policy` needs a value"):
        admin.incremental_alter_configs({res: {"cleanup.policy": (op.APPEND, None)}})
    with pytest.raises(lagless.InvalidArgumentError, match="must be an AlterConfigOpType, got 7"):
        admin.incremental_alter_configs({res: {"cleanup.policy": (7, "x")}})
    with pytest.raises(TypeError, match="the value of `cleanup.policy`"):
        admin.incremental_alter_configs({res: {"cleanup.policy": 5}})


def test_a_closed_admin_client_raises_closed_and_the_with_block_closes_it(bootstrap):
    with lagless.AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.describe_cluster(request_timeout=10)["brokers"]
    with pytest.raises(lagless.ClosedError):
        admin.describe_cluster(request_timeout=10)
    with pytest.raises(lagless.ClosedError):
        admin.list_topics(request_timeout=10)
    admin.close()  # again: nothing
    other = lagless.AdminClient({"bootstrap.servers": bootstrap})
    other.close()
    with pytest.raises(lagless.ClosedError):
        other.create_topics([lagless.NewTopic(unique("py-admin-closed"), 1, 1)])

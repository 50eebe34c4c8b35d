"""lagless, Java and librdkafka clients on the broker's security listeners (`kafka_broker.py
--security`), each configured with its own property names through `--config KEY=VALUE`, as members
of one group."""

from __future__ import annotations

import pytest

from clients import Clients, wait_until


def sasl_ssl_scram512(kind: str, kafka, user: str) -> list[str]:
    """The --config arguments of one client for SASL_SSL with SCRAM-SHA-512 as `user`, trusting
    the test CA (host name verification on: the broker's certificate names 127.0.0.1)."""
    password = kafka.users[user]
    if kind == "java":  # lagless reads librdkafka's names, below, and the Java client's
        props = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": kafka.file("ca"),
        }
    else:
        props = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": kafka.file("ca"),
            "ssl.endpoint.identification.algorithm": "https",
        }
    return [arg for k, v in props.items() for arg in ("--config", f"{k}={v}")]


@pytest.fixture
def secure_clients(secure_kafka, lagless_tool, java_client, tmp_path):
    c = Clients(secure_kafka.listener("SASL_SSL"), lagless_tool, java_client, tmp_path)
    try:
        yield c
    finally:
        c.stop_all()


MEMBERS = (("java", "alice"), ("rdkafka", "bob"), ("lagless", "alice"))
PARTITIONS = 6


def test_lagless_java_and_librdkafka_share_a_sasl_ssl_group(secure_kafka, secure_clients):
    """A lagless, a Java and a librdkafka member share a group on the SASL_SSL listener
    (SCRAM-SHA-512, two users); each produces there; every record is read exactly once, each
    partition by one member."""
    k, c = secure_kafka, secure_clients
    topic = k.create_topic(f"sasl-ssl-{id(c):x}", partitions=PARTITIONS)
    group = f"{topic}-group"
    members = [c.start(kind, "consume", topic, "--group", group, "--commit",
                       *sasl_ssl_scram512(kind, k, user))
               for kind, user in MEMBERS]

    def settled():  # every member owns partitions, together all of them, none twice
        owned = [m.assignment() for m in members]
        return all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))

    wait_until(settled, 120, f"the {len(MEMBERS)} members to share the {PARTITIONS} partitions",
               details=lambda: "\n".join(m.stderr_tail() for m in members))
    produced = {}
    for kind, user in MEMBERS:
        # Keys tell the producers apart (lagless_tool writes key-<i>, from --start on).
        keys = ("--start", 100000) if kind == "lagless" else ("--key-prefix", f"{kind}-")
        p = c.run(kind, "produce", topic, "--count", 200, "--keyed", *keys,
                  *sasl_ssl_scram512(kind, k, user))
        for r in p.records():
            produced[(r["partition"], r["offset"])] = r["key"]
    assert len(produced) == 200 * len(MEMBERS)

    def read() -> list:
        return [((r["partition"], r["offset"]), r["key"]) for m in members for r in m.records()]

    wait_until(lambda: dict(read()).keys() >= produced.keys(), 60, "every record to be read",
               details=lambda: "\n".join(m.stderr_tail() for m in members))
    assert dict(read()) == produced  # nothing lost, nothing altered
    assert len(read()) == len(produced), "a record was read twice: two members owned a partition"
    for m in members:  # each member read exactly its own partitions
        parts = {r["partition"] for r in m.records()}
        assert parts and parts <= m.assignment(), (m.name, parts, m.assignment())
    for m in members:  # SIGTERM: each closes cleanly, leaving the group
        m.terminate()
        done = [e for e in m.events() if e["event"] == "done"]
        assert done and done[-1]["reason"] == "signal", m.stderr_tail()

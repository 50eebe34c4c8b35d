"""TLS and SASL from Python, against the security listeners of the project's harness
(`python3 tests/kafka_broker.py run --security -- ...`; tests/run starts its broker so).

Round trips (produce, group consume, commit) over SSL with a CA file, mutual TLS, SASL_SSL with
SCRAM-SHA-512 and OAUTHBEARER tokens from an `oauth_cb` callable, every offset counted; and the
failures a user meets: a wrong password, a failing or malformed `oauth_cb`, TLS errors, each
asserting the exception class and that the message names the cause and shows no secret.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import lagless

from conftest import unique

RUN_UNDER = ("run under `python3 tests/kafka_broker.py run --security -- bindings/python/run-tests.sh` "
             "(tests/run does)")
PARTITIONS = 3


class Security:
    """The harness's security.json: listener addresses, certificate files and users."""

    def __init__(self) -> None:
        d = os.environ.get("LAGLESS_SECURITY_DIR")
        if not d:
            pytest.fail(f"LAGLESS_SECURITY_DIR is not set: {RUN_UNDER}")
        self.info = json.loads((Path(d) / "security.json").read_text())
        self.users: Dict[str, str] = {u["name"]: u["password"] for u in self.info["users"]}

    def bootstrap(self, listener: str) -> str:
        return self.info["listeners"][listener]["bootstrap"]

    def file(self, name: str) -> str:
        return self.info["files"][name]

    def ssl(self, listener: str = "SSL") -> Dict[str, object]:
        return {"bootstrap.servers": self.bootstrap(listener), "security.protocol": "SSL",
                "ssl.ca.location": self.file("ca")}

    def scram(self, user: str, password: str) -> Dict[str, object]:
        return {"bootstrap.servers": self.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.ca.location": self.file("ca"), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password}

    def oauth(self, oauth_cb) -> Dict[str, object]:
        return {"bootstrap.servers": self.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.ca.location": self.file("ca"), "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.config": "scope=test", "oauth_cb": oauth_cb}


@pytest.fixture(scope="module")
def sec() -> Security:
    return Security()


def unsecured_token(sub: str, lifetime_s: float = 3600.0) -> Tuple[str, float]:
    """An unsigned JWS (alg none), as the broker's unsecured validator takes, and its expiry."""
    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    now = time.time()
    exp = now + lifetime_s
    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': int(now), 'exp': int(exp)})}.", exp


def round_trip(bootstrap: str, security: Dict[str, object], records: int = 300) -> None:
    """Produces `records` over `security`, consumes them in a group and commits: every offset
    delivered once, read once, and committed at the log end."""
    topic = unique("py-security")
    lagless.create_topic(bootstrap, topic, PARTITIONS)  # the admin helper speaks PLAINTEXT
    delivered: List[Tuple[int, int]] = []
    failed: List[lagless.LaglessError] = []

    def on_delivery(err, meta) -> None:
        if err is not None:
            failed.append(err)
        else:
            delivered.append((meta[1], meta[2]))

    with lagless.Producer(dict(security, **{"linger.ms": 5})) as p:
        for i in range(records):
            p.produce(topic, value=f"value-{i}".encode(), partition=i % PARTITIONS,
                      on_delivery=on_delivery)
        p.flush(60)
    assert not failed, failed[:3]
    want = {(part, off) for part in range(PARTITIONS)
            for off in range(len(range(part, records, PARTITIONS)))}
    assert sorted(delivered) == sorted(want), "a delivery report is missing or repeated"

    c = lagless.Consumer(dict(security, **{"group.id": unique("py-security-group"),
                                           "auto.offset.reset": "earliest",
                                           "enable.auto.commit": False}))
    try:
        c.subscribe([topic])
        seen: Dict[Tuple[int, int], int] = {}
        deadline = time.monotonic() + 60
        while len(seen) < records:
            assert time.monotonic() < deadline, f"read {len(seen)} of {records} records"
            for m in c.consume(500, timeout=0.5):
                seen[(m.partition, m.offset)] = seen.get((m.partition, m.offset), 0) + 1
                assert m.value == f"value-{m.offset * PARTITIONS + m.partition}".encode()
        assert set(seen) == want, "a record is missing or foreign"
        assert all(n == 1 for n in seen.values()), "a record was read twice"
        c.commit(asynchronous=False)
        committed = c.committed([lagless.TopicPartition(topic, p) for p in range(PARTITIONS)])
        assert {tp.partition: tp.offset for tp in committed} == {
            p: len(range(p, records, PARTITIONS)) for p in range(PARTITIONS)}
    finally:
        c.close()


def first_error(config: Dict[str, object], within: float = 30.0) -> Tuple[lagless.LaglessError, float]:
    """The first error a group consumer made from `config` raises, and how long it took."""
    started = time.monotonic()
    c = lagless.Consumer(dict(config, **{"group.id": unique("py-security-error")}))
    try:
        c.subscribe(["lagless-security-error"])
        while time.monotonic() - started < within:
            try:
                c.poll(0.1)
            except lagless.LaglessError as e:
                return e, time.monotonic() - started
        pytest.fail(f"no error within {within} s")
    finally:
        try:
            c.close(timeout=5)
        except lagless.LaglessError:
            pass


def check_fatal(e: lagless.LaglessError, cls: type, name: str, says: List[str],
                secrets: Tuple[str, ...] = ()) -> None:
    assert type(e) is cls, f"{type(e).__name__}: {e}"
    assert e.name == name and e.fatal and not e.retriable, (e.name, e.fatal, e.retriable)
    for s in says:
        assert s in str(e), f"`{s}` not in: {e}"
    for s in secrets:
        assert s not in str(e) and s not in repr(e) and s not in repr(e.args), f"secret in: {e!r}"


def test_ssl_round_trip_with_a_ca_file(bootstrap, sec):
    round_trip(bootstrap, sec.ssl())


def test_mutual_tls_round_trip(bootstrap, sec):
    round_trip(bootstrap, dict(sec.ssl("MTLS"), **{"ssl.certificate.location": sec.file("client_cert"),
                                                   "ssl.key.location": sec.file("client_key")}))


def test_sasl_ssl_scram_sha_512_round_trip(bootstrap, sec):
    round_trip(bootstrap, sec.scram("alice", sec.users["alice"]))


def test_oauthbearer_round_trip_with_tokens_from_oauth_cb(bootstrap, sec):
    calls: List[Tuple[str, str]] = []

    def oauth_cb(oauthbearer_config: str) -> Tuple[str, float, Optional[str]]:
        calls.append((oauthbearer_config, threading.current_thread().name))
        token, expiry = unsecured_token("alice")
        return token, expiry, "alice"

    round_trip(bootstrap, sec.oauth(oauth_cb))
    assert calls, "oauth_cb was never called"
    assert all(arg == "scope=test" for arg, _ in calls), calls
    # Tokens are cached until 80% of their lifetime: one per client (producer, consumer), not
    # one per connection.
    assert len(calls) <= 4, calls


def test_a_wrong_password_is_an_authentication_error_naming_the_mechanism(sec):
    e, took = first_error(sec.scram("alice", "not-alice-s-password-42"))
    check_fatal(e, lagless.AuthenticationError, "AUTHENTICATION",
                ["SCRAM-SHA-512", sec.bootstrap("SASL_SSL"), "SASL_AUTHENTICATION_FAILED"],
                ("not-alice-s-password-42",))
    assert not isinstance(e, lagless.SslError)
    assert took < 15, f"took {took:.1f} s: {e}"


def test_an_oauth_cb_that_raises_is_an_authentication_error_naming_the_cause(sec):
    def oauth_cb(_config: str):
        raise ConnectionRefusedError("token service at idp.example is down")

    e, _ = first_error(sec.oauth(oauth_cb))
    check_fatal(e, lagless.AuthenticationError, "AUTHENTICATION",
                ["oauth_cb raised ConnectionRefusedError", "token service at idp.example is down"])


@pytest.mark.parametrize("answer, says", [
    ("just-a-token", "oauth_cb must return (token, expiry)"),
    (("tok",), "it returned 1 items"),
    ((b"tok", time.time() + 60), "returned a bytes as the token"),
    (("tok", "tomorrow"), "returned a str as the expiry"),
    (("tok", -5.0), "returned the expiry -5"),
    (("tok", time.time() + 60, "alice", {"ext": 1}), "not a dict of str to str"),
])
def test_an_oauth_cb_with_a_malformed_answer_says_what_is_wrong(sec, answer, says):
    e, _ = first_error(sec.oauth(lambda _config: answer))
    check_fatal(e, lagless.AuthenticationError, "AUTHENTICATION", [says])


def test_an_expired_token_from_oauth_cb_is_refused_without_showing_it(sec):
    token, _ = unsecured_token("alice")
    e, _ = first_error(sec.oauth(lambda _config: (token, time.time() - 10, "alice")))
    check_fatal(e, lagless.AuthenticationError, "AUTHENTICATION", ["expired"], (token,))


def test_oauth_cb_must_be_callable(sec):
    with pytest.raises(TypeError, match="oauth_cb.*must be callable"):
        lagless.Consumer(sec.oauth("not a function"))


def test_an_untrusted_broker_certificate_is_an_ssl_error(sec):
    e, took = first_error(dict(sec.ssl(), **{"ssl.ca.location": sec.file("other_ca")}))
    check_fatal(e, lagless.SslError, "SSL", ["not trusted", sec.bootstrap("SSL")])
    assert isinstance(e, lagless.AuthenticationError) and e.code == 16
    assert took < 15, f"took {took:.1f} s: {e}"


def test_an_expired_broker_certificate_says_when_it_expired(sec):
    e, _ = first_error(sec.ssl("SSL_EXPIRED"))
    check_fatal(e, lagless.SslError, "SSL", ["expired on "])
    assert re.search(r"expired on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", str(e)), str(e)


def test_a_plaintext_client_on_a_tls_listener_is_an_ssl_error(sec):
    e, _ = first_error({"bootstrap.servers": sec.bootstrap("SSL")})
    check_fatal(e, lagless.SslError, "SSL", ["security.protocol", "mismatch"])

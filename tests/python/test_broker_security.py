"""Tests of the security listeners of tests/kafka_broker.py (`--security`): each listener is
checked with a real TLS handshake (Python's ssl module) or a real SASL exchange (SaslHandshake v1
and SaslAuthenticate v1 encoded here), against one broker started for this module the way every
suite gets it: `kafka_broker.py run --security --reauth-ms 4000 -- CMD`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kafka_broker
from kafka_broker import _Reader, _str, kafka_connect, kafka_exchange
from kafka_fixtures import SecureKafka

SCRIPT = Path(kafka_broker.__file__).resolve()
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATION_FAILED = 58


# --------------------------------------------------------------------------------------------
# TLS and SASL clients, just enough to prove each listener does what its name says
# --------------------------------------------------------------------------------------------

def tls_context(cafile: str, cert: str | None = None, key: str | None = None,
                password: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)  # verifies the chain and the host name
    if cert:
        ctx.load_cert_chain(cert, key, password)
    return ctx


def tls_error(address: str, ctx: ssl.SSLContext, server_hostname: str | None = None) -> Exception:
    """The error of an ApiVersions request over TLS that must fail.  With TLS 1.3 a refused
    client certificate shows only on the first read, so the request is part of the attempt."""
    try:
        with kafka_connect(address, tls=ctx, server_hostname=server_hostname) as s:
            kafka_exchange(s, 18, 0, b"")
    except (ssl.SSLError, OSError) as e:
        return e
    raise AssertionError(f"TLS to {address} succeeded")


def sasl_handshake(sock, mechanism: str) -> tuple[int, list[str]]:
    r = _Reader(kafka_exchange(sock, SASL_HANDSHAKE, 1, _str(mechanism)))
    return r.i16(), r.array(r.string)


def sasl_authenticate(sock, auth_bytes: bytes) -> dict:
    """SaslAuthenticate v1 (v1 adds session_lifetime_ms, KIP-368)."""
    r = _Reader(kafka_exchange(sock, SASL_AUTHENTICATE, 1, struct.pack(">i", len(auth_bytes)) + auth_bytes))
    return {"error": r.i16(), "message": r.string(), "auth_bytes": r.bytes_(),
            "session_lifetime_ms": r.i64()}


def plain_login(sock, user: str, password: str) -> dict:
    err, _ = sasl_handshake(sock, "PLAIN")
    assert err == 0
    return sasl_authenticate(sock, f"\0{user}\0{password}".encode())


def scram_login(sock, mechanism: str, user: str, password: str) -> dict:
    """RFC 5802 client side; checks the broker's signature when it accepts."""
    err, _ = sasl_handshake(sock, mechanism)
    assert err == 0
    h = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    first = sasl_authenticate(sock, f"n,,{first_bare}".encode())
    if first["error"]:
        return first
    server_first = first["auth_bytes"].decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    assert attrs["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    final_bare = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.new(hashlib.new(h, client_key).digest(), auth_message, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    final = sasl_authenticate(sock, f"{final_bare},p={proof}".encode())
    if final["error"] == 0:
        server_key = hmac.new(salted, b"Server Key", h).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, h).digest()).decode()
        assert final["auth_bytes"].decode() == f"v={expected}"
    return final


def unsecured_token(sub: str, lifetime_s: int = 3600) -> str:
    """An unsigned JWS (alg none), what the broker's default OAUTHBEARER validator accepts."""
    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    now = int(time.time())
    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': now, 'exp': now + lifetime_s})}."


def oauthbearer_login(sock, token: str) -> dict:
    err, _ = sasl_handshake(sock, "OAUTHBEARER")
    assert err == 0
    r = sasl_authenticate(sock, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    if r["error"] == 0 and r["auth_bytes"]:  # RFC 7628: an error challenge, answered with ^A
        r = sasl_authenticate(sock, b"\x01") | {"challenge": r["auth_bytes"].decode()}
    return r


def assert_authenticated(sock) -> None:
    """After a successful SASL exchange the connection serves Kafka requests."""
    r = _Reader(kafka_exchange(sock, 18, 0, b""))
    assert r.i16() == 0


# --------------------------------------------------------------------------------------------
# The broker properties, from literal inputs (no broker)
# --------------------------------------------------------------------------------------------

def props_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_without_security_the_listeners_are_as_before():
    node = kafka_broker.Node(1, 9092, 9093, Path("/n"))
    node.listener_ports = {"SSL": 9094}  # ignored without certificates
    assert kafka_broker.listener_properties(node, None, None) == (
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "advertised.listeners=PLAINTEXT://127.0.0.1:9092\n"
        "controller.listener.names=CONTROLLER\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n")


def test_security_listener_properties(tmp_path):
    certs = {}
    for name in ("ca", "broker_cert", "broker_key", "broker_expired_cert", "broker_wronghost_cert"):
        certs[name] = tmp_path / f"{name}.pem"
        certs[name].write_text(f"-----BEGIN {name}-----\nAAAA\n-----END {name}-----\n")
    node = kafka_broker.Node(1, 9092, 9093, Path("/n"))
    node.listener_ports = dict(zip(kafka_broker.SECURITY_LISTENERS, range(9100, 9106)))
    p = props_of(kafka_broker.listener_properties(node, certs, None))
    assert p["listeners"] == ("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9100,MTLS://127.0.0.1:9101,"
                              "SSL_EXPIRED://127.0.0.1:9102,SSL_WRONGHOST://127.0.0.1:9103,"
                              "SASL_PLAINTEXT://127.0.0.1:9104,SASL_SSL://127.0.0.1:9105,"
                              "CONTROLLER://127.0.0.1:9093")
    assert p["advertised.listeners"] == p["listeners"].rsplit(",", 1)[0]
    assert p["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SSL_EXPIRED:SSL,SSL_WRONGHOST:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    assert p["inter.broker.listener.name"] == "PLAINTEXT"
    # Client certificates: required on MTLS only.
    assert p["ssl.client.auth"] == "none" and p["listener.name.mtls.ssl.client.auth"] == "required"
    assert [k for k in p if k.endswith("ssl.client.auth")] == ["ssl.client.auth",
                                                               "listener.name.mtls.ssl.client.auth"]
    # Each TLS listener's certificate, inline with escaped newlines.
    inline = lambda name: f"-----BEGIN {name}-----\\nAAAA\\n-----END {name}-----"  # noqa: E731
    assert p["ssl.keystore.certificate.chain"] == inline("broker_cert")
    assert p["listener.name.ssl_expired.ssl.keystore.certificate.chain"] == inline("broker_expired_cert")
    assert p["listener.name.ssl_wronghost.ssl.keystore.certificate.chain"] == inline("broker_wronghost_cert")
    for prefix in ("", "listener.name.ssl_expired.", "listener.name.ssl_wronghost."):
        assert p[f"{prefix}ssl.keystore.key"] == inline("broker_key")
        assert p[f"{prefix}ssl.keystore.type"] == "PEM"
    assert p["ssl.truststore.location"] == str(certs["ca"])
    # Every SASL listener x mechanism pair has its JAAS line (else the broker does not start).
    for listener in ("sasl_plaintext", "sasl_ssl"):
        assert p[f"listener.name.{listener}.sasl.enabled.mechanisms"] == \
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
        jaas = {m: p[f"listener.name.{listener}.{m}.sasl.jaas.config"]
                for m in ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer")}
        assert 'user_alice="alice-secret" user_bob="bob-secret";' in jaas["plain"]
        assert "ScramLoginModule required;" in jaas["scram-sha-512"]
        assert "OAuthBearerLoginModule required;" in jaas["oauthbearer"]
    assert "connections.max.reauth.ms" not in p
    with_reauth = props_of(kafka_broker.listener_properties(node, certs, 4000))
    assert with_reauth["connections.max.reauth.ms"] == "4000"


def test_scram_users_are_created_for_both_mechanisms_at_format():
    args = kafka_broker.scram_format_args()
    assert args[0::2] == ["--add-scram"] * 4
    assert args[1::2] == ["SCRAM-SHA-256=[name=alice,password=alice-secret]",
                          "SCRAM-SHA-256=[name=bob,password=bob-secret]",
                          "SCRAM-SHA-512=[name=alice,password=alice-secret]",
                          "SCRAM-SHA-512=[name=bob,password=bob-secret]"]


def test_certificates(tmp_path):
    files = kafka_broker.write_certificates(tmp_path)

    def show(name: str) -> str:
        return subprocess.run(["openssl", "x509", "-in", str(files[name]), "-noout", "-subject",
                               "-issuer", "-checkend", "0", "-ext",
                               "subjectAltName,extendedKeyUsage,basicConstraints"],
                              capture_output=True, text=True).stdout

    broker, client = show("broker_cert"), show("client_cert")
    assert "DNS:localhost, IP Address:127.0.0.1" in broker
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in broker
    assert "TLS Web Client Authentication" in client and "Server Authentication" not in client
    assert "CN = lagless-client" in client and "CA:FALSE" in client
    assert "Certificate will not expire" in broker and "Certificate will expire" in show("broker_expired_cert")
    assert "DNS:wrong.example" in show("broker_wronghost_cert") and "127.0.0.1" not in show("broker_wronghost_cert")
    for name in ("broker_cert", "broker_expired_cert", "broker_wronghost_cert", "client_cert"):
        verify = subprocess.run(["openssl", "verify", "-CAfile", str(files["ca"]), "-no_check_time",
                                 str(files[name])], capture_output=True, text=True)
        assert verify.returncode == 0, verify.stderr  # all issued by the test CA
    other = subprocess.run(["openssl", "verify", "-CAfile", str(files["other_ca"]), str(files["broker_cert"])],
                           capture_output=True, text=True)
    assert other.returncode != 0
    assert files["client_key"].read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert files["client_key_encrypted"].read_text().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert files["client_chain"].read_text() == files["client_cert"].read_text() + files["ca"].read_text()
    # The JKS truststore is one Java reads, with the test CA in it.
    listed = subprocess.run(["keytool", "-list", "-rfc", "-storetype", "JKS", "-keystore", str(files["ca_jks"]),
                             "-storepass", kafka_broker.JKS_PASSWORD], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "Alias name: lagless-test-ca" in listed.stdout and "trustedCertEntry" in listed.stdout
    assert "".join(files["ca"].read_text().split()) in "".join(listed.stdout.split())


# --------------------------------------------------------------------------------------------
# The broker: `run --security --reauth-ms 4000 -- CMD`, CMD waiting until the module is done
# --------------------------------------------------------------------------------------------

REAUTH_MS = 4000
ENV_VARS = ["LAGLESS_BOOTSTRAP", "LAGLESS_SSL_BOOTSTRAP", "LAGLESS_MTLS_BOOTSTRAP",
            "LAGLESS_SSL_EXPIRED_BOOTSTRAP", "LAGLESS_SSL_WRONGHOST_BOOTSTRAP",
            "LAGLESS_SASL_PLAINTEXT_BOOTSTRAP", "LAGLESS_SASL_SSL_BOOTSTRAP", "LAGLESS_SECURITY_DIR"]


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """A SecureKafka for the broker of `run --security`, whose command writes the environment it
    got (secure.env) and waits for its stdin to close.  At the end `run` must stop the broker and
    remove its directory, certificates included."""
    d = tmp_path_factory.mktemp("run-security")
    cluster_dir, env_file = d / "cluster", d / "env.json"
    code = ("import json, os, sys; "
            f"open({str(env_file) + '.tmp'!r}, 'w').write(json.dumps(dict(os.environ))); "
            f"os.rename({str(env_file) + '.tmp'!r}, {str(env_file)!r}); sys.stdin.read()")
    with open(d / "run.stderr", "w") as err:
        proc = subprocess.Popen([sys.executable, str(SCRIPT), "run", "--security", "--reauth-ms",
                                 str(REAUTH_MS), "--dir", str(cluster_dir), "--", sys.executable, "-c", code],
                                stdin=subprocess.PIPE, stderr=err, text=True)
    try:
        deadline = time.monotonic() + 240
        while not env_file.exists():
            assert proc.poll() is None, (d / "run.stderr").read_text()
            assert time.monotonic() < deadline, "run --security did not start its command in 240 s"
            time.sleep(0.2)
        env = json.loads(env_file.read_text())
        k = SecureKafka(env["LAGLESS_SECURITY_DIR"])
        k.env = env
        yield k
    finally:
        proc.stdin.close()  # the command ends, `run` stops the broker
        rc = proc.wait(120)
    assert rc == 0, (d / "run.stderr").read_text()
    assert not cluster_dir.exists()


# --------------------------------------------------------------------------------------------
# TLS listeners
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_ssl_listener_verifies_against_the_test_ca(secure):
    k = secure
    ctx = tls_context(k.file("ca"))
    for host in ("127.0.0.1", "localhost"):  # both names are in the certificate
        with kafka_connect(k.listener("SSL"), tls=ctx, server_hostname=host) as s:
            san = s.getpeercert()["subjectAltName"]
            assert ("DNS", "localhost") in san and ("IP Address", "127.0.0.1") in san
            assert _Reader(kafka_exchange(s, 18, 0, b"")).i16() == 0
    assert 1 in kafka_broker.api_versions(k.listener("SSL"), tls=ctx)  # Metadata is listed
    e = tls_error(k.listener("SSL"), tls_context(k.file("other_ca")))
    assert isinstance(e, ssl.SSLCertVerificationError), e
    assert "unable to get local issuer certificate" in e.verify_message


@pytest.mark.slow
def test_mtls_listener_wants_a_client_certificate(secure, tmp_path):
    k = secure
    e = tls_error(k.listener("MTLS"), tls_context(k.file("ca")))
    assert "certificate" in str(e).lower(), e  # e.g. "alert certificate required"
    ok = [tls_context(k.file("ca"), k.file("client_cert"), k.file("client_key")),
          tls_context(k.file("ca"), k.file("client_chain"), k.file("client_key_encrypted"),
                      k.info["client_key_password"])]
    for ctx in ok:
        assert 3 in kafka_broker.api_versions(k.listener("MTLS"), tls=ctx)
    # client.p12 holds the same certificate and key, under its own password.
    pem = subprocess.run(["openssl", "pkcs12", "-in", k.file("client_p12"), "-nodes",
                          "-passin", f"pass:{k.info['client_p12_password']}"],
                         capture_output=True, text=True, check=True).stdout
    assert pem.count("BEGIN CERTIFICATE") == 2 and "BEGIN PRIVATE KEY" in pem
    (tmp_path / "from-p12.pem").write_text(pem)
    ctx = tls_context(k.file("ca"), str(tmp_path / "from-p12.pem"))
    assert 3 in kafka_broker.api_versions(k.listener("MTLS"), tls=ctx)
    # The unencrypted and the encrypted key are the same key, the encrypted one needs the password.
    with pytest.raises(ssl.SSLError):
        tls_context(k.file("ca"), k.file("client_cert"), k.file("client_key_encrypted"), "wrong")


@pytest.mark.slow
def test_expired_and_wronghost_listeners_fail_verification_for_their_reason(secure):
    k = secure
    ctx = tls_context(k.file("ca"))
    e = tls_error(k.listener("SSL_EXPIRED"), ctx)
    assert isinstance(e, ssl.SSLCertVerificationError) and e.verify_code == 10, e
    assert e.verify_message == "certificate has expired"
    e = tls_error(k.listener("SSL_WRONGHOST"), ctx)
    assert isinstance(e, ssl.SSLCertVerificationError), e
    assert e.verify_message.startswith("IP address mismatch")
    e = tls_error(k.listener("SSL_WRONGHOST"), ctx, server_hostname="localhost")
    assert isinstance(e, ssl.SSLCertVerificationError), e
    assert e.verify_message.startswith("Hostname mismatch"), e.verify_message
    # Both certificates come from the test CA: only the date and the name are wrong.
    lax = tls_context(k.file("ca"))
    lax.check_hostname = False
    assert kafka_broker.api_versions(k.listener("SSL_WRONGHOST"), tls=lax)
    with kafka_connect(k.listener("SSL_WRONGHOST"), tls=lax) as s:
        assert s.getpeercert()["subjectAltName"] == (("DNS", "wrong.example"),)


# --------------------------------------------------------------------------------------------
# SASL listeners
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_listener_offers_the_four_mechanisms_and_checks_plain_passwords(secure, listener):
    k = secure
    tls = tls_context(k.file("ca")) if listener == "SASL_SSL" else None
    address = k.listener(listener)
    with kafka_connect(address, tls=tls) as s:
        err, mechanisms = sasl_handshake(s, "GSSAPI")
        assert err == 33  # UNSUPPORTED_SASL_MECHANISM, with the list of those enabled
        assert sorted(mechanisms) == ["OAUTHBEARER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert set(k.users) == {"alice", "bob"}
    for user, password in k.users.items():
        with kafka_connect(address, tls=tls) as s:
            r = plain_login(s, user, password)
            assert r["error"] == 0, r
            assert r["session_lifetime_ms"] == REAUTH_MS
            assert_authenticated(s)
        with kafka_connect(address, tls=tls) as s:
            r = plain_login(s, user, password + "-wrong")
            assert r["error"] == SASL_AUTHENTICATION_FAILED, r
            assert "Invalid username or password" in r["message"]
    with kafka_connect(address, tls=tls) as s:
        assert plain_login(s, "alice", k.users["bob"])["error"] == SASL_AUTHENTICATION_FAILED


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_users_exist_for_both_mechanisms(secure, mechanism):
    k = secure
    for user, password in k.users.items():
        with kafka_connect(k.listener("SASL_PLAINTEXT")) as s:
            r = scram_login(s, mechanism, user, password)
            assert r["error"] == 0, r
            assert_authenticated(s)
    with kafka_connect(k.listener("SASL_PLAINTEXT")) as s:
        r = scram_login(s, mechanism, "alice", "not-" + k.users["alice"])
        assert r["error"] == SASL_AUTHENTICATION_FAILED, r
    with kafka_connect(k.listener("SASL_PLAINTEXT")) as s:  # unknown user: refused at once
        assert scram_login(s, mechanism, "mallory", "x")["error"] == SASL_AUTHENTICATION_FAILED


@pytest.mark.slow
def test_oauthbearer_accepts_unsigned_tokens_until_they_expire(secure):
    k = secure
    with kafka_connect(k.listener("SASL_SSL"), tls=tls_context(k.file("ca"))) as s:
        r = oauthbearer_login(s, unsecured_token("alice"))
        assert r["error"] == 0, r
        assert_authenticated(s)
    with kafka_connect(k.listener("SASL_PLAINTEXT")) as s:
        r = oauthbearer_login(s, unsecured_token("alice", lifetime_s=-60))
        assert r["error"] == SASL_AUTHENTICATION_FAILED, r  # an expired token is refused
        assert json.loads(r["challenge"])["status"] == "invalid_token"


# --------------------------------------------------------------------------------------------
# What `run --security` exports, and --reauth-ms
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_run_security_exports_every_listener(secure):
    env, info = secure.env, secure.info
    assert all(env.get(v) for v in ENV_VARS), {v: env.get(v) for v in ENV_VARS}
    ports = [int(env[v].rsplit(":", 1)[1]) for v in ENV_VARS if v.endswith("_BOOTSTRAP")]
    assert len(set(ports)) == len(ports) == 7
    assert info["plaintext_bootstrap"] == env["LAGLESS_BOOTSTRAP"]
    for listener in info["listeners"].values():
        assert env[listener["env"]] == listener["bootstrap"]
    security_dir = Path(env["LAGLESS_SECURITY_DIR"])
    assert {"ca.pem", "other-ca.pem", "client.pem", "client.key", "client-encrypted.key",
            "client.p12", "client-chain.pem", "ca-truststore.jks", "security.json"} <= \
        {p.name for p in security_dir.iterdir()}
    assert all(Path(f).parent == security_dir and Path(f).exists() for f in info["files"].values())
    assert info["users"] == [{"name": "alice", "password": "alice-secret"},
                             {"name": "bob", "password": "bob-secret"}]


@pytest.mark.slow
def test_reauth_ms_bounds_sasl_sessions(secure):
    """KIP-368: the broker announces the session lifetime, accepts re-authentication on the live
    connection, and closes a connection that outlives its session."""
    assert secure.info["reauth_ms"] == REAUTH_MS
    with kafka_connect(secure.listener("SASL_SSL"), tls=tls_context(secure.file("ca"))) as s:
        first = plain_login(s, "alice", secure.users["alice"])
        assert (first["error"], first["session_lifetime_ms"]) == (0, REAUTH_MS)
        again = plain_login(s, "alice", secure.users["alice"])
        assert (again["error"], again["session_lifetime_ms"]) == (0, REAUTH_MS)
        t0 = time.monotonic()
        closed_after = None
        while closed_after is None and time.monotonic() - t0 < 30:
            try:
                assert_authenticated(s)
                time.sleep(0.2)
            except OSError:
                closed_after = time.monotonic() - t0
    assert closed_after is not None, "the connection outlived its session by 26 s"
    assert closed_after > REAUTH_MS / 1000 - 0.5, closed_after

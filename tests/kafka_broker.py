#!/usr/bin/env python3
"""Real Apache Kafka brokers (KRaft, combined broker+controller) for lagless tests.

Kafka is fetched once with Maven (the version and the jars come from
tests/broker/pom.xml) into $LAGLESS_CACHE/kafka-<version>/lib, by default
~/.cache/lagless/kafka-<version>/lib, and reused afterwards.  Standard library only.

CLI::

    python3 tests/kafka_broker.py fetch
    python3 tests/kafka_broker.py start [--nodes 1|3] [--port P] [--dir D] [--timeout S]
                                        [--security [--reauth-ms N]] [--proxied-listeners N]
                                        [--broker-property KEY=VALUE ...] [--feature NAME=LEVEL ...]
                                        [--classpath DIR_OR_JAR ...] [--stop-with-pid PID]
    python3 tests/kafka_broker.py stop [--dir D] [--keep-data]
    python3 tests/kafka_broker.py run [--nodes N] [--port P] [--dir D] [--security] -- CMD ARGS...
    python3 tests/kafka_broker.py create-topic NAME --partitions N [--replication-factor R] [--bootstrap B]
    python3 tests/kafka_broker.py list-topics [--bootstrap B]
    python3 tests/kafka_broker.py describe-cluster [--bootstrap B]

Python::

    from kafka_broker import KafkaCluster
    with KafkaCluster(nodes=1) as cluster:
        cluster.bootstrap                  # "127.0.0.1:P" ("h:p1,h:p2,h:p3" for 3 nodes)
        cluster.create_topic("t", partitions=3)
        cluster.stop_node(2); cluster.start_node(2); cluster.kill_node(3)
    with KafkaCluster(security=True) as cluster:   # TLS and SASL listeners too
        cluster.listener_bootstrap("SASL_SSL"); cluster.env(); cluster.security_dir

--security adds the SECURITY_LISTENERS (TLS with and without client certificates, an expired and
a wrong-host broker certificate, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER) with certificates made by `openssl` at start; `run` exports their bootstraps as
LAGLESS_*_BOOTSTRAP and the certificates' directory as LAGLESS_SECURITY_DIR (security.json there
lists every address, file, user and password).

--proxied-listeners N gives every node N more PLAINTEXT listeners, PROXY1..PROXYN, each bound on a
port of its own but advertised at another free port, where the test runs a TCP proxy to the bound
one.  Kafka answers Metadata with the addresses of the listener a connection came in on, so a
client bootstrapped at PROXYk's advertised addresses reaches every broker through that proxy only,
and the test can blackhole, delay or cut its traffic.  `start` prints, per listener k,
`proxied.k=<advertised host:port per node>` and `proxied.k.targets=<bound host:port per node>`;
cluster.proxied_bootstrap(k) and cluster.proxied_routes(k) give the same in Python.

`start` leaves the brokers running after it exits; `start --stop-with-pid PID` also starts a
watchdog, a small detached process (`watchdog=<its pid>` in the output, its pid in cluster.json),
that stops the cluster as `stop` does once process PID is gone: a test process that starts a
cluster and then aborts (its clean-up skipped) leaves no broker behind. `stop` ends the watchdog
too.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import errno
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HOST = "127.0.0.1"
POM = Path(__file__).resolve().parent / "broker" / "pom.xml"
STATE_FILE = "cluster.json"
DEFAULT_TIMEOUT = 90.0
STOP_GRACE = 15.0
BROKER_HEAP = ["-Xms256m", "-Xmx512m"]
BROKER_JVM = [
    "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
]
# The command-line tools are short-lived: a small heap and the C1 compiler start fastest.
TOOL_JVM = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true"]
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
STORAGE_TOOL = "kafka.tools.StorageTool"
TAIL_LINES = 40


class BrokerError(RuntimeError):
    """A broker could not be fetched, started, stopped or talked to.  str() is the one-line reason;
    .details holds log tails when there are any."""

    def __init__(self, message: str, details: str = "", early_exit: bool = False):
        super().__init__(message)
        self.message, self.details, self.early_exit = message, details, early_exit

    def __str__(self) -> str:
        return self.message + ("\n" + self.details if self.details else "")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Fetching Kafka
# --------------------------------------------------------------------------------------------

def kafka_version() -> str:
    m = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", POM.read_text())
    if not m:
        raise BrokerError(f"no <kafka.version> in {POM}")
    return m.group(1)


def cache_root() -> Path:
    env = os.environ.get("LAGLESS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lagless"


def require_java() -> str:
    java = shutil.which("java")
    if not java:
        raise BrokerError("java not found on PATH: install a JDK 17+")
    return java


def fetch_kafka(quiet: bool = False) -> Path:
    """Return the directory of Kafka's jars, fetching them with Maven on first use."""
    version = kafka_version()
    home = cache_root() / f"kafka-{version}"
    lib = home / "lib"
    marker = home / "COMPLETE"
    stamp = f"kafka {version}\npom sha256 {hashlib.sha256(POM.read_bytes()).hexdigest()}\n"

    def complete() -> bool:  # written after a full copy, for this very pom
        try:
            return lib.is_dir() and marker.read_text().startswith(stamp)
        except OSError:
            return False

    if complete():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two harnesses starting at once fetch only once
        if complete():
            return lib
        mvn = shutil.which("mvn")
        if not mvn:
            raise BrokerError("mvn not found on PATH: install Maven 3.6+ "
                              f"(needed once to fetch Kafka {version} into {home})")
        if not quiet:
            _say(f"fetching Kafka {version} from Maven Central into {lib} …")
        partial = home / f"lib.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        t0 = time.monotonic()
        proc = subprocess.run(
            [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={partial}", "-DincludeScope=runtime"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0 or not any(partial.glob("kafka_2.13-*.jar")):
            shutil.rmtree(partial, ignore_errors=True)
            raise BrokerError(f"fetching Kafka {version} with Maven failed (exit {proc.returncode})",
                              _tail_text(proc.stdout, "mvn output"))
        try:
            marker.unlink()
        except FileNotFoundError:
            pass
        shutil.rmtree(lib, ignore_errors=True)  # a copy without marker is an interrupted one
        partial.rename(lib)
        marker.write_text(stamp + f"{len(list(lib.glob('*.jar')))} jars\n")
        if not quiet:
            _say(f"fetched Kafka {version} ({len(list(lib.glob('*.jar')))} jars) "
                 f"in {time.monotonic() - t0:.1f} s")
        return lib


def _tools_log4j(lib: Path) -> Path:
    path = lib.parent / "tools-log4j2.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(
            "status = error\n"
            "appender.err.type = Console\nappender.err.name = STDERR\nappender.err.target = SYSTEM_ERR\n"
            "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = STDERR\n")
        tmp.replace(path)
    return path


def run_tool(main_class: str, args: list[str], check: bool = True, capture: bool = True,
             timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line tools from the fetched jars (`java -cp 'lib/*' CLASS ARGS`)."""
    java = require_java()
    lib = fetch_kafka()
    cmd = [java, *TOOL_JVM, f"-Dlog4j2.configurationFile={_tools_log4j(lib)}",
           "-cp", f"{lib}/*", main_class, *args]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, text=True, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)
    if check and proc.returncode != 0:
        out = ((proc.stdout or "") + (proc.stderr or "")).strip()
        last = out.splitlines()[-1] if out else ""
        raise BrokerError(f"{main_class.rsplit('.', 1)[-1]} {' '.join(args[:3])} … failed "
                          f"(exit {proc.returncode}): {last}", out)
    return proc


# --------------------------------------------------------------------------------------------
# Raw Kafka protocol: just enough for readiness checks and topic creation without a JVM
# --------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, fmt: str):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self): return self._take(">b")
    def i16(self): return self._take(">h")
    def i32(self): return self._take(">i")
    def i64(self): return self._take(">q")

    def bytes_(self):
        n = self.i32()
        if n < 0:
            return None
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def array(self, item):
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def kafka_connect(address: str | tuple, timeout: float = 5.0, tls: ssl.SSLContext | None = None,
                  server_hostname: str | None = None) -> socket.socket:
    """A connection to a broker; with `tls`, wrapped (and handshaken) with that SSL context.
    server_hostname defaults to the address' host (what hostname verification checks)."""
    host, port = _split_address(address)
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    if tls is None:
        return sock
    try:
        return tls.wrap_socket(sock, server_hostname=server_hostname or host)
    except BaseException:
        sock.close()
        raise


def kafka_exchange(sock: socket.socket, api_key: int, api_version: int, body: bytes) -> bytes:
    """Send one request with a v1 header on an open connection; return the response body after a
    checked correlation id (a v0 response header: flexible versions are not supported)."""
    corr = random.randrange(1, 2**31)
    msg = struct.pack(">hhi", api_key, api_version, corr) + _str("lagless-harness") + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    data = _recv_exact(sock, size)
    got = struct.unpack_from(">i", data)[0]
    if got != corr:
        raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
    return data[4:]


def kafka_request(address: str | tuple, api_key: int, api_version: int, body: bytes,
                  timeout: float = 5.0, tls: ssl.SSLContext | None = None) -> bytes:
    """One request on a new connection (TLS with `tls`); returns the response body."""
    with kafka_connect(address, timeout, tls) as s:
        return kafka_exchange(s, api_key, api_version, body)


def _split_address(address) -> tuple[str, int]:
    if isinstance(address, tuple):
        return address
    host, _, port = address.split(",")[0].strip().rpartition(":")
    return host or HOST, int(port)


def api_versions(address, timeout: float = 5.0,
                 tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]]:
    """ApiVersions v0; returns {api_key: (min, max)}.  Raises unless the broker answers error 0."""
    r = _Reader(kafka_request(address, 18, 0, b"", timeout, tls))
    err = r.i16()
    keys = r.array(lambda: (r.i16(), r.i16(), r.i16()))
    if err != 0:
        raise ConnectionError(f"ApiVersions error code {err}")
    return {k: (lo, hi) for k, lo, hi in keys}


def metadata(address, topics: list[str] | None = None, timeout: float = 5.0) -> dict:
    """Metadata v4 (v0-v3 are gone in Kafka 4).  topics=None asks for all topics.
    Returns {"brokers": {id: (host, port)}, "cluster_id", "controller_id",
             "topics": {name: {"error": code, "internal": bool, "partitions": {i: leader}}}}."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_str(t) for t in topics)
    body += b"\x00"  # allow_auto_topic_creation = false
    r = _Reader(kafka_request(address, 3, 4, body, timeout))
    r.i32()  # throttle
    brokers = {}
    for node_id, host, port, _rack in r.array(lambda: (r.i32(), r.string(), r.i32(), r.string())):
        brokers[node_id] = (host, port)
    cluster_id, controller_id = r.string(), r.i32()
    out_topics = {}

    def partition():
        err, idx, leader = r.i16(), r.i32(), r.i32()
        r.array(r.i32)
        r.array(r.i32)
        return idx, leader, err

    for _ in range(r.i32()):
        err, name, internal = r.i16(), r.string(), bool(r.i8())
        parts = r.array(partition)
        out_topics[name] = {"error": err, "internal": internal,
                            "partitions": {i: leader for i, leader, _ in parts}}
    return {"brokers": brokers, "cluster_id": cluster_id, "controller_id": controller_id,
            "topics": out_topics}


def list_topics(bootstrap: str) -> list[str]:
    return sorted(n for n, t in metadata(bootstrap)["topics"].items() if not t["internal"])


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int | None = None,
                 configs: dict[str, str] | None = None, exist_ok: bool = False,
                 wait: float = 30.0) -> str:
    """CreateTopics v4 over a raw socket (no JVM), then wait until every partition has a leader.
    rf=None uses the broker's default.replication.factor."""
    configs = configs or {}
    body = (struct.pack(">i", 1) + _str(name) + struct.pack(">ih", partitions, -1 if rf is None else rf)
            + struct.pack(">i", 0)
            + struct.pack(">i", len(configs)) + b"".join(_str(k) + _str(v) for k, v in configs.items())
            + struct.pack(">ib", int(wait * 1000), 0))
    r = _Reader(kafka_request(bootstrap, 19, 4, body, timeout=wait + 5))
    r.i32()
    for tname, err, msg in r.array(lambda: (r.string(), r.i16(), r.string())):
        if err == 36 and exist_ok:  # TOPIC_ALREADY_EXISTS
            continue
        if err != 0:
            raise BrokerError(f"creating topic {tname!r} failed: error {err}: {msg}")
    wait_for_topic(bootstrap, name, partitions, timeout=wait)
    return name


def wait_for_topic(bootstrap: str, name: str, partitions: int | None = None,
                   timeout: float = 30.0) -> None:
    """Wait until every address in `bootstrap` reports the topic with a leader for each partition."""
    deadline = time.monotonic() + timeout
    last = None
    for address in bootstrap.split(","):
        while True:
            try:
                t = metadata(address, [name])["topics"].get(name)
                if t and t["error"] == 0 and t["partitions"] and \
                        all(leader >= 0 for leader in t["partitions"].values()) and \
                        (partitions is None or len(t["partitions"]) >= partitions):
                    break
                last = t
            except OSError as e:
                last = e
            if time.monotonic() > deadline:
                raise BrokerError(f"topic {name!r} not ready on {address} after {timeout:.0f} s: {last}")
            time.sleep(0.1)


# --------------------------------------------------------------------------------------------
# Ports and processes
# --------------------------------------------------------------------------------------------

def port_in_use(port: int, host: str = HOST) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM does: TIME_WAIT is fine
        s.bind((host, port))
        return False
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES):
            return True
        raise
    finally:
        s.close()


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(n: int, exclude: set[int] = frozenset()) -> list[int]:
    """n distinct free ports, below the kernel's ephemeral range when there is room: ports that
    bind(0) would hand out are also what outgoing connections (the brokers' own, among them) pick,
    and one of those could take a chosen port before the broker binds it."""
    lo, hi = _ephemeral_range()
    span = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535) if hi < 63000 else None
    ports: list[int] = []
    tries = 0
    while len(ports) < n:
        tries += 1
        if span and tries < 1000:
            p = random.randint(*span)
        else:
            with socket.socket() as s:
                s.bind((HOST, 0))
                p = s.getsockname()[1]
        if p not in exclude and p not in ports and not port_in_use(p):
            ports.append(p)
    return ports


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _pid_is_broker(pid: int, props: Path) -> bool:
    """Guard against PID reuse: only signal a java process running kafka.Kafka with this config."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline and str(props).encode() in cmdline


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # each broker leads its own process group
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


_LIBC = None


def _die_with_parent() -> None:  # runs in the forked child, before exec
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the broker dies if the harness dies


def _tail(path: Path, n: int = TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"--- {path}: (missing)"
    return _tail_text("\n".join(lines), str(path), n)


def _tail_text(text: str, title: str, n: int = TAIL_LINES) -> str:
    lines = (text or "").splitlines()[-n:]
    return f"--- last {len(lines)} lines of {title}:\n" + "\n".join(lines)


# --------------------------------------------------------------------------------------------
# TLS and SASL listeners (--security)
# --------------------------------------------------------------------------------------------

# Extra listeners of a --security cluster: name -> (security protocol, env var of its bootstrap).
# Inter-broker and controller traffic stay on PLAINTEXT/CONTROLLER, so the brokers never depend
# on the security code under test.
SECURITY_LISTENERS = {
    "SSL": ("SSL", "LAGLESS_SSL_BOOTSTRAP"),
    "MTLS": ("SSL", "LAGLESS_MTLS_BOOTSTRAP"),                  # client certificate required
    "SSL_EXPIRED": ("SSL", "LAGLESS_SSL_EXPIRED_BOOTSTRAP"),    # broker certificate expired
    "SSL_WRONGHOST": ("SSL", "LAGLESS_SSL_WRONGHOST_BOOTSTRAP"),  # SAN only DNS:wrong.example
    "SASL_PLAINTEXT": ("SASL_PLAINTEXT", "LAGLESS_SASL_PLAINTEXT_BOOTSTRAP"),
    "SASL_SSL": ("SASL_SSL", "LAGLESS_SASL_SSL_BOOTSTRAP"),
}
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
# Every user can log in with every mechanism (OAUTHBEARER: an unsigned token whose sub names it).
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
CLIENT_KEY_PASSWORD = "client-key-secret"   # client-encrypted.key
CLIENT_P12_PASSWORD = "client-p12-secret"   # client.p12
JKS_PASSWORD = "truststore-secret"          # ca-truststore.jks
SECURITY_FILE = "security.json"

_OPENSSL_CA_CONF = """\
[ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
[ policy_any ]
commonName = supplied
"""


def write_certificates(out: Path) -> dict[str, Path]:
    """Make the test PKI in `out` with the openssl command line; returns {name: path}.

    ca.pem signs broker.pem (SAN DNS:localhost,IP:127.0.0.1; serverAuth+clientAuth), client.pem
    (CN=lagless-client; clientAuth), broker-expired.pem (valid two days ago to one day ago) and
    broker-wronghost.pem (SAN only DNS:wrong.example); other-ca.pem is an unrelated CA.  Keys are
    EC P-256 (milliseconds to make, where RSA takes a second on a loaded machine), unencrypted
    PKCS#8, except client-encrypted.key (PKCS#8, AES-256, CLIENT_KEY_PASSWORD) and client.p12
    (client certificate + key + CA, CLIENT_P12_PASSWORD).  client-chain.pem is client.pem
    followed by ca.pem.  ca-truststore.jks holds ca.pem in the JKS format (JKS_PASSWORD), for
    the error a JKS store gets where only PEM and PKCS#12 are read."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise BrokerError("openssl not found on PATH: --security needs it to make test certificates")
    out.mkdir(parents=True, exist_ok=True)
    work = out / "ca-db"  # what `openssl ca` keeps: serial, index, copies of issued certificates
    work.mkdir(exist_ok=True)
    (work / "ca.cnf").write_text(_OPENSSL_CA_CONF)
    (work / "index.txt").write_text("")
    (work / "serial").write_text("1000\n")

    def ossl(*args: str) -> None:
        proc = subprocess.run([openssl, *args], cwd=work, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BrokerError(f"openssl {args[0]} failed (exit {proc.returncode})",
                              _tail_text(proc.stderr, "openssl output"))

    def key(name: str) -> Path:
        path = out / name
        ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
        return path

    def ca(name: str, cn: str) -> tuple[Path, Path]:
        k = key(f"{name}.key")
        ossl("req", "-x509", "-new", "-key", str(k), "-subj", f"/CN={cn}", "-days", "3650",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", str(out / f"{name}.pem"))
        return out / f"{name}.pem", k

    def issue(name: str, k: Path, cn: str, ext: str, start: float, end: float) -> Path:
        """A certificate for key k signed by ca.pem, valid from `start` to `end` (epoch seconds)."""
        stamp = lambda t: time.strftime("%Y%m%d%H%M%SZ", time.gmtime(t))  # noqa: E731
        (work / f"{name}.ext").write_text(ext)
        ossl("req", "-new", "-key", str(k), "-subj", f"/CN={cn}", "-out", f"{name}.csr")
        ossl("ca", "-batch", "-config", "ca.cnf", "-cert", str(ca_pem), "-keyfile", str(ca_key),
             "-in", f"{name}.csr", "-out", str(out / f"{name}.pem"), "-notext",
             "-startdate", stamp(start), "-enddate", stamp(end), "-extfile", f"{name}.ext")
        return out / f"{name}.pem"

    now, day = time.time(), 86400.0
    ca_pem, ca_key = ca("ca", "lagless test CA")
    other_ca, _ = ca("other-ca", "lagless other CA")
    server = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n" \
             "extendedKeyUsage=serverAuth,clientAuth\n"
    broker_key = key("broker.key")
    broker = issue("broker", broker_key, "localhost",
                   server + "subjectAltName=DNS:localhost,IP:127.0.0.1\n", now - day, now + 3650 * day)
    expired = issue("broker-expired", broker_key, "localhost",
                    server + "subjectAltName=DNS:localhost,IP:127.0.0.1\n", now - 2 * day, now - day)
    wronghost = issue("broker-wronghost", broker_key, "wrong.example",
                      server + "subjectAltName=DNS:wrong.example\n", now - day, now + 3650 * day)
    client_key = key("client.key")
    client = issue("client", client_key, "lagless-client",
                   "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=clientAuth\n", now - day, now + 3650 * day)
    encrypted = out / "client-encrypted.key"
    ossl("pkcs8", "-topk8", "-in", str(client_key), "-out", str(encrypted), "-v2", "aes-256-cbc",
         "-v2prf", "hmacWithSHA256", "-passout", f"pass:{CLIENT_KEY_PASSWORD}")
    p12 = out / "client.p12"
    ossl("pkcs12", "-export", "-in", str(client), "-inkey", str(client_key), "-certfile", str(ca_pem),
         "-name", "lagless-client", "-out", str(p12), "-passout", f"pass:{CLIENT_P12_PASSWORD}")
    chain = out / "client-chain.pem"
    chain.write_text(client.read_text() + ca_pem.read_text())
    jks = out / "ca-truststore.jks"
    jks.write_bytes(_jks_truststore({"lagless-test-ca": ca_pem}, JKS_PASSWORD))
    return {"ca": ca_pem, "other_ca": other_ca, "ca_jks": jks,
            "broker_cert": broker, "broker_key": broker_key, "broker_expired_cert": expired,
            "broker_wronghost_cert": wronghost, "client_cert": client, "client_key": client_key,
            "client_key_encrypted": encrypted, "client_p12": p12, "client_chain": chain}


def _jks_truststore(certs: dict[str, Path], password: str) -> bytes:
    """A Java KeyStore (JKS, version 2) of trusted-certificate entries, as keytool writes it: what
    a JVM-made truststore looks like, without a JVM start."""
    def utf(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">H", len(b)) + b

    body = struct.pack(">Iii", 0xFEEDFEED, 2, len(certs))
    for alias, path in certs.items():
        pem = path.read_text()
        der = base64.b64decode("".join(pem.split("-----")[2].split()))
        body += struct.pack(">i", 2) + utf(alias) + struct.pack(">q", int(time.time() * 1000))
        body += utf("X.509") + struct.pack(">i", len(der)) + der
    # Integrity: SHA-1 over the password's UTF-16 code units, a fixed salt, then the store.
    digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()
    return body + digest


def _inline_pem(path: Path) -> str:
    """A PEM file as one server.properties value (java.util.Properties reads \\n as a newline)."""
    return path.read_text().strip().replace("\n", "\\n")


def listener_properties(node: "Node", certs: dict[str, Path] | None,
                        reauth_ms: int | None = None) -> str:
    """The listener part of a node's server.properties.  Without certs: PLAINTEXT and CONTROLLER
    only.  With certs: also every SECURITY_LISTENERS entry on node.listener_ports."""
    listeners = {"PLAINTEXT": node.broker_port, **(node.listener_ports if certs else {})}
    protocols = {"CONTROLLER": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
    protocols.update({name: SECURITY_LISTENERS[name][0] for name in listeners if name != "PLAINTEXT"})
    # Bound port -> advertised port; the same but for the proxied listeners, whose advertised
    # port is the test's proxy in front of the bound one.
    advertised = dict(listeners)
    for k, (bound, adv) in enumerate(node.proxied_ports, start=1):
        listeners[f"PROXY{k}"], advertised[f"PROXY{k}"] = bound, adv
        protocols[f"PROXY{k}"] = "PLAINTEXT"
    lines = [
        "listeners=" + ",".join(f"{n}://{HOST}:{p}" for n, p in listeners.items())
        + f",CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners=" + ",".join(f"{n}://{HOST}:{p}" for n, p in advertised.items()),
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=" + ",".join(f"{n}:{p}" for n, p in protocols.items()),
    ]
    if not certs:
        return "\n".join(lines) + "\n"

    def keystore(prefix: str, cert: Path) -> list[str]:
        return [f"{prefix}ssl.keystore.type=PEM",
                f"{prefix}ssl.keystore.certificate.chain={_inline_pem(cert)}",
                f"{prefix}ssl.keystore.key={_inline_pem(certs['broker_key'])}"]

    # Broker-wide: the good certificate, the test CA as truststore (for client certificates),
    # no client authentication (a broker-wide `required` would also bind SASL_SSL).
    lines += keystore("", certs["broker_cert"])
    lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={certs['ca']}",
              "ssl.client.auth=none", "listener.name.mtls.ssl.client.auth=required"]
    lines += keystore("listener.name.ssl_expired.", certs["broker_expired_cert"])
    lines += keystore("listener.name.ssl_wronghost.", certs["broker_wronghost_cert"])
    plain_users = " ".join(f'user_{u}="{pw}"' for u, pw in SASL_USERS.items())
    login_modules = {
        "PLAIN": f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
        "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        # The broker's default OAUTHBEARER validator accepts unsigned (alg none) tokens.
        "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        lines.append(f"listener.name.{listener}.sasl.enabled.mechanisms={','.join(SASL_MECHANISMS)}")
        for mechanism in SASL_MECHANISMS:  # the broker does not start without each pair's JAAS line
            lines.append(f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config="
                         f"{login_modules[mechanism]}")
    if reauth_ms is not None:  # KIP-368: SASL sessions end after this; clients re-authenticate
        lines.append(f"connections.max.reauth.ms={reauth_ms}")
    return "\n".join(lines) + "\n"


def scram_format_args() -> list[str]:
    """StorageTool format arguments creating every SASL_USERS user for both SCRAM mechanisms."""
    return [arg for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            for user, password in SASL_USERS.items()
            for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------

_LIVE: set = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _cleanup_at_exit() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for c in clusters:
        try:
            c.stop()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            _say(f"kafka_broker: cleanup failed: {e}")


def _random_cluster_id() -> str:
    """What `StorageTool random-uuid` prints (Uuid.randomUuid): 16 random bytes, URL-safe base64
    without padding, never the zero or metadata-topic id, never starting with '-'."""
    while True:
        raw = os.urandom(16)
        s = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if raw not in (bytes(16), bytes(15) + b"\x01") and not s.startswith("-"):
            return s


class Node:
    def __init__(self, node_id: int, broker_port: int, controller_port: int, dir: Path):
        self.node_id, self.broker_port, self.controller_port, self.dir = \
            node_id, broker_port, controller_port, Path(dir)
        self.listener_ports: dict[str, int] = {}  # SECURITY_LISTENERS name -> port (--security)
        # PROXYk (k = index + 1) -> [bound port, advertised port] (--proxied-listeners)
        self.proxied_ports: list[list[int]] = []
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    @property
    def props(self) -> Path: return self.dir / "server.properties"
    @property
    def log_file(self) -> Path: return self.dir / "server.log"
    @property
    def console_file(self) -> Path: return self.dir / "console.log"
    @property
    def address(self) -> str: return f"{HOST}:{self.broker_port}"

    def alive(self) -> bool:
        if self.pid is None:
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        return pid_alive(self.pid) and _pid_is_broker(self.pid, self.props)

    def tails(self) -> str:
        return _tail(self.log_file) + "\n" + _tail(self.console_file)

    def to_json(self) -> dict:
        return {"node_id": self.node_id, "pid": self.pid, "broker_port": self.broker_port,
                "controller_port": self.controller_port, "dir": str(self.dir),
                "listener_ports": self.listener_ports, "proxied_ports": self.proxied_ports}


class KafkaCluster:
    """A throw-away KRaft cluster of `nodes` combined broker+controller processes on 127.0.0.1.

    Node ids are 1..nodes; stop_node/start_node/kill_node take a node id.  `port` fixes the
    PLAINTEXT port of node 1 (node i gets port+i-1); otherwise free ports are picked.  `dir` is the
    state directory (a new temporary one by default); stop() removes the data unless keep_data.
    die_with_parent=True makes the JVMs die with this process even on SIGKILL (Linux).

    security=True adds the SECURITY_LISTENERS (TLS, mutual TLS, SASL) next to PLAINTEXT, with
    certificates made at start in <dir>/security; env() names them (LAGLESS_SSL_BOOTSTRAP, ...,
    LAGLESS_SECURITY_DIR) and <dir>/security/security.json lists addresses, files and users.
    reauth_ms sets connections.max.reauth.ms (KIP-368) for the SASL listeners.

    proxied_listeners=N adds PLAINTEXT listeners PROXY1..PROXYN per node, each advertised at a
    free port other than the one it is bound on: the test puts a TCP proxy there
    (proxied_routes(k) lists advertised -> bound per node) and bootstraps at
    proxied_bootstrap(k), so that every connection of that client goes through the proxy."""

    def __init__(self, nodes: int = 1, port: int | None = None, dir: str | os.PathLike | None = None,
                 timeout: float = DEFAULT_TIMEOUT, keep_data: bool = False,
                 die_with_parent: bool = True, quiet: bool = False, jvm_opts: list[str] | None = None,
                 security: bool = False, reauth_ms: int | None = None,
                 racks: list[str] | None = None, proxied_listeners: int = 0,
                 broker_properties: list[str] | None = None, features: list[str] | None = None,
                 classpath: list[str] | None = None):
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        if reauth_ms is not None and not security:
            raise ValueError("reauth_ms needs security=True (it applies to the SASL listeners)")
        if proxied_listeners < 0:
            raise ValueError("proxied_listeners must be >= 0")
        self.security, self.reauth_ms = security, reauth_ms
        self.proxied_listeners = proxied_listeners
        self.certs: dict[str, Path] | None = None
        self.n, self.port, self.timeout, self.keep_data, self.quiet = nodes, port, timeout, keep_data, quiet
        self.die_with_parent = die_with_parent
        # broker.rack of node i is racks[i-1]; with racks, followers serve fetches of clients in
        # their rack (KIP-392).
        self.racks = list(racks or [])
        # KEY=VALUE lines appended to every node's server.properties (a test's broker setting).
        self.broker_properties = list(broker_properties or [])
        # Cluster features finalized at a level of the test's choosing when the storage is
        # formatted (StorageTool --feature), such as transaction.version=1 for the classic
        # transaction protocol; unnamed features get the release's default level.
        self.features = list(features or [])
        for feature in self.features:
            if "=" not in feature:
                raise BrokerError(f"--feature {feature!r}: expected NAME=LEVEL")
        for prop in self.broker_properties:
            key, eq, _ = prop.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"broker property {prop!r} is not KEY=VALUE")
        # Directories or jars put on the brokers' classpath after Kafka's own jars: a test's
        # plugin classes (a metrics reporter, an authorizer) that a broker property names.
        self.classpath = [str(Path(c).resolve()) for c in classpath or []]
        for entry in self.classpath:
            if not Path(entry).exists():
                raise ValueError(f"classpath entry {entry!r} does not exist")
            if os.pathsep in entry:
                raise ValueError(f"classpath entry {entry!r} contains {os.pathsep!r}")
        self.jvm_opts = list(jvm_opts or []) + os.environ.get("LAGLESS_KAFKA_JVM_OPTS", "").split()
        self._dir_arg = Path(dir) if dir else None
        self.dir: Path | None = None
        self._created_dir = False
        self.nodes: dict[int, Node] = {}
        self.cluster_id: str | None = None
        self.version = kafka_version()
        self.lib: Path | None = None
        self.start_seconds: float | None = None
        # The `start --stop-with-pid` watchdog of this cluster, ended by stop().
        self.watchdog_pid: int | None = None

    # -- public API -----------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes.values())

    @property
    def security_dir(self) -> Path | None:
        """Certificates, keys and security.json of a security=True cluster (None otherwise)."""
        return self.dir / "security" if self.security and self.dir is not None else None

    def listener_bootstrap(self, listener: str) -> str:
        """The bootstrap of one SECURITY_LISTENERS listener ("SSL", "SASL_SSL", ...)."""
        return ",".join(f"{HOST}:{n.listener_ports[listener]}" for n in self.nodes.values())

    def proxied_bootstrap(self, k: int) -> str:
        """The advertised addresses of listener PROXYk (1-based), one per node: where the test's
        proxy must listen, and what a proxied client bootstraps at."""
        return ",".join(f"{HOST}:{adv}" for adv, _ in self.proxied_routes(k))

    def proxied_routes(self, k: int) -> list[tuple[int, int]]:
        """Per node, in node order: (advertised port, bound port) of listener PROXYk (1-based)."""
        return [(n.proxied_ports[k - 1][1], n.proxied_ports[k - 1][0]) for n in self.nodes.values()]

    def env(self) -> dict[str, str]:
        """What `run` exports: LAGLESS_BOOTSTRAP, LAGLESS_BROKER_DIR and, with security, one
        LAGLESS_*_BOOTSTRAP per security listener and LAGLESS_SECURITY_DIR."""
        env = {"LAGLESS_BOOTSTRAP": self.bootstrap, "LAGLESS_BROKER_DIR": str(self.dir)}
        if self.security:
            env.update({var: self.listener_bootstrap(name)
                        for name, (_, var) in SECURITY_LISTENERS.items()})
            env["LAGLESS_SECURITY_DIR"] = str(self.security_dir)
        return env

    @property
    def node_ids(self) -> list[int]:
        return list(self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes.values() if n.pid is not None]

    def __enter__(self) -> "KafkaCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, attempts: int = 3) -> "KafkaCluster":
        """Start every node and wait until the cluster is usable.  A node that dies during the
        first start of a cause that can pass (a picked port taken meanwhile) makes the cluster
        start again from fresh storage."""
        t0 = time.monotonic()
        for attempt in range(1, attempts + 1):
            try:
                self._start_once()
                break
            except BrokerError as e:
                transient = any(m in e.details for m in
                                ("Address already in use", "BindException"))
                if not (e.early_exit and transient) or attempt == attempts:
                    raise
                fatal = [l for l in e.details.splitlines() if " ERROR " in l or "Exception" in l]
                _say(f"kafka_broker: {e.message} ({fatal[0].strip() if fatal else 'see logs'}); "
                     f"starting the cluster afresh (attempt {attempt + 1}/{attempts})")
        self.start_seconds = time.monotonic() - t0
        if not self.quiet:
            _say(f"Kafka {self.version} up: {self.n} node(s) at {self.bootstrap} "
                 f"in {self.start_seconds:.1f} s (dir {self.dir})")
        return self

    def _start_once(self) -> None:
        java = require_java()
        # Ports first: a taken port must fail at once, before any JVM is started.
        if self.port is not None:
            broker_ports = [self.port + i for i in range(self.n)]
            for p in broker_ports:
                if port_in_use(p):
                    raise BrokerError(f"port {HOST}:{p} is already in use")
            controller_ports = free_ports(self.n, exclude=set(broker_ports))
        else:
            ports = free_ports(2 * self.n)
            broker_ports, controller_ports = ports[:self.n], ports[self.n:]
        k = len(SECURITY_LISTENERS) if self.security else 0
        # Per node: k security listener ports, then a bound and an advertised port per proxied
        # listener (the advertised one is only reserved here: the test's proxy binds it later).
        per_node = k + 2 * self.proxied_listeners
        extra = free_ports(per_node * self.n, exclude=set(broker_ports) | set(controller_ports))
        self.lib = fetch_kafka(self.quiet)
        if self._dir_arg:
            self.dir = self._dir_arg.resolve()
            if (self.dir / STATE_FILE).exists():
                raise BrokerError(f"{self.dir} already holds a cluster ({STATE_FILE}); stop it first")
            self._created_dir = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
        else:
            self.dir = Path(tempfile.mkdtemp(prefix="lagless-kafka-"))
            self._created_dir = True
        self.nodes = {}
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            self.cluster_id = _random_cluster_id()
            for i in range(self.n):
                nid = i + 1
                self.nodes[nid] = Node(nid, broker_ports[i], controller_ports[i], self.dir / f"node-{nid}")
                mine = extra[i * per_node:(i + 1) * per_node]
                self.nodes[nid].listener_ports = dict(zip(SECURITY_LISTENERS, mine[:k]))
                self.nodes[nid].proxied_ports = [[mine[j], mine[j + 1]]
                                                 for j in range(k, per_node, 2)]
            if self.security:
                self.certs = write_certificates(self.security_dir)
                self._write_security_file()
            for node in self.nodes.values():  # every node's config lists every voter
                self._write_config(node)
            self._format(java)
            for node in self.nodes.values():
                self._spawn(java, node)
            self._write_state()
            self._wait_ready(list(self.nodes.values()))
        except BaseException:
            self.stop()
            raise

    def stop_node(self, node_id: int, grace: float = STOP_GRACE) -> None:
        """SIGTERM one node (SIGKILL after `grace` seconds); its data is kept for start_node."""
        self._terminate([self.nodes[node_id]], grace)
        self._write_state()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node; its data is kept for start_node."""
        self._terminate([self.nodes[node_id]], 0)
        self._write_state()

    def start_node(self, node_id: int) -> None:
        """Restart a stopped or killed node with its data; wait until it is back in the metadata."""
        node = self.nodes[node_id]
        if node.alive():
            return
        self._spawn(require_java(), node)
        self._write_state()
        self._wait_ready([node])

    def create_topic(self, name: str, partitions: int = 1, rf: int | None = None,
                     configs: dict[str, str] | None = None, exist_ok: bool = False) -> str:
        """Create a topic (raw CreateTopics request) and wait until all running nodes see it led."""
        create_topic(self._running_bootstrap(), name, partitions, rf, configs, exist_ok)
        return name

    def create_topic_with_tools(self, name: str, partitions: int = 1, rf: int | None = None) -> str:
        """The same through Kafka's own TopicCommand (a JVM start, slower)."""
        topic_command_create(self._running_bootstrap(), name, partitions, rf)
        return name

    def metadata(self, topics: list[str] | None = None) -> dict:
        return metadata(self._running_bootstrap(), topics)

    def list_topics(self) -> list[str]:
        return list_topics(self._running_bootstrap())

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop every node (SIGTERM, SIGKILL after `grace`) and remove the data unless keep_data;
        end the cluster's watchdog, if it has one (and this is not it)."""
        try:
            _end_watchdog(self.watchdog_pid, self.dir)
            self.watchdog_pid = None
            self._terminate([n for n in self.nodes.values() if n.pid is not None], grace)
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if self.dir is not None and not self.keep_data:
                self._remove_data()
            elif self.dir is not None:
                self._write_state()

    def detach(self) -> None:
        """Leave the brokers running after this process exits (used by the `start` command)."""
        with _LIVE_LOCK:
            _LIVE.discard(self)

    @classmethod
    def from_state(cls, dir: str | os.PathLike) -> "KafkaCluster":
        """Re-attach to a cluster started by another process (the CLI's `start`)."""
        d = Path(dir).resolve()
        try:
            state = json.loads((d / STATE_FILE).read_text())
        except FileNotFoundError:
            raise BrokerError(f"no cluster state in {d} ({STATE_FILE} missing)") from None
        c = cls(nodes=len(state["nodes"]), dir=d, die_with_parent=False, quiet=True,
                security=state.get("security", False),
                proxied_listeners=state.get("proxied_listeners", 0),
                classpath=[c for c in state.get("classpath", []) if Path(c).exists()])
        c.dir, c._created_dir, c.cluster_id = d, state.get("created_dir", False), state["cluster_id"]
        c.watchdog_pid = state.get("watchdog_pid")
        for nj in state["nodes"]:
            node = Node(nj["node_id"], nj["broker_port"], nj["controller_port"], Path(nj["dir"]))
            node.pid = nj["pid"]
            node.listener_ports = nj.get("listener_ports", {})
            node.proxied_ports = nj.get("proxied_ports", [])
            c.nodes[node.node_id] = node
        return c

    # -- internals ------------------------------------------------------------------------------

    def _running_bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes.values() if n.alive()) or self.bootstrap

    def _write_config(self, node: Node) -> None:
        n = self.n
        node.dir.mkdir(parents=True, exist_ok=True)
        if n == 1:
            quorum = f"controller.quorum.bootstrap.servers={HOST}:{node.controller_port}"
        else:
            quorum = "controller.quorum.voters=" + ",".join(
                f"{x.node_id}@{HOST}:{x.controller_port}" for x in self.nodes.values())
        min_isr = 1 if n == 1 else 2
        node.props.write_text(f"""\
# written by tests/kafka_broker.py
process.roles=broker,controller
node.id={node.node_id}
{quorum}
{listener_properties(node, self.certs, self.reauth_ms).rstrip()}
log.dirs={node.dir / "data"}
num.partitions=1
default.replication.factor={n}
min.insync.replicas=1
auto.create.topics.enable=false
offsets.topic.num.partitions=3
offsets.topic.replication.factor={n}
transaction.state.log.num.partitions=3
transaction.state.log.replication.factor={n}
transaction.state.log.min.isr={min_isr}
share.coordinator.state.topic.num.partitions=3
share.coordinator.state.topic.replication.factor={n}
share.coordinator.state.topic.min.isr={min_isr}
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
# KIP-848 groups (group.protocol=consumer) take their liveness from the broker: test-sized, as
# the classic members' session 6 s / heartbeat 0.5 s of the tests.
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.segment.bytes=67108864
{self._rack_props(node)}{"".join(p + chr(10) for p in self.broker_properties)}""")
        (node.dir / "log4j2.properties").write_text(f"""\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {node.log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.requestlog.name = kafka.request.logger
logger.requestlog.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
""")

    def _rack_props(self, node: Node) -> str:
        if not self.racks:
            return ""
        rack = self.racks[(node.node_id - 1) % len(self.racks)]
        return (f"broker.rack={rack}\n"
                "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n")

    def _format(self, java: str) -> None:
        procs = []
        try:
            for node in self.nodes.values():  # the nodes format in parallel
                args = ["format", "-t", self.cluster_id, "-c", str(node.props)]
                if self.n == 1:
                    args.insert(1, "--standalone")
                if self.security:
                    args += scram_format_args()
                for feature in self.features:
                    args += ["--feature", feature]
                cmd = [java, *TOOL_JVM, f"-Dlog4j2.configurationFile={_tools_log4j(self.lib)}",
                       "-cp", f"{self.lib}/*", STORAGE_TOOL, *args]
                procs.append((node, subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                                     stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True)))
            for node, p in procs:
                out, _ = p.communicate()
                if p.returncode != 0:
                    raise BrokerError(f"formatting the storage of node {node.node_id} failed "
                                      f"(exit {p.returncode})", _tail_text(out, "StorageTool output"))
        finally:  # interrupted (Ctrl-C, SIGTERM in `run`) or failed: leave no StorageTool behind
            for _, p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def _spawn(self, java: str, node: Node) -> None:
        cmd = [java, *BROKER_HEAP, *BROKER_JVM, *self.jvm_opts,
               f"-Dlog4j2.configurationFile={node.dir / 'log4j2.properties'}",
               f"-Dkafka.logs.dir={node.dir}",
               "-cp", os.pathsep.join([f"{self.lib or fetch_kafka(True)}/*", *self.classpath]),
               "kafka.Kafka", str(node.props)]
        global _LIBC
        preexec = None
        if self.die_with_parent and sys.platform.startswith("linux"):
            if _LIBC is None:
                import ctypes
                _LIBC = ctypes.CDLL(None, use_errno=True)
            preexec = _die_with_parent
        with open(node.console_file, "ab") as console:
            node.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console,
                                         stderr=subprocess.STDOUT, cwd=node.dir,
                                         start_new_session=True, preexec_fn=preexec)
        node.pid = node.proc.pid

    def _wait_ready(self, starting: list[Node]) -> None:
        """Until each starting node answers ApiVersions and every running node's metadata lists
        every running node."""
        deadline = time.monotonic() + self.timeout
        last = "no answer yet"
        while True:
            for node in starting:
                if not node.alive():
                    code = node.proc.returncode if node.proc else "?"
                    raise BrokerError(f"Kafka node {node.node_id} exited early (exit code {code})",
                                      node.tails(), early_exit=True)
            try:
                running = [n for n in self.nodes.values() if n.alive()]
                want = {n.node_id for n in running}
                ok = True
                for node in running:
                    api_versions(node.address, timeout=2)
                    bound = list(node.listener_ports.values()) + [b for b, _ in node.proxied_ports]
                    for port in bound:  # bound, not necessarily serving
                        socket.create_connection((HOST, port), timeout=2).close()
                    got = set(metadata(node.address, [], timeout=2)["brokers"])
                    if got != want:
                        last = f"node {node.node_id} lists brokers {sorted(got)}, want {sorted(want)}"
                        ok = False
                        break
                if ok:
                    return
            except (OSError, struct.error) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"Kafka did not come up within {self.timeout:.0f} s ({last})",
                    "\n".join(n.tails() for n in starting))
            time.sleep(0.2)

    def _terminate(self, nodes: list[Node], grace: float) -> None:
        live = [n for n in nodes if n.pid is not None and n.alive()]
        for n in live:
            _signal_group(n.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
        deadline = time.monotonic() + grace
        while any(n.alive() for n in live) and time.monotonic() < deadline:
            time.sleep(0.1)
        for n in live:
            if n.alive():
                _signal_group(n.pid, signal.SIGKILL)
        for n in live:
            if n.proc is not None:
                n.proc.wait()
            else:
                end = time.monotonic() + 10
                while pid_alive(n.pid) and time.monotonic() < end:
                    time.sleep(0.05)
        for n in nodes:
            n.proc, n.pid = None, None

    def _write_state(self) -> None:
        if self.dir is None or not self.dir.exists():
            return
        state = {"version": self.version, "cluster_id": self.cluster_id, "bootstrap": self.bootstrap,
                 "dir": str(self.dir), "created_dir": self._created_dir, "security": self.security,
                 "proxied_listeners": self.proxied_listeners, "watchdog_pid": self.watchdog_pid,
                 "classpath": self.classpath,
                 "nodes": [n.to_json() for n in self.nodes.values()]}
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.dir / STATE_FILE)

    def _write_security_file(self) -> None:
        """security.json: everything a test needs to use the security listeners."""
        info = {
            "listeners": {name: {"security_protocol": proto, "bootstrap": self.listener_bootstrap(name),
                                 "env": var} for name, (proto, var) in SECURITY_LISTENERS.items()},
            "plaintext_bootstrap": self.bootstrap,
            "files": {name: str(path) for name, path in self.certs.items()},
            "client_key_password": CLIENT_KEY_PASSWORD,
            "client_p12_password": CLIENT_P12_PASSWORD,
            "jks_password": JKS_PASSWORD,
            "client_principal": "CN=lagless-client",
            "sasl_mechanisms": SASL_MECHANISMS,
            "users": [{"name": u, "password": pw} for u, pw in SASL_USERS.items()],
            # OAUTHBEARER: the broker's unsecured validator takes an unsigned JWS (header
            # {"alg":"none"}) whose "sub" names the principal and whose "exp" is in the future.
            "oauthbearer": {"validator": "unsecured", "principal_claim": "sub"},
            "reauth_ms": self.reauth_ms,
        }
        (self.security_dir / SECURITY_FILE).write_text(json.dumps(info, indent=2) + "\n")

    def _remove_data(self) -> None:
        if self._created_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        shutil.rmtree(self.dir / "security", ignore_errors=True)
        for node in self.nodes.values():
            shutil.rmtree(node.dir, ignore_errors=True)
        for name in (STATE_FILE, STATE_FILE + ".tmp", "watchdog.log"):
            try:
                (self.dir / name).unlink()
            except FileNotFoundError:
                pass


# --------------------------------------------------------------------------------------------
# Kafka tools helpers
# --------------------------------------------------------------------------------------------

def topic_command_create(bootstrap: str, name: str, partitions: int, rf: int | None = None) -> None:
    args = ["--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", str(partitions)]
    if rf is not None:
        args += ["--replication-factor", str(rf)]
    run_tool(TOPIC_COMMAND, args)
    wait_for_topic(bootstrap, name, partitions)


def topic_command_list(bootstrap: str) -> list[str]:
    out = run_tool(TOPIC_COMMAND, ["--bootstrap-server", bootstrap, "--list"]).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# The `start --stop-with-pid` watchdog
# --------------------------------------------------------------------------------------------

WATCHDOG_COMMAND = "watchdog"  # the hidden subcommand the detached watchdog runs
WATCHDOG_INTERVAL = 0.2  # seconds between two looks at the watched process


def process_start_time(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22), which
    tells a process from a later one given the same pid; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def watched_process_gone(pid: int, start_time: int | None) -> bool:
    """Whether the process the watchdog watches is gone: no live process has its pid, or the one
    that has it started at another time (the pid was reused)."""
    return not pid_alive(pid) or process_start_time(pid) != start_time


def _pid_is_watchdog(pid: int, dir: Path) -> bool:
    """Guard against PID reuse: only signal this harness's watchdog of this very directory."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (WATCHDOG_COMMAND.encode() in cmdline and str(dir).encode() in cmdline
            and any(a.endswith(b"kafka_broker.py") for a in cmdline))


def _end_watchdog(pid: int | None, dir: Path | None, timeout: float = 10.0) -> None:
    """SIGTERM the cluster's watchdog (not when this process is it) and wait until it is gone."""
    if pid is None or dir is None or pid == os.getpid() or not _pid_is_watchdog(pid, dir):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid) and _pid_is_watchdog(pid, dir):
        os.kill(pid, signal.SIGKILL)


def spawn_watchdog(dir: Path, watched_pid: int) -> int:
    """Starts the watchdog of the cluster in `dir` (detached: a session of its own, no terminal,
    no pipe of the caller held open) and returns its pid."""
    start_time = process_start_time(watched_pid)
    if start_time is None:
        raise BrokerError(f"--stop-with-pid {watched_pid}: no such process")
    log = open(dir / "watchdog.log", "ab")
    try:
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), WATCHDOG_COMMAND,
                              "--dir", str(dir), "--pid", str(watched_pid),
                              "--start-time", str(start_time)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True, cwd="/")
    finally:
        log.close()
    return p.pid


def cmd_watchdog(a) -> int:
    """The watchdog's loop: once process a.pid (started at a.start_time) is gone, stop the cluster
    in a.dir as `stop` does. It ends when the cluster is stopped some other way (its state file
    is gone) or on SIGTERM (which `stop` sends)."""
    for s in (signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    d = Path(a.dir)
    while True:
        if not (d / STATE_FILE).exists():
            return 0
        if watched_process_gone(a.pid, a.start_time):
            break
        time.sleep(WATCHDOG_INTERVAL)
    # From here on a SIGTERM must not cut the stop short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _say(f"kafka_broker watchdog: process {a.pid} is gone; stopping Kafka in {d}")
    try:
        _stop_dir(d, keep_data=False, grace=STOP_GRACE)
    except BrokerError as e:
        _say(f"kafka_broker watchdog: {e.message}")
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def _last_dir_file() -> Path:
    return cache_root() / "last-broker-dir"


def _resolve_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("LAGLESS_BROKER_DIR"):
        return Path(os.environ["LAGLESS_BROKER_DIR"])
    try:
        return Path(_last_dir_file().read_text().strip())
    except FileNotFoundError:
        raise BrokerError("no --dir given and no broker started by `start` is known") from None


def _bootstrap_arg(arg: str | None) -> str:
    b = arg or os.environ.get("LAGLESS_BOOTSTRAP")
    if not b:
        raise BrokerError("no --bootstrap given and LAGLESS_BOOTSTRAP is not set")
    return b


class _Terminated(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def cmd_start(a) -> int:
    c = KafkaCluster(nodes=a.nodes, port=a.port, dir=a.dir, timeout=a.timeout, die_with_parent=False,
                     security=a.security, reauth_ms=a.reauth_ms,
                     racks=a.racks.split(",") if a.racks else None,
                     proxied_listeners=a.proxied_listeners, broker_properties=a.broker_property,
                     features=a.feature, classpath=a.classpath)
    if a.stop_with_pid is not None and process_start_time(a.stop_with_pid) is None:
        raise BrokerError(f"--stop-with-pid {a.stop_with_pid}: no such process")
    c.start()
    if a.stop_with_pid is not None:
        try:
            c.watchdog_pid = spawn_watchdog(c.dir, a.stop_with_pid)
            c._write_state()
        except BaseException:
            c.stop()
            raise
    c.detach()
    try:
        _last_dir_file().write_text(str(c.dir) + "\n")
    except OSError:
        pass
    print(f"bootstrap={c.bootstrap}")
    print(f"dir={c.dir}")
    print(f"pids={','.join(map(str, c.pids))}")
    if c.watchdog_pid is not None:
        print(f"watchdog={c.watchdog_pid}")
    if c.security:  # what `run` would export
        for var, value in c.env().items():
            if var not in ("LAGLESS_BOOTSTRAP", "LAGLESS_BROKER_DIR"):
                print(f"{var}={value}")
    for k in range(1, c.proxied_listeners + 1):
        print(f"proxied.{k}={c.proxied_bootstrap(k)}")
        print(f"proxied.{k}.targets={','.join(f'{HOST}:{b}' for _, b in c.proxied_routes(k))}")
    return 0


def cmd_stop(a) -> int:
    d = _resolve_dir(a.dir)
    _stop_dir(d, a.keep_data, a.grace)
    return 0


def _stop_dir(d: Path, keep_data: bool, grace: float) -> None:
    """`stop`: the cluster in `d` (its watchdog too), and forget it as the last started."""
    c = KafkaCluster.from_state(d)
    c.keep_data = keep_data
    c.stop(grace=grace)
    _say(f"stopped Kafka in {d}" + (" (data kept)" if keep_data else " and removed its data"))
    try:
        if _last_dir_file().read_text().strip() == str(d.resolve()):
            _last_dir_file().unlink()
    except OSError:
        pass


def cmd_run(a) -> int:
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        raise BrokerError("run needs a command: run [--nodes N] -- CMD ARGS...")
    c = KafkaCluster(nodes=a.nodes, port=a.port, dir=a.dir, timeout=a.timeout, security=a.security,
                     reauth_ms=a.reauth_ms, racks=a.racks.split(",") if a.racks else None,
                     proxied_listeners=a.proxied_listeners, broker_properties=a.broker_property,
                     features=a.feature, classpath=a.classpath)

    def on_signal(signum, _frame):
        raise _Terminated(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    child = None
    try:
        c.start()
        env = dict(os.environ, **c.env())
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            raise BrokerError(f"cannot run {cmd[0]!r}: {e.strerror}") from None
        rc = child.wait()
        return rc if rc >= 0 else 128 - rc
    except KeyboardInterrupt:  # the child, in our process group, got the SIGINT too
        _wait_child(child, None)
        return 130
    except _Terminated as t:
        _wait_child(child, t.signum)
        return 128 + t.signum
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # let the clean-up finish
        c.stop()


def _wait_child(child, signum) -> None:
    if child is None or child.poll() is not None:
        return
    if signum is not None:
        child.send_signal(signum)
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def cmd_create_topic(a) -> int:
    b = _bootstrap_arg(a.bootstrap)
    topic_command_create(b, a.name, a.partitions, a.replication_factor)
    print(a.name)
    return 0


def cmd_list_topics(a) -> int:
    for t in topic_command_list(_bootstrap_arg(a.bootstrap)):
        print(t)
    return 0


def cmd_describe_cluster(a) -> int:
    b = _bootstrap_arg(a.bootstrap)
    md = metadata(b, [])
    print(f"cluster_id={md['cluster_id']} controller={md['controller_id']}")
    for nid, (host, port) in sorted(md["brokers"].items()):
        print(f"broker {nid} {host}:{port}")
    sys.stdout.flush()
    run_tool(CLUSTER_TOOL, ["cluster-id", "--bootstrap-server", b], capture=False)
    run_tool(CLUSTER_TOOL, ["list-endpoints", "--bootstrap-server", b], capture=False)
    return 0


def cmd_fetch(_a) -> int:
    print(fetch_kafka())
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka_broker.py",
                                description="Real Kafka (KRaft) brokers for lagless tests.")
    sub = p.add_subparsers(dest="command", required=True)

    def cluster_args(sp):
        sp.add_argument("--nodes", type=int, default=1, help="1 or 3 (any n >= 1 works)")
        sp.add_argument("--port", type=int, help="PLAINTEXT port of node 1 (node i: port+i-1); "
                                                 "default: free ports")
        sp.add_argument("--dir", help="state directory (default: a new temporary one)")
        sp.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds to wait for the cluster (default %(default)s)")
        sp.add_argument("--security", action="store_true",
                        help="also SSL, mutual-TLS, expired- and wrong-host-certificate, "
                             "SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256/512, "
                             "OAUTHBEARER), certificates made at start; `run` exports "
                             "LAGLESS_{SSL,MTLS,SSL_EXPIRED,SSL_WRONGHOST,SASL_PLAINTEXT,SASL_SSL}"
                             "_BOOTSTRAP and LAGLESS_SECURITY_DIR (see its security.json)")
        sp.add_argument("--reauth-ms", type=int, metavar="N",
                        help="with --security: connections.max.reauth.ms=N on the SASL listeners")
        sp.add_argument("--racks", help="broker.rack per node, comma-separated (node i gets the "
                                        "i-th); also turns on the rack-aware replica selector")
        sp.add_argument("--proxied-listeners", type=int, default=0, metavar="N",
                        help="N more PLAINTEXT listeners per node (PROXY1..PROXYN), each advertised "
                             "at a free port where the test runs a proxy to it; `start` prints "
                             "proxied.k=<advertised> and proxied.k.targets=<bound>")
        sp.add_argument("--broker-property", action="append", default=[], metavar="KEY=VALUE",
                        help="a line added to every node's server.properties (repeatable)")
        sp.add_argument("--classpath", action="append", default=[], metavar="DIR_OR_JAR",
                        help="a directory or jar put on every broker's classpath after Kafka's "
                             "jars, for a plugin class a --broker-property names (repeatable)")
        sp.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                        help="a cluster feature finalized at LEVEL when the storage is formatted, "
                             "e.g. transaction.version=1 (repeatable)")

    sp = sub.add_parser("start", help="start a cluster in the background")
    cluster_args(sp)
    sp.add_argument("--stop-with-pid", type=int, metavar="PID",
                    help="also start a detached watchdog that stops the cluster (as `stop` does) "
                         "once process PID is gone; prints watchdog=<its pid>")
    sp.set_defaults(fn=cmd_start)
    # Run by `start --stop-with-pid` only.
    sp = sub.add_parser(WATCHDOG_COMMAND)
    sp.add_argument("--dir", required=True)
    sp.add_argument("--pid", type=int, required=True)
    sp.add_argument("--start-time", type=int, required=True)
    sp.set_defaults(fn=cmd_watchdog)
    sp = sub.add_parser("stop", help="stop a cluster started with `start` and remove its data")
    sp.add_argument("--dir", help="state directory (default: $LAGLESS_BROKER_DIR, else the last started)")
    sp.add_argument("--keep-data", action="store_true")
    sp.add_argument("--grace", type=float, default=STOP_GRACE, help="seconds between SIGTERM and SIGKILL")
    sp.set_defaults(fn=cmd_stop)
    sp = sub.add_parser("run", help="start a cluster, run CMD with LAGLESS_BOOTSTRAP set, stop it")
    cluster_args(sp)
    sp.add_argument("cmd", nargs=argparse.REMAINDER)
    sp.set_defaults(fn=cmd_run)
    sp = sub.add_parser("create-topic", help="create a topic with Kafka's TopicCommand")
    sp.add_argument("name")
    sp.add_argument("--partitions", type=int, default=1)
    sp.add_argument("--replication-factor", type=int)
    sp.add_argument("--bootstrap", help="default: $LAGLESS_BOOTSTRAP")
    sp.set_defaults(fn=cmd_create_topic)
    sp = sub.add_parser("list-topics", help="list topics with Kafka's TopicCommand")
    sp.add_argument("--bootstrap", help="default: $LAGLESS_BOOTSTRAP")
    sp.set_defaults(fn=cmd_list_topics)
    sp = sub.add_parser("describe-cluster", help="brokers and cluster id (metadata + ClusterTool)")
    sp.add_argument("--bootstrap", help="default: $LAGLESS_BOOTSTRAP")
    sp.set_defaults(fn=cmd_describe_cluster)
    sp = sub.add_parser("fetch", help="fetch Kafka's jars into the cache and print their directory")
    sp.set_defaults(fn=cmd_fetch)

    a = p.parse_args(argv)
    if getattr(a, "reauth_ms", None) is not None and not a.security:
        p.error("--reauth-ms needs --security (it applies to the SASL listeners)")
    try:
        return a.fn(a)
    except BrokerError as e:
        print(f"error: {e.message}", file=sys.stderr)
        if e.details:
            print(e.details, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

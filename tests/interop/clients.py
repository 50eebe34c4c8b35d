"""The three clients of the interoperability tests, as processes that print JSON lines.

* lagless: core/examples/lagless_tool.rs (built with cargo)
* Java: java/InteropClient.java (compiled with javac against the broker's kafka-clients jar)
* librdkafka: rdkafka_client.py (confluent-kafka)

All three take the same command line (`produce|consume --bootstrap B --topic T ...`) and print
the same lines: one per produced record `{"partition","offset","key"}`, one per consumed record
`{"partition","offset","key","value","headers"}`, and events `{"event": ...}`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests"))
import kafka_broker  # noqa: E402


class ClientError(AssertionError):
    pass


def build_lagless_tool() -> Path:
    """`cargo build --release --example lagless_tool` (a no-op when up to date), or
    $LAGLESS_TOOL when set."""
    env = os.environ.get("LAGLESS_TOOL")
    if env:
        return Path(env)
    proc = subprocess.run(["cargo", "build", "--release", "--example", "lagless_tool"], cwd=REPO,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        raise ClientError("building lagless_tool failed:\n" + proc.stdout[-4000:])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "examples" / "lagless_tool"


def build_java_client(out_dir: Path) -> list[str]:
    """Compiles InteropClient.java against the broker's jars; returns the command prefix."""
    lib = kafka_broker.fetch_kafka(quiet=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(out_dir),
                           str(HERE / "java" / "InteropClient.java")],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        raise ClientError("javac InteropClient.java failed:\n" + proc.stdout[-4000:])
    java = kafka_broker.require_java()
    return [java, *kafka_broker.TOOL_JVM,
            f"-Dlog4j2.configurationFile={kafka_broker._tools_log4j(lib)}",
            "-cp", f"{out_dir}:{lib}/*", "InteropClient"]


class Proc:
    """A client process; a thread collects its stdout as parsed JSON lines."""

    def __init__(self, name: str, cmd: list[str], log_dir: Path):
        self.name, self.cmd = name, cmd
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.lines: list[dict] = []
        self.last_event_at = time.monotonic()
        self._lock = threading.Lock()
        self.popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.popen.stdout:
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = {"raw": raw}
            with self._lock:
                self.lines.append(obj)
                if "event" in obj:
                    self.last_event_at = time.monotonic()

    # -- what it printed -----------------------------------------------------------------------

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.lines)

    def records(self) -> list[dict]:
        return [x for x in self.snapshot() if "offset" in x and "event" not in x]

    def events(self) -> list[dict]:
        return [x for x in self.snapshot() if "event" in x]

    def assignment(self) -> set[int] | None:
        """The partitions its latest listener event says it owns (None before any event)."""
        latest = None
        for e in self.events():
            if "assignment" in e:
                latest = e["assignment"]
        return None if latest is None else {p for _t, p in latest}

    def stderr_tail(self, n: int = 30) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return ""
        return f"--- {self.name} stderr (last {len(lines)} lines):\n" + "\n".join(lines)

    # -- its life ------------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float) -> int:
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ClientError(f"{self.name} did not finish within {timeout:.0f} s\n"
                              + self.stderr_tail()) from None
        self._reader.join(5)
        return rc

    def wait_ok(self, timeout: float) -> "Proc":
        rc = self.wait(timeout)
        if rc != 0:
            raise ClientError(f"{self.name} exited with {rc}: {' '.join(self.cmd)}\n" + self.stderr_tail())
        return self

    def terminate(self, grace: float = 20.0) -> int:
        """SIGTERM (the clients close cleanly on it), then SIGKILL after `grace` seconds."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._reader.join(5)
        self._stderr.close()
        return self.popen.returncode


class Clients:
    """Starts client processes and remembers them, so the test's teardown can stop them all."""

    def __init__(self, bootstrap: str, lagless_tool: Path | None, java_cmd: list[str], log_dir: Path):
        self.bootstrap = bootstrap
        self.cmds = {
            "java": list(java_cmd),
            "rdkafka": [sys.executable, str(HERE / "rdkafka_client.py")],
        }
        if lagless_tool is not None:  # None: a test of the other two clients only
            self.cmds["lagless"] = [str(lagless_tool)]
        self.log_dir = log_dir
        self.procs: list[Proc] = []

    def start(self, kind: str, command: str, topic: str | None, *args, name: str | None = None) -> Proc:
        """`topic` None: no --topic (a consumer given --regex R instead)."""
        name = name or f"{kind}-{command}-{len(self.procs)}"
        cmd = [*self.cmds[kind], command, "--bootstrap", self.bootstrap,
               *(["--topic", topic] if topic is not None else []), *[str(a) for a in args]]
        p = Proc(name, cmd, self.log_dir)
        self.procs.append(p)
        return p

    def run(self, kind: str, command: str, topic: str, *args, timeout: float = 120.0) -> Proc:
        return self.start(kind, command, topic, *args).wait_ok(timeout)

    def stop_all(self) -> None:
        for p in self.procs:
            if p.alive():
                p.popen.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.terminate(grace=15.0)


def wait_until(cond, timeout: float, what: str, interval: float = 0.2, details=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise ClientError(f"timed out after {timeout:.0f} s waiting for {what}\n{details()}")
        time.sleep(interval)

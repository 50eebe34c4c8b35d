"""Tests of tests/kafka_broker.py against real Kafka processes (each starts its own brokers)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kafka_broker
from kafka_broker import KafkaCluster

SCRIPT = Path(kafka_broker.__file__).resolve()


def cli(*args, timeout=180, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def java_pids_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line mentions `text` (e.g. a state dir)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "java" in cmd and text in cmd and kafka_broker.pid_alive(int(p.name)):
            found.append(int(p.name))
    return found


def assert_gone(pids, state_dir):
    for pid in pids:
        assert not kafka_broker.pid_alive(pid), f"broker pid {pid} still alive"
    assert java_pids_mentioning(str(state_dir)) == []


def parse_kv(out: str) -> dict:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.mark.slow
def test_single_node_topic_and_clean_stop():
    cluster = KafkaCluster(nodes=1)
    with cluster:
        state_dir, pids = cluster.dir, cluster.pids
        assert len(pids) == 1 and (state_dir / "cluster.json").exists()
        assert kafka_broker.api_versions(cluster.bootstrap)  # ApiVersions v0 answers error 0
        out = cli("create-topic", "harness-t", "--partitions", "3", "--bootstrap", cluster.bootstrap)
        assert out.returncode == 0, out.stderr
        md = kafka_broker.metadata(cluster.bootstrap, ["harness-t"])
        assert md["topics"]["harness-t"]["error"] == 0
        assert sorted(md["topics"]["harness-t"]["partitions"]) == [0, 1, 2]
        assert "harness-t" in cluster.list_topics()
        listed = cli("list-topics", "--bootstrap", cluster.bootstrap)
        assert listed.returncode == 0 and "harness-t" in listed.stdout.split()
        cluster.create_topic("harness-raw", partitions=2)
        assert "harness-raw" in cluster.list_topics()
    assert_gone(pids, state_dir)
    assert not state_dir.exists()


def test_broker_properties_reach_every_node_and_bad_ones_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        KafkaCluster(nodes=1, broker_properties=["no-equals-sign"])
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        KafkaCluster(nodes=1, broker_properties=["=value"])
    cluster = KafkaCluster(nodes=1, dir=tmp_path / "c", broker_properties=[
        "max.incremental.fetch.session.cache.slots=8"])
    cluster.dir = tmp_path / "c"
    node = kafka_broker.Node(1, 1, 2, tmp_path / "c" / "node-1")
    cluster.nodes = {1: node}
    cluster._write_config(node)
    assert "max.incremental.fetch.session.cache.slots=8\n" in node.props.read_text()


PROBE_REPORTER = """
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.metrics.*;
public class ClasspathProbe implements MetricsReporter {
    public void configure(Map<String, ?> configs) {
        try {
            Files.write(Paths.get(configs.get("classpath.probe.file").toString()), new byte[0]);
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }
    public void init(List<KafkaMetric> metrics) {}
    public void metricChange(KafkaMetric metric) {}
    public void metricRemoval(KafkaMetric metric) {}
    public void close() {}
}
"""


@pytest.mark.slow
def test_classpath_entries_reach_the_broker_and_missing_ones_are_refused(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        KafkaCluster(nodes=1, classpath=[str(tmp_path / "absent")])
    src, classes = tmp_path / "src", tmp_path / "classes"
    src.mkdir()
    classes.mkdir()
    (src / "ClasspathProbe.java").write_text(PROBE_REPORTER)
    lib = kafka_broker.fetch_kafka(quiet=True)
    subprocess.run(["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes),
                    str(src / "ClasspathProbe.java")], check=True, capture_output=True)
    probe = tmp_path / "configured"
    # Through the CLI, as the Rust tests start their brokers: the broker loads the reporter from
    # the directory (it would not start without the class), and the state file keeps the entry.
    out = cli("start", "--dir", str(tmp_path / "c"), "--classpath", str(classes),
              "--broker-property", "metric.reporters=ClasspathProbe",
              "--broker-property", f"classpath.probe.file={probe}")
    try:
        assert out.returncode == 0, out.stderr
        assert probe.exists()
        state = json.loads((tmp_path / "c" / "cluster.json").read_text())
        assert state["classpath"] == [str(classes.resolve())]
        assert KafkaCluster.from_state(tmp_path / "c").classpath == [str(classes.resolve())]
    finally:
        stopped = cli("stop", "--dir", str(tmp_path / "c"))
    assert stopped.returncode == 0, stopped.stderr


def test_taken_port_fails_fast():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        t0 = time.monotonic()
        out = cli("start", "--port", str(port), timeout=30)
        elapsed = time.monotonic() - t0
    assert out.returncode != 0
    assert f"127.0.0.1:{port}" in out.stderr and "already in use" in out.stderr
    assert elapsed < 10, f"took {elapsed:.1f} s"
    assert java_pids_mentioning(f"127.0.0.1:{port}") == []


@pytest.mark.slow
def test_three_node_cluster():
    cluster = KafkaCluster(nodes=3)
    with cluster:
        state_dir, pids = cluster.dir, cluster.pids
        assert len(pids) == 3 and len(set(cluster.bootstrap.split(","))) == 3
        for node in cluster.nodes.values():  # a static quorum: every node names all three voters
            voters = [l for l in node.props.read_text().splitlines() if l.startswith("controller.quorum.voters=")]
            assert len(voters) == 1 and voters[0].count("@127.0.0.1:") == 3
        for address in cluster.bootstrap.split(","):
            assert sorted(kafka_broker.metadata(address, [])["brokers"]) == [1, 2, 3]
        cluster.create_topic("three", partitions=3)
        parts = cluster.metadata(["three"])["topics"]["three"]["partitions"]
        assert sorted(parts) == [0, 1, 2] and all(leader in (1, 2, 3) for leader in parts.values())
    assert_gone(pids, state_dir)
    assert not state_dir.exists()


@pytest.mark.slow
def test_two_brokers_side_by_side(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), "start", "--dir", str(d)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for d in dirs]
    outs = [p.communicate(timeout=240) for p in procs]
    try:
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
        infos = [parse_kv(out) for out, _ in outs]
        assert infos[0]["bootstrap"] != infos[1]["bootstrap"]
        for info in infos:
            assert kafka_broker.metadata(info["bootstrap"], [])["brokers"].keys() == {1}
            assert Path(info["dir"]).resolve() in [d.resolve() for d in dirs]
        pids = [int(i["pids"]) for i in infos]
        assert all(kafka_broker.pid_alive(p) for p in pids)
    finally:
        for d in dirs:
            if (d / "cluster.json").exists():
                stop = cli("stop", "--dir", str(d))
                assert stop.returncode == 0, stop.stderr
    for pid, d in zip(pids, dirs):
        assert_gone([pid], d)
        assert not d.exists()


@pytest.mark.slow
def test_run_propagates_failure_and_cleans_up(tmp_path):
    d = tmp_path / "run"
    probe = tmp_path / "env.txt"
    out = cli("run", "--dir", str(d), "--", "sh", "-c",
              f'echo "$LAGLESS_BOOTSTRAP $LAGLESS_BROKER_DIR" > {probe}; false')
    assert out.returncode == 1, out.stderr
    bootstrap, broker_dir = probe.read_text().split()
    assert bootstrap.startswith("127.0.0.1:") and Path(broker_dir) == d.resolve()
    assert not d.exists()
    assert java_pids_mentioning(str(d)) == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(bootstrap.rsplit(":", 1)[1])), timeout=1).close()


@pytest.mark.slow
@pytest.mark.parametrize("when", ["while-starting", "while-running"])
def test_run_stops_broker_on_sigterm(tmp_path, when):
    d = tmp_path / "term"
    ready = tmp_path / "cmd-started"
    p = subprocess.Popen([sys.executable, str(SCRIPT), "run", "--dir", str(d), "--",
                          "sh", "-c", f"touch {ready}; exec sleep 600"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not (ready.exists() if when == "while-running" else java_pids_mentioning(str(d))):
        assert p.poll() is None, p.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert java_pids_mentioning(str(d)) == [] and not d.exists()
    assert ready.exists() == (when == "while-running")


def test_kafka_fixture_and_unique_topics(kafka, make_topic):
    a, b = make_topic(), make_topic(partitions=2)
    assert a != b
    md = kafka_broker.metadata(kafka.bootstrap, [a, b])
    assert len(md["topics"][a]["partitions"]) == 1 and len(md["topics"][b]["partitions"]) == 2


# -- start --stop-with-pid: a watchdog stops the cluster once a given process is gone -----------

def test_watched_process_gone_tells_a_reused_pid_from_the_watched_process():
    me = os.getpid()
    started = kafka_broker.process_start_time(me)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    table = [  # (pid, start time the watchdog saw, gone?)
        (me, started, False),
        (me, started + 1, True),  # another process under the same pid
        (dead.pid, None, True),
    ]
    for pid, start_time, gone in table:
        assert kafka_broker.watched_process_gone(pid, start_time) == gone, (pid, start_time)


def test_stop_with_pid_of_no_process_fails_before_starting_anything(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    d = tmp_path / "never"
    out = cli("start", "--dir", str(d), "--stop-with-pid", str(dead.pid), timeout=30)
    assert out.returncode == 1 and f"--stop-with-pid {dead.pid}: no such process" in out.stderr
    assert not (d / "cluster.json").exists() and java_pids_mentioning(str(d)) == []


def stdin_child() -> subprocess.Popen:
    """A short-lived process: it exits when its stdin is closed."""
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)


def wait_gone(pids, seconds: float) -> float:
    """Seconds until none of `pids` is alive; fails the test after `seconds`."""
    t0 = time.monotonic()
    while any(kafka_broker.pid_alive(p) for p in pids):
        assert time.monotonic() - t0 < seconds, \
            f"still alive after {seconds:.0f} s: {[p for p in pids if kafka_broker.pid_alive(p)]}"
        time.sleep(0.1)
    return time.monotonic() - t0


@contextlib.contextmanager
def watched_cluster(d: Path):
    """A cluster started in `d` with `--stop-with-pid` of a fresh `stdin_child()`: yields
    (child, broker pid, watchdog pid, start's key=value output). Afterwards the child is killed
    if it still runs, and the cluster stopped if its state is still there."""
    child = stdin_child()
    try:
        out = cli("start", "--dir", str(d), "--stop-with-pid", str(child.pid))
        assert out.returncode == 0, out.stderr
        info = parse_kv(out.stdout)
        yield child, int(info["pids"]), int(info["watchdog"]), info
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if (d / "cluster.json").exists():
            cli("stop", "--dir", str(d))


@pytest.mark.slow
def test_stop_with_pid_stops_the_cluster_once_that_process_is_gone(tmp_path):
    d = tmp_path / "watched"
    with watched_cluster(d) as (child, broker, watchdog, info):
        state = json.loads((d / "cluster.json").read_text())
        assert state["watchdog_pid"] == watchdog
        # `start` has exited and its brokers run on (detached), as without the flag; beside them
        # the watchdog of this very directory.
        assert kafka_broker.pid_alive(broker) and kafka_broker._pid_is_broker(
            broker, d.resolve() / "node-1" / "server.properties")
        assert kafka_broker.pid_alive(watchdog) and kafka_broker._pid_is_watchdog(watchdog, d.resolve())
        assert kafka_broker.api_versions(info["bootstrap"])
        child.stdin.close()
        child.wait(10)
        # The broker is stopped as `stop` stops it: its process gone, the watchdog gone, the
        # state directory removed (a broker that merely died would leave it).
        took = wait_gone([broker, watchdog], 60)
        assert not d.exists()
        assert java_pids_mentioning(str(d)) == []
        print(f"broker and watchdog gone {took:.1f} s after the watched process exited")


@pytest.mark.slow
def test_stop_of_a_watched_cluster_ends_its_watchdog(tmp_path):
    d = tmp_path / "stopped"
    with watched_cluster(d) as (child, broker, watchdog, _):
        assert kafka_broker.pid_alive(watchdog)
        stop = cli("stop", "--dir", str(d))
        assert stop.returncode == 0, stop.stderr
        # `stop` waits for both: no watchdog left behind, and the watched process untouched.
        assert not kafka_broker.pid_alive(broker) and not kafka_broker.pid_alive(watchdog)
        assert not d.exists() and java_pids_mentioning(str(d)) == []
        assert child.poll() is None

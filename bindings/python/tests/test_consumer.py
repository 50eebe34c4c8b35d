"""The consumer against a real broker: round trips, group membership, callbacks, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Set

import pytest

import lagless
from conftest import consume_n, produce

HERE = os.path.dirname(os.path.abspath(__file__))


def test_produce_consume_round_trip_keeps_keys_values_headers(bootstrap, make_topic, consumers):
    topic = make_topic(3)
    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(300):
            p.produce(topic, value=f"v{i}".encode(), key=f"k{i}", headers=[("h", b"x"), ("n", None)])
        p.flush(30)
        partition, offset = p.send(topic, value="last", key=b"kz", partition=1, timestamp=1234)
        assert (partition, offset) >= (1, 0)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, p) for p in range(3)])
    msgs = consume_n(c, 301)
    assert len(msgs) == 301
    values = {m.value for m in msgs}
    assert values == {f"v{i}".encode() for i in range(300)} | {b"last"}
    by_value = {m.value: m for m in msgs}
    m = by_value[b"v7"]
    assert m.key == b"k7" and m.topic == topic and m.headers == [("h", b"x"), ("n", None)]
    assert not m.from_recovery
    last = by_value[b"last"]
    assert (last.partition, last.offset, last.timestamp, last.key) == (1, offset, 1234, b"kz")
    # Offsets within a partition are consecutive and in order.
    for p in range(3):
        offs = [x.offset for x in msgs if x.partition == p]
        assert offs == list(range(len(offs)))
    # poll() hands out one message at a time; nothing is left now.
    assert c.poll(0.2) is None


def test_poll_one_at_a_time_and_position_counts_only_handed_out(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 20)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    tp = lagless.TopicPartition(topic, 0)
    c.assign([tp])
    first = None
    deadline = time.monotonic() + 20
    while first is None:
        assert time.monotonic() < deadline
        first = c.poll(0.5)
    assert first.offset == 0
    second = c.poll(5)
    assert second is not None and second.offset == 1
    # The core fetched all 20, but only two were handed out.
    assert c.position([tp])[0].offset == 2
    rest = consume_n(c, 18)
    assert [m.offset for m in rest] == list(range(2, 20))


def test_commit_without_offsets_counts_only_the_records_poll_returned(bootstrap, make_topic, group, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 50)
    c = lagless.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumers.append(c)
    tp = lagless.TopicPartition(topic, 0)
    c.assign([tp])
    m = None
    deadline = time.monotonic() + 20
    while m is None:
        assert time.monotonic() < deadline
        m = c.poll(0.5)
    # The broker had all 50 records to give; poll() returned one, and only it counts as consumed.
    res = c.commit()
    assert res is not None and [(x.partition, x.offset) for x in res] == [(0, m.offset + 1)]
    assert c.committed([tp], timeout=10)[0].offset == m.offset + 1
    assert c.position([tp])[0].offset == m.offset + 1
    assert [x.offset for x in consume_n(c, 49)] == list(range(m.offset + 1, 50))


def test_polling_one_record_at_a_time_counts_for_max_poll_interval(bootstrap, make_topic, group, consumers):
    """Each poll() is a poll of the member (KIP-62): handing out records one at a time, slower
    than max.poll.interval.ms in total, keeps the member in the group."""
    topic = make_topic(1)
    produce(bootstrap, topic, 12)
    events: List[str] = []
    c = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": 2000,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumers.append(c)
    c.subscribe([topic], on_revoke=lambda _c, p: events.append("revoked"), on_lost=lambda _c, p: events.append("lost"))
    offsets: List[int] = []
    deadline = time.monotonic() + 60
    while not offsets:
        assert time.monotonic() < deadline, "no record"
        m = c.poll(0.2)
        if m is not None:
            offsets.append(m.offset)
    member = c.member_id()
    assert member is not None
    while len(offsets) < 12:
        assert time.monotonic() < deadline, f"got {len(offsets)} of 12 records"
        time.sleep(0.5)  # processing: 12 records take three times max.poll.interval.ms
        m = c.poll(1)
        if m is not None:
            offsets.append(m.offset)
    assert offsets == list(range(12))
    extra = c.poll(0.5)  # runs the callbacks of anything that happened meanwhile
    assert events == [] and c.member_id() == member, "the member left the group while polling"
    assert extra is None, "a record came twice"


def test_iteration_and_context_manager(bootstrap, make_topic):
    topic = make_topic(1)
    produce(bootstrap, topic, 5)
    seen = []
    with lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([lagless.TopicPartition(topic, 0)])
        for msg in c:
            seen.append(msg.value)
            if len(seen) == 5:
                break
    assert seen == [f"v{i}".encode() for i in range(5)]
    with pytest.raises(lagless.ClosedError):
        c.poll(0)
    assert list(c) == []  # iteration over a closed consumer ends at once


def test_assign_with_offsets_and_seek(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 10)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0, 7)])
    assert [m.offset for m in consume_n(c, 3)] == [7, 8, 9]
    c.seek(lagless.TopicPartition(topic, 0, lagless.OFFSET_BEGINNING))
    assert consume_n(c, 1)[0].offset == 0
    assert c.get_watermark_offsets(lagless.TopicPartition(topic, 0)) == (0, 10)


class Recorder(lagless.RebalanceListener):
    def __init__(self) -> None:
        self.events: List[tuple] = []
        self.owned: Set[int] = set()

    def on_partitions_assigned(self, consumer, partitions):
        assert isinstance(consumer, lagless.Consumer)
        self.events.append(("assigned", sorted(p.partition for p in partitions)))
        self.owned |= {p.partition for p in partitions}

    def on_partitions_revoked(self, consumer, partitions):
        self.events.append(("revoked", sorted(p.partition for p in partitions)))
        self.owned -= {p.partition for p in partitions}


class Member:
    """tests/member.py in a subprocess, its JSON events collected by a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, extra: Dict[str, object] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "member.py"), bootstrap, topic, group, json.dumps(extra or {})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.events: List[dict] = []
        self.owned: Set[int] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            e = json.loads(line)
            with self.lock:
                self.events.append(e)
                if e["event"] == "assigned":
                    self.owned |= set(e["partitions"])
                elif e["event"] in ("revoked", "lost"):
                    self.owned -= set(e["partitions"])

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def has(self, event: str) -> bool:
        with self.lock:
            return any(e["event"] == event for e in self.events)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("exit")
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait()


def poll_until(c: lagless.Consumer, cond, seconds: float, what: str) -> float:
    start = time.monotonic()
    while not cond():
        assert time.monotonic() - start < seconds, f"timed out waiting for {what}"
        c.poll(0.1)
    return time.monotonic() - start


def test_two_processes_share_a_group_and_listeners_see_the_rebalance(bootstrap, make_topic, group, consumers):
    topic = make_topic(4)
    rec = Recorder()
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumers.append(c)
    c.subscribe([topic], rec)
    poll_until(c, lambda: rec.owned == {0, 1, 2, 3}, 30, "the first member to own every partition")
    other = Member(bootstrap, topic, group)
    try:
        poll_until(
            c,
            lambda: len(rec.owned) == 2 and len(other.owned) == 2,
            45,
            "the partitions to be split between the two processes",
        )
        assert rec.owned.isdisjoint(other.owned)
        assert rec.owned | other.owned == {0, 1, 2, 3}
        assert any(e[0] == "revoked" and e[1] for e in rec.events), rec.events
        assert sorted(p.partition for p in c.assignment()) == sorted(rec.owned)
    finally:
        other.stop()


def test_two_processes_share_a_consumer_protocol_group(bootstrap, make_topic, group, consumers):
    """KIP-848 (`group.protocol=consumer`): the broker splits the partitions between the two
    processes once the first has revoked what moves, and the settings the broker decides under
    that protocol are refused naming the key."""
    topic = make_topic(4)
    rec = Recorder()
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}
    c = lagless.Consumer(config)
    consumers.append(c)
    c.subscribe([topic], rec)
    poll_until(c, lambda: rec.owned == {0, 1, 2, 3}, 30, "the first member to own every partition")
    other = Member(bootstrap, topic, group, {"group.protocol": "consumer"})
    try:
        poll_until(
            c,
            lambda: len(rec.owned) == 2 and len(other.owned) == 2,
            45,
            "the partitions to be split between the two processes",
        )
        assert rec.owned.isdisjoint(other.owned)
        assert rec.owned | other.owned == {0, 1, 2, 3}
        revoked = {p for e in rec.events if e[0] == "revoked" for p in e[1]}
        assert revoked == {0, 1, 2, 3} - rec.owned, rec.events
        assert sorted(p.partition for p in c.assignment()) == sorted(rec.owned)
    finally:
        other.stop()
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Consumer({**config, "session.timeout.ms": 10000})
    assert e.value.key == "session.timeout.ms"
    assert "group.protocol=consumer" in str(e.value)


def test_commit_inside_on_partitions_revoked(bootstrap, make_topic, group):
    topic = make_topic(1)
    produce(bootstrap, topic, 10)
    committed_in_callback: List[List[lagless.TopicPartition]] = []

    def on_revoke(consumer: lagless.Consumer, partitions):
        committed_in_callback.append(consumer.commit() or [])

    c = lagless.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic], on_revoke=on_revoke)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 4:
        assert time.monotonic() < deadline
        got.extend(c.consume(4 - len(got), timeout=0.5))
    assert [m.offset for m in got] == [0, 1, 2, 3]
    c.close()
    assert committed_in_callback and committed_in_callback[0][0].offset == 4
    checker = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = checker.committed([lagless.TopicPartition(topic, 0)], timeout=10)
        # Only what consume() handed out is committed, not all the core had fetched.
        assert tp.offset == 4
    finally:
        checker.close()


def test_callback_exception_is_raised_from_poll_after_the_assignment(bootstrap, make_topic, group, consumers):
    topic = make_topic(2)

    class Boom(Exception):
        pass

    def on_assign(consumer, partitions):
        if partitions:
            raise Boom("from on_assign")

    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumers.append(c)
    c.subscribe([topic], on_assign=on_assign)
    deadline = time.monotonic() + 30
    with pytest.raises(Boom, match="from on_assign"):
        while time.monotonic() < deadline:
            c.poll(0.2)
    # The assignment change completed anyway.
    assert sorted(tp.partition for tp in c.assignment()) == [0, 1]
    assert c.poll(0.2) is None


def test_a_refused_subscribe_keeps_the_callbacks_of_the_subscription_in_force(bootstrap, make_topic, group, consumers):
    topic = make_topic(2)
    calls: List[str] = []
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumers.append(c)
    c.subscribe([topic], on_assign=lambda _c, parts: calls.append(f"first {len(parts)}"))
    # Refused (not a regular expression): the subscription to `topic` stays, and so must the
    # callbacks given with it.
    with pytest.raises(lagless.InvalidArgumentError, match="bad topic pattern"):
        c.subscribe_pattern("(", on_assign=lambda _c, parts: calls.append(f"second {len(parts)}"))
    deadline = time.monotonic() + 30
    while not calls and time.monotonic() < deadline:
        c.poll(0.2)
    assert calls == ["first 2"]
    assert c.subscription() == [topic]


def test_sigint_interrupts_a_blocking_poll_promptly(bootstrap, make_topic):
    topic = make_topic(1)
    script = f"""
import sys, time, lagless
c = lagless.Consumer({{"bootstrap.servers": {bootstrap!r}}})
c.assign([lagless.TopicPartition({topic!r}, 0)])
c.poll(0.5)
print("polling", flush=True)
try:
    c.poll(60)
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "polling"
        time.sleep(0.5)  # well inside poll(60)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        elapsed = time.monotonic() - start
        assert line == "interrupted"
        print(f"KeyboardInterrupt {elapsed * 1000:.0f} ms after SIGINT")
        assert elapsed < 0.5, f"KeyboardInterrupt took {elapsed:.3f} s"
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_consumer_collected_without_close_leaves_the_group(bootstrap, make_topic, group, consumers):
    topic = make_topic(2)
    session = {"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000}
    rec = Recorder()
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group, **session})
    consumers.append(c)
    c.subscribe([topic], rec)
    poll_until(c, lambda: rec.owned == {0, 1}, 30, "the first member to own both partitions")
    other = Member(bootstrap, topic, group, session)
    try:
        poll_until(c, lambda: len(rec.owned) == 1 and len(other.owned) == 1, 45, "a split")
        other.send("drop")  # del + gc.collect() in the other process, which stays alive
        took = poll_until(c, lambda: rec.owned == {0, 1}, 25, "the takeover after the drop")
        assert other.has("dropped")
        assert other.proc.poll() is None, "the other process must still be alive"
        # Waiting out the session timeout would take 30 s.
        assert took < 15, f"takeover took {took:.1f} s"
        print(f"takeover {took:.1f} s after the drop")
    finally:
        other.stop()


def test_bad_config_key_raises_config_error_naming_it(bootstrap):
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Consumer({"bootstrap.servers": bootstrap, "sesion.timeout.ms": 10000})
    assert e.value.key == "sesion.timeout.ms"
    assert "sesion.timeout.ms" in str(e.value)
    assert e.value.code == 1 and e.value.name == "CONFIG" and not e.value.retriable
    assert isinstance(e.value, lagless.LaglessError) and isinstance(e.value, ValueError)
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Consumer({"bootstrap.servers": bootstrap, "session.timeout.ms": "soon"})
    assert e.value.key == "session.timeout.ms"
    with pytest.raises(TypeError):
        lagless.Consumer({"bootstrap.servers": bootstrap, "session.timeout.ms": [1]})
    # bool and int values become strings as Java configs write them.
    lagless.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False, "session.timeout.ms": 10000}
    ).close()


def test_config_may_be_any_mapping_and_exit_returns_none(bootstrap):
    # The stubs say Mapping[str, Any]: a read-only mapping works like a dict.
    from types import MappingProxyType

    config = MappingProxyType({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    c = lagless.Consumer(config)
    assert c.__exit__(None, None, None) is None
    with pytest.raises(lagless.ConfigError) as e:
        lagless.Producer(MappingProxyType({"bootstrap.servers": bootstrap, "no.such.key": 1}))
    assert e.value.key == "no.such.key"
    with pytest.raises(TypeError, match="config must be a mapping"):
        lagless.Consumer([("bootstrap.servers", bootstrap)])  # type: ignore[arg-type]
    # An exception inside `with` is not swallowed.
    with pytest.raises(KeyError):
        with lagless.Producer({"bootstrap.servers": bootstrap}):
            raise KeyError("inside")


def test_unknown_topic_raises_unknown_topic_error(bootstrap, consumers):
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    with pytest.raises(lagless.UnknownTopicError) as e:
        c.partitions_for("no-such-topic-py", timeout=10)
    assert e.value.topic == "no-such-topic-py"
    # An assigned partition of a missing topic fails alone, through poll(): the core reports it
    # once it made no progress for task.timeout.ms (its offset lookup cannot succeed).
    c2 = lagless.Consumer({"bootstrap.servers": bootstrap, "task.timeout.ms": 1000})
    consumers.append(c2)
    c2.assign([lagless.TopicPartition("no-such-topic-py", 0)])
    deadline = time.monotonic() + 20
    with pytest.raises((lagless.UnknownTopicError, lagless.PartitionStuckError)) as e2:
        while time.monotonic() < deadline:
            c2.poll(0.2)
    assert e2.value.topic == "no-such-topic-py"
    with lagless.Producer({"bootstrap.servers": bootstrap}) as p:
        with pytest.raises(lagless.UnknownTopicError):
            p.send("no-such-topic-py", b"x")


def test_unreachable_broker_fails_within_the_timeout():
    c = lagless.Consumer({"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 500})
    try:
        start = time.monotonic()
        with pytest.raises(lagless.LaglessError) as e:
            c.partitions_for("any", timeout=2.0)
        assert time.monotonic() - start < 4.0
        assert e.value.retriable
        assert isinstance(e.value, (lagless.LaglessTimeout, lagless.TransportError))
    finally:
        c.close(timeout=1)


def test_wakeup_from_another_thread_raises_wakeup_error(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    c = lagless.Consumer({"bootstrap.servers": bootstrap})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0)])
    threading.Timer(0.3, c.wakeup).start()
    start = time.monotonic()
    with pytest.raises(lagless.WakeupError):
        c.poll(30)
    assert time.monotonic() - start < 5


def test_commit_and_committed_round_trip(bootstrap, make_topic, group, consumers):
    topic = make_topic(2)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumers.append(c)
    c.assign([lagless.TopicPartition(topic, 0), lagless.TopicPartition(topic, 1)])
    res = c.commit([lagless.TopicPartition(topic, 0, 5, "meta")])
    assert res is not None and res[0].offset == 5 and res[0].error is None
    assert res[0].metadata == "meta"
    done = threading.Event()
    results = []

    def cb(err, partitions):
        results.append((err, partitions))
        done.set()

    c.commit([lagless.TopicPartition(topic, 1, 3)], asynchronous=True, callback=cb)
    deadline = time.monotonic() + 20
    while not done.is_set():
        assert time.monotonic() < deadline
        c.poll(0.1)
    assert results[0][0] is None
    # The callback gets what was committed.
    assert [(tp.partition, tp.offset, tp.error) for tp in results[0][1]] == [(1, 3, None)]
    got = {tp.partition: tp for tp in c.committed(c.assignment(), timeout=10)}
    assert got[0].offset == 5 and got[0].metadata == "meta" and got[1].offset == 3


def test_pause_and_resume(bootstrap, make_topic, consumers):
    topic = make_topic(1)
    produce(bootstrap, topic, 10)
    c = lagless.Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumers.append(c)
    tp = lagless.TopicPartition(topic, 0)
    c.assign([tp])
    assert consume_n(c, 1)[0].offset == 0
    c.pause([tp])
    assert c.paused() == [tp]
    assert c.consume(10, timeout=0.5) == []
    c.resume([tp])
    assert [m.offset for m in consume_n(c, 9)] == list(range(1, 10))


def test_core_logs_reach_the_lagless_logger(bootstrap):
    # `retries` is deprecated and logged once per process: use a fresh one.
    script = f"""
import logging, lagless
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
lagless.Consumer({{"bootstrap.servers": {bootstrap!r}, "retries": 3}}).close()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert any(
        line.startswith("lagless WARNING") and "retries" in line for line in out.stderr.splitlines()
    ), out.stderr


def test_topic_partition_value_semantics():
    a = lagless.TopicPartition("t", 1, 5)
    b = lagless.TopicPartition("t", 1)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert lagless.TopicPartition("t", 0) < a
    assert b.offset == lagless.OFFSET_INVALID
    a.offset = 9
    assert a.offset == 9
    assert "offset=9" in repr(a)


def test_metrics_are_plain_dicts_counting_what_was_consumed_and_committed(bootstrap, make_topic, group, consumers):
    topic = make_topic(2)
    produce(bootstrap, topic, 12, partition=0)
    produce(bootstrap, topic, 5, partition=1)
    c = lagless.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    consumers.append(c)
    tps = [lagless.TopicPartition(topic, p) for p in range(2)]
    c.assign(tps)
    msgs = consume_n(c, 17)
    c.commit(offsets=[lagless.TopicPartition(topic, 0, 7)], asynchronous=False)
    m = c.metrics()
    assert type(m) is dict
    json.dumps(m)  # plain data
    assert m["group"] is None and m["assigned_partitions"] == 2
    assert m["records_consumed_total"] == 17
    assert m["bytes_consumed_total"] == sum(len(x.key or b"") + len(x.value or b"") for x in msgs)
    # Windowed as the Java client's rates (over at least one whole 30 s window), recorded poll by
    # poll with the records: the same bytes per record as the totals.
    assert 0 < m["bytes_consumed_rate"] <= m["bytes_consumed_total"] / 30.0
    per_record = m["bytes_consumed_rate"] / m["records_consumed_rate"]
    assert abs(per_record - m["bytes_consumed_total"] / 17) < 1e-9
    parts = {p["partition"]: p for p in m["partitions"]}
    assert parts[0]["committed_offset"] == 7 and parts[1]["committed_offset"] is None
    for p, n in ((0, 12), (1, 5)):
        assert (parts[p]["position"], parts[p]["hi_offset"], parts[p]["consumer_lag"]) == (n, n, 0)
        assert parts[p]["records_consumed"] == n

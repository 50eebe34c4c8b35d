"""KIP-848 server-side regex subscriptions with lagless and the Java client in ONE group: lagless
subscribes with `subscribe_regex(R)`, the Java client with `subscribe(SubscriptionPattern(R))`,
both under `group.protocol=consumer`, so the group coordinator resolves R once for the group and
splits what matches between the two.

R matches whole names `<prefix>-orders-[a-z]+`: topics `-orders-a` and `-orders-b` from the start,
`-orders-c` created while the group runs; `-orders-a-retry` (R matches a prefix of its name) and
`old-<prefix>-orders-a` (R matches a suffix) must never be read. Records are produced to all of
them throughout, by a lagless producer whose lines say where each record went, so every produced
offset is counted end to end. Midway one member leaves (SIGTERM: it revokes, commits and leaves)
and the other takes over. Both members commit what they printed after every poll and on
revocation, so a record is read twice only where a partition moved between them (the hand-over),
and the test prints how many were.

Kafka 4.1 refreshes a group's resolved regexes at most every 10 s (and on a member's heartbeat),
so the new topic is waited for with a deadline of 45 s and the time it took is printed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest

from clients import wait_until

CONSUMER_PROTOCOL = ["--config", "group.protocol=consumer"]
PARTITIONS = {"a": 3, "b": 3, "c": 2}
OTHERS = 2  # partitions of each non-matching topic
BATCH = 40  # records per topic per producer round
NEW_TOPIC_DEADLINE = 45.0


def ownership_intervals(member, end_us: int) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """{(topic, partition): [(from_us, to_us)]} from the member's listener events (`assignment`
    is its whole assignment after each change, `ts_us` the wall clock of the callback)."""
    held: dict[tuple[str, int], int] = {}
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for e in member.events():
        if "assignment" not in e or "ts_us" not in e:
            continue
        now = {(t, p) for t, p in e["assignment"]}
        for tp in set(held) - now:
            out.setdefault(tp, []).append((held.pop(tp), e["ts_us"]))
        for tp in now - set(held):
            held[tp] = e["ts_us"]
    for tp, since in held.items():
        out.setdefault(tp, []).append((since, end_us))
    return out


def owned(member) -> set[tuple[str, int]]:
    latest: list = []
    for e in member.events():
        if "assignment" in e:
            latest = e["assignment"]
    return {(t, p) for t, p in latest}


def describe(pair) -> str:
    lines = []
    for m in pair:
        lines.append(f"{m.name}: alive={m.alive()} events="
                     f"{[(e['event'], e.get('partitions'), e.get('generation')) for e in m.events()]}")
        lines.append(m.stderr_tail(8))
    return "\n".join(lines)


class Producing(threading.Thread):
    """Rounds of BATCH keyed records to every topic in `topics` (which may grow) until stopped;
    `produced` holds (topic, partition, offset) of every record the producer said it wrote."""

    def __init__(self, clients, topics: list[str]):
        super().__init__(name="producing", daemon=True)
        self.clients, self.topics = clients, list(topics)
        self.lock = threading.Lock()
        self.produced: set[tuple[str, int, int]] = set()
        self.rounds = 0
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def add(self, topic: str) -> None:
        with self.lock:
            self.topics.append(topic)

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                with self.lock:
                    topics = list(self.topics)
                for t in topics:
                    p = self.clients.run("lagless", "produce", t, "--count", BATCH,
                                         "--start", self.rounds * BATCH, "--keyed")
                    lines = p.records()
                    assert len(lines) == BATCH, lines[-3:]
                    with self.lock:
                        self.produced |= {(t, x["partition"], x["offset"]) for x in lines}
                self.rounds += 1
                self.stopped.wait(0.3)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def stop(self) -> None:
        self.stopped.set()
        self.join(60)
        assert not self.is_alive(), "the producer did not stop"
        if self.error is not None:
            raise self.error

    def of(self, topics) -> set[tuple[str, int, int]]:
        with self.lock:
            return {r for r in self.produced if r[0] in topics}


@pytest.mark.parametrize("leaver", ["java", "lagless"])
def test_lagless_and_java_share_a_regex_subscription(clients, kafka, leaver):
    prefix = f"rxio-{uuid.uuid4().hex[:8]}"
    regex = f"{prefix}-orders-[a-z]+"
    matching = {k: f"{prefix}-orders-{k}" for k in PARTITIONS}
    others = [f"{prefix}-orders-a-retry", f"old-{prefix}-orders-a"]
    for k in ("a", "b"):
        kafka.create_topic(matching[k], partitions=PARTITIONS[k])
    for t in others:
        kafka.create_topic(t, partitions=OTHERS)
    producing = Producing(clients, [matching["a"], matching["b"], *others])
    producing.start()
    group = f"interop-regex-{uuid.uuid4().hex[:8]}"
    member_args = ["--regex", regex, "--group", group, "--commit", *CONSUMER_PROTOCOL,
                   "--config", "max.poll.records=50"]
    lagless = clients.start("lagless", "consume", None, *member_args, "--poll-delay-ms", 10,
                            name="lagless-regex")
    java = clients.start("java", "consume", None, *member_args, name="java-regex")
    pair = [lagless, java]
    stayer, leaving = (lagless, java) if leaver == "java" else (java, lagless)
    t0 = time.monotonic()
    try:
        first = {(matching[k], p) for k in ("a", "b") for p in range(PARTITIONS[k])}

        def shared(want) -> bool:
            a, b = owned(lagless), owned(java)
            return a and b and not (a & b) and a | b == want

        wait_until(lambda: shared(first), 60, "the two members to share the matching partitions",
                   details=lambda: describe(pair))
        split = {m.name: sorted(owned(m)) for m in pair}
        shared_after = time.monotonic() - t0

        # A topic R matches, created now: the coordinator's next regex refresh assigns it.
        created = time.monotonic()
        kafka.create_topic(matching["c"], partitions=PARTITIONS["c"])
        producing.add(matching["c"])
        every = first | {(matching["c"], p) for p in range(PARTITIONS["c"])}
        wait_until(lambda: owned(lagless) | owned(java) == every, NEW_TOPIC_DEADLINE,
                   f"{matching['c']} to be assigned", details=lambda: describe(pair))
        picked_up = time.monotonic() - created
        wait_until(lambda: any(x["topic"] == matching["c"] for m in pair for x in m.records()), 30,
                   f"a record of {matching['c']} read", details=lambda: describe(pair))

        # One member leaves midway, while records keep coming; the other takes everything.
        left_at = time.monotonic()
        leaving.terminate()
        wait_until(lambda: owned(stayer) == every, 45, f"{stayer.name} to own every partition",
                   details=lambda: describe(pair))
        took_over = time.monotonic() - left_at
        rounds = producing.rounds  # two more rounds for the one member left
        wait_until(lambda: producing.rounds >= rounds + 2, 30, "two more producer rounds")
    finally:
        producing.stop()
    want = producing.of(set(matching.values()))

    def read_all() -> set:
        return {(x["topic"], x["partition"], x["offset"]) for m in pair for x in m.records()}

    wait_until(lambda: want <= read_all(), 60, "every produced record read",
               details=lambda: f"{len(want - read_all())} missing\n{describe(pair)}")
    stayer.terminate()
    assert [e for e in stayer.events() if e["event"] == "done"], describe(pair)
    assert [e for e in leaving.events() if e["event"] == "done"], describe(pair)
    elapsed = time.monotonic() - t0

    end_us = time.time_ns() // 1000
    ia, ib = ownership_intervals(lagless, end_us), ownership_intervals(java, end_us)
    both = [(tp, (min(e1, e2) - max(s1, s2)) / 1e6)
            for tp in set(ia) & set(ib) for s1, e1 in ia[tp] for s2, e2 in ib[tp]
            if min(e1, e2) > max(s1, s2)]
    moved = set(ia) & set(ib)  # partitions owned by each member at some time
    reads = Counter((x["topic"], x["partition"], x["offset"]) for m in pair for x in m.records())
    read = set(reads)
    duplicates = {r: n - 1 for r, n in reads.items() if n > 1}
    lagless_read = {(x["topic"], x["partition"], x["offset"]) for x in lagless.records()}
    java_read = {(x["topic"], x["partition"], x["offset"]) for x in java.records()}
    strays = {r for r in read if r[0] not in matching.values()}
    lost = [e for m in pair for e in m.events() if e["event"] == "lost"]
    produced_others = producing.of(set(others))
    print(f"regex interop ({leaver} leaves): shared after {shared_after:.1f} s as {split}; "
          f"{matching['c']} assigned {picked_up:.1f} s after its creation; {stayer.name} owned "
          f"everything {took_over:.1f} s after {leaving.name} was told to leave; produced "
          f"{len(want)} matching records in {producing.rounds} rounds (+{len(produced_others)} "
          f"to the non-matching topics); read {len(read)} distinct, lagless {len(lagless_read)}, "
          f"Java {len(java_read)}, {sum(duplicates.values())} duplicates "
          f"(partitions that moved: {len(moved)}); owned by both {len(both)} times; "
          f"{elapsed:.0f} s in all")
    assert producing.rounds >= 3 and produced_others, producing.rounds
    assert want and read >= want, f"{len(want - read)} produced records never read"
    assert read == want, f"read records nobody produced: {sorted(read - want)[:5]}"
    assert not strays, f"read from non-matching topics: {sorted(strays)[:5]}"
    assert {r[0] for r in lagless_read} and {r[0] for r in java_read}, describe(pair)
    assert any(r[0] == matching["c"] for r in read)
    assert not both, f"owned by both at once: {both}\n{describe(pair)}"
    assert all((t, p) in moved for t, p, _ in duplicates), \
        f"read twice on a partition that never moved: {duplicates}"
    assert not lost, describe(pair)

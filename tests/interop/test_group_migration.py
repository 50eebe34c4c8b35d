"""A rolling upgrade of a classic group to KIP-848's consumer protocol, with lagless and Java
members: Kafka 4.x converts the group when the first consumer-protocol member joins, so members
are restarted one by one with `group.protocol=consumer` while records flow.

A lagless and a Java member share the group under the classic protocol (cooperative-sticky, the
assignor the broker can take over); a Java member on the consumer protocol joins and the classic
Java member leaves; a lagless member on the consumer protocol joins and the classic lagless
member leaves. A batch of records is produced in each of the three phases. Every member commits
what it read after every batch and on revocation. Counted end to end: every offset read, none by
two members, no partition owned by two members at once (listener events stamped with the wall
clock), the group's committed offsets never moving backwards and ending at the log end.
"""

from __future__ import annotations

import itertools
import time
import uuid

from clients import wait_until
from test_rebalance_protocol import PARTITIONS, CommittedOffsets, describe, overlaps

RECORDS = 1200
CLASSIC = ["--strategy", "cooperative-sticky", "--session-timeout-ms", 6000]
CONSUMER = ["--config", "group.protocol=consumer"]


def owners(members) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in members:
        if m.alive():
            for p in m.assignment() or ():
                out[p] = out.get(p, 0) + 1
    return out


def shared_by(members) -> bool:
    """Every partition owned once, and by every one of `members`."""
    o = owners(members)
    return (set(o) == set(range(PARTITIONS)) and all(n == 1 for n in o.values())
            and all(m.assignment() for m in members))


def test_a_classic_group_of_lagless_and_java_members_upgrades_one_member_at_a_time(
        clients, make_topic, kafka):
    topic = make_topic(PARTITIONS)
    group = f"interop-migration-{uuid.uuid4().hex[:8]}"
    watcher = CommittedOffsets(kafka.bootstrap, group, topic)
    watcher.start()
    common = ["--group", group, "--commit", "--poll-delay-ms", 20, "--config", "max.poll.records=50"]
    everyone = []

    def start(client: str, protocol: list, name: str):
        m = clients.start(client, "consume", topic, *common, *protocol, name=name)
        everyone.append(m)
        return m

    def read_count() -> int:
        return len({(x["partition"], x["offset"]) for m in everyone for x in m.records()})

    def produce(batch: int) -> None:
        clients.run("lagless", "produce", topic, "--count", RECORDS, "--start", batch * RECORDS,
                    "--keyed", "--quiet")
        wait_until(lambda: read_count() >= (batch + 1) * RECORDS, 90, f"batch {batch + 1} read",
                   details=lambda: describe(everyone))

    lagless_classic = start("lagless", CLASSIC, "lagless-classic")
    java_classic = start("java", CLASSIC, "java-classic")
    wait_until(lambda: shared_by([lagless_classic, java_classic]), 90,
               "the classic members to share the partitions", details=lambda: describe(everyone))
    produce(0)

    t0 = time.monotonic()
    java_new = start("java", CONSUMER, "java-consumer-protocol")
    wait_until(lambda: java_new.assignment(), 90, "the Java consumer-protocol member to be assigned",
               details=lambda: describe(everyone))
    java_joined_s = time.monotonic() - t0
    java_classic.terminate()  # SIGTERM: revoke, commit, leave
    wait_until(lambda: shared_by([lagless_classic, java_new]), 90,
               "lagless (classic) and Java (consumer) to share the partitions",
               details=lambda: describe(everyone))
    produce(1)

    t0 = time.monotonic()
    lagless_new = start("lagless", CONSUMER, "lagless-consumer-protocol")
    wait_until(lambda: lagless_new.assignment(), 90,
               "the lagless consumer-protocol member to be assigned", details=lambda: describe(everyone))
    lagless_joined_s = time.monotonic() - t0
    lagless_classic.terminate()
    wait_until(lambda: shared_by([java_new, lagless_new]), 90,
               "the two consumer-protocol members to share the partitions",
               details=lambda: describe(everyone))
    produce(2)
    for m in (java_new, lagless_new):
        m.terminate()
    watcher.stop()

    end_us = time.time_ns() // 1000
    both = [(a.name, b.name, o) for a, b in itertools.combinations(everyone, 2)
            for o in overlaps(a, b, end_us)]
    reads = [{(x["partition"], x["offset"]) for x in m.records()} for m in everyone]
    read = set().union(*reads)
    twice = sum(len(a & b) for a, b in itertools.combinations(reads, 2))
    ends: dict[int, int] = {}
    for p, o in read:
        ends[p] = max(ends.get(p, 0), o + 1)
    missing = sum(ends.values()) - len(read)
    print(f"rolling upgrade: read {[len(r) for r in reads]} "
          f"({', '.join(m.name for m in everyone)}), {twice} by two members; Java (consumer) "
          f"assigned {java_joined_s:.1f} s after it started, lagless (consumer) {lagless_joined_s:.1f} s; "
          f"owned by two at once {len(both)} times; committed {watcher.latest()}")
    assert len(read) == 3 * RECORDS and missing == 0, describe(everyone)
    assert all(reads), f"every member read records: {[len(r) for r in reads]}"
    assert not both, f"owned by two at once: {both}\n{describe(everyone)}"
    assert twice == 0, describe(everyone)
    assert not watcher.backwards(), watcher.backwards()
    assert watcher.latest() == ends, f"committed {watcher.latest()}, log ends {ends}"

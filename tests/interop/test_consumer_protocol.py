"""KIP-848's consumer group protocol (`group.protocol=consumer`) with lagless and the Java client
in one group: the broker assigns, and neither member ever owns a partition the other has not given
up, every record is read once, and the group's committed offsets, read from outside while it runs,
never move backwards.

lagless starts alone, owns every partition and reads a first batch; a Java member joins (the broker
moves half of the partitions to it once lagless has revoked them) and the two read a second batch;
the Java member leaves (its partitions come back to lagless), and lagless reads a third. Both commit what they read
after every batch and on revocation, so a record read by both would mean a partition owned by
both. Each process stamps its listener events with the wall clock, so ownership intervals compare
across processes.
"""

from __future__ import annotations

import time
import uuid

from clients import wait_until
from test_rebalance_protocol import PARTITIONS, CommittedOffsets, describe, overlaps

RECORDS = 3000
CONSUMER_PROTOCOL = ["--config", "group.protocol=consumer"]


def owners(pair) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in pair:
        for p in m.assignment() or ():
            out[p] = out.get(p, 0) + 1
    return out


def test_lagless_and_java_share_a_consumer_protocol_group(clients, make_topic, kafka):
    topic = make_topic(PARTITIONS)
    clients.run("lagless", "produce", topic, "--count", RECORDS, "--keyed", "--quiet")
    group = f"interop-kip848-{uuid.uuid4().hex[:8]}"
    watcher = CommittedOffsets(kafka.bootstrap, group, topic)
    watcher.start()
    member_args = ["--group", group, "--commit", *CONSUMER_PROTOCOL, "--config", "max.poll.records=50"]
    lagless = clients.start("lagless", "consume", topic, *member_args, "--poll-delay-ms", 20,
                            name="lagless-kip848")
    wait_until(lambda: lagless.assignment() == set(range(PARTITIONS)) and watcher.latest(), 60,
               "lagless to own every partition and commit", details=lagless.stderr_tail)
    java = clients.start("java", "consume", topic, *member_args, name="java-kip848")
    pair = [lagless, java]
    wait_until(lambda: set(owners(pair)) == set(range(PARTITIONS))
               and all(n == 1 for n in owners(pair).values())
               and all(m.assignment() for m in pair), 90,
               "the two members to share the partitions", details=lambda: describe(pair))
    shared = {m.name: sorted(m.assignment()) for m in pair}

    def read_count() -> int:
        return len({(x["partition"], x["offset"]) for m in pair for x in m.records()})

    clients.run("lagless", "produce", topic, "--count", RECORDS, "--start", RECORDS, "--keyed",
                "--quiet")
    wait_until(lambda: read_count() >= 2 * RECORDS, 90, "the second batch read by the two",
               details=lambda: describe(pair))
    # SIGTERM: the client closes its consumer (revoke, commit, leave).
    java.terminate()
    wait_until(lambda: lagless.assignment() == set(range(PARTITIONS)), 60,
               "lagless to own every partition again", details=lambda: describe(pair))
    clients.run("lagless", "produce", topic, "--count", RECORDS, "--start", 2 * RECORDS,
                "--keyed", "--quiet")
    wait_until(lambda: read_count() >= 3 * RECORDS, 90, "every record read",
               details=lambda: describe(pair))
    lagless.terminate()
    assert [e for e in lagless.events() if e["event"] == "done"], describe(pair)
    watcher.stop()

    end_us = time.time_ns() // 1000
    both = overlaps(lagless, java, end_us)
    lagless_read = {(x["partition"], x["offset"]) for x in lagless.records()}
    java_read = {(x["partition"], x["offset"]) for x in java.records()}
    read = lagless_read | java_read
    committed = watcher.latest()
    ends: dict[int, int] = {}
    for p, o in read:
        ends[p] = max(ends.get(p, 0), o + 1)
    missing = sum(ends[p] for p in ends) - len(read)
    lost = [e for m in pair for e in m.events() if e["event"] == "lost"]
    print(f"consumer protocol: shared {shared}; lagless read {len(lagless_read)}, Java "
          f"{len(java_read)}, both {len(lagless_read & java_read)}; owned by both {len(both)} "
          f"times; committed {committed}")
    assert len(read) == 3 * RECORDS and missing == 0, describe(pair)
    assert java_read and lagless_read, describe(pair)
    assert not both, f"owned by both: {both}\n{describe(pair)}"
    assert not (lagless_read & java_read), describe(pair)
    assert not watcher.backwards(), watcher.backwards()
    assert not lost, describe(pair)
    assert committed == ends, f"committed {committed}, log ends {ends}"

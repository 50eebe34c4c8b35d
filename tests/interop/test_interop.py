"""lagless against the Java client and librdkafka on one real broker.

Every client runs as its own process (see clients.py) and prints JSON lines; the tests compare
what each one wrote and read.  Run with a broker:

    python3 tests/kafka_broker.py start --dir /tmp/io-broker      # prints bootstrap=...
    LAGLESS_BOOTSTRAP=... python3 -m pytest tests/interop -q
    python3 tests/kafka_broker.py stop --dir /tmp/io-broker
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest

from clients import ClientError, wait_until

N_BIG = 20_000
PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000


def binary_tail(i: int) -> bytes:
    """What the Java and librdkafka producers append with --binary."""
    return b"\x00\xff\xfe\x80" + struct.pack(">I", i & 0xFFFFFFFF)


def produced_placement(proc, count: int) -> dict[str, tuple[int, int]]:
    """{key: (partition, offset)} from a producer's per-record lines."""
    rows = proc.records()
    assert len(rows) == count, f"{proc.name} reported {len(rows)} of {count} records"
    placement = {r["key"]: (r["partition"], r["offset"]) for r in rows}
    assert len(placement) == count
    assert len(set(placement.values())) == count, "two records at the same offset"
    return placement


def check_text_records(reader, placement: dict[str, tuple[int, int]]) -> None:
    """`reader` read exactly the records `key-<i>`/`value-<i>`/h=<i> where the producer put them."""
    got = reader.records()
    assert len(got) == len(placement), f"{reader.name} read {len(got)} of {len(placement)} records"
    seen = set()
    for r in got:
        key = r["key"]
        assert key in placement, f"{reader.name}: unexpected record {r}"
        i = int(key.split("-", 1)[1])
        assert r["value"] == f"value-{i}", r
        assert r["headers"] == {"h": str(i)}, r
        assert (r["partition"], r["offset"]) == placement[key], (r, placement[key])
        seen.add(key)
    assert len(seen) == len(placement), f"{reader.name} read duplicates"


# ---------------------------------------------------------------------------------------------
# a. lagless writes, Java and librdkafka read
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression,count", [("none", N_BIG), ("gzip", 3000), ("snappy", 3000),
                                               ("lz4", 3000), ("zstd", 3000)])
def test_lagless_produce_java_and_librdkafka_consume(clients, make_topic, compression, count):
    topic = make_topic(PARTITIONS)
    prod = clients.run("lagless", "produce", topic, "--count", count, "--keyed",
                       "--compression", compression)
    placement = produced_placement(prod, count)
    assert {p for p, _ in placement.values()} == set(range(PARTITIONS))
    readers = [clients.start(kind, "consume", topic, "--count", count, "--timeout-ms", 30000)
               for kind in ("java", "rdkafka")]
    for r in readers:
        r.wait_ok(120)
        check_text_records(r, placement)


# ---------------------------------------------------------------------------------------------
# b. Java and librdkafka write, lagless reads, byte for byte
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_and_librdkafka_produce_lagless_consumes(clients, make_topic, compression):
    n = 2000
    topic = make_topic(PARTITIONS)
    producers = {prefix: clients.start(kind, "produce", topic, "--count", n, "--keyed", "--binary",
                                       "--key-prefix", prefix, "--compression", compression)
                 for kind, prefix in (("java", "java-"), ("rdkafka", "rdk-"))}
    placement: dict[str, tuple[int, int]] = {}
    for p in producers.values():
        p.wait_ok(120)
        placement.update(produced_placement(p, n))
    assert len(placement) == 2 * n

    reader = clients.run("lagless", "consume", topic, "--assign-all", "--hex", "--count", 2 * n,
                         "--timeout-ms", 30000)
    got = reader.records()
    assert len(got) == 2 * n, f"lagless read {len(got)} of {2 * n} records"
    seen = set()
    for r in got:
        key = bytes.fromhex(r["key"]).decode()
        i = int(key.rsplit("-", 1)[1])
        assert bytes.fromhex(r["value"]) == f"value-{i}".encode() + binary_tail(i), r
        assert r["headers"] == {"h": str(i).encode().hex(), "bin": binary_tail(i).hex()}, r
        assert (r["partition"], r["offset"]) == placement[key], (r, placement[key])
        seen.add(key)
    assert seen == set(placement)


# ---------------------------------------------------------------------------------------------
# c. Keyed records land where the Java client puts them
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("partitions", [6, 13])
def test_key_partitioning_matches_java(clients, make_topic, partitions):
    n = 1000
    topic = make_topic(partitions)
    procs = [clients.start(kind, "produce", topic, "--count", n, "--keyed")
             for kind in ("lagless", "java", "rdkafka")]
    lagless, java, rdkafka = (produced_placement(p.wait_ok(120), n) for p in procs)
    java_part = {k: p for k, (p, _) in java.items()}
    lagless_part = {k: p for k, (p, _) in lagless.items()}
    differ = {k: (lagless_part[k], java_part[k]) for k in java_part if lagless_part[k] != java_part[k]}
    assert not differ, f"{len(differ)} keys placed differently (lagless, java): {list(differ.items())[:10]}"
    assert len(set(java_part.values())) == partitions
    # librdkafka's murmur2_random partitioner is the Java one too: a check of the check.
    assert {k: p for k, (p, _) in rdkafka.items()} == java_part


# ---------------------------------------------------------------------------------------------
# d. One consumer group of lagless, Java and librdkafka members
# ---------------------------------------------------------------------------------------------

def ownership(members) -> dict[int, list[str]]:
    owners: dict[int, list[str]] = {}
    for m in members:
        for p in m.assignment() or ():
            owners.setdefault(p, []).append(m.name)
    return owners


def describe(members) -> str:
    lines = []
    for m in members:
        lines.append(f"{m.name}: alive={m.alive()} assignment={sorted(m.assignment() or [])} "
                     f"events={[(e['event'], e.get('partitions'), e.get('generation')) for e in m.events()][-6:]}")
        lines.append(m.stderr_tail(8))
    return "\n".join(lines)


def wait_stable(members, partitions: int, timeout: float = 90.0, quiet: float = 3.0) -> dict:
    """Waits until every partition has exactly one owner, every member owns at least one, and no
    member reported a change for `quiet` seconds."""
    def stable():
        for m in members:
            if not m.alive():
                raise ClientError(f"{m.name} exited early\n" + describe(members))
        owners = ownership(members)
        if set(owners) != set(range(partitions)) or any(len(o) != 1 for o in owners.values()):
            return None
        if any(not m.assignment() for m in members):
            return None
        if time.monotonic() - max(m.last_event_at for m in members) < quiet:
            return None
        return owners
    return wait_until(stable, timeout, "a stable group", details=lambda: describe(members))


def consumed_offsets(members) -> dict[int, set[int]]:
    got: dict[int, set[int]] = {}
    for m in members:
        for r in m.records():
            got.setdefault(r["partition"], set()).add(r["offset"])
    return got


def wait_consumed(members, expected: dict[int, int], timeout: float = 60.0) -> None:
    """Waits until the members together read offsets 0..expected[p]-1 of every partition."""
    def missing():
        got = consumed_offsets(members)
        return {p: n - len(got.get(p, set()) & set(range(n))) for p, n in expected.items()
                if not set(range(n)) <= got.get(p, set())}
    wait_until(lambda: not missing(), timeout, "every produced record to be consumed",
               details=lambda: f"missing per partition: {missing()}\n{describe(members)}")


def produce_more(clients, topic: str, count: int, start: int, totals: dict[int, int]) -> None:
    out = clients.run("lagless", "produce", topic, "--count", count, "--start", start, "--keyed",
                      "--quiet")
    summary = [e for e in out.events() if e["event"] == "produced"][-1]
    for p, n in summary["partitions"].items():
        totals[int(p)] = totals.get(int(p), 0) + n


def start_group(clients, topic: str, strategy: str, leader: str, lagless_strategy: str | None = None):
    """2 lagless, 1 Java and 1 librdkafka member of a new group; `leader` joins first (and so
    leads the group and computes its assignments). The lagless members offer `lagless_strategy`
    when given (a list, preferred first), else `strategy` as the others do. Returns the members,
    lagless-1 first."""
    group = f"interop-{strategy}-{uuid.uuid4().hex[:8]}"
    common = ["--group", group, "--session-timeout-ms", SESSION_TIMEOUT_MS,
              "--max-poll-interval-ms", 30000, "--commit"]
    kinds = {"lagless-1": "lagless", "java": "java", "rdkafka": "rdkafka", "lagless-2": "lagless"}

    def start(name: str):
        offer = lagless_strategy if kinds[name] == "lagless" and lagless_strategy else strategy
        return clients.start(kinds[name], "consume", topic, *common, "--strategy", offer, name=name)

    first = {"lagless": "lagless-1", "java": "java", "rdkafka": "rdkafka"}[leader]
    members = {first: start(first)}
    wait_until(lambda: members[first].assignment(), 60, f"{first} to own the partitions",
               details=lambda: describe(list(members.values())))
    for name in kinds:
        if name not in members:
            members[name] = start(name)
    return [members[n] for n in kinds]


def latest_protocol(member) -> str | None:
    """The assignor the group agreed on, as a lagless member's latest listener event says."""
    protocols = [e["protocol"] for e in member.events() if e.get("protocol")]
    return protocols[-1] if protocols else None


STRATEGIES = ["range", "cooperative-sticky"]


@pytest.mark.parametrize("leader", ["lagless", "java", "rdkafka"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_mixed_consumer_group(clients, make_topic, strategy, leader):
    topic = make_topic(PARTITIONS)
    totals: dict[int, int] = {}
    produce_more(clients, topic, 3000, 0, totals)
    members = start_group(clients, topic, strategy, leader)
    owners = wait_stable(members, PARTITIONS)
    assert sorted(len(ms) for ms in owners.values()) == [1] * PARTITIONS
    produce_more(clients, topic, 3000, 3000, totals)
    wait_consumed(members, totals)

    # A lagless member (the group's leader if it joined first) leaves cleanly: its partitions
    # move to the others and nothing is skipped.
    leaving = members.pop(0)
    rc = leaving.terminate()
    assert rc == 0, f"lagless member exited with {rc} on SIGTERM\n" + leaving.stderr_tail()
    done = [e for e in leaving.events() if e["event"] == "done"]
    assert done and done[-1]["reason"] == "signal", leaving.events()[-3:]
    assert leaving.assignment() == set(), leaving.events()[-3:]
    wait_stable(members, PARTITIONS)
    produce_more(clients, topic, 1200, 6000, totals)
    wait_consumed(members + [leaving], totals)
    assert sum(totals.values()) == 7200


@pytest.mark.parametrize("leader", ["lagless", "java"])
def test_mixed_group_offering_learner_sticky_agrees_on_cooperative_sticky(clients, make_topic, leader):
    """lagless members offer learner-sticky (lagless only) before cooperative-sticky; the Java
    and librdkafka members offer cooperative-sticky. The group agrees on cooperative-sticky
    (also when the lagless members were alone on learner-sticky first) and works: every
    partition has one owner once stable, and every record is read."""
    topic = make_topic(PARTITIONS)
    totals: dict[int, int] = {}
    produce_more(clients, topic, 3000, 0, totals)
    members = start_group(clients, topic, "cooperative-sticky", leader,
                          lagless_strategy="learner-sticky,cooperative-sticky")
    owners = wait_stable(members, PARTITIONS)
    assert sorted(len(ms) for ms in owners.values()) == [1] * PARTITIONS
    produce_more(clients, topic, 3000, 3000, totals)
    wait_consumed(members, totals)
    for m in members:
        if m.name.startswith("lagless"):
            assert latest_protocol(m) == "cooperative-sticky", describe(members)
    if leader == "lagless":
        # Alone, the lagless member had the group on learner-sticky; the others' joining moved it.
        first = next(e for e in members[0].events() if e.get("protocol"))
        assert first["protocol"] == "learner-sticky", members[0].events()[:3]
    lost = [e for m in members for e in m.events() if e["event"] == "lost"]
    assert not lost, f"a member lost its partitions: {lost}"


def test_lagless_group_on_learner_sticky(clients, make_topic):
    """Three lagless members on learner-sticky join one after another under production: each
    joiner first learns the partitions it then gets (their owner revokes them only in a later
    generation), the group ends balanced, and every record is read exactly once (members commit
    what they read, and in the revoked callback)."""
    topic = make_topic(PARTITIONS)
    group = f"interop-learners-{uuid.uuid4().hex[:8]}"
    totals: dict[int, int] = {}
    produce_more(clients, topic, 3000, 0, totals)
    members = []
    for i in range(3):
        members.append(clients.start("lagless", "consume", topic, "--group", group,
                                     "--strategy", "learner-sticky,cooperative-sticky",
                                     "--session-timeout-ms", SESSION_TIMEOUT_MS, "--commit",
                                     name=f"lagless-{i + 1}"))
        wait_stable(members, PARTITIONS)
        produce_more(clients, topic, 600, 3000 + 600 * i, totals)
    wait_consumed(members, totals)
    assert all(latest_protocol(m) == "learner-sticky" for m in members), describe(members)
    assert sorted(len(m.assignment()) for m in members) == [2, 2, 2], describe(members)
    for joiner in members[1:]:
        events = joiner.events()
        learning = [e for e in events if e["event"] == "learning"]
        assert learning, f"{joiner.name} learned nothing\n" + describe(members)
        learned = {p for e in learning for _t, p in e["partitions"]}
        learned_at = min(e["generation"] for e in learning)
        got = [e for e in events if e["event"] == "assigned" and e["partitions"]]
        # What it got, it had learned first; the owner gave it up after that, before it moved.
        assert got and {p for _t, p in got[0]["partitions"]} <= learned, events
        assert got[0]["generation"] > learned_at, events
        for _t, p in got[0]["partitions"]:
            revoked = [e["generation"] for m in members if m is not joiner for e in m.events()
                       if e["event"] == "revoked" and [topic, p] in e["partitions"]]
            assert any(learned_at < g < got[0]["generation"] for g in revoked), (p, revoked, events)
    read = [(r["partition"], r["offset"]) for m in members for r in m.records()]
    assert len(read) == len(set(read)) == sum(totals.values()), "every record read exactly once"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_mixed_consumer_group_member_crash(clients, make_topic, strategy):
    """A Java member dies without leaving (SIGKILL): after session.timeout.ms the group hands its
    partitions to the lagless and librdkafka members, which read on from the committed offsets."""
    topic = make_topic(PARTITIONS)
    totals: dict[int, int] = {}
    produce_more(clients, topic, 3000, 0, totals)
    members = start_group(clients, topic, strategy, "lagless")
    wait_stable(members, PARTITIONS)
    wait_consumed(members, totals)
    java = members.pop(1)
    assert java.name == "java"
    java.popen.kill()
    java.wait(30)
    produce_more(clients, topic, 1800, 3000, totals)
    t0 = time.monotonic()
    wait_stable(members, PARTITIONS, timeout=60)
    assert time.monotonic() - t0 < 45, "the group took too long to notice the dead member"
    wait_consumed(members + [java], totals)
    lost = [e for m in members for e in m.events() if e["event"] == "lost"]
    assert not lost, f"a live member lost its partitions: {lost}"


# ---------------------------------------------------------------------------------------------
# Transactions written by the Java client
# ---------------------------------------------------------------------------------------------

def test_lagless_reads_java_transactions(clients, make_topic):
    """Java writes committed and aborted transactions. lagless at read_uncommitted (the default;
    read_committed is covered by core/tests/read_committed.rs) returns every data record, committed or aborted, exactly as the
    Java consumer does, never a transaction marker, and its positions end past the final markers,
    at the partitions' end offsets, as the Java consumer's do."""
    n = 3000
    topic = make_topic(PARTITIONS)
    prod = clients.run("java", "produce", topic, "--count", n, "--keyed", "--transaction-size", 200,
                       "--abort-every", 3)
    placement = produced_placement(prod, n)
    aborted = {r["key"] for r in prod.records() if r["aborted"]}
    assert 0 < len(aborted) < n
    # Read until idle (not up to a count) so that the fetches past the last markers happen.
    readers = {kind: clients.start(kind, "consume", topic, "--timeout-ms", 4000)
               for kind in ("lagless", "java")}
    for r in readers.values():
        r.wait_ok(120)
        check_text_records(r, placement)
    ends = {kind: [e for e in r.events() if e["event"] == "done"][-1]["positions"]
            for kind, r in readers.items()}
    # Each partition's log ends with a transaction marker, one offset past its last record.
    last = {}
    for p, o in placement.values():
        last[p] = max(last.get(p, -1), o)
    assert ends["java"] == {str(p): o + 2 for p, o in last.items()}, ends["java"]
    assert ends["lagless"] == ends["java"]


def test_lagless_reads_java_transactions_read_committed(clients, make_topic):
    """As above, with compressed transactions spanning the partitions: at
    isolation.level=read_committed lagless returns exactly the committed records, as the Java
    consumer at read_committed does, and both end at the same positions past the last markers."""
    n = 3000
    topic = make_topic(PARTITIONS)
    prod = clients.run("java", "produce", topic, "--count", n, "--keyed", "--transaction-size", 120,
                       "--abort-every", 3, "--compression", "gzip", "--partitions", PARTITIONS)
    placement = produced_placement(prod, n)
    aborted = {r["key"] for r in prod.records() if r["aborted"]}
    assert len(aborted) == 960, len(aborted)  # transactions 2, 5, ..., 23 of 25, 120 records each
    committed = {k: v for k, v in placement.items() if k not in aborted}
    readers = {kind: clients.start(kind, "consume", topic, "--timeout-ms", 4000,
                                   "--config", "isolation.level=read_committed")
               for kind in ("lagless", "java")}
    for r in readers.values():
        r.wait_ok(120)
        check_text_records(r, committed)
    ends = {kind: [e for e in r.events() if e["event"] == "done"][-1]["positions"]
            for kind, r in readers.items()}
    last = {}
    for p, o in placement.values():
        last[p] = max(last.get(p, -1), o)
    assert ends["java"] == {str(p): o + 2 for p, o in last.items()}, ends["java"]
    assert ends["lagless"] == ends["java"]


def test_java_reads_lagless_transactions_read_committed(clients, make_topic):
    """lagless' transactional producer writes committed and aborted transactions (aborted ones
    after their records were written): the Java consumer at read_committed reads exactly the
    committed records, at read_uncommitted every record, and lagless at read_committed the same
    as Java."""
    n = 3000
    topic = make_topic(PARTITIONS)
    prod = clients.run("lagless", "produce", topic, "--count", n, "--keyed",
                       "--transaction-size", 120, "--abort-every", 3)
    placement = produced_placement(prod, n)
    aborted = {r["key"] for r in prod.records() if r["aborted"]}
    assert len(aborted) == 960, len(aborted)  # transactions 3, 6, ..., 24 of 25, 120 records each
    committed = {k: v for k, v in placement.items() if k not in aborted}
    readers = {(kind, iso): clients.start(kind, "consume", topic, "--timeout-ms", 4000,
                                          "--config", f"isolation.level={iso}")
               for kind, iso in (("java", "read_committed"), ("java", "read_uncommitted"),
                                 ("lagless", "read_committed"))}
    for (kind, iso), r in readers.items():
        r.wait_ok(120)
        check_text_records(r, committed if iso == "read_committed" else placement)


# ---------------------------------------------------------------------------------------------
# Committed offsets carry over between clients
# ---------------------------------------------------------------------------------------------

def test_group_offsets_carry_over_between_clients(clients, make_topic):
    """Consumers of different clients take turns in one group, each reading 1000 records and
    committing exactly what it read: each resumes where the previous one committed, so together
    they read every record exactly once."""
    n, turn = 6000, 1000
    topic = make_topic(PARTITIONS)
    placement = produced_placement(clients.run("lagless", "produce", topic, "--count", n, "--keyed"), n)
    group = f"interop-handover-{uuid.uuid4().hex[:8]}"
    read_by: dict[str, str] = {}
    for kind in ["lagless", "java", "lagless", "rdkafka", "lagless", "java"]:
        r = clients.run(kind, "consume", topic, "--group", group, "--count", turn, "--commit",
                        "--timeout-ms", 30000, "--session-timeout-ms", SESSION_TIMEOUT_MS)
        got = r.records()
        assert len(got) == turn, f"{r.name} read {len(got)} records"
        for rec in got:
            key = rec["key"]
            assert (rec["partition"], rec["offset"]) == placement[key], rec
            assert key not in read_by, f"{r.name} read {rec} again (first read by {read_by[key]})"
            read_by[key] = r.name
    assert set(read_by) == set(placement)


# ---------------------------------------------------------------------------------------------
# KIP-333: a Java consumer takes over a partition in mid-recovery
# ---------------------------------------------------------------------------------------------

def test_java_takes_over_a_partition_in_mid_recovery(clients, make_topic):
    """A lagless member with enable.parallel.rebalance takes over a partition with a backlog,
    reads fresh records and part of the backlog, and leaves (committing on revocation). The
    group's committed offset is its low-water mark, not its main-stream position: the Java
    consumer that takes over next starts at the first offset lagless did not deliver and reads
    every record from there, so nothing is lost."""
    topic = make_topic(1)
    group = f"interop-recovery-{uuid.uuid4().hex[:8]}"
    clients.run("lagless", "produce", topic, "--count", 70, "--quiet")
    first = clients.run("lagless", "consume", topic, "--group", group, "--count", 70, "--commit",
                        "--timeout-ms", 30000, "--session-timeout-ms", SESSION_TIMEOUT_MS)
    assert [r["offset"] for r in first.records()] == list(range(70))
    backlog = 300_000
    clients.run("lagless", "produce", topic, "--count", backlog, "--quiet", timeout=300)
    end = 70 + backlog
    member = clients.start("lagless", "consume", topic, "--group", group, "--commit",
                           "--session-timeout-ms", SESSION_TIMEOUT_MS,
                           "--config", "enable.parallel.rebalance=true",
                           "--config", "parallel.rebalance.min.lag=10",
                           "--config", "max.poll.records=50")
    wait_until(lambda: member.assignment() == {0}, 60, "the lagless member got the partition",
               details=member.stderr_tail)
    clients.run("lagless", "produce", topic, "--count", 100, "--quiet")
    total = end + 100
    wait_until(lambda: any(r["offset"] >= end for r in member.records()), 60,
               "fresh records reached the lagless member", details=member.stderr_tail)
    assert member.terminate() == 0, member.stderr_tail()
    got = member.records()
    printed = {r["offset"] for r in got}
    assert min(printed) >= 70
    assert all(r.get("recovery", False) == (r["offset"] < end) for r in got), \
        "the recovery flag marks exactly the backlog's records"
    assert any(r.get("recovery") for r in got), "no record came from the recovery stream"
    low = next(o for o in range(70, total) if o not in printed)
    assert low < end, "the lagless member drained the whole backlog; the test needs it unfinished"
    java = clients.run("java", "consume", topic, "--group", group, "--count", total - low,
                       "--commit", "--timeout-ms", 60000, "--session-timeout-ms", SESSION_TIMEOUT_MS,
                       timeout=300)
    offsets = [r["offset"] for r in java.records()]
    assert offsets[:1] == [low], f"Java started at {offsets[:1]}, the low-water mark is {low}"
    assert offsets == list(range(low, total)), "Java read every record from the low-water mark on"
    assert printed | set(offsets) == set(range(70, total)), "nothing lost"


# ---------------------------------------------------------------------------------------------
# A subscribed topic grows: lagless follows it as librdkafka does
# ---------------------------------------------------------------------------------------------

def test_lagless_and_librdkafka_read_the_partitions_added_to_a_subscribed_topic(clients, make_topic):
    """A topic grows from 2 to 4 partitions under a lagless and a librdkafka consumer (each in
    its own group, refreshing metadata every 2 s): both rebalance onto all 4 partitions and
    read every record of each."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    from kafka_broker import wait_for_topic

    topic = make_topic(2)
    n = 300
    readers = {
        "lagless": clients.start("lagless", "consume", topic, "--group", f"grow-{uuid.uuid4()}",
                                 "--session-timeout-ms", SESSION_TIMEOUT_MS,
                                 "--config", "metadata.max.age.ms=2000"),
        "rdkafka": clients.start("rdkafka", "consume", topic, "--group", f"grow-{uuid.uuid4()}",
                                 "--session-timeout-ms", SESSION_TIMEOUT_MS,
                                 "--config", "topic.metadata.refresh.interval.ms=2000"),
    }
    for kind, r in readers.items():
        wait_until(lambda r=r: r.assignment() == {0, 1}, 60, f"{kind} to own partitions 0 and 1",
                   details=r.stderr_tail)
    admin = AdminClient({"bootstrap.servers": clients.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=30)
    wait_for_topic(clients.bootstrap, topic, partitions=4)
    placement = produced_placement(clients.run("rdkafka", "produce", topic, "--count", n, "--keyed"), n)
    written = set(placement.values())
    assert {p for p, _ in written} == {0, 1, 2, 3}, "the keys did not reach every partition"
    for kind, r in readers.items():
        wait_until(lambda r=r: written <= {(x["partition"], x["offset"]) for x in r.records()}, 60,
                   f"{kind} to read all {n} records",
                   details=lambda r=r: f"read {len({(x['partition'], x['offset']) for x in r.records()} & written)} "
                                       f"of {n}, assignment {r.assignment()}\n{r.stderr_tail()}")
        assert r.assignment() == {0, 1, 2, 3}, r.events()[-3:]

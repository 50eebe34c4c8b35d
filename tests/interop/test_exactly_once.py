"""Exactly-once across clients: lagless and Java consume-transform-produce instances share one
consumer group and one output topic, once under the classic protocol (each client's default
assignors, eager) and once under the consumer protocol (KIP-848: the broker assigns, and the
offsets of a transaction go with the member's epoch).
Each reads the input at read_committed and writes every record it polls, keyed
"<partition>-<offset>", in a transaction that also carries the polled offsets
(`send_offsets_to_transaction` / `sendOffsetsToTransaction` with the member's group metadata),
one transaction per poll (lagless_tool transform, InteropClient transform). Input comes in
batches of keyed records (every partition gets some); once every instance has committed a
transaction, a lagless and then a Java instance are SIGKILLed inside an open transaction (its records
flushed into the log) and restarted with the same transactional.id, whose initialization aborts
what the killed one left open. The output read committed by the Java consumer then holds each
input record exactly once: the offsets one client committed in its transactions are where the
other client's members start, and neither client's aborted records are read."""

import time
from collections import Counter

import pytest

from clients import wait_until

ROUNDS, PER_ROUND = 12, 150
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 6, 3


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_lagless_and_java_transform_exactly_once_in_one_group(clients, make_topic, group_protocol):
    inp, out = make_topic(INPUT_PARTITIONS), make_topic(OUTPUT_PARTITIONS)
    # The consumer protocol takes its session timeout from the broker (6 s in the harness).
    liveness = (["--session-timeout-ms", 6000] if group_protocol == "classic"
                else ["--config", "group.protocol=consumer"])
    group = f"eos-{inp}"
    kinds = {0: "lagless", 1: "java", 2: "lagless", 3: "java"}
    started = Counter()

    def start(slot: int):
        started[slot] += 1
        return clients.start(kinds[slot], "transform", inp, "--output", out, "--group", group,
                             "--transactional-id", f"{group}-{slot}", "--poll-delay-ms", 200,
                             *liveness, name=f"{kinds[slot]}-transform-{slot}-{started[slot]}")

    procs = {slot: start(slot) for slot in kinds}
    expected: set[str] = set()

    fed = 0

    def feed() -> None:
        nonlocal fed
        # Keyed: spread over every partition, so each member gets records from each batch.
        prod = clients.run("lagless", "produce", inp, "--count", PER_ROUND, "--keyed",
                           "--start", fed * PER_ROUND)
        fed += 1
        for r in prod.records():
            expected.add(f"{r['partition']}-{r['offset']}")

    def open_transaction(p) -> bool:
        events = [e["event"] for e in p.events() if e["event"] in ("open", "committed", "aborted")]
        return bool(events) and events[-1] == "open"

    def feed_until(cond, what: str, details=lambda: "") -> None:
        """Feeds batches until `cond` holds, waiting up to 10 s after each. One batch may not be
        enough: it can be committed before the producer process returns, leaving nothing to
        open a transaction with, or arrive while the group still forms."""
        for _ in range(8):
            feed()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if cond():
                    return
                time.sleep(0.01)
        raise AssertionError(f"not after 8 batches: {what}\n{details()}")

    def committed_once(p) -> bool:
        return any(e["event"] == "committed" for e in p.events())

    # Every instance has committed a transaction before the first kill, so each victim dies in
    # the middle of its work, not in its first transaction while the group still forms.
    feed_until(lambda: all(committed_once(p) for p in procs.values()),
               "every instance committed a transaction",
               lambda: "\n".join(p.stderr_tail() for p in procs.values()))

    kills = []
    for round_ in range(ROUNDS):
        if round_ in (3, 7):
            slot = 0 if round_ == 3 else 1
            victim = procs[slot]
            feed_until(lambda: open_transaction(victim), f"{victim.name} holds a transaction open",
                       victim.stderr_tail)
            victim.popen.kill()
            victim.wait(10)
            kills.append(victim.name)
            procs[slot] = start(slot)
        else:
            feed()
    assert len(expected) == fed * PER_ROUND, (len(expected), fed)

    def read(isolation: str) -> list[str]:
        r = clients.run("java", "consume", out, "--timeout-ms", 4000,
                        "--config", f"isolation.level={isolation}")
        return [x["key"] for x in r.records()]

    def all_read() -> bool:
        return set(read("read_committed")) >= expected

    wait_until(all_read, 180, "every input record in the committed output", interval=1,
               details=lambda: "\n".join(p.stderr_tail() for p in procs.values()))
    for p in procs.values():
        assert p.alive(), f"{p.name} ended by itself\n{p.stderr_tail()}"
        p.terminate()
    committed = Counter(read("read_committed"))
    uncommitted = len(read("read_uncommitted"))
    twice = sorted(k for k, n in committed.items() if n > 1)
    missing = sorted(expected - set(committed))
    extra = sorted(set(committed) - expected)
    per_client, per_instance = Counter(), Counter()
    for p in clients.procs:
        if "transform" in p.name:
            n = sum(e.get("records", 0) for e in p.events() if e["event"] == "committed")
            per_client[p.name.split("-")[0]] += n
            per_instance[p.name] += n
    print(f"kills {kills}; input {len(expected)}; output read_committed {sum(committed.values())} "
          f"({len(committed)} distinct, {len(twice)} twice, {len(missing)} missing); "
          f"read_uncommitted {uncommitted}; committed by lagless {per_client['lagless']}, "
          f"by Java {per_client['java']} ({dict(per_instance)}); batches fed {fed}")
    assert not twice, f"read twice: {twice[:20]}"
    assert not missing, f"missing: {missing[:20]}"
    assert not extra, f"not from the input: {extra[:20]}"
    assert per_client["lagless"] > 0 and per_client["java"] > 0, per_client
    # The killed instances' open transactions wrote records, which read_committed left out.
    assert uncommitted > len(expected), uncommitted

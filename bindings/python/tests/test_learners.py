"""Learner assignments (``partition.assignment.strategy=learner-sticky,cooperative-sticky``)
through the Python package: a joining member learns the partitions it will own, while their
owner keeps consuming them, before they are assigned to it. Both members run on the test's thread,
polled in turn."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Dict, List, Optional, Set

import pytest

import lagless

PARTITIONS = 4


def member(bootstrap: str, group: str) -> lagless.Consumer:
    return lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "learner-sticky,cooperative-sticky",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )


class NotReady(Exception):
    pass


class Learner(lagless.RebalanceListener):
    """Records every call with a step number; commits in on_partitions_revoked."""

    def __init__(self, log: List[tuple], name: str) -> None:
        self.log = log
        self.name = name
        self.owned: Set[int] = set()
        self.not_ready_left = 0
        self.warm_up: Optional[Callable[[List[int]], None]] = None

    def event(self, what: str, partitions) -> List[int]:
        ps = sorted(tp.partition for tp in partitions)
        self.log.append((len(self.log), self.name, what, ps))
        return ps

    def on_partitions_assigned(self, consumer, partitions):
        self.owned |= set(self.event("assigned", partitions))

    def on_partitions_revoked(self, consumer, partitions):
        consumer.commit()
        self.owned -= set(self.event("revoked", partitions))

    def on_partitions_learning(self, consumer, partitions):
        assert isinstance(consumer, lagless.Consumer)
        ps = self.event("learning", partitions)
        # Learned, not owned yet.
        assert not set(ps) & {tp.partition for tp in consumer.assignment()}
        if self.not_ready_left > 0:
            self.not_ready_left -= 1
            raise NotReady(f"not ready for {ps}")
        if self.warm_up is not None:
            self.warm_up(ps)
        self.event("ready", partitions)


class Group:
    """Members polled in turn on this thread, and every record they return."""

    def __init__(self) -> None:
        self.members: Dict[str, lagless.Consumer] = {}
        self.records: Dict[str, List[tuple]] = {}
        self.errors: List[Exception] = []

    def add(self, name: str, c: lagless.Consumer) -> None:
        self.members[name] = c
        self.records[name] = []

    def poll(self, name: str, timeout: float = 0.02) -> None:
        for m in self.members[name].consume(100, timeout=timeout):
            self.records[name].append((m.partition, m.offset))

    def run(self, cond: Callable[[], bool], seconds: float, what: str, produce=None) -> None:
        deadline = time.monotonic() + seconds
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting until {what}"
            if produce is not None:
                produce()
            for name in list(self.members):
                try:
                    self.poll(name)
                except NotReady as e:
                    self.errors.append(e)


def test_joining_member_learns_its_partitions_before_they_are_assigned(bootstrap, make_topic, group, consumers):
    topic = make_topic(PARTITIONS, prefix="py-learners")
    producer = lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced = [0]
    last = [0.0]

    def produce() -> None:
        # Steady production: a record on every partition every 10 ms.
        if time.monotonic() - last[0] < 0.01:
            return
        last[0] = time.monotonic()
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"x", partition=p)
        produced[0] += 1

    log: List[tuple] = []
    g = Group()
    la, lb = Learner(log, "a"), Learner(log, "b")
    lb.not_ready_left = 1
    a, b = member(bootstrap, group), member(bootstrap, group)
    consumers.extend([a, b])
    g.add("a", a)
    a.subscribe([topic], la)
    g.run(lambda: la.owned == set(range(PARTITIONS)), 60, "a owns every partition", produce)

    owner_during_warm_up: List[int] = []

    def warm_up(ps: List[int]) -> None:
        # The owner keeps consuming the learned partitions while b warms up.
        assert set(ps) <= la.owned and set(ps) <= {tp.partition for tp in a.assignment()}
        before = len([r for r in g.records["a"] if r[0] in ps])
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            produce()
            g.poll("a")
        owner_during_warm_up.append(len([r for r in g.records["a"] if r[0] in ps]) - before)

    lb.warm_up = warm_up
    g.add("b", b)
    b.subscribe([topic], lb)
    # The exception from on_partitions_learning comes out of b's poll; nothing moves.
    g.run(lambda: bool(g.errors), 60, "b's learning callback raises from poll", produce)
    [err] = g.errors
    assert "not ready for" in str(err)
    learned = [e[3] for e in log if e[1] == "b" and e[2] == "learning"]
    assert len(learned) == 1 and len(learned[0]) == PARTITIONS // 2, log
    assert la.owned == set(range(PARTITIONS)) and lb.owned == set(), log

    # A later poll calls the callback again after a backoff: b learns the same partitions again
    # (still a's: on_partitions_learning checks it) and is ready after its warm-up.
    g.run(lambda: bool(lb.owned), 60, "b owns partitions", produce)
    settle = time.monotonic() + 2
    g.run(lambda: time.monotonic() > settle, 10, "2 s passed", produce)
    producer.flush(30)
    total = produced[0] * PARTITIONS
    g.run(lambda: len(g.records["a"]) + len(g.records["b"]) >= total, 60, "every record is read")

    assert len(g.errors) == 1
    assert not any(e[1] == "a" and e[2] == "learning" for e in log), log
    b_learning = [e for e in log if e[1] == "b" and e[2] == "learning"]
    assert [e[3] for e in b_learning] == [learned[0], learned[0]], log
    ready = next(e[0] for e in log if e[1] == "b" and e[2] == "ready")
    b_assigned = next(e for e in log if e[1] == "b" and e[2] == "assigned" and e[3])
    a_revoked = next(e for e in log if e[1] == "a" and e[2] == "revoked" and e[3])
    # b gets exactly what it learned, after a gave it up, after b was ready.
    assert b_assigned[3] == learned[0] and a_revoked[3] == learned[0], log
    assert ready < a_revoked[0] < b_assigned[0], log
    assert lb.owned == set(learned[0]) and la.owned == set(range(PARTITIONS)) - set(learned[0])
    assert owner_during_warm_up and owner_during_warm_up[0] > 0
    # Every record once, in order per member and partition.
    everything = g.records["a"] + g.records["b"]
    assert sorted(everything) == [(p, o) for p in range(PARTITIONS) for o in range(produced[0])]
    for recs in g.records.values():
        for p in range(PARTITIONS):
            offsets = [o for q, o in recs if q == p]
            assert offsets == sorted(offsets)
    producer.close()


def test_a_listener_without_on_partitions_learning_is_ready_at_once(bootstrap, make_topic, group, consumers):
    topic = make_topic(2, prefix="py-learners")

    class Plain:
        """Not a RebalanceListener subclass, and no on_partitions_learning."""

        def __init__(self) -> None:
            self.owned: Set[int] = set()

        def on_partitions_assigned(self, consumer, partitions):
            self.owned |= {tp.partition for tp in partitions}

        def on_partitions_revoked(self, consumer, partitions):
            self.owned -= {tp.partition for tp in partitions}

        def on_partitions_lost(self, consumer, partitions):
            self.on_partitions_revoked(consumer, partitions)

    g = Group()
    pa, pb = Plain(), Plain()
    a, b = member(bootstrap, group), member(bootstrap, group)
    consumers.extend([a, b])
    g.add("a", a)
    a.subscribe([topic], pa)  # type: ignore[arg-type]
    g.run(lambda: pa.owned == {0, 1}, 60, "a owns both partitions")
    g.add("b", b)
    b.subscribe([topic], pb)  # type: ignore[arg-type]
    g.run(lambda: len(pa.owned) == 1 and len(pb.owned) == 1, 60, "a and b own one partition each")
    assert not g.errors


@pytest.mark.parametrize("reporter", ["thread", "asyncio task"])
def test_readiness_reported_later_moves_the_partitions_then(bootstrap, make_topic, group, consumers, reporter):
    """``learner.readiness=explicit``: ``on_partitions_learning`` only starts a warm-up (on a
    thread of its own, or as an asyncio task) and returns; the learner's ``consume()`` goes on
    without errors, the owner keeps the partitions, and they move once ``learner_ready()`` is
    called. Every record is read once."""
    topic = make_topic(PARTITIONS, prefix="py-learners-later")
    producer = lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced = [0]
    producing = [True]
    last = [0.0]

    def produce() -> None:
        if not producing[0] or time.monotonic() - last[0] < 0.01:
            return
        last[0] = time.monotonic()
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"x", partition=p)
        produced[0] += 1

    log: List[tuple] = []
    la, lb = Learner(log, "a"), Learner(log, "b")
    a = member(bootstrap, group)
    b = lagless.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": "learner-sticky,cooperative-sticky",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "learner.readiness": "explicit",
        }
    )
    consumers.extend([a, b])
    taken: List[int] = []
    b_polls: List[float] = []
    times: Dict[str, float] = {}

    def ready(partitions) -> None:
        times["ready"] = time.monotonic()
        lb.event("ready", partitions)
        taken.append(b.learner_ready(partitions))

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def warm_up_elsewhere(consumer, partitions):
            times.setdefault("learning", time.monotonic())
            lb.event("learning", partitions)
            if reporter == "thread":
                threading.Timer(1.5, ready, args=(list(partitions),)).start()
            else:

                async def warm_up() -> None:
                    await asyncio.sleep(1.5)
                    ready(partitions)

                loop.create_task(warm_up())

        lb.on_partitions_learning = warm_up_elsewhere  # type: ignore[method-assign]

        async def run(cond: Callable[[], bool], seconds: float, what: str) -> None:
            deadline = time.monotonic() + seconds
            while not cond():
                assert time.monotonic() < deadline, f"timed out waiting until {what}: {log}"
                produce()
                for name, c in (("a", a), ("b", b)):
                    for m in c.consume(100, timeout=0):
                        records[name].append((m.partition, m.offset))
                    if name == "b":
                        b_polls.append(time.monotonic())
                await asyncio.sleep(0.005)  # the warm-up task runs in between

        records: Dict[str, List[tuple]] = {"a": [], "b": []}
        a.subscribe([topic], la)
        await run(lambda: la.owned == set(range(PARTITIONS)), 60, "a owns every partition")
        b.subscribe([topic], lb)
        await run(lambda: bool(lb.owned), 60, "b owns partitions")
        producing[0] = False
        producer.flush(30)
        want = {(p, o) for p in range(PARTITIONS) for o in range(produced[0])}
        await run(lambda: want <= set(records["a"] + records["b"]), 60, "every record is read")
        # Read once: a commits what it read in on_partitions_revoked, so b resumes right there.
        everything = records["a"] + records["b"]
        twice = sorted(r for r in set(everything) if everything.count(r) > 1)
        assert not twice, f"read twice: {twice[:10]} ({len(twice)})"

    asyncio.run(scenario())

    learning = next(e for e in log if e[1] == "b" and e[2] == "learning")
    ready_at = next(e for e in log if e[1] == "b" and e[2] == "ready")
    b_assigned = next(e for e in log if e[1] == "b" and e[2] == "assigned" and e[3])
    a_revoked = next(e for e in log if e[1] == "a" and e[2] == "revoked" and e[3])
    assert len(learning[3]) == PARTITIONS // 2, log
    assert taken == [PARTITIONS // 2]
    # The callback returned at once: b's consume() went on returning through the 1.5 s warm-up.
    polls_while_warming = sum(1 for t in b_polls if times["learning"] < t < times["ready"])
    assert polls_while_warming >= 10, polls_while_warming
    # Nothing moved before learner_ready(): b got what it learned after a gave it up, after ready.
    assert learning[0] < ready_at[0] < a_revoked[0] < b_assigned[0], log
    assert b_assigned[3] == learning[3] and a_revoked[3] == learning[3], log
    producer.close()


def test_a_member_that_prepares_to_leave_hands_over_to_a_warmed_up_learner(bootstrap, make_topic, group, consumers):
    """Scale-down: ``prepare_to_leave()`` keeps the member consuming while the member that stays
    learns its partitions; they move once it is ready, and the leaving member, owning nothing,
    closes. Every record is read once."""
    topic = make_topic(PARTITIONS, prefix="py-learners-leave")
    producer = lagless.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produced = [0]
    producing = [True]
    last = [0.0]

    def produce() -> None:
        if not producing[0] or time.monotonic() - last[0] < 0.01:
            return
        last[0] = time.monotonic()
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"x", partition=p)
        produced[0] += 1

    log: List[tuple] = []
    g = Group()
    la, lb = Learner(log, "a"), Learner(log, "b")
    a, b = member(bootstrap, group), member(bootstrap, group)
    consumers.extend([a, b])
    g.add("a", a)
    g.add("b", b)
    a.subscribe([topic], la)
    b.subscribe([topic], lb)
    g.run(lambda: len(la.owned) == len(lb.owned) == PARTITIONS // 2, 60, "a and b share the partitions", produce)
    leaving = set(la.owned)
    warmed: List[float] = []

    def warm_up(ps: List[int]) -> None:
        # a keeps consuming what b learns while b warms up.
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            produce()
            g.poll("a")
        warmed.append(time.monotonic())

    lb.warm_up = warm_up
    mark = len(log)
    assert a.prepare_to_leave() is True
    g.run(lambda: not a.assignment(), 60, "a hands everything over", produce)
    # a closes on a thread of its own while b goes on polling, as members of a real group run:
    # a's last join completes only once b has joined too.
    del g.members["a"]
    closing = threading.Thread(target=a.close)
    closing.start()
    g.run(lambda: not closing.is_alive(), 60, "a closed", produce)
    closing.join()
    producing[0] = False
    producer.flush(30)
    want = {(p, o) for p in range(PARTITIONS) for o in range(produced[0])}
    g.run(lambda: want <= set(g.records["a"] + g.records["b"]), 60, "every record is read")

    everything = g.records["a"] + g.records["b"]
    twice = sorted(r for r in set(everything) if everything.count(r) > 1)
    assert not twice, f"read twice: {twice[:10]}"
    after = log[mark:]
    learned = [e for e in after if e[1] == "b" and e[2] == "learning"]
    ready = [e for e in after if e[1] == "b" and e[2] == "ready"]
    revoked = [e for e in after if e[1] == "a" and e[2] == "revoked" and e[3]]
    assert learned and set(learned[0][3]) == leaving, log
    assert ready and revoked and ready[0][0] < revoked[0][0], log
    assert lb.owned == set(range(PARTITIONS)) and warmed, log
    producer.close()

"""The rebalance listener base class."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

if TYPE_CHECKING:
    from ._lagless import Consumer, TopicPartition

__all__ = ["RebalanceListener"]


class RebalanceListener:
    """Told when the consumer's assignment changes; subclass it and override what you need.

    Every method runs on the thread that called ``poll()``, ``consume()``, ``close()`` or
    ``unsubscribe()``, never on a library thread, and may call back into the consumer
    (``commit()`` inside ``on_partitions_revoked``). An exception raised here does not stop the
    assignment change; it is raised from that ``poll()`` once the change is complete.
    """

    def on_partitions_assigned(
        self, consumer: "Consumer", partitions: List["TopicPartition"]
    ) -> None:
        """Partitions newly given to this member (called once per rebalance, possibly empty)."""

    def on_partitions_revoked(
        self, consumer: "Consumer", partitions: List["TopicPartition"]
    ) -> None:
        """Partitions this member gives up; commit their offsets here if you commit by hand."""

    def on_partitions_learning(
        self, consumer: "Consumer", partitions: List["TopicPartition"]
    ) -> None:
        """Learner assignments (``"partition.assignment.strategy":
        "learner-sticky,cooperative-sticky"``): partitions this member will own once it is ready,
        while their current owners keep consuming them. Warm up here (load state, fill caches);
        returning says this member is ready, and the partitions then move to it
        (``on_partitions_assigned`` follows in a later rebalance). An exception leaves it not
        ready (the owners keep them) and is raised from that ``poll()``; a later ``poll()`` calls
        the method again for them after a backoff. With ``"learner.readiness": "explicit"``
        returning only says the warm-up started: the partitions move once
        ``consumer.learner_ready(partitions)`` is called, from any thread or asyncio task, so a
        warm-up need not hold up ``poll()``. Optional on a listener that does not subclass this
        class; without learner-sticky it is never called."""

    def on_partitions_lost(self, consumer: "Consumer", partitions: List["TopicPartition"]) -> None:
        """Partitions that may already belong to another member; committing them is no longer
        possible. Calls ``on_partitions_revoked`` unless overridden, as the Java client does."""
        self.on_partitions_revoked(consumer, partitions)

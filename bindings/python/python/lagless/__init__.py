"""lagless: a Kafka consumer client with a Rust core.

>>> import lagless
>>> with lagless.Consumer({"bootstrap.servers": "localhost:9092", "group.id": "g"}) as c:
...     c.subscribe(["orders"])
...     for msg in c.consume(500, timeout=1.0):
...         print(msg.offset, msg.value)

Logs of the core go to the ``logging`` logger ``lagless``. Which levels the core forwards
follows that logger's effective level, whenever a level is set (on it or an ancestor,
``basicConfig(level=...)``, ``dictConfig``); :func:`set_log_level` overrides it until the next
change.
"""

from __future__ import annotations

import atexit
import logging

from ._admin import (
    AlterConfigOpType,
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from ._errors import *  # noqa: F403 (the exception classes, listed in __all__ below)
from ._lagless import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    AdminClient,
    ConfigResource,
    Consumer,
    ConsumerGroupMetadata,
    Message,
    MessageBatch,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    Producer,
    TopicPartition,
    __version__,
    create_topic,
)
from ._lagless import _set_log_level
from ._listener import RebalanceListener

__all__ = [
    "Consumer",
    "Producer",
    "AdminClient",
    "NewTopic",
    "NewPartitions",
    "ConfigResource",
    "OffsetSpec",
    "AlterConfigOpType",
    "ClusterMetadata",
    "BrokerMetadata",
    "TopicMetadata",
    "PartitionMetadata",
    "ConsumerGroupMetadata",
    "Message",
    "MessageBatch",
    "TopicPartition",
    "RebalanceListener",
    "create_topic",
    "set_log_level",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "__version__",
    # The exception classes (lagless/_errors.py). Written out rather than `+= _errors.__all__`
    # because type checkers read this list statically; tests/test_errors.py fails when a core
    # error kind's class is missing here.
    "LaglessError",
    "ConfigError",
    "InvalidArgumentError",
    "KafkaError",
    "LaglessTimeout",
    "TransportError",
    "CorruptError",
    "UnknownTopicError",
    "NoOffsetError",
    "PartitionStuckError",
    "CommitFailedError",
    "WakeupError",
    "ClosedError",
    "CallbackError",
    "IllegalStateError",
    "AuthenticationError",
    "SslError",
    "LogTruncationError",
    "TransactionAbortableError",
]

_logger = logging.getLogger("lagless")


def set_log_level(level: "int | None" = None) -> None:
    """Forwards the core's log events at ``level`` and above to the ``lagless`` logger.

    Without an argument, uses the logger's effective level. Events below it are not formatted
    or handed to Python at all, which keeps the I/O threads from taking the GIL for nothing.
    """
    if level is None:
        level = _logger.getEffectiveLevel()
    _set_log_level(int(level))


def _follow_logger_levels() -> None:
    """Calls :func:`set_log_level` whenever a logger's level changes.

    Every change of a level (``Logger.setLevel`` on any logger, so ``basicConfig(level=...)``
    and ``dictConfig`` too, and ``logging.disable``) ends in the logging manager clearing its
    level caches; that is the one place to hear of them all. Only a change of the ``lagless``
    logger's effective level reaches the core, so a :func:`set_log_level` call stays in force
    until that level changes. Should a Python lack that method, the level is read at import and
    by :func:`set_log_level` only.
    """
    manager = logging.Logger.manager
    clear_cache = getattr(manager, "_clear_cache", None)
    if clear_cache is None:
        return
    seen = [_logger.getEffectiveLevel()]

    def clear_cache_and_follow() -> None:
        clear_cache()
        level = _logger.getEffectiveLevel()
        if level != seen[0] and not _stopped[0]:
            seen[0] = level
            _set_log_level(level)

    # setattr: the method is private to logging, unknown to type checkers.
    setattr(manager, "_clear_cache", clear_cache_and_follow)


_stopped = [False]


def _stop_logging() -> None:
    # Past this point the interpreter is going away: log events from I/O threads are dropped
    # instead of waiting for a GIL that finalization may never hand back (and a level set during
    # shutdown does not start them again).
    _stopped[0] = True
    _set_log_level(None)


set_log_level()
_follow_logger_levels()
atexit.register(_stop_logging)

"""lagless: a Kafka consumer client with a Rust core.

>>> import lagless
>>> with lagless.Consumer({"bootstrap.servers": "localhost:9092", "group.id": "g"}) as c:
...     c.subscribe(["orders"])
...     for msg in c.consume(500, timeout=1.0):
...         print(msg.offset, msg.value)

Logs of the core go to the ``logging`` logger ``lagless``. Which levels the core forwards is
set at import from that logger's effective level; call :func:`set_log_level` after changing it.
"""

from __future__ import annotations

import atexit
import logging

from ._errors import *  # noqa: F403 (the exception classes, listed in __all__ below)
from ._lagless import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    Message,
    MessageBatch,
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


def _stop_logging() -> None:
    # Past this point the interpreter is going away: log events from I/O threads are dropped
    # instead of waiting for a GIL that finalization may never hand back.
    _set_log_level(None)


set_log_level()
atexit.register(_stop_logging)

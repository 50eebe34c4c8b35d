"""The exceptions lagless raises: one class per kind of core error, all below LaglessError.

The native module raises these with the attributes filled in from the core error: ``code`` is
lagless' stable error number (the same in Rust, C and Python), ``name`` its upper-case name (for
broker errors, Kafka's name of the broker's code), ``kafka_code`` the broker's error code where
the error came from a broker.

Each class says the core error kind it stands for in ``kind`` (the core's name of the kind, as in
the C constant ``LAGLESS_ERR_<kind>``); the native module picks the class by it, and a test
checks that every kind of the core has its class. A new kind is a new class here with its
``kind``, and its name in ``__all__`` (the package re-exports that list).
"""

from __future__ import annotations

from typing import ClassVar, Dict, List, Optional, Type

__all__ = [
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


class LaglessError(Exception):
    """The root of every lagless error."""

    #: The core error kind the class stands for; None here, at the root.
    kind: ClassVar[Optional[str]] = None
    code: int
    name: str
    retriable: bool
    fatal: bool
    kafka_code: Optional[int]
    topic: Optional[str]
    partition: Optional[int]
    key: Optional[str]

    def __init__(
        self,
        message: str = "",
        *,
        code: int = 0,
        name: str = "UNKNOWN",
        retriable: bool = False,
        fatal: bool = False,
        kafka_code: Optional[int] = None,
        topic: Optional[str] = None,
        partition: Optional[int] = None,
        key: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name
        self.retriable = retriable
        self.fatal = fatal
        self.kafka_code = kafka_code
        self.topic = topic
        self.partition = partition
        self.key = key

    def __str__(self) -> str:
        return self.message


class ConfigError(LaglessError, ValueError):
    """A configuration key is unknown or its value is bad; ``key`` names it."""

    kind = "CONFIG"


class InvalidArgumentError(LaglessError, ValueError):
    """An argument to a call is bad (an empty topic name, a negative offset)."""

    kind = "INVALID_ARGUMENT"


class KafkaError(LaglessError):
    """A broker answered with an error code (``kafka_code``; ``name`` is Kafka's name for it)."""

    kind = "KAFKA"


class LaglessTimeout(LaglessError, TimeoutError):
    """A deadline passed before the operation completed."""

    kind = "TIMEOUT"


class TransportError(LaglessError, ConnectionError):
    """No connection could be made to a broker, or a connection broke."""

    kind = "TRANSPORT"


class CorruptError(LaglessError):
    """Malformed data from the wire or from another group member."""

    kind = "CORRUPT"


class UnknownTopicError(LaglessError):
    """The topic does not exist in the cluster."""

    kind = "UNKNOWN_TOPIC"


class NoOffsetError(LaglessError):
    """``auto.offset.reset=none`` and the partition has no valid committed offset."""

    kind = "NO_OFFSET"


class PartitionStuckError(LaglessError):
    """A partition made no progress for ``task.timeout.ms``; the others keep flowing."""

    kind = "PARTITION_STUCK"


class CommitFailedError(LaglessError):
    """A commit could not complete: the group rebalanced or this member left it."""

    kind = "COMMIT_FAILED"


class WakeupError(LaglessError):
    """``wakeup()`` was called while (or before) ``poll()`` waited."""

    kind = "WAKEUP"


class ClosedError(LaglessError):
    """The client was closed."""

    kind = "CLOSED"


class CallbackError(LaglessError):
    """A rebalance listener callback failed (raised only when the original exception is gone)."""

    kind = "CALLBACK"


class IllegalStateError(LaglessError):
    """The client is not in a state that allows the call (``commit`` without a group)."""

    kind = "ILLEGAL_STATE"


class AuthenticationError(LaglessError, PermissionError):
    """SASL authentication failed: wrong credentials, a refused mechanism or no token. Fatal."""

    kind = "AUTHENTICATION"


class SslError(AuthenticationError):
    """TLS failed: the broker's certificate is untrusted, expired or made out for another host,
    the broker refused the client certificate, or ``security.protocol`` mismatches the listener.
    Fatal. A kind of AuthenticationError, as the Java client's SslAuthenticationException is an
    AuthenticationException: code that catches security failures catches it too."""

    kind = "SSL"


class LogTruncationError(LaglessError):
    """A partition's log was truncated below the position (a leader elected uncleanly lost records
    already read) and ``auto.offset.reset`` is ``none``. The message names the position and the
    offset where the log diverges; ``topic`` and ``partition`` name the partition, which waits for
    a ``seek()`` while the others keep flowing."""

    kind = "LOG_TRUNCATION"


class TransactionAbortableError(LaglessError):
    """A transactional producer's transaction can not commit: a record or a request of it
    failed. Abort the transaction, then begin the next one."""

    kind = "TRANSACTION_ABORTABLE"


def _subclasses(cls: Type[LaglessError]) -> List[Type[LaglessError]]:
    return [c for sub in cls.__subclasses__() for c in [sub, *_subclasses(sub)]]


#: The class of each core error kind, from the classes above (SslError is an
#: AuthenticationError, so the whole tree below LaglessError counts).
_BY_KIND: Dict[str, Type[LaglessError]] = {
    cls.kind: cls for cls in _subclasses(LaglessError) if cls.__module__ == __name__ and cls.kind
}


def _class_for(kind: str) -> Type[LaglessError]:
    """The class for the core error kind ``kind``; the root class for a kind this package does not
    know (a newer native module than these classes)."""
    return _BY_KIND.get(kind, LaglessError)

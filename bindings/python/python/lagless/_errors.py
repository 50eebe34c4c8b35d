"""The exceptions lagless raises: one class per kind of core error, all below LaglessError.

The native module raises these with the attributes filled in from the core error: ``code`` is
lagless' stable error number (the same in Rust, C and Python), ``name`` its upper-case name (for
broker errors, Kafka's name of the broker's code), ``kafka_code`` the broker's error code where
the error came from a broker.
"""

from __future__ import annotations

from typing import Optional

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
]


class LaglessError(Exception):
    """The root of every lagless error."""

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


class InvalidArgumentError(LaglessError, ValueError):
    """An argument to a call is bad (an empty topic name, a negative offset)."""


class KafkaError(LaglessError):
    """A broker answered with an error code (``kafka_code``; ``name`` is Kafka's name for it)."""


class LaglessTimeout(LaglessError, TimeoutError):
    """A deadline passed before the operation completed."""


class TransportError(LaglessError, ConnectionError):
    """No connection could be made to a broker, or a connection broke."""


class CorruptError(LaglessError):
    """Malformed data from the wire or from another group member."""


class UnknownTopicError(LaglessError):
    """The topic does not exist in the cluster."""


class NoOffsetError(LaglessError):
    """``auto.offset.reset=none`` and the partition has no valid committed offset."""


class PartitionStuckError(LaglessError):
    """A partition made no progress for ``task.timeout.ms``; the others keep flowing."""


class CommitFailedError(LaglessError):
    """A commit could not complete: the group rebalanced or this member left it."""


class WakeupError(LaglessError):
    """``wakeup()`` was called while (or before) ``poll()`` waited."""


class ClosedError(LaglessError):
    """The client was closed."""


class CallbackError(LaglessError):
    """A rebalance listener callback failed (raised only when the original exception is gone)."""


class IllegalStateError(LaglessError):
    """The client is not in a state that allows the call (``commit`` without a group)."""


class AuthenticationError(LaglessError, PermissionError):
    """SASL authentication failed: wrong credentials, a refused mechanism or no token. Fatal."""


class SslError(AuthenticationError):
    """TLS failed: the broker's certificate is untrusted, expired or made out for another host,
    the broker refused the client certificate, or ``security.protocol`` mismatches the listener.
    Fatal. A kind of AuthenticationError, as the Java client's SslAuthenticationException is an
    AuthenticationException: code that catches security failures catches it too."""

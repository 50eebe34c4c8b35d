"""Type stubs of the native module lagless._lagless."""

from types import TracebackType
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union, final

from ._admin import AlterConfigOpType, ClusterMetadata
from ._errors import LaglessError
from ._listener import RebalanceListener

__all__ = [
    "AdminClient",
    "ConfigResource",
    "Consumer",
    "ConsumerGroupMetadata",
    "Message",
    "MessageBatch",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "Producer",
    "TopicPartition",
    "create_topic",
    "run_cli",
    "_set_log_level",
    "_error_kinds",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "__version__",
]

__version__: str
OFFSET_BEGINNING: int
OFFSET_END: int
OFFSET_INVALID: int

# `oauth_cb(sasl.oauthbearer.config) -> (token, expiry[, principal[, extensions]])`: OAUTHBEARER
# tokens from the application, expiry in seconds since the epoch (as in confluent-kafka).
_OAuthToken = Union[
    Tuple[str, float],
    Tuple[str, float, Optional[str]],
    Tuple[str, float, Optional[str], Optional[Dict[str, str]]],
]
_OAuthCallback = Callable[[str], _OAuthToken]
# What a config value may be; the config itself is typed Mapping[str, Any] so that a dict of
# mixed values (a dict[str, object] to mypy) is accepted.
# `stats_cb(json)`: the consumer's or producer's statistics (the `metrics()` snapshot as a JSON
# str) every `statistics.interval.ms`, called from the consumer's poll()/consume() on the polling
# thread, or the producer's poll()/flush() on the calling thread; what it raises comes out of
# that call (as in confluent-kafka).
_StatsCallback = Callable[[str], Any]
# `error_cb(error)`: conditions of the whole cluster (all brokers down, refused credentials or
# certificate, a silent group coordinator) as the LaglessError subclass of their kind, each once
# as it begins, called from the consumer's poll()/consume() or the producer's poll()/flush();
# what it raises comes out of that call (as in confluent-kafka).
_ErrorCallback = Callable[[LaglessError], Any]
_ConfigValue = Union[str, int, float, bool, _OAuthCallback, _StatsCallback, _ErrorCallback]
_Payload = Union[bytes, bytearray, str, None]
_Headers = Union[Iterable[Tuple[str, _Payload]], Mapping[str, _Payload]]
_PartitionsCallback = Callable[["Consumer", List["TopicPartition"]], Any]
_CommitCallback = Callable[[Optional[LaglessError], List["TopicPartition"]], Any]
_DeliveryCallback = Callable[[Optional[LaglessError], Optional[Tuple[str, int, int]]], Any]

@final
class TopicPartition:
    topic: str
    partition: int
    offset: int
    metadata: Optional[str]
    error: Optional[LaglessError]
    def __new__(
        cls,
        topic: str,
        partition: int = ...,
        offset: int = ...,
        metadata: Optional[str] = None,
    ) -> "TopicPartition": ...
    def __hash__(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __lt__(self, value: "TopicPartition", /) -> bool: ...
    def __le__(self, value: "TopicPartition", /) -> bool: ...
    def __gt__(self, value: "TopicPartition", /) -> bool: ...
    def __ge__(self, value: "TopicPartition", /) -> bool: ...

@final
class Message:
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> Optional[bytes]: ...
    @property
    def value(self) -> Optional[bytes]: ...
    @property
    def headers(self) -> List[Tuple[str, Optional[bytes]]]: ...
    @property
    def from_recovery(self) -> bool: ...

@final
class MessageBatch:
    """The records of one ``Consumer.consume_batch()`` as columns (see the README).

    Each column is read-only memory shared with the Arrow export: ``memoryview``s with the
    struct format given, and ``pyarrow.record_batch(batch)`` / ``polars.DataFrame(batch)``
    import the same memory without copying (Arrow PyCapsule interface).
    ``__arrow_c_stream__`` exports the batch as a stream of one record batch (zero rows for an
    empty batch) with the same columns, also without copies, for stream importers such as
    ``pyarrow.RecordBatchReader.from_stream(batch)`` and DuckDB.
    """
    def __len__(self) -> int: ...
    @property
    def topic_names(self) -> List[str]: ...
    @property
    def topic_ids(self) -> memoryview: ...
    @property
    def partitions(self) -> memoryview: ...
    @property
    def offsets(self) -> memoryview: ...
    @property
    def timestamps(self) -> memoryview: ...
    @property
    def key_data(self) -> memoryview: ...
    @property
    def key_offsets(self) -> memoryview: ...
    @property
    def key_validity(self) -> memoryview: ...
    @property
    def value_data(self) -> memoryview: ...
    @property
    def value_offsets(self) -> memoryview: ...
    @property
    def value_validity(self) -> memoryview: ...
    @property
    def from_recovery(self) -> memoryview: ...
    def key(self, i: int) -> Optional[bytes]: ...
    def value(self, i: int) -> Optional[bytes]: ...
    def __arrow_c_schema__(self) -> object: ...
    def __arrow_c_array__(self, requested_schema: Optional[object] = None) -> Tuple[object, object]: ...
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object:
        """An ``arrow_array_stream`` PyCapsule: this batch as one record batch, then the end.

        The columns are ``__arrow_c_array__``'s struct fields; their buffers are the batch's own
        memory. Each call makes a new stream. ``requested_schema`` is ignored.
        """

@final
class Consumer:
    def __new__(cls, config: Mapping[str, Any]) -> "Consumer": ...
    def subscribe(
        self,
        topics: Union[str, Iterable[str]],
        listener: Optional[RebalanceListener] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None: ...
    def subscribe_pattern(
        self,
        pattern: str,
        listener: Optional[RebalanceListener] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None: ...
    def subscribe_regex(
        self,
        regex: str,
        listener: Optional[RebalanceListener] = None,
        *,
        on_assign: Optional[_PartitionsCallback] = None,
        on_revoke: Optional[_PartitionsCallback] = None,
        on_lost: Optional[_PartitionsCallback] = None,
    ) -> None: ...
    def subscription(self) -> List[str]: ...
    def unsubscribe(self) -> None: ...
    def assign(self, partitions: Iterable[TopicPartition]) -> None: ...
    def assignment(self) -> List[TopicPartition]: ...
    def poll(self, timeout: Optional[float] = None) -> Optional[Message]: ...
    def consume(self, num_messages: int = 1, timeout: Optional[float] = ...) -> List[Message]: ...
    def consume_batch(self, num_messages: int = 500, timeout: Optional[float] = None) -> MessageBatch: ...
    def recovery_poll(self, num_messages: int = 500, timeout: Optional[float] = None) -> List[Message]:
        """``parallel.rebalance.recovery.poll``: up to ``num_messages`` records of the recovery
        streams, for a thread of their own while another thread polls (which then gets
        main-stream records only). They count as processed, for every commit, once the next
        ``recovery_poll()`` is made. Raises WakeupError after ``wakeup()``, ClosedError once
        closed, IllegalStateError without the setting."""
        ...
    def __iter__(self) -> Iterator[Message]: ...
    def __next__(self) -> Message: ...
    def commit(
        self,
        offsets: Optional[Iterable[TopicPartition]] = None,
        asynchronous: bool = False,
        callback: Optional[_CommitCallback] = None,
        *,
        message: Optional[Message] = None,
    ) -> Optional[List[TopicPartition]]: ...
    def _consumed_offsets(self) -> List[TopicPartition]: ...
    def committed(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]: ...
    def position(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]: ...
    def recovery_active(self, partition: TopicPartition) -> bool:
        """Whether ``partition`` has a recovery stream still draining the backlog it was taken
        over with (KIP-333, ``enable.parallel.rebalance``): while True, messages with
        ``from_recovery`` set may still come for it. Always False with the mode off. Raises
        IllegalStateError if the partition is not assigned, ClosedError after ``close()``."""
    def metrics(self) -> Dict[str, Any]:
        """What the consumer is doing now: each assigned partition's position, committed offset,
        watermarks, lag and deliveries, the group member's state and rebalances, and the totals,
        as plain dicts and lists (README.md, "Metrics", names every field); None where a value
        is not known yet."""
    def metrics_prometheus(self) -> str:
        """The same snapshot in the Prometheus text exposition format 0.0.4: ``lagless_consumer_*``
        metrics labelled with ``client_id``, ``group_id`` and per partition ``topic`` and
        ``partition``; a value not known yet has no sample. ``lagless.prometheus.ConsumerCollector``
        serves it through ``prometheus_client``."""
    def child_consumer_is_alive(self) -> bool:
        """Whether any assigned partition has a recovery stream still draining a backlog
        (KIP-333's "child consumer"). Always False with the mode off."""
    def seek(self, partition: TopicPartition) -> None: ...
    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        """Moves the next read of each partition (their ``offset`` is ignored) to the log start.
        Raises IllegalStateError naming the first partition that is not assigned; the ones before
        it have moved."""
    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        """Moves the next read of each partition (their ``offset`` is ignored) to the log end:
        only records produced after the lookup come. Errors as ``seek_to_beginning``."""
    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...
    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...
    def learner_ready(self, partitions: Iterable[TopicPartition]) -> int: ...
    def prepare_to_leave(self) -> bool: ...
    def paused(self) -> List[TopicPartition]: ...
    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: Optional[float] = None
    ) -> Tuple[int, int]: ...
    def offsets_for_times(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        """For each partition, whose ``offset`` holds a timestamp in milliseconds since the epoch,
        the earliest offset whose record timestamp is at or after it, in the order given;
        ``OFFSET_END`` (-1) where no record is that recent. The partitions need not be assigned.
        A negative timestamp or partition, a partition the topic does not have, or one given
        twice with two timestamps raises InvalidArgumentError; an unknown topic UnknownTopicError."""
    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        """The log start offset of each partition, in the order given. The partitions need not be
        assigned. Errors as ``offsets_for_times``."""
    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: Optional[float] = None
    ) -> List[TopicPartition]:
        """The high watermark of each partition (the offset the next record gets), in the order
        given; at ``isolation.level=read_committed`` the last stable offset (the first offset of
        the oldest open transaction, else the high watermark), as ``get_watermark_offsets``'
        high. The partitions need not be assigned. Errors as ``offsets_for_times``."""
    def partitions_for(self, topic: str, timeout: Optional[float] = None) -> List[int]: ...
    def member_id(self) -> Optional[str]: ...
    def enforce_rebalance(self, reason: Optional[str] = None) -> None:
        """Asks the group for a rebalance, which the next ``poll()`` starts; ``reason`` goes into
        the log and the JoinGroup request. Raises IllegalStateError without a subscription."""
    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The member's place in its group now, for ``Producer.send_offsets_to_transaction``:
        take it right after the ``poll()``/``consume()`` that returned the records whose offsets
        the transaction sends. Raises IllegalStateError without a subscription."""
    def wakeup(self) -> None: ...
    def close(self, timeout: Optional[float] = None) -> None: ...
    def __enter__(self) -> "Consumer": ...
    def __exit__(self, *_args: object) -> None: ...

@final
class ConsumerGroupMetadata:
    """A consumer's place in its group when it was taken (group id, generation, member id,
    ``group.instance.id``), from ``Consumer.consumer_group_metadata()``, for
    ``Producer.send_offsets_to_transaction``. Opaque and immutable."""

@final
class Producer:
    def __new__(cls, config: Mapping[str, Any]) -> "Producer": ...
    def produce(
        self,
        topic: str,
        value: _Payload = None,
        key: _Payload = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
        timestamp: Optional[int] = None,
        on_delivery: Optional[_DeliveryCallback] = None,
    ) -> None: ...
    def send(
        self,
        topic: str,
        value: _Payload = None,
        key: _Payload = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
        timestamp: Optional[int] = None,
    ) -> Tuple[int, int]: ...
    def poll(self, timeout: Optional[float] = 0.0) -> int: ...
    def flush(self, timeout: Optional[float] = None) -> None: ...
    def metrics(self) -> Dict[str, Any]:
        """What the producer is doing now: records and batches delivered, failed and retried,
        their rates, what waits in ``buffer.memory``, the Produce latency and every broker's
        connections, as plain dicts and lists (README.md, "Metrics", names every field); None
        where a value is not known yet."""
    def metrics_prometheus(self) -> str:
        """The same snapshot in the Prometheus text exposition format 0.0.4:
        ``lagless_producer_*`` metrics labelled with ``client_id`` (and ``transactional_id``);
        ``lagless.prometheus.ConsumerCollector`` takes a producer too."""
    def _set_delivery_fd(self, fd: Optional[int]) -> None: ...
    def partitions_for(self, topic: str) -> List[int]: ...
    def init_transactions(self, timeout: Optional[float] = None) -> None:
        """Gets the producer id of ``transactional.id`` from its transaction coordinator; fences
        every older producer with the same id and aborts the transaction it left open. Once,
        before the first transaction. Every transactional call waits up to ``timeout`` seconds,
        None: ``delivery.timeout.ms``; after LaglessTimeout it may be called again. Raises
        IllegalStateError without ``transactional.id``."""
    def begin_transaction(self) -> None:
        """Starts a transaction: records produced until ``commit_transaction()`` or
        ``abort_transaction()`` belong to it."""
    def send_offsets_to_transaction(
        self,
        offsets: Iterable[TopicPartition],
        group_metadata: ConsumerGroupMetadata,
        timeout: Optional[float] = None,
    ) -> None:
        """Adds ``offsets`` (each partition's next offset to read) to the open transaction: the
        group of ``group_metadata`` commits them if and only if the transaction commits. An unset
        offset raises InvalidArgumentError; a member that lost its generation since the metadata
        was taken makes the transaction abortable (TransactionAbortableError)."""
    def commit_transaction(self, timeout: Optional[float] = None) -> None:
        """Flushes the transaction's records and commits it. TransactionAbortableError: call
        ``abort_transaction()``, then begin the next one. An error with ``fatal`` set (KafkaError
        PRODUCER_FENCED when a newer producer with the same ``transactional.id`` fenced this one):
        close the producer. LaglessTimeout: call it again to finish."""
    def abort_transaction(self, timeout: Optional[float] = None) -> None:
        """Aborts the open transaction: records not sent yet fail (TransactionAbortableError in
        their delivery callbacks); read_committed consumers never see its records and its
        offsets are not committed."""
    def close(self, timeout: Optional[float] = None) -> None: ...
    def __enter__(self) -> "Producer": ...
    def __exit__(self, *_args: object) -> None: ...

@final
class NewTopic:
    """A topic to create: ``num_partitions`` and ``replication_factor`` -1 take the broker's
    defaults; ``config`` holds topic configs (``cleanup.policy``, ``retention.ms``, ...)."""
    def __new__(
        cls,
        topic: str,
        num_partitions: int = ...,
        replication_factor: int = ...,
        config: Optional[Mapping[str, str]] = None,
    ) -> "NewTopic": ...
    @property
    def topic(self) -> str: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def replication_factor(self) -> int: ...
    @property
    def config(self) -> Dict[str, str]: ...

@final
class NewPartitions:
    """A topic's partition count in all after ``create_partitions`` (partitions are only added)."""
    def __new__(cls, topic: str, new_total_count: int) -> "NewPartitions": ...
    @property
    def topic(self) -> str: ...
    @property
    def new_total_count(self) -> int: ...

@final
class ConfigResource:
    """What a config call is about: ``ConfigResource("topic", name)``,
    ``ConfigResource("broker", "1")`` (a broker by its node id) or
    ``ConfigResource("client_metrics", name)`` (a KIP-714 client-metrics subscription). Equal
    resources are equal keys."""
    def __new__(cls, restype: str, name: str) -> "ConfigResource": ...
    @property
    def restype(self) -> str: ...
    @property
    def name(self) -> str: ...
    def __hash__(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...

@final
class OffsetSpec:
    """Which offset ``AdminClient.list_offsets`` looks up for a partition."""
    @staticmethod
    def earliest() -> "OffsetSpec": ...
    @staticmethod
    def latest() -> "OffsetSpec": ...
    @staticmethod
    def for_timestamp(timestamp: int) -> "OffsetSpec": ...

@final
class AdminClient:
    """Kafka's admin operations, with confluent-kafka's method names but synchronous: each call
    blocks (the GIL released) for at most ``request_timeout`` seconds (None:
    ``default.api.timeout.ms``, 60 s by default).

    A call about several items returns a dict from each item (topic name, group id,
    ``TopicPartition``, ``ConfigResource``) to its result: None or the item's data on success,
    else the ``LaglessError`` subclass of its error (not raised; e.g. KafkaError with
    ``kafka_code`` 36 for a topic that exists already). A failure of the whole call (no broker
    reached in time, a bad config key) raises. A bad argument (an empty name, a count below 1, a
    negative offset, an item given twice) raises InvalidArgumentError naming it before anything
    is sent."""
    def __new__(cls, config: Mapping[str, Any]) -> "AdminClient": ...
    def create_topics(
        self, new_topics: Iterable[NewTopic], request_timeout: Optional[float] = None
    ) -> Dict[str, Optional[LaglessError]]:
        """Creates the topics; does not wait for their partitions' leaders."""
    def delete_topics(
        self, topics: Iterable[str], request_timeout: Optional[float] = None
    ) -> Dict[str, Optional[LaglessError]]: ...
    def create_partitions(
        self, new_partitions: Iterable[NewPartitions], request_timeout: Optional[float] = None
    ) -> Dict[str, Optional[LaglessError]]: ...
    def describe_cluster(self, request_timeout: Optional[float] = None) -> Dict[str, Any]:
        """``{"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack"}]}``."""
    def list_topics(
        self, include_internal: bool = False, request_timeout: Optional[float] = None
    ) -> ClusterMetadata:
        """confluent-kafka's ``ClusterMetadata``: ``brokers`` (id to BrokerMetadata) and
        ``topics`` (name to TopicMetadata, each with ``partitions``: id to PartitionMetadata with
        ``leader``, ``replicas`` and ``isrs``); internal topics only with ``include_internal``."""
    def close(self) -> None:
        """Stops the client; every later call raises ClosedError. Closing again does nothing."""
    def __enter__(self) -> "AdminClient": ...
    def __exit__(self, *args: object) -> None: ...
    def describe_topics(
        self, topics: Iterable[str], request_timeout: Optional[float] = None
    ) -> Dict[str, Union[Dict[str, Any], LaglessError]]:
        """Per topic ``{"name", "topic_id", "is_internal", "partitions": [{"partition", "leader",
        "leader_epoch", "replicas", "isr", "offline_replicas"}]}``; UnknownTopicError for a topic
        the cluster does not have."""
    def list_offsets(
        self, offsets: Mapping[TopicPartition, OffsetSpec], request_timeout: Optional[float] = None
    ) -> Dict[TopicPartition, Union[Dict[str, int], LaglessError]]:
        """Per partition ``{"offset", "timestamp"}`` (offset -1 when no record is as recent as the
        timestamp asked for)."""
    def describe_configs(
        self, resources: Iterable[ConfigResource], request_timeout: Optional[float] = None
    ) -> Dict[ConfigResource, Union[Dict[str, Dict[str, Any]], LaglessError]]:
        """Per resource, each config key to ``{"value", "read_only", "is_default",
        "is_sensitive"}`` (value None when sensitive)."""
    def incremental_alter_configs(
        self,
        changes: Mapping[
            ConfigResource, Mapping[str, Union[str, None, Tuple[AlterConfigOpType, Optional[str]]]]
        ],
        request_timeout: Optional[float] = None,
    ) -> Dict[ConfigResource, Optional[LaglessError]]:
        """Sets each key given a str, returns each key given None to its default, and does the
        operation of each ``(AlterConfigOpType, value)`` pair (APPEND and SUBTRACT add an item
        to or remove it from a list-valued config); keys not given keep their values."""
    def list_consumer_groups(self, request_timeout: Optional[float] = None) -> List[Dict[str, str]]:
        """Every consumer group of the cluster, by id: ``{"group_id", "protocol_type", "state",
        "group_type"}``."""
    def describe_consumer_groups(
        self, group_ids: Iterable[str], request_timeout: Optional[float] = None
    ) -> Dict[str, Union[Dict[str, Any], LaglessError]]:
        """Per group ``{"group_id", "group_type" ("classic" or "consumer"), "state",
        "protocol_type", "partition_assignor", "members": [{"member_id", "group_instance_id",
        "client_id", "host", "assignment": [TopicPartition]}]}``; a group that does not exist is
        described with state "Dead" and no members."""
    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Optional[Iterable[TopicPartition]] = None,
        request_timeout: Optional[float] = None,
    ) -> Dict[TopicPartition, Union[TopicPartition, LaglessError]]:
        """The group's committed offsets, of ``partitions`` or of every partition it committed
        for: each a TopicPartition with ``offset`` and ``metadata`` (OFFSET_INVALID when
        nothing is committed)."""
    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Iterable[TopicPartition], request_timeout: Optional[float] = None
    ) -> Dict[TopicPartition, Optional[LaglessError]]:
        """Commits each partition's ``offset`` (and ``metadata``) for the group from outside it;
        the coordinator accepts it only while the group has no member."""
    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], request_timeout: Optional[float] = None
    ) -> Dict[TopicPartition, Optional[LaglessError]]:
        """Deletes the group's committed offsets of the partitions; refused (KafkaError
        ``kafka_code`` 86) for a topic the group's members are subscribed to."""

def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> None: ...
def run_cli(argv: List[str]) -> int: ...
def _set_log_level(level: Optional[int]) -> None: ...
def _error_kinds() -> List[Tuple[int, str]]: ...

"""What ``AdminClient.list_topics`` returns, with confluent-kafka's class and attribute names
(``ClusterMetadata``, ``BrokerMetadata``, ``TopicMetadata``, ``PartitionMetadata``), and
``AlterConfigOpType`` for ``AdminClient.incremental_alter_configs``."""

from __future__ import annotations

import enum
from typing import Dict, List, Optional


class AlterConfigOpType(enum.IntEnum):
    """An operation of ``incremental_alter_configs``, confluent-kafka's names and Kafka's codes:
    ``{"key": (AlterConfigOpType.APPEND, "item")}``. SET and DELETE have the short forms
    ``"value"`` and ``None``; APPEND and SUBTRACT add an item to or remove it from a
    list-valued config."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class BrokerMetadata:
    """A broker: ``id``, ``host``, ``port`` and ``rack`` (None when unset)."""

    def __init__(self, id: int, host: str, port: int, rack: Optional[str] = None) -> None:
        self.id = id
        self.host = host
        self.port = port
        self.rack = rack

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    """A partition: ``id``, ``leader`` (None while it has none; confluent-kafka says -1),
    ``replicas`` and ``isrs`` (broker ids), ``error`` (None)."""

    def __init__(self, id: int, leader: Optional[int], replicas: List[int], isrs: List[int],
                 error: Optional[Exception] = None) -> None:
        self.id = id
        self.leader = leader
        self.replicas = replicas
        self.isrs = isrs
        self.error = error

    def __repr__(self) -> str:
        return f"PartitionMetadata({self.id})"


class TopicMetadata:
    """A topic: ``topic`` (its name), ``partitions`` (partition id to PartitionMetadata) and
    ``error`` (None, or the exception of the topic's error, with no partitions)."""

    def __init__(self, topic: str, partitions: Dict[int, PartitionMetadata],
                 error: Optional[Exception] = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"TopicMetadata({self.topic}, {self.error!r})"
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"

    def __str__(self) -> str:
        return self.topic


class ClusterMetadata:
    """The cluster: ``cluster_id``, ``controller_id`` (None when the broker does not say),
    ``brokers`` (broker id to BrokerMetadata) and ``topics`` (name to TopicMetadata).
    ``orig_broker_id`` and ``orig_broker_name`` are confluent-kafka's, which broker answered:
    None here (the answers may come from several; confluent-kafka says -1 when it does not
    know)."""

    def __init__(self, cluster_id: Optional[str], controller_id: Optional[int],
                 brokers: Dict[int, BrokerMetadata], topics: Dict[str, TopicMetadata]) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.brokers = brokers
        self.topics = topics
        self.orig_broker_id: Optional[int] = None
        self.orig_broker_name: Optional[str] = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"

    def __str__(self) -> str:
        return str(self.cluster_id)

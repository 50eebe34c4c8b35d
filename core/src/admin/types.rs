//! What the admin client's calls take and answer: lagless' own types, named as Kafka's Admin
//! names them.
use crate::types::TopicPartition;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic's name.
    pub name: String,
    /// Its partition count; -1 for the broker's `num.partitions`.
    pub num_partitions: i32,
    /// Its replication factor; -1 for the broker's `default.replication.factor`.
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `retention.ms`, ...), as (key, value).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic `name` of `num_partitions` partitions with `replication_factor` replicas each,
    /// no configs of its own.
    pub fn new(name: impl Into<String>, num_partitions: i32, replication_factor: i16) -> NewTopic {
        NewTopic {
            name: name.into(),
            num_partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }
}

/// One broker of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerDescription {
    /// The broker's node id.
    pub id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
    /// Its `broker.rack`, when set.
    pub rack: Option<String>,
}

/// The cluster as DescribeCluster (or Metadata, from a broker without it) tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: String,
    /// The active controller's id (-1 when the broker does not say).
    pub controller_id: i32,
    /// The brokers, ordered by id.
    pub brokers: Vec<BrokerDescription>,
}

/// One partition of a described topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    /// The partition's index.
    pub partition: i32,
    /// The leader's broker id, -1 while it has none.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The replicas' broker ids.
    pub replicas: Vec<i32>,
    /// The in-sync replicas' broker ids.
    pub isr: Vec<i32>,
    /// The replicas that are offline.
    pub offline_replicas: Vec<i32>,
}

/// A topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// Its id (KIP-516), as Kafka prints it (a UUID; nil from an old broker).
    pub topic_id: String,
    /// Whether it is an internal topic (`__consumer_offsets`).
    pub is_internal: bool,
    /// Its partitions, ordered by index.
    pub partitions: Vec<PartitionDescription>,
}

/// A group as ListGroups lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// `consumer` for consumer groups (either protocol), else what the members declared.
    pub protocol_type: String,
    /// The group's state (`Stable`, `Empty`, ...; empty from a broker too old to say).
    pub state: String,
    /// `classic` or `consumer` (KIP-848; empty from a broker too old to say).
    pub group_type: String,
}

/// Which group protocol a described group speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupType {
    /// JoinGroup/SyncGroup (the classic protocol).
    Classic,
    /// ConsumerGroupHeartbeat (KIP-848).
    Consumer,
}

/// One member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id` (a static member), when it has one.
    pub group_instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connects from.
    pub client_host: String,
    /// The partitions assigned to it (empty when the assignment is not the consumer protocol's).
    pub assignment: Vec<TopicPartition>,
}

/// A group as DescribeGroups or ConsumerGroupDescribe tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// The protocol the group speaks.
    pub group_type: GroupType,
    /// The group's state: `Empty`, `Stable`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Dead` (classic); `Empty`, `Assigning`, `Reconciling`, `Stable`, `Dead` (consumer).
    pub state: String,
    /// `consumer` for consumer groups (classic groups of other kinds say their own).
    pub protocol_type: String,
    /// The assignor the group uses (classic: the agreed protocol; consumer: the broker's).
    pub assignor: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}

/// Which offset ListOffsets looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (the high watermark).
    Latest,
    /// The first offset whose record's timestamp is at or after this (ms since the epoch).
    Timestamp(i64),
}

/// One partition's ListOffsets answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset; -1 when no record has a timestamp at or after the one asked for.
    pub offset: i64,
    /// The record's timestamp (-1 for the log start and end).
    pub timestamp: i64,
}

/// What a config call is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigResource {
    /// A topic's configs.
    Topic(String),
    /// A broker's configs (by node id).
    Broker(i32),
    /// A client-metrics subscription of KIP-714 (by name): `metrics` (name prefixes, `*` for
    /// all), `interval.ms`, `match`.
    ClientMetrics(String),
}

impl ConfigResource {
    /// Kafka's `ConfigResource.Type` code.
    pub(crate) fn type_code(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) => 4,
            ConfigResource::ClientMetrics(_) => 16,
        }
    }

    /// The resource's name on the wire (a broker's is its id).
    pub(crate) fn name(&self) -> String {
        match self {
            ConfigResource::Topic(t) => t.clone(),
            ConfigResource::Broker(id) => id.to_string(),
            ConfigResource::ClientMetrics(name) => name.clone(),
        }
    }
}

/// One config entry of a described resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The key.
    pub name: String,
    /// The value; `None` for a sensitive value (the broker never says it) or an unset key.
    pub value: Option<String>,
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// Whether the value is the default (the broker's, not set on this resource).
    pub is_default: bool,
    /// Whether the value is sensitive (a password).
    pub is_sensitive: bool,
}

/// One change of IncrementalAlterConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Set the key to the value.
    Set(String, String),
    /// Remove the key (back to the default).
    Delete(String),
    /// Add the value to a list key.
    Append(String, String),
    /// Remove the value from a list key.
    Subtract(String, String),
}

impl AlterConfigOp {
    /// (key, Kafka's `OpType` code, value).
    pub(crate) fn wire(&self) -> (&str, i8, Option<&str>) {
        match self {
            AlterConfigOp::Set(k, v) => (k, 0, Some(v)),
            AlterConfigOp::Delete(k) => (k, 1, None),
            AlterConfigOp::Append(k, v) => (k, 2, Some(v)),
            AlterConfigOp::Subtract(k, v) => (k, 3, Some(v)),
        }
    }
}

/// A group's lag on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub partition: TopicPartition,
    /// The group's committed offset, `None` when it has none.
    pub committed: Option<i64>,
    /// The log end offset, `None` when it could not be listed.
    pub end: Option<i64>,
    /// `end - committed` when both are known (as Kafka's consumer-groups tool computes it).
    pub lag: Option<i64>,
}

/// Where `reset-offsets` moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    /// The log start.
    Earliest,
    /// The log end.
    Latest,
    /// The first offset at or after this timestamp (ms since the epoch); the log end when no
    /// record is that recent.
    Timestamp(i64),
    /// This offset, brought within the log's start and end.
    Offset(i64),
}

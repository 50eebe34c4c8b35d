//! The plain values every layer speaks of: a topic's partition, a committed offset, a consumer's
//! place in its group. A leaf: it imports nothing of lagless, so that the wire layer
//! (`protocol`), the fetch path, the group and the producer can all use them without reaching up
//! to the crate root or to each other.

/// A topic and one of its partitions.
///
/// ```
/// use std::collections::BTreeSet;
/// use lagless::TopicPartition;
///
/// let tp = TopicPartition::new("orders", 3);
/// assert_eq!((tp.topic.as_str(), tp.partition), ("orders", 3));
/// assert_eq!(tp.to_string(), "orders-3");
///
/// // Ordered by topic, then by partition number (not as text: 2 before 10).
/// let set: BTreeSet<_> = [("orders", 10), ("audit", 0), ("orders", 2)]
///     .into_iter()
///     .map(|(topic, partition)| TopicPartition::new(topic, partition))
///     .collect();
/// let names: Vec<String> = set.iter().map(ToString::to_string).collect();
/// assert_eq!(names, ["audit-0", "orders-2", "orders-10"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's id within the topic, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// The partition `partition` of `topic`. Nothing is checked here: [`crate::Consumer::assign`] and
    /// the offset lookups refuse an empty topic or a negative partition with
    /// [`crate::Error::InvalidArgument`].
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A committed offset and its metadata string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The offset of the next record to consume (the last processed record's offset + 1).
    pub offset: i64,
    /// A free string stored with the offset (empty for none); brokers refuse more than
    /// `offset.metadata.max.bytes` (4096 by default) with `OFFSET_METADATA_TOO_LARGE`.
    pub metadata: String,
}

/// A consumer's place in its group, as [`Consumer::group_metadata`](crate::Consumer::group_metadata)
/// gives it and [`Producer::send_offsets_to_transaction`](crate::Producer::send_offsets_to_transaction)
/// takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The consumer group (`group.id`).
    pub group_id: String,
    /// The generation the member is in; -1 before its first join completes or after it lost its
    /// generation.
    pub generation_id: i32,
    /// The member id the coordinator assigned; empty before the first join.
    pub member_id: String,
    /// The static member id (`group.instance.id`), if set.
    pub group_instance_id: Option<String>,
    /// The assignor the group chose in the member's generation ("range", "cooperative-sticky");
    /// `None` without a generation.
    pub protocol: Option<String>,
    /// KIP-320: the leader epoch of each offset, as the consumer knows it, for the offsets sent
    /// to a transaction with this metadata.
    pub(crate) leader_epochs: LeaderEpochLookup,
}

/// KIP-320: the leader epoch to commit with an offset of a partition (the next record to read),
/// looked up in the fetch state of the consumer that made the [`GroupMetadata`]; -1 where it is
/// not known (that consumer is gone, or never read near the offset). A transactional offset
/// commit carries it as the consumer's own commits do, so that the partition's next owner can
/// check the offset against the log before reading from it. Compares equal to any other: it is
/// a lookup, not part of the member's identity.
#[derive(Clone, Default)]
pub(crate) struct LeaderEpochLookup(pub(crate) Option<LeaderEpochs>);

/// The leader epoch (KIP-320) to commit with an offset of a partition; -1 for unknown.
pub(crate) type LeaderEpochs = std::sync::Arc<dyn Fn(&TopicPartition, i64) -> i32 + Send + Sync>;

impl LeaderEpochLookup {
    pub(crate) fn epoch_at(&self, tp: &TopicPartition, offset: i64) -> i32 {
        self.0.as_ref().map_or(-1, |f| f(tp, offset))
    }
}

impl std::fmt::Debug for LeaderEpochLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaderEpochLookup")
    }
}

impl PartialEq for LeaderEpochLookup {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LeaderEpochLookup {}

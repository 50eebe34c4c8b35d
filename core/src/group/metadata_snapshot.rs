//! What a group assignment was computed from, and whether the cluster still matches it.
//!
//! An assignment covers the partitions that existed when the leader computed it. When a
//! subscribed topic gains partitions, is created after `subscribe()`, or is deleted, the group
//! must rebalance for the assignment to follow; the Java client's leader compares a metadata
//! snapshot on every refresh (`ConsumerCoordinator.rejoinNeededOrPending`), and librdkafka
//! rejoins when a partition count changes. Here every member compares: the leader against the
//! metadata it assigned from, a follower against what the cluster showed right after it
//! joined.
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::backoff::Deadline;
use crate::cluster::{Cluster, Metadata};
use crate::error::codes;

/// The partition counts of subscribed topics as metadata showed them: `Some(n)` for a topic
/// with `n` partitions, `None` for one the cluster does not have (or not in a usable state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MetadataSnapshot(BTreeMap<String, Option<i32>>);

impl MetadataSnapshot {
    /// What an assignment computed from `meta` covers, for every topic of `topics`: a topic
    /// without a usable answer (missing, or an error such as LEADER_NOT_AVAILABLE right after
    /// its creation) was not assigned, so it counts as missing.
    pub fn assigned_from(meta: &Metadata, topics: &BTreeSet<String>) -> Self {
        MetadataSnapshot(
            topics
                .iter()
                .map(|t| {
                    let count = meta
                        .topics
                        .get(t)
                        .filter(|info| info.error_code == codes::NONE)
                        .map(|info| info.partitions.len() as i32);
                    (t.clone(), count)
                })
                .collect(),
        )
    }

    /// What `meta` says for sure about `topics`: a count, or that the topic does not exist.
    /// A topic the answer did not cover (asked for by a later refresh) or answered with a
    /// transient error (a leader election) is left out: it is no evidence of a change.
    pub fn observed(meta: &Metadata, topics: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        MetadataSnapshot(
            topics
                .into_iter()
                .filter_map(|t| {
                    let t = t.as_ref();
                    let info = meta.topics.get(t)?;
                    let count = match info.error_code {
                        codes::NONE => Some(info.partitions.len() as i32),
                        codes::UNKNOWN_TOPIC_OR_PARTITION => None,
                        _ => return None,
                    };
                    Some((t.to_string(), count))
                })
                .collect(),
        )
    }

    /// A follower's stand-in for the metadata the leader assigned from, which it cannot see:
    /// what the cluster shows right after the join. Fetched at once, so that a change between
    /// the leader's assignment and this member's next periodic refresh is not taken for the
    /// state the assignment covers. `None` when the cluster does not answer within `wait`;
    /// the next refresh then stands in ([`AssignmentBasis::AwaitingMetadata`]).
    pub async fn after_join(
        cluster: &Cluster,
        topics: &[String],
        wait: Duration,
    ) -> Option<MetadataSnapshot> {
        match cluster.refresh(topics, Deadline::after(wait)).await {
            Ok(meta) => Some(MetadataSnapshot::observed(&meta, topics)),
            Err(e) => {
                tracing::debug!(error = %e, "no metadata right after joining the group; the next refresh stands in");
                None
            }
        }
    }

    /// The partition counts of the topics that exist, as an assignor takes them.
    pub fn partition_counts(&self) -> BTreeMap<String, i32> {
        self.0
            .iter()
            .filter_map(|(t, n)| n.map(|n| (t.clone(), n)))
            .collect()
    }

    /// The topics this snapshot covers.
    pub fn topics(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    /// Why an assignment computed from `self` no longer matches what metadata shows `now`, or
    /// `None` when it still does. Only topics `self` covers count, and only what `now` says for
    /// sure about them (see [`MetadataSnapshot::observed`]).
    pub fn changed_in(&self, now: &MetadataSnapshot) -> Option<String> {
        self.0.iter().find_map(|(topic, was)| {
            let is = now.0.get(topic)?;
            match (was, is) {
                (Some(a), Some(b)) if a != b => Some(format!(
                    "the partition count of subscribed topic `{topic}` changed from {a} to {b}"
                )),
                (None, Some(n)) => Some(format!(
                    "subscribed topic `{topic}` now exists, with {n} partitions"
                )),
                (Some(_), None) => Some(format!("subscribed topic `{topic}` no longer exists")),
                _ => None,
            }
        })
    }
}

/// What a member compares the cluster against while it owns an assignment.
#[derive(Debug, Default)]
pub(crate) enum AssignmentBasis {
    /// Nothing to compare: not in a generation, or joining.
    #[default]
    None,
    /// A follower without a snapshot of its own (the metadata right after the join did not
    /// come): the first metadata fetched after it joined stands in (anything older may predate
    /// the leader's, and would make it rejoin for a change the assignment already covers).
    AwaitingMetadata {
        topics: BTreeSet<String>,
        joined_at: Instant,
    },
    Known {
        snapshot: MetadataSnapshot,
        /// The metadata last compared (`fetched_at`), so each answer is looked at once.
        checked: Option<Instant>,
    },
}

impl AssignmentBasis {
    /// After a join: the leader knows what it assigned from (`assigned_from`); a follower
    /// waits for metadata about its subscribed `topics`.
    pub fn after_join(
        assigned_from: Option<MetadataSnapshot>,
        topics: BTreeSet<String>,
        joined_at: Instant,
    ) -> Self {
        match assigned_from {
            Some(snapshot) => AssignmentBasis::Known {
                snapshot,
                checked: None,
            },
            None => AssignmentBasis::AwaitingMetadata { topics, joined_at },
        }
    }

    /// Looks at the latest metadata. Returns why the member must rejoin when its assignment
    /// no longer matches the cluster, and then forgets the basis: the rejoin makes a new one.
    pub fn check(&mut self, meta: &Metadata) -> Option<String> {
        let fetched_at = meta.fetched_at?;
        match self {
            AssignmentBasis::None => None,
            AssignmentBasis::AwaitingMetadata { topics, joined_at } => {
                if fetched_at >= *joined_at {
                    *self = AssignmentBasis::Known {
                        snapshot: MetadataSnapshot::observed(meta, topics.iter()),
                        checked: Some(fetched_at),
                    };
                }
                None
            }
            AssignmentBasis::Known { snapshot, checked } => {
                if *checked == Some(fetched_at) {
                    return None;
                }
                *checked = Some(fetched_at);
                let reason =
                    snapshot.changed_in(&MetadataSnapshot::observed(meta, snapshot.topics()))?;
                *self = AssignmentBasis::None;
                Some(reason)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{PartitionInfo, TopicInfo};

    fn snap(counts: &[(&str, Option<i32>)]) -> MetadataSnapshot {
        MetadataSnapshot(counts.iter().map(|(t, n)| (t.to_string(), *n)).collect())
    }

    fn metadata(topics: &[(&str, i16, i32)]) -> Metadata {
        let mut m = Metadata::default();
        for (name, error_code, partitions) in topics {
            m.topics.insert(
                name.to_string(),
                TopicInfo {
                    name: name.to_string(),
                    topic_id: uuid::Uuid::nil(),
                    error_code: *error_code,
                    is_internal: false,
                    partitions: (0..*partitions)
                        .map(|p| PartitionInfo {
                            partition: p,
                            leader: 1,
                            leader_epoch: 0,
                            error_code: codes::NONE,
                        })
                        .collect(),
                },
            );
        }
        m
    }

    #[test]
    fn the_same_counts_are_no_change() {
        let built = snap(&[("a", Some(2)), ("b", None)]);
        assert_eq!(built.changed_in(&built.clone()), None);
    }

    #[test]
    fn a_topic_that_gained_partitions_is_a_change() {
        let built = snap(&[("a", Some(2)), ("b", Some(3))]);
        let now = snap(&[("a", Some(4)), ("b", Some(3))]);
        assert_eq!(
            built.changed_in(&now).as_deref(),
            Some("the partition count of subscribed topic `a` changed from 2 to 4")
        );
    }

    #[test]
    fn a_missing_topic_that_now_exists_is_a_change() {
        let built = snap(&[("a", Some(2)), ("later", None)]);
        let now = snap(&[("a", Some(2)), ("later", Some(3))]);
        assert_eq!(
            built.changed_in(&now).as_deref(),
            Some("subscribed topic `later` now exists, with 3 partitions")
        );
    }

    #[test]
    fn a_deleted_topic_is_a_change() {
        let built = snap(&[("a", Some(2))]);
        let now = snap(&[("a", None)]);
        assert_eq!(
            built.changed_in(&now).as_deref(),
            Some("subscribed topic `a` no longer exists")
        );
    }

    #[test]
    fn a_topic_still_missing_is_no_change() {
        let built = snap(&[("later", None)]);
        assert_eq!(built.changed_in(&snap(&[("later", None)])), None);
    }

    #[test]
    fn topics_metadata_does_not_cover_are_no_evidence() {
        // Not in the answer (a refresh that did not ask for them yet): nothing changed.
        let built = snap(&[("a", Some(2)), ("b", None)]);
        assert_eq!(built.changed_in(&snap(&[])), None);
        // Topics the assignment did not cover do not count either.
        let now = snap(&[("a", Some(2)), ("c", Some(8))]);
        assert_eq!(built.changed_in(&now), None);
    }

    #[test]
    fn assigned_from_counts_every_topic_and_unusable_ones_as_missing() {
        let meta = metadata(&[
            ("a", codes::NONE, 2),
            ("gone", codes::UNKNOWN_TOPIC_OR_PARTITION, 0),
            ("electing", codes::LEADER_NOT_AVAILABLE, 0),
        ]);
        let topics: BTreeSet<String> = ["a", "gone", "electing", "unasked"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let built = MetadataSnapshot::assigned_from(&meta, &topics);
        assert_eq!(
            built,
            snap(&[
                ("a", Some(2)),
                ("electing", None),
                ("gone", None),
                ("unasked", None)
            ])
        );
        assert_eq!(
            built.partition_counts(),
            BTreeMap::from([("a".to_string(), 2)])
        );
    }

    #[test]
    fn observed_leaves_out_what_metadata_does_not_settle() {
        let meta = metadata(&[
            ("a", codes::NONE, 4),
            ("gone", codes::UNKNOWN_TOPIC_OR_PARTITION, 0),
            ("electing", codes::LEADER_NOT_AVAILABLE, 0),
        ]);
        let now = MetadataSnapshot::observed(&meta, ["a", "gone", "electing", "unasked"]);
        assert_eq!(now, snap(&[("a", Some(4)), ("gone", None)]));
        // A topic whose leader is being elected is not taken for a deleted one.
        let built = snap(&[("electing", Some(3))]);
        assert_eq!(built.changed_in(&now), None);
    }
    fn fetched(mut m: Metadata, at: Instant) -> Metadata {
        m.fetched_at = Some(at);
        m
    }

    #[test]
    fn the_leader_rejoins_once_when_its_topic_grows() {
        let t0 = Instant::now();
        let mut basis = AssignmentBasis::after_join(
            Some(snap(&[("a", Some(2)), ("later", None)])),
            BTreeSet::new(),
            t0,
        );
        let same = fetched(
            metadata(&[
                ("a", codes::NONE, 2),
                ("later", codes::UNKNOWN_TOPIC_OR_PARTITION, 0),
            ]),
            t0,
        );
        assert_eq!(basis.check(&same), None);
        let grown = fetched(
            metadata(&[("a", codes::NONE, 4)]),
            t0 + Duration::from_secs(1),
        );
        assert_eq!(
            basis.check(&grown).as_deref(),
            Some("the partition count of subscribed topic `a` changed from 2 to 4")
        );
        // The rejoin computes a new basis; until then nothing more is asked.
        assert_eq!(basis.check(&grown), None);
        assert!(matches!(basis, AssignmentBasis::None));
    }

    #[test]
    fn the_leader_rejoins_when_a_missing_topic_appears() {
        let t0 = Instant::now();
        let mut basis =
            AssignmentBasis::after_join(Some(snap(&[("later", None)])), BTreeSet::new(), t0);
        // Just created: no leader yet, not a usable answer.
        let electing = fetched(
            metadata(&[("later", codes::LEADER_NOT_AVAILABLE, 0)]),
            t0 + Duration::from_millis(100),
        );
        assert_eq!(basis.check(&electing), None);
        let created = fetched(
            metadata(&[("later", codes::NONE, 3)]),
            t0 + Duration::from_millis(200),
        );
        assert_eq!(
            basis.check(&created).as_deref(),
            Some("subscribed topic `later` now exists, with 3 partitions")
        );
    }

    #[test]
    fn a_follower_compares_from_the_first_metadata_after_its_join() {
        let t0 = Instant::now();
        let joined = t0 + Duration::from_secs(1);
        let topics: BTreeSet<String> = ["a".to_string()].into();
        let mut basis = AssignmentBasis::after_join(None, topics, joined);
        // Older than the join: the leader may have assigned from newer metadata (4 partitions).
        let before = fetched(metadata(&[("a", codes::NONE, 2)]), t0);
        assert_eq!(basis.check(&before), None);
        let after = fetched(metadata(&[("a", codes::NONE, 4)]), joined);
        assert_eq!(basis.check(&after), None);
        let same = fetched(
            metadata(&[("a", codes::NONE, 4)]),
            joined + Duration::from_secs(2),
        );
        assert_eq!(basis.check(&same), None);
        let grown = fetched(
            metadata(&[("a", codes::NONE, 6)]),
            joined + Duration::from_secs(4),
        );
        assert_eq!(
            basis.check(&grown).as_deref(),
            Some("the partition count of subscribed topic `a` changed from 4 to 6")
        );
    }

    #[test]
    fn nothing_is_compared_outside_a_generation_or_before_any_metadata() {
        let t0 = Instant::now();
        let mut none = AssignmentBasis::None;
        assert_eq!(
            none.check(&fetched(metadata(&[("a", codes::NONE, 4)]), t0)),
            None
        );
        let mut basis =
            AssignmentBasis::after_join(Some(snap(&[("a", Some(2))])), BTreeSet::new(), t0);
        // Metadata never fetched says nothing.
        assert_eq!(basis.check(&metadata(&[("a", codes::NONE, 4)])), None);
    }
}

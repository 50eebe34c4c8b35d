//! The admin client's decisions, pure so that tables can test them: a group's lag, where a
//! reset moves an offset, whether a group may be reset, and which describe a group needs.
use std::collections::BTreeMap;

use crate::admin::types::{PartitionLag, ResetTarget};
use crate::error::codes;
use crate::types::TopicPartition;

/// A partition's lag as Kafka's consumer-groups tool computes it: the log end offset minus the
/// committed offset when both are known (no clamping: a committed offset past a truncated log
/// shows as a negative lag, which is worth seeing).
pub fn lag(committed: Option<i64>, end: Option<i64>) -> Option<i64> {
    match (committed, end) {
        (Some(c), Some(e)) if c >= 0 && e >= 0 => Some(e - c),
        _ => None,
    }
}

/// The lag of every partition in `partitions`, from the committed offsets and log end offsets
/// known for them, ordered by partition.
pub fn group_lag(
    partitions: &[TopicPartition],
    committed: &BTreeMap<TopicPartition, i64>,
    end: &BTreeMap<TopicPartition, i64>,
) -> Vec<PartitionLag> {
    let mut out: Vec<PartitionLag> = partitions
        .iter()
        .map(|tp| {
            let c = committed.get(tp).copied();
            let e = end.get(tp).copied();
            PartitionLag {
                partition: tp.clone(),
                committed: c,
                end: e,
                lag: lag(c, e),
            }
        })
        .collect();
    out.sort_by(|a, b| a.partition.cmp(&b.partition));
    out.dedup_by(|a, b| a.partition == b.partition);
    out
}

/// The offset a reset to `target` gives a partition whose log runs from `earliest` to `latest`;
/// `by_timestamp` is ListOffsets' answer for a [`ResetTarget::Timestamp`] (-1: no record that
/// recent). As Kafka's tool: an offset outside the log is brought to its nearer end, and a
/// timestamp past every record resets to the log end.
pub fn reset_offset(
    target: ResetTarget,
    earliest: i64,
    latest: i64,
    by_timestamp: Option<i64>,
) -> i64 {
    match target {
        ResetTarget::Earliest => earliest,
        ResetTarget::Latest => latest,
        ResetTarget::Offset(o) => o.clamp(earliest, latest.max(earliest)),
        ResetTarget::Timestamp(_) => match by_timestamp {
            Some(o) if o >= 0 => o,
            _ => latest,
        },
    }
}

/// Whether a group's offsets may be altered from outside: only while it has no member, as
/// Kafka's tool requires (a live member would overwrite them with its next commit, or be
/// fenced by them). `state` is what DescribeGroups or ConsumerGroupDescribe answered.
pub fn may_reset(state: &str, members: usize) -> Result<(), String> {
    if members == 0 && matches!(state, "Empty" | "Dead" | "") {
        return Ok(());
    }
    Err(format!(
        "the group can only be reset while it is inactive; it is {state} with {members} member{}",
        if members == 1 { "" } else { "s" }
    ))
}

/// Whether a group that ConsumerGroupDescribe answered with `error_code` is described with the
/// classic DescribeGroups instead: a classic group (or no group at all) is not a consumer
/// group to the new API.
pub fn describe_as_classic(error_code: i16) -> bool {
    error_code == codes::GROUP_ID_NOT_FOUND || error_code == codes::UNSUPPORTED_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_end_minus_committed_when_both_are_known() {
        // (committed, end, lag)
        let table = [
            (Some(0), Some(10), Some(10)),
            (Some(10), Some(10), Some(0)),
            (Some(7), Some(3), Some(-4)),
            (None, Some(10), None),
            (Some(5), None, None),
            (Some(-1), Some(10), None),
            (None, None, None),
        ];
        for (committed, end, want) in table {
            assert_eq!(lag(committed, end), want, "{committed:?} {end:?}");
        }
    }

    #[test]
    fn group_lag_lists_every_partition_once_in_order() {
        let tp = |t: &str, p| TopicPartition::new(t, p);
        let committed = BTreeMap::from([(tp("a", 1), 4), (tp("b", 0), 9)]);
        let end = BTreeMap::from([(tp("a", 0), 5), (tp("a", 1), 6), (tp("b", 0), 9)]);
        let got = group_lag(
            &[tp("b", 0), tp("a", 1), tp("a", 0), tp("a", 1)],
            &committed,
            &end,
        );
        type Row = (String, i32, Option<i64>, Option<i64>, Option<i64>);
        let rows: Vec<Row> = got
            .into_iter()
            .map(|l| {
                (
                    l.partition.topic,
                    l.partition.partition,
                    l.committed,
                    l.end,
                    l.lag,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("a".into(), 0, None, Some(5), None),
                ("a".into(), 1, Some(4), Some(6), Some(2)),
                ("b".into(), 0, Some(9), Some(9), Some(0)),
            ]
        );
    }

    #[test]
    fn reset_targets_land_inside_the_log() {
        use ResetTarget::*;
        // (target, earliest, latest, by timestamp, offset)
        let table = [
            (Earliest, 3, 10, None, 3),
            (Latest, 3, 10, None, 10),
            (Offset(5), 3, 10, None, 5),
            (Offset(0), 3, 10, None, 3),
            (Offset(99), 3, 10, None, 10),
            (Offset(4), 0, 0, None, 0),
            (Timestamp(1_000), 3, 10, Some(7), 7),
            (Timestamp(9_999), 3, 10, Some(-1), 10),
            (Timestamp(9_999), 3, 10, None, 10),
        ];
        for (target, earliest, latest, ts, want) in table {
            assert_eq!(
                reset_offset(target, earliest, latest, ts),
                want,
                "{target:?} in {earliest}..{latest} ({ts:?})"
            );
        }
    }

    #[test]
    fn only_an_inactive_group_may_be_reset() {
        // (state, members, allowed)
        let table = [
            ("Empty", 0, true),
            ("Dead", 0, true),
            ("", 0, true),
            ("Stable", 1, false),
            ("Stable", 0, false),
            ("PreparingRebalance", 2, false),
            ("Reconciling", 1, false),
            ("Empty", 1, false),
        ];
        for (state, members, allowed) in table {
            assert_eq!(
                may_reset(state, members).is_ok(),
                allowed,
                "{state} {members}"
            );
        }
        assert_eq!(
            may_reset("Stable", 2).unwrap_err(),
            "the group can only be reset while it is inactive; it is Stable with 2 members"
        );
    }

    #[test]
    fn classic_groups_and_old_brokers_are_described_with_describe_groups() {
        let table = [
            (codes::NONE, false),
            (codes::GROUP_ID_NOT_FOUND, true),
            (codes::UNSUPPORTED_VERSION, true),
            (codes::GROUP_AUTHORIZATION_FAILED, false),
        ];
        for (code, classic) in table {
            assert_eq!(describe_as_classic(code), classic, "{code}");
        }
    }
}

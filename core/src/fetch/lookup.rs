//! Position lookups: where a partition without a position starts fetching. The group's
//! committed offset where it has one (with `enable.parallel.rebalance`, a takeover with a backlog
//! gets a recovery stream, KIP-333), else `auto.offset.reset`.
use std::collections::HashMap;
use std::sync::Arc;

use super::Shared;
use crate::backoff::Deadline;
use crate::config::{AutoOffsetReset, ConsumerConfig};
use crate::error::{Error, Result};
use crate::offsets::{
    fetch_committed_with_epochs, list_offsets_with, OffsetAndMetadata, EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
};
use crate::recovery::RecoveryState;
use crate::types::TopicPartition;

/// How a partition without a position gets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PositionLookup {
    /// The group's committed offset, else `auto.offset.reset`.
    Committed,
    /// `auto.offset.reset` alone (no group, or the offset was out of range).
    ResetPolicy,
    Earliest,
    Latest,
}

pub(crate) enum LookupOutcome {
    /// The offset, and its leader epoch where known (a committed offset's, KIP-320), else -1.
    Position(i64, i32),
    /// KIP-333: a takeover with a backlog (or a recovery token to resume): the main stream
    /// starts at `main_next`, a recovery stream drains the ranges.
    Recover(RecoveryState),
    NoOffset,
    Failed(Error),
}

/// The policy lookup `auto.offset.reset` asks for, or `None` for `none`.
pub(crate) fn reset_policy(config: &ConsumerConfig) -> Option<PositionLookup> {
    match config.auto_offset_reset {
        AutoOffsetReset::Earliest => Some(PositionLookup::Earliest),
        AutoOffsetReset::Latest => Some(PositionLookup::Latest),
        AutoOffsetReset::None => None,
    }
}

/// Gives each partition a position: the committed offset where the group has one, else the
/// reset policy.
pub(super) async fn lookup_positions(
    shared: &Arc<Shared>,
    wanted: &[(TopicPartition, PositionLookup, u64)],
) -> Result<Vec<(TopicPartition, LookupOutcome)>> {
    let config = &shared.config;
    let deadline = Deadline::after(config.common.default_api_timeout);
    let mut out = Vec::new();
    let mut by_policy: Vec<(TopicPartition, PositionLookup)> = Vec::new();
    let committed_wanted: Vec<TopicPartition> = wanted
        .iter()
        .filter(|(_, l, _)| *l == PositionLookup::Committed)
        .map(|(tp, _, _)| tp.clone())
        .collect();
    let committed = match (&config.group_id, committed_wanted.is_empty()) {
        (Some(group), false) => {
            fetch_committed_with_epochs(&shared.cluster, group, &committed_wanted, deadline).await?
        }
        _ => HashMap::new(),
    };
    // KIP-333: committed partitions whose backlog may get a recovery stream need the log end.
    let mut takeovers: Vec<(TopicPartition, OffsetAndMetadata)> = Vec::new();
    for (tp, lookup, _) in wanted {
        match lookup {
            PositionLookup::Committed => match committed.get(tp) {
                Some(Some((c, _))) if c.offset >= 0 && config.enable_parallel_rebalance => {
                    takeovers.push((tp.clone(), c.clone()))
                }
                Some(Some((c, epoch))) if c.offset >= 0 => {
                    out.push((tp.clone(), LookupOutcome::Position(c.offset, *epoch)))
                }
                _ => by_policy.push((tp.clone(), PositionLookup::ResetPolicy)),
            },
            other => by_policy.push((tp.clone(), *other)),
        }
    }
    if !takeovers.is_empty() {
        let ends: Vec<(TopicPartition, i64)> = takeovers
            .iter()
            .map(|(tp, _)| (tp.clone(), LATEST_TIMESTAMP))
            .collect();
        let mut ends: HashMap<TopicPartition, Result<(i64, i64)>> =
            list_offsets_with(&shared.cluster, &ends, deadline, false)
                .await?
                .into_iter()
                .collect();
        for (tp, c) in takeovers {
            let outcome = match ends.remove(&tp) {
                Some(Ok((log_end, _))) => {
                    let state = RecoveryState::on_assignment(
                        c.offset,
                        Some(&c.metadata),
                        log_end,
                        config.parallel_rebalance_min_lag,
                    );
                    if state.is_active() {
                        LookupOutcome::Recover(state)
                    } else {
                        LookupOutcome::Position(state.main_next, -1)
                    }
                }
                Some(Err(e)) => LookupOutcome::Failed(e),
                None => LookupOutcome::Failed(Error::Transport(format!(
                    "no log end offset for {tp} in the ListOffsets answer"
                ))),
            };
            out.push((tp, outcome));
        }
    }
    let mut requests: Vec<(TopicPartition, i64)> = Vec::new();
    for (tp, lookup) in by_policy {
        let lookup = if lookup == PositionLookup::ResetPolicy {
            match reset_policy(config) {
                Some(l) => l,
                None => {
                    out.push((tp, LookupOutcome::NoOffset));
                    continue;
                }
            }
        } else {
            lookup
        };
        let ts = if lookup == PositionLookup::Earliest {
            EARLIEST_TIMESTAMP
        } else {
            LATEST_TIMESTAMP
        };
        requests.push((tp, ts));
    }
    if !requests.is_empty() {
        // One attempt: a partition whose leader is unknown or answers a retriable error fails
        // alone and is retried by the fetch loop after its own backoff, rather than holding up
        // the positions of every other partition in this request until the deadline (KIP-572).
        for (tp, r) in list_offsets_with(&shared.cluster, &requests, deadline, false).await? {
            out.push((
                tp,
                match r {
                    Ok((offset, _)) => LookupOutcome::Position(offset, -1),
                    Err(e) => LookupOutcome::Failed(e),
                },
            ));
        }
    }
    Ok(out)
}

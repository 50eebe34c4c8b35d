//! Position lookups: where a partition without a position starts fetching. The group's
//! committed offset where it has one (with `enable.parallel.rebalance`, a takeover with a backlog
//! gets a recovery stream, KIP-333), else `auto.offset.reset`. And KIP-320's validations of
//! positions after a leader change (the decisions are in [`super::validate`]).
use std::collections::HashMap;
use std::sync::Arc;

use super::apply::EpochEndOffset;
use super::state::PositionLookup;
use super::validate::{apply_validation, ValidationAnswer, ValidationAsked};
use super::Shared;
use crate::backoff::Deadline;
use crate::config::{AutoOffsetReset, ConsumerConfig};
use crate::error::{codes, Error, Result};
use crate::offsets::{
    fetch_committed_with_epochs, list_offsets_with, ListedOffset, OffsetAndMetadata,
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
};
use crate::protocol::leader_epoch::{self, EpochOf};
use crate::protocol::msg::OffsetForLeaderEpochRequest;
use crate::recovery::RecoveryState;
use crate::types::TopicPartition;

pub(crate) enum LookupOutcome {
    /// The offset; the leader epoch of the record before it where known (a committed offset's,
    /// a ListOffsets answer's, KIP-320), else -1; the leader epoch it is known right under (the
    /// ListOffsets answer's leader), else -1 (validated once the metadata names one).
    Position {
        offset: i64,
        epoch: i32,
        leader_epoch: i32,
    },
    /// KIP-333: a takeover with a backlog (or a recovery token to resume): the main stream
    /// starts at `main_next` (in `main_epoch`, known right under `leader_epoch`, as for
    /// `Position`), a recovery stream drains the ranges, its first fetch in `recovery_epoch`
    /// (the committed offset's epoch when it starts there, else -1).
    Recover {
        state: RecoveryState,
        main_epoch: i32,
        leader_epoch: i32,
        recovery_epoch: i32,
    },
    NoOffset,
    Failed(Error),
}

/// Each partition's outcome, and the group's committed offsets the lookups fetched (those the
/// group has).
pub(crate) type LookedUp = (
    Vec<(TopicPartition, LookupOutcome)>,
    Vec<(TopicPartition, i64)>,
);

/// The policy lookup `auto.offset.reset` asks for, or `None` for `none`.
pub(crate) fn reset_policy(config: &ConsumerConfig) -> Option<PositionLookup> {
    match config.auto_offset_reset {
        AutoOffsetReset::Earliest => Some(PositionLookup::Earliest),
        AutoOffsetReset::Latest => Some(PositionLookup::Latest),
        AutoOffsetReset::None => None,
    }
}

/// Gives each partition a position: the committed offset where the group has one, else the
/// reset policy. Also returns the group's committed offsets it fetched (those the group has),
/// for the metrics.
pub(super) async fn lookup_positions(
    shared: &Arc<Shared>,
    wanted: &[(TopicPartition, PositionLookup, u64)],
) -> Result<LookedUp> {
    let config = &shared.config;
    let deadline = Deadline::after(config.common.default_api_timeout);
    let mut out = Vec::new();
    let mut by_policy: Vec<(TopicPartition, PositionLookup)> = Vec::new();
    let committed_wanted: Vec<TopicPartition> = wanted
        .iter()
        .filter(|(_, l, _)| *l == PositionLookup::Committed)
        .map(|(tp, _, _)| tp.clone())
        .collect();
    // KIP-333: a takeover's log end E is asked beside its committed offset, not after it. Both
    // answers describe the partition once this member owns it (the previous owner committed
    // before the partition moved, and the log end only grows), so the order of the two reads
    // does not matter; asking both at once puts E one round trip nearer the assignment, so fewer
    // records produced after the takeover fall below E into the backlog, and the first record
    // above E is fetched one round trip sooner.
    let takeover_ends: Vec<(TopicPartition, i64)> = if config.enable_parallel_rebalance {
        committed_wanted
            .iter()
            .map(|tp| (tp.clone(), LATEST_TIMESTAMP))
            .collect()
    } else {
        Vec::new()
    };
    let committed = async {
        match (&config.group_id, committed_wanted.is_empty()) {
            (Some(group), false) => {
                fetch_committed_with_epochs(&shared.cluster, group, &committed_wanted, deadline)
                    .await
            }
            _ => Ok(HashMap::new()),
        }
    };
    let log_ends = async {
        if takeover_ends.is_empty() {
            return Ok(Vec::new());
        }
        list_offsets_with(
            &shared.cluster,
            &takeover_ends,
            config.isolation_level,
            deadline,
            false,
        )
        .await
    };
    let (committed, log_ends) = tokio::join!(committed, log_ends);
    let committed = committed?;
    let committed_offsets: Vec<(TopicPartition, i64)> = committed
        .iter()
        .filter_map(|(tp, c)| match c {
            Some((c, _)) if c.offset >= 0 => Some((tp.clone(), c.offset)),
            _ => None,
        })
        .collect();
    // KIP-333: committed partitions whose backlog may get a recovery stream need the log end.
    let mut takeovers: Vec<(TopicPartition, OffsetAndMetadata, i32)> = Vec::new();
    for (tp, lookup, _) in wanted {
        match lookup {
            PositionLookup::Committed => match committed.get(tp) {
                Some(Some((c, epoch))) if c.offset >= 0 && config.enable_parallel_rebalance => {
                    takeovers.push((tp.clone(), c.clone(), *epoch))
                }
                Some(Some((c, epoch))) if c.offset >= 0 => out.push((
                    tp.clone(),
                    LookupOutcome::Position {
                        offset: c.offset,
                        epoch: *epoch,
                        leader_epoch: -1,
                    },
                )),
                _ => by_policy.push((tp.clone(), PositionLookup::ResetPolicy)),
            },
            other => by_policy.push((tp.clone(), *other)),
        }
    }
    if !takeovers.is_empty() {
        let mut ends: HashMap<TopicPartition, Result<ListedOffset>> =
            log_ends?.into_iter().collect();
        for (tp, c, committed_epoch) in takeovers {
            let outcome = match ends.remove(&tp) {
                Some(Ok(end)) => {
                    let state = RecoveryState::on_assignment(
                        c.offset,
                        Some(&c.metadata),
                        end.offset,
                        config.parallel_rebalance_min_lag,
                    );
                    // KIP-320: a stream starting at the committed offset has its epoch; one
                    // starting at the log end has the ListOffsets answer's; one starting where
                    // a token says has none.
                    let epoch_at = |offset: i64| {
                        if offset == c.offset {
                            (committed_epoch, -1)
                        } else if offset == end.offset {
                            (end.leader_epoch, end.current_leader_epoch)
                        } else {
                            (-1, -1)
                        }
                    };
                    let (main_epoch, leader_epoch) = epoch_at(state.main_next);
                    if state.is_active() {
                        let recovery_epoch = state
                            .next_fetches()
                            .recovery
                            .filter(|(next, _)| *next == c.offset)
                            .map_or(-1, |_| committed_epoch);
                        LookupOutcome::Recover {
                            state,
                            main_epoch,
                            leader_epoch,
                            recovery_epoch,
                        }
                    } else {
                        LookupOutcome::Position {
                            offset: state.main_next,
                            epoch: main_epoch,
                            leader_epoch,
                        }
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
        for (tp, r) in list_offsets_with(
            &shared.cluster,
            &requests,
            config.isolation_level,
            deadline,
            false,
        )
        .await?
        {
            out.push((
                tp,
                match r {
                    // KIP-320: the answer's epoch (v4+) lets the first fetch, or a validation
                    // after a leader change before it, check the position at once.
                    Ok(listed) => LookupOutcome::Position {
                        offset: listed.offset,
                        epoch: listed.leader_epoch,
                        leader_epoch: listed.current_leader_epoch,
                    },
                    Err(e) => LookupOutcome::Failed(e),
                },
            ));
        }
    }
    Ok((out, committed_offsets))
}

/// KIP-320: sends the validations `wanted` with OffsetForLeaderEpoch, one request per leader,
/// the leaders side by side. A leader that speaks no version a consumer may use (v3+) answers
/// [`ValidationAnswer::Unsupported`] for all of its partitions without a request.
pub(super) async fn validate_positions(
    shared: &Arc<Shared>,
    wanted: Vec<(TopicPartition, ValidationAsked)>,
) -> Vec<(TopicPartition, ValidationAsked, ValidationAnswer)> {
    let mut by_leader: HashMap<i32, Vec<(TopicPartition, ValidationAsked)>> = HashMap::new();
    for (tp, asked) in wanted {
        by_leader.entry(asked.leader).or_default().push((tp, asked));
    }
    let mut requests = tokio::task::JoinSet::new();
    // Each request's partitions, so that a request that fails to finish answers them too.
    let mut sent: HashMap<tokio::task::Id, Vec<(TopicPartition, ValidationAsked)>> = HashMap::new();
    for (leader, parts) in by_leader {
        let shared = shared.clone();
        let kept = parts.clone();
        let handle = requests.spawn(async move {
            let answers = ask_leader(&shared, leader, &parts).await;
            parts
                .into_iter()
                .map(|(tp, asked)| {
                    let answer = match &answers {
                        Ok(a) => a.get(&tp).cloned().unwrap_or_else(|| {
                            ValidationAnswer::Failed(Error::Transport(format!(
                                "broker {leader} left {tp} out of its OffsetForLeaderEpoch answer"
                            )))
                        }),
                        Err(e) => ValidationAnswer::Failed(e.clone()),
                    };
                    (tp, asked, answer)
                })
                .collect::<Vec<_>>()
        });
        sent.insert(handle.id(), kept);
    }
    let mut out = Vec::new();
    while let Some(done) = requests.join_next().await {
        match done {
            Ok(answers) => out.extend(answers),
            Err(e) => {
                let why = Error::IllegalState(format!("validating positions failed: {e}"));
                out.extend(
                    sent.remove(&e.id())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(tp, asked)| (tp, asked, ValidationAnswer::Failed(why.clone()))),
                );
            }
        }
    }
    out
}

/// One OffsetForLeaderEpoch request to `leader` for `parts`.
async fn ask_leader(
    shared: &Shared,
    leader: i32,
    parts: &[(TopicPartition, ValidationAsked)],
) -> Result<HashMap<TopicPartition, ValidationAnswer>> {
    let deadline = Deadline::after(shared.config.common.request_timeout);
    let conn = shared.cluster.broker(leader, deadline).await?;
    if !leader_epoch::usable(conn.version::<OffsetForLeaderEpochRequest>().ok()) {
        return Ok(parts
            .iter()
            .map(|(tp, _)| (tp.clone(), ValidationAnswer::Unsupported))
            .collect());
    }
    let req = leader_epoch::offset_for_leader_epoch(parts.iter().map(|(tp, asked)| EpochOf {
        partition: tp,
        current_leader_epoch: asked.current_leader_epoch,
        leader_epoch: asked.epoch,
    }));
    // The connection's wait and the answer's share one request.timeout.ms, as a ListOffsets
    // lookup's do.
    let resp = conn.call_before(&req, deadline).await?;
    let mut out = HashMap::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition {
                topic: t.topic.0.to_string(),
                partition: p.partition,
            };
            let answer = if p.error_code == codes::NONE {
                ValidationAnswer::End(EpochEndOffset {
                    epoch: p.leader_epoch,
                    end_offset: p.end_offset,
                })
            } else {
                ValidationAnswer::Error(p.error_code)
            };
            out.insert(tp, answer);
        }
    }
    Ok(out)
}

/// Applies validation answers under the lock ([`apply_validation`]). Returns whether metadata
/// should be refreshed.
pub(super) fn handle_validation(
    shared: &Shared,
    done: Vec<(TopicPartition, ValidationAsked, ValidationAnswer)>,
) -> bool {
    let reset_allowed = reset_policy(&shared.config).is_some();
    let mut st = shared.lock();
    let mut refresh = false;
    let mut errors = Vec::new();
    let mut freed = 0;
    for (tp, asked, answer) in done {
        let Some(p) = st.partitions.get_mut(&tp) else {
            continue;
        };
        let applied = apply_validation(p, &tp, &asked, answer, reset_allowed);
        freed += applied.freed;
        refresh |= applied.refresh;
        errors.extend(applied.error);
    }
    st.release(freed);
    for e in errors {
        if !matches!(st.errors.back(), Some(last) if *last == e) {
            shared.push_error(&mut st, e);
        }
    }
    // Records held back while the positions were validated may be handed out now.
    shared.data_ready.notify_all();
    refresh
}

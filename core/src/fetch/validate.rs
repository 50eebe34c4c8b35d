//! KIP-320's position validation, the pure part (the Java client's `AWAIT_VALIDATION` state and
//! `SubscriptionState.maybeCompleteValidation`). A position is known right under one leader
//! epoch ([`PartitionState::leader_epoch`]). When the metadata names a newer one (a leader
//! change, perhaps an unclean election that truncated the log) and the position has an epoch to
//! check (the record before it was fetched, or the offset came from a commit or a ListOffsets
//! answer with one), the partition stops fetching and handing out records, and the new leader is
//! asked with OffsetForLeaderEpoch where its log of that epoch ends. A log that no longer holds
//! everything fetched is a divergence, carried out by the same [`diverged`] as a Fetch's
//! diverging epoch: a reset to the divergence point, or `Error::LogTruncation` under
//! `auto.offset.reset=none`. The request is sent by [`super::lookup::validate_positions`].
use std::time::Instant;

use super::apply::{diverged, Applied, EpochEndOffset};
use super::state::{PartitionState, Validation};
use crate::error::{codes, Error};
use crate::types::TopicPartition;

/// What a position needs once the metadata names a partition's leader epoch ([`on_leader_epoch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaderChange {
    /// No leader epoch newer than the one the position is known right under.
    Unchanged,
    /// A newer leader, and no epoch to check the position with (a seek, or nothing fetched yet):
    /// the position is taken as right under it, as the Java client takes it.
    Adopt(i32),
    /// Validate the position against the leader of this epoch before fetching again.
    Validate(i32),
}

/// KIP-320's trigger: the metadata names leader epoch `metadata_epoch` (-1: it names none) for a
/// partition whose position is known right under `known_under`, the record before it fetched in
/// leader epoch `fetch_epoch` (-1: unknown).
pub(crate) fn on_leader_epoch(
    fetch_epoch: i32,
    known_under: i32,
    metadata_epoch: i32,
) -> LeaderChange {
    if metadata_epoch < 0 || metadata_epoch <= known_under {
        LeaderChange::Unchanged
    } else if fetch_epoch < 0 {
        LeaderChange::Adopt(metadata_epoch)
    } else {
        LeaderChange::Validate(metadata_epoch)
    }
}

/// Whether the leader's log still holds everything fetched below `offset`, the last of it in
/// leader epoch `epoch`, given where its log of the last epoch it has at or below `epoch` ends
/// (`end`). An end below `offset` is a truncation; an earlier epoch than asked means the leader
/// never had `epoch`, so what was read in it is not what its log holds there (the rule the
/// broker applies to a Fetch's `last_fetched_epoch`); an undefined answer (-1) says the leader
/// knows no epoch that old. Each of those goes to [`super::apply::on_divergence`].
pub(crate) fn holds(offset: i64, epoch: i32, end: EpochEndOffset) -> bool {
    end.epoch >= epoch && end.end_offset >= offset
}

/// What a partition's error code in an OffsetForLeaderEpoch answer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnError {
    /// Retry after the partition's backoff, with the metadata refreshed first.
    Retry,
    /// The same, and the error goes out through `poll()` as well.
    ReportAndRetry,
}

/// The Java client's `OffsetsForLeaderEpochUtils` table: every error is retried after a backoff
/// with fresh metadata (FENCED_LEADER_EPOCH: the metadata is behind the broker;
/// UNKNOWN_LEADER_EPOCH: the broker is behind the metadata; NOT_LEADER_OR_FOLLOWER and the like:
/// the leader moved), and only a missing authorization is also reported, as Java raises
/// `TopicAuthorizationException` from `poll()` and keeps the partition waiting. A partition that
/// keeps failing is reported after `task.timeout.ms` (KIP-572) like any other.
pub(crate) fn on_error(code: i16) -> OnError {
    match code {
        codes::TOPIC_AUTHORIZATION_FAILED => OnError::ReportAndRetry,
        _ => OnError::Retry,
    }
}

/// A validation sent for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValidationAsked {
    /// The broker it goes to: the leader the metadata names.
    pub leader: i32,
    /// That leader's epoch, sent as `current_leader_epoch`.
    pub current_leader_epoch: i32,
    /// The main stream's fetch offset, and the leader epoch of the last batch fetched below it.
    pub offset: i64,
    pub epoch: i32,
    /// The partition's cursor: a seek or reset since makes the answer stale.
    pub cursor: u64,
}

/// The answer for one partition of an OffsetForLeaderEpoch request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ValidationAnswer {
    /// Where the leader's log of the epoch asked (or of the last before it that it has) ends.
    End(EpochEndOffset),
    /// The partition's error code.
    Error(i16),
    /// The leader speaks no OffsetForLeaderEpoch version a consumer may use (before Kafka 2.3).
    Unsupported,
    /// The request failed as a whole (no connection, no answer in time).
    Failed(Error),
}

/// What the fetch loop does about a partition's validation ([`plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Planned {
    /// Nothing to send now.
    Nothing,
    /// Send this validation.
    Send(ValidationAsked),
    /// The position waits for validation and the metadata names no leader: refresh it. (The
    /// partition sends no fetch meanwhile, whose failure would otherwise ask for it.)
    NeedsLeader,
}

/// Looks at a partition's position against the metadata's leader (`leader`, of epoch
/// `metadata_epoch`; -1 for none) and carries out [`on_leader_epoch`]; says what to send now: a
/// validation once one is due (none in flight, the main stream's backoff over, a leader known).
/// A partition whose position is still being looked up, or that has none, has nothing to
/// validate.
pub(crate) fn plan(
    p: &mut PartitionState,
    leader: i32,
    metadata_epoch: i32,
    now: Instant,
) -> Planned {
    if p.lookup.is_some() {
        return Planned::Nothing;
    }
    let Some(offset) = p.main.fetch_offset else {
        return Planned::Nothing;
    };
    match on_leader_epoch(p.main.fetch_epoch, p.leader_epoch, metadata_epoch) {
        LeaderChange::Unchanged => {}
        LeaderChange::Adopt(epoch) => p.leader_epoch = epoch,
        LeaderChange::Validate(epoch) => match p.validation.as_mut() {
            Some(v) if !v.in_flight => v.leader_epoch = v.leader_epoch.max(epoch),
            Some(_) => {} // the answer comes under the older epoch; a newer one is asked after
            None => {
                // Fetches in flight were sent to the old leader: their answers are dropped.
                p.cursor += 1;
                p.validation = Some(Validation {
                    leader_epoch: epoch,
                    in_flight: false,
                });
            }
        },
    }
    let Some(v) = p.validation.as_mut() else {
        return Planned::Nothing;
    };
    if v.in_flight || now < p.main.next_attempt {
        return Planned::Nothing;
    }
    if leader < 0 {
        return Planned::NeedsLeader;
    }
    v.in_flight = true;
    Planned::Send(ValidationAsked {
        leader,
        current_leader_epoch: v.leader_epoch,
        offset,
        epoch: p.main.fetch_epoch,
        cursor: p.cursor,
    })
}

/// Whether a validation is waiting for its answer: the main stream's KIP-572 clock counts it as
/// a request in flight.
pub(crate) fn in_flight(p: &PartitionState) -> bool {
    p.validation.is_some_and(|v| v.in_flight)
}

/// Applies the answer to validation `asked` of `tp`. `reset_allowed`: `auto.offset.reset` is not
/// `none`. An answer for a cursor that moved meanwhile (a seek or reset) changes nothing.
pub(crate) fn apply_validation(
    p: &mut PartitionState,
    tp: &TopicPartition,
    asked: &ValidationAsked,
    answer: ValidationAnswer,
    reset_allowed: bool,
) -> Applied {
    let mut out = Applied::default();
    if p.cursor != asked.cursor || p.validation.is_none() {
        return out;
    }
    let (topic, partition) = (&tp.topic, tp.partition);
    match answer {
        ValidationAnswer::End(end) => {
            p.validation = None;
            p.leader_epoch = asked.current_leader_epoch;
            p.main.progressed();
            if holds(asked.offset, asked.epoch, end) {
                tracing::debug!(%topic, partition, offset = asked.offset, epoch = asked.epoch, leader_epoch = asked.current_leader_epoch, "position validated against the new leader");
            } else {
                tracing::info!(%topic, partition, offset = asked.offset, epoch = asked.epoch, end_epoch = end.epoch, end_offset = end.end_offset, "validation: the new leader's log does not hold what was fetched");
                diverged(p, tp, end, reset_allowed, &mut out);
            }
        }
        ValidationAnswer::Unsupported => {
            tracing::debug!(%topic, partition, leader = asked.leader, "the leader cannot validate positions (OffsetForLeaderEpoch before v3): fetching without validation");
            p.validation = None;
            p.leader_epoch = asked.current_leader_epoch;
        }
        ValidationAnswer::Error(code) => {
            let e = Error::kafka_partition(code, "validating the position", topic, partition);
            if let Some(v) = p.validation.as_mut() {
                v.in_flight = false;
            }
            p.main.failed(e.to_string(), true);
            out.refresh = true;
            if on_error(code) == OnError::ReportAndRetry {
                out.error = Some(e);
            }
        }
        ValidationAnswer::Failed(e) => {
            if let Some(v) = p.validation.as_mut() {
                v.in_flight = false;
            }
            p.main.failed(format!("validating the position: {e}"), true);
            out.refresh = e.is_retriable();
            if e.is_fatal() {
                out.error = Some(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::fetch::apply::tests::{
        batch_in, decoded, main_asked, ok, read_to_120, recovering, tp,
    };
    use crate::fetch::apply::{apply, select_all, Asked};
    use crate::fetch::state::PositionLookup;
    use crate::fetch::state::StreamKind;
    use std::time::Duration;

    fn end(epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    /// The leader answers validation `asked` of `tp()`: its log of the epoch asked ends at `e`.
    fn answered(
        p: &mut PartitionState,
        asked: &ValidationAsked,
        e: EpochEndOffset,
        reset_allowed: bool,
    ) -> Applied {
        apply_validation(p, &tp(), asked, ValidationAnswer::End(e), reset_allowed)
    }

    #[test]
    fn a_newer_leader_epoch_validates_a_position_with_an_epoch_and_adopts_one_without() {
        use LeaderChange::*;
        // (epoch of the record before the position, known right under, metadata's epoch)
        let cases = [
            (3, 5, 5, Unchanged),
            (3, 5, 4, Unchanged),  // stale metadata
            (3, 5, -1, Unchanged), // metadata without epochs
            (3, 5, 6, Validate(6)),
            (3, -1, 5, Validate(5)), // a committed offset's epoch, nothing checked yet
            (-1, 5, 6, Adopt(6)),    // after a seek: nothing to check
            (-1, -1, 0, Adopt(0)),
            (-1, -1, -1, Unchanged),
        ];
        for (fetch_epoch, known_under, metadata_epoch, want) in cases {
            assert_eq!(
                on_leader_epoch(fetch_epoch, known_under, metadata_epoch),
                want,
                "{fetch_epoch} under {known_under}, metadata {metadata_epoch}"
            );
        }
    }

    #[test]
    fn the_log_holds_the_position_only_up_to_its_epochs_end() {
        // (fetch offset, its epoch, the leader's answer, holds)
        let cases = [
            (125, 3, end(3, 125), true), // the log end of the current epoch
            (125, 3, end(3, 200), true),
            (125, 3, end(5, 200), true), // not asked for, but not a divergence either
            (125, 3, end(3, 124), false), // truncated below the fetch offset
            (125, 3, end(2, 100), false), // the leader never had epoch 3
            (125, 3, end(2, 300), false), // ... even where its older epoch runs past
            (125, 3, end(-1, -1), false), // it knows no epoch that old
        ];
        for (offset, epoch, e, want) in cases {
            assert_eq!(holds(offset, epoch, e), want, "{offset} in {epoch}, {e:?}");
        }
    }

    #[test]
    fn errors_retry_with_fresh_metadata_and_a_missing_authorization_is_reported() {
        let cases = [
            (codes::FENCED_LEADER_EPOCH, OnError::Retry),
            (codes::UNKNOWN_LEADER_EPOCH, OnError::Retry),
            (codes::NOT_LEADER_OR_FOLLOWER, OnError::Retry),
            (codes::LEADER_NOT_AVAILABLE, OnError::Retry),
            (codes::UNKNOWN_TOPIC_OR_PARTITION, OnError::Retry),
            (56, OnError::Retry), // KAFKA_STORAGE_ERROR
            (-1, OnError::Retry), // UNKNOWN_SERVER_ERROR
            (codes::TOPIC_AUTHORIZATION_FAILED, OnError::ReportAndRetry),
        ];
        for (code, want) in cases {
            assert_eq!(on_error(code), want, "{code}");
        }
    }

    /// `read_to_120()` (delivered to 120 in epoch 3, 120..=124 buffered, a fetch of 125 in
    /// flight), known right under leader epoch 4, whose metadata now names epoch 5 on broker 2.
    fn after_a_leader_change() -> (PartitionState, ValidationAsked) {
        let mut p = read_to_120();
        p.leader_epoch = 4;
        let cursor = p.cursor;
        let now = Instant::now();
        let Planned::Send(asked) = plan(&mut p, 2, 5, now) else {
            panic!("a validation is due")
        };
        assert_eq!(
            asked,
            ValidationAsked {
                leader: 2,
                current_leader_epoch: 5,
                offset: 125,
                epoch: 3,
                cursor: cursor + 1,
            }
        );
        // Nothing is fetched or handed out meanwhile, and the fetch in flight is stale.
        assert!(p.fetchable(now, 1 << 20).is_empty());
        assert!(!p.delivers());
        assert!(in_flight(&p));
        assert_eq!(plan(&mut p, 2, 5, now), Planned::Nothing, "one at a time");
        (p, asked)
    }

    #[test]
    fn a_fetch_answer_from_the_old_leader_is_dropped_while_the_position_is_validated() {
        let (mut p, _) = after_a_leader_change();
        let held = p.main.buffered_bytes;
        let asked = Asked {
            last_fetched_epoch: 3,
            cursor: p.cursor - 1,
            ..main_asked(125)
        };
        let s = select_all(decoded(vec![batch_in(3, &[125, 126], 126)], false), &asked);
        let a = apply(
            &mut p,
            &tp(),
            StreamKind::Main,
            1,
            &asked,
            ok(s),
            Instant::now(),
            Duration::from_secs(300),
            true,
        );
        assert_eq!(a, Applied::default());
        assert_eq!(p.main.fetch_offset, Some(125));
        assert_eq!(p.main.buffered_bytes, held);
        assert!(!p.main.in_flight);
    }

    #[test]
    fn a_position_the_new_leader_holds_keeps_its_buffer_and_flows_again() {
        let (mut p, asked) = after_a_leader_change();
        let held = p.main.buffered_bytes;
        let a = answered(&mut p, &asked, end(3, 125), false);
        assert_eq!(a, Applied::default());
        assert_eq!((p.validation, p.leader_epoch), (None, 5));
        assert!(p.delivers());
        assert_eq!(p.main.buffered_bytes, held);
        assert_eq!((p.position, p.main.fetch_offset), (Some(120), Some(125)));
        // The metadata's epoch is now the known one: nothing more to validate.
        assert_eq!(plan(&mut p, 2, 5, Instant::now()), Planned::Nothing);
        assert!(p.validation.is_none());
    }

    #[test]
    fn a_truncation_found_by_validation_resets_to_the_divergence_point() {
        let (mut p, asked) = after_a_leader_change();
        let held = p.main.buffered_bytes;
        let a = answered(&mut p, &asked, end(3, 110), true);
        assert_eq!(
            a,
            Applied {
                freed: held,
                ..Applied::default()
            }
        );
        assert_eq!((p.position, p.position_epoch), (Some(110), 3));
        assert_eq!((p.main.fetch_offset, p.main.fetch_epoch), (Some(110), 3));
        assert_eq!((p.validation, p.leader_epoch), (None, 5));
        assert!(p.delivers() && p.main.buffer.is_empty());
        // Once the fetch sent to the old leader is answered (and dropped), it fetches from there.
        p.main.in_flight = false;
        assert_eq!(
            p.fetchable(Instant::now(), 1 << 20),
            vec![(StreamKind::Main, 110)]
        );
    }

    #[test]
    fn a_truncation_found_by_validation_is_reported_under_none() {
        let (mut p, asked) = after_a_leader_change();
        let a = answered(&mut p, &asked, end(2, 100), false);
        match a.error {
            Some(Error::LogTruncation {
                position,
                divergent_offset,
                divergent_epoch,
                ..
            }) => assert_eq!((position, divergent_offset, divergent_epoch), (120, 100, 2)),
            other => panic!("{other:?}"),
        }
        assert!(a.freed > 0);
        assert_eq!((p.position, p.main.fetch_offset), (Some(120), None));
        assert!(p.fetchable(Instant::now(), 1 << 20).is_empty());
    }

    #[test]
    fn a_divergence_past_the_position_fetches_again_from_it() {
        let (mut p, asked) = after_a_leader_change();
        // Epoch 3 ends at 122 on the new leader: 120 and 121 are there, 122..=124 not.
        let a = answered(&mut p, &asked, end(3, 122), false);
        assert!(a.error.is_none() && a.freed > 0);
        assert_eq!((p.position, p.main.fetch_offset), (Some(120), Some(120)));
        // Undefined: the reset policy decides.
        let (mut p, asked) = after_a_leader_change();
        answered(&mut p, &asked, end(-1, -1), true);
        assert_eq!(
            (p.position, p.lookup),
            (None, Some(PositionLookup::ResetPolicy))
        );
    }

    #[test]
    fn a_fenced_or_unknown_leader_epoch_retries_after_a_backoff_with_fresh_metadata() {
        for code in [codes::FENCED_LEADER_EPOCH, codes::UNKNOWN_LEADER_EPOCH] {
            let (mut p, asked) = after_a_leader_change();
            let a = apply_validation(&mut p, &tp(), &asked, ValidationAnswer::Error(code), true);
            assert!(a.refresh && a.error.is_none(), "{code}: {a:?}");
            assert_eq!(
                p.validation,
                Some(Validation {
                    leader_epoch: 5,
                    in_flight: false
                })
            );
            assert!(p.main.failing && !p.delivers());
            let now = Instant::now();
            assert_eq!(plan(&mut p, 2, 5, now), Planned::Nothing, "backing off");
            // After the backoff: while the metadata names no leader, it asks for a refresh; then
            // it goes to the newer leader the refreshed metadata names.
            let due = p.main.next_attempt;
            assert_eq!(plan(&mut p, -1, 6, due), Planned::NeedsLeader);
            let Planned::Send(again) = plan(&mut p, 3, 7, due) else {
                panic!("due again")
            };
            assert_eq!((again.leader, again.current_leader_epoch), (3, 7));
            assert_eq!((again.offset, again.epoch), (125, 3));
        }
        let (mut p, asked) = after_a_leader_change();
        let a = apply_validation(
            &mut p,
            &tp(),
            &asked,
            ValidationAnswer::Error(codes::TOPIC_AUTHORIZATION_FAILED),
            true,
        );
        assert!(
            matches!(a.error, Some(Error::Kafka { code: 29, .. })),
            "{a:?}"
        );
    }

    #[test]
    fn a_leader_that_cannot_validate_is_fetched_from_without_validation() {
        let (mut p, asked) = after_a_leader_change();
        let a = apply_validation(&mut p, &tp(), &asked, ValidationAnswer::Unsupported, true);
        assert_eq!(a, Applied::default());
        assert_eq!((p.validation, p.leader_epoch), (None, 5));
        assert!(p.delivers());
        assert_eq!((p.position, p.main.fetch_offset), (Some(120), Some(125)));
    }

    #[test]
    fn an_answer_after_a_seek_changes_nothing() {
        let (mut p, asked) = after_a_leader_change();
        p.seek(50);
        let a = answered(&mut p, &asked, end(2, 10), false);
        assert_eq!(a, Applied::default());
        assert_eq!((p.position, p.main.fetch_offset), (Some(50), Some(50)));
        assert!(p.validation.is_none() && p.delivers());
        // The seek's position has no epoch: the new leader is adopted, nothing validated.
        assert_eq!(plan(&mut p, 2, 6, Instant::now()), Planned::Nothing);
        assert_eq!((p.leader_epoch, p.validation), (6, None));
    }

    #[test]
    fn a_committed_offsets_epoch_is_validated_before_the_first_fetch() {
        let mut p = PartitionState::new(
            "orders",
            PositionLookup::Committed,
            crate::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
        );
        let now = Instant::now();
        assert_eq!(plan(&mut p, 1, 7, now), Planned::Nothing, "no position yet");
        p.start_at(300, 6, -1);
        let Planned::Send(asked) = plan(&mut p, 1, 7, now) else {
            panic!("validated first")
        };
        assert_eq!(
            (asked.offset, asked.epoch, asked.current_leader_epoch),
            (300, 6, 7)
        );
        assert!(p.fetchable(now, 1 << 20).is_empty());
        // A ListOffsets answer's position is right under the leader that gave it.
        let mut q = PartitionState::new(
            "orders",
            PositionLookup::Latest,
            crate::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
        );
        q.start_at(300, 7, 7);
        let now = Instant::now();
        assert_eq!(plan(&mut q, 1, 7, now), Planned::Nothing);
        assert_eq!(q.fetchable(now, 1 << 20), vec![(StreamKind::Main, 300)]);
    }

    /// A truncation under a recovery range keeps what lies below the divergence point owed:
    /// those records are still in the log (the ranges used to be cancelled whole, and with them
    /// the backlog below the point).
    #[test]
    fn a_truncation_inside_a_recovery_range_keeps_the_backlog_below_it() {
        // Main stream at 140, ranges 70..120 and 130..140 (recovering() in apply.rs), main
        // epoch 3; the new leader's log of epoch 3 ends at 100.
        let mut p = recovering();
        p.position_epoch = 3;
        p.main.fetch_epoch = 3;
        p.leader_epoch = 4;
        let Planned::Send(asked) = plan(&mut p, 2, 5, Instant::now()) else {
            panic!("validated")
        };
        answered(&mut p, &asked, end(3, 100), true);
        assert_eq!((p.position, p.main.fetch_offset), (Some(100), Some(100)));
        let rc = p
            .recovery
            .as_ref()
            .expect("the backlog below 100 is still owed");
        assert_eq!(
            rc.ranges,
            vec![crate::recovery::RecoveryRange {
                start: 70,
                end: 100,
                next: 70
            }]
        );
        assert_eq!((rc.stream.fetch_offset, rc.fetch_end), (Some(70), 100));
        assert_eq!(p.commit_offset().unwrap().offset, 70);
        // Below every range: the backlog is read again by the main stream.
        let mut p = recovering();
        p.main.fetch_epoch = 3;
        let Planned::Send(asked) = plan(&mut p, 2, 5, Instant::now()) else {
            panic!("validated")
        };
        answered(&mut p, &asked, end(3, 60), true);
        assert!(p.recovery.is_none());
        assert_eq!(p.commit_offset().unwrap().offset, 60);
    }
}

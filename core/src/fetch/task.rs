//! The fetch task: the fetch path's only I/O. Under the lock it asks [`super::plan`] what to
//! send, then sends the Fetches (one per broker and stream kind) side by side, decodes each
//! answer where it arrives (on the runtime's workers, not under the lock `poll()` needs), then
//! applies it under the lock; it also runs the position lookups, the validations and the
//! metadata refreshes the fetches need.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::apply::{
    apply, fetch_failed, select, worth_decoding, Asked, EpochEndOffset, PartitionAnswer, Selected,
};
use super::lookup::{
    handle_validation, lookup_positions, reset_policy, validate_positions, LookedUp, LookupOutcome,
};
use super::plan::{plan_fetches, Fetch, Settings, Turn};
use super::session::{is_session_error, FetchSession};
use super::state::{Recovery, StreamKind};
use super::txn::TxnFilter;
use super::validate::{ValidationAnswer, ValidationAsked};
use super::wake::{metadata_due, next_due};
use super::Shared;
use crate::backoff::{Deadline, Retry};
use crate::cluster::Lane;
use crate::config::ConsumerConfig;
use crate::error::{codes, Error, ErrorPartition, Result};
use crate::protocol;
use crate::protocol::fetch::{FetchFrom, FetchLimits};
use crate::protocol::msg::fetch_response::EpochEndOffset as EpochEndOffsetField;
use crate::protocol::msg::{FetchRequest, FetchResponse};
use crate::protocol::records::{decode_batches_in_where, BatchPools, DecodedRecords, RecordSpans};
use crate::types::TopicPartition;

/// One Fetch request: to one broker, for one kind of stream. A Fetch names each partition once,
/// so a partition's main and recovery streams go in separate requests, which the pipelined
/// connection sends side by side.
struct FetchPlan {
    broker: i32,
    kind: StreamKind,
    partitions: Vec<(TopicPartition, Asked)>,
    request: FetchRequest,
    /// Bytes of the budget reserved for its answer until it is applied.
    reserved: usize,
}

/// A fetch's answer, its records decoded (and decompressed) and chosen per partition on the
/// fetch task, before the lock `poll()` needs is taken.
enum Answer {
    /// The broker answered with an error for the whole request.
    RequestError(i16),
    /// Each partition asked, with its answer (`None`: the broker left it out), and the bytes of
    /// the records fields and what they held once decoded ([`budget::Expansion::answered`]).
    Partitions {
        answers: Vec<(TopicPartition, Asked, Option<PartitionAnswer>)>,
        records_bytes: usize,
        decoded_bytes: usize,
    },
}

enum TaskDone {
    Fetch {
        plan_broker: i32,
        kind: StreamKind,
        partitions: Vec<(TopicPartition, Asked)>,
        reserved: usize,
        result: Result<Answer>,
        /// The fetch session with that broker, handed back for the next request.
        session: FetchSession,
    },
    Lookup(Vec<(TopicPartition, u64)>, Result<LookedUp>),
    Metadata(Result<()>),
    /// KIP-320: validations of positions after a leader change.
    Validation(Vec<(TopicPartition, ValidationAsked, ValidationAnswer)>),
}

/// The fetch task: runs until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tasks: JoinSet<TaskDone> = JoinSet::new();
    let mut busy_brokers: HashSet<(i32, StreamKind)> = HashSet::new();
    // One fetch session per broker and stream kind (KIP-227), taken by the one request in
    // flight there (`busy_brokers`) and handed back with its answer.
    let mut sessions: HashMap<(i32, StreamKind), FetchSession> = HashMap::new();
    // The id of each session a broker may hold, kept apart from `sessions` because a session
    // is in a request's task most of the time: what closing the consumer ends.
    let mut open_sessions: HashMap<(i32, StreamKind), i32> = HashMap::new();
    let mut metadata_in_flight = false;
    let mut lookup_in_flight = false;
    let mut metadata_wanted = true;
    let mut next_metadata = Instant::now();
    let mut metadata_retry = Retry::new(shared.backoff());
    // While a topic of interest is missing: look again after retry.backoff.ms, growing to
    // retry.backoff.max.ms, rather than only every metadata.max.age.ms.
    let mut missing_retry = Retry::new(shared.backoff());
    let settings = Settings::of(&shared.config);
    loop {
        let meta = shared.cluster.metadata();
        let (plans, lookups, validations, partitions_due) = {
            let mut st = shared.lock();
            if st.closed {
                break;
            }
            let st = &mut *st;
            st.plan_passes += 1;
            let turn_at = Instant::now();
            let turn = Turn {
                metadata: &meta,
                busy: &busy_brokers,
                lookup_in_flight,
                expansion: st.expansion.per_mille(),
                reserved: st.reserved,
                now: turn_at,
            };
            let held_before = shared.buffers.ledger.held();
            let planned = plan_fetches(
                &mut st.partitions,
                &mut st.reported_unknown,
                &turn,
                &settings,
                &shared.buffers,
            );
            for e in planned.errors {
                shared.push_error(st, e);
            }
            st.release(planned.freed);
            st.reserved += planned.reserved;
            metadata_wanted |= planned.metadata_wanted;
            if planned.waits_for_room {
                // Woken as soon as a buffer comes back (records taken and dropped). One that came
                // back while the turn was planned woke nobody: plan again at once.
                shared.buffers.ledger.want_room();
                if shared.buffers.ledger.held() < held_before {
                    shared.changed.notify_one();
                }
            }
            let due = next_due(&st.partitions, &settings, turn_at);
            let plans: Vec<FetchPlan> = planned
                .fetches
                .into_iter()
                .map(|f| build_fetch(&shared.config, f))
                .collect();
            (plans, planned.lookups, planned.validations, due)
        };

        for plan in plans {
            busy_brokers.insert((plan.broker, plan.kind));
            let shared2 = shared.clone();
            let reserved = plan.reserved;
            let mut session = sessions
                .remove(&(plan.broker, plan.kind))
                .unwrap_or_default();
            // Each Fetch is a `lagless.fetch` span: the broker, the stream kind, how many
            // partitions; the error if it failed.
            let span = tracing::debug_span!(
                "lagless.fetch",
                broker = plan.broker,
                stream = ?plan.kind,
                partitions = plan.partitions.len(),
                error = tracing::field::Empty,
            );
            let fetch_span = span.clone();
            tasks.spawn(
                async move {
                    let timeout =
                        shared2.config.common.request_timeout + shared2.config.fetch_max_wait;
                    let deadline = Deadline::after(timeout);
                    let mut request = plan.request;
                    let result = async {
                        let conn = shared2
                            .cluster
                            .broker_on(plan.broker, plan.kind.lane(), deadline)
                            .await?;
                        let version = conn.version::<FetchRequest>()?;
                        protocol::fetch::fit_to_version(&mut request, version);
                        session.prepare(&mut request, version);
                        conn.call_with_timeout(&request, timeout).await
                    }
                    .await;
                    match &result {
                        Ok(resp) => session.answered(resp.error_code, resp.session_id),
                        Err(e) => {
                            fetch_span.record("error", tracing::field::display(e));
                            session.failed();
                        }
                    }
                    let result = match result {
                        Ok(resp) => Ok(decode_answer(
                            resp,
                            &plan.partitions,
                            &shared2.config,
                            &shared2.buffers.batches,
                        )
                        .await),
                        Err(e) => Err(e),
                    };
                    TaskDone::Fetch {
                        plan_broker: plan.broker,
                        kind: plan.kind,
                        partitions: plan.partitions,
                        reserved,
                        result,
                        session,
                    }
                }
                .instrument(span),
            );
        }
        if !validations.is_empty() {
            let shared2 = shared.clone();
            tasks.spawn(async move {
                TaskDone::Validation(validate_positions(&shared2, validations).await)
            });
        }
        if !lookup_in_flight && !lookups.is_empty() {
            lookup_in_flight = true;
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let keys: Vec<(TopicPartition, u64)> =
                    lookups.iter().map(|(tp, _, c)| (tp.clone(), *c)).collect();
                let result = lookup_positions(&shared2, &lookups).await;
                TaskDone::Lookup(keys, result)
            });
        }
        let max_age = shared.config.common.metadata_max_age;
        let now = Instant::now();
        let metadata_at = metadata_due(
            metadata_wanted,
            metadata_in_flight,
            meta.fetched_at,
            max_age,
            next_metadata,
        );
        if metadata_at.is_some_and(|at| now >= at) {
            metadata_in_flight = true;
            metadata_wanted = false;
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let deadline = Deadline::after(shared2.config.common.request_timeout);
                TaskDone::Metadata(shared2.cluster.refresh(&[], deadline).await.map(|_| ()))
            });
        }

        // No fixed clock: the next turn comes with an answer, a change, room in the budget, or
        // the earliest timer of the partitions and of the metadata (a walk over every partition
        // per turn is what an idle consumer of thousands of partitions would spend its CPU on).
        let wake_at = [
            partitions_due,
            metadata_due(
                metadata_wanted,
                metadata_in_flight,
                meta.fetched_at,
                max_age,
                next_metadata,
            ),
        ]
        .into_iter()
        .flatten()
        .min();
        let timer = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let done = tokio::select! {
            Some(done) = tasks.join_next(), if !tasks.is_empty() => done.ok(),
            _ = shared.changed.notified() => None,
            _ = shared.buffers.ledger.room_freed() => None,
            _ = timer => None,
        };
        match done {
            Some(TaskDone::Fetch {
                plan_broker,
                kind,
                partitions,
                reserved,
                result,
                session,
            }) => {
                busy_brokers.remove(&(plan_broker, kind));
                match session.open_id() {
                    Some(id) => open_sessions.insert((plan_broker, kind), id),
                    None => open_sessions.remove(&(plan_broker, kind)),
                };
                sessions.insert((plan_broker, kind), session);
                if handle_fetch(&shared, plan_broker, kind, partitions, reserved, result) {
                    metadata_wanted = true;
                }
            }
            Some(TaskDone::Lookup(keys, result)) => {
                lookup_in_flight = false;
                if handle_lookup(&shared, keys, result) {
                    metadata_wanted = true;
                }
            }
            Some(TaskDone::Validation(done)) => {
                metadata_wanted |= handle_validation(&shared, done);
            }
            Some(TaskDone::Metadata(r)) => {
                metadata_in_flight = false;
                next_metadata = match r {
                    Ok(()) if shared.cluster.interest_missing() => {
                        metadata_retry.succeeded();
                        metadata_wanted = true;
                        Instant::now() + missing_retry.failed()
                    }
                    Ok(()) => {
                        metadata_retry.succeeded();
                        missing_retry.succeeded();
                        // Rate-limit on-demand refreshes, as retry.backoff.ms does in the Java client.
                        Instant::now() + shared.config.common.retry_backoff
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "metadata refresh failed");
                        // No retry fixes a failed authentication: the application hears of it
                        // now (once), not after task.timeout.ms.
                        if e.is_fatal() {
                            let mut st = shared.lock();
                            if !matches!(st.errors.back(), Some(last) if *last == e) {
                                shared.push_error(&mut st, e);
                            }
                        }
                        Instant::now() + metadata_retry.failed()
                    }
                };
            }
            None => {}
        }
    }
    // What is in flight is of no use any more; its answers are dropped.
    tasks.abort_all();
    close_sessions(&shared, open_sessions).await;
}

/// How long closing the consumer waits for the brokers to end its fetch sessions.
const SESSION_CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Ends the fetch sessions brokers hold for this consumer ([`super::session::close_session`]),
/// all at once, bounded by [`SESSION_CLOSE_WAIT`]; a broker that does not answer by then keeps
/// the session until it evicts it, which costs it a cache slot, no more.
///
/// The requests go on the coordinator's lane, not the fetch lanes: a broker answers a
/// connection's requests in order, and a fetch still held there (up to `fetch.max.wait.ms`)
/// would hold up the close by that long.
async fn close_sessions(shared: &Shared, open: HashMap<(i32, StreamKind), i32>) {
    let deadline = Deadline::after(SESSION_CLOSE_WAIT);
    let mut closes = JoinSet::new();
    for ((broker, _), id) in open {
        let cluster = shared.cluster.clone();
        let mut request = protocol::fetch::fetch(
            FetchLimits {
                max_wait_ms: 0,
                min_bytes: 1,
                max_bytes: 1,
                partition_max_bytes: 1,
                rack_id: "",
                isolation_level: shared.config.isolation_level,
            },
            std::iter::empty(),
        );
        closes.spawn(async move {
            let result: Result<bool> = async {
                let conn = cluster
                    .broker_on(broker, Lane::Coordinator, deadline)
                    .await?;
                let version = conn.version::<FetchRequest>()?;
                protocol::fetch::fit_to_version(&mut request, version);
                if !super::session::close_session(&mut request, id, version) {
                    return Ok(false);
                }
                conn.call_with_timeout(&request, deadline.remaining())
                    .await?;
                Ok(true)
            }
            .await;
            match result {
                Ok(sent) => tracing::debug!(broker, session = id, sent, "fetch session closed"),
                Err(e) => tracing::debug!(broker, session = id, error = %e,
                    "fetch session not closed; the broker will evict it"),
            }
        });
    }
    while closes.join_next().await.is_some() {}
}

/// The Fetch request for `fetch`, asking for at most its `max_bytes` (what the budget allows, at
/// most `fetch.max.bytes`).
fn build_fetch(config: &ConsumerConfig, fetch: Fetch) -> FetchPlan {
    let max_bytes = i32::try_from(fetch.max_bytes).unwrap_or(i32::MAX).max(1);
    let limits = FetchLimits {
        max_wait_ms: fetch.wait.as_millis() as i32,
        // A broker holds a fetch until it has fetch.min.bytes: never more than it may return.
        min_bytes: config.fetch_min_bytes.min(max_bytes),
        max_bytes,
        partition_max_bytes: config.max_partition_fetch_bytes,
        rack_id: config.common.client_rack.as_deref().unwrap_or_default(),
        isolation_level: config.isolation_level,
    };
    let request = protocol::fetch::fetch(
        limits,
        fetch.partitions.iter().map(|c| FetchFrom {
            partition: &c.tp,
            offset: c.asked.offset,
            leader_epoch: c.leader_epoch,
            last_fetched_epoch: c.asked.last_fetched_epoch,
        }),
    );
    FetchPlan {
        broker: fetch.broker,
        kind: fetch.kind,
        partitions: fetch
            .partitions
            .into_iter()
            .map(|c| (c.tp, c.asked))
            .collect(),
        request,
        reserved: fetch.reserve,
    }
}

/// Decodes a fetch answer: each partition asked gets its records decoded, decompressed and
/// chosen for its stream ([`select`]). Runs on the fetch task, without the lock; when several
/// partitions brought records, each is decoded on a task of its own, so that the runtime's
/// workers decompress them side by side.
async fn decode_answer(
    resp: FetchResponse,
    asked: &[(TopicPartition, Asked)],
    config: &ConsumerConfig,
    pools: &BatchPools,
) -> Answer {
    let check_crcs = config.check_crcs;
    if resp.error_code != codes::NONE {
        return Answer::RequestError(resp.error_code);
    }
    let index: HashMap<(&str, i32), usize> = asked
        .iter()
        .enumerate()
        .map(|(i, (tp, _))| ((tp.topic.as_str(), tp.partition), i))
        .collect();
    let mut answers: Vec<Option<PartitionAnswer>> = asked.iter().map(|_| None).collect();
    // (index into `asked`, the records field, the filter of its batches)
    let mut to_decode: Vec<(usize, Bytes, TxnFilter)> = Vec::new();
    for topic in resp.responses {
        for pd in topic.partitions {
            let Some(&i) = index.get(&(topic.topic.0.as_str(), pd.partition_index)) else {
                continue;
            };
            if answers[i].is_some() {
                continue;
            }
            if pd.error_code == codes::NONE {
                let filter = TxnFilter::of_answer(
                    config.isolation_level,
                    pd.aborted_transactions.as_deref(),
                );
                to_decode.push((i, pd.records.unwrap_or_default(), filter));
            }
            answers[i] = Some(PartitionAnswer {
                error_code: pd.error_code,
                high_watermark: pd.high_watermark,
                log_start_offset: pd.log_start_offset,
                last_stable_offset: pd.last_stable_offset,
                preferred_read_replica: pd.preferred_read_replica.0,
                records: Ok(Selected::default()),
                diverging_epoch: diverging_epoch(&pd.diverging_epoch),
            });
        }
    }
    let records_bytes: usize = to_decode.iter().map(|(_, d, _)| d.len()).sum();
    let mut decoded_bytes = records_bytes;
    // The records chosen, and what decoding allocated beside the records field.
    let decode = move |data: Bytes, asked: Asked, filter: TxnFilter, pools: BatchPools| {
        decode_batches_in_where(data, check_crcs, &pools, worth_decoding(&filter)).map(|d| {
            let allocated = allocated_by(&d);
            (select(d, &asked, filter), allocated)
        })
    };
    let with_data = to_decode.iter().filter(|(_, d, _)| !d.is_empty()).count();
    let mut decoded: Vec<(usize, Result<(Selected, usize)>)> = Vec::with_capacity(to_decode.len());
    if with_data <= 1 {
        for (i, data, filter) in to_decode {
            decoded.push((i, decode(data, asked[i].1, filter, pools.clone())));
        }
    } else {
        let decoding: Vec<_> = to_decode
            .into_iter()
            .map(|(i, data, filter)| {
                let (a, pools) = (asked[i].1, pools.clone());
                (
                    i,
                    tokio::spawn(async move { decode(data, a, filter, pools) }),
                )
            })
            .collect();
        for (i, handle) in decoding {
            let records = handle.await.unwrap_or_else(|e| {
                Err(if e.is_cancelled() {
                    Error::Closed
                } else {
                    Error::IllegalState(format!("decoding the records failed: {e}"))
                })
            });
            decoded.push((i, records));
        }
    }
    for (i, records) in decoded {
        let records = records.map(|(selected, allocated)| {
            decoded_bytes += allocated;
            selected
        });
        if let Some(a) = answers[i].as_mut() {
            a.records = records;
        }
    }
    Answer::Partitions {
        answers: asked
            .iter()
            .zip(answers)
            .map(|((tp, a), answer)| (tp.clone(), *a, answer))
            .collect(),
        records_bytes,
        decoded_bytes,
    }
}

/// The bytes decoding allocated beside the records field it read, as the budget counts them
/// (capacities): inflated batches and span vectors (headers, rare and small, are left out).
fn allocated_by(d: &DecodedRecords) -> usize {
    d.batches
        .iter()
        .map(|b| b.inflated_bytes + b.spans.capacity() * std::mem::size_of::<RecordSpans>())
        .sum()
}

/// KIP-320: a Fetch answer's diverging epoch, when it names one (the field's default, epoch and
/// end offset -1, says the log holds what was fetched).
fn diverging_epoch(d: &EpochEndOffsetField) -> Option<EpochEndOffset> {
    (d.epoch >= 0 || d.end_offset >= 0).then_some(EpochEndOffset {
        epoch: d.epoch,
        end_offset: d.end_offset,
    })
}

/// Applies a decoded fetch answer for streams of `kind`: the lock covers only the hand-over to
/// each partition's state ([`apply`]). Returns whether metadata should be refreshed.
fn handle_fetch(
    shared: &Shared,
    broker: i32,
    kind: StreamKind,
    sent: Vec<(TopicPartition, Asked)>,
    reserved: usize,
    result: Result<Answer>,
) -> bool {
    let mut st = shared.lock();
    // The answer is in the ledger now (its buffer from the moment it was read), or never comes.
    st.reserved -= reserved;
    let answers = match result {
        Ok(Answer::Partitions {
            answers,
            records_bytes,
            decoded_bytes,
        }) => {
            st.expansion.answered(records_bytes, decoded_bytes);
            answers
        }
        Ok(Answer::RequestError(code)) if is_session_error(code) => {
            // The session is reset (`FetchSession::answered`): the next request is a full one,
            // at once and with no error counted against the partitions.
            tracing::debug!(broker, error = %Error::kafka(code, "fetch session"), "fetch session reset");
            for (tp, _) in &sent {
                if let Some(s) = st.partitions.get_mut(tp).and_then(|p| p.stream_mut(kind)) {
                    s.in_flight = false;
                }
            }
            return false;
        }
        Ok(Answer::RequestError(code)) => {
            let e = Error::kafka(code, format!("fetch from broker {broker}"));
            for (tp, _) in &sent {
                if let Some(p) = st.partitions.get_mut(tp) {
                    fetch_failed(p, kind, &e.to_string());
                }
            }
            return true;
        }
        Err(e) => {
            tracing::debug!(broker, error = %e, "fetch failed");
            // A broker that cannot serve lagless at all (no Fetch version in common) is reported
            // at once; transient failures only after task.timeout.ms (KIP-572).
            if !e.is_retriable() && !matches!(st.errors.back(), Some(last) if *last == e) {
                shared.push_error(&mut st, e.clone());
            }
            for (tp, _) in &sent {
                if let Some(p) = st.partitions.get_mut(tp) {
                    // A preferred replica that fails is left for the leader (KIP-392).
                    fetch_failed(p, kind, &e.to_string());
                }
            }
            shared.cluster.disconnect(broker, kind.lane());
            return true;
        }
    };
    let now = Instant::now();
    let mut refresh = false;
    let mut new_data = false;
    let mut errors = Vec::new();
    for (tp, asked, answer) in answers {
        let Some(p) = st.partitions.get_mut(&tp) else {
            continue;
        };
        let Some(answer) = answer else {
            // A partition the broker left out of its answer is simply fetched again.
            if let Some(s) = p.stream_mut(kind) {
                s.in_flight = false;
            }
            continue;
        };
        let applied = apply(
            p,
            &tp,
            kind,
            broker,
            &asked,
            answer,
            now,
            shared.config.common.metadata_max_age,
            reset_policy(&shared.config).is_some(),
        );
        if applied.added > 0 {
            st.answers_with_records += 1;
            let at = st.answers_with_records;
            if let Some(s) = st.partitions.get_mut(&tp).and_then(|p| p.stream_mut(kind)) {
                s.answered_at = at;
            }
        }
        st.hold(applied.added);
        st.release(applied.freed);
        refresh |= applied.refresh;
        new_data |= applied.added > 0;
        errors.extend(applied.error);
    }
    for e in errors {
        shared.push_error(&mut st, e);
    }
    if new_data {
        shared.data_ready.notify_all();
    }
    refresh
}

/// Applies position lookups. Returns whether metadata should be refreshed (a partition's lookup
/// failed with a retriable error, such as an unknown or changed leader).
fn handle_lookup(
    shared: &Shared,
    keys: Vec<(TopicPartition, u64)>,
    result: Result<LookedUp>,
) -> bool {
    let mut st = shared.lock();
    let cursors: HashMap<TopicPartition, u64> = keys.iter().cloned().collect();
    for (tp, _) in &keys {
        if let Some(p) = st.partitions.get_mut(tp) {
            p.lookup_in_flight = false;
        }
    }
    let outcomes = match result {
        Ok((o, committed)) => {
            for (tp, offset) in committed {
                if let Some(p) = st.partitions.get_mut(&tp) {
                    if cursors.get(&tp) == Some(&p.cursor) {
                        p.committed_offset = Some(offset);
                    }
                }
            }
            o
        }
        Err(e) => {
            if e.is_fatal() && !matches!(st.errors.back(), Some(last) if *last == e) {
                shared.push_error(&mut st, e.clone());
            }
            for (tp, cursor) in &keys {
                if let Some(p) = st.partitions.get_mut(tp) {
                    if p.cursor == *cursor {
                        p.failed(format!("looking up the position: {e}"), true);
                    }
                }
            }
            return e.is_retriable();
        }
    };
    let mut refresh = false;
    let mut errors = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    let mut freed = 0usize;
    for (tp, outcome) in outcomes {
        let Some(p) = st.partitions.get_mut(&tp) else {
            continue;
        };
        if cursors.get(&tp) != Some(&p.cursor) || p.lookup.is_none() {
            continue;
        }
        match outcome {
            LookupOutcome::Position {
                offset: o,
                epoch,
                leader_epoch,
            } => {
                // A main stream reset below a backlog range re-reads it: the range is dropped.
                if p.recovery.as_ref().is_some_and(|r| o < r.max_end()) {
                    freed += p.cancel_recovery();
                }
                // KIP-320: an epoch is checked before (validation) or on the first fetch.
                p.start_at(o, epoch, leader_epoch);
            }
            LookupOutcome::Recover {
                state,
                main_epoch,
                leader_epoch,
                recovery_epoch,
            } => {
                tracing::info!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    main = state.main_next,
                    ranges = ?state.ranges,
                    "backlog drains in a recovery stream; the main stream starts after it"
                );
                freed += p.cancel_recovery();
                p.start_at(state.main_next, main_epoch, leader_epoch);
                p.committed_at_takeover = Some(state.low_water_mark());
                p.recovery = Recovery::start(state, shared.backoff(), recovery_epoch);
            }
            LookupOutcome::NoOffset => {
                // auto.offset.reset=none: the application must seek. Report once.
                p.lookup = None;
                errors.push(Error::NoOffset(ErrorPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                }));
            }
            LookupOutcome::Failed(e) => {
                p.failed(format!("looking up the position: {e}"), true);
                refresh |= e.is_retriable();
                // A partition of a missing topic never gets a position, so the fetch loop's
                // unknown-topic report (which needs one) never runs: report it from here, once.
                if let Error::UnknownTopic(t) = &e {
                    unknown.push(t.clone());
                }
            }
        }
    }
    st.release(freed);
    // position() waits for lookups on data_ready.
    shared.data_ready.notify_all();
    for t in unknown {
        if st.reported_unknown.insert(t.clone()) {
            errors.push(Error::UnknownTopic(t));
        }
    }
    for e in errors {
        shared.push_error(&mut st, e);
    }
    refresh
}

//! The fetch planner: what one turn of the fetch task sends, decided from the partitions' states,
//! the metadata and the memory budget. Which Fetch goes to which broker (one per broker and
//! stream kind, least recently answered partitions first), which position lookups and KIP-320
//! validations are due, which streams are reported stuck (KIP-572) or of an unknown topic,
//! whether the metadata is wanted, and what `fetch.buffer.max.bytes` allows.
//!
//! It moves the partitions' states as the decision says (streams marked in flight or failed,
//! paused partitions' records dropped for room), but does no I/O and takes no lock: the fetch
//! task calls it under its lock and carries out the [`Planned`] it returns. The pools' ledger is
//! read, and their kept buffers freed, through [`Pools`], in the order the budget needs them.
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use super::apply::Asked;
use super::budget::{self, Budget, Decision};
use super::state::{fetch_target, PartitionState, PositionLookup, Stream, StreamKind};
use super::validate::{self, ValidationAsked};
use crate::cluster::Metadata;
use crate::config::ConsumerConfig;
use crate::error::{codes, Error, ErrorPartition};
use crate::protocol::records::FetchBuffers;
use crate::types::TopicPartition;

/// What the budget reads of the consumer's pools, and the one thing it asks of them: to free the
/// buffers they keep. The ledger moves under the planner's feet (records dropped on any thread
/// give their buffers back), so it is read where the decision needs it, not once.
pub(super) trait Pools {
    /// Bytes the pools hold: lent and alive, and kept ([`crate::buffers::ScriptedPools::held`]).
    fn held(&self) -> usize;
    /// Of those, the bytes kept for reuse ([`crate::buffers::ScriptedPools::kept`]).
    fn kept(&self) -> usize;
    /// Frees at least `bytes` of the kept buffers (fewer when fewer are kept); returns the bytes
    /// freed ([`FetchBuffers::trim`]).
    fn trim(&self, bytes: usize) -> usize;
}

impl Pools for FetchBuffers {
    fn held(&self) -> usize {
        self.ledger.held()
    }

    fn kept(&self) -> usize {
        self.ledger.kept()
    }

    fn trim(&self, bytes: usize) -> usize {
        FetchBuffers::trim(self, bytes)
    }
}

/// The configuration the planner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settings {
    pub limits: budget::Limits,
    pub max_partition_fetch_bytes: i32,
    pub fetch_max_wait: Duration,
    /// `task.timeout.ms` as configured.
    pub task_timeout: Duration,
}

impl Settings {
    pub(super) fn of(config: &ConsumerConfig) -> Settings {
        Settings {
            limits: budget::Limits {
                buffer_max: config.fetch_buffer_max_bytes,
                fetch_max: config.fetch_max_bytes.max(1) as usize,
                partition_max: config.max_partition_fetch_bytes.max(1) as usize,
            },
            max_partition_fetch_bytes: config.max_partition_fetch_bytes,
            fetch_max_wait: config.fetch_max_wait,
            task_timeout: config.common.task_timeout,
        }
    }

    /// A healthy partition at the log end is answered only after fetch.max.wait.ms: a
    /// task.timeout.ms below that must not report it.
    pub(super) fn stuck_after(&self) -> Duration {
        self.task_timeout.max(2 * self.fetch_max_wait)
    }
}

/// What the fetch task knows of this turn besides the partitions.
pub(super) struct Turn<'a> {
    pub metadata: &'a Metadata,
    /// The (broker, stream kind) pairs with a Fetch in flight: they get no second one.
    pub busy: &'a HashSet<(i32, StreamKind)>,
    /// A position lookup is running: no other is sent before it ends.
    pub lookup_in_flight: bool,
    /// [`budget::Expansion::per_mille`].
    pub expansion: u32,
    /// Bytes reserved for the answers of the fetches in flight.
    pub reserved: usize,
    pub now: Instant,
}

/// A partition in a Fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Candidate {
    pub tp: TopicPartition,
    pub asked: Asked,
    /// The leader epoch the metadata names (KIP-320's `current_leader_epoch`).
    pub leader_epoch: i32,
    /// Its first batch did not fit `max.partition.fetch.bytes` last time (KIP-74).
    pub oversized: bool,
    /// [`Stream::answered_at`].
    pub answered_at: u64,
}

/// One Fetch to send: to one broker, for one kind of stream. A Fetch names each partition once,
/// so a partition's main and recovery streams go in separate requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fetch {
    pub broker: i32,
    pub kind: StreamKind,
    /// How long it may wait at the log end ([`fetch_wait`]).
    pub wait: Duration,
    /// What the budget lets it ask for.
    pub max_bytes: usize,
    /// Bytes of the budget reserved for its answer until it is applied.
    pub reserve: usize,
    /// In the order the request names them.
    pub partitions: Vec<Candidate>,
}

/// What one turn of the fetch task carries out.
#[derive(Debug, Default)]
pub(super) struct Planned {
    /// Per (broker, kind), in that order; their streams are marked in flight.
    pub fetches: Vec<Fetch>,
    /// Position lookups to send: (partition, lookup, cursor); marked in flight.
    pub lookups: Vec<(TopicPartition, PositionLookup, u64)>,
    /// KIP-320 validations to send; marked in flight.
    pub validations: Vec<(TopicPartition, ValidationAsked)>,
    /// Errors for `poll()`, in order.
    pub errors: Vec<Error>,
    /// A partition needs a leader or a topic the metadata lacks: refresh it.
    pub metadata_wanted: bool,
    /// A fetch was held back for room in the budget: wake when a buffer comes back.
    pub waits_for_room: bool,
    /// Bytes (as [`super::state::record_size`] counts them) of paused partitions' records
    /// dropped to make room: `FetchState::buffered_bytes` goes down by them.
    pub freed: usize,
    /// Bytes reserved for the fetches' answers, the sum of their `reserve`:
    /// `FetchState::reserved` goes up by them.
    pub reserved: usize,
}

/// Plans one turn of the fetch task over `partitions` (see the module's documentation).
/// `reported_unknown`: the topics already reported unknown, so each is reported once.
pub(super) fn plan_fetches(
    partitions: &mut BTreeMap<TopicPartition, PartitionState>,
    reported_unknown: &mut HashSet<String>,
    turn: &Turn<'_>,
    settings: &Settings,
    pools: &impl Pools,
) -> Planned {
    let meta = turn.metadata;
    let now = turn.now;
    let limits = settings.limits;
    let expansion = turn.expansion;
    let max_bytes = settings.max_partition_fetch_bytes;
    let task_timeout = settings.stuck_after();
    let mut out = Planned::default();
    let mut budget = Budget {
        held: pools.held(),
        kept: pools.kept(),
        reserved: turn.reserved,
    };
    // The application would wait for records that never come: no fetch in flight and nothing
    // buffered for it.
    let mut starving =
        turn.busy.is_empty() && !partitions.values().any(|p| !p.paused && p.has_records());
    let mut paused_buffered = partitions.values().any(|p| p.paused && p.has_records());
    // The budget leaves no room for a fetch: the streams wait for the application, which KIP-572
    // does not count against them.
    let buffer_full = matches!(
        budget::decide(limits, budget, 1, expansion, false, false),
        Decision::Wait
    );
    let mut per_broker: BTreeMap<(i32, StreamKind), Vec<Candidate>> = BTreeMap::new();
    // Brokers with a partition whose main stream waits only for poll() to drain its buffer:
    // their fetches must not wait long at the log end (see `fetch_wait`).
    let mut held_back: HashSet<i32> = HashSet::new();
    let mut unknown_topics: Vec<String> = Vec::new();
    let mut lookups: Vec<(TopicPartition, PositionLookup, u64)> = Vec::new();
    for (tp, p) in partitions.iter_mut() {
        // KIP-572: report a stream that made no progress for task.timeout.ms.
        let partition = ErrorPartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
        };
        let idle = |s: &Stream| p.paused || buffer_full || s.buffer_full(max_bytes);
        let main_activity = p.main.activity(
            p.lookup_in_flight || validate::in_flight(p),
            idle(&p.main),
            p.lookup.is_some(),
        );
        let recovery_activity = p
            .recovery
            .as_ref()
            .map(|r| r.stream.activity(false, idle(&r.stream), false));
        if let Some(cause) = p.main.stuck(main_activity, now, task_timeout) {
            out.errors.push(Error::PartitionStuck {
                partition: partition.clone(),
                cause,
            });
        }
        if let Some(cause) = p
            .recovery
            .as_mut()
            .zip(recovery_activity)
            .and_then(|(r, a)| r.stream.stuck(a, now, task_timeout))
        {
            out.errors.push(Error::PartitionStuck {
                partition,
                cause: format!("recovery stream: {cause}"),
            });
        }
        if let Some(l) = p.lookup {
            if !p.lookup_in_flight && now >= p.main.next_attempt {
                lookups.push((tp.clone(), l, p.cursor));
            }
        }
        let info = meta.partition(&tp.topic, tp.partition);
        // KIP-320: a newer leader epoch has the position validated first, paused or not (as the
        // Java client does).
        let (leader, epoch) = info.map_or((-1, -1), |i| (i.leader, i.leader_epoch));
        match validate::plan(p, leader, epoch, now) {
            validate::Planned::Send(v) => {
                // Waiting for an answer from now on, idle as it may have been until now.
                p.main.was_idle = false;
                out.validations.push((tp.clone(), v));
            }
            validate::Planned::NeedsLeader => out.metadata_wanted = true,
            validate::Planned::Nothing => {}
        }
        if p.paused {
            continue;
        }
        let ready = p.fetchable(now, max_bytes);
        if ready.is_empty() {
            if p.main.buffer_full(max_bytes) && !p.main.in_flight {
                if let Some(info) = info {
                    held_back.insert(fetch_target(info.leader, p.preferred_replica, now, |b| {
                        meta.brokers.contains_key(&b)
                    }));
                }
            }
            continue;
        }
        let fail_all = |p: &mut PartitionState, why: String| {
            for (kind, _) in &ready {
                if let Some(s) = p.stream_mut(*kind) {
                    s.failed(why.clone(), true);
                }
            }
        };
        match meta.topics.get(&tp.topic) {
            None => {
                out.metadata_wanted = true;
                continue;
            }
            Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                unknown_topics.push(tp.topic.clone());
                fail_all(p, format!("topic `{}` does not exist", tp.topic));
                out.metadata_wanted = true;
                continue;
            }
            Some(_) => {}
        }
        match info {
            Some(info) if info.leader >= 0 => {
                let target = fetch_target(info.leader, p.preferred_replica, now, |b| {
                    meta.brokers.contains_key(&b)
                });
                if target == info.leader {
                    p.preferred_replica = None;
                }
                for (kind, offset) in &ready {
                    let (oversized, answered_at) = p
                        .stream_mut(*kind)
                        .map_or((false, 0), |s| (s.oversized, s.answered_at));
                    let asked = Asked {
                        offset: *offset,
                        cursor: p.cursor,
                        limit: p.fetch_limit(*kind),
                        last_fetched_epoch: p.last_fetched_epoch(*kind),
                    };
                    per_broker
                        .entry((target, *kind))
                        .or_default()
                        .push(Candidate {
                            tp: tp.clone(),
                            asked,
                            leader_epoch: info.leader_epoch,
                            oversized,
                            answered_at,
                        });
                }
            }
            Some(_) => {
                fail_all(p, format!("{}-{} has no leader", tp.topic, tp.partition));
                out.metadata_wanted = true;
            }
            None => {
                fail_all(
                    p,
                    format!(
                        "{}-{} is not in the cluster metadata",
                        tp.topic, tp.partition
                    ),
                );
                out.metadata_wanted = true;
            }
        }
    }
    for t in unknown_topics {
        if reported_unknown.insert(t.clone()) {
            out.errors.push(Error::UnknownTopic(t));
        }
    }
    for ((broker, kind), mut parts) in per_broker {
        if turn.busy.contains(&(broker, kind)) {
            continue;
        }
        let mut decision = budget::decide(
            limits,
            budget,
            parts.len(),
            expansion,
            starving,
            paused_buffered,
        );
        if decision == Decision::DropPaused {
            let mut freed = 0;
            for p in partitions.values_mut().filter(|p| p.paused) {
                freed += p.drop_buffered();
            }
            out.freed += freed;
            tracing::debug!(
                freed,
                "records of paused partitions dropped to make room in fetch.buffer.max.bytes"
            );
            paused_buffered = false;
            budget.held = pools.held();
            budget.kept = pools.kept();
            decision = budget::decide(limits, budget, parts.len(), expansion, starving, false);
        }
        tracing::trace!(
            broker,
            ?kind,
            partitions = parts.len(),
            held = budget.held,
            kept = budget.kept,
            reserved = budget.reserved,
            expansion,
            ?decision,
            "fetch budget"
        );
        let Decision::Send {
            max_bytes,
            reserve,
            trim,
        } = decision
        else {
            out.waits_for_room = true;
            continue;
        };
        if trim > 0 {
            let freed = pools.trim(trim);
            budget.held -= freed.min(budget.held);
            budget.kept -= freed.min(budget.kept);
        }
        budget.reserved += reserve;
        out.reserved += reserve;
        starving = false;
        // Partitions whose first batch was too large go first (KIP-74), then those least recently
        // served.
        parts.sort_by_key(|c| (!c.oversized, c.answered_at));
        for c in &parts {
            if let Some(s) = partitions.get_mut(&c.tp).and_then(|p| p.stream_mut(kind)) {
                s.in_flight = true;
                s.was_idle = false;
            }
        }
        out.fetches.push(Fetch {
            broker,
            kind,
            wait: fetch_wait(
                settings.fetch_max_wait,
                kind == StreamKind::Main && held_back.contains(&broker),
            ),
            max_bytes,
            reserve,
            partitions: parts,
        });
    }
    if !turn.lookup_in_flight && !lookups.is_empty() {
        for (tp, _, _) in &lookups {
            if let Some(p) = partitions.get_mut(tp) {
                p.lookup_in_flight = true;
                p.main.was_idle = false;
            }
        }
        out.lookups = lookups;
    }
    out
}

/// While a partition of the broker is held back by its own full buffer, a fetch waits at most
/// this long at the log end.
const HELD_BACK_FETCH_WAIT: Duration = Duration::from_millis(50);

/// How long a fetch may wait at the log end: `fetch.max.wait.ms`, or at most
/// [`HELD_BACK_FETCH_WAIT`] while another partition of the same broker is `held_back` only by
/// its own full buffer. That partition wants a fetch as soon as `poll()` drains it, but the next
/// fetch goes to the broker only after the one in flight is answered (one per connection, and
/// the broker answers a connection's requests in order): a fetch of partitions at the log end,
/// answered only after the full wait, would leave it without records for that long.
pub(super) fn fetch_wait(configured: Duration, held_back: bool) -> Duration {
    if held_back {
        configured.min(HELD_BACK_FETCH_WAIT)
    } else {
        configured
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::cell::{Cell, RefCell};

    use bytes::Bytes;

    use super::*;
    use crate::backoff::Backoff;
    use crate::cluster::{PartitionInfo, TopicInfo};
    use crate::fetch::state::{record_size, BufferedBatch, Recovery};
    use crate::protocol::records::{RecordSpans, Span};
    use crate::recovery::{RecoveryRange, RecoveryState};

    pub(in crate::fetch) const MIB: usize = 1 << 20;
    const WAIT: Duration = Duration::from_millis(500);
    const TASK_TIMEOUT: Duration = Duration::from_secs(60);

    /// A 64 MiB budget, fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB.
    /// Also the settings of fetch/wake.rs's tests.
    pub(in crate::fetch) const SETTINGS: Settings = Settings {
        limits: budget::Limits {
            buffer_max: 64 * MIB,
            fetch_max: 50 * MIB,
            partition_max: MIB,
        },
        max_partition_fetch_bytes: MIB as i32,
        fetch_max_wait: WAIT,
        task_timeout: TASK_TIMEOUT,
    };

    /// A ledger that reads `readings` of (held, kept) one after the other (the last one for
    /// good), and frees what each trim asks.
    struct ScriptedPools {
        readings: Vec<(usize, usize)>,
        read: Cell<usize>,
        trims: RefCell<Vec<usize>>,
    }

    impl ScriptedPools {
        fn reading(readings: &[(usize, usize)]) -> ScriptedPools {
            ScriptedPools {
                readings: readings.to_vec(),
                read: Cell::new(0),
                trims: RefCell::new(Vec::new()),
            }
        }

        fn empty() -> ScriptedPools {
            ScriptedPools::reading(&[(0, 0)])
        }

        fn now(&self) -> (usize, usize) {
            self.readings[self.read.get().min(self.readings.len() - 1)]
        }
    }

    impl Pools for ScriptedPools {
        fn held(&self) -> usize {
            self.now().0
        }

        fn kept(&self) -> usize {
            let kept = self.now().1;
            self.read.set(self.read.get() + 1);
            kept
        }

        fn trim(&self, bytes: usize) -> usize {
            self.trims.borrow_mut().push(bytes);
            bytes
        }
    }

    fn backoff() -> Backoff {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(1))
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// A partition of `topic` whose main stream fetches from `offset` (a seek: no epoch).
    fn at(topic: &str, offset: i64) -> PartitionState {
        let mut p = PartitionState::new(topic, PositionLookup::Committed, backoff());
        p.seek(offset);
        p
    }

    /// A topic in [`metadata`]: (name, error code, [(partition, leader, leader epoch)]).
    type Topic<'a> = (&'a str, i16, &'a [(i32, i32, i32)]);

    /// Metadata of brokers 1 to 3 and `topics`.
    fn metadata(topics: &[Topic<'_>]) -> Metadata {
        Metadata {
            brokers: (1..=3).map(|b| (b, format!("broker{b}:9092"))).collect(),
            topics: topics
                .iter()
                .map(|&(name, error_code, partitions)| {
                    let info = TopicInfo {
                        name: name.to_string(),
                        topic_id: uuid::Uuid::nil(),
                        error_code,
                        is_internal: false,
                        partitions: partitions
                            .iter()
                            .map(|&(partition, leader, leader_epoch)| PartitionInfo {
                                partition,
                                leader,
                                leader_epoch,
                                error_code: codes::NONE,
                            })
                            .collect(),
                    };
                    (name.to_string(), info)
                })
                .collect(),
            fetched_at: None,
        }
    }

    /// The partitions of "orders" named, by partition id.
    fn partitions(
        parts: impl IntoIterator<Item = (i32, PartitionState)>,
    ) -> BTreeMap<TopicPartition, PartitionState> {
        parts
            .into_iter()
            .map(|(i, p)| (tp("orders", i), p))
            .collect()
    }

    fn turn<'a>(
        metadata: &'a Metadata,
        busy: &'a HashSet<(i32, StreamKind)>,
        now: Instant,
    ) -> Turn<'a> {
        Turn {
            metadata,
            busy,
            lookup_in_flight: false,
            expansion: 1000,
            reserved: 0,
            now,
        }
    }

    /// Plans a turn at `now` with nothing in flight, over an empty ledger unless one is given.
    fn plan(
        parts: &mut BTreeMap<TopicPartition, PartitionState>,
        meta: &Metadata,
        now: Instant,
        ledger: Option<&ScriptedPools>,
    ) -> Planned {
        let busy = HashSet::new();
        plan_fetches(
            parts,
            &mut HashSet::new(),
            &turn(meta, &busy, now),
            &SETTINGS,
            ledger.unwrap_or(&ScriptedPools::empty()),
        )
    }

    /// Each fetch as (broker, kind, partition ids in request order).
    fn sent(planned: &Planned) -> Vec<(i32, StreamKind, Vec<i32>)> {
        planned
            .fetches
            .iter()
            .map(|f| {
                let ids = f.partitions.iter().map(|c| c.tp.partition).collect();
                (f.broker, f.kind, ids)
            })
            .collect()
    }

    /// Buffers one record at `offset` in `s`, which fetches on after it. Returns its bytes.
    fn buffer_one(s: &mut Stream, offset: i64) -> usize {
        let spans = RecordSpans {
            offset,
            timestamp: 0,
            key: None,
            value: Some(Span { start: 0, len: 10 }),
            headers: Vec::new(),
        };
        let size = record_size(&spans);
        s.buffer.push(BufferedBatch {
            data: Bytes::from(vec![b'v'; 10]),
            records: vec![spans].into(),
            leader_epoch: -1,
        });
        s.buffered_bytes += size;
        s.fetch_offset = Some(offset + 1);
        size
    }

    /// orders-0 with a recovery stream draining 70..120 below its main stream at 140.
    fn recovering() -> PartitionState {
        let mut p = at("orders", 140);
        let state = RecoveryState {
            main_next: 140,
            ranges: vec![RecoveryRange {
                start: 70,
                end: 120,
                next: 70,
            }],
        };
        p.recovery = Recovery::start(state, backoff(), -1);
        p
    }

    #[test]
    fn partitions_are_fetched_from_their_leaders_in_one_fetch_per_broker_and_stream_kind() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5), (1, 2, 5), (2, 1, 5)])]);
        let mut parts = partitions([
            (0, recovering()),
            (1, at("orders", 10)),
            (2, at("orders", 20)),
        ]);
        let cursor = parts[&tp("orders", 0)].cursor;
        let out = plan(&mut parts, &meta, Instant::now(), None);
        assert_eq!(
            sent(&out),
            vec![
                (1, StreamKind::Main, vec![0, 2]),
                (1, StreamKind::Recovery, vec![0]),
                (2, StreamKind::Main, vec![1]),
            ]
        );
        // The recovery stream asks for its range, the main stream from its position.
        assert_eq!(
            out.fetches[1].partitions[0],
            Candidate {
                tp: tp("orders", 0),
                asked: Asked {
                    offset: 70,
                    cursor,
                    limit: 120,
                    last_fetched_epoch: -1,
                },
                leader_epoch: 5,
                oversized: false,
                answered_at: 0,
            }
        );
        assert_eq!(
            out.fetches[0].partitions[0].asked,
            Asked {
                offset: 140,
                cursor,
                limit: i64::MAX,
                last_fetched_epoch: -1,
            }
        );
        // Each asks for what its partitions may bring (1 MiB each), and reserves it.
        let asks: Vec<(usize, usize, Duration)> = out
            .fetches
            .iter()
            .map(|f| (f.max_bytes, f.reserve, f.wait))
            .collect();
        assert_eq!(
            asks,
            vec![(2 * MIB, 2 * MIB, WAIT), (MIB, MIB, WAIT), (MIB, MIB, WAIT)]
        );
        assert_eq!(out.reserved, 4 * MIB);
        let in_flight: Vec<(bool, Option<bool>)> = parts
            .values()
            .map(|p| {
                (
                    p.main.in_flight,
                    p.recovery.as_ref().map(|r| r.stream.in_flight),
                )
            })
            .collect();
        assert_eq!(
            in_flight,
            vec![(true, Some(true)), (true, None), (true, None)]
        );
        assert!(out.errors.is_empty() && out.lookups.is_empty() && out.validations.is_empty());
        assert!(!out.metadata_wanted && !out.waits_for_room);
        assert_eq!(out.freed, 0);
    }

    #[test]
    fn a_broker_with_a_fetch_in_flight_gets_no_second_one() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5), (1, 2, 5)])]);
        let mut parts = partitions([(0, at("orders", 10)), (1, at("orders", 20))]);
        let busy = HashSet::from([(1, StreamKind::Main)]);
        let out = plan_fetches(
            &mut parts,
            &mut HashSet::new(),
            &turn(&meta, &busy, Instant::now()),
            &SETTINGS,
            &ScriptedPools::empty(),
        );
        assert_eq!(sent(&out), vec![(2, StreamKind::Main, vec![1])]);
        assert_eq!(out.reserved, MIB);
        assert!(!parts[&tp("orders", 0)].main.in_flight);
        assert!(parts[&tp("orders", 1)].main.in_flight);
    }

    #[test]
    fn a_paused_partition_is_not_fetched_but_its_position_is_still_validated() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 7), (1, 1, 7), (2, 1, 7)])]);
        // orders-0: a committed offset of epoch 6, the metadata names epoch 7: validate first.
        let mut validated = PartitionState::new("orders", PositionLookup::Committed, backoff());
        validated.start_at(300, 6, -1);
        validated.paused = true;
        let mut paused = at("orders", 10);
        paused.paused = true;
        let mut parts = partitions([(0, validated), (1, paused), (2, at("orders", 20))]);
        let cursor = parts[&tp("orders", 0)].cursor;
        let out = plan(&mut parts, &meta, Instant::now(), None);
        assert_eq!(sent(&out), vec![(1, StreamKind::Main, vec![2])]);
        assert_eq!(
            out.validations,
            vec![(
                tp("orders", 0),
                ValidationAsked {
                    leader: 1,
                    current_leader_epoch: 7,
                    offset: 300,
                    epoch: 6,
                    // Fetches sent to the old leader are dropped when they come.
                    cursor: cursor + 1,
                }
            )]
        );
        assert!(!parts[&tp("orders", 1)].main.in_flight);
    }

    #[test]
    fn an_unknown_topic_fails_its_streams_and_is_reported_once() {
        let meta = metadata(&[("gone", codes::UNKNOWN_TOPIC_OR_PARTITION, &[])]);
        let mut parts: BTreeMap<TopicPartition, PartitionState> = [0, 1]
            .into_iter()
            .map(|i| (tp("gone", i), at("gone", 0)))
            .collect();
        let mut reported = HashSet::new();
        let busy = HashSet::new();
        let now = Instant::now();
        let out = plan_fetches(
            &mut parts,
            &mut reported,
            &turn(&meta, &busy, now),
            &SETTINGS,
            &ScriptedPools::empty(),
        );
        assert_eq!(out.errors, vec![Error::UnknownTopic("gone".into())]);
        assert!(out.metadata_wanted);
        assert!(out.fetches.is_empty());
        let failures: Vec<(bool, Option<&str>)> = parts
            .values()
            .map(|p| (p.main.failing, p.main.last_error.as_deref()))
            .collect();
        let why = Some("topic `gone` does not exist");
        assert_eq!(failures, vec![(true, why), (true, why)]);
        // Once the backoff is over, the streams fail again, but the topic is not reported again.
        let later = now + Duration::from_secs(2);
        let out = plan_fetches(
            &mut parts,
            &mut reported,
            &turn(&meta, &busy, later),
            &SETTINGS,
            &ScriptedPools::empty(),
        );
        assert_eq!(out.errors, Vec::<Error>::new());
        assert!(out.metadata_wanted);
        assert_eq!(reported, HashSet::from(["gone".to_string()]));
    }

    /// (metadata of "orders", whether the metadata is wanted, what the main stream failed with)
    #[test]
    fn a_partition_without_a_leader_or_missing_from_the_metadata_asks_for_metadata() {
        let cases: [(&[Topic<'_>], bool, Option<&str>); 4] = [
            (&[("orders", codes::NONE, &[(0, 1, 5)])], false, None),
            // The topic is not in the metadata yet: no failure, only a refresh.
            (&[("other", codes::NONE, &[(0, 1, 5)])], true, None),
            (
                &[("orders", codes::NONE, &[(0, -1, 5)])],
                true,
                Some("orders-0 has no leader"),
            ),
            (
                &[("orders", codes::NONE, &[(1, 1, 5)])],
                true,
                Some("orders-0 is not in the cluster metadata"),
            ),
        ];
        for (topics, wanted, failed) in cases {
            let meta = metadata(topics);
            let mut parts = partitions([(0, at("orders", 10))]);
            let out = plan(&mut parts, &meta, Instant::now(), None);
            let p = &parts[&tp("orders", 0)];
            assert_eq!(
                (
                    out.metadata_wanted,
                    out.fetches.len(),
                    p.main.last_error.as_deref()
                ),
                (wanted, usize::from(!wanted), failed),
                "{topics:?}"
            );
        }
    }

    #[test]
    fn with_no_room_in_the_budget_nothing_is_sent_until_a_buffer_comes_back() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5)])]);
        // orders-0 has a record for poll(): the application does not starve.
        let mut p = at("orders", 10);
        buffer_one(&mut p.main, 10);
        let mut parts = partitions([(0, p)]);
        let full = ScriptedPools::reading(&[(64 * MIB, 0)]);
        let out = plan(&mut parts, &meta, Instant::now(), Some(&full));
        assert!(out.fetches.is_empty());
        assert!(out.waits_for_room);
        assert_eq!((out.reserved, out.freed), (0, 0));
        assert!(!parts[&tp("orders", 0)].main.in_flight);
        assert_eq!(*full.trims.borrow(), Vec::<usize>::new());
    }

    #[test]
    fn kept_buffers_are_freed_as_far_as_a_fetch_needs_their_room() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5)])]);
        let mut parts = partitions([(0, at("orders", 10))]);
        let ledger = ScriptedPools::reading(&[(64 * MIB, 8 * MIB)]);
        let out = plan(&mut parts, &meta, Instant::now(), Some(&ledger));
        assert_eq!(sent(&out), vec![(1, StreamKind::Main, vec![0])]);
        assert_eq!(out.fetches[0].max_bytes, MIB);
        assert_eq!(*ledger.trims.borrow(), vec![MIB]);
    }

    #[test]
    fn records_of_paused_partitions_give_way_to_a_fetch_the_budget_has_no_room_for() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5), (1, 1, 5)])]);
        let mut paused = at("orders", 100);
        let size = buffer_one(&mut paused.main, 100);
        paused.paused = true;
        let mut parts = partitions([(0, paused), (1, at("orders", 10))]);
        // Full before the paused records are dropped, empty after.
        let ledger = ScriptedPools::reading(&[(64 * MIB, 0), (0, 0)]);
        let out = plan(&mut parts, &meta, Instant::now(), Some(&ledger));
        assert_eq!(out.freed, size);
        let p = &parts[&tp("orders", 0)];
        assert!(!p.has_records());
        assert_eq!((p.main.buffered_bytes, p.main.fetch_offset), (0, Some(100)));
        // Sent with the room the dropped records left (not the floor a starving one gets).
        assert_eq!(sent(&out), vec![(1, StreamKind::Main, vec![1])]);
        assert_eq!((out.fetches[0].max_bytes, out.reserved), (MIB, MIB));
        assert!(!out.waits_for_room);
    }

    #[test]
    fn an_oversized_first_batch_goes_first_then_the_least_recently_answered() {
        let meta = metadata(&[(
            "orders",
            codes::NONE,
            &[(0, 1, 5), (1, 1, 5), (2, 1, 5), (3, 1, 5)],
        )]);
        // (answered_at, oversized) per partition.
        let streams = [(5, false), (2, false), (9, true), (0, false)];
        let mut parts = partitions(streams.iter().enumerate().map(|(i, &(at_, big))| {
            let mut p = at("orders", 10);
            p.main.answered_at = at_;
            p.main.oversized = big;
            (i as i32, p)
        }));
        let out = plan(&mut parts, &meta, Instant::now(), None);
        assert_eq!(sent(&out), vec![(1, StreamKind::Main, vec![2, 3, 1, 0])]);
    }

    #[test]
    fn a_stream_without_progress_for_task_timeout_is_stuck_and_a_paused_or_full_one_is_not() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5), (1, 1, 5), (2, 1, 5)])]);
        let mut failing = at("orders", 10);
        failing.main.failed("connection refused".into(), false);
        let mut paused = at("orders", 20);
        paused.paused = true;
        let mut full = at("orders", 30);
        full.main.buffered_bytes = 2 * MIB;
        let mut parts = partitions([(0, failing), (1, paused), (2, full)]);
        let now = Instant::now();
        // Not yet: task.timeout.ms has not passed.
        let out = plan(&mut parts, &meta, now, None);
        assert_eq!(out.errors, Vec::<Error>::new());
        for p in parts.values_mut() {
            p.main.in_flight = false;
        }
        let later = now + TASK_TIMEOUT + Duration::from_secs(1);
        let out = plan(&mut parts, &meta, later, None);
        assert_eq!(
            out.errors,
            vec![Error::PartitionStuck {
                partition: ErrorPartition {
                    topic: "orders".into(),
                    partition: 0,
                },
                cause: "connection refused".into(),
            }]
        );
        // Idle time restarts their clocks.
        let clocks: Vec<bool> = parts
            .values()
            .map(|p| p.main.last_progress == later)
            .collect();
        assert_eq!(clocks, vec![false, true, true]);
    }

    #[test]
    fn a_full_partition_shortens_the_wait_of_its_brokers_fetch() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5), (1, 1, 5), (2, 2, 5)])]);
        let mut full = at("orders", 10);
        full.main.buffered_bytes = 2 * MIB;
        let mut parts = partitions([(0, full), (1, at("orders", 20)), (2, at("orders", 30))]);
        let out = plan(&mut parts, &meta, Instant::now(), None);
        let waits: Vec<(i32, Vec<i32>, Duration)> = out
            .fetches
            .iter()
            .map(|f| {
                let ids = f.partitions.iter().map(|c| c.tp.partition).collect();
                (f.broker, ids, f.wait)
            })
            .collect();
        assert_eq!(
            waits,
            vec![(1, vec![1], HELD_BACK_FETCH_WAIT), (2, vec![2], WAIT)]
        );
    }

    #[test]
    fn a_position_lookup_is_sent_only_while_none_is_in_flight() {
        let meta = metadata(&[("orders", codes::NONE, &[(0, 1, 5)])]);
        let fresh = || {
            partitions([(
                0,
                PartitionState::new("orders", PositionLookup::Latest, backoff()),
            )])
        };
        let busy = HashSet::new();
        for in_flight in [false, true] {
            let mut parts = fresh();
            let t = Turn {
                lookup_in_flight: in_flight,
                ..turn(&meta, &busy, Instant::now())
            };
            let out = plan_fetches(
                &mut parts,
                &mut HashSet::new(),
                &t,
                &SETTINGS,
                &ScriptedPools::empty(),
            );
            let expected = if in_flight {
                vec![]
            } else {
                vec![(tp("orders", 0), PositionLookup::Latest, 0)]
            };
            assert_eq!(out.lookups, expected);
            assert_eq!(parts[&tp("orders", 0)].lookup_in_flight, !in_flight);
            assert!(out.fetches.is_empty());
        }
    }

    #[test]
    fn a_fetch_waits_briefly_only_while_a_partition_of_its_broker_is_held_back() {
        let configured = Duration::from_millis(500);
        assert_eq!(fetch_wait(configured, false), configured);
        assert_eq!(fetch_wait(configured, true), HELD_BACK_FETCH_WAIT);
        // A configured wait shorter than that stays as it is.
        let short = Duration::from_millis(10);
        assert_eq!(fetch_wait(short, true), short);
        assert_eq!(fetch_wait(Duration::ZERO, true), Duration::ZERO);
    }
}

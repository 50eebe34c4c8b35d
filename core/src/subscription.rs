//! The consumer's group side: subscribe, the rebalance listener, commits, and the steps `poll()`
//! runs on the caller's thread (rejoin, callbacks, auto-commit).
//!
//! Listener callbacks run only here, on the thread that called `poll()`, `close()` or
//! `unsubscribe()`, never on a library thread; no lock is held while they run, so a callback
//! may call back into the consumer (commit inside `on_partitions_revoked`).
//!
//! The steps are async functions: the blocking API waits for them on the caller's thread
//! ([`crate::engine`]), the async front ([`crate::aio`]) awaits them inside `recv()`. Which
//! listener they call is a [`Dispatch`]: the blocking [`RebalanceListener`] or an async one.
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::backoff::{Deadline, Retry};
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::fetch::PositionLookup;
use crate::group::coordinator::{GroupDriver, JoinInput, JoinOutcome};
use crate::group::member::MemberState;
use crate::group::metadata_snapshot::{AssignmentBasis, MetadataSnapshot};
use crate::group::rebalance::{accept_join_outcome, changes_after_join, to_revoke_before_join};
use crate::offsets::OffsetAndMetadata;
use crate::TopicPartition;

/// Called when the consumer's assignment changes. Every method runs on the thread that called
/// `poll()`, `close()` or `unsubscribe()`. An error returned by a callback does not stop the
/// assignment change; it comes out of that `poll()` afterwards as [`Error::Callback`].
pub trait RebalanceListener: Send {
    /// Partitions this member gives up. Commit their offsets here if you commit by hand.
    fn on_partitions_revoked(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions newly given to this member (called once per rebalance, possibly empty).
    fn on_partitions_assigned(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Learner assignments (`partition.assignment.strategy=learner-sticky`): partitions this
    /// member will own once it is ready, while their current owners keep consuming them. Warm
    /// up here (load state, caches, connections); returning `Ok` says this member is ready, and
    /// it rejoins so the group moves them to it. An error leaves it not ready (the owners keep
    /// the partitions) and comes out of `poll()`; a later `poll()` calls it again for them after
    /// a backoff (`retry.backoff.ms` growing to `retry.backoff.max.ms`). It runs inside `poll()`:
    /// keep it within `max.poll.interval.ms`. Without learner assignments it is never called.
    fn on_partitions_learning(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions that may already belong to another member (the generation was lost, e.g.
    /// after `max.poll.interval.ms`): committing them is no longer possible.
    fn on_partitions_lost(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        self.on_partitions_revoked(consumer, partitions)
    }
}

pub use crate::offsets::CommitResults;
/// Called on the polling thread when an asynchronous commit completes.
pub type CommitCallback = Box<dyn FnOnce(Result<CommitResults>) + Send>;

pub(crate) enum Topics {
    Names(BTreeSet<String>),
    Pattern(Regex),
}

/// A rebalance listener callback, named for [`Dispatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callback {
    Revoked,
    Assigned,
    Learning,
    Lost,
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs the listener's callbacks for the group steps: the blocking listener, or the async
/// front's. Returns the callback's error, if any.
pub(crate) trait Dispatch: Send {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>>;
}

/// The blocking API's listener, kept in the group state.
pub(crate) struct BlockingListener;

impl Dispatch for BlockingListener {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>> {
        let r = consumer.with_listener(|l, c| match callback {
            Callback::Revoked => l.on_partitions_revoked(c, partitions),
            Callback::Assigned => l.on_partitions_assigned(c, partitions),
            Callback::Learning => l.on_partitions_learning(c, partitions),
            Callback::Lost => l.on_partitions_lost(c, partitions),
        });
        Box::pin(std::future::ready(r))
    }
}

/// The group member's state on the caller's side.
pub(crate) struct GroupLocal {
    pub driver: Arc<GroupDriver>,
    pub topics: Topics,
    /// The topics of the current subscription (for a pattern, those that matched).
    pub subscribed: BTreeSet<String>,
    pub listener: Option<Box<dyn RebalanceListener>>,
    pub join: Option<tokio::task::JoinHandle<Result<JoinOutcome>>>,
    pub join_retry_at: Instant,
    pub owned: BTreeSet<TopicPartition>,
    pub next_auto_commit: Instant,
    pub last_committed: HashMap<TopicPartition, OffsetAndMetadata>,
    /// Learner assignments: the partitions this member learns, and those of them it is ready
    /// to own (its `on_partitions_learning` returned `Ok`).
    pub learning: BTreeSet<TopicPartition>,
    pub ready: BTreeSet<TopicPartition>,
    /// Learned partitions whose callback failed, called again at `learning_retry_at`.
    pub unready: BTreeSet<TopicPartition>,
    pub learning_retry: Retry,
    pub learning_retry_at: Instant,
    /// What the current assignment was computed from, to rejoin when the subscribed topics
    /// change under it (partitions added, a topic created or deleted).
    pub assignment_basis: AssignmentBasis,
}

/// What the caller's thread must do after looking at the group (outside the lock).
enum Step {
    Lost(BTreeSet<TopicPartition>),
    Revoke(BTreeSet<TopicPartition>),
    Join(Box<JoinOutcome>),
    None,
}

impl Consumer {
    /// Joins the consumer group `group.id` and reads the partitions the group assigns, of
    /// `topics`. Replaces any earlier subscription.
    pub fn subscribe(
        &self,
        topics: &[&str],
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        let mut names = BTreeSet::new();
        for t in topics {
            if t.is_empty() {
                return Err(Error::InvalidArgument("topic name is empty".into()));
            }
            names.insert(t.to_string());
        }
        if names.is_empty() {
            return Err(Error::InvalidArgument(
                "subscribe needs at least one topic; use unsubscribe() to stop".into(),
            ));
        }
        self.set_subscription(Topics::Names(names), listener)
    }

    /// Subscribes to every topic whose whole name matches `pattern` (a regular expression);
    /// topics created later that match are picked up when metadata is refreshed.
    pub fn subscribe_pattern(
        &self,
        pattern: &str,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        let re = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| Error::InvalidArgument(format!("bad topic pattern `{pattern}`: {e}")))?;
        self.set_subscription(Topics::Pattern(re), listener)
    }

    fn set_subscription(
        &self,
        topics: Topics,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.check_open()?;
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            if !self.shared.lock().partitions.is_empty() {
                return Err(Error::IllegalState(
                    "the consumer has a manual assignment; call assign(&[]) before subscribe()"
                        .into(),
                ));
            }
            let shared = self.shared.clone();
            let driver = GroupDriver::new(
                self.shared.cluster.clone(),
                self.shared.config.clone(),
                Arc::new(move || shared.data_ready.notify_all()),
            )?;
            self.runtime()?.spawn(driver.clone().heartbeat_loop());
            *g = Some(GroupLocal {
                driver,
                topics: Topics::Names(BTreeSet::new()),
                subscribed: BTreeSet::new(),
                listener: None,
                join: None,
                join_retry_at: Instant::now(),
                owned: BTreeSet::new(),
                next_auto_commit: Instant::now() + self.shared.config.auto_commit_interval,
                last_committed: HashMap::new(),
                learning: BTreeSet::new(),
                ready: BTreeSet::new(),
                unready: BTreeSet::new(),
                learning_retry: Retry::new(self.shared.backoff()),
                learning_retry_at: Instant::now(),
                assignment_basis: AssignmentBasis::None,
            });
        }
        let local = g.as_mut().expect("created above");
        match &topics {
            Topics::Names(n) => {
                self.shared.cluster.set_interest(n.clone(), false);
                local.subscribed = n.clone();
            }
            Topics::Pattern(_) => {
                self.shared.cluster.set_interest(BTreeSet::new(), true);
                local.subscribed = BTreeSet::new();
            }
        }
        local.topics = topics;
        if listener.is_some() {
            local.listener = listener;
        }
        local
            .driver
            .membership()
            .request_rejoin("the subscription changed");
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The topics the consumer is subscribed to (for a pattern, those that matched so far).
    pub fn subscription(&self) -> Vec<String> {
        let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        g.as_ref()
            .map(|l| l.subscribed.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Leaves the group: commits (with auto-commit), revokes everything through the listener,
    /// sends LeaveGroup.
    pub fn unsubscribe(&self) -> Result<()> {
        self.check_open()?;
        let callback_error = self.leave_group_now(
            "the consumer unsubscribed from all topics",
            self.api_deadline(None),
            true,
        );
        self.drop_group();
        callback_error.map_or(Ok(()), Err)
    }

    /// After leaving: forgets the group and its topics.
    pub(crate) fn drop_group(&self) {
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(local) = g.take() {
            local.driver.close();
            if let Some(j) = local.join {
                j.abort();
            }
        }
        self.shared.cluster.set_interest(BTreeSet::new(), false);
    }

    /// The member's group metadata: (group id, generation id, member id, group instance id).
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let local = g.as_ref()?;
        let m = local.driver.membership();
        Some(GroupMetadata {
            group_id: local.driver.group_id.clone(),
            generation_id: m.generation.generation_id,
            member_id: m.generation.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            protocol: m.generation.protocol.clone(),
        })
    }

    /// Asks for a rebalance; the next `poll()` starts it.
    pub fn enforce_rebalance(&self, reason: &str) -> Result<()> {
        self.check_open()?;
        let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let local = g.as_ref().ok_or_else(|| {
            Error::IllegalState("enforce_rebalance() needs a subscription".into())
        })?;
        local
            .driver
            .membership()
            .request_rejoin(format!("enforced: {reason}"));
        Ok(())
    }

    fn driver(&self) -> Option<Arc<GroupDriver>> {
        self.group
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|l| l.driver.clone())
    }

    /// A driver for commits: the group's, or a standalone one for a manually assigned consumer
    /// with a `group.id` (it commits as a simple consumer, outside any generation).
    fn commit_driver(&self) -> Result<Arc<GroupDriver>> {
        if let Some(d) = self.driver() {
            return Ok(d);
        }
        let mut s = self
            .simple_committer
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(d) = s.as_ref() {
            return Ok(d.clone());
        }
        if self.shared.config.group_id.is_none() {
            return Err(Error::IllegalState(
                "committing offsets needs group.id".into(),
            ));
        }
        let d =
            GroupDriver::simple_committer(self.shared.cluster.clone(), self.shared.config.clone())?;
        *s = Some(d.clone());
        Ok(d)
    }

    /// The offsets `commit` uses when none are given: the consumed position of every assigned
    /// partition, i.e. the offset after the last record `poll()` returned. A partition with
    /// unfinished recovery ranges (KIP-333) gives the low-water mark over them and the main
    /// stream, with the recovery token as metadata.
    pub fn consumed_offsets(&self) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        let assigned: Vec<TopicPartition> = self.assignment();
        self.shared.commit_offsets(assigned.iter())
    }

    /// KIP-333: an explicit commit must not pass a partition's unfinished backlog, nor claim
    /// more than the offset asked: see [`crate::fetch::PartitionState::commit_offset_asked`].
    fn within_backlog(
        &self,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
    ) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        if !self.shared.config.enable_parallel_rebalance {
            return offsets;
        }
        let st = self.shared.lock();
        offsets
            .into_iter()
            .map(|(tp, om)| match st.partitions.get(&tp) {
                Some(p) => {
                    let asked = om.offset;
                    let om = p.commit_offset_asked(om);
                    if om.offset != asked {
                        tracing::debug!(partition = %tp, asked, committed = om.offset, token = %om.metadata, "commit held at the recovery low-water mark");
                    }
                    (tp, om)
                }
                None => (tp, om),
            })
            .collect()
    }

    /// Commits `offsets` (or the consumed positions) and waits for the answer. A failed
    /// partition makes the whole call fail with that partition's error; see
    /// [`Consumer::commit_sync_detailed`] for per-partition results.
    pub fn commit_sync(
        &self,
        offsets: Option<&[(TopicPartition, OffsetAndMetadata)]>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        for (_, _, r) in self.commit_sync_detailed(offsets, timeout)? {
            r?;
        }
        Ok(())
    }

    pub fn commit_sync_detailed(
        &self,
        offsets: Option<&[(TopicPartition, OffsetAndMetadata)]>,
        timeout: Option<Duration>,
    ) -> Result<CommitResults> {
        self.check_open()?;
        let offsets = self.offsets_to_commit(offsets)?;
        let deadline = self.api_deadline(timeout);
        self.block_on(self.commit_now(offsets, deadline))?
    }

    /// Commits `offsets` (already checked) and waits for the answer.
    pub(crate) async fn commit_now(
        &self,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        deadline: Deadline,
    ) -> Result<CommitResults> {
        let driver = self.commit_driver()?;
        self.run_commit_callbacks();
        let res = driver.commit(&offsets, deadline).await?;
        self.note_committed(&res);
        Ok(res)
    }

    /// The offsets an explicit commit sends: those given (checked, held at a recovery
    /// backlog), or the consumed positions.
    pub(crate) fn offsets_to_commit(
        &self,
        offsets: Option<&[(TopicPartition, OffsetAndMetadata)]>,
    ) -> Result<Vec<(TopicPartition, OffsetAndMetadata)>> {
        Ok(match offsets {
            Some(o) => {
                validate_offsets(o)?;
                self.within_backlog(o.to_vec())
            }
            None => self.consumed_offsets(),
        })
    }

    /// Sends a commit and returns at once; `callback` runs on the polling thread (inside a
    /// later `poll()`, `commit_sync()` or `close()`) with the result.
    pub fn commit_async(
        &self,
        offsets: Option<Vec<(TopicPartition, OffsetAndMetadata)>>,
        callback: Option<CommitCallback>,
    ) -> Result<()> {
        self.check_open()?;
        let offsets = match offsets {
            Some(o) => {
                validate_offsets(&o)?;
                self.within_backlog(o)
            }
            None => self.consumed_offsets(),
        };
        let driver = self.commit_driver()?;
        // The result waits for the caller's thread (subscribed or manually assigned alike):
        // callbacks never run on the library's I/O threads. Auto-commit (no callback) sends it
        // too, so what the group took is remembered there.
        let tx = self.commits_tx.clone();
        let shared = self.shared.clone();
        driver.commit_async(
            self.runtime()?,
            offsets,
            Box::new(move |res| {
                let _ = tx.send((callback, res));
                shared.data_ready.notify_all();
            }),
        );
        Ok(())
    }

    /// Runs the callbacks of finished asynchronous commits, on this (the caller's) thread.
    pub(crate) fn run_commit_callbacks(&self) {
        let done: Vec<_> = self
            .commits_done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .try_iter()
            .collect();
        for (cb, res) in done {
            if let Ok(r) = &res {
                self.note_committed(r);
            }
            if let Some(cb) = cb {
                cb(res);
            }
        }
    }

    /// Remembers what was committed, so auto-commit sends only what changed since.
    fn note_committed(&self, res: &CommitResults) {
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = g.as_mut() {
            for (tp, om, r) in res {
                // A late answer for a partition given up since is not this member's to keep.
                if r.is_ok() && l.owned.contains(tp) {
                    l.last_committed.insert(tp.clone(), om.clone());
                }
            }
        }
    }

    /// Runs `f` with the listener taken out of the lock, so the callback may call back into the
    /// consumer. Returns the callback's error, if any.
    pub(crate) fn with_listener(
        &self,
        f: impl FnOnce(&mut dyn RebalanceListener, &Consumer) -> Result<()>,
    ) -> Option<Error> {
        let listener = {
            let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            g.as_mut().and_then(|l| l.listener.take())
        };
        let mut listener = listener?;
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(listener.as_mut(), self)));
        {
            let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = g.as_mut() {
                if l.listener.is_none() {
                    l.listener = Some(listener);
                }
            }
        }
        match r {
            Ok(Ok(())) => None,
            Ok(Err(Error::Callback(m))) => Some(Error::Callback(m)),
            Ok(Err(e)) => Some(Error::Callback(e.to_string())),
            Err(_) => Some(Error::Callback("the rebalance listener panicked".into())),
        }
    }

    /// Auto-commit of the consumed positions (with recovery tokens) of `partitions` before they
    /// are revoked.
    async fn commit_before_revoke(
        &self,
        partitions: &BTreeSet<TopicPartition>,
        deadline: Deadline,
    ) {
        if !self.shared.config.enable_auto_commit || partitions.is_empty() {
            return;
        }
        let offsets = self.shared.commit_offsets(partitions.iter());
        if let Ok(d) = self.commit_driver() {
            match d.commit(&offsets, deadline).await {
                Ok(res) => {
                    for (tp, _, r) in &res {
                        if let Err(e) = r {
                            tracing::warn!(partition = %tp, error = %e, "auto-commit before revocation failed");
                        }
                    }
                    self.note_committed(&res);
                }
                Err(e) => tracing::warn!(error = %e, "auto-commit before revocation failed"),
            }
        }
    }

    /// Revokes `partitions`: auto-commit, the listener, then stop fetching them.
    async fn revoke(
        &self,
        d: &mut dyn Dispatch,
        partitions: BTreeSet<TopicPartition>,
        deadline: Deadline,
        errors: &mut Option<Error>,
    ) {
        self.commit_before_revoke(&partitions, deadline).await;
        let list: Vec<TopicPartition> = partitions.iter().cloned().collect();
        if let Some(e) = d.call(self, Callback::Revoked, &list).await {
            errors.get_or_insert(e);
        }
        self.shared.remove_partitions(partitions.iter());
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = g.as_mut() {
            for tp in &partitions {
                l.owned.remove(tp);
                l.last_committed.remove(tp);
            }
        }
    }

    async fn lose(
        &self,
        d: &mut dyn Dispatch,
        partitions: BTreeSet<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let list: Vec<TopicPartition> = partitions.iter().cloned().collect();
        if !list.is_empty() {
            if let Some(e) = d.call(self, Callback::Lost, &list).await {
                errors.get_or_insert(e);
            }
        }
        self.shared.remove_partitions(partitions.iter());
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = g.as_mut() {
            for tp in &partitions {
                l.owned.remove(tp);
                l.last_committed.remove(tp);
            }
        }
    }

    /// The group steps of `poll()`, on the caller's thread. Returns an error that `poll()`
    /// reports (a callback's error after the assignment change completed, or a fatal one).
    pub(crate) fn group_poll(&self) -> Result<()> {
        if self.driver().is_none() {
            return Ok(());
        }
        self.block_on(self.group_steps(&mut BlockingListener))?
    }

    /// The group steps of a `poll()` or `recv()`, calling the listener through `d`.
    pub(crate) async fn group_steps(&self, d: &mut dyn Dispatch) -> Result<()> {
        let Some(driver) = self.driver() else {
            return Ok(());
        };
        driver.touch_poll();
        self.run_commit_callbacks();
        if let Some(e) = driver.membership().fatal.clone() {
            return Err(e);
        }
        // An error the member went on from (a failed heartbeat) comes out of one poll().
        let mut errors: Option<Error> = driver.membership().error.take();
        let deadline = Deadline::after(self.shared.config.common.default_api_timeout);
        // Up to a few steps per poll: lost partitions, then a finished join, then a new join.
        for _ in 0..4 {
            let step = self.next_group_step(&driver)?;
            match step {
                Step::None => break,
                Step::Lost(parts) => self.lose(d, parts, &mut errors).await,
                Step::Revoke(parts) => self.revoke(d, parts, deadline, &mut errors).await,
                Step::Join(outcome) => self.apply_join(d, *outcome, deadline, &mut errors).await,
            }
        }
        self.retry_learning(d, &mut errors).await;
        self.maybe_auto_commit(&driver);
        errors.map_or(Ok(()), Err)
    }

    fn next_group_step(&self, driver: &Arc<GroupDriver>) -> Result<Step> {
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let Some(local) = g.as_mut() else {
            return Ok(Step::None);
        };
        {
            let mut m = driver.membership();
            if m.partitions_lost {
                m.partitions_lost = false;
                let lost = std::mem::take(&mut local.owned);
                drop(m);
                if !lost.is_empty() {
                    return Ok(Step::Lost(lost));
                }
            }
        }
        // A pattern subscription follows the cluster's topics.
        if let Topics::Pattern(re) = &local.topics {
            let meta = self.shared.cluster.metadata();
            if meta.fetched_at.is_some() {
                let matched: BTreeSet<String> = meta
                    .topics
                    .values()
                    .filter(|t| !(t.is_internal && self.shared.config.exclude_internal_topics))
                    .filter(|t| re.is_match(&t.name))
                    .map(|t| t.name.clone())
                    .collect();
                if matched != local.subscribed {
                    local.subscribed = matched;
                    driver
                        .membership()
                        .request_rejoin("the topics matching the subscribed pattern changed");
                }
            }
        }
        // The assignment no longer covers what the subscribed topics have: rejoin so the leader
        // assigns what exists now (the Java client's metadata snapshot comparison).
        if let Some(reason) = local
            .assignment_basis
            .check(&self.shared.cluster.metadata())
        {
            driver.membership().request_rejoin(reason);
        }
        if let Some(join) = &local.join {
            if !join.is_finished() {
                return Ok(Step::None);
            }
            let join = local.join.take().expect("checked above");
            let current = driver.membership().generation.clone();
            // Finished: its output is there to take, without waiting on any runtime.
            let Some(joined) = crate::engine::output_now(join) else {
                return Ok(Step::None);
            };
            match joined {
                Ok(Ok(outcome)) if accept_join_outcome(&current, &outcome.generation) => {
                    return Ok(Step::Join(Box::new(outcome)));
                }
                Ok(Ok(outcome)) => {
                    // The membership was reset after the join finished (max.poll.interval.ms,
                    // a stale generation): its assignment belongs to a generation this member
                    // left. Drop it and rejoin (Java's resetStateAndRejoin).
                    tracing::info!(
                        group = %driver.group_id,
                        joined = outcome.generation.generation_id,
                        now = current.generation_id,
                        reason = %driver.membership().rejoin_reason,
                        "discarding the assignment of a generation this member has left; rejoining"
                    );
                    let mut m = driver.membership();
                    if !m.rejoin_needed {
                        m.request_rejoin(
                            "the generation was reset before its assignment was applied",
                        );
                    }
                }
                Ok(Err(e))
                    if e.is_fatal() || matches!(e, Error::Corrupt(_) | Error::Config { .. }) =>
                {
                    driver.membership().fatal = Some(e.clone());
                    return Err(e);
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "joining the group failed; retrying");
                    local.join_retry_at = Instant::now() + self.shared.config.common.retry_backoff;
                    return Ok(Step::None);
                }
                Err(_) => return Ok(Step::None),
            }
        }
        let (needed, state, reason) = {
            let m = driver.membership();
            (m.rejoin_needed, m.state, m.rejoin_reason.clone())
        };
        if !(needed || state == MemberState::Unjoined) || Instant::now() < local.join_retry_at {
            return Ok(Step::None);
        }
        if local.subscribed.is_empty() && matches!(local.topics, Topics::Pattern(_)) {
            // Nothing matches yet: wait for metadata rather than join with no topics.
            return Ok(Step::None);
        }
        // Before joining (Java's onJoinPrepare): eager revokes everything; cooperative only
        // the partitions of topics no longer subscribed. The protocol is this member's own,
        // decided from the assignors it offers, not the one the group chose last time.
        let to_revoke =
            to_revoke_before_join(driver.rebalance_protocol(), &local.owned, &local.subscribed);
        if !to_revoke.is_empty() {
            return Ok(Step::Revoke(to_revoke));
        }
        let input = JoinInput {
            topics: local.subscribed.iter().cloned().collect(),
            owned: local.owned.clone(),
            ready: local.ready.clone(),
            reason,
        };
        {
            let mut m = driver.membership();
            m.state = MemberState::PreparingRebalance;
            m.rejoin_needed = false;
        }
        local.assignment_basis = AssignmentBasis::None;
        let shared = self.shared.clone();
        let d = driver.clone();
        local.join = Some(self.runtime()?.spawn(async move {
            let topics = input.topics.clone();
            let mut r = d.join(input).await;
            if let Ok(outcome) = &mut r {
                if outcome.assigned_from.is_none() {
                    let wait = shared.config.common.retry_backoff_max;
                    outcome.assigned_from =
                        MetadataSnapshot::after_join(&shared.cluster, &topics, wait).await;
                }
            }
            shared.data_ready.notify_all();
            r
        }));
        Ok(Step::None)
    }

    async fn apply_join(
        &self,
        d: &mut dyn Dispatch,
        outcome: JoinOutcome,
        deadline: Deadline,
        errors: &mut Option<Error>,
    ) {
        let Some(driver) = self.driver() else { return };
        let owned = {
            let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            g.as_ref().map(|l| l.owned.clone()).unwrap_or_default()
        };
        let changes = changes_after_join(
            driver.rebalance_protocol(),
            outcome.protocol,
            &owned,
            &outcome.assigned,
        );
        if !changes.lose.is_empty() {
            // Kept through a join whose (eager) assignor may have handed them to another member
            // already: no commit may go out for them.
            tracing::warn!(partitions = ?changes.lose, "partitions kept through an eager rebalance are lost");
            self.lose(d, changes.lose, errors).await;
        }
        if !changes.revoke.is_empty() {
            // KIP-429: give these up now, then rejoin so the group can hand them on.
            self.revoke(d, changes.revoke, deadline, errors).await;
        }
        if changes.rejoin {
            driver
                .membership()
                .request_rejoin("need to revoke partitions and re-join");
        }
        let added = changes.add;
        self.shared
            .add_partitions(added.iter(), PositionLookup::Committed);
        {
            let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = g.as_mut() {
                l.owned.extend(added.iter().cloned());
                l.assignment_basis = AssignmentBasis::after_join(
                    outcome.assigned_from,
                    l.subscribed.clone(),
                    Instant::now(),
                );
            }
        }
        let list: Vec<TopicPartition> = added.into_iter().collect();
        if let Some(e) = d.call(self, Callback::Assigned, &list).await {
            errors.get_or_insert(e);
        }
        self.apply_learning(d, outcome.learning, errors).await;
    }

    /// Learner assignments: keeps the partitions this member learns, warms up for the new ones
    /// through the listener, and once ready rejoins so the group moves them here.
    async fn apply_learning(
        &self,
        d: &mut dyn Dispatch,
        learning: BTreeSet<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let new: Vec<TopicPartition> = {
            let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            let Some(l) = g.as_mut() else { return };
            l.ready.retain(|tp| learning.contains(tp));
            l.unready.retain(|tp| learning.contains(tp));
            let new = learning.difference(&l.learning).cloned().collect();
            l.learning = learning;
            new
        };
        if new.is_empty() {
            return;
        }
        tracing::info!(partitions = ?new, "learning partitions before their owners hand them over");
        // Part of warming up: the metadata (and so the leaders) of what this member will fetch.
        self.shared
            .cluster
            .add_interest(new.iter().map(|tp| &tp.topic));
        self.warm_up(d, new, errors).await;
    }

    /// Runs `on_partitions_learning` for `partitions`. Ready: rejoin so the group moves them
    /// here. Not ready (the callback failed): its error comes out of this `poll()`, and a later
    /// `poll()` calls it again after a backoff (KIP-580), so a transient failure does not leave
    /// the partitions with their old owners for good.
    async fn warm_up(
        &self,
        d: &mut dyn Dispatch,
        partitions: Vec<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let result = d.call(self, Callback::Learning, &partitions).await;
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let Some(l) = g.as_mut() else { return };
        // A rebalance inside the callback may have changed what this member learns.
        let still: Vec<TopicPartition> = partitions
            .into_iter()
            .filter(|tp| l.learning.contains(tp))
            .collect();
        match result {
            None => {
                l.learning_retry.succeeded();
                for tp in &still {
                    l.unready.remove(tp);
                }
                l.ready.extend(still);
                drop(g);
                if let Some(d) = self.driver() {
                    d.membership()
                        .request_rejoin("learned partitions are ready to be handed over");
                }
            }
            Some(e) => {
                l.unready.extend(still);
                l.learning_retry_at = Instant::now() + l.learning_retry.failed();
                errors.get_or_insert(e);
            }
        }
    }

    /// Calls `on_partitions_learning` again for partitions it was not ready for, once their
    /// backoff has passed.
    async fn retry_learning(&self, d: &mut dyn Dispatch, errors: &mut Option<Error>) {
        let due: Vec<TopicPartition> = {
            let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            match g.as_ref() {
                Some(l) if !l.unready.is_empty() && Instant::now() >= l.learning_retry_at => {
                    l.unready.iter().cloned().collect()
                }
                _ => return,
            }
        };
        self.warm_up(d, due, errors).await;
    }

    /// Auto-commit of what the previous `poll()` returned (nothing unprocessed is committed).
    fn maybe_auto_commit(&self, driver: &Arc<GroupDriver>) {
        if !self.shared.config.enable_auto_commit {
            return;
        }
        let offsets = {
            let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            let Some(local) = g.as_mut() else { return };
            if Instant::now() < local.next_auto_commit
                || driver.membership().stable_generation().is_none()
            {
                return;
            }
            local.next_auto_commit = Instant::now() + self.shared.config.auto_commit_interval;
            let changed: Vec<(TopicPartition, OffsetAndMetadata)> = self
                .shared
                .commit_offsets(local.owned.iter())
                .into_iter()
                .filter(|(tp, om)| local.last_committed.get(tp) != Some(om))
                .collect();
            // `last_committed` is updated when the group has taken them (note_committed): a
            // failed auto-commit is sent again at the next interval.
            changed
        };
        if !offsets.is_empty() {
            let _ = self.commit_async(Some(offsets), None);
        }
    }

    /// Close/unsubscribe: commit, revoke through the listener (if `callbacks`), leave.
    pub(crate) fn leave_group_now(
        &self,
        reason: &str,
        deadline: Deadline,
        callbacks: bool,
    ) -> Option<Error> {
        self.driver()?;
        let mut blocking = BlockingListener;
        let listener = callbacks.then_some(&mut blocking as &mut dyn Dispatch);
        self.block_on(self.leave_group(reason, deadline, listener))
            .unwrap_or(None)
    }

    /// Close/unsubscribe: commit, revoke through `listener` (none: no callbacks), leave.
    pub(crate) async fn leave_group(
        &self,
        reason: &str,
        deadline: Deadline,
        listener: Option<&mut dyn Dispatch>,
    ) -> Option<Error> {
        let driver = self.driver()?;
        let mut errors = None;
        let (owned, lost) = {
            let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            let owned = g.as_ref().map(|l| l.owned.clone()).unwrap_or_default();
            let m = driver.membership();
            (owned, m.partitions_lost || m.generation.generation_id < 0)
        };
        match listener {
            Some(d) if lost => self.lose(d, owned, &mut errors).await,
            Some(d) => self.revoke(d, owned, deadline, &mut errors).await,
            None if !lost => {
                self.commit_before_revoke(&owned, deadline).await;
                self.shared.remove_partitions(owned.iter());
            }
            None => {}
        }
        // As the Java client's close: the asynchronous commits in flight complete (within the
        // deadline) and their callbacks run here.
        let _ = driver.async_commits_done(deadline).await;
        self.run_commit_callbacks();
        if self.shared.config.leave_group_on_close || reason.contains("unsubscribed") {
            driver.leave_group(reason, deadline).await;
        }
        driver.close();
        errors
    }
}

/// The member's place in its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol: Option<String>,
}

fn validate_offsets(offsets: &[(TopicPartition, OffsetAndMetadata)]) -> Result<()> {
    for (tp, om) in offsets {
        if om.offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "commit offset for {tp} must be >= 0, got {}",
                om.offset
            )));
        }
    }
    Ok(())
}

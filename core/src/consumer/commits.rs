//! Commits: the consumer's commit API (`commit_sync`, `commit_async`), auto-commit (of what the
//! previous `poll()` returned, and before partitions are revoked), and the OffsetCommit requests
//! themselves, built and sent through the member's generation with the asynchronous ones kept in
//! order.
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::{Deadline, Retry};
use crate::consumer::Consumer;
use crate::error::{codes, Error, Result};
use crate::group::assignor::RebalanceProtocol;
use crate::group::classic::Classic;
use crate::group::coordinator::GroupDriver;
use crate::group::member::{Generation, Membership, Next};
use crate::offsets::{AsyncCommitDone, MergedCommit};
use crate::protocol;
use crate::protocol::msg::OffsetCommitRequest;
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;
use tracing::Instrument;

pub use crate::offsets::CommitResults;
/// Called on the polling thread when an asynchronous commit completes.
pub type CommitCallback = Box<dyn FnOnce(Result<CommitResults>) + Send>;

/// The shortest wait for one OffsetCommit attempt, however little of the caller's deadline is
/// left: an attempt given a millisecond only times out while the broker still applies it.
const MIN_COMMIT_ATTEMPT: Duration = Duration::from_millis(100);

impl Consumer {
    /// A driver for commits: the group's, or a standalone one for a manually assigned consumer
    /// with a `group.id` (it commits as a simple consumer, outside any generation).
    pub(super) fn commit_driver(&self) -> Result<Arc<GroupDriver>> {
        if let Some(d) = self.driver() {
            return Ok(d);
        }
        let mut s = self.simple_committer.lock().unpoisoned();
        if let Some(d) = s.as_ref() {
            return Ok(d.clone());
        }
        if self.shared.config.group_id.is_none() {
            return Err(Error::IllegalState(
                "committing offsets needs group.id".into(),
            ));
        }
        let (d, owner) =
            // Its member never joins, so no protocol speaks for it: any will do.
            GroupDriver::simple_committer(
                self.shared.cluster.clone(),
                self.shared.config.clone(),
                Arc::new(Classic),
            )?;
        super::driver_task::serve(self.runtime()?, Arc::downgrade(&d), owner);
        self.give_leader_epochs(&d);
        self.give_instruments(&d);
        *s = Some(d.clone());
        Ok(d)
    }

    /// Gives `driver` the consumer's OpenTelemetry instruments, for its commits.
    pub(super) fn give_instruments(&self, driver: &GroupDriver) {
        let _ = driver.instruments.set(self.instruments.clone());
    }

    /// KIP-320: `driver`'s commits carry the leader epoch of each offset, from the fetch state.
    pub(super) fn give_leader_epochs(&self, driver: &GroupDriver) {
        let shared = Arc::downgrade(&self.shared);
        let _ = driver.leader_epochs.set(Arc::new(move |tp, offset| {
            shared.upgrade().map_or(-1, |s| s.epoch_at(tp, offset))
        }));
    }

    /// The offsets `commit` uses when none are given: the consumed position of every assigned
    /// partition, i.e. the offset after the last record `poll()` returned. A partition with
    /// unfinished recovery ranges (KIP-333) gives the low-water mark over them and the main
    /// stream, with the recovery token as metadata; with `parallel.rebalance.recovery.poll`,
    /// over the recovery records processed, not those the last `recovery_poll()` handed out.
    pub fn consumed_offsets(&self) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        let assigned: Vec<TopicPartition> = self.assignment();
        self.progress_to_commit(assigned.iter())
    }

    /// KIP-333: an explicit commit must not pass a partition's unfinished backlog, nor claim
    /// more than the offset asked: see [`crate::fetch::PartitionState::commit_point`].
    pub(super) fn within_backlog(
        &self,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
    ) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        if !self.shared.config.enable_parallel_rebalance {
            return offsets;
        }
        let st = self.shared.lock();
        offsets
            .into_iter()
            .map(|(tp, om)| {
                let asked = om.offset;
                let om = self.asked_to_commit(&st, &tp, om);
                if om.offset != asked {
                    tracing::debug!(partition = %tp, asked, committed = om.offset, token = %om.metadata, "commit held at the recovery low-water mark");
                }
                (tp, om)
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

    /// Like [`Consumer::commit_sync`], returning each partition's result (with the offset and
    /// metadata sent) instead of failing at the first failed partition. A failure of the whole
    /// request (no group, timeout, closed) is still an `Err`.
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

    /// Commits `offsets` (already checked) and waits for the answer: the blocking and the async
    /// fronts' explicit commit.
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
        let done: Vec<_> = self.commits_done.lock().unpoisoned().try_iter().collect();
        for (cb, res) in done {
            if let Ok(r) = &res {
                self.note_committed(r);
            }
            if let Some(cb) = cb {
                cb(res);
            }
        }
    }

    /// Remembers what was committed, so auto-commit sends only what changed since, and for the
    /// metrics.
    pub(super) fn note_committed(&self, res: &CommitResults) {
        // The metrics' committed offsets, for a manual assignment too.
        self.shared.lock().note_committed(
            res.iter()
                .filter(|(_, _, r)| r.is_ok())
                .map(|(tp, om, _)| (tp, om.offset)),
        );
        let mut g = self.group.lock().unpoisoned();
        if let Some(l) = g.as_mut() {
            l.driver.read_view(|member| {
                for (tp, om, r) in res {
                    // A late answer for a partition given up since is not this member's to keep.
                    if r.is_ok() && member.owned.contains(tp) {
                        l.last_committed.insert(tp.clone(), om.clone());
                    }
                }
            });
        }
    }

    /// Auto-commit of the consumed positions (with recovery tokens) of `partitions` before they
    /// are revoked.
    pub(super) async fn commit_before_revoke(
        &self,
        partitions: &BTreeSet<TopicPartition>,
        deadline: Deadline,
    ) {
        if !self.shared.config.enable_auto_commit || partitions.is_empty() {
            return;
        }
        let offsets = self.progress_to_commit(partitions.iter());
        if let Ok(d) = self.commit_driver() {
            if let Some(res) = d.commit_before_revoke(&offsets, deadline).await {
                self.note_committed(&res);
            }
        }
    }

    /// Auto-commit of what the previous `poll()` returned (nothing unprocessed is committed).
    pub(super) fn maybe_auto_commit(&self, driver: &Arc<GroupDriver>) {
        if !self.shared.config.enable_auto_commit {
            return;
        }
        let offsets = {
            let mut g = self.group.lock().unpoisoned();
            let Some(local) = g.as_mut() else { return };
            if Instant::now() < local.next_auto_commit {
                return;
            }
            let Some(owned) = driver.read_view(|m| m.owns_in_generation.then(|| m.owned.clone()))
            else {
                return;
            };
            local.next_auto_commit = Instant::now() + self.shared.config.auto_commit_interval;
            // `last_committed` is updated when the group has taken them (note_committed): a
            // failed auto-commit is sent again at the next interval.
            not_committed_yet(self.progress_to_commit(owned.iter()), &local.last_committed)
        };
        if !offsets.is_empty() {
            let _ = self.commit_async(Some(offsets), None);
        }
    }
}

/// What an auto-commit sends of the `consumed` offsets: those the group has not taken already
/// (a partition nothing was consumed from since its last commit sends nothing).
pub(crate) fn not_committed_yet(
    consumed: Vec<(TopicPartition, OffsetAndMetadata)>,
    last_committed: &HashMap<TopicPartition, OffsetAndMetadata>,
) -> Vec<(TopicPartition, OffsetAndMetadata)> {
    consumed
        .into_iter()
        .filter(|(tp, om)| last_committed.get(tp) != Some(om))
        .collect()
}

impl GroupDriver {
    /// The auto-commit before a revocation: committed (retried within `deadline`) while the
    /// partitions are still this member's. A failure is logged, not reported: the revocation
    /// goes on, and whoever takes the partitions over resumes at the last commit.
    pub async fn commit_before_revoke(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
    ) -> Option<CommitResults> {
        match self.commit(offsets, deadline).await {
            Ok(res) => {
                for (tp, _, r) in &res {
                    if let Err(e) = r {
                        tracing::warn!(partition = %tp, error = %e, "auto-commit before revocation failed");
                    }
                }
                Some(res)
            }
            Err(e) => {
                tracing::warn!(error = %e, "auto-commit before revocation failed");
                None
            }
        }
    }

    /// Sends `offsets` as an asynchronous commit and calls `done` with the result (on a
    /// library thread: the caller hands it on). One attempt, never retried; while one is in
    /// flight later ones are merged and sent after it, so the group's offsets only move in the
    /// order they were asked for.
    pub fn commit_async(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        done: AsyncCommitDone,
    ) {
        let first = self.async_commits.lock().unpoisoned().push(offsets, done);
        if let Some(first) = first {
            runtime.spawn(self.clone().send_async_commits(first));
        }
    }

    async fn send_async_commits(self: Arc<Self>, mut batch: MergedCommit<AsyncCommitDone>) {
        loop {
            let offsets: Vec<(TopicPartition, OffsetAndMetadata)> =
                std::mem::take(&mut batch.offsets).into_iter().collect();
            let deadline = Deadline::after(self.config.common.request_timeout);
            let result = self.commit_with(&offsets, deadline, false).await;
            if let Err(e) = &result {
                tracing::warn!(group = %self.group_id, error = %e, "asynchronous commit failed");
            }
            for (done, r) in batch.split(&result) {
                done(r);
            }
            let next = self.async_commits.lock().unpoisoned().answered();
            match next {
                Some(b) => batch = b,
                None => {
                    self.async_idle.notify_waiters();
                    return;
                }
            }
        }
    }

    /// Waits until no asynchronous commit is in flight or waiting, so a synchronous commit
    /// sent next lands after them.
    pub async fn async_commits_done(&self, deadline: Deadline) -> Result<()> {
        loop {
            let idle = self.async_idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.async_commits.lock().unpoisoned().is_idle() {
                return Ok(());
            }
            if tokio::time::timeout(deadline.remaining(), idle)
                .await
                .is_err()
            {
                return Err(deadline.error("waiting for the asynchronous commits in flight"));
            }
        }
    }

    /// OffsetCommit through the member's generation (or as a simple consumer when it has none),
    /// after the asynchronous commits in flight. Returns the result per partition, with what
    /// was sent for it; the whole call fails only when nothing was committed.
    pub async fn commit(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
    ) -> Result<CommitResults> {
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        self.async_commits_done(deadline).await?;
        self.commit_with(offsets, deadline, true).await
    }

    /// The generation a commit goes out with now, read off the member's view (not its lock);
    /// none for a committer of manually assigned partitions.
    fn commit_generation(&self) -> Result<Generation> {
        if self.simple {
            return Ok(Generation::none());
        }
        self.read_view(|v| v.commit_generation.clone())
    }

    /// [`GroupDriver::commit_attempts`] in a `lagless.commit` span (the group, how many
    /// partitions, whether it retries; once done, how many partitions failed, or the error), so
    /// that a `tracing` subscriber (an OpenTelemetry one, say) sees each commit as one operation.
    async fn commit_with(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
        retries: bool,
    ) -> Result<CommitResults> {
        let span = tracing::info_span!(
            "lagless.commit",
            group = %self.group_id,
            partitions = offsets.len(),
            retries,
            failed_partitions = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = self
            .commit_attempts(offsets, deadline, retries)
            .instrument(span.clone())
            .await;
        if let Some(instruments) = self.instruments.get() {
            instruments.commit_ended(started, Instant::now(), result.as_ref().err());
        }
        match &result {
            Ok(results) => {
                span.record(
                    "failed_partitions",
                    results.iter().filter(|r| r.2.is_err()).count(),
                );
            }
            Err(e) => {
                span.record("error", tracing::field::display(e));
            }
        }
        result
    }

    /// OffsetCommit, retried until `deadline` when `retries`, else sent once. Not
    /// `backoff::retry_until`: one answer may accept some partitions and refuse others, and
    /// only the refused ones whose error allows it are sent again.
    async fn commit_attempts(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
        retries: bool,
    ) -> Result<CommitResults> {
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        let mut generation = self.commit_generation()?;
        let mut pending: Vec<(TopicPartition, OffsetAndMetadata)> = offsets.to_vec();
        let mut results: CommitResults = Vec::new();
        let mut retry = Retry::new(self.cluster.backoff());
        // Partitions refused because of the member's own join (see below): sent again with the
        // generation it holds once the join ends.
        let mut after_join: Vec<(TopicPartition, OffsetAndMetadata, Error)> = Vec::new();
        loop {
            if !after_join.is_empty() {
                let newer = self
                    .commit_generation()
                    .ok()
                    .filter(|g| g.generation_id > generation.generation_id);
                if let Some(g) = newer {
                    generation = g;
                    pending.extend(after_join.drain(..).map(|(tp, om, _)| (tp, om)));
                }
            }
            if pending.is_empty() {
                // Only partitions waiting for the member's join to end.
                let wait = retry.failed();
                if deadline.remaining() <= wait {
                    for (tp, om, e) in after_join {
                        let e = with_partition(e, &tp);
                        results.push((tp, om, Err(e)));
                    }
                    return Ok(results);
                }
                tokio::time::sleep(wait).await;
                continue;
            }
            let mut sent = false;
            let attempt = async {
                let conn = self.coordinator(deadline).await?;
                let member = self.member(&generation.member_id);
                let req = protocol::commit::offset_commit(
                    member,
                    generation.generation_id,
                    &pending,
                    |tp, offset| self.leader_epochs.get().map_or(-1, |f| f(tp, offset)),
                    conn.version::<OffsetCommitRequest>()?,
                );
                let attempt_timeout = deadline
                    .remaining()
                    .max(MIN_COMMIT_ATTEMPT)
                    .min(self.config.common.request_timeout);
                sent = true;
                conn.call_with_timeout(&req, attempt_timeout).await
            }
            .await;
            let resp = match attempt {
                Ok(r) => r,
                Err(e) => {
                    // A request that timed out on a working connection leaves it to the
                    // heartbeats and other commits (the connection closes itself when broken).
                    if !matches!(e, Error::Timeout(_)) {
                        self.coordinator_unknown("OffsetCommit failed");
                    }
                    let wait = retry.failed();
                    if !retries || !resend_after(sent, &e) || deadline.remaining() <= wait {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            let mut again = Vec::new();
            let mut rediscover = false;
            for (tp, error_code) in protocol::commit::offset_commit_errors(resp) {
                let Some(pos) = pending.iter().position(|(x, _)| *x == tp) else {
                    continue;
                };
                let entry = pending[pos].clone();
                if error_code == codes::NONE {
                    results.push((tp, entry.1, Ok(())));
                    continue;
                }
                let sent = generation.clone();
                let (next, err, own_join) = self
                    .with_member(move |m| commit_verdict(&mut m.membership, &sent, error_code))
                    .await
                    // The member's owner is gone (the consumer closed meanwhile): judged
                    // outside any generation.
                    .unwrap_or_else(|| {
                        commit_verdict(&mut Membership::new(None), &generation, error_code)
                    });
                if own_join
                    && retries
                    && self.rebalance_protocol() == RebalanceProtocol::Cooperative
                {
                    // The member's own rejoin (perhaps one it started without the application)
                    // overtook the commit; it keeps these partitions through a cooperative join,
                    // so they go again with the generation it holds after it. A Java member,
                    // which rejoins only from poll(), would have committed before its join.
                    after_join.push((tp, entry.1, err));
                    continue;
                }
                match next {
                    Next::RetryAfterBackoff if retries => again.push(entry),
                    Next::RediscoverCoordinator => {
                        rediscover = true;
                        if retries {
                            again.push(entry)
                        } else {
                            results.push((tp, entry.1, Err(with_partition(err, &entry.0))))
                        }
                    }
                    _ => results.push((tp, entry.1, Err(with_partition(err, &entry.0)))),
                }
            }
            if rediscover {
                self.coordinator_unknown("OffsetCommit answered NOT_COORDINATOR");
            }
            if again.is_empty() && after_join.is_empty() {
                (self.on_change)();
                return Ok(results);
            }
            pending = again;
            if pending.is_empty() {
                continue; // the wait for the join is at the top
            }
            let wait = retry.failed();
            if deadline.remaining() <= wait {
                for (tp, om) in pending {
                    results.push((tp, om, Err(deadline.error("OffsetCommit"))));
                }
                for (tp, om, e) in after_join {
                    let e = with_partition(e, &tp);
                    results.push((tp, om, Err(e)));
                }
                return Ok(results);
            }
            tokio::time::sleep(wait).await;
        }
    }
}

fn with_partition(e: Error, tp: &TopicPartition) -> Error {
    match e {
        Error::Kafka { code, context, .. } => {
            Error::kafka_partition(code, context, &tp.topic, tp.partition)
        }
        Error::CommitFailed(m) => Error::CommitFailed(format!("{tp}: {m}")),
        other => other,
    }
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

/// Whether a commit attempt that failed with `e` is sent again. Not when it was sent and its
/// answer did not come within `request.timeout.ms`: the broker may have applied it, and the
/// caller hears of the unknown outcome within `request.timeout.ms` instead of waiting while a
/// commit it already sent goes again.
fn resend_after(sent: bool, e: &Error) -> bool {
    e.is_retriable() && !(sent && matches!(e, Error::Timeout(_)))
}

/// What the member makes of a commit's error `code` for a commit sent in `generation`: what to
/// do next, the error to report, and whether the member's own rejoin overtook the commit.
fn commit_verdict(m: &mut Membership, generation: &Generation, code: i16) -> (Next, Error, bool) {
    let own_join = m.commit_outlived_by_own_join(generation, code);
    let (next, err) = m.on_commit_error(generation, code);
    (next, err, own_join)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn om(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            metadata: String::new(),
        }
    }

    #[test]
    fn an_unanswered_commit_is_not_sent_again() {
        let t = || Error::Timeout("OffsetCommit".into());
        let down = || Error::Transport("connection closed".into());
        let bad = || Error::InvalidArgument("offset".into());
        let cases = [
            // (sent, error, sent again)
            (true, t(), false),
            (false, t(), true),
            (true, down(), true),
            (false, down(), true),
            (true, bad(), false),
            (false, bad(), false),
        ];
        for (sent, e, want) in cases {
            assert_eq!(resend_after(sent, &e), want, "sent {sent}, {e:?}");
        }
    }

    #[test]
    fn auto_commit_sends_only_what_the_group_has_not_taken() {
        let a0 = TopicPartition::new("a", 0);
        let a1 = TopicPartition::new("a", 1);
        let a2 = TopicPartition::new("a", 2);
        let last: HashMap<TopicPartition, OffsetAndMetadata> =
            [(a0.clone(), om(10)), (a1.clone(), om(5))].into();
        let consumed = vec![(a0, om(10)), (a1.clone(), om(7)), (a2.clone(), om(0))];
        assert_eq!(
            not_committed_yet(consumed, &last),
            vec![(a1, om(7)), (a2, om(0))]
        );
    }

    #[test]
    fn a_commit_offset_below_zero_names_the_partition() {
        let e = validate_offsets(&[(TopicPartition::new("t", 3), om(-1))]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        assert_eq!(
            e.to_string(),
            "invalid argument: commit offset for t-3 must be >= 0, got -1"
        );
        assert!(validate_offsets(&[(TopicPartition::new("t", 3), om(0))]).is_ok());
    }
}

//! The transactional producer (`transactional.id`): init, begin, commit, abort, and offsets sent
//! to the transaction. The decisions are in [`transaction`](super::transaction); this module
//! talks to the transaction coordinator and the group coordinator.
//!
//! InitProducerId with the transactional id fences every older producer of that id and aborts
//! its open transaction. Then, under the classic protocol (transaction version 1), the producer
//! adds each partition to the transaction (AddPartitionsToTxn) before the first batch of the
//! transaction goes to it, adds the group before its offsets (AddOffsetsToTxn), and ends the
//! transaction (EndTxn) after every batch of it was acknowledged. Under transaction version 2
//! (KIP-890, when the cluster finalized it) the writes add themselves (Produce v12,
//! TxnOffsetCommit v5) and EndTxn v5 answers with the epoch of the next transaction.
use std::collections::HashMap;

use super::transaction::*;
use super::*;
use crate::net::Connection;
use crate::protocol::wire::{Versions, ALL_VERSIONS};
use crate::types::{GroupMetadata, OffsetAndMetadata, TopicPartition};

/// How often commit and abort look whether an AddPartitionsToTxn under way has answered.
const ADD_POLL: Duration = Duration::from_millis(5);

/// The transactional producer's state beyond the accumulator's.
pub(super) struct Txn {
    pub(super) id: String,
    pub(super) state: TxnState,
    /// The error that made the state AbortableError or FatalError.
    pub(super) error: Option<Error>,
    /// Something joined the open transaction (a partition or a group's offsets): it must be
    /// ended with EndTxn. A transaction that wrote nothing ends without one.
    pub(super) started: bool,
    /// A batch of the transaction failed: its partition's sequences are unknown, so the abort
    /// bumps the epoch (KIP-360) and every partition restarts its sequences.
    pub(super) needs_bump: bool,
    /// AddPartitionsToTxn is under way.
    pub(super) adding: bool,
    /// The transaction protocol, chosen by `init_transactions`.
    pub(super) protocol: TxnProtocol,
    /// The transaction coordinator, until it moves.
    pub(super) coordinator: Option<Arc<Connection>>,
}

impl Txn {
    pub(super) fn new(id: String) -> Txn {
        Txn {
            id,
            state: TxnState::Uninitialized,
            error: None,
            started: false,
            needs_bump: false,
            adding: false,
            protocol: TxnProtocol::V1,
            coordinator: None,
        }
    }

    /// Records a failure of the open transaction (`on_failure` decides where it goes).
    pub(super) fn failed(&mut self, e: &Error) {
        if let Some(to) = on_failure(self.state, e) {
            tracing::debug!(error = %e, ?to, "the transaction failed");
            self.state = to;
            self.error = Some(e.clone());
        }
        self.needs_bump = true;
    }
}

/// Records the failure `e` of a batch of a transactional producer's open transaction.
pub(super) fn batch_failed(shared: &Shared, e: &Error) {
    if let Some(t) = &shared.txn {
        lock(t).failed(e);
    }
}

/// Whether a send is allowed now: only inside a transaction.
pub(super) fn check_send(shared: &Shared) -> Result<()> {
    let Some(t) = &shared.txn else {
        return Ok(());
    };
    let t = lock(t);
    match admit(t.state, TxnCall::Send, t.error.as_ref()) {
        Admit::Refuse(e) => Err(e),
        _ => Ok(()),
    }
}

/// Whether `e` is worth another attempt of a transactional request.
fn retriable(e: &Error) -> bool {
    e.is_retriable()
        || matches!(
            e.kafka_code().map(classify),
            Some(TxnErrorClass::Retry { .. })
        )
}

/// The error of broker code `code` answered to `what`: kept as a Kafka error while it is
/// retriable (so that the retry sees it), the caller's error otherwise.
fn answer(code: i16, what: &str) -> Result<()> {
    match classify(code) {
        _ if code == codes::NONE => Ok(()),
        TxnErrorClass::Retry { .. } => Err(Error::kafka(code, what.to_string())),
        _ => Err(txn_error(code, what)),
    }
}

/// The transaction coordinator's connection, found again if it moved.
async fn coordinator(shared: &Arc<Shared>, deadline: Deadline) -> Result<Arc<Connection>> {
    let t = shared.txn.as_ref().expect("transactional");
    let (cached, id) = {
        let t = lock(t);
        (t.coordinator.clone(), t.id.clone())
    };
    if let Some(c) = cached.filter(|c| c.is_alive()) {
        return Ok(c);
    }
    let (_, c) = shared
        .cluster
        .find_transaction_coordinator(&id, deadline)
        .await?;
    lock(t).coordinator = Some(c.clone());
    Ok(c)
}

/// Forgets the coordinator after an error that says it moved.
fn maybe_forget(shared: &Shared, e: &Error) {
    let moved = matches!(e, Error::Transport(_))
        || matches!(
            e.kafka_code().map(classify),
            Some(TxnErrorClass::Retry { rediscover: true })
        );
    if let (true, Some(t)) = (moved, &shared.txn) {
        lock(t).coordinator = None;
    }
}

/// Sends a request built by `req` to the transaction coordinator at a version within
/// `versions` and reads its answer with `read` (the answer's error code), retrying with `backoff`
/// (the cluster's, but for AddPartitionsToTxn) until `deadline`.
async fn call_coordinator<R, T>(
    backoff: crate::backoff::Backoff,
    versions: Versions,
    shared: &Arc<Shared>,
    deadline: Deadline,
    what: &str,
    req: impl Fn() -> R,
    read: impl Fn(R::Response) -> Result<T>,
) -> Result<T>
where
    R: crate::protocol::wire::Api,
{
    crate::backoff::retry_until_if(backoff, deadline, what, retriable, || async {
        let conn = coordinator(shared, deadline).await?;
        let r = match conn.call_within_before(&req(), versions, deadline).await {
            Ok(resp) => read(resp),
            Err(e) => Err(e),
        };
        if let Err(e) = &r {
            maybe_forget(shared, e);
        }
        r
    })
    .await
}

/// InitProducerId with the transactional id, until `deadline`: `current` is the producer id
/// and epoch to bump (after a failed transaction), none the first time.
async fn init_pid(
    shared: &Arc<Shared>,
    deadline: Deadline,
    current: Option<ProducerIdEpoch>,
) -> Result<ProducerIdEpoch> {
    let id = lock(shared.txn.as_ref().expect("transactional")).id.clone();
    let timeout_ms = shared
        .config
        .transaction_timeout
        .as_millis()
        .min(i32::MAX as u128) as i32;
    call_coordinator(
        shared.cluster.backoff(),
        ALL_VERSIONS,
        shared,
        deadline,
        "InitProducerId",
        || {
            crate::protocol::txn::init_producer_id(
                &id,
                timeout_ms,
                current.map(|p| (p.id, p.epoch)),
            )
        },
        |resp| {
            answer(resp.error_code, "InitProducerId")?;
            Ok(ProducerIdEpoch {
                id: resp.producer_id.0,
                epoch: resp.producer_epoch,
            })
        },
    )
    .await
}

/// Adds `parts` to the open transaction in the background (AddPartitionsToTxn), unless an add
/// is under way; their batches wait until it answers. A refusal fails them and makes the
/// transaction abortable.
pub(super) fn add_partitions(shared: &Arc<Shared>, parts: Vec<(Arc<str>, i32)>) {
    let Some(t) = &shared.txn else { return };
    let id = {
        let mut t = lock(t);
        if t.adding || t.state != TxnState::InTransaction && t.state != TxnState::Committing {
            return;
        }
        t.started = true;
        if !t.protocol.adds_explicitly() {
            // Transaction version 2: the partitions' first Produce (v12) adds them.
            drop(t);
            if let Some(added) = lock(&shared.acc)
                .idem
                .as_mut()
                .and_then(|i| i.txn_added.as_mut())
            {
                added.extend(parts);
            }
            shared.wake.notify_one();
            return;
        }
        t.adding = true;
        t.id.clone()
    };
    let Some(pid) = lock(&shared.acc).idem.as_ref().and_then(|i| i.pid) else {
        lock(t).adding = false;
        return;
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        let deadline = Deadline::after(shared.config.delivery_timeout);
        let common = &shared.cluster.config;
        let r = call_coordinator(
            add_partitions_backoff(common.retry_backoff, common.retry_backoff_max),
            ALL_VERSIONS,
            &shared,
            deadline,
            "AddPartitionsToTxn",
            || {
                crate::protocol::txn::add_partitions(
                    &id,
                    (pid.id, pid.epoch),
                    parts.iter().map(|(t, p)| (&**t, *p)),
                )
            },
            |resp| {
                let errors = crate::protocol::txn::add_partitions_errors(&resp);
                // The first refusal that is not "not attempted" says why.
                let first = errors
                    .iter()
                    .find(|e| e.2 != codes::OPERATION_NOT_ATTEMPTED)
                    .or(errors.first());
                match first {
                    None => Ok(()),
                    Some((topic, p, code)) => {
                        answer(*code, &format!("AddPartitionsToTxn of {topic}-{p}"))
                    }
                }
            },
        )
        .await;
        {
            let mut acc = lock(&shared.acc);
            if let Some(idem) = &mut acc.idem {
                match &r {
                    Ok(()) => {
                        if let Some(added) = &mut idem.txn_added {
                            added.extend(parts.iter().cloned());
                        }
                    }
                    Err(e) => {
                        idem.txn_add_error = Some(e.clone());
                        if e.is_fatal() {
                            idem.fatal.get_or_insert_with(|| e.clone());
                        }
                    }
                }
            }
        }
        let txn = shared.txn.as_ref().expect("transactional");
        {
            let mut t = lock(txn);
            t.adding = false;
            if let Err(e) = &r {
                t.failed(e);
            }
        }
        shared.wake.notify_one();
    });
}

/// The producer's transaction state, or why it has none.
fn txn_of(shared: &Shared) -> Result<&Mutex<Txn>> {
    shared.txn.as_ref().ok_or_else(|| {
        Error::IllegalState(
            "the producer is not transactional: set transactional.id to use transactions".into(),
        )
    })
}

/// Moves to the state `call` leads to, or refuses it. `Ok(true)`: resume a call cut short.
fn enter(shared: &Shared, call: TxnCall) -> Result<bool> {
    let mut t = lock(txn_of(shared)?);
    match admit(t.state, call, t.error.as_ref()) {
        Admit::Go { to } => {
            t.state = to;
            Ok(false)
        }
        Admit::Resume => Ok(true),
        Admit::Refuse(e) => Err(e),
    }
}

/// Fails `e` into the transaction's state, and returns it.
fn fail(shared: &Shared, e: Error) -> Error {
    if let Some(t) = &shared.txn {
        let mut t = lock(t);
        if e.is_fatal() || e.kafka_code().map(classify) == Some(TxnErrorClass::Fatal) {
            t.state = TxnState::FatalError;
            t.error = Some(e.clone());
        } else if matches!(e, Error::TransactionAbortable(_)) {
            t.failed(&e);
        }
    }
    e
}

fn closed(shared: &Shared) -> Result<()> {
    if shared.closed.load(Ordering::Acquire) {
        return Err(Error::Closed);
    }
    Ok(())
}

// The transactional calls past their `enter`, over the producer's shared state: the blocking
// `Producer` runs them on its I/O runtime (`run`), the async front awaits them on the
// application's runtime. One implementation, so that both fronts move through the same states
// and fail with the same errors.

/// `init_transactions` after `enter`.
async fn init(shared: Arc<Shared>, deadline: Deadline) -> Result<()> {
    closed(&shared)?;
    let pid = init_pid(&shared, deadline, None)
        .await
        .map_err(|e| fail(&shared, e))?;
    // The coordinator that answered says which protocol the cluster speaks.
    let conn = coordinator(&shared, deadline)
        .await
        .map_err(|e| fail(&shared, e))?;
    let protocol = TxnProtocol::choose(
        conn.finalized_feature("transaction.version"),
        conn.version::<crate::protocol::msg::EndTxnRequest>()
            .unwrap_or(-1),
    );
    tracing::debug!(
        producer_id = pid.id,
        epoch = pid.epoch,
        ?protocol,
        "transactional producer initialised"
    );
    lock(&shared.acc).next_transaction(Some(pid));
    let mut t = lock(txn_of(&shared)?);
    t.protocol = protocol;
    t.state = TxnState::Ready;
    t.started = false;
    t.needs_bump = false;
    Ok(())
}

/// `begin_transaction`: local.
fn begin(shared: &Shared) -> Result<()> {
    enter(shared, TxnCall::Begin)?;
    let mut t = lock(txn_of(shared)?);
    t.started = false;
    t.needs_bump = false;
    t.error = None;
    Ok(())
}

/// What `send_offsets_to_transaction` sends, taken before anything is sent.
struct OffsetsToSend {
    id: String,
    protocol: TxnProtocol,
    pid: ProducerIdEpoch,
    group: GroupMetadata,
    /// (topic, partition, offset, leader epoch, metadata)
    offsets: Vec<(String, i32, i64, i32, String)>,
}

/// `send_offsets_to_transaction` up to the requests: `None` when there is nothing to send.
fn offsets_to_send(
    shared: &Shared,
    offsets: &HashMap<TopicPartition, OffsetAndMetadata>,
    group: &GroupMetadata,
) -> Result<Option<OffsetsToSend>> {
    enter(shared, TxnCall::SendOffsets)?;
    if offsets.is_empty() {
        return Ok(None);
    }
    let pid = lock(&shared.acc)
        .idem
        .as_ref()
        .and_then(|i| i.pid)
        .ok_or_else(|| Error::IllegalState("no producer id".into()))?;
    let (id, protocol) = {
        let mut t = lock(txn_of(shared)?);
        t.started = true;
        (t.id.clone(), t.protocol)
    };
    Ok(Some(OffsetsToSend {
        id,
        protocol,
        pid,
        group: group.clone(),
        offsets: offsets
            .iter()
            .map(|(tp, o)| {
                let epoch = group.leader_epochs.epoch_at(tp, o.offset);
                (
                    tp.topic.clone(),
                    tp.partition,
                    o.offset,
                    epoch,
                    o.metadata.clone(),
                )
            })
            .collect(),
    }))
}

/// AddOffsetsToTxn to the transaction coordinator (transaction version 1), then TxnOffsetCommit
/// to the group's.
async fn send_offsets(shared: Arc<Shared>, o: OffsetsToSend, deadline: Deadline) -> Result<()> {
    closed(&shared)?;
    let OffsetsToSend {
        id,
        protocol,
        pid,
        group,
        offsets,
    } = o;
    let r = async {
        let pid = (pid.id, pid.epoch);
        if protocol.adds_explicitly() {
            call_coordinator(
                shared.cluster.backoff(),
                ALL_VERSIONS,
                &shared,
                deadline,
                "AddOffsetsToTxn",
                || crate::protocol::txn::add_offsets(&id, pid, &group.group_id),
                |resp| answer(resp.error_code, "AddOffsetsToTxn"),
            )
            .await?;
        }
        let member = crate::protocol::txn::Membership {
            group_id: &group.group_id,
            generation_id: group.generation_id,
            member_id: &group.member_id,
            group_instance_id: group.group_instance_id.as_deref(),
        };
        let req = crate::protocol::txn::txn_offset_commit(
            &id,
            pid,
            &member,
            offsets
                .iter()
                .map(|(t, p, o, e, m)| (t.as_str(), *p, *o, *e, m.as_str())),
        );
        let what = format!("TxnOffsetCommit of group `{}`", group.group_id);
        crate::backoff::retry_until_if(
            shared.cluster.backoff(),
            deadline,
            &what,
            retriable,
            || async {
                let (_, conn) = shared
                    .cluster
                    .find_coordinator(&group.group_id, deadline)
                    .await?;
                let resp = conn
                    .call_within_before(&req, protocol.txn_offset_commit(), deadline)
                    .await?;
                answer(crate::protocol::txn::txn_offset_commit_error(&resp), &what)
            },
        )
        .await
    }
    .await;
    r.map_err(|e| fail(&shared, e))
}

/// `commit_transaction` after `enter`: flushes the transaction's records, then EndTxn.
async fn commit(shared: Arc<Shared>, deadline: Deadline) -> Result<()> {
    closed(&shared)?;
    flush_shared(&shared, deadline.remaining()).await?;
    wait_for_adds(&shared, deadline).await?;
    {
        let t = lock(txn_of(&shared)?);
        if t.state != TxnState::Committing {
            return Err(admit(t.state, TxnCall::Commit, t.error.as_ref())
                .refusal()
                .unwrap_or_else(|| Error::IllegalState("the commit was interrupted".into())));
        }
    }
    end(&shared, true, deadline).await
}

/// `abort_transaction` up to its requests: `enter`, and the records not sent yet fail.
fn abort_unsent(shared: &Shared) -> Result<()> {
    enter(shared, TxnCall::Abort)?;
    let unsent = lock(&shared.acc).take_unsent();
    for mut b in unsent {
        b.pending.fail(Error::TransactionAbortable(
            "the transaction was aborted before the record was sent".into(),
        ));
    }
    Ok(())
}

/// `abort_transaction` past `abort_unsent`: waits for the records on the wire, then EndTxn.
async fn abort(shared: Arc<Shared>, deadline: Deadline) -> Result<()> {
    closed(&shared)?;
    flush_shared(&shared, deadline.remaining()).await?;
    wait_for_adds(&shared, deadline).await?;
    end(&shared, false, deadline).await
}

/// Waits until no AddPartitionsToTxn is under way: one answered after EndTxn would add its
/// partitions to the next transaction.
async fn wait_for_adds(shared: &Shared, deadline: Deadline) -> Result<()> {
    while lock(txn_of(shared)?).adding {
        if deadline.expired() {
            return Err(deadline.error("AddPartitionsToTxn"));
        }
        tokio::time::sleep(ADD_POLL.min(deadline.remaining())).await;
    }
    Ok(())
}

/// Ends the transaction (EndTxn) if anything joined it, then makes the producer ready for the
/// next one. After a failed batch the abort bumps the epoch (KIP-360): under transaction
/// version 1 with an InitProducerId of the producer's own, under version 2 the EndTxn does, as it
/// does at the end of every transaction.
async fn end(shared: &Arc<Shared>, commit: bool, deadline: Deadline) -> Result<()> {
    let (id, protocol, started, needs_bump) = {
        let t = lock(txn_of(shared)?);
        (t.id.clone(), t.protocol, t.started, t.needs_bump && !commit)
    };
    // Under version 2 an abort with nothing in it still bumps the epoch at the coordinator.
    let send_end = started || needs_bump && !protocol.client_bumps_epoch();
    let bump = needs_bump && protocol.client_bumps_epoch();
    let pid = lock(&shared.acc)
        .idem
        .as_ref()
        .and_then(|i| i.pid)
        .ok_or_else(|| Error::IllegalState("no producer id".into()))?;
    let r = async {
        let mut next = None;
        if send_end {
            next = call_coordinator(
                shared.cluster.backoff(),
                protocol.end_txn(),
                shared,
                deadline,
                "EndTxn",
                || crate::protocol::txn::end_txn(&id, (pid.id, pid.epoch), commit),
                |resp| {
                    answer(resp.error_code, "EndTxn")?;
                    // v5: the producer id and epoch of the next transaction.
                    Ok((resp.producer_id.0 >= 0).then_some(ProducerIdEpoch {
                        id: resp.producer_id.0,
                        epoch: resp.producer_epoch,
                    }))
                },
            )
            .await?;
        }
        if bump {
            return init_pid(shared, deadline, Some(pid)).await.map(Some);
        }
        Ok(next)
    };
    let new_pid = r.await.map_err(|e| fail(shared, e))?;
    lock(&shared.acc).next_transaction(new_pid);
    let mut t = lock(txn_of(shared)?);
    t.state = TxnState::Ready;
    t.started = false;
    t.needs_bump = false;
    t.error = None;
    Ok(())
}

/// The transactional API of [`Producer`].
impl Producer {
    /// Gets the producer id of `transactional.id` from its transaction coordinator
    /// (InitProducerId), which fences every older producer with the same id and aborts the
    /// transaction such a producer left open. Call it once, before the first transaction; a
    /// call cut short by `timeout` ([`Error::Timeout`]) may be repeated.
    pub fn init_transactions(&self, timeout: Duration) -> Result<()> {
        enter(&self.shared, TxnCall::Init)?;
        self.run(init(self.shared.clone(), Deadline::after(timeout)))
    }

    /// Starts a transaction: records sent from now until `commit_transaction` or
    /// `abort_transaction` are part of it. Local: no request is sent.
    pub fn begin_transaction(&self) -> Result<()> {
        begin(&self.shared)
    }

    /// Sends the consumer's offsets to the open transaction: they are committed for the
    /// consumer's group if and only if the transaction commits (AddOffsetsToTxn, then
    /// TxnOffsetCommit to the group coordinator). `group` is the consumer's
    /// [`crate::Consumer::group_metadata`]: the group coordinator refuses the offsets of a
    /// member whose generation is gone (KIP-447), and the transaction must then be aborted.
    pub fn send_offsets_to_transaction(
        &self,
        offsets: &HashMap<TopicPartition, OffsetAndMetadata>,
        group: &GroupMetadata,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Deadline::after(timeout);
        match offsets_to_send(&self.shared, offsets, group)? {
            None => Ok(()),
            Some(o) => self.run(send_offsets(self.shared.clone(), o, deadline)),
        }
    }

    /// Commits the open transaction: flushes its records, then ends it (EndTxn). A batch that
    /// failed makes the commit fail with [`Error::TransactionAbortable`]: abort then. Cut short
    /// by `timeout` ([`Error::Timeout`]), it may be called again to finish.
    pub fn commit_transaction(&self, timeout: Duration) -> Result<()> {
        enter(&self.shared, TxnCall::Commit)?;
        self.run(commit(self.shared.clone(), Deadline::after(timeout)))
    }

    /// Aborts the open transaction: records not sent yet fail with
    /// [`Error::TransactionAbortable`], records on the wire are waited for, and the transaction
    /// ends (EndTxn): read_committed consumers never see its records, and the offsets sent to
    /// it are not committed. Cut short by `timeout`, it may be called again to finish.
    pub fn abort_transaction(&self, timeout: Duration) -> Result<()> {
        let deadline = Deadline::after(timeout);
        abort_unsent(&self.shared)?;
        self.run(abort(self.shared.clone(), deadline))
    }

    // The async front's transactional calls: the same steps, awaited on the application's
    // runtime instead of run on the I/O runtime from a blocked thread.

    /// The async front's `init_transactions`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn init_transactions_async(&self, timeout: Duration) -> Result<()> {
        enter(&self.shared, TxnCall::Init)?;
        init(self.shared.clone(), Deadline::after(timeout)).await
    }

    /// The async front's `send_offsets_to_transaction`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn send_offsets_to_transaction_async(
        &self,
        offsets: &HashMap<TopicPartition, OffsetAndMetadata>,
        group: &GroupMetadata,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Deadline::after(timeout);
        match offsets_to_send(&self.shared, offsets, group)? {
            None => Ok(()),
            Some(o) => send_offsets(self.shared.clone(), o, deadline).await,
        }
    }

    /// The async front's `commit_transaction`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn commit_transaction_async(&self, timeout: Duration) -> Result<()> {
        enter(&self.shared, TxnCall::Commit)?;
        commit(self.shared.clone(), Deadline::after(timeout)).await
    }

    /// The async front's `abort_transaction`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn abort_transaction_async(&self, timeout: Duration) -> Result<()> {
        let deadline = Deadline::after(timeout);
        abort_unsent(&self.shared)?;
        abort(self.shared.clone(), deadline).await
    }
}

impl Admit {
    fn refusal(self) -> Option<Error> {
        match self {
            Admit::Refuse(e) => Some(e),
            _ => None,
        }
    }
}

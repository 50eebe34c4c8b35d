//! The consumer's side of the group as plain data: what the application's steps
//! (consumer/group.rs) and the member's driver task (consumer/driver_task.rs) share under the
//! consumer's group lock, and the commands the one sends the other. Both import it; it imports
//! neither.
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::rebalance_listener::RebalanceListener;
use crate::group::coordinator::GroupDriver;
use crate::group::step::JoinInput;
use crate::types::{OffsetAndMetadata, TopicPartition};

/// The consumer's side of the group: the driver (which holds the member's state, a
/// [`crate::group::group_member::GroupMember`]), the listener, the commit bookkeeping, the
/// channel to the member's driver task (which runs the join and the heartbeat), and how the
/// application's steps and that task's background steps take turns.
pub(crate) struct GroupLocal {
    pub driver: Arc<GroupDriver>,
    pub listener: Option<Box<dyn RebalanceListener>>,
    pub next_auto_commit: Instant,
    pub last_committed: HashMap<TopicPartition, OffsetAndMetadata>,
    /// Group steps under way on the application's side (`poll()`, `recv()`, `close()`): while
    /// any is, the background task leaves the group alone (a step may be between its decision
    /// and its end, e.g. an assignment applied but not yet fetched).
    pub caller_steps: usize,
    /// Something for the background task may be left when the application's steps end: it was
    /// woken meanwhile and left the group alone, or the steps did more than find nothing to do.
    /// Only then does their end wake it, so a `poll()` that finds nothing to do wakes no other
    /// thread (a `poll()` per record would otherwise pay a wake-up per record).
    pub background_due: bool,
    /// The member's driver task ([`driver_task`](super::driver_task)): it runs the join and the
    /// heartbeat and takes the background steps; this side asks through these commands.
    pub commands: mpsc::UnboundedSender<Command>,
    /// What the application subscribed to, as it asked (`subscription()` answers from it
    /// without waiting for the member to take the call).
    pub asked: Asked,
}

/// What the application last subscribed to.
pub(crate) enum Asked {
    Names(BTreeSet<String>),
    /// A client-side pattern: the topics it matched so far are the member's.
    Pattern,
    /// A server-side regex: only the coordinator knows what it matches.
    Regex,
}

/// At most this many steps per `poll()` (lost, a finished join, revocations, a new join): each
/// step brings the member closer to waiting, this only bounds a `poll()` in any case.
pub(crate) const MAX_STEPS_PER_POLL: usize = 8;

/// What the application's side asks of the driver task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Start a join sending this ([`Effect::StartJoin`]); its answer goes to the member.
    StartJoin(JoinInput),
    /// Drop the join in flight without its answer (leaving the group); answers whether one was
    /// in flight.
    DropJoin(oneshot::Sender<bool>),
    /// Take the group steps that need no callback (a rebalance was heard, a join finished, the
    /// application's steps ended leaving something to take).
    Wake,
    /// Stop: the consumer unsubscribed or closed.
    Stop,
}

//! The classic group membership as a sans-IO state machine: what a member does with each answer
//! of the coordinator (JoinGroup, SyncGroup, Heartbeat, OffsetCommit) and with the poll timer
//! (KIP-62). It sends nothing itself; the driver in `group::coordinator` does the I/O and asks
//! this module what follows.
//!
//! The decisions follow the Java client's AbstractCoordinator/ConsumerCoordinator, error code by
//! error code.
use std::collections::BTreeSet;

use crate::error::{codes, kafka_error_action, Action, Error};
use crate::types::TopicPartition;

/// The reason a member leaves its group when `max.poll.interval.ms` passes (Java's words).
const POLL_TIMEOUT_EXPIRED: &str = "consumer poll timeout has expired";

/// What follows a `max.poll.interval.ms` expiry, for the log: a dynamic member leaves at once
/// (LeaveGroup); a static one sends nothing and the coordinator waits out its session.
pub fn poll_timeout_consequence(send_leave: bool) -> &'static str {
    if send_leave {
        "leaving the group so its partitions can move. The next poll() reports them lost and rejoins"
    } else {
        "its partitions are lost. A static member (group.instance.id) sends no LeaveGroup: the group \
         moves its partitions once session.timeout.ms passes without a heartbeat. The next poll() \
         reports them lost and rejoins"
    }
}

/// Where the member is in the join protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group (never joined, left, or its generation was reset).
    Unjoined,
    /// JoinGroup sent, no answer yet. No heartbeats: the pending join keeps the member alive.
    PreparingRebalance,
    /// JoinGroup answered, SyncGroup pending. Heartbeats run.
    CompletingRebalance,
    /// Member of the current generation with an assignment. Heartbeats run.
    Stable,
}

/// A generation of the group, as this member knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// The generation id the coordinator gave in JoinGroup; -1 for no generation.
    pub generation_id: i32,
    /// The member id the coordinator assigned; empty before the first join.
    pub member_id: String,
    /// The assignor the group chose (JoinGroup's protocol name).
    pub protocol: Option<String>,
}

impl Generation {
    /// No generation: id -1, no member id, no protocol (what a commit outside a group carries).
    pub fn none() -> Generation {
        Generation {
            generation_id: -1,
            member_id: String::new(),
            protocol: None,
        }
    }
}

/// What the driver does next after an answer from the coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Carry on as before.
    Continue,
    /// Send JoinGroup again at once (new member id, rebalance in progress, stale generation).
    JoinAgain,
    /// Back off (`retry.backoff.ms`), then send the same request again.
    RetryAfterBackoff,
    /// Forget the coordinator, find it again, then retry.
    RediscoverCoordinator,
    /// The member cannot go on: report this from `poll()`.
    Fatal(Error),
}

/// What a group protocol heard from the coordinator while it carried the member's join or
/// heartbeat, reported as a value for the member to apply ([`Membership::on_answer`]) rather
/// than written into the member from inside the protocol's I/O.
#[derive(Debug, Clone)]
pub enum ProtocolAnswer {
    /// A join request is about to go out (the first of a join, or one sent again): it carries
    /// the member id and generation of [`Reply::Generation`].
    JoinSending,
    /// JoinGroup answered `code` (not NONE); `member_id` is the id the answer carried
    /// (MEMBER_ID_REQUIRED hands one out).
    JoinGroupFailed { code: i16, member_id: String },
    /// JoinGroup answered `code`, after which the member cannot go on; `error` is what `poll()`
    /// reports (INVALID_SESSION_TIMEOUT names the range the broker allows).
    JoinGroupFatal {
        code: i16,
        member_id: String,
        error: Error,
    },
    /// JoinGroup put the member in this generation; it waits for its assignment.
    Joined(Generation),
    /// SyncGroup answered `code` (not NONE).
    SyncGroupFailed { code: i16 },
    /// SyncGroup of generation `generation_id` answered the member's assignment.
    Synced { generation_id: i32 },
    /// KIP-848: the join's ConsumerGroupHeartbeat put the member in this epoch with its
    /// assignment (there is no SyncGroup).
    MemberJoined(Generation),
    /// KIP-848: a ConsumerGroupHeartbeat sent with `sent_epoch` answered `code` (not NONE), as
    /// the member's join (`joining`) or as one of its heartbeats.
    MemberHeartbeatFailed {
        sent_epoch: i32,
        code: i16,
        joining: bool,
        /// The answer's error message, if the broker wrote one.
        message: Option<String>,
    },
    /// KIP-848: a heartbeat sent with `sent_epoch` answered the member's epoch `epoch`.
    MemberEpoch { sent_epoch: i32, epoch: i32 },
    /// KIP-848: the coordinator's assignment differs from what the member owns.
    AssignmentChanged,
    /// KIP-848: a heartbeat's answer left the member with this assignment from the coordinator
    /// (`unknown_topics`: it also names topics the consumer's metadata does not know yet).
    /// [`GroupMember::on_answer`](crate::group::group_member::GroupMember::on_answer) compares
    /// it with what the member owns; this half, which does not know that, takes it as
    /// [`ProtocolAnswer::AssignmentChanged`].
    MemberAssignment {
        assigned: BTreeSet<TopicPartition>,
        unknown_topics: bool,
    },
}

impl ProtocolAnswer {
    /// Whether `poll()` must look at the member again once this is applied (it was put in a
    /// generation, or asked to rejoin).
    pub fn wakes_poll(&self) -> bool {
        matches!(
            self,
            ProtocolAnswer::Joined(_)
                | ProtocolAnswer::AssignmentChanged
                | ProtocolAnswer::MemberAssignment { .. }
        )
    }
}

/// What the member says to a [`ProtocolAnswer`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// What the protocol does next.
    Next(Next),
    /// The member's generation once the answer is applied (for [`ProtocolAnswer::JoinSending`]:
    /// the one the request carries).
    Generation(Generation),
    /// [`ProtocolAnswer::Synced`] for a generation the member left while SyncGroup was in
    /// flight (the heartbeat reset it): the assignment is stale, join again at once.
    Outlived,
}

/// The member's protocol state, part of the group member the driver task owns (the
/// application's thread reads its published view). Its fields are private: every change is one of the transitions below, so the
/// member's state moves only the ways this file (and its tests) say.
#[derive(Debug, Clone)]
pub struct Membership {
    state: MemberState,
    generation: Generation,
    group_instance_id: Option<String>,
    /// A rebalance is needed; the next `poll()` starts it (never the driver on its own).
    rejoin_needed: bool,
    rejoin_reason: String,
    /// The generation was reset while the member owned partitions: the next `poll()` reports
    /// them lost before it rejoins.
    partitions_lost: bool,
    /// The member received its assignment of `generation` (SyncGroup answered) and still holds
    /// it: set by SyncGroup, cleared when a JoinGroup answer brings a new generation or the
    /// generation is reset or left. Commits go out with such a generation only.
    synced: bool,
    /// Why the generation was reset when `partitions_lost` was set (for the error of a commit
    /// attempted before `poll()` reports the loss).
    lost_reason: String,
    /// A fatal error waiting to come out of `poll()`.
    fatal: Option<Error>,
    /// An error the next `poll()` reports once, the member going on (a Heartbeat answer with
    /// an error lagless has no rule for: the heartbeat backs off and tries again).
    error: Option<Error>,
    /// The server-side regex the member subscribed with (KIP-848), named by the error of a
    /// coordinator that refuses it.
    subscribed_regex: Option<String>,
}

impl Membership {
    /// A member not yet joined, with a rebalance pending; `group_instance_id` makes it static
    /// (KIP-345).
    pub fn new(group_instance_id: Option<String>) -> Membership {
        Membership {
            state: MemberState::Unjoined,
            generation: Generation::none(),
            group_instance_id,
            rejoin_needed: true,
            rejoin_reason: "the consumer subscribed".into(),
            partitions_lost: false,
            synced: false,
            lost_reason: String::new(),
            fatal: None,
            error: None,
            subscribed_regex: None,
        }
    }

    /// The member subscribed with the server-side regex `regex` (or with none).
    pub fn set_subscribed_regex(&mut self, regex: Option<String>) {
        self.subscribed_regex = regex;
    }

    /// Whether the member is static (`group.instance.id` set).
    pub fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }

    /// Where the member is in the join protocol.
    pub fn state(&self) -> MemberState {
        self.state
    }

    /// The member's current generation, whatever its state ([`Generation::none`] when it has
    /// none).
    pub fn generation(&self) -> &Generation {
        &self.generation
    }

    /// Whether a rebalance was asked for and the next `poll()` should start it.
    pub fn rejoin_needed(&self) -> bool {
        self.rejoin_needed
    }

    /// Why the last rebalance was asked for (sent in JoinGroup's reason and logged); empty once
    /// the member is stable.
    pub fn rejoin_reason(&self) -> &str {
        &self.rejoin_reason
    }

    /// Whether the generation was reset while the member owned partitions and `poll()` has not
    /// reported them lost yet.
    pub fn partitions_lost(&self) -> bool {
        self.partitions_lost
    }

    /// The fatal error `poll()` reports, if the member cannot go on.
    pub fn fatal(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// The member cannot go on: every later `poll()` reports `e`.
    pub fn set_fatal(&mut self, e: Error) {
        self.fatal = Some(e);
    }

    /// An error the member went on from (a Heartbeat answer lagless has no rule for): the next
    /// `poll()` reports it once.
    pub fn report_once(&mut self, e: Error) {
        self.error = Some(e);
    }

    /// The error to report once, taken by the `poll()` that reports it.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// `poll()` reports the owned partitions lost: the loss is told once. Returns whether
    /// there was a loss to report.
    pub fn take_partitions_lost(&mut self) -> bool {
        std::mem::take(&mut self.partitions_lost)
    }

    /// Whether the partitions the member holds may already be another member's: the loss is
    /// not reported yet, or the member is in no generation (close and unsubscribe then give
    /// them up as lost, without a commit).
    pub fn holds_no_generation(&self) -> bool {
        self.partitions_lost || self.generation.generation_id < 0
    }

    /// `poll()` starts a join: the rebalance asked for is under way.
    pub fn start_join(&mut self) {
        self.state = MemberState::PreparingRebalance;
        self.rejoin_needed = false;
    }

    /// A JoinGroup goes out (the first of a join, or one sent again after an error answer).
    /// Returns the member id and generation it is sent with.
    pub fn join_sent(&mut self) -> (String, i32) {
        self.state = MemberState::PreparingRebalance;
        (
            self.generation.member_id.clone(),
            self.generation.generation_id,
        )
    }

    /// The member leaves the group (close, unsubscribe). Returns the member id a LeaveGroup
    /// goes out with: none for a member that has no id, nor for a static member, which stays
    /// until its session expires so a restart causes no rebalance, unless it `for_good` leaves
    /// (it prepared to leave: scale-down, as the Java client's close with LEAVE_GROUP).
    pub fn leave(&mut self, for_good: bool) -> Option<String> {
        let id = std::mem::take(&mut self.generation.member_id);
        self.generation = Generation::none();
        self.synced = false;
        self.state = MemberState::Unjoined;
        self.partitions_lost = false;
        ((for_good || !self.is_static()) && !id.is_empty()).then_some(id)
    }

    /// Asks for a rebalance; `poll()` will start it.
    pub fn request_rejoin(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.rejoin_needed {
            tracing::info!(reason = %reason, "requesting a rebalance");
        }
        self.rejoin_needed = true;
        self.rejoin_reason = reason;
    }

    /// Drops the generation (and, unless `keep_member_id`, the member id). Owned partitions are
    /// then lost: another member may already own them.
    pub fn reset_generation(&mut self, keep_member_id: bool, reason: &str) {
        let member_id = if keep_member_id {
            std::mem::take(&mut self.generation.member_id)
        } else {
            String::new()
        };
        if self.generation.generation_id >= 0 {
            self.partitions_lost = true;
            self.lost_reason = reason.to_string();
        }
        self.generation = Generation {
            member_id,
            ..Generation::none()
        };
        self.synced = false;
        self.state = MemberState::Unjoined;
        self.request_rejoin(reason.to_string());
    }

    /// Whether heartbeats are due in this state.
    pub fn heartbeats_enabled(&self) -> bool {
        matches!(
            self.state,
            MemberState::CompletingRebalance | MemberState::Stable
        ) && !self.generation.member_id.is_empty()
    }

    /// The generation to commit with: the one whose assignment the member holds, while it is
    /// stable in it and also while it rejoins from it (JoinGroup not answered yet).
    ///
    /// The Java client commits only while stable (`generationIfStable`), but its member stays
    /// stable until the application's next `poll()` sends the JoinGroup. A lagless member
    /// rejoins without the application ([`crate::group::step::taken_in_background`]), so a
    /// commit between two polls (or in `on_partitions_revoked` on `close()`) may meet it with its
    /// JoinGroup in flight, where a Java member would still be stable and its commit taken. It
    /// still owns that generation's partitions, and the broker takes a commit of it until the
    /// join completes (then it answers REBALANCE_IN_PROGRESS, and ILLEGAL_GENERATION once the
    /// next generation is stable), so the commit goes out as the Java member's would.
    pub fn owned_generation(&self) -> Option<&Generation> {
        let holds = match self.state {
            MemberState::Stable => true,
            MemberState::PreparingRebalance | MemberState::Unjoined => self.synced,
            MemberState::CompletingRebalance => false,
        };
        (holds && !self.partitions_lost).then_some(&self.generation)
    }

    /// The generation an OffsetCommit is sent with. A committer of manually assigned
    /// partitions (`simple`) commits outside any generation; a subscribed member only with the
    /// generation whose assignment it holds ([`Membership::owned_generation`]): once it has left or lost its
    /// generation its partitions may belong to another member, and a commit as generation -1
    /// (which the broker takes when the group is empty) could move their offsets backwards.
    pub fn commit_generation(&self, simple: bool) -> Result<Generation, Error> {
        if simple {
            return Ok(Generation::none());
        }
        if let Some(g) = self.owned_generation() {
            return Ok(g.clone());
        }
        if self.partitions_lost {
            let why = if self.lost_reason == POLL_TIMEOUT_EXPIRED {
                "the member left the group because poll() was not called within max.poll.interval.ms \
                 (consumer poll timeout has expired), so the group may already have given its partitions \
                 to another member; the next poll() reports them lost and rejoins. Process less per poll() \
                 (max.poll.records) or raise max.poll.interval.ms"
                    .to_string()
            } else {
                format!(
                    "the member's generation was reset ({}), so the group may already have given its \
                     partitions to another member; the next poll() reports them lost and rejoins",
                    self.lost_reason
                )
            };
            return Err(Error::CommitFailed(format!(
                "the offsets cannot be committed: {why}"
            )));
        }
        if self.generation.generation_id >= 0 {
            // In a generation without its assignment: between JoinGroup and SyncGroup, or
            // joining again after either failed.
            return Err(Error::CommitFailed(
                "the group is rebalancing; the offsets can be committed again after the rebalance, \
                 or in on_partitions_revoked"
                    .into(),
            ));
        }
        Err(Error::CommitFailed(
            "the consumer is not part of an active group (it has not joined yet, or it left the group \
             or lost its generation and its partitions may have moved); the next poll() rejoins"
                .into(),
        ))
    }

    /// KIP-62: `max.poll.interval.ms` passed without a `poll()`. Returns whether to send
    /// LeaveGroup: dynamic members leave at once so their partitions move without waiting out
    /// the session; static members just stop heartbeating and the broker expires them.
    pub fn poll_timeout_expired(&mut self) -> bool {
        let send_leave = !self.is_static()
            && self.state != MemberState::Unjoined
            && !self.generation.member_id.is_empty();
        self.reset_generation(false, POLL_TIMEOUT_EXPIRED);
        send_leave
    }

    /// A JoinGroup answer with an error. `response_member_id` is the id the broker assigned
    /// (MEMBER_ID_REQUIRED carries it).
    pub fn on_join_error(&mut self, code: i16, response_member_id: &str) -> Next {
        match code {
            codes::MEMBER_ID_REQUIRED => {
                // KIP-394: adopt the id and join again at once.
                self.generation.member_id = response_member_id.to_string();
                self.state = MemberState::Unjoined;
                Next::JoinAgain
            }
            codes::UNKNOWN_MEMBER_ID => {
                self.reset_generation(false, "the member id was unknown to the coordinator");
                Next::JoinAgain
            }
            codes::ILLEGAL_GENERATION => {
                self.reset_generation(true, "the generation was stale");
                Next::JoinAgain
            }
            codes::REBALANCE_IN_PROGRESS => {
                self.state = MemberState::Unjoined;
                Next::JoinAgain
            }
            codes::COORDINATOR_LOAD_IN_PROGRESS => {
                self.state = MemberState::Unjoined;
                Next::RetryAfterBackoff
            }
            codes::COORDINATOR_NOT_AVAILABLE | codes::NOT_COORDINATOR => {
                self.state = MemberState::Unjoined;
                Next::RediscoverCoordinator
            }
            _ => self.fail(code, "JoinGroup"),
        }
    }

    /// JoinGroup succeeded: the member is in generation `generation_id` and waits for its
    /// assignment. Heartbeats start now.
    pub fn on_join_success(
        &mut self,
        generation_id: i32,
        member_id: &str,
        protocol: Option<String>,
    ) {
        self.generation = Generation {
            generation_id,
            member_id: member_id.to_string(),
            protocol,
        };
        self.synced = false;
        self.state = MemberState::CompletingRebalance;
    }

    /// A SyncGroup answer with an error: join again, rediscover the coordinator, or fail.
    pub fn on_sync_error(&mut self, code: i16) -> Next {
        match code {
            codes::REBALANCE_IN_PROGRESS => {
                self.state = MemberState::Unjoined;
                self.request_rejoin("the group rebalanced during SyncGroup");
                Next::JoinAgain
            }
            codes::UNKNOWN_MEMBER_ID => {
                self.reset_generation(false, "the member id was unknown at SyncGroup");
                Next::JoinAgain
            }
            codes::ILLEGAL_GENERATION => {
                self.reset_generation(true, "the generation was stale at SyncGroup");
                Next::JoinAgain
            }
            codes::COORDINATOR_NOT_AVAILABLE | codes::NOT_COORDINATOR => {
                self.state = MemberState::Unjoined;
                Next::RediscoverCoordinator
            }
            _ => self.fail(code, "SyncGroup"),
        }
    }

    /// SyncGroup succeeded: the member is stable with its new assignment.
    pub fn on_sync_success(&mut self) {
        self.state = MemberState::Stable;
        self.synced = true;
        self.rejoin_needed = false;
        self.rejoin_reason.clear();
    }

    /// SyncGroup of generation `generation_id` succeeded. Returns the generation the member is
    /// now stable in, or `None` when the background side reset the generation while SyncGroup
    /// was in flight (the assignment is then for a generation the member has left: join again).
    pub fn on_sync_success_for(&mut self, generation_id: i32) -> Option<Generation> {
        if self.generation.generation_id != generation_id {
            return None;
        }
        self.on_sync_success();
        Some(self.generation.clone())
    }

    /// A Heartbeat answer for the generation `sent` (the member's generation when it was sent).
    pub fn on_heartbeat(&mut self, sent: &Generation, code: i16) -> Next {
        let same_generation = *sent == self.generation;
        match code {
            codes::NONE => Next::Continue,
            codes::REBALANCE_IN_PROGRESS => {
                // Keep heartbeating through the rebalance; the next poll() joins. An answer
                // about a generation the member has left since is about the rebalance that
                // made its current one: joining again would start another for nothing.
                if self.state == MemberState::Stable && same_generation {
                    self.request_rejoin("the group is rebalancing");
                }
                Next::Continue
            }
            codes::ILLEGAL_GENERATION | codes::UNKNOWN_MEMBER_ID | codes::FENCED_INSTANCE_ID
                if !same_generation =>
            {
                // An answer about a generation we already left behind.
                Next::Continue
            }
            codes::ILLEGAL_GENERATION => {
                self.reset_generation(true, "the heartbeat's generation was stale");
                Next::Continue
            }
            codes::UNKNOWN_MEMBER_ID => {
                self.reset_generation(false, "the coordinator no longer knows the member");
                Next::Continue
            }
            codes::COORDINATOR_NOT_AVAILABLE | codes::NOT_COORDINATOR => {
                Next::RediscoverCoordinator
            }
            _ => match kafka_error_action(code) {
                Action::Retry | Action::RefreshMetadata => Next::RetryAfterBackoff,
                _ => self.fail(code, "Heartbeat"),
            },
        }
    }

    /// KIP-848: a ConsumerGroupHeartbeat answered `code` (not NONE) to a request sent with
    /// epoch `sent_epoch`: as the member's join (`joining`) or as one of its heartbeats. The Java
    /// client's table (its ConsumerMembershipManager and HeartbeatRequestManager): a fenced or
    /// unknown member gives up what it owns as lost and rejoins with epoch 0, keeping its member
    /// id (KIP-1082: the client made it); a coordinator error finds the coordinator again; the
    /// rest fails, fatally where the error table says so.
    ///
    /// Any other answer ends the member, as the Java client's heartbeat manager's default branch
    /// does: retrying would leave the member in the group's eyes nowhere, owning nothing, with
    /// nothing for the application to see. The case that matters: `GROUP_ID_NOT_FOUND` when the
    /// coordinator will not convert a classic group to the consumer protocol (KAFKA-18134: its
    /// classic members use an assignor the broker does not know, such as `learner-sticky`).
    /// `broker_says` is the answer's error message; an ending error carries it, since it is
    /// often the only explanation (the conversion's refusal names its reason there).
    pub fn on_member_heartbeat_error(
        &mut self,
        sent_epoch: i32,
        code: i16,
        joining: bool,
        broker_says: Option<&str>,
    ) -> Next {
        let next = match code {
            codes::UNKNOWN_MEMBER_ID | codes::FENCED_MEMBER_EPOCH
                if !joining && sent_epoch != self.generation.generation_id =>
            {
                // About an epoch the member has left behind already.
                Next::Continue
            }
            codes::UNKNOWN_MEMBER_ID | codes::FENCED_MEMBER_EPOCH => {
                let reason = if code == codes::FENCED_MEMBER_EPOCH {
                    "the coordinator fenced the member's epoch"
                } else {
                    "the coordinator no longer knows the member"
                };
                self.reset_generation(true, reason);
                Next::JoinAgain
            }
            codes::COORDINATOR_NOT_AVAILABLE | codes::NOT_COORDINATOR => {
                Next::RediscoverCoordinator
            }
            codes::COORDINATOR_LOAD_IN_PROGRESS => Next::RetryAfterBackoff,
            _ => match kafka_error_action(code) {
                Action::Retry | Action::RefreshMetadata => Next::RetryAfterBackoff,
                Action::Fatal => self.fail(code, "ConsumerGroupHeartbeat"),
                _ => self.end(Error::kafka_fatal(
                    code,
                    member_heartbeat_refusal(code, broker_says),
                )),
            },
        };
        if joining && !matches!(next, Next::Fatal(_)) {
            self.state = MemberState::Unjoined;
        }
        next
    }

    /// KIP-848: a heartbeat of epoch `sent_epoch` answered with the member's epoch `epoch`: the
    /// coordinator moved the member to a newer epoch (its assignment changed). Commits go out
    /// with it from now on.
    pub fn on_member_epoch(&mut self, sent_epoch: i32, epoch: i32) {
        if self.state == MemberState::Stable
            && sent_epoch == self.generation.generation_id
            && epoch > self.generation.generation_id
        {
            self.generation.generation_id = epoch;
        }
    }

    /// Applies what a group protocol heard while it carried the member's join or heartbeat
    /// ([`ProtocolAnswer`]): the one way a protocol's answers change the member, so that a
    /// protocol only sends and reports, and the member's state moves by the transitions above.
    pub fn on_answer(&mut self, answer: ProtocolAnswer) -> Reply {
        match answer {
            ProtocolAnswer::JoinSending => {
                self.join_sent();
                Reply::Generation(self.generation.clone())
            }
            ProtocolAnswer::JoinGroupFailed { code, member_id } => {
                Reply::Next(self.on_join_error(code, &member_id))
            }
            ProtocolAnswer::JoinGroupFatal {
                code,
                member_id,
                error,
            } => {
                self.on_join_error(code, &member_id);
                self.set_fatal(error.clone());
                Reply::Next(Next::Fatal(error))
            }
            ProtocolAnswer::Joined(g) => {
                self.on_join_success(g.generation_id, &g.member_id, g.protocol);
                Reply::Generation(self.generation.clone())
            }
            ProtocolAnswer::SyncGroupFailed { code } => Reply::Next(self.on_sync_error(code)),
            ProtocolAnswer::Synced { generation_id } => {
                match self.on_sync_success_for(generation_id) {
                    Some(g) => Reply::Generation(g),
                    None => Reply::Outlived,
                }
            }
            ProtocolAnswer::MemberJoined(g) => {
                self.on_join_success(g.generation_id, &g.member_id, g.protocol);
                self.on_sync_success();
                Reply::Generation(self.generation.clone())
            }
            ProtocolAnswer::MemberHeartbeatFailed {
                sent_epoch,
                code,
                joining,
                message,
            } => Reply::Next(self.on_member_heartbeat_error(
                sent_epoch,
                code,
                joining,
                message.as_deref(),
            )),
            ProtocolAnswer::MemberEpoch { sent_epoch, epoch } => {
                self.on_member_epoch(sent_epoch, epoch);
                Reply::Generation(self.generation.clone())
            }
            ProtocolAnswer::AssignmentChanged | ProtocolAnswer::MemberAssignment { .. } => {
                self.request_rejoin("the coordinator changed the member's assignment");
                Reply::Next(Next::JoinAgain)
            }
        }
    }

    /// An OffsetCommit error for one partition, turned into what the committer reports.
    pub fn on_commit_error(&mut self, sent: &Generation, code: i16) -> (Next, Error) {
        let e = Error::kafka(code, "OffsetCommit");
        match code {
            codes::COORDINATOR_LOAD_IN_PROGRESS | codes::UNKNOWN_TOPIC_OR_PARTITION => {
                (Next::RetryAfterBackoff, e)
            }
            codes::COORDINATOR_NOT_AVAILABLE
            | codes::NOT_COORDINATOR
            | codes::REQUEST_TIMED_OUT => (Next::RediscoverCoordinator, e),
            codes::REBALANCE_IN_PROGRESS => {
                // As for a Heartbeat: only a rebalance of the member's current generation
                // calls for a join.
                if *sent == self.generation && self.state == MemberState::Stable {
                    self.request_rejoin("the group is rebalancing (OffsetCommit)");
                }
                (
                    Next::Continue,
                    Error::CommitFailed(
                        "the group is rebalancing; the offsets can be committed again after the rebalance, \
                         or in on_partitions_revoked"
                            .into(),
                    ),
                )
            }
            codes::STALE_MEMBER_EPOCH => (
                // KIP-848: the member's epoch moved on since the commit went out; it keeps
                // the partitions it still owns (commit_outlived_by_own_join sends them again).
                Next::Continue,
                Error::CommitFailed(format!(
                    "the member epoch {} of the commit is stale (the group's assignment moved on); \
                     commit again",
                    sent.generation_id
                )),
            ),
            codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION => {
                // Only a stable member learns here that it left its generation: one whose own
                // join is under way hears it from the JoinGroup answer (the group may simply
                // have moved on to the generation that join is part of).
                if *sent == self.generation && self.state == MemberState::Stable {
                    self.reset_generation(
                        code == codes::ILLEGAL_GENERATION,
                        "the commit's generation was stale",
                    );
                }
                (
                    Next::Continue,
                    Error::CommitFailed(format!(
                        "the member is no longer part of generation {} (the group rebalanced and its partitions \
                         may have moved): {}",
                        sent.generation_id,
                        crate::error::kafka_error_name(code)
                    )),
                )
            }
            codes::FENCED_INSTANCE_ID if *sent == self.generation => {
                let n = self.fail(code, "OffsetCommit");
                (n, e)
            }
            _ => (Next::Continue, e),
        }
    }

    /// Whether a commit sent with `sent` and answered `code` may go again with the generation
    /// the member holds once its join ends (under the cooperative protocol, where partitions
    /// kept through a join stay the member's; KIP-848's consumers likewise retry a commit with
    /// the member's latest epoch). A REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION answer is then
    /// about the member's own rejoin, under way or done since the commit went out, not a sign
    /// that its partitions moved.
    pub fn commit_outlived_by_own_join(&self, sent: &Generation, code: i16) -> bool {
        matches!(
            code,
            codes::REBALANCE_IN_PROGRESS | codes::ILLEGAL_GENERATION | codes::STALE_MEMBER_EPOCH
        ) && !sent.member_id.is_empty()
            && self.generation.member_id == sent.member_id
            && !self.partitions_lost
            && (self.generation.generation_id > sent.generation_id
                || (self.generation.generation_id == sent.generation_id
                    && self.state != MemberState::Stable))
    }

    fn fail(&mut self, code: i16, what: &str) -> Next {
        let e = match code {
            codes::FENCED_INSTANCE_ID => Error::kafka(
                code,
                format!(
                    "{what}: another consumer with group.instance.id `{}` joined the group; this one is fenced",
                    self.group_instance_id.as_deref().unwrap_or("")
                ),
            ),
            codes::UNRELEASED_INSTANCE_ID => Error::kafka(
                code,
                format!(
                    "{what}: another consumer with group.instance.id `{}` is still in the group; \
                     this one cannot join until that one leaves or its session expires",
                    self.group_instance_id.as_deref().unwrap_or("")
                ),
            ),
            codes::INVALID_REGULAR_EXPRESSION => Error::kafka(
                code,
                format!(
                    "{what}: the group coordinator refused the subscribed regular expression \
                     `{}` (the broker compiles it as RE2/J and matches it against whole topic \
                     names); subscribe again with a valid one after unsubscribe()",
                    self.subscribed_regex.as_deref().unwrap_or("")
                ),
            ),
            codes::INCONSISTENT_GROUP_PROTOCOL => Error::kafka(
                code,
                format!("{what}: the group's members share no assignor (partition.assignment.strategy) or protocol type"),
            ),
            _ => Error::kafka(code, what),
        };
        if e.is_fatal() {
            self.fatal = Some(e.clone());
        }
        Next::Fatal(e)
    }

    /// Ends the member with `e`: `poll()` reports it from now on.
    fn end(&mut self, e: Error) -> Next {
        self.fatal = Some(e.clone());
        Next::Fatal(e)
    }
}

/// What a ConsumerGroupHeartbeat answer that ends the member says, beside its code: the
/// broker's own message, and for a refused conversion what to do about it.
fn member_heartbeat_refusal(code: i16, broker_says: Option<&str>) -> String {
    let mut text = String::from("ConsumerGroupHeartbeat");
    if code == codes::GROUP_ID_NOT_FOUND {
        text.push_str(
            ": the coordinator will not convert the group of this id to the consumer \
             protocol for this member (its reason follows). A classic consumer group converts \
             only while its members' assignments carry no assignor data the broker cannot take \
             over (KAFKA-18134: a custom assignor's, or learner-sticky's while a learner warms \
             up): start this member again once the group has settled, or move the classic \
             members off that assignor first, one restart at a time: to \
             partition.assignment.strategy=cooperative-sticky,<their assignor> (the group keeps \
             their assignor until every member lists both, then takes cooperative-sticky), then \
             to cooperative-sticky alone",
        );
    }
    if let Some(m) = broker_says.filter(|m| !m.is_empty()) {
        text.push_str(&format!(" (the broker says: {m})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stable() -> Membership {
        let mut m = Membership::new(None);
        m.on_join_error(codes::MEMBER_ID_REQUIRED, "m-1");
        m.on_join_success(5, "m-1", Some("range".into()));
        m.on_sync_success();
        m
    }

    #[test]
    fn member_id_required_adopts_the_id_and_joins_again() {
        let mut m = Membership::new(None);
        assert_eq!(
            m.on_join_error(codes::MEMBER_ID_REQUIRED, "m-7"),
            Next::JoinAgain
        );
        assert_eq!(m.generation.member_id, "m-7");
        assert_eq!(m.generation.generation_id, -1);
    }

    #[test]
    fn join_errors_follow_the_java_table() {
        let cases: &[(i16, Next, bool)] = &[
            (codes::UNKNOWN_MEMBER_ID, Next::JoinAgain, false),
            (codes::ILLEGAL_GENERATION, Next::JoinAgain, true),
            (codes::REBALANCE_IN_PROGRESS, Next::JoinAgain, true),
            (
                codes::COORDINATOR_LOAD_IN_PROGRESS,
                Next::RetryAfterBackoff,
                true,
            ),
            (
                codes::COORDINATOR_NOT_AVAILABLE,
                Next::RediscoverCoordinator,
                true,
            ),
            (codes::NOT_COORDINATOR, Next::RediscoverCoordinator, true),
        ];
        for (code, next, keeps_id) in cases {
            let mut m = stable();
            assert_eq!(&m.on_join_error(*code, ""), next, "{code}");
            assert_eq!(m.generation.member_id == "m-1", *keeps_id, "{code}");
            assert!(m.fatal.is_none());
        }
        for code in [
            codes::FENCED_INSTANCE_ID,
            codes::INVALID_SESSION_TIMEOUT,
            codes::GROUP_AUTHORIZATION_FAILED,
            codes::INCONSISTENT_GROUP_PROTOCOL,
            24, // INVALID_GROUP_ID
            81, // GROUP_MAX_SIZE_REACHED
        ] {
            let mut m = stable();
            assert!(
                matches!(m.on_join_error(code, ""), Next::Fatal(_)),
                "{code}"
            );
            assert!(m.fatal.as_ref().is_some_and(|e| e.is_fatal()), "{code}");
        }
    }

    #[test]
    fn unknown_member_resets_generation_and_reports_partitions_lost() {
        let mut m = stable();
        assert_eq!(
            m.on_join_error(codes::UNKNOWN_MEMBER_ID, ""),
            Next::JoinAgain
        );
        assert_eq!(m.generation, Generation::none());
        assert!(m.partitions_lost);
        assert!(m.rejoin_needed);
    }

    #[test]
    fn sync_errors_follow_the_java_table() {
        let mut m = stable();
        assert_eq!(
            m.on_sync_error(codes::REBALANCE_IN_PROGRESS),
            Next::JoinAgain
        );
        assert!(
            !m.partitions_lost,
            "a rebalance alone does not lose partitions"
        );
        let mut m = stable();
        assert_eq!(m.on_sync_error(codes::ILLEGAL_GENERATION), Next::JoinAgain);
        assert_eq!(m.generation.member_id, "m-1");
        assert!(m.partitions_lost);
        let mut m = stable();
        assert_eq!(m.on_sync_error(codes::UNKNOWN_MEMBER_ID), Next::JoinAgain);
        assert_eq!(m.generation.member_id, "");
        let mut m = stable();
        assert_eq!(
            m.on_sync_error(codes::NOT_COORDINATOR),
            Next::RediscoverCoordinator
        );
        let mut m = stable();
        assert!(matches!(
            m.on_sync_error(codes::GROUP_AUTHORIZATION_FAILED),
            Next::Fatal(_)
        ));
        let mut m = stable();
        assert!(matches!(
            m.on_sync_error(codes::FENCED_INSTANCE_ID),
            Next::Fatal(_)
        ));
    }

    #[test]
    fn heartbeat_rebalance_in_progress_asks_for_a_rejoin_but_keeps_the_generation() {
        let mut m = stable();
        let g = m.generation.clone();
        assert_eq!(
            m.on_heartbeat(&g, codes::REBALANCE_IN_PROGRESS),
            Next::Continue
        );
        assert!(m.rejoin_needed);
        assert_eq!(m.generation, g);
        assert!(m.heartbeats_enabled());
    }

    #[test]
    fn a_rebalance_heard_of_for_a_generation_left_since_asks_for_no_rejoin() {
        // A Heartbeat (or OffsetCommit) sent in generation 4 is answered REBALANCE_IN_PROGRESS,
        // and the answer is taken in after the member is stable in 5, the generation that
        // rebalance made: joining again would start a rebalance nobody needs (each member then
        // gives up and gets back the same partitions, and commits meanwhile fail).
        let mut m = stable();
        let old = Generation {
            generation_id: 4,
            ..m.generation.clone()
        };
        assert_eq!(
            m.on_heartbeat(&old, codes::REBALANCE_IN_PROGRESS),
            Next::Continue
        );
        assert!(!m.rejoin_needed, "a heartbeat of generation 4");
        let (n, e) = m.on_commit_error(&old, codes::REBALANCE_IN_PROGRESS);
        assert_eq!(n, Next::Continue);
        assert!(
            matches!(e, Error::CommitFailed(_)),
            "the commit still failed"
        );
        assert!(!m.rejoin_needed, "a commit of generation 4");
        // The same answers about generation 5 do ask for one.
        let current = m.generation.clone();
        m.on_commit_error(&current, codes::REBALANCE_IN_PROGRESS);
        assert!(m.rejoin_needed);
    }

    #[test]
    fn heartbeat_errors_for_an_old_generation_are_ignored() {
        let mut m = stable();
        let old = Generation {
            generation_id: 4,
            ..m.generation.clone()
        };
        for code in [
            codes::ILLEGAL_GENERATION,
            codes::UNKNOWN_MEMBER_ID,
            codes::FENCED_INSTANCE_ID,
        ] {
            assert_eq!(m.on_heartbeat(&old, code), Next::Continue);
            assert_eq!(m.state, MemberState::Stable);
        }
    }

    #[test]
    fn heartbeat_errors_for_the_current_generation() {
        let mut m = stable();
        let g = m.generation.clone();
        m.on_heartbeat(&g, codes::ILLEGAL_GENERATION);
        assert_eq!(
            (m.state, m.generation.member_id.as_str()),
            (MemberState::Unjoined, "m-1")
        );
        assert!(!m.heartbeats_enabled());
        let mut m = stable();
        m.on_heartbeat(&g, codes::UNKNOWN_MEMBER_ID);
        assert_eq!(m.generation.member_id, "");
        let mut m = stable();
        assert!(matches!(
            m.on_heartbeat(&g, codes::FENCED_INSTANCE_ID),
            Next::Fatal(_)
        ));
        let mut m = stable();
        assert_eq!(
            m.on_heartbeat(&g, codes::NOT_COORDINATOR),
            Next::RediscoverCoordinator
        );
        assert_eq!(
            m.on_heartbeat(&g, codes::COORDINATOR_NOT_AVAILABLE),
            Next::RediscoverCoordinator
        );
        assert_eq!(
            m.on_heartbeat(&g, codes::COORDINATOR_LOAD_IN_PROGRESS),
            Next::RetryAfterBackoff
        );
        assert!(matches!(
            m.on_heartbeat(&g, codes::GROUP_AUTHORIZATION_FAILED),
            Next::Fatal(_)
        ));
    }

    #[test]
    fn poll_timeout_leaves_dynamic_members_and_drops_the_member_id() {
        let mut m = stable();
        assert!(m.poll_timeout_expired());
        assert_eq!(m.generation, Generation::none());
        assert!(m.partitions_lost && m.rejoin_needed);
        assert_eq!(m.rejoin_reason, "consumer poll timeout has expired");
        assert!(!m.heartbeats_enabled());
    }

    #[test]
    fn poll_timeout_sends_no_leave_for_static_members() {
        let mut m = Membership::new(Some("instance-1".into()));
        m.on_join_success(3, "m-1", None);
        m.on_sync_success();
        let send_leave = m.poll_timeout_expired();
        assert!(!send_leave);
        assert!(m.partitions_lost);
        // Nor does it say it leaves.
        let said = poll_timeout_consequence(send_leave);
        assert!(!said.contains("leaving the group"), "{said}");
        assert!(said.contains("sends no LeaveGroup"), "{said}");
        assert!(poll_timeout_consequence(true).contains("leaving the group"));
    }

    #[test]
    fn commit_errors() {
        let mut m = stable();
        let g = m.generation.clone();
        let (n, e) = m.on_commit_error(&g, codes::REBALANCE_IN_PROGRESS);
        assert_eq!(n, Next::Continue);
        assert!(matches!(e, Error::CommitFailed(_)));
        assert!(m.rejoin_needed);
        assert_eq!(
            m.generation, g,
            "REBALANCE_IN_PROGRESS keeps the generation"
        );
        let (_, e) = m.on_commit_error(&g, codes::ILLEGAL_GENERATION);
        assert!(matches!(e, Error::CommitFailed(_)));
        assert!(m.partitions_lost);
        let mut m = stable();
        assert_eq!(
            m.on_commit_error(&g, codes::NOT_COORDINATOR).0,
            Next::RediscoverCoordinator
        );
        assert_eq!(
            m.on_commit_error(&g, codes::COORDINATOR_LOAD_IN_PROGRESS).0,
            Next::RetryAfterBackoff
        );
        assert_eq!(
            m.on_commit_error(&g, codes::OFFSET_METADATA_TOO_LARGE).0,
            Next::Continue
        );
    }

    #[test]
    fn a_commit_after_a_poll_timeout_says_the_partitions_were_lost_not_rebalancing() {
        let mut m = stable();
        m.poll_timeout_expired();
        let e = m.commit_generation(false).unwrap_err().to_string();
        assert!(
            e.contains("max.poll.interval.ms") && e.contains("left the group"),
            "{e}"
        );
        assert!(!e.contains("rebalancing"), "{e}");
        let mut m = stable();
        let g = m.generation.clone();
        m.on_heartbeat(&g, codes::ILLEGAL_GENERATION);
        let e = m.commit_generation(false).unwrap_err().to_string();
        assert!(
            e.contains("generation was reset") && e.contains("stale"),
            "{e}"
        );
    }

    #[test]
    fn commit_generation_by_state() {
        let m = stable();
        assert_eq!(m.commit_generation(false).unwrap(), m.generation);
        // Rejoining from generation 5 (perhaps without the application: a background rejoin),
        // the member still holds its partitions of 5, and the broker takes commits of 5 until
        // the join completes: they go out with 5, as a Java member's would (it is still stable
        // there, its JoinGroup waiting for the next poll()).
        let mut joining = stable();
        joining.start_join();
        joining.join_sent();
        assert_eq!(joining.commit_generation(false).unwrap().generation_id, 5);
        // A JoinGroup answer that did not end the generation (the coordinator moved, a
        // rebalance restarted) keeps it too.
        joining.on_join_error(codes::NOT_COORDINATOR, "");
        assert_eq!(joining.commit_generation(false).unwrap().generation_id, 5);
        // JoinGroup answered: generation 6 has no assignment here yet, and 5 is over.
        joining.join_sent();
        joining.on_join_success(6, "m-1", Some("range".into()));
        let e = joining.commit_generation(false).unwrap_err().to_string();
        assert!(e.contains("rebalancing"), "{e}");
        // Nor after a SyncGroup that failed: 6's assignment never came.
        joining.on_sync_error(codes::REBALANCE_IN_PROGRESS);
        let e = joining.commit_generation(false).unwrap_err().to_string();
        assert!(e.contains("rebalancing"), "{e}");
        joining.start_join();
        assert!(
            joining.commit_generation(false).is_err(),
            "rejoining from 6"
        );
        joining.join_sent();
        joining.on_join_success(7, "m-1", Some("range".into()));
        joining.on_sync_success();
        assert_eq!(joining.commit_generation(false).unwrap().generation_id, 7);
        // A reset generation commits nothing, rejoining or not.
        joining.reset_generation(true, "test");
        joining.start_join();
        assert!(joining.commit_generation(false).is_err());
        // Never joined: only a committer of manually assigned partitions commits outside any
        // generation.
        let fresh = Membership::new(None);
        assert!(fresh.commit_generation(false).is_err());
        assert_eq!(fresh.commit_generation(true).unwrap(), Generation::none());
    }

    #[test]
    fn an_unjoined_member_does_not_commit_as_generation_minus_one() {
        let mut m = stable();
        assert_eq!(m.commit_generation(false).unwrap().generation_id, 5);
        m.poll_timeout_expired();
        assert!(m.take_partitions_lost(), "poll() reports them lost");
        assert!(matches!(
            m.commit_generation(false),
            Err(Error::CommitFailed(msg)) if msg.contains("not part of an active group")
        ));
        let m = Membership::new(None);
        assert!(m.commit_generation(false).is_err(), "never joined");
        assert_eq!(m.commit_generation(true).unwrap(), Generation::none());
        let mut m = stable();
        m.state = MemberState::CompletingRebalance;
        assert!(matches!(
            m.commit_generation(false),
            Err(Error::CommitFailed(msg)) if msg.contains("rebalancing")
        ));
    }

    #[test]
    fn a_commit_refused_because_of_the_members_own_join_may_go_again() {
        let mut m = stable();
        let sent = m.generation.clone();
        // Stable in the generation it committed with: the group moved on without it.
        for code in [codes::ILLEGAL_GENERATION, codes::REBALANCE_IN_PROGRESS] {
            assert!(!m.commit_outlived_by_own_join(&sent, code));
        }
        // Its own join went out after the commit: the answer is about that join.
        m.start_join();
        m.join_sent();
        assert!(m.commit_outlived_by_own_join(&sent, codes::ILLEGAL_GENERATION));
        assert!(m.commit_outlived_by_own_join(&sent, codes::REBALANCE_IN_PROGRESS));
        assert!(!m.commit_outlived_by_own_join(&sent, codes::UNKNOWN_MEMBER_ID));
        assert!(!m.commit_outlived_by_own_join(&sent, codes::OFFSET_METADATA_TOO_LARGE));
        // ... and no reset: the JoinGroup answer says whether the member is still in.
        let (_, e) = m.on_commit_error(&sent, codes::ILLEGAL_GENERATION);
        assert!(matches!(e, Error::CommitFailed(_)));
        assert!(!m.partitions_lost);
        m.on_join_success(6, "m-1", None);
        assert!(m.commit_outlived_by_own_join(&sent, codes::ILLEGAL_GENERATION));
        m.on_sync_success();
        assert!(m.commit_outlived_by_own_join(&sent, codes::ILLEGAL_GENERATION));
        // A generation lost meanwhile, or another member id, is not the member's own join.
        m.reset_generation(false, "test");
        assert!(!m.commit_outlived_by_own_join(&sent, codes::ILLEGAL_GENERATION));
    }

    #[test]
    fn a_member_commits_with_the_generation_whose_partitions_it_holds() {
        let mut m = stable();
        assert!(m.owned_generation().is_some());
        m.request_rejoin("test");
        assert!(
            m.owned_generation().is_some(),
            "a requested rebalance has not started yet"
        );
        m.start_join();
        assert_eq!(m.owned_generation().map(|g| g.generation_id), Some(5));
        m.on_join_success(6, "m-1", None);
        assert!(m.owned_generation().is_none(), "6 is not assigned yet");
        m.on_sync_success();
        assert_eq!(m.owned_generation().map(|g| g.generation_id), Some(6));
        m.leave(false);
        assert!(m.owned_generation().is_none());
    }

    #[test]
    fn a_dynamic_member_leaves_with_its_id_and_a_static_one_sends_nothing() {
        let mut m = stable();
        assert_eq!(m.leave(false).as_deref(), Some("m-1"));
        assert_eq!(m.generation(), &Generation::none());
        assert_eq!(m.state(), MemberState::Unjoined);
        assert!(
            !m.partitions_lost(),
            "leaving gives the partitions up, it does not lose them"
        );
        assert_eq!(m.leave(true), None, "no id left to leave with");
        let mut m = Membership::new(Some("instance-1".into()));
        m.on_join_success(3, "m-1", None);
        m.on_sync_success();
        assert_eq!(m.leave(false), None);
        assert_eq!(m.generation(), &Generation::none());
        // A static member that leaves for good (scale-down) sends LeaveGroup after all.
        let mut m = Membership::new(Some("instance-1".into()));
        m.on_join_success(3, "m-1", None);
        m.on_sync_success();
        assert_eq!(m.leave(true).as_deref(), Some("m-1"));
    }

    #[test]
    fn a_sync_answer_for_a_generation_reset_meanwhile_is_not_taken() {
        let mut m = Membership::new(None);
        m.start_join();
        m.on_join_success(4, "m-1", None);
        let g = m.generation().clone();
        // The heartbeat found the generation stale while SyncGroup was in flight.
        m.on_heartbeat(&g, codes::ILLEGAL_GENERATION);
        assert_eq!(m.on_sync_success_for(4), None);
        assert_eq!(m.state(), MemberState::Unjoined);
        let mut m = Membership::new(None);
        m.on_join_success(4, "m-1", None);
        assert_eq!(m.on_sync_success_for(4).map(|g| g.generation_id), Some(4));
        assert_eq!(m.state(), MemberState::Stable);
        assert!(!m.rejoin_needed());
    }

    #[test]
    fn starting_a_join_clears_the_request_and_stops_heartbeats() {
        let mut m = stable();
        m.request_rejoin("the subscription changed");
        m.start_join();
        assert!(!m.rejoin_needed());
        assert_eq!(m.state(), MemberState::PreparingRebalance);
        assert_eq!(
            m.commit_generation(false).unwrap().generation_id,
            5,
            "it still holds generation 5's partitions"
        );
        assert!(
            !m.heartbeats_enabled(),
            "the pending JoinGroup keeps the member alive"
        );
        assert_eq!(m.join_sent(), ("m-1".to_string(), 5));
    }

    #[test]
    fn close_gives_partitions_up_as_lost_without_a_generation() {
        let mut m = stable();
        assert!(!m.holds_no_generation());
        m.poll_timeout_expired();
        assert!(m.holds_no_generation());
        m.take_partitions_lost();
        assert!(m.holds_no_generation(), "still in no generation");
        assert!(Membership::new(None).holds_no_generation());
    }

    #[test]
    fn an_error_to_report_once_comes_out_once_and_a_fatal_one_stays() {
        let mut m = stable();
        m.report_once(Error::kafka(-1, "Heartbeat"));
        assert!(m.take_error().is_some());
        assert!(m.take_error().is_none());
        m.set_fatal(Error::kafka(codes::GROUP_AUTHORIZATION_FAILED, "JoinGroup"));
        assert!(m.fatal().is_some());
        assert!(m.fatal().is_some());
    }

    /// KIP-848's ConsumerGroupHeartbeat errors, as the Java client's consumer membership
    /// manager takes them: (code, what follows, member id kept, partitions lost, fatal).
    #[test]
    fn member_heartbeat_errors_follow_the_java_table() {
        let cases: &[(i16, &str, bool, bool, bool)] = &[
            (codes::FENCED_MEMBER_EPOCH, "JoinAgain", true, true, false),
            (codes::UNKNOWN_MEMBER_ID, "JoinAgain", true, true, false),
            (
                codes::COORDINATOR_NOT_AVAILABLE,
                "RediscoverCoordinator",
                true,
                false,
                false,
            ),
            (
                codes::NOT_COORDINATOR,
                "RediscoverCoordinator",
                true,
                false,
                false,
            ),
            (
                codes::COORDINATOR_LOAD_IN_PROGRESS,
                "RetryAfterBackoff",
                true,
                false,
                false,
            ),
            (codes::UNRELEASED_INSTANCE_ID, "Fatal", true, false, true),
            (codes::UNSUPPORTED_ASSIGNOR, "Fatal", true, false, true),
            (
                codes::INVALID_REGULAR_EXPRESSION,
                "Fatal",
                true,
                false,
                true,
            ),
            (
                codes::GROUP_AUTHORIZATION_FAILED,
                "Fatal",
                true,
                false,
                true,
            ),
            // The Java client's default branch: an answer it does not expect ends the member.
            (codes::GROUP_ID_NOT_FOUND, "Fatal", true, false, true),
            (codes::INVALID_REQUEST, "Fatal", true, false, true),
            (
                codes::REQUEST_TIMED_OUT,
                "RetryAfterBackoff",
                true,
                false,
                false,
            ),
        ];
        for &(code, next, keeps_id, lost, fatal) in cases {
            let mut m = stable();
            let got = m.on_member_heartbeat_error(5, code, false, None);
            let name = match &got {
                Next::Continue => "Continue",
                Next::JoinAgain => "JoinAgain",
                Next::RetryAfterBackoff => "RetryAfterBackoff",
                Next::RediscoverCoordinator => "RediscoverCoordinator",
                Next::Fatal(_) => "Fatal",
            };
            assert_eq!(name, next, "code {code}");
            assert_eq!(m.generation.member_id == "m-1", keeps_id, "code {code}");
            assert_eq!(m.partitions_lost(), lost, "code {code}");
            assert_eq!(m.fatal().is_some(), fatal, "code {code}");
            if lost {
                // Fenced: rejoin with epoch 0 (no generation) under the same member id.
                assert_eq!(m.generation.generation_id, -1, "code {code}");
                assert!(m.rejoin_needed());
                assert!(m.commit_generation(false).is_err());
            }
        }
        // An answer about an epoch the member has left behind changes nothing.
        let mut m = stable();
        assert_eq!(
            m.on_member_heartbeat_error(4, codes::FENCED_MEMBER_EPOCH, false, None),
            Next::Continue
        );
        assert!(!m.partitions_lost());
        // A failed join attempt leaves the member out of the join, to try again.
        let mut m = Membership::new(None);
        m.join_sent();
        assert_eq!(
            m.on_member_heartbeat_error(0, codes::COORDINATOR_LOAD_IN_PROGRESS, true, None),
            Next::RetryAfterBackoff
        );
        assert_eq!(m.state(), MemberState::Unjoined);
    }

    /// A regex the coordinator cannot compile ends the member, joining or heartbeating, with an
    /// error that names the regex (the broker's own message only goes to the log).
    #[test]
    fn a_refused_regex_is_fatal_and_its_error_names_the_regex() {
        for joining in [true, false] {
            let mut m = if joining {
                Membership::new(None)
            } else {
                stable()
            };
            m.set_subscribed_regex(Some("orders-[".into()));
            if joining {
                m.join_sent();
            }
            let sent = if joining { 0 } else { 5 };
            let Next::Fatal(e) =
                m.on_member_heartbeat_error(sent, codes::INVALID_REGULAR_EXPRESSION, joining, None)
            else {
                panic!("joining {joining}: expected fatal")
            };
            assert_eq!(e.kafka_code(), Some(codes::INVALID_REGULAR_EXPRESSION));
            assert!(e.is_fatal() && !e.is_retriable(), "joining {joining}");
            let text = e.to_string();
            assert!(text.contains("`orders-[`"), "joining {joining}: {text}");
            assert!(text.contains("INVALID_REGULAR_EXPRESSION"), "{text}");
            assert_eq!(m.fatal(), Some(&e), "poll() reports it every time");
        }
    }

    /// KAFKA-18134: the coordinator will not convert a classic group whose members use an
    /// assignor it does not know; the consumer-protocol member that asked is ended, with the
    /// broker's reason and the way round it, not left retrying while it owns nothing.
    #[test]
    fn a_refused_conversion_ends_the_member_with_the_brokers_reason() {
        let says = "Cannot upgrade classic group g to consumer group because an unsupported \
                    custom assignor is in use.";
        for joining in [true, false] {
            let mut m = if joining {
                Membership::new(None)
            } else {
                stable()
            };
            if joining {
                m.join_sent();
            }
            let sent = if joining { 0 } else { 5 };
            let got = m.on_answer(ProtocolAnswer::MemberHeartbeatFailed {
                sent_epoch: sent,
                code: codes::GROUP_ID_NOT_FOUND,
                joining,
                message: Some(says.into()),
            });
            let Reply::Next(Next::Fatal(e)) = got else {
                panic!("joining {joining}: expected fatal, got {got:?}")
            };
            assert!(e.is_fatal() && !e.is_retriable(), "joining {joining}");
            assert_eq!(e.kafka_code(), Some(codes::GROUP_ID_NOT_FOUND));
            let text = e.to_string();
            assert!(
                text.starts_with("GROUP_ID_NOT_FOUND (Kafka error 69)"),
                "{text}"
            );
            assert!(text.contains(says), "the broker's reason: {text}");
            assert!(
                text.contains("partition.assignment.strategy=cooperative-sticky,<their assignor>"),
                "the way round, through a list every member shares: {text}"
            );
            assert_eq!(m.fatal(), Some(&e), "poll() reports it every time");
        }
        // Elsewhere the code keeps its own verdict (ConsumerGroupDescribe of a classic group).
        let e = Error::kafka(codes::GROUP_ID_NOT_FOUND, "OffsetCommit");
        assert!(!e.is_fatal());
    }

    #[test]
    fn a_heartbeat_moves_a_stable_member_to_a_newer_epoch_only() {
        let mut m = stable();
        m.on_member_epoch(5, 7);
        assert_eq!(m.commit_generation(false).unwrap().generation_id, 7);
        // Older, or an answer to a heartbeat of an epoch left behind: ignored.
        m.on_member_epoch(7, 6);
        m.on_member_epoch(5, 9);
        assert_eq!(m.generation().generation_id, 7);
        // A commit refused as STALE_MEMBER_EPOCH goes again with the newer epoch.
        let sent = Generation {
            generation_id: 6,
            member_id: "m-1".into(),
            protocol: Some("range".into()),
        };
        assert!(m.commit_outlived_by_own_join(&sent, codes::STALE_MEMBER_EPOCH));
    }

    fn generation(generation_id: i32, member_id: &str, protocol: &str) -> Generation {
        Generation {
            generation_id,
            member_id: member_id.into(),
            protocol: Some(protocol.into()),
        }
    }

    /// A classic join's answers, reported as values, leave the member where the transitions
    /// called one by one did: in the generation, heartbeating, then stable and committing with
    /// it.
    #[test]
    fn a_classic_joins_answers_applied_as_values_make_the_member_stable() {
        let mut m = Membership::new(None);
        let mut by_hand = Membership::new(None);
        assert_eq!(
            m.on_answer(ProtocolAnswer::JoinSending),
            Reply::Generation(Generation::none())
        );
        assert_eq!(
            m.on_answer(ProtocolAnswer::JoinGroupFailed {
                code: codes::MEMBER_ID_REQUIRED,
                member_id: "m-1".into(),
            }),
            Reply::Next(Next::JoinAgain)
        );
        let Reply::Generation(sent) = m.on_answer(ProtocolAnswer::JoinSending) else {
            panic!("a join request carries the member's generation")
        };
        assert_eq!((sent.member_id.as_str(), sent.generation_id), ("m-1", -1));
        assert_eq!(
            m.on_answer(ProtocolAnswer::Joined(generation(4, "m-1", "range"))),
            Reply::Generation(generation(4, "m-1", "range"))
        );
        assert_eq!(m.state(), MemberState::CompletingRebalance);
        assert!(m.heartbeats_enabled());
        assert!(m.commit_generation(false).is_err(), "no assignment yet");
        assert_eq!(
            m.on_answer(ProtocolAnswer::Synced { generation_id: 4 }),
            Reply::Generation(generation(4, "m-1", "range"))
        );
        assert_eq!(m.state(), MemberState::Stable);
        assert_eq!(
            m.commit_generation(false),
            Ok(generation(4, "m-1", "range"))
        );

        by_hand.join_sent();
        by_hand.on_join_error(codes::MEMBER_ID_REQUIRED, "m-1");
        by_hand.join_sent();
        by_hand.on_join_success(4, "m-1", Some("range".into()));
        by_hand.on_sync_success_for(4);
        assert_eq!(format!("{m:?}"), format!("{by_hand:?}"));
    }

    /// SyncGroup's answer for a generation the heartbeat reset meanwhile is stale: the member
    /// says so, and stays out of the generation with its partitions lost.
    #[test]
    fn a_sync_answer_for_a_generation_reset_meanwhile_is_outlived() {
        let mut m = stable();
        m.on_answer(ProtocolAnswer::JoinSending);
        m.on_answer(ProtocolAnswer::Joined(generation(6, "m-1", "range")));
        let sent = m.generation().clone();
        assert_eq!(
            m.on_heartbeat(&sent, codes::ILLEGAL_GENERATION),
            Next::Continue
        );
        assert_eq!(
            m.on_answer(ProtocolAnswer::Synced { generation_id: 6 }),
            Reply::Outlived
        );
        assert_eq!(m.generation().generation_id, -1);
        assert!(m.partitions_lost());
        assert!(m.rejoin_needed());
    }

    /// Error answers to a join, as values: the Java client's table still decides (see
    /// `join_errors_follow_the_java_table`), and a fatal one keeps the error the protocol made.
    #[test]
    fn join_error_answers_as_values_follow_the_table() {
        let cases: Vec<(ProtocolAnswer, Next, bool)> = vec![
            (
                ProtocolAnswer::JoinGroupFailed {
                    code: codes::REBALANCE_IN_PROGRESS,
                    member_id: String::new(),
                },
                Next::JoinAgain,
                false,
            ),
            (
                ProtocolAnswer::JoinGroupFailed {
                    code: codes::NOT_COORDINATOR,
                    member_id: String::new(),
                },
                Next::RediscoverCoordinator,
                false,
            ),
            (
                ProtocolAnswer::SyncGroupFailed {
                    code: codes::REBALANCE_IN_PROGRESS,
                },
                Next::JoinAgain,
                true,
            ),
            (
                ProtocolAnswer::SyncGroupFailed {
                    code: codes::COORDINATOR_NOT_AVAILABLE,
                },
                Next::RediscoverCoordinator,
                false,
            ),
        ];
        for (answer, next, rejoin) in cases {
            let mut m = stable();
            m.on_answer(ProtocolAnswer::JoinSending);
            assert!(!answer.wakes_poll(), "{answer:?}");
            assert_eq!(m.on_answer(answer.clone()), Reply::Next(next), "{answer:?}");
            assert_eq!(m.rejoin_needed(), rejoin, "{answer:?}");
            assert_eq!(m.state(), MemberState::Unjoined, "{answer:?}");
            assert!(m.fatal().is_none(), "{answer:?}");
        }
        let range = Error::kafka(
            codes::INVALID_SESSION_TIMEOUT,
            "session.timeout.ms=1000 is outside the range the broker allows: 6000..1800000 ms",
        );
        let mut m = Membership::new(None);
        let reply = m.on_answer(ProtocolAnswer::JoinGroupFatal {
            code: codes::INVALID_SESSION_TIMEOUT,
            member_id: String::new(),
            error: range.clone(),
        });
        assert_eq!(reply, Reply::Next(Next::Fatal(range.clone())));
        assert_eq!(m.fatal(), Some(&range), "poll() names the range");
    }

    /// KIP-848's answers as values: the join makes the member stable in the coordinator's
    /// epoch at once; a heartbeat moves it to a newer epoch; a changed assignment asks for a
    /// rejoin (and wakes `poll()`); a fence loses what it owns.
    #[test]
    fn consumer_protocol_answers_as_values() {
        let mut m = Membership::new(None);
        let Reply::Generation(sent) = m.on_answer(ProtocolAnswer::JoinSending) else {
            panic!("a join request carries the member's generation")
        };
        assert_eq!(sent.generation_id, -1);
        let joined = Generation {
            generation_id: 3,
            member_id: "x".into(),
            protocol: Some("consumer".into()),
        };
        assert!(!ProtocolAnswer::MemberJoined(joined.clone()).wakes_poll());
        assert_eq!(
            m.on_answer(ProtocolAnswer::MemberJoined(joined.clone())),
            Reply::Generation(joined.clone())
        );
        assert_eq!(m.state(), MemberState::Stable);
        assert!(!m.rejoin_needed());
        assert_eq!(m.commit_generation(false), Ok(joined.clone()));
        let Reply::Generation(moved) = m.on_answer(ProtocolAnswer::MemberEpoch {
            sent_epoch: 3,
            epoch: 5,
        }) else {
            panic!("the member's generation after the answer")
        };
        assert_eq!(moved.generation_id, 5);
        assert!(ProtocolAnswer::AssignmentChanged.wakes_poll());
        assert_eq!(
            m.on_answer(ProtocolAnswer::AssignmentChanged),
            Reply::Next(Next::JoinAgain)
        );
        assert!(m.rejoin_needed());
        assert_eq!(
            m.on_answer(ProtocolAnswer::MemberHeartbeatFailed {
                sent_epoch: 5,
                code: codes::FENCED_MEMBER_EPOCH,
                joining: false,
                message: None,
            }),
            Reply::Next(Next::JoinAgain)
        );
        assert!(m.partitions_lost(), "fenced: what it owned is lost");
        assert_eq!(m.generation().member_id, "x", "KIP-1082: it keeps its id");
        assert_eq!(m.generation().generation_id, -1);
    }
}

//! The seam between the group member and the protocol that carries its membership to the
//! coordinator (the Java client's `group.protocol`). The member's callers (`poll()`, the
//! background heartbeat, close) only ever reach a generation, heartbeat and leave through
//! [`GroupProtocol`]; how that is spoken on the wire is the protocol's business:
//! - `classic` ([`crate::group::classic::Classic`]): JoinGroup, the leader's assignment,
//!   SyncGroup, Heartbeat and LeaveGroup (KIP-62, KIP-429);
//! - a second protocol (KIP-848's ConsumerGroupHeartbeat, where the coordinator assigns and a
//!   heartbeat can carry a new assignment) implements the same three verbs.
//!
//! A protocol decides nothing about the member itself: it sends, and reports each answer as a
//! value ([`ProtocolAnswer`](crate::group::member::ProtocolAnswer)) to the member's state ([`Membership::on_answer`], through the
//! [`ProtocolContext`] it is given), whose pure transitions say what follows. The retry loop, the
//! heartbeat clock and `max.poll.interval.ms` stay with the driver, so a new protocol inherits
//! them (KIP-62's contract and the error table of the Java client do not depend on the wire).
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::backoff::Deadline;
use crate::cluster::Cluster;
use crate::config::ConsumerConfig;
use crate::error::{Error, Result};
use crate::group::assignor::Assignor;
use crate::group::group_member::HeartbeatInput;
use crate::group::member::{Generation, Membership, Next, ProtocolAnswer, Reply};
use crate::group::step::{JoinInput, JoinOutcome};
use crate::net::Connection;
use crate::protocol::group::Member;

/// What a protocol's verbs return: a future that may run on the I/O runtime.
pub(crate) type ProtocolFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a protocol may use of the member it carries: the member's settings, the group
/// coordinator's connection, and the one way to change the member's state (`report`). The
/// consumer's `GroupDriver` (group/coordinator.rs) is the one implementation; a protocol
/// sees no more of it, so it depends on this seam and not on the driver.
pub(crate) trait ProtocolContext: Send + Sync {
    fn group_id(&self) -> &str;
    fn config(&self) -> &ConsumerConfig;
    fn cluster(&self) -> &Arc<Cluster>;
    /// Whether the member's joins say it is leaving (learner-sticky scale-down).
    fn is_leaving(&self) -> bool;
    /// This member as the group requests name it.
    fn member<'a>(&'a self, member_id: &'a str) -> Member<'a>;
    /// The connection to the group coordinator (found first if none is known).
    fn coordinator(&self, deadline: Deadline) -> ProtocolFuture<'_, Result<Arc<Connection>>>;
    /// The coordinator's connection that JoinGroup and SyncGroup wait on (its own lane).
    fn join_connection(&self, deadline: Deadline) -> ProtocolFuture<'_, Result<Arc<Connection>>>;
    /// The coordinator answered that it is not (or failed): look for it again.
    fn coordinator_unknown(&self, why: &str);
    /// The coordinator's broker id, while one is known.
    fn coordinator_id(&self) -> Option<i32>;
    /// The assignors this member offers, in the order of `partition.assignment.strategy`.
    fn assignors(&self) -> &[Box<dyn Assignor>];
    /// The assignor of this member named `name`, if it offers one.
    fn assignor(&self, name: &str) -> Option<&dyn Assignor>;
    /// Hands an answer to the member's state ([`Membership::on_answer`]): what follows.
    fn report(&self, answer: ProtocolAnswer) -> ProtocolFuture<'_, Reply>;
    /// The member id and generation a join request goes out with.
    fn join_sending(&self) -> ProtocolFuture<'_, Generation>;
}

/// How one attempt to reach a generation ended.
#[derive(Debug)]
pub(crate) enum JoinAttempt {
    /// The member is in a generation with this assignment.
    Joined(Box<JoinOutcome>),
    /// Try again at once (a member id was handed out, a generation reset meanwhile).
    Again,
    /// A retriable failure: try again after the backoff.
    Backoff(Error),
    /// The member cannot go on; `poll()` reports it.
    Fatal(Error),
}

impl JoinAttempt {
    /// A failure of the transport or of a request that did not get as far as an answer:
    /// retriable errors are tried again after the backoff, the others end the join.
    pub fn failed(e: Error) -> JoinAttempt {
        if e.is_retriable() {
            JoinAttempt::Backoff(e)
        } else {
            JoinAttempt::Fatal(e)
        }
    }
}

/// A group protocol: the three verbs the group member needs from the wire. Each reports the
/// answers it gets to the member as values (`driver.report(answer).await`) before it
/// returns, and never changes the member itself, so the member's state (member id, generation,
/// what is owed) moves by the same transitions whichever protocol carried it.
pub(crate) trait GroupProtocol: Send + Sync {
    /// The protocol's name as `group.protocol` spells it.
    fn name(&self) -> &'static str;

    /// One attempt to reach a generation with `input`'s subscription and owned partitions.
    fn join_once<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        input: &'a JoinInput,
    ) -> ProtocolFuture<'a, JoinAttempt>;

    /// One heartbeat of `input.generation`: the error code the coordinator answered (`Err`: no
    /// answer). The driver hands the code to [`Membership::on_heartbeat`](crate::group::member::Membership::on_heartbeat).
    fn heartbeat<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        input: &'a HeartbeatInput,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>>;

    /// What the member does with a heartbeat's answer `code`: the protocol's own error table
    /// (the classic one by default).
    fn heartbeat_answered(&self, m: &mut Membership, sent: &Generation, code: i16) -> Next {
        m.on_heartbeat(sent, code)
    }

    /// The heartbeat interval the coordinator asks for, where the protocol lets it decide
    /// (KIP-848); `None`: `heartbeat.interval.ms`.
    fn heartbeat_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// When the coordinator last moved the member's epoch, where the protocol has epochs that
    /// move while the member keeps heartbeating (KIP-848): the heartbeat comes sooner for a
    /// while after ([`heartbeat_interval`](crate::group::heartbeat::heartbeat_interval)).
    fn epoch_moved_at(&self) -> Option<std::time::Instant> {
        None
    }

    /// A static member (`group.instance.id`) of `generation` closes and will be back: what the
    /// protocol tells the coordinator, once (the classic protocol: nothing, the member's
    /// session keeps its place).
    fn leave_for_restart<'a>(
        &'a self,
        _driver: &'a dyn ProtocolContext,
        _generation: &'a Generation,
        _deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Tells the coordinator that `member_id` leaves the group, once, without retry: the error
    /// code answered (`Err`: no answer).
    fn leave<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        member_id: &'a str,
        reason: &'a str,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>>;
}

/// A group protocol without a coordinator, for tests of the member's contract through the seam:
/// joins end in the generations a test scripts, heartbeats answer the codes it scripts, and
/// every request is written to a log the test reads. It reports each answer to the member's
/// state exactly as a real protocol must.
#[cfg(test)]
pub(crate) mod fake {
    use std::collections::{BTreeSet, VecDeque};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::error::codes;
    use crate::group::member::{ProtocolAnswer, Reply};
    use crate::sync::Unpoisoned;
    use crate::types::TopicPartition;

    /// A generation a scripted join ends in.
    pub(crate) struct FakeJoin {
        pub generation_id: i32,
        pub member_id: &'static str,
        /// The assignor the coordinator chose (one the member offered).
        pub assignor: &'static str,
        pub assigned: Vec<TopicPartition>,
    }

    pub(crate) struct FakeProtocol {
        joins: Mutex<VecDeque<FakeJoin>>,
        heartbeat_codes: Mutex<VecDeque<i16>>,
        /// What was sent, in order; a test may write its own events (callbacks) to it too.
        log: Arc<Mutex<Vec<String>>>,
    }

    impl FakeProtocol {
        /// A protocol that writes what it sends to `log`.
        pub fn new(log: Arc<Mutex<Vec<String>>>) -> FakeProtocol {
            FakeProtocol {
                joins: Mutex::default(),
                heartbeat_codes: Mutex::default(),
                log,
            }
        }

        /// The next join ends in `join`.
        pub fn script_join(&self, join: FakeJoin) {
            self.joins.lock().unpoisoned().push_back(join);
        }

        /// The next heartbeat is answered `code` (after it, NONE again).
        pub fn script_heartbeat(&self, code: i16) {
            self.heartbeat_codes.lock().unpoisoned().push_back(code);
        }

        fn write(&self, line: String) {
            self.log.lock().unpoisoned().push(line);
        }
    }

    /// `t-0,t-1`: partitions as the log writes them.
    pub(crate) fn names<'a>(set: impl IntoIterator<Item = &'a TopicPartition>) -> String {
        let v: Vec<String> = set
            .into_iter()
            .map(|tp| format!("{}-{}", tp.topic, tp.partition))
            .collect();
        v.join(",")
    }

    impl GroupProtocol for FakeProtocol {
        fn name(&self) -> &'static str {
            "fake"
        }

        fn join_once<'a>(
            &'a self,
            driver: &'a dyn ProtocolContext,
            input: &'a JoinInput,
        ) -> ProtocolFuture<'a, JoinAttempt> {
            Box::pin(async move {
                let sent = driver.join_sending().await;
                let (member_id, generation_id) = (sent.member_id, sent.generation_id);
                let Some(join) = self.joins.lock().unpoisoned().pop_front() else {
                    // Nothing scripted: the coordinator keeps the rebalance open.
                    return JoinAttempt::Backoff(Error::kafka(
                        codes::REBALANCE_IN_PROGRESS,
                        "no join scripted",
                    ));
                };
                self.write(format!(
                    "join member={member_id:?} generation={generation_id} topics={} owned=[{}]",
                    input.topics.join(","),
                    names(&input.owned)
                ));
                driver
                    .report(ProtocolAnswer::Joined(Generation {
                        generation_id: join.generation_id,
                        member_id: join.member_id.to_string(),
                        protocol: Some(join.assignor.to_string()),
                    }))
                    .await;
                let Some(protocol) = driver.assignor(join.assignor).map(|a| a.protocol()) else {
                    return JoinAttempt::Fatal(Error::Corrupt(format!(
                        "assignor {} not offered",
                        join.assignor
                    )));
                };
                let Reply::Generation(generation) = driver
                    .report(ProtocolAnswer::Synced {
                        generation_id: join.generation_id,
                    })
                    .await
                else {
                    return JoinAttempt::Again;
                };
                JoinAttempt::Joined(Box::new(JoinOutcome {
                    generation,
                    assigned: join.assigned.into_iter().collect(),
                    learning: BTreeSet::new(),
                    protocol,
                    assigned_from: None,
                    follow_up: false,
                }))
            })
        }

        fn heartbeat<'a>(
            &'a self,
            _driver: &'a dyn ProtocolContext,
            input: &'a HeartbeatInput,
            _deadline: Deadline,
        ) -> ProtocolFuture<'a, Result<i16>> {
            Box::pin(async move {
                let generation = &input.generation;
                let code = self
                    .heartbeat_codes
                    .lock()
                    .unpoisoned()
                    .pop_front()
                    .unwrap_or(codes::NONE);
                if code != codes::NONE {
                    self.write(format!(
                        "heartbeat generation={} answered {}",
                        generation.generation_id,
                        crate::error::kafka_error_name(code)
                    ));
                }
                Ok(code)
            })
        }

        fn leave<'a>(
            &'a self,
            _driver: &'a dyn ProtocolContext,
            member_id: &'a str,
            reason: &'a str,
            _deadline: Deadline,
        ) -> ProtocolFuture<'a, Result<i16>> {
            Box::pin(async move {
                self.write(format!("leave member={member_id:?} reason={reason}"));
                Ok(codes::NONE)
            })
        }
    }
}

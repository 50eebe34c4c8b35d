//! KIP-848's consumer group protocol (`group.protocol=consumer`) behind [`GroupProtocol`]: the
//! coordinator assigns, and one request, ConsumerGroupHeartbeat, carries the member's
//! subscription, its owned partitions, its epoch and the assignment back.
//!
//! How it maps onto the member's three verbs, so that the member, `poll()` and the listener work
//! as under the classic protocol (callbacks on the polling thread, lost vs revoked, commits
//! with the member's epoch in place of a generation):
//! - `join_once`: a ConsumerGroupHeartbeat with the member's whole state; epoch 0 for a new (or
//!   fenced) member, its current epoch otherwise. Its answer ends the "join" at once (there is
//!   no SyncGroup): the member is stable in the answer's epoch with the assignment the
//!   coordinator gave (or, when the answer leaves it out as unchanged, the last one it gave).
//! - `heartbeat`: the same request at the heartbeat interval. When its answer brings an
//!   assignment that differs from what the member owns, the member is asked to rejoin: its next
//!   step sends the request at once and applies the assignment as a cooperative join (revoke
//!   what is gone, then add what is new). A revocation asks for a rejoin in turn, whose request
//!   tells the coordinator the partitions are released, so it can hand them on.
//! - `leave`: epoch -1.
//!
//! Requests always carry the member's whole state (see `protocol::consumer_group`). A server-side
//! regex subscription ([`Consumer::subscribe_regex`](crate::Consumer::subscribe_regex)) is part
//! of it: every request of such a member carries the regex (and an empty list of topic names),
//! and the coordinator resolves it against the cluster's topics itself, asynchronously, so the
//! first assignment may come some heartbeats after the join. The one field that depends on what
//! was sent before is the regex of a member that left its regex for topic names: it is sent
//! empty (which removes it) until an answer confirms it, see [`regex_field`].
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use uuid::Uuid;

use crate::backoff::Deadline;
use crate::cluster::Metadata;
use crate::config::ConsumerConfig;
use crate::error::{codes, Error, Result};
use crate::group::assignor::RebalanceProtocol;
use crate::group::group_member::HeartbeatInput;
use crate::group::group_protocol::{GroupProtocol, JoinAttempt, ProtocolContext, ProtocolFuture};
use crate::group::member::{Generation, Membership, Next, ProtocolAnswer, Reply};
use crate::group::step::{JoinInput, JoinOutcome};
use crate::protocol::consumer_group::{
    consumer_group_heartbeat, name_assignment, read_answer, MemberHeartbeat, MemberHeartbeatAnswer,
    TopicIds, JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
};
use crate::protocol::group::Member;
use crate::protocol::msg::ConsumerGroupHeartbeatRequest;
use crate::sync::Unpoisoned;
use crate::types::TopicPartition;

/// The name the member's generation carries for this protocol (where the classic protocol
/// names the assignor the group chose).
pub(crate) const CONSUMER_PROTOCOL: &str = "consumer";

/// What the protocol remembers between requests.
#[derive(Debug, Default)]
struct State {
    /// The member's last assignment from the coordinator, by topic id (answers that leave it
    /// out mean it did not change).
    assignment: BTreeMap<Uuid, BTreeSet<i32>>,
    /// The heartbeat interval the coordinator asks for (`group.consumer.heartbeat.interval.ms`).
    heartbeat_interval: Option<Duration>,
    /// The coordinator may hold a regex for this member ([`regex_held_after`]).
    regex_held: bool,
    /// When an answer last gave the member an epoch other than the one it sent: partitions
    /// another member still has to release may come with a later answer, so the heartbeat
    /// comes sooner for a while ([`GroupProtocol::epoch_moved_at`]).
    epoch_moved_at: Option<Instant>,
}

/// The consumer group protocol of KIP-848.
pub(crate) struct ConsumerGroup {
    /// The member id this member makes for itself (KIP-1082), kept for its whole life: it
    /// rejoins under it after being fenced or leaving on a poll timeout.
    member_id: String,
    state: Mutex<State>,
}

impl ConsumerGroup {
    pub fn new() -> ConsumerGroup {
        // Kafka's own text form of a random UUID (base64 URL-safe, no padding), as the Java
        // client's member ids.
        let bytes: [u8; 16] = rand::random();
        let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        ConsumerGroup {
            member_id: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes()),
            state: Mutex::default(),
        }
    }

    /// Sends one ConsumerGroupHeartbeat ([`heartbeat_request`]) and remembers what its answer
    /// says for the requests to come.
    async fn send(
        &self,
        d: &dyn ProtocolContext,
        sent: &Sent<'_>,
        deadline: Deadline,
    ) -> Result<MemberHeartbeatAnswer> {
        let conn = d.coordinator(deadline).await?;
        let regex = {
            let st = self.state.lock().unpoisoned();
            regex_field(sent.epoch, sent.regex, st.regex_held)
        };
        let req = heartbeat_request(
            d.config(),
            d.group_id(),
            sent,
            regex,
            &topic_ids(&d.cluster().metadata()),
        );
        {
            // Held from the moment it may reach the coordinator: an answer lost on the way back
            // must not make the member forget to remove it later.
            let mut st = self.state.lock().unpoisoned();
            st.regex_held = regex_held_after(st.regex_held, regex, false);
        }
        let resp = conn
            .call_with_timeout(&req, deadline.remaining().max(Duration::from_millis(1)))
            .await?;
        let answer = read_answer(resp);
        if answer.error_code == codes::NONE {
            let mut st = self.state.lock().unpoisoned();
            st.regex_held = regex_held_after(st.regex_held, regex, true);
            if answer.heartbeat_interval_ms > 0 {
                st.heartbeat_interval =
                    Some(Duration::from_millis(answer.heartbeat_interval_ms as u64));
            }
            if let Some(a) = &answer.assignment {
                st.assignment = a.clone();
            }
            if epoch_moved(sent.epoch, answer.epoch) {
                st.epoch_moved_at = Some(Instant::now());
            }
        }
        Ok(answer)
    }

    /// The last assignment in names; a topic the metadata does not know yet is looked up once
    /// (the coordinator may assign a topic created after the consumer last asked about it).
    async fn assignment(
        &self,
        d: &dyn ProtocolContext,
        topics: &[String],
    ) -> BTreeSet<TopicPartition> {
        let by_id = self.state.lock().unpoisoned().assignment.clone();
        let (named, unknown) = name_assignment(&by_id, &topic_ids(&d.cluster().metadata()));
        if unknown.is_empty() {
            return named;
        }
        let deadline = Deadline::after(d.config().common.request_timeout);
        match d.cluster().refresh(topics, deadline).await {
            Ok(meta) => {
                let (named, unknown) = name_assignment(&by_id, &topic_ids(&meta));
                if !unknown.is_empty() {
                    tracing::warn!(group = %d.group_id(), topics = ?unknown, "assigned topics not in metadata yet; they are taken once metadata names them");
                }
                named
            }
            Err(_) => named,
        }
    }

    /// The coordinator's last assignment as the member takes it: in names, and whether it
    /// names a topic the consumer's metadata does not know yet (created since it last asked),
    /// which the member compares with what it owns ([`ProtocolAnswer::MemberAssignment`]).
    fn assignment_heard(&self, d: &dyn ProtocolContext) -> ProtocolAnswer {
        let by_id = self.state.lock().unpoisoned().assignment.clone();
        let (assigned, unknown) = name_assignment(&by_id, &topic_ids(&d.cluster().metadata()));
        ProtocolAnswer::MemberAssignment {
            assigned,
            unknown_topics: !unknown.is_empty(),
        }
    }
}

impl GroupProtocol for ConsumerGroup {
    fn name(&self) -> &'static str {
        CONSUMER_PROTOCOL
    }

    fn join_once<'a>(
        &'a self,
        d: &'a dyn ProtocolContext,
        input: &'a JoinInput,
    ) -> ProtocolFuture<'a, JoinAttempt> {
        Box::pin(async move {
            let deadline = Deadline::after(d.config().common.default_api_timeout);
            let sent = d.join_sending().await;
            let (member_id, epoch) = (sent.member_id, sent.generation_id);
            let member_id = if member_id.is_empty() {
                self.member_id.clone()
            } else {
                member_id
            };
            // A new member, or one fenced or gone: epoch 0 joins (again).
            let epoch = epoch.max(JOIN_EPOCH);
            if epoch == JOIN_EPOCH {
                self.state.lock().unpoisoned().assignment.clear();
            }
            let sent = Sent {
                member_id: &member_id,
                epoch,
                subscribed: &input.topics,
                regex: input.regex.as_deref(),
                owned: &input.owned,
            };
            let answer = match self.send(d, &sent, deadline).await {
                Ok(a) => a,
                Err(e) => {
                    d.coordinator_unknown("ConsumerGroupHeartbeat failed");
                    return JoinAttempt::failed(e);
                }
            };
            if answer.error_code != codes::NONE {
                let reply = d
                    .report(ProtocolAnswer::MemberHeartbeatFailed {
                        sent_epoch: epoch,
                        code: answer.error_code,
                        joining: true,
                        message: answer.error_message.clone(),
                    })
                    .await;
                return follow(d, reply, &answer);
            }
            let reply = d
                .report(ProtocolAnswer::MemberJoined(Generation {
                    generation_id: answer.epoch,
                    member_id: answer.member_id.clone().unwrap_or(member_id),
                    protocol: Some(CONSUMER_PROTOCOL.into()),
                }))
                .await;
            let Reply::Generation(generation) = reply else {
                return JoinAttempt::Again;
            };
            let assigned = self.assignment(d, &input.topics).await;
            tracing::debug!(group = %d.group_id(), epoch = answer.epoch, assigned = assigned.len(), "ConsumerGroupHeartbeat answered");
            JoinAttempt::Joined(Box::new(JoinOutcome {
                generation,
                assigned,
                learning: BTreeSet::new(),
                // Under KIP-848 partitions that stay are never revoked.
                protocol: RebalanceProtocol::Cooperative,
                assigned_from: None,
                follow_up: false,
            }))
        })
    }

    fn heartbeat<'a>(
        &'a self,
        d: &'a dyn ProtocolContext,
        input: &'a HeartbeatInput,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>> {
        Box::pin(async move {
            let generation = &input.generation;
            let sent = Sent {
                member_id: &generation.member_id,
                epoch: generation.generation_id,
                subscribed: &input.subscribed,
                regex: input.regex.as_deref(),
                owned: &input.owned,
            };
            let answer = self.send(d, &sent, deadline).await?;
            if answer.error_code == codes::NONE {
                d.report(ProtocolAnswer::MemberEpoch {
                    sent_epoch: generation.generation_id,
                    epoch: answer.epoch,
                })
                .await;
                // The member compares it with what it owns when the answer is applied (not
                // with `input.owned`, which a join applied meanwhile may have changed).
                d.report(self.assignment_heard(d)).await;
            }
            Ok(answer.error_code)
        })
    }

    fn heartbeat_answered(&self, m: &mut Membership, sent: &Generation, code: i16) -> Next {
        if code == codes::NONE {
            return Next::Continue;
        }
        m.on_member_heartbeat_error(sent.generation_id, code, false, None)
    }

    fn heartbeat_interval(&self) -> Option<Duration> {
        self.state.lock().unpoisoned().heartbeat_interval
    }

    fn epoch_moved_at(&self) -> Option<Instant> {
        self.state.lock().unpoisoned().epoch_moved_at
    }

    fn leave_for_restart<'a>(
        &'a self,
        d: &'a dyn ProtocolContext,
        generation: &'a Generation,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<()>> {
        Box::pin(async move {
            // Epoch -2: the coordinator keeps the member's assignment until its session
            // expires, for the member that comes back with the same group.instance.id.
            let answer = self
                .send(
                    d,
                    &Sent::leaving(&generation.member_id, STATIC_LEAVE_EPOCH),
                    deadline,
                )
                .await?;
            match answer.error_code {
                codes::NONE => Ok(()),
                code => Err(Error::kafka(
                    code,
                    "ConsumerGroupHeartbeat (static member leaving)",
                )),
            }
        })
    }

    fn leave<'a>(
        &'a self,
        d: &'a dyn ProtocolContext,
        member_id: &'a str,
        _reason: &'a str,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>> {
        Box::pin(async move {
            let answer = self
                .send(d, &Sent::leaving(member_id, LEAVE_EPOCH), deadline)
                .await?;
            Ok(answer.error_code)
        })
    }
}

/// What one request says of the member: its id and epoch, and what its caller read off the
/// member (the join's input, or the heartbeat's [`HeartbeatInput`]).
#[derive(Debug)]
struct Sent<'a> {
    member_id: &'a str,
    epoch: i32,
    subscribed: &'a [String],
    /// The member's server-side regex, when it subscribed with one (then `subscribed` is empty).
    regex: Option<&'a str>,
    owned: &'a BTreeSet<TopicPartition>,
}

/// No subscription and no partitions: a leaving request (epoch -1 or -2) carries neither.
static NOTHING_OWNED: BTreeSet<TopicPartition> = BTreeSet::new();

impl<'a> Sent<'a> {
    fn leaving(member_id: &'a str, epoch: i32) -> Sent<'a> {
        Sent {
            member_id,
            epoch,
            subscribed: &[],
            regex: None,
            owned: &NOTHING_OWNED,
        }
    }
}

/// `SubscribedTopicRegex` of a request of epoch `epoch` from a member whose server-side regex is
/// `regex`, when the coordinator may still hold one for it (`held`):
/// - a regex subscription sends its regex in every request (the whole state, as the other
///   fields; the coordinator compares it with what it has and does nothing when it is the same);
/// - a subscription to topic names sends `""` while the coordinator may hold a regex of an
///   earlier subscription (an empty regex removes it; `null` would keep it, and the member would
///   go on being assigned what it matches), and nothing otherwise (a broker that never saw a
///   regex from this member is asked nothing about it, as the Java client does);
/// - a leaving request (epoch < 0) carries no subscription.
fn regex_field(epoch: i32, regex: Option<&str>, held: bool) -> Option<&str> {
    if epoch < 0 {
        return None;
    }
    match regex {
        Some(r) => Some(r),
        None if held => Some(""),
        None => None,
    }
}

/// Whether the coordinator may hold a regex for this member after a request that carried
/// `sent` (its `SubscribedTopicRegex`), before its answer (`answered_ok: false`) or after an
/// answer without error (`true`). A regex sent may be held from the moment it leaves; an empty
/// one removes it only once the coordinator answered it. An error answer changes nothing.
fn regex_held_after(held: bool, sent: Option<&str>, answered_ok: bool) -> bool {
    match sent {
        Some("") if answered_ok => false,
        Some("") => held,
        Some(_) => true,
        None => held,
    }
}

/// The ConsumerGroupHeartbeat `sent` makes in group `group_id` with the consumer's `config`
/// (rebalance timeout, server-side assignor, rack, static membership), `regex` as its
/// `SubscribedTopicRegex` ([`regex_field`]) and the topic `ids` metadata knows.
fn heartbeat_request(
    config: &ConsumerConfig,
    group_id: &str,
    sent: &Sent<'_>,
    regex: Option<&str>,
    ids: &TopicIds,
) -> ConsumerGroupHeartbeatRequest {
    consumer_group_heartbeat(
        &MemberHeartbeat {
            member: Member {
                group_id,
                member_id: sent.member_id,
                instance_id: config.group_instance_id.as_deref(),
            },
            epoch: sent.epoch,
            rebalance_timeout_ms: i32::try_from(config.max_poll_interval.as_millis())
                .unwrap_or(i32::MAX),
            subscribed: sent.subscribed,
            subscribed_regex: regex,
            server_assignor: config.group_remote_assignor.as_deref(),
            rack_id: config.common.client_rack.as_deref(),
            owned: sent.owned,
        },
        ids,
    )
}

/// The topic ids metadata knows, by name.
/// Whether an answer to a request of epoch `sent` moved the member to another epoch: a join
/// (epoch 0) that made it a member, or a heartbeat answered with a newer epoch. The answers to
/// leaving (epochs -1 and -2) move it nowhere the heartbeat goes on from.
fn epoch_moved(sent: i32, answered: i32) -> bool {
    answered > 0 && answered != sent
}

fn topic_ids(meta: &Metadata) -> TopicIds {
    meta.topics
        .values()
        .map(|t| (t.name.clone(), t.topic_id))
        .collect()
}

fn follow(d: &dyn ProtocolContext, reply: Reply, answer: &MemberHeartbeatAnswer) -> JoinAttempt {
    let next = match reply {
        Reply::Next(next) => next,
        Reply::Generation(_) | Reply::Outlived => Next::JoinAgain,
    };
    let e = || {
        Error::kafka(
            answer.error_code,
            match &answer.error_message {
                Some(m) => format!("ConsumerGroupHeartbeat: {m}"),
                None => "ConsumerGroupHeartbeat".to_string(),
            },
        )
    };
    match next {
        Next::JoinAgain | Next::Continue => JoinAttempt::Again,
        Next::RetryAfterBackoff => JoinAttempt::Backoff(e()),
        Next::RediscoverCoordinator => {
            d.coordinator_unknown("ConsumerGroupHeartbeat answered a coordinator error");
            JoinAttempt::Backoff(e())
        }
        Next::Fatal(fatal) => {
            if let Some(m) = &answer.error_message {
                tracing::warn!(group = %d.group_id(), error = %fatal, broker_says = %m, "joining the group failed");
            }
            JoinAttempt::Fatal(fatal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    fn config(pairs: &[(&str, &str)]) -> ConsumerConfig {
        let mut all = vec![
            ("bootstrap.servers", "127.0.0.1:9"),
            ("group.id", "g"),
            ("group.protocol", "consumer"),
        ];
        all.extend_from_slice(pairs);
        ConsumerConfig::from_config(&Config::from_pairs(all).unwrap()).unwrap()
    }

    fn ids(list: &[(&str, u128)]) -> TopicIds {
        list.iter()
            .map(|(t, id)| (t.to_string(), Uuid::from_u128(*id)))
            .collect()
    }

    /// The request is made from what the caller read off the member and the consumer's
    /// configuration only: nothing of it comes from the member's state.
    #[test]
    fn a_heartbeat_request_carries_what_the_caller_read_off_the_member() {
        let config = config(&[
            ("group.instance.id", "static-1"),
            ("group.remote.assignor", "uniform"),
            ("client.rack", "rack-a"),
            ("max.poll.interval.ms", "45000"),
        ]);
        let subscribed = vec!["a".to_string(), "b".to_string()];
        let owned = tps(&[("b", 3), ("a", 1), ("a", 0)]);
        let sent = Sent {
            member_id: "m-7",
            epoch: 12,
            subscribed: &subscribed,
            regex: None,
            owned: &owned,
        };
        let req = heartbeat_request(&config, "g", &sent, None, &ids(&[("a", 1), ("b", 2)]));
        assert_eq!(req.group_id.0.as_str(), "g");
        assert_eq!(req.member_id.as_str(), "m-7");
        assert_eq!(req.member_epoch, 12);
        assert_eq!(req.instance_id.as_deref(), Some("static-1"));
        assert_eq!(req.rebalance_timeout_ms, 45_000);
        assert_eq!(req.server_assignor.as_deref(), Some("uniform"));
        assert_eq!(req.rack_id.as_deref(), Some("rack-a"));
        let names: Vec<&str> = req
            .subscribed_topic_names
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.0.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let owned: Vec<(Uuid, Vec<i32>)> = req
            .topic_partitions
            .unwrap()
            .into_iter()
            .map(|t| (t.topic_id, t.partitions))
            .collect();
        assert_eq!(
            owned,
            vec![
                (Uuid::from_u128(1), vec![0, 1]),
                (Uuid::from_u128(2), vec![3])
            ]
        );
    }

    /// A join of a new member: epoch 0, its own member id, nothing owned yet; no static id,
    /// assignor or rack configured: none is sent.
    #[test]
    fn an_epoch_moves_when_an_answer_gives_the_member_another_one_to_go_on_with() {
        assert!(epoch_moved(JOIN_EPOCH, 1), "a new member's join");
        assert!(epoch_moved(4, 6), "a heartbeat answered with a newer epoch");
        assert!(!epoch_moved(6, 6), "answered with the epoch it sent");
        assert!(!epoch_moved(LEAVE_EPOCH, LEAVE_EPOCH), "leaving");
        assert!(!epoch_moved(STATIC_LEAVE_EPOCH, STATIC_LEAVE_EPOCH));
        assert!(!epoch_moved(JOIN_EPOCH, 0), "an answer without an epoch");
    }

    #[test]
    fn a_join_request_of_a_new_member_owns_nothing() {
        let config = config(&[]);
        let subscribed = vec!["a".to_string()];
        let owned = BTreeSet::new();
        let sent = Sent {
            member_id: "own-id",
            epoch: JOIN_EPOCH,
            subscribed: &subscribed,
            regex: None,
            owned: &owned,
        };
        let req = heartbeat_request(&config, "g", &sent, None, &ids(&[("a", 1)]));
        assert_eq!(req.member_id.as_str(), "own-id");
        assert_eq!(req.member_epoch, 0);
        assert_eq!(req.instance_id, None);
        assert_eq!(req.server_assignor, None);
        assert_eq!(req.rack_id, None);
        assert_eq!(req.subscribed_topic_names.as_ref().map(Vec::len), Some(1));
        assert_eq!(req.topic_partitions.as_ref().map(Vec::len), Some(0));
    }

    /// Leaving (epoch -1) and a static member's leaving for a restart (epoch -2) say only who
    /// leaves.
    #[test]
    fn leaving_requests_carry_no_subscription_and_no_partitions() {
        let config = config(&[("group.instance.id", "static-1")]);
        for epoch in [LEAVE_EPOCH, STATIC_LEAVE_EPOCH] {
            let req = heartbeat_request(
                &config,
                "g",
                &Sent::leaving("m-7", epoch),
                None,
                &ids(&[("a", 1)]),
            );
            assert_eq!(req.member_id.as_str(), "m-7");
            assert_eq!(req.member_epoch, epoch);
            assert_eq!(req.instance_id.as_deref(), Some("static-1"));
            assert!(req.subscribed_topic_names.is_none(), "epoch {epoch}");
            assert!(req.topic_partitions.is_none(), "epoch {epoch}");
            assert_eq!(req.rebalance_timeout_ms, -1);
        }
    }

    /// What a request says of the subscription, for each subscription and what the coordinator
    /// may hold: `(epoch, regex subscribed, coordinator may hold a regex) -> SubscribedTopicRegex`.
    #[test]
    fn the_regex_field_follows_the_subscription_and_what_the_coordinator_may_hold() {
        let table: &[(i32, Option<&str>, bool, Option<&str>)] = &[
            // A regex subscription: in every request, joining or not, held or not.
            (JOIN_EPOCH, Some("orders-.*"), false, Some("orders-.*")),
            (JOIN_EPOCH, Some("orders-.*"), true, Some("orders-.*")),
            (7, Some("orders-.*"), true, Some("orders-.*")),
            (7, Some("orders-.*"), false, Some("orders-.*")),
            // Topic names after a regex: removed with an empty one until confirmed.
            (7, None, true, Some("")),
            (JOIN_EPOCH, None, true, Some("")),
            // Topic names, no regex ever sent (or its removal confirmed): nothing.
            (7, None, false, None),
            (JOIN_EPOCH, None, false, None),
            // Leaving: no subscription at all.
            (LEAVE_EPOCH, Some("orders-.*"), true, None),
            (STATIC_LEAVE_EPOCH, None, true, None),
        ];
        for (epoch, regex, held, want) in table {
            assert_eq!(
                regex_field(*epoch, *regex, *held),
                *want,
                "epoch {epoch}, regex {regex:?}, held {held}"
            );
        }
    }

    /// `(held, sent, answered without error) -> held after`.
    #[test]
    fn a_regex_is_held_once_sent_and_released_once_its_removal_is_answered() {
        let table: &[(bool, Option<&str>, bool, bool)] = &[
            (false, Some("a.*"), false, true),
            (false, Some("a.*"), true, true),
            (true, Some(""), false, true),
            (true, Some(""), true, false),
            (true, None, true, true),
            (false, None, true, false),
        ];
        for (held, sent, ok, want) in table {
            assert_eq!(
                regex_held_after(*held, *sent, *ok),
                *want,
                "held {held}, sent {sent:?}, answered {ok}"
            );
        }
    }

    /// A member subscribed with a regex: the request carries the regex and an empty list of
    /// topic names (so names of an earlier subscription are dropped), and its owned partitions.
    #[test]
    fn a_regex_member_sends_its_regex_and_no_topic_names() {
        let config = config(&[]);
        let owned = tps(&[("orders-1", 0)]);
        let sent = Sent {
            member_id: "m-1",
            epoch: 4,
            subscribed: &[],
            regex: Some("orders-.*"),
            owned: &owned,
        };
        let regex = regex_field(sent.epoch, sent.regex, false);
        let req = heartbeat_request(&config, "g", &sent, regex, &ids(&[("orders-1", 3)]));
        assert_eq!(req.subscribed_topic_regex.as_deref(), Some("orders-.*"));
        assert_eq!(req.subscribed_topic_names.as_ref().map(Vec::len), Some(0));
        assert_eq!(req.topic_partitions.as_ref().map(Vec::len), Some(1));
        // The wire takes it from version 1 on, the version lagless speaks.
        use kafka_protocol::protocol::Encodable;
        let mut buf = bytes::BytesMut::new();
        assert!(req.encode(&mut buf, 1).is_ok());
        assert!(req.encode(&mut buf, 0).is_err(), "v0 has no regex field");
    }
}

//! Incremental fetch sessions (KIP-227), one per broker and stream kind.
//!
//! A full Fetch lists every partition a consumer reads, and the broker answers for every one,
//! records or not: an idle consumer of N partitions sends and receives N entries per
//! `fetch.max.wait.ms`. In a session the broker keeps what the consumer last asked for each
//! partition (fetch offset, epochs, byte limit); a later request lists only the partitions whose
//! entry changed (and those to forget), and the answer leaves out the partitions with nothing new.
//!
//! Pure: [`FetchSession::prepare`] turns the full request the planner built into the session's
//! request, [`FetchSession::answered`] and [`FetchSession::failed`] take the outcome. The fetch
//! task sends one request per session at a time (one per broker and stream kind), so the
//! session needs no lock. The planner still lists every partition to read in each round: the
//! ones it leaves out (paused, buffered, moved to another leader) are forgotten by the session,
//! as the Java client's `FetchSessionHandler` does, so that the broker never answers with
//! records from an entry the consumer no longer holds.
use std::collections::{BTreeMap, HashMap};

use crate::error::codes;
use crate::protocol::msg::fetch_request::ForgottenTopic;
use crate::protocol::msg::{FetchRequest, TopicName};

/// The Fetch version that brought sessions (v7, Kafka 1.1).
const FIRST_SESSION_VERSION: i16 = 7;
/// The epoch of a request that asks for no session: a full fetch, as before KIP-227.
const SESSIONLESS_EPOCH: i32 = -1;

/// The epoch that ends a session (KIP-227's final epoch): the broker drops the session the
/// request names and answers it as a sessionless fetch.
const FINAL_EPOCH: i32 = -1;

/// What the broker keeps of one partition of a session: the request's fields for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    log_start_offset: i64,
    partition_max_bytes: i32,
}

/// A partition by the request's own topic name: a clone of it shares the name's bytes, so the
/// maps cost no allocation per partition of each Fetch (thousands at every `fetch.max.wait.ms`
/// for a consumer of thousands of partitions).
type Key = (TopicName, i32);

/// One fetch session with one broker, as the client sees it.
#[derive(Debug, Default)]
pub(crate) struct FetchSession {
    /// The broker's id for it; 0 while there is none.
    id: i32,
    /// The epoch of the next request: 0 opens a session (a full request; with `id` set the
    /// broker closes that one first), 1 and up continue it.
    epoch: i32,
    /// What the broker holds, as of the last request it answered.
    held: HashMap<Key, Entry>,
    /// What the request in flight makes of `held` once answered.
    pending: Option<HashMap<Key, Entry>>,
}

impl FetchSession {
    /// Turns `req`, a full request listing every partition to read now, into this session's
    /// request for a connection speaking Fetch `version`: an incremental request keeps only the
    /// partitions whose entry changed and forgets the ones no longer listed. Before v7, a full
    /// sessionless request.
    pub(crate) fn prepare(&mut self, req: &mut FetchRequest, version: i16) {
        if version < FIRST_SESSION_VERSION {
            *self = FetchSession::default();
            req.session_id = 0;
            req.session_epoch = SESSIONLESS_EPOCH;
            return;
        }
        let mut wanted = HashMap::new();
        for topic in &req.topics {
            for p in &topic.partitions {
                let entry = Entry {
                    fetch_offset: p.fetch_offset,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                    log_start_offset: p.log_start_offset,
                    partition_max_bytes: p.partition_max_bytes,
                };
                wanted.insert((topic.topic.clone(), p.partition), entry);
            }
        }
        req.session_id = self.id;
        req.session_epoch = self.epoch;
        req.forgotten_topics_data.clear();
        if self.epoch > 0 {
            let held = &self.held;
            for topic in &mut req.topics {
                let name = topic.topic.clone();
                topic.partitions.retain(|p| {
                    let key = (name.clone(), p.partition);
                    wanted.get(&key) != held.get(&key)
                });
            }
            req.topics.retain(|t| !t.partitions.is_empty());
            let mut forgotten: BTreeMap<&TopicName, Vec<i32>> = BTreeMap::new();
            for (topic, partition) in held.keys().filter(|k| !wanted.contains_key(*k)) {
                forgotten.entry(topic).or_default().push(*partition);
            }
            req.forgotten_topics_data = forgotten
                .into_iter()
                .map(|(topic, mut partitions)| {
                    partitions.sort_unstable();
                    ForgottenTopic::default()
                        .with_topic(topic.clone())
                        .with_partitions(partitions)
                })
                .collect();
        }
        self.pending = Some(wanted);
    }

    /// The answer to the prepared request: its top-level error code and session id.
    pub(crate) fn answered(&mut self, error_code: i16, session_id: i32) {
        let pending = self.pending.take();
        match (error_code, pending) {
            (codes::NONE, Some(pending)) if session_id != 0 => {
                if self.epoch > 0 && session_id != self.id {
                    // Not the session asked for: start over rather than guess what it holds.
                    self.restart();
                    return;
                }
                self.id = session_id;
                self.held = pending;
                self.epoch = if self.epoch == i32::MAX {
                    1
                } else {
                    self.epoch + 1
                };
            }
            // No session (the broker's session cache is full, or none was asked for): the next
            // request is full again and asks once more.
            (codes::NONE, _) => *self = FetchSession::default(),
            (codes::FETCH_SESSION_ID_NOT_FOUND, _) => *self = FetchSession::default(),
            // INVALID_FETCH_SESSION_EPOCH and any other error of the whole request: what the
            // broker holds is unknown, so the next request is a full one.
            _ => self.restart(),
        }
    }

    /// The id of the session the broker may hold for this consumer (to end it when the consumer
    /// closes, [`close_session`]): set once a broker answered with one, kept across a restart
    /// (whose next request closes it), cleared when the broker said it knows none.
    pub(crate) fn open_id(&self) -> Option<i32> {
        (self.id != 0).then_some(self.id)
    }

    /// The request was not answered (connection lost, timed out): start over with a full one.
    pub(crate) fn failed(&mut self) {
        self.restart();
    }

    /// The next request opens a new session, closing this one on the broker (epoch 0 with its
    /// id), as the Java client does after an error.
    fn restart(&mut self) {
        self.epoch = 0;
        self.held.clear();
        self.pending = None;
    }
}

/// Turns `req` into the request that ends session `id` on a broker speaking Fetch `version`: the
/// final epoch with the session's id, no partition, nothing to forget, no wait. False (nothing
/// to send) before v7, where there are no sessions.
///
/// The Java consumer sends it to every broker it holds a session with as it closes; without it
/// the session keeps one of the broker's `max.incremental.fetch.session.cache.slots` (1,000 by
/// default) until `min.incremental.fetch.session.eviction.ms` (2 minutes) has passed and a new
/// session evicts it, and while the cache is full of such sessions, new consumers get none.
pub(crate) fn close_session(req: &mut FetchRequest, id: i32, version: i16) -> bool {
    if version < FIRST_SESSION_VERSION {
        return false;
    }
    req.session_id = id;
    req.session_epoch = FINAL_EPOCH;
    req.topics.clear();
    req.forgotten_topics_data.clear();
    req.max_wait_ms = 0;
    true
}

/// Whether a Fetch's top-level error is the session's alone: the partitions are fetched again
/// at once by the full request that follows, with no error counted against them.
pub(crate) fn is_session_error(code: i16) -> bool {
    matches!(
        code,
        codes::FETCH_SESSION_ID_NOT_FOUND | codes::INVALID_FETCH_SESSION_EPOCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::msg::fetch_request::{FetchPartition, FetchTopic};

    /// A full request of (topic, partition, fetch offset) as the planner builds it.
    fn full(parts: &[(&str, i32, i64)]) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for &(t, p, offset) in parts {
            let partition = FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(3)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1_048_576);
            match topics.iter_mut().find(|x| x.topic.0.as_str() == t) {
                Some(x) => x.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(crate::protocol::topic_name(t))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        FetchRequest::default()
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics)
    }

    /// (session id, epoch, partitions sent as (topic, partition, offset), forgotten).
    type Sent = (i32, i32, Vec<(String, i32, i64)>, Vec<(String, i32)>);

    fn sent(req: &FetchRequest) -> Sent {
        let parts = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), p.partition, p.fetch_offset))
            })
            .collect();
        let forgotten = req
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), *p))
            })
            .collect();
        (req.session_id, req.session_epoch, parts, forgotten)
    }

    fn prepare(s: &mut FetchSession, parts: &[(&str, i32, i64)]) -> Sent {
        let mut req = full(parts);
        s.prepare(&mut req, 12);
        sent(&req)
    }

    fn p(t: &str, partition: i32, offset: i64) -> (String, i32, i64) {
        (t.to_string(), partition, offset)
    }

    #[test]
    fn a_session_sends_only_what_changed_and_forgets_what_is_no_longer_read() {
        let mut s = FetchSession::default();
        let all = [("a", 0, 10), ("a", 1, 20), ("b", 0, 5)];
        // The first request is full and opens a session (id 0, epoch 0).
        assert_eq!(
            prepare(&mut s, &all),
            (
                0,
                0,
                vec![p("a", 0, 10), p("a", 1, 20), p("b", 0, 5)],
                vec![]
            )
        );
        s.answered(codes::NONE, 77);
        // Nothing changed (idle at the log end): an empty incremental request, epoch 1.
        assert_eq!(prepare(&mut s, &all), (77, 1, vec![], vec![]));
        s.answered(codes::NONE, 77);
        // a-1 brought records: only its new offset is sent.
        assert_eq!(
            prepare(&mut s, &[("a", 0, 10), ("a", 1, 25), ("b", 0, 5)]),
            (77, 2, vec![p("a", 1, 25)], vec![])
        );
        s.answered(codes::NONE, 77);
        // b-0 left out this round (paused, or its records still buffered): forgotten; a new
        // partition c-3 is added.
        assert_eq!(
            prepare(&mut s, &[("a", 0, 10), ("a", 1, 25), ("c", 3, 0)]),
            (77, 3, vec![p("c", 3, 0)], vec![("b".to_string(), 0)])
        );
        s.answered(codes::NONE, 77);
        // b-0 back: sent again in full (the broker no longer holds it).
        assert_eq!(
            prepare(
                &mut s,
                &[("a", 0, 10), ("a", 1, 25), ("b", 0, 5), ("c", 3, 0)]
            ),
            (77, 4, vec![p("b", 0, 5)], vec![])
        );
    }

    #[test]
    fn a_changed_epoch_is_sent_even_at_the_same_offset() {
        let mut s = FetchSession::default();
        prepare(&mut s, &[("a", 0, 10)]);
        s.answered(codes::NONE, 5);
        let mut req = full(&[("a", 0, 10)]);
        req.topics[0].partitions[0].current_leader_epoch = 4;
        s.prepare(&mut req, 12);
        assert_eq!(sent(&req), (5, 1, vec![p("a", 0, 10)], vec![]));
    }

    #[test]
    fn errors_and_lost_answers_start_over_with_a_full_request() {
        let all = [("a", 0, 10), ("a", 1, 20)];
        let full_list = vec![p("a", 0, 10), p("a", 1, 20)];
        let opened = || {
            let mut s = FetchSession::default();
            prepare(&mut s, &all);
            s.answered(codes::NONE, 9);
            prepare(&mut s, &all);
            s
        };
        // An unknown session: a new one, without the old id.
        let mut s = opened();
        s.answered(codes::FETCH_SESSION_ID_NOT_FOUND, 0);
        assert_eq!(prepare(&mut s, &all), (0, 0, full_list.clone(), vec![]));
        // A wrong epoch or another error: a new session, closing the old one (its id, epoch 0).
        for code in [
            codes::INVALID_FETCH_SESSION_EPOCH,
            -1, /* UNKNOWN_SERVER_ERROR */
        ] {
            let mut s = opened();
            s.answered(code, 0);
            assert_eq!(prepare(&mut s, &all), (9, 0, full_list.clone(), vec![]));
        }
        // No answer at all.
        let mut s = opened();
        s.failed();
        assert_eq!(prepare(&mut s, &all), (9, 0, full_list.clone(), vec![]));
        // The broker made no session (its cache is full): full requests, asking each time.
        let mut s = FetchSession::default();
        prepare(&mut s, &all);
        s.answered(codes::NONE, 0);
        assert_eq!(prepare(&mut s, &all), (0, 0, full_list.clone(), vec![]));
        // An answer naming another session than the one continued.
        let mut s = opened();
        s.answered(codes::NONE, 10);
        assert_eq!(prepare(&mut s, &all), (9, 0, full_list.clone(), vec![]));
        // After a restart, the new session's answer is taken: incremental again.
        s.answered(codes::NONE, 11);
        assert_eq!(prepare(&mut s, &all), (11, 1, vec![], vec![]));
    }

    /// The id to close is the broker's last word on the session: set by an answer naming one,
    /// kept through a restart (the broker may still hold it), gone once the broker knows none.
    #[test]
    fn the_session_to_close_is_the_one_the_broker_last_named() {
        let all = [("a", 0, 10)];
        let mut s = FetchSession::default();
        assert_eq!(s.open_id(), None);
        prepare(&mut s, &all);
        assert_eq!(s.open_id(), None, "asked, not answered yet");
        s.answered(codes::NONE, 9);
        assert_eq!(s.open_id(), Some(9));
        prepare(&mut s, &all);
        s.failed();
        assert_eq!(
            s.open_id(),
            Some(9),
            "a lost answer: the broker may hold it still"
        );
        prepare(&mut s, &all);
        s.answered(codes::NONE, 12);
        assert_eq!(s.open_id(), Some(12), "the restart's new session");
        prepare(&mut s, &all);
        s.answered(codes::FETCH_SESSION_ID_NOT_FOUND, 0);
        assert_eq!(s.open_id(), None);
        // A broker that made no session (its cache is full).
        prepare(&mut s, &all);
        s.answered(codes::NONE, 0);
        assert_eq!(s.open_id(), None);
    }

    /// Ending a session: its id at the final epoch, no partitions, nothing forgotten, no wait;
    /// nothing to send to a broker without sessions.
    #[test]
    fn closing_a_session_names_it_at_the_final_epoch_and_asks_for_nothing() {
        let mut req = full(&[("a", 0, 10), ("b", 1, 20)]);
        req.max_wait_ms = 500;
        req.forgotten_topics_data = vec![ForgottenTopic::default()
            .with_topic(crate::protocol::topic_name("c"))
            .with_partitions(vec![0])];
        assert!(close_session(&mut req, 42, 12));
        assert_eq!(sent(&req), (42, -1, vec![], vec![]));
        assert_eq!(req.max_wait_ms, 0);
        let mut old = full(&[("a", 0, 10)]);
        assert!(!close_session(&mut old, 42, 6));
        assert_eq!(sent(&old), (0, -1, vec![p("a", 0, 10)], vec![]));
    }

    #[test]
    fn the_epoch_wraps_to_one_and_old_brokers_get_sessionless_fetches() {
        let mut s = FetchSession::default();
        prepare(&mut s, &[("a", 0, 1)]);
        s.answered(codes::NONE, 3);
        s.epoch = i32::MAX;
        assert_eq!(prepare(&mut s, &[("a", 0, 1)]).1, i32::MAX);
        s.answered(codes::NONE, 3);
        assert_eq!(prepare(&mut s, &[("a", 0, 1)]).1, 1);
        // A broker speaking Fetch v6 or older: full, sessionless (epoch -1).
        let mut req = full(&[("a", 0, 1)]);
        s.prepare(&mut req, 6);
        assert_eq!(sent(&req), (0, -1, vec![p("a", 0, 1)], vec![]));
    }

    #[test]
    fn only_the_session_errors_are_the_sessions_alone() {
        assert!(is_session_error(codes::FETCH_SESSION_ID_NOT_FOUND));
        assert!(is_session_error(codes::INVALID_FETCH_SESSION_EPOCH));
        assert!(!is_session_error(codes::NONE));
        assert!(!is_session_error(-1)); // UNKNOWN_SERVER_ERROR
    }
}

//! The group member's contract through the protocol seam ([`GroupProtocol`]): with a fake
//! protocol in place of the classic one, the consumer's callers see the same member (callbacks
//! in order, on the thread that polls; the generation commits go with; lost, not revoked, after
//! the generation is gone; the owned partitions a join reports; the leave on close).
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::rebalance_listener::RebalanceListener;
use super::Consumer;
use crate::config::Config;
use crate::error::{codes, Error, Result};
use crate::group::group_protocol::fake::{names, FakeJoin, FakeProtocol};
use crate::group::member::MemberState;
use crate::sync::Unpoisoned;
use crate::types::TopicPartition;

type Log = Arc<Mutex<Vec<String>>>;

/// Writes each callback to the log the fake protocol writes its requests to.
struct Recorder(Log);

impl Recorder {
    fn write(&self, what: &str, partitions: &[TopicPartition]) -> Result<()> {
        self.0
            .lock()
            .unpoisoned()
            .push(format!("{what} [{}]", names(partitions)));
        Ok(())
    }
}

impl RebalanceListener for Recorder {
    fn on_partitions_revoked(&mut self, _: &Consumer, p: &[TopicPartition]) -> Result<()> {
        self.write("revoked", p)
    }
    fn on_partitions_assigned(&mut self, _: &Consumer, p: &[TopicPartition]) -> Result<()> {
        self.write("assigned", p)
    }
    fn on_partitions_lost(&mut self, _: &Consumer, p: &[TopicPartition]) -> Result<()> {
        self.write("lost", p)
    }
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// A consumer of group `g` whose member speaks `fake`; no broker listens at its bootstrap
/// address, so everything the group does goes through the fake.
fn consumer(strategy: &str, fake: Arc<FakeProtocol>, log: &Log) -> Consumer {
    let mut config = Config::new();
    for (k, v) in [
        ("bootstrap.servers", "127.0.0.1:9"),
        ("group.id", "g"),
        ("enable.auto.commit", "false"),
        ("partition.assignment.strategy", strategy),
        ("heartbeat.interval.ms", "50"),
        ("retry.backoff.ms", "10"),
        ("retry.backoff.max.ms", "50"),
    ] {
        config.set(k, v).expect("a known setting");
    }
    let mut c = Consumer::from_config(&config).expect("consumer");
    c.group_protocol = fake;
    c.subscribe(&["t"], Some(Box::new(Recorder(log.clone()))))
        .expect("subscribe");
    c
}

/// Polls until the log has `n` lines (the fake's requests and the callbacks); returns them.
fn poll_until(c: &Consumer, log: &Log, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = log.lock().unpoisoned().clone();
        if now.len() >= n {
            return now;
        }
        assert!(Instant::now() < deadline, "the log stopped at {now:#?}");
        // No broker answers: errors from fetching are not what this test is about.
        let _ = c.poll(Duration::from_millis(20));
    }
}

/// A join that ends in generation `generation_id` of member `member_id`, with `assigned` from
/// the assignor the coordinator chose.
fn join(
    generation_id: i32,
    member_id: &'static str,
    assignor: &'static str,
    assigned: &[i32],
) -> FakeJoin {
    FakeJoin {
        generation_id,
        member_id,
        assignor,
        assigned: assigned.iter().map(|&p| tp(p)).collect(),
    }
}

/// A member with `strategy` whose first join ends in generation 1 of `m-1` with `assigned`,
/// polled until that assignment was applied: its log, its protocol, the consumer.
fn joined(strategy: &'static str, assigned: &[i32]) -> (Log, Arc<FakeProtocol>, Consumer) {
    let log: Log = Arc::default();
    let fake = Arc::new(FakeProtocol::new(log.clone()));
    fake.script_join(join(1, "m-1", strategy, assigned));
    let c = consumer(strategy, fake.clone(), &log);
    let got = poll_until(&c, &log, 2);
    assert_eq!(
        got[..2],
        [
            "join member=\"\" generation=-1 topics=t owned=[]".to_string(),
            format!(
                "assigned [{}]",
                names(&assigned.iter().map(|&p| tp(p)).collect::<Vec<_>>())
            ),
        ]
    );
    (log, fake, c)
}

/// `call`'s answer from the member, asked of its owner (the driver task) as the consumer does.
fn ask<R: Send + 'static>(
    c: &Consumer,
    call: impl FnOnce(&mut crate::group::group_member::GroupMember) -> R + Send + 'static,
) -> R {
    let d = c.driver().expect("a driver");
    c.block_on(d.with_member(call))
        .expect("an open consumer")
        .expect("the member's owner answers")
}

fn generation(c: &Consumer) -> (i32, String) {
    let m = c.group_metadata().expect("a group member");
    (m.generation_id, m.member_id)
}

#[test]
fn a_cooperative_member_through_the_seam_revokes_only_what_moves_and_loses_after_a_fence() {
    let (log, fake, c) = joined("cooperative-sticky", &[0, 1]);
    assert_eq!(generation(&c), (1, "m-1".to_string()));
    let d = c.driver().expect("a driver");
    let asked = || ask(&c, |m| m.membership.commit_generation(false));
    assert_eq!(asked().unwrap().generation_id, 1);
    // What commits read off the member's view is what the member says.
    assert_eq!(d.read_view(|v| v.commit_generation.clone()), asked());

    // The coordinator rebalances; t-0 moves away: only it is revoked, then the member joins
    // again without it (KIP-429's second join) and keeps t-1 throughout.
    fake.script_join(join(2, "m-1", "cooperative-sticky", &[1]));
    fake.script_join(join(3, "m-1", "cooperative-sticky", &[1]));
    fake.script_heartbeat(codes::REBALANCE_IN_PROGRESS);
    let got = poll_until(&c, &log, 8);
    assert_eq!(
        got[2..],
        [
            "heartbeat generation=1 answered REBALANCE_IN_PROGRESS",
            "join member=\"m-1\" generation=1 topics=t owned=[t-0,t-1]",
            "revoked [t-0]",
            "assigned []",
            "join member=\"m-1\" generation=2 topics=t owned=[t-1]",
            "assigned []",
        ]
    );
    assert_eq!(c.assignment(), vec![tp(1)]);
    assert_eq!(generation(&c), (3, "m-1".to_string()));

    // Fenced: the partitions are lost (not revoked: no commit is possible for them), and the
    // member joins again as a new member claiming nothing.
    fake.script_join(join(4, "m-2", "cooperative-sticky", &[0, 1]));
    fake.script_heartbeat(codes::UNKNOWN_MEMBER_ID);
    let got = poll_until(&c, &log, 12);
    assert_eq!(
        got[8..],
        [
            "heartbeat generation=3 answered UNKNOWN_MEMBER_ID",
            "lost [t-1]",
            "join member=\"\" generation=-1 topics=t owned=[]",
            "assigned [t-0,t-1]",
        ]
    );
    assert_eq!(generation(&c), (4, "m-2".to_string()));
    assert_eq!(
        d.read_view(|v| v.commit_generation.clone())
            .unwrap()
            .generation_id,
        4
    );

    // Close gives the partitions up, then leaves with the member id.
    c.close(Some(Duration::from_secs(5))).expect("close");
    let got = log.lock().unpoisoned().clone();
    assert_eq!(
        got[12..],
        [
            "revoked [t-0,t-1]",
            "leave member=\"m-2\" reason=the consumer is being closed"
        ]
    );
}

#[test]
fn an_eager_member_through_the_seam_revokes_everything_before_it_joins() {
    let (log, fake, c) = joined("range", &[0, 1]);
    fake.script_join(join(2, "m-1", "range", &[1]));
    fake.script_heartbeat(codes::REBALANCE_IN_PROGRESS);
    let got = poll_until(&c, &log, 6);
    assert_eq!(
        got,
        [
            "join member=\"\" generation=-1 topics=t owned=[]",
            "assigned [t-0,t-1]",
            "heartbeat generation=1 answered REBALANCE_IN_PROGRESS",
            "revoked [t-0,t-1]",
            "join member=\"m-1\" generation=1 topics=t owned=[]",
            "assigned [t-1]",
        ]
    );
    assert_eq!(generation(&c), (2, "m-1".to_string()));
    assert_eq!(
        ask(&c, |m| m.membership.commit_generation(false))
            .unwrap()
            .generation_id,
        2
    );
    c.close(Some(Duration::from_secs(5))).expect("close");
}

#[test]
fn a_fatal_heartbeat_answer_through_the_seam_comes_out_of_poll_and_ends_the_member() {
    let (log, fake, c) = joined("cooperative-sticky", &[0]);
    fake.script_heartbeat(codes::GROUP_AUTHORIZATION_FAILED);
    let deadline = Instant::now() + Duration::from_secs(20);
    let e = loop {
        assert!(
            Instant::now() < deadline,
            "no error: {:#?}",
            log.lock().unwrap()
        );
        if let Err(e) = c.poll(Duration::from_millis(20)) {
            if e.to_string().contains("GROUP_AUTHORIZATION_FAILED") {
                break e;
            }
        }
    };
    assert!(e.is_fatal(), "{e}");
    // Nothing more is sent for the member, however long the application polls.
    let before = log.lock().unwrap().len();
    let _ = c.poll(Duration::from_millis(300));
    assert_eq!(
        log.lock().unwrap()[before - 1..],
        ["heartbeat generation=1 answered GROUP_AUTHORIZATION_FAILED"]
    );
}

/// KIP-848: the broker decides when assignments change; a client's call to start a rebalance is
/// refused with an error saying so, not left without effect.
#[test]
fn enforce_rebalance_is_refused_under_the_consumer_protocol() {
    let c = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", "127.0.0.1:9"),
            ("group.id", "g"),
            ("group.protocol", "consumer"),
        ])
        .unwrap(),
    )
    .unwrap();
    c.subscribe(&["t"], None).unwrap();
    let e = c.enforce_rebalance("test").unwrap_err();
    assert!(
        matches!(&e, Error::IllegalState(m) if m.contains("group.protocol=consumer")),
        "{e}"
    );
    c.close(Some(Duration::from_millis(100))).ok();
}

/// The join runs inside the member's driver task: closing while one is in flight (the
/// coordinator keeps the rebalance open) has the task drop it, and the member revokes what it
/// owns and leaves; the dropped join never answers, so nothing is assigned after the leave.
#[test]
fn closing_during_a_join_drops_it_in_the_driver_task_then_revokes_and_leaves() {
    let (log, fake, c) = joined("cooperative-sticky", &[0]);
    // The rebalance the heartbeat hears gets no scripted join: it stays in flight, retrying.
    fake.script_heartbeat(codes::REBALANCE_IN_PROGRESS);
    poll_until(&c, &log, 3);
    let d = c.driver().expect("a driver");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ask(&c, |m| m.membership.state()) != MemberState::PreparingRebalance {
        assert!(
            Instant::now() < deadline,
            "no join started: {:?}",
            ask(&c, |m| m.membership.state())
        );
        let _ = c.poll(Duration::from_millis(20));
    }
    c.close(Some(Duration::from_secs(5))).expect("close");
    let got = log.lock().unpoisoned().clone();
    assert_eq!(
        got[2..],
        [
            "heartbeat generation=1 answered REBALANCE_IN_PROGRESS",
            "revoked [t-0]",
            "leave member=\"m-1\" reason=the consumer is being closed",
        ]
    );
    assert!(d.is_closed());
}

/// The member has one owner, the driver task: a call told without waiting (the async front's
/// non-async `enforce_rebalance`) runs before any call sent after it, the view shows a call's
/// change as soon as its answer is back, and once the member is gone a call answers None at
/// once rather than waiting for an owner that will never run it.
#[test]
fn the_driver_task_owns_the_member_and_runs_calls_in_the_order_sent() {
    let (_log, _fake, c) = joined("cooperative-sticky", &[0]);
    let d = c.driver().expect("a driver");
    c.enforce_rebalance("first").expect("a subscribed member");
    let reason = ask(&c, |m| m.membership.rejoin_reason().to_string());
    assert_eq!(reason, "enforced: first");
    assert!(
        d.read_view(|v| v.rejoin_needed && v.rejoin_reason == "enforced: first"),
        "the view shows what the last answered call left"
    );
    // Told calls keep their order among themselves and before what is asked after them.
    for i in 0..100 {
        c.enforce_rebalance(&format!("call {i}"))
            .expect("a subscribed member");
    }
    assert_eq!(
        ask(&c, |m| m.membership.rejoin_reason().to_string()),
        "enforced: call 99"
    );
    c.close(Some(Duration::from_secs(5))).expect("close");
    // The task ends soon after close (its heartbeat loop sees the member closed); from then
    // on a call answers None at once. Each call is bounded: none may wait for an owner gone.
    let (tx, rx) = std::sync::mpsc::channel();
    let gone = d.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = rt.block_on(gone.with_member(|_| 7));
            if answer.is_none() || Instant::now() > deadline {
                let _ = tx.send(answer);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let answer = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("every call to the member answers");
    assert_eq!(answer, None, "the closed member's owner ended");
}

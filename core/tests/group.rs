//! Consumer groups against a real broker (`LAGLESS_BOOTSTRAP`): the KIP-62 liveness model,
//! cooperative and eager rebalances, static membership, crash recovery, wakeup and close.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, RebalanceListener, TopicPartition};

mod support;
use support::bootstrap;

fn unique(prefix: &str) -> String {
    support::unique_name(prefix)
}

fn topic(partitions: i32) -> String {
    support::new_topic(&bootstrap(), "group", partitions)
}

fn produce(topic: &str, partitions: i32, per_partition: usize) {
    support::produce(&bootstrap(), topic, partitions, per_partition);
}

/// A member of `group` (support::group_member's settings, with a 15 s poll interval).
fn consumer(group: &str, extra: &[(&str, &str)]) -> Consumer {
    let mut pairs = vec![("max.poll.interval.ms", "15000")];
    // tests/suites runs these tests a second time with recovery streams (KIP-333) on, with a
    // small minimum lag so that takeovers with a backlog use them: the group's behaviour must
    // not change.
    if std::env::var("LAGLESS_TEST_PARALLEL_REBALANCE").is_ok_and(|v| v == "1") {
        pairs.push(("enable.parallel.rebalance", "true"));
        pairs.push(("parallel.rebalance.min.lag", "1"));
    }
    for (k, v) in extra {
        pairs.retain(|(pk, _)| pk != k);
        pairs.push((k, v));
    }
    support::group_member(&bootstrap(), group, &pairs)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

/// Records the listener's calls for the test to inspect.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
    fn revoked(&self) -> BTreeSet<TopicPartition> {
        self.events()
            .into_iter()
            .flat_map(|e| match e {
                Event::Revoked(p) => p,
                _ => vec![],
            })
            .collect()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

impl RebalanceListener for Recorder {
    fn on_partitions_assigned(
        &mut self,
        _: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        self.0.lock().unwrap().push(Event::Assigned(p.to_vec()));
        Ok(())
    }
    fn on_partitions_revoked(&mut self, _: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        self.0.lock().unwrap().push(Event::Revoked(p.to_vec()));
        Ok(())
    }
    fn on_partitions_lost(&mut self, _: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        self.0.lock().unwrap().push(Event::Lost(p.to_vec()));
        Ok(())
    }
}

/// Polls every consumer until `done` holds or the deadline passes.
fn poll_until(consumers: &[&Consumer], timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        for c in consumers {
            c.poll(Duration::from_millis(50)).unwrap();
        }
        if done() {
            return true;
        }
    }
    false
}

/// Two members of `group` subscribed to `topic` (two partitions), once each owns one.
fn two_members_sharing(
    topic: &str,
    group: &str,
    settings: &[(&str, &str)],
) -> (Consumer, Consumer) {
    let a = consumer(group, settings);
    let b = consumer(group, settings);
    a.subscribe(&[topic], None).unwrap();
    b.subscribe(&[topic], None).unwrap();
    assert!(
        poll_until(&[&a, &b], Duration::from_secs(60), || a.assignment().len()
            == 1
            && b.assignment().len() == 1),
        "the two members never shared the partitions"
    );
    (a, b)
}

fn generation(c: &Consumer) -> i32 {
    c.group_metadata().map_or(-1, |m| m.generation_id)
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn slow_processing_within_the_poll_interval_keeps_the_member_in_the_group() {
    let t = topic(2);
    let group = unique("slow");
    let a = consumer(&group, &[]);
    a.subscribe(&[&t], None).unwrap();
    let b = consumer(&group, &[]);
    let rb = Recorder::default();
    b.subscribe(&[&t], Some(Box::new(rb.clone()))).unwrap();
    assert!(poll_until(&[&a, &b], Duration::from_secs(60), || a
        .assignment()
        .len()
        == 1
        && b.assignment().len() == 1));
    let gen = generation(&a);
    rb.clear();
    // `a` processes for longer than session.timeout.ms (6 s) but less than
    // max.poll.interval.ms (15 s) between polls: the background heartbeat keeps it in.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(9) {
        b.poll(Duration::from_millis(100)).unwrap();
    }
    a.poll(Duration::from_millis(100)).unwrap();
    poll_until(&[&a, &b], Duration::from_secs(3), || false);
    assert_eq!(generation(&a), gen, "no rebalance happened");
    assert_eq!(generation(&b), gen);
    assert!(
        rb.events().is_empty(),
        "b saw no rebalance: {:?}",
        rb.events()
    );
    assert_eq!(a.assignment().len(), 1);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn exceeding_the_poll_interval_leaves_at_once_and_the_next_poll_rejoins() {
    let t = topic(4);
    produce(&t, 4, 50);
    let group = unique("expire");
    // A long session timeout: the takeover must come from LeaveGroup, not session expiry.
    let extra = [
        ("session.timeout.ms", "30000"),
        ("heartbeat.interval.ms", "1000"),
        ("max.poll.interval.ms", "6000"),
    ];
    let a = consumer(&group, &extra);
    let ra = Recorder::default();
    a.subscribe(&[&t], Some(Box::new(ra.clone()))).unwrap();
    let b = consumer(&group, &extra);
    b.subscribe(&[&t], None).unwrap();
    assert!(poll_until(&[&a, &b], Duration::from_secs(60), || a
        .assignment()
        .len()
        == 2
        && b.assignment().len() == 2));
    ra.clear();
    let stalled = Instant::now();
    // `a` stops polling; `b` keeps going and must own all 4 partitions well before 30 s.
    assert!(
        poll_until(&[&b], Duration::from_secs(20), || b.assignment().len() == 4),
        "b did not take over a's partitions"
    );
    let takeover = stalled.elapsed();
    assert!(takeover < Duration::from_secs(20), "took {takeover:?}");
    // a's next poll reports its partitions lost, then rejoins and consumes again.
    a.poll(Duration::from_millis(100)).unwrap();
    let lost: Vec<Event> = ra
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Lost(_)))
        .collect();
    assert_eq!(lost.len(), 1, "{:?}", ra.events());
    if let Event::Lost(p) = &lost[0] {
        assert_eq!(p.len(), 2);
    }
    assert!(
        poll_until(&[&a, &b], Duration::from_secs(60), || a.assignment().len()
            == 2
            && b.assignment().len() == 2),
        "a did not rejoin: a={:?} b={:?}",
        a.assignment(),
        b.assignment()
    );
    produce(&t, 4, 20);
    let mut got = 0usize;
    let ok = poll_until(&[&b], Duration::from_secs(30), || {
        got += a.poll(Duration::from_millis(50)).unwrap().len();
        got >= 40
    });
    assert!(ok, "a did not consume after rejoining: got {got}");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn cooperative_scale_up_never_revokes_partitions_that_stay() {
    let t = topic(6);
    let group = unique("coop");
    let recs: Vec<Recorder> = (0..3).map(|_| Recorder::default()).collect();
    let c1 = consumer(
        &group,
        &[("partition.assignment.strategy", "cooperative-sticky")],
    );
    let c2 = consumer(
        &group,
        &[("partition.assignment.strategy", "cooperative-sticky")],
    );
    c1.subscribe(&[&t], Some(Box::new(recs[0].clone())))
        .unwrap();
    c2.subscribe(&[&t], Some(Box::new(recs[1].clone())))
        .unwrap();
    assert!(poll_until(&[&c1, &c2], Duration::from_secs(60), || c1
        .assignment()
        .len()
        == 3
        && c2.assignment().len() == 3));
    let before: Vec<BTreeSet<TopicPartition>> = [&c1, &c2]
        .iter()
        .map(|c| c.assignment().into_iter().collect())
        .collect();
    recs[0].clear();
    recs[1].clear();
    let c3 = consumer(
        &group,
        &[("partition.assignment.strategy", "cooperative-sticky")],
    );
    c3.subscribe(&[&t], Some(Box::new(recs[2].clone())))
        .unwrap();
    assert!(poll_until(
        &[&c1, &c2, &c3],
        Duration::from_secs(60),
        || {
            c1.assignment().len() == 2 && c2.assignment().len() == 2 && c3.assignment().len() == 2
        }
    ));
    for (i, c) in [&c1, &c2].iter().enumerate() {
        let after: BTreeSet<TopicPartition> = c.assignment().into_iter().collect();
        let revoked = recs[i].revoked();
        // Exactly what moved was revoked; what stayed never was.
        let moved: BTreeSet<TopicPartition> = before[i].difference(&after).cloned().collect();
        assert_eq!(revoked, moved, "member {i}");
        assert_eq!(moved.len(), 1, "member {i} gives up one partition");
    }
    // Each partition has exactly one owner.
    let mut owners = BTreeMap::new();
    for c in [&c1, &c2, &c3] {
        for tp in c.assignment() {
            assert!(owners.insert(tp, ()).is_none());
        }
    }
    assert_eq!(owners.len(), 6);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn eager_scale_up_revokes_everything() {
    let t = topic(6);
    let group = unique("eager");
    let r1 = Recorder::default();
    let c1 = consumer(&group, &[("partition.assignment.strategy", "range")]);
    c1.subscribe(&[&t], Some(Box::new(r1.clone()))).unwrap();
    assert!(poll_until(&[&c1], Duration::from_secs(60), || c1
        .assignment()
        .len()
        == 6));
    r1.clear();
    let c2 = consumer(&group, &[("partition.assignment.strategy", "range")]);
    c2.subscribe(&[&t], None).unwrap();
    assert!(poll_until(&[&c1, &c2], Duration::from_secs(60), || c1
        .assignment()
        .len()
        == 3
        && c2.assignment().len() == 3));
    assert_eq!(
        r1.revoked().len(),
        6,
        "eager revokes all before rejoining: {:?}",
        r1.events()
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn restarting_a_static_member_within_the_session_timeout_causes_no_rebalance() {
    let t = topic(2);
    let group = unique("static");
    let extra_a = [
        ("group.instance.id", "static-a"),
        ("session.timeout.ms", "20000"),
    ];
    let a = consumer(&group, &extra_a);
    a.subscribe(&[&t], None).unwrap();
    let rb = Recorder::default();
    let b = consumer(
        &group,
        &[
            ("group.instance.id", "static-b"),
            ("session.timeout.ms", "20000"),
        ],
    );
    b.subscribe(&[&t], Some(Box::new(rb.clone()))).unwrap();
    assert!(poll_until(&[&a, &b], Duration::from_secs(60), || a
        .assignment()
        .len()
        == 1
        && b.assignment().len() == 1));
    let a_parts = a.assignment();
    let gen = generation(&b);
    rb.clear();
    a.close(None).unwrap();
    drop(a);
    let a2 = consumer(&group, &extra_a);
    a2.subscribe(&[&t], None).unwrap();
    assert!(poll_until(&[&a2, &b], Duration::from_secs(30), || a2
        .assignment()
        .len()
        == 1));
    assert_eq!(
        a2.assignment(),
        a_parts,
        "the static member gets its partitions back"
    );
    poll_until(&[&a2, &b], Duration::from_secs(3), || false);
    assert_eq!(generation(&b), gen, "no rebalance for b");
    assert!(rb.events().is_empty(), "{:?}", rb.events());
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn wakeup_ends_a_blocked_poll_at_once() {
    let t = topic(1);
    let c = Arc::new(consumer(&unique("wakeup"), &[]));
    c.subscribe(&[&t], None).unwrap();
    let c2 = c.clone();
    let waker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        c2.wakeup();
    });
    let start = Instant::now();
    let r = c.poll(Duration::from_secs(30));
    assert!(matches!(r, Err(lagless::Error::Wakeup)), "{r:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    waker.join().unwrap();
}

#[test]
fn close_returns_within_its_timeout_with_the_broker_unreachable() {
    // A consumer whose coordinator cannot be reached at all.
    let c = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", "127.0.0.1:1"),
            ("group.id", "nobody"),
            ("enable.auto.commit", "true"),
        ])
        .unwrap(),
    )
    .unwrap();
    c.subscribe(&["t"], None).unwrap();
    let _ = c.poll(Duration::from_millis(200));
    let start = Instant::now();
    let _ = c.close(Some(Duration::from_secs(2)));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn commit_inside_revoked_and_committed_offsets() {
    struct CommitOnRevoke(Arc<Mutex<usize>>);
    impl RebalanceListener for CommitOnRevoke {
        fn on_partitions_revoked(
            &mut self,
            c: &Consumer,
            p: &[TopicPartition],
        ) -> lagless::Result<()> {
            c.commit_sync(None, None)?;
            *self.0.lock().unwrap() += p.len();
            Ok(())
        }
    }
    let t = topic(2);
    produce(&t, 2, 100);
    let group = unique("revoke-commit");
    let count = Arc::new(Mutex::new(0));
    let a = consumer(&group, &[("enable.auto.commit", "false")]);
    a.subscribe(&[&t], Some(Box::new(CommitOnRevoke(count.clone()))))
        .unwrap();
    let mut n = 0;
    assert!(poll_until(&[], Duration::from_secs(60), || {
        n += a.poll(Duration::from_millis(100)).unwrap().len();
        n == 200
    }));
    a.unsubscribe().unwrap();
    assert_eq!(*count.lock().unwrap(), 2);
    let parts = [TopicPartition::new(&t, 0), TopicPartition::new(&t, 1)];
    let committed = a.committed(&parts, None).unwrap();
    for (tp, c) in committed {
        assert_eq!(c.map(|c| c.offset), Some(100), "{tp}");
    }
}

/// Set in the environment of a member run as its own process: the parent test runs its own test
/// binary again with `--exact <its own name>`, and the test's first line
/// ([`act_as_child_if_spawned`]) runs the member and never returns. The member is no test of its
/// own, so it cannot pass in a normal run without doing anything.
const CHILD_ROLE: &str = "LAGLESS_CHILD_ROLE";

/// In a child process started by `a_crashed_member_s_partitions_move_and_nothing_is_lost`, runs
/// the member (until it is killed); in a normal run, does nothing.
fn act_as_child_if_spawned() {
    match std::env::var(CHILD_ROLE).as_deref() {
        Err(_) => {}
        Ok("member") => member_process(),
        Ok(other) => panic!("unknown {CHILD_ROLE} {other:?}"),
    }
}

/// The member that crashes: consumes, writes down what it consumed, commits, until killed.
fn member_process() -> ! {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: the member runs only as its parent test's child")
        })
    };
    let (topic, group, out) = (
        var("LAGLESS_CHILD_TOPIC"),
        var("LAGLESS_CHILD_GROUP"),
        var("LAGLESS_CHILD_OUT"),
    );
    use std::io::Write;
    let c = consumer(&group, &[("enable.auto.commit", "false")]);
    c.subscribe(&[&topic], None).unwrap();
    let mut f = std::fs::File::create(out).unwrap();
    loop {
        let records = c.poll(Duration::from_millis(100)).unwrap();
        for r in &records {
            writeln!(f, "{} {}", r.partition, r.offset).unwrap();
        }
        f.flush().unwrap();
        if !records.is_empty() {
            c.commit_sync(None, None).unwrap();
        }
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_crashed_member_s_partitions_move_and_nothing_is_lost() {
    act_as_child_if_spawned();
    let t = topic(4);
    let group = unique("crash");
    produce(&t, 4, 500);
    let out = std::env::temp_dir().join(format!("{group}.child"));
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_crashed_member_s_partitions_move_and_nothing_is_lost",
            // The test is #[ignore]d (it needs a broker): the child runs it all the same.
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ROLE, "member")
        .env("LAGLESS_CHILD_TOPIC", &t)
        .env("LAGLESS_CHILD_GROUP", &group)
        .env("LAGLESS_CHILD_OUT", &out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let survivor = consumer(&group, &[("enable.auto.commit", "false")]);
    survivor.subscribe(&[&t], None).unwrap();
    let mut seen: BTreeSet<(i32, i64)> = BTreeSet::new();
    // Wait until both members share the partitions and the child has consumed something.
    let shared = poll_until(&[], Duration::from_secs(60), || {
        for r in survivor.poll(Duration::from_millis(100)).unwrap() {
            seen.insert((r.partition, r.offset));
        }
        let child_lines = std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .count();
        survivor.assignment().len() == 2 && child_lines > 0
    });
    survivor.commit_sync(None, None).unwrap();
    assert!(shared, "the child never joined");
    child.kill().unwrap(); // SIGKILL: no LeaveGroup, no commit
    child.wait().unwrap();
    produce(&t, 4, 500);
    let crashed = Instant::now();
    assert!(poll_until(&[], Duration::from_secs(60), || {
        for r in survivor.poll(Duration::from_millis(100)).unwrap() {
            seen.insert((r.partition, r.offset));
        }
        let mut all = seen.clone();
        all.extend(child_offsets(&out));
        survivor.assignment().len() == 4 && all.len() >= 4000
    }));
    // The partitions moved only after the session timeout (6 s), not at once.
    assert!(
        crashed.elapsed() >= Duration::from_secs(3),
        "{:?}",
        crashed.elapsed()
    );
    for (p, o) in child_offsets(&out) {
        seen.insert((p, o));
    }
    for p in 0..4 {
        for o in 0..1000 {
            assert!(
                seen.contains(&(p, o)),
                "offset {o} of partition {p} was never consumed"
            );
        }
    }
    let _ = std::fs::remove_file(out);
}

fn child_offsets(path: &std::path::Path) -> Vec<(i32, i64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_session_timeout_the_broker_refuses_is_a_fatal_error_naming_its_range() {
    let t = topic(1);
    // The test broker allows 1000..1800000 ms.
    let c = consumer(
        &unique("badsession"),
        &[
            ("session.timeout.ms", "500"),
            ("heartbeat.interval.ms", "100"),
        ],
    );
    c.subscribe(&[&t], None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let err = loop {
        match c.poll(Duration::from_millis(100)) {
            Err(e) => break e,
            Ok(_) if Instant::now() > deadline => panic!("no error"),
            Ok(_) => {}
        }
    };
    assert_eq!(err.kafka_code(), Some(26), "{err}");
    assert!(err.is_fatal());
    let msg = err.to_string();
    assert!(
        msg.contains("session.timeout.ms=500") && msg.contains("1000..1800000"),
        "{msg}"
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn pattern_subscription_picks_up_new_matching_topics() {
    let prefix = unique("pattern");
    lagless::admin::create_topic(&bootstrap(), &format!("{prefix}-a"), 1, 1).unwrap();
    let c = consumer(&unique("pattern-group"), &[("metadata.max.age.ms", "1000")]);
    c.subscribe_pattern(&format!("{}-.*", regex_escape(&prefix)), None)
        .unwrap();
    assert!(poll_until(&[&c], Duration::from_secs(60), || c
        .assignment()
        .len()
        == 1));
    lagless::admin::create_topic(&bootstrap(), &format!("{prefix}-b"), 2, 1).unwrap();
    assert!(
        poll_until(&[&c], Duration::from_secs(60), || c.assignment().len() == 3),
        "{:?}",
        c.assignment()
    );
    assert_eq!(c.subscription().len(), 2);
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() {
                ch.to_string()
            } else {
                format!("\\{ch}")
            }
        })
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_failing_callback_completes_the_assignment_then_its_error_comes_out_of_poll() {
    struct Failing;
    impl RebalanceListener for Failing {
        fn on_partitions_assigned(
            &mut self,
            _: &Consumer,
            _: &[TopicPartition],
        ) -> lagless::Result<()> {
            Err(lagless::Error::Callback("boom".into()))
        }
    }
    let t = topic(2);
    let c = consumer(&unique("failing-cb"), &[]);
    c.subscribe(&[&t], Some(Box::new(Failing))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let err = loop {
        match c.poll(Duration::from_millis(100)) {
            Err(e) => break e,
            Ok(_) => assert!(Instant::now() < deadline, "no callback error"),
        }
    };
    assert!(
        matches!(&err, lagless::Error::Callback(m) if m.contains("boom")),
        "{err}"
    );
    assert_eq!(c.assignment().len(), 2, "the assignment change completed");
    c.poll(Duration::from_millis(100)).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn async_commit_callback_runs_on_the_polling_thread_and_auto_commit_commits_the_previous_poll() {
    let t = topic(1);
    produce(&t, 1, 10);
    let group = unique("async");
    let c = consumer(
        &group,
        &[
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "100"),
            ("max.poll.records", "4"),
        ],
    );
    c.subscribe(&[&t], None).unwrap();
    let mut got = Vec::new();
    assert!(poll_until(&[], Duration::from_secs(60), || {
        got.extend(c.poll(Duration::from_millis(100)).unwrap());
        !got.is_empty()
    }));
    // Auto-commit commits what the previous poll() returned, never what the poll() that
    // commits returns: after the auto-commit interval, one more poll() commits `returned`
    // (the offset after the records returned so far) and returns the next records.
    let tp = TopicPartition::new(&t, 0);
    let returned = got.last().unwrap().offset + 1;
    // Not a wait for something to happen: the auto-commit interval (100 ms) must have passed
    // since the last poll, and a sleep never ends early, however loaded the machine.
    std::thread::sleep(Duration::from_millis(300));
    let next = c.poll(Duration::from_millis(500)).unwrap();
    let position = c.position(&tp, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let committed = loop {
        let committed = c.committed(std::slice::from_ref(&tp), None).unwrap()[0]
            .1
            .clone()
            .map(|c| c.offset);
        if committed.is_some_and(|o| o >= returned) || Instant::now() > deadline {
            break committed;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        committed,
        Some(returned),
        "auto-commit committed {committed:?}: the previous poll() ended at {returned}, the \
         committing poll() returned {} more records (position {position})",
        next.len()
    );
    let main_thread = std::thread::current().id();
    let ran_on = Arc::new(Mutex::new(None));
    let r2 = ran_on.clone();
    c.commit_async(
        None,
        Some(Box::new(move |res| {
            assert!(res.is_ok());
            *r2.lock().unwrap() = Some(std::thread::current().id());
        })),
    )
    .unwrap();
    assert!(poll_until(&[&c], Duration::from_secs(30), || ran_on
        .lock()
        .unwrap()
        .is_some()));
    assert_eq!(*ran_on.lock().unwrap(), Some(main_thread));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn enforce_rebalance_starts_a_new_generation() {
    let t = topic(1);
    let c = consumer(&unique("enforce"), &[]);
    c.subscribe(&[&t], None).unwrap();
    assert!(poll_until(&[&c], Duration::from_secs(60), || c
        .assignment()
        .len()
        == 1));
    let g = generation(&c);
    c.enforce_rebalance("test").unwrap();
    assert!(poll_until(&[&c], Duration::from_secs(60), || generation(
        &c
    ) > g));
}

/// A member dropped without `close()` still leaves the group (LeaveGroup from `Drop`): with a
/// 30 s session timeout, the survivor gets the partitions long before the session would expire.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_member_dropped_without_close_leaves_the_group() {
    let t = topic(2);
    let group = unique("drop");
    let long_session = [
        ("session.timeout.ms", "30000"),
        ("max.poll.interval.ms", "60000"),
    ];
    let a = consumer(&group, &long_session);
    let b = consumer(&group, &long_session);
    a.subscribe(&[&t], None).unwrap();
    b.subscribe(&[&t], None).unwrap();
    assert!(
        poll_until(&[&a, &b], Duration::from_secs(60), || a.assignment().len()
            == 1
            && b.assignment().len() == 1),
        "the two members never shared the partitions"
    );
    let dropped = Instant::now();
    drop(b);
    assert!(
        poll_until(&[&a], Duration::from_secs(20), || a.assignment().len() == 2),
        "the survivor did not get the dropped member's partition within 20 s"
    );
    assert!(
        dropped.elapsed() < Duration::from_secs(20),
        "took {:?}: the dropped member waited out its session",
        dropped.elapsed()
    );
    a.close(None).unwrap();
}

/// One `on_partitions_assigned`: the member's generation and member id at the time, and the
/// partitions it was given.
type AssignedIn = (i32, String, Vec<TopicPartition>);

/// Records each `on_partitions_assigned` with the member's generation and member id at the time.
#[derive(Clone, Default)]
struct GenerationRecorder(Arc<Mutex<Vec<AssignedIn>>>);

impl RebalanceListener for GenerationRecorder {
    fn on_partitions_assigned(
        &mut self,
        c: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        let m = c
            .group_metadata()
            .expect("a subscribed consumer has group metadata");
        self.0
            .lock()
            .unwrap()
            .push((m.generation_id, m.member_id, p.to_vec()));
        Ok(())
    }
}

/// A join that finished in the background while the caller was not polling, followed by a
/// `max.poll.interval.ms` expiry before the next `poll()`: the member left that generation
/// (LeaveGroup), and another member took the partitions. The next `poll()` must discard the
/// stale assignment and rejoin: never hand out, fetch or deliver a partition of a generation
/// the member already left.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_join_finished_before_a_poll_interval_expiry_is_discarded_and_the_member_rejoins() {
    let t = topic(2);
    let group = unique("stale-join");
    let extra = [
        ("max.poll.interval.ms", "2000"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "200"),
    ];
    let a = consumer(&group, &extra);
    let ra = GenerationRecorder::default();
    a.subscribe(&[&t], Some(Box::new(ra.clone()))).unwrap();
    // One poll starts the join; it completes in the background.
    assert!(a.poll(Duration::ZERO).unwrap().is_empty());
    let wait_for = |what: &str, cond: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for("the join to complete", &|| generation(&a) >= 0);
    let left = a.group_metadata().unwrap();
    // No poll() for max.poll.interval.ms: the member leaves the group it just joined.
    wait_for("the poll interval to expire", &|| generation(&a) < 0);
    // Another member takes every partition meanwhile.
    let b = consumer(&group, &extra);
    b.subscribe(&[&t], None).unwrap();
    assert!(
        poll_until(&[&b], Duration::from_secs(30), || b.assignment().len() == 2),
        "b did not get the partitions"
    );
    // Records after b's takeover (polling b above discarded whatever it returned).
    produce(&t, 2, 20);
    let mut read: BTreeSet<(i32, i64)> = BTreeSet::new();
    let mut double_owned = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for r in a.poll(Duration::from_millis(50)).unwrap() {
            let tp = TopicPartition::new(&*r.topic, r.partition);
            if b.assignment().contains(&tp) {
                double_owned.push((r.partition, r.offset));
            }
            read.insert((r.partition, r.offset));
        }
        for r in b.poll(Duration::from_millis(50)).unwrap() {
            read.insert((r.partition, r.offset));
        }
        if a.assignment().len() == 1 && b.assignment().len() == 1 && read.len() == 40 {
            break;
        }
    }
    let assigned = ra.0.lock().unwrap().clone();
    let stale: Vec<_> = assigned
        .iter()
        .filter(|(generation_id, member_id, _)| {
            *generation_id < 0
                || *generation_id == left.generation_id
                || *member_id == left.member_id
        })
        .collect();
    assert!(
        stale.is_empty() && double_owned.is_empty(),
        "after leaving generation {} (member `{}`), a was handed {stale:?} (generation, member, \
         partitions) and delivered {} records of partitions b owned: {:?}; all assignments: \
         {assigned:?}",
        left.generation_id,
        left.member_id,
        double_owned.len(),
        &double_owned[..double_owned.len().min(10)]
    );
    assert_eq!(
        (a.assignment().len(), b.assignment().len()),
        (1, 1),
        "a did not rejoin: a={:?} b={:?}",
        a.assignment(),
        b.assignment()
    );
    assert_eq!(
        read.len(),
        40,
        "every record read once the members share the partitions"
    );
}

/// A commit attempted after `max.poll.interval.ms` expired (before the next `poll()` reports
/// the loss) fails saying why: the member left the group and its partitions may be another
/// member's; not that "the group is rebalancing".
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_commit_after_a_poll_interval_expiry_says_the_member_left_and_its_partitions_are_lost() {
    let t = topic(1);
    produce(&t, 1, 5);
    let group = unique("expired-commit");
    let a = consumer(
        &group,
        &[
            ("max.poll.interval.ms", "2000"),
            ("heartbeat.interval.ms", "200"),
            ("enable.auto.commit", "false"),
        ],
    );
    a.subscribe(&[&t], None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = 0;
    while got == 0 {
        assert!(Instant::now() < deadline, "no record");
        got += a.poll(Duration::from_millis(100)).unwrap().len();
    }
    // "Processing" longer than max.poll.interval.ms.
    while generation(&a) >= 0 {
        assert!(
            Instant::now() < deadline + Duration::from_secs(30),
            "the poll interval never expired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = a.commit_sync(None, None).unwrap_err().to_string();
    assert!(
        e.contains("max.poll.interval.ms")
            && e.contains("left the group")
            && !e.contains("rebalancing"),
        "{e}"
    );
}

/// A member that closes while its JoinGroup is in flight leaves at once. The join is answered
/// only when the group's other members have rejoined (here one that is not polled while the
/// first closes), and the broker answers a connection's requests in order: a LeaveGroup sent
/// behind the join would wait for the whole rebalance, or until close() gives up.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn closing_while_a_join_is_in_flight_leaves_without_waiting_for_the_rebalance() {
    let t = topic(2);
    let group = unique("leave-mid-join");
    let slow = [
        ("session.timeout.ms", "30000"),
        ("heartbeat.interval.ms", "2000"),
        ("max.poll.interval.ms", "60000"),
    ];
    let (a, b) = two_members_sharing(&t, &group, &slow);
    let g = generation(&b);
    a.enforce_rebalance("closing mid-join").unwrap();
    // This poll sends a's JoinGroup; the broker holds it until b rejoins, and b is not polled.
    a.poll(Duration::from_millis(300)).unwrap();
    let closing = Instant::now();
    a.close(None).unwrap();
    let took = closing.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "close() took {took:?}: its LeaveGroup waited behind the join in flight"
    );
    assert!(
        poll_until(&[&b], Duration::from_secs(30), || generation(&b) > g
            && b.assignment().len() == 2),
        "b never got both partitions after a left"
    );
    b.close(None).unwrap();
}

/// A member whose rejoin is under way (its JoinGroup held by the broker until the other members
/// rejoin) still owns its generation's partitions: a commit meanwhile, between polls or in
/// on_partitions_revoked on close(), is taken, as a Java member's would be (still stable there:
/// its JoinGroup waits for its next poll()). A lagless member also rejoins without a poll, so
/// such a commit used to fail with "the group is rebalancing" whenever a rebalance had begun;
/// and it must not wait behind the JoinGroup on the coordinator's connection either. Here B
/// must revoke its partition of a topic it no longer subscribes to before it can rejoin, so
/// A's join waits for B's next poll.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_commit_while_the_member_rejoins_is_taken() {
    let t = topic(2);
    let other = topic(1);
    produce(&t, 2, 10);
    let group = unique("commit-mid-join");
    let settings = [
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("enable.auto.commit", "false"),
        ("max.poll.interval.ms", "60000"),
        ("session.timeout.ms", "30000"),
    ];
    let (a, b) = two_members_sharing(&t, &group, &settings);
    let g = generation(&a);
    let mine = a.assignment()[0].clone();
    // B must give up its partition of `t` (through its listener, at its next poll) before it
    // can rejoin.
    b.subscribe(&[&other], None).unwrap();
    a.enforce_rebalance("a commit while rejoining").unwrap();
    // This poll sends A's JoinGroup; the broker holds it until B rejoins, and B is not polled.
    a.poll(Duration::from_millis(300)).unwrap();
    let seven = lagless::OffsetAndMetadata {
        offset: 7,
        metadata: String::new(),
    };
    a.commit_sync(
        Some(&[(mine.clone(), seven.clone())]),
        Some(Duration::from_secs(10)),
    )
    .expect("a commit while the member's JoinGroup is in flight");
    assert_eq!(
        generation(&a),
        g,
        "the rebalance completed without B: the commit proves nothing"
    );
    let committed = a
        .committed(std::slice::from_ref(&mine), Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(committed, vec![(mine.clone(), Some(seven))]);
    // B's poll revokes and rejoins; the rebalance completes: A owns both partitions of `t`.
    assert!(
        poll_until(&[&a, &b], Duration::from_secs(60), || generation(&a) > g
            && a.assignment().len() == 2
            && b.assignment().len() == 1),
        "the rebalance never completed: A {:?}, B {:?}",
        a.assignment(),
        b.assignment()
    );
    a.close(None).unwrap();
    b.close(None).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_busy_member_holds_up_a_cooperative_hand_over_only_until_its_next_poll() {
    // A owns every partition and is busy (it does not poll) when B joins. The first round
    // needs A's JoinGroup: A sends it without waiting for the application. A must revoke half
    // to B, which runs its listener, so that waits for A's next poll; the second round then
    // completes at once, and A's share of it (nothing changes for A) is applied while A is busy
    // again. Before, the first round waited for A's next poll, and the second for the poll
    // after that: B waited two of A's processing times.
    let t = topic(4);
    produce(&t, 4, 10);
    let group = unique("busy-coop");
    let settings = [
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("max.poll.interval.ms", "60000"),
    ];
    let rec_a = Recorder::default();
    let a = consumer(&group, &settings);
    a.subscribe(&[&t], Some(Box::new(rec_a.clone()))).unwrap();
    assert!(
        poll_until(&[&a], Duration::from_secs(60), || a.assignment().len() == 4),
        "A never owned the four partitions"
    );
    let g = generation(&a);
    rec_a.clear();
    // From here A is busy: not polled until B owns its share.
    let b = consumer(&group, &settings);
    b.subscribe(&[&t], None).unwrap();
    assert!(
        poll_until(&[&b], Duration::from_secs(30), || generation(&a) > g),
        "A did not rejoin while busy: the first round waits for A's next poll"
    );
    assert_eq!(a.assignment().len(), 4, "A revoked without a poll");
    assert!(rec_a.events().is_empty(), "A's listener ran without a poll");
    // A's next poll revokes what goes to B and rejoins (the poll that takes in the finished
    // first round: the generation above changes at JoinGroup, before SyncGroup answers).
    assert!(
        poll_until(&[&a], Duration::from_secs(10), || rec_a.revoked().len()
            == 2),
        "A never revoked B's share: {:?}",
        rec_a.events()
    );
    let a_polled = Instant::now();
    let a_events = rec_a.events();
    assert!(
        poll_until(&[&b], Duration::from_secs(20), || b.assignment().len() == 2),
        "B never got its partitions while A was busy after its poll"
    );
    println!("B owned its share {:?} after A's poll", a_polled.elapsed());
    // A is busy again and nothing changes for it in a rebalance now: it rejoins and applies
    // each round without a poll. It could not rejoin before the second round's assignment was
    // applied, so this also shows that one was.
    let g2 = generation(&b);
    b.enforce_rebalance("a rebalance that moves nothing")
        .unwrap();
    assert!(
        poll_until(&[&b], Duration::from_secs(20), || generation(&b) > g2
            && generation(&a) == generation(&b)),
        "the group waited for the busy member A (generation A {} B {}, before {g2})",
        generation(&a),
        generation(&b)
    );
    assert_eq!(rec_a.events(), a_events, "A's listener ran without a poll");
    let a_owns: BTreeSet<TopicPartition> = a.assignment().into_iter().collect();
    let b_owns: BTreeSet<TopicPartition> = b.assignment().into_iter().collect();
    assert_eq!((a_owns.len(), b_owns.len()), (2, 2));
    assert!(a_owns.is_disjoint(&b_owns), "A {a_owns:?} and B {b_owns:?}");
    // A's listener hears of the rounds applied meanwhile at its next poll, as after any
    // cooperative round that gives it nothing: on_partitions_assigned with no partitions.
    a.poll(Duration::from_millis(100)).unwrap();
    assert_eq!(
        rec_a.events().last(),
        Some(&Event::Assigned(vec![])),
        "A's listener: {:?}",
        rec_a.events()
    );
    a.close(None).unwrap();
    b.close(None).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_member_taking_one_record_at_a_time_hands_over_while_records_keep_coming() {
    // A takes one record per poll() and always finds more waiting, so most of its polls stand
    // on group steps taken a moment before instead of taking them again. The steps must still
    // run: B, joining, gets its share while A's backlog lasts, and A hands out no record of a
    // partition after revoking it. Every record is read by one of them.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    struct Revocations(Arc<Mutex<BTreeSet<i32>>>);
    impl RebalanceListener for Revocations {
        fn on_partitions_assigned(
            &mut self,
            _: &Consumer,
            p: &[TopicPartition],
        ) -> lagless::Result<()> {
            let mut revoked = self.0.lock().unwrap();
            for tp in p {
                revoked.remove(&tp.partition);
            }
            Ok(())
        }
        fn on_partitions_revoked(
            &mut self,
            _: &Consumer,
            p: &[TopicPartition],
        ) -> lagless::Result<()> {
            self.0
                .lock()
                .unwrap()
                .extend(p.iter().map(|tp| tp.partition));
            Ok(())
        }
    }

    let t = topic(2);
    // Enough that A's backlog (at >= 50 us a record) outlasts B's join on a loaded machine.
    let written = support::produce(&bootstrap(), &t, 2, 50_000);
    let group = unique("one-at-a-time");
    let settings = [
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("heartbeat.interval.ms", "500"),
    ];
    let revoked: Arc<Mutex<BTreeSet<i32>>> = Default::default();
    let a = Arc::new(consumer(&group, &settings));
    a.subscribe(&[&t], Some(Box::new(Revocations(revoked.clone()))))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let a_read = Arc::new(AtomicUsize::new(0));
    let a_seen: Arc<Mutex<Vec<(i32, i64)>>> = Default::default();
    let reader = {
        let (a, stop, a_read, a_seen) = (a.clone(), stop.clone(), a_read.clone(), a_seen.clone());
        std::thread::spawn(move || {
            let mut after_revoking = Vec::new();
            while !stop.load(Ordering::Acquire) {
                for r in a.poll_at_most(Duration::from_millis(100), 1).unwrap() {
                    if revoked.lock().unwrap().contains(&r.partition) {
                        after_revoking.push((r.partition, r.offset));
                    }
                    a_seen.lock().unwrap().push((r.partition, r.offset));
                    a_read.fetch_add(1, Ordering::Release);
                    // Some work per record, so the backlog outlasts B's join.
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            after_revoking
        })
    };
    let waited = Instant::now();
    while a_read.load(Ordering::Acquire) < 100 {
        assert!(waited.elapsed() < Duration::from_secs(60), "A read nothing");
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = consumer(&group, &settings);
    b.subscribe(&[&t], None).unwrap();
    let mut b_seen = Vec::new();
    let all: usize = written.values().map(|o| o.len()).sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    let read_by_either = |b_seen: &[(i32, i64)]| {
        let mut read: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
        for (p, o) in a_seen.lock().unwrap().iter().chain(b_seen) {
            read.entry(*p).or_default().insert(*o);
        }
        read
    };
    while Instant::now() < deadline {
        for r in b.poll(Duration::from_millis(100)).unwrap() {
            b_seen.push((r.partition, r.offset));
        }
        if a_read.load(Ordering::Acquire) + b_seen.len() >= all
            && read_by_either(&b_seen) == written
        {
            break;
        }
    }
    stop.store(true, Ordering::Release);
    let after_revoking = reader.join().unwrap();
    let a_seen = a_seen.lock().unwrap().clone();
    let read = read_by_either(&b_seen);
    assert!(
        !b_seen.is_empty(),
        "B read nothing: A ({} of {all} records read) kept both partitions while its backlog lasted",
        a_seen.len()
    );
    assert!(
        after_revoking.is_empty(),
        "A handed out records of partitions it had revoked: {:?}",
        &after_revoking[..after_revoking.len().min(10)]
    );
    assert_eq!(read, written, "records missing");
    let (a_owns, b_owns) = (a.assignment(), b.assignment());
    assert_eq!(
        (a_owns.len(), b_owns.len()),
        (1, 1),
        "A {a_owns:?}, B {b_owns:?}"
    );
    println!(
        "A read {} records, B {} (of {all})",
        a_seen.len(),
        b_seen.len()
    );
    b.close(None).unwrap();
    a.close(None).unwrap();
}

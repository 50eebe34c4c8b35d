//! Network partitions of a group member. Each test starts a cluster of its own whose nodes have
//! one proxied listener (tests/kafka_broker.py `--proxied-listeners 1`), with the test's TCP
//! proxy (support/proxy.rs) in front of every node. The isolated member Z bootstraps at the
//! proxy; since the broker advertises the proxy's ports on that listener, every connection Z
//! makes goes through it, while the other member W and the producer talk to the brokers
//! directly.
//!
//! - Z cut off from its group coordinator only (three nodes: the partition leaders on the other
//!   nodes stay reachable), and Z cut off from every node, each for longer than
//!   `session.timeout.ms`, while W takes over and a producer writes throughout. Every produced
//!   offset is processed; no commit of Z is reported as a success from the cut until Z reports
//!   its partitions lost; W starts each partition it takes over exactly at Z's last successful
//!   commit; nothing covered by a successful commit is processed again; the double processing is
//!   measured (records, seconds).
//! - A commit whose request reaches the broker but whose answer never comes back: the call
//!   fails within `request.timeout.ms`, the commit is applied once (a later commit is never
//!   overwritten by a resend), and the next commit works.
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/wait.rs"]
mod wait;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lagless::{
    Config, Consumer, OffsetAndMetadata, Producer, ProducerRecord, RebalanceListener,
    TopicPartition,
};
use own_broker::OwnBroker;
use proxy::{Mode, Proxy};
use wait::wait_until;

/// Clusters are started one at a time: three JVMs each on a shared two-core machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

const SESSION: Duration = Duration::from_secs(6);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How much later than its deadline a call may return: scheduling on a loaded two-core machine.
const MARGIN: Duration = Duration::from_secs(1);
const PARTITIONS: i32 = 6;

fn config(pairs: &[(&str, &str)]) -> Config {
    let mut c = Config::new();
    for (k, v) in pairs {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    c
}

fn member(bootstrap: &str, group: &str, client_id: &str) -> Consumer {
    let session = SESSION.as_millis().to_string();
    let request = REQUEST_TIMEOUT.as_millis().to_string();
    Consumer::from_config(&config(&[
        ("bootstrap.servers", bootstrap),
        ("client.id", client_id),
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("session.timeout.ms", &session),
        ("heartbeat.interval.ms", "500"),
        ("max.poll.interval.ms", "60000"),
        ("request.timeout.ms", &request),
        ("default.api.timeout.ms", &request),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "1000"),
    ]))
    .expect("consumer")
}

fn om(offset: i64) -> OffsetAndMetadata {
    OffsetAndMetadata {
        offset,
        metadata: String::new(),
    }
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// A proxy in front of every node's proxied listener; route i goes to node i + 1.
fn proxy_for(broker: &OwnBroker) -> Proxy {
    let routes: Vec<(u16, String)> = broker.proxied[0]
        .iter()
        .map(|(advertised, bound)| (*advertised, format!("127.0.0.1:{bound}")))
        .collect();
    Proxy::start(&routes)
}

/// The partition of `__consumer_offsets` holding `group` (the broker's
/// `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`); its leader is the group's
/// coordinator.
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let h = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

struct Commit {
    started: Instant,
    ended: Instant,
    offsets: Vec<(i32, i64)>,
    result: Result<(), String>,
}

/// What one member did, with when.
#[derive(Default)]
struct Log {
    processed: Vec<(i32, i64, Instant)>,
    commits: Vec<Commit>,
    events: Vec<(Instant, Event)>,
    assignment: Vec<TopicPartition>,
}

type Shared = Arc<Mutex<Log>>;

struct Listener(Shared);

impl Listener {
    fn push(&self, e: Event) {
        self.0.lock().unwrap().events.push((Instant::now(), e));
    }
}

impl RebalanceListener for Listener {
    fn on_partitions_assigned(
        &mut self,
        _: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        self.push(Event::Assigned(p.to_vec()));
        Ok(())
    }
    fn on_partitions_revoked(&mut self, _: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        self.push(Event::Revoked(p.to_vec()));
        Ok(())
    }
    fn on_partitions_lost(&mut self, _: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        self.push(Event::Lost(p.to_vec()));
        Ok(())
    }
}

/// A member's loop on a thread of its own: poll, process (log), commit the batch's offsets
/// synchronously; with nothing new for a second, commit the positions of its partitions again
/// (so that a member that reads nothing still tries to commit).
fn run_member(
    bootstrap: String,
    group: String,
    topic: String,
    name: &'static str,
    stop: Arc<AtomicBool>,
) -> (Shared, JoinHandle<()>) {
    let log: Shared = Arc::default();
    let l = log.clone();
    let handle = std::thread::spawn(move || {
        let c = member(&bootstrap, &group, name);
        c.subscribe(&[&topic], Some(Box::new(Listener(l.clone()))))
            .unwrap();
        let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
        let mut last_commit = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            let batch = match c.poll(Duration::from_millis(100)) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("{name}: poll: {e}");
                    Vec::new()
                }
            };
            let now = Instant::now();
            let assignment = c.assignment();
            let mut offsets = BTreeMap::new();
            {
                let mut log = l.lock().unwrap();
                log.assignment = assignment.clone();
                for r in &batch {
                    log.processed.push((r.partition, r.offset, now));
                    offsets.insert(r.partition, r.offset + 1);
                    positions.insert(r.partition, r.offset + 1);
                }
            }
            if offsets.is_empty() && last_commit.elapsed() >= Duration::from_secs(1) {
                offsets = assignment
                    .iter()
                    .filter_map(|tp| Some((tp.partition, *positions.get(&tp.partition)?)))
                    .collect();
            }
            if offsets.is_empty() {
                continue;
            }
            last_commit = Instant::now();
            let list: Vec<(TopicPartition, OffsetAndMetadata)> = offsets
                .iter()
                .map(|(p, o)| (TopicPartition::new(&topic, *p), om(*o)))
                .collect();
            let started = Instant::now();
            let result = c
                .commit_sync(Some(&list), Some(REQUEST_TIMEOUT))
                .map_err(|e| e.to_string());
            l.lock().unwrap().commits.push(Commit {
                started,
                ended: Instant::now(),
                offsets: offsets.into_iter().collect(),
                result,
            });
        }
        let _ = c.close(Some(Duration::from_secs(5)));
    });
    (log, handle)
}

/// Writes numbered records to every partition, directly to the brokers, until `stop`; returns
/// the (partition, offset) of every record written.
fn run_producer(
    bootstrap: String,
    topic: String,
    stop: Arc<AtomicBool>,
) -> JoinHandle<BTreeSet<(i32, i64)>> {
    std::thread::spawn(move || {
        let p = Producer::from_config(&config(&[
            ("bootstrap.servers", bootstrap.as_str()),
            ("linger.ms", "5"),
        ]))
        .unwrap();
        let mut deliveries = Vec::new();
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            for part in 0..PARTITIONS {
                let record = ProducerRecord::new(&topic, format!("{n}")).with_partition(part);
                deliveries.push(p.send(record).expect("send"));
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        let written = deliveries
            .into_iter()
            .map(|d| {
                let m = d.wait().expect("delivery");
                (m.partition, m.offset)
            })
            .collect();
        p.close(Duration::from_secs(5)).unwrap();
        written
    })
}

#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Only the route to the group coordinator's node.
    CoordinatorOnly,
    /// Every route.
    Everything,
}

/// What a partition scenario measured.
struct Outcome {
    produced: usize,
    duplicates: usize,
    window: Duration,
    cut_to_takeover: Duration,
    heal_to_lost: Duration,
    refused_commits: usize,
}

fn partition_scenario(nodes: u32, cut: Cut) -> Outcome {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let broker = OwnBroker::start_proxied(nodes, 1);
    let proxy = proxy_for(&broker);
    let topic = unique("partition");
    lagless::admin::create_topic(&broker.bootstrap, &topic, PARTITIONS, 1).expect("topic");
    let group = format!("{topic}-group");

    let stop_producer = Arc::new(AtomicBool::new(false));
    let stop_members = Arc::new(AtomicBool::new(false));
    let producer = run_producer(
        broker.bootstrap.clone(),
        topic.clone(),
        stop_producer.clone(),
    );
    let (w, w_thread) = run_member(
        broker.bootstrap.clone(),
        group.clone(),
        topic.clone(),
        "W",
        stop_members.clone(),
    );
    let (z, z_thread) = run_member(
        proxy.bootstrap(),
        group.clone(),
        topic.clone(),
        "Z",
        stop_members.clone(),
    );
    let half = PARTITIONS as usize / 2;
    wait_until(
        "Z and W share the partitions, Z processing and committing",
        Duration::from_secs(60),
        || {
            let (z, w) = (z.lock().unwrap(), w.lock().unwrap());
            z.assignment.len() == half
                && w.assignment.len() == half
                && z.commits.iter().any(|c| c.result.is_ok())
        },
    );
    let coordinator = broker.leader_of(
        "__consumer_offsets",
        // offsets.topic.num.partitions=3 in tests/kafka_broker.py.
        offsets_partition(&group, 3),
    );
    let z_before: BTreeSet<i32> = z
        .lock()
        .unwrap()
        .assignment
        .iter()
        .map(|tp| tp.partition)
        .collect();
    let reachable: Vec<i32> = z_before
        .iter()
        .copied()
        .filter(|p| broker.leader_of(&topic, *p) != coordinator)
        .collect();
    eprintln!(
        "{cut:?}: coordinator node {coordinator}, Z owns {z_before:?}, led elsewhere {reachable:?}"
    );

    let cut_at = Instant::now();
    match cut {
        Cut::CoordinatorOnly => proxy.set(coordinator as usize - 1, Mode::Blackhole),
        Cut::Everything => proxy.set_all(Mode::Blackhole),
    }
    wait_until("W owns every partition", Duration::from_secs(30), || {
        w.lock().unwrap().assignment.len() == PARTITIONS as usize
    });
    let takeover_at = Instant::now();
    // The cut lasts well beyond the session timeout, and beyond the takeover.
    let cut_for =
        (SESSION + Duration::from_secs(4)).max(takeover_at - cut_at + Duration::from_secs(2));
    if matches!(cut, Cut::CoordinatorOnly) && !reachable.is_empty() {
        // Z keeps fetching from the leaders it still reaches.
        let before = z.lock().unwrap().processed.len();
        wait_until("Z processing during the cut", cut_for, || {
            z.lock().unwrap().processed.len() > before
        });
    }
    wait_until(
        "the end of the cut",
        cut_for + Duration::from_secs(1),
        || cut_at.elapsed() >= cut_for,
    );
    proxy.set_all(Mode::Pass);
    let healed_at = Instant::now();
    let lost_at = wait_until(
        "Z reports its partitions lost",
        Duration::from_secs(30),
        || {
            z.lock()
                .unwrap()
                .events
                .iter()
                .any(|(t, e)| *t >= cut_at && matches!(e, Event::Lost(p) if !p.is_empty()))
        },
    );
    let lost_at = healed_at + lost_at;
    wait_until(
        "Z rejoins and owns partitions again",
        Duration::from_secs(30),
        || !z.lock().unwrap().assignment.is_empty(),
    );
    stop_producer.store(true, Ordering::SeqCst);
    let produced = producer.join().expect("producer");
    wait_until(
        "every produced record processed",
        Duration::from_secs(30),
        || {
            let (z, w) = (z.lock().unwrap(), w.lock().unwrap());
            let seen: BTreeSet<(i32, i64)> = z
                .processed
                .iter()
                .chain(&w.processed)
                .map(|(p, o, _)| (*p, *o))
                .collect();
            produced.is_subset(&seen)
        },
    );
    stop_members.store(true, Ordering::SeqCst);
    z_thread.join().expect("Z");
    w_thread.join().expect("W");
    let (z, w) = (z.lock().unwrap(), w.lock().unwrap());

    // Nothing lost (checked above by waiting), and the producer wrote throughout.
    assert!(
        produced.len() > 1000,
        "only {} records produced",
        produced.len()
    );

    // No commit of Z succeeded from the cut until Z reported its partitions lost, and it tried.
    let zombie: Vec<&Commit> = z
        .commits
        .iter()
        .filter(|c| c.started >= cut_at && c.ended <= lost_at)
        .collect();
    assert!(!zombie.is_empty(), "Z made no commit during the cut");
    for c in &zombie {
        eprintln!(
            "  Z commit {:?} at +{} ms: {:?}",
            c.offsets,
            (c.started - cut_at).as_millis(),
            c.result
        );
        assert!(
            c.result.is_err(),
            "Z's commit {:?}, {} ms after the cut, was reported a success",
            c.offsets,
            (c.started - cut_at).as_millis()
        );
    }
    // Z reported those partitions lost (not revoked) after the cut.
    let z_after: Vec<&Event> = z
        .events
        .iter()
        .filter(|(t, _)| *t >= cut_at)
        .map(|(_, e)| e)
        .collect();
    eprintln!("  Z's callbacks from the cut: {z_after:?}");
    let w_after: Vec<(u128, &Event)> = w
        .events
        .iter()
        .filter(|(t, _)| *t >= cut_at)
        .map(|(t, e)| ((*t - cut_at).as_millis(), e))
        .collect();
    eprintln!("  W's callbacks from the cut (ms after it): {w_after:?}");
    let lost: BTreeSet<i32> = z_after
        .iter()
        .flat_map(|e| match e {
            Event::Lost(p) => p.iter().map(|tp| tp.partition).collect(),
            _ => vec![],
        })
        .collect();
    assert_eq!(lost, z_before, "Z lost other partitions than it owned");

    // W started each partition it took over at a commit Z sent before the cut (one whose
    // answer the cut held counts: the broker applied it), not before Z's last successful one:
    // no commit sent after the cut was applied, none lost.
    for c in z.commits.iter().filter(|c| {
        c.ended + Duration::from_secs(1) >= cut_at && c.started <= cut_at + Duration::from_secs(1)
    }) {
        eprintln!(
            "  Z commit {:?} at {} ms from the cut, took {} ms: {:?}",
            c.offsets,
            c.started.saturating_duration_since(cut_at).as_millis() as i64
                - cut_at.saturating_duration_since(c.started).as_millis() as i64,
            (c.ended - c.started).as_millis(),
            c.result
        );
    }
    for p in &z_before {
        let first = w
            .processed
            .iter()
            .filter(|(q, _, t)| q == p && *t >= cut_at)
            .map(|(_, o, _)| *o)
            .min()
            .unwrap_or_else(|| panic!("W processed nothing of partition {p} after the cut"));
        // (Z's commits after it rejoined do not count.)
        let last_ok = z
            .commits
            .iter()
            .filter(|c| c.result.is_ok() && c.started <= cut_at)
            .flat_map(|c| c.offsets.iter().filter(|(q, _)| q == p).map(|(_, o)| *o))
            .max();
        let sent_before_cut: BTreeSet<i64> = z
            .commits
            .iter()
            .filter(|c| c.started <= cut_at)
            .flat_map(|c| c.offsets.iter().filter(|(q, _)| q == p).map(|(_, o)| *o))
            .collect();
        assert!(
            sent_before_cut.contains(&first) && Some(first) >= last_ok,
            "W started partition {p} at {first}: not a commit of Z's from before the cut, or \
             before its last successful one ({last_ok:?})"
        );
    }

    // Double processing of committed records comes only from the zombie: a record processed and
    // committed by a member is processed again only by Z after its last successful commit
    // before the cut and before it reported its partitions lost (it could not know). The window
    // measured is the span of Z's processing in that time of records also processed by W.
    let zombie_from = z
        .commits
        .iter()
        .filter(|c| c.result.is_ok() && c.ended <= cut_at)
        .map(|c| c.ended)
        .max()
        .expect("Z committed before the cut");
    let in_zombie_time = |who: &str, t: Instant| who == "Z" && t >= zombie_from && t <= lost_at;
    let mut by_record: BTreeMap<(i32, i64), Vec<(&str, Instant)>> = BTreeMap::new();
    for (name, log) in [("Z", &*z), ("W", &*w)] {
        for (p, o, t) in &log.processed {
            by_record.entry((*p, *o)).or_default().push((name, *t));
        }
    }
    let mut duplicates = 0;
    let mut zombie_times: Vec<Instant> = Vec::new();
    for ((p, o), mut seen) in by_record {
        if seen.len() < 2 {
            continue;
        }
        duplicates += 1;
        seen.sort_by_key(|(_, t)| *t);
        let zombie: Vec<Instant> = seen
            .iter()
            .filter(|(who, t)| in_zombie_time(who, *t))
            .map(|(_, t)| *t)
            .collect();
        zombie_times.extend(zombie);
        // Outside the zombie's time a record comes twice only as at-least-once allows: its first
        // processor had not committed past it (its commit failed in a rebalance, say Z's rejoin
        // after the cut) when the second took it.
        let (who, _) = seen[0];
        let (again, t2) = seen[1];
        let log = if who == "Z" { &*z } else { &*w };
        let covered = log.commits.iter().any(|c| {
            c.result.is_ok() && c.ended < t2 && c.offsets.iter().any(|(q, c)| *q == p && *c > o)
        });
        assert!(
            !covered || in_zombie_time(again, t2),
            "record {p}/{o}, committed by {who}, was processed again by {again} ({seen:?})"
        );
    }
    let window = match (zombie_times.iter().min(), zombie_times.iter().max()) {
        (Some(f), Some(l)) => *l - *f,
        _ => Duration::ZERO,
    };
    Outcome {
        produced: produced.len(),
        duplicates,
        window,
        cut_to_takeover: takeover_at - cut_at,
        heal_to_lost: lost_at.saturating_duration_since(healed_at),
        refused_commits: zombie.len(),
    }
}

fn report(what: &str, o: &Outcome) {
    eprintln!(
        "{what}: {} records produced; W took over {:.2} s after the cut; Z reported its \
         partitions lost {:.2} s after the cut ended; {} commits of Z refused; {} records \
         processed twice, by Z within {:.2} s",
        o.produced,
        o.cut_to_takeover.as_secs_f64(),
        o.heal_to_lost.as_secs_f64(),
        o.refused_commits,
        o.duplicates,
        o.window.as_secs_f64()
    );
}

#[test]
fn the_proxy_decides_from_its_table() {
    proxy::check_release_table();
}

#[test]
fn the_coordinator_partition_is_the_brokers() {
    // Java's "".hashCode() is 0, "a" 97, "group" 98629247, "polygenelubricants" Integer.MIN_VALUE.
    assert_eq!(offsets_partition("", 3), 0);
    assert_eq!(offsets_partition("a", 3), 97 % 3);
    assert_eq!(offsets_partition("group", 50), 98629247 % 50);
    assert_eq!(offsets_partition("polygenelubricants", 3), 0);
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_member_cut_off_from_its_coordinator_only_is_fenced_and_loses_its_partitions() {
    let o = partition_scenario(3, Cut::CoordinatorOnly);
    report("cut from the coordinator only", &o);
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_member_cut_off_entirely_is_fenced_and_loses_its_partitions() {
    let o = partition_scenario(1, Cut::Everything);
    report("cut from every broker", &o);
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_commit_whose_answer_never_comes_fails_in_time_and_is_applied_once() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let broker = OwnBroker::start_proxied(1, 1);
    let proxy = proxy_for(&broker);
    let topic = unique("lost-answer");
    lagless::admin::create_topic(&broker.bootstrap, &topic, 1, 1).expect("topic");
    let group = format!("{topic}-group");
    let p = Producer::from_config(&config(&[("bootstrap.servers", broker.bootstrap.as_str())]))
        .unwrap();
    for i in 0..50 {
        p.send(ProducerRecord::new(&topic, format!("{i}")).with_partition(0))
            .unwrap()
            .wait()
            .unwrap();
    }
    p.close(Duration::from_secs(5)).unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let commit = |c: &Consumer, offset: i64, timeout: Duration| {
        c.commit_sync(Some(&[(tp.clone(), om(offset))]), Some(timeout))
    };
    let z = member(&proxy.bootstrap(), &group, "Z");
    z.subscribe(&[&topic], None).unwrap();
    wait_until("Z's first records", Duration::from_secs(60), || {
        !z.poll(Duration::from_millis(100)).unwrap().is_empty()
    });
    commit(&z, 5, REQUEST_TIMEOUT).expect("a commit through a passing proxy");
    // An observer on the broker's own listener, outside the group.
    let observer = Consumer::from_config(&config(&[
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", &group),
    ]))
    .unwrap();
    let committed = || {
        observer
            .committed(std::slice::from_ref(&tp), Some(Duration::from_secs(5)))
            .expect("committed")
            .into_iter()
            .find(|(t, _)| *t == tp)
            .and_then(|(_, o)| o.map(|o| o.offset))
    };
    assert_eq!(committed(), Some(5));

    proxy.set_all(Mode::LoseAnswers);
    let started = Instant::now();
    // A call deadline well past request.timeout.ms: the request's own timeout must end it.
    let r = commit(&z, 10, Duration::from_secs(20));
    let took = started.elapsed();
    eprintln!("commit without an answer: {} ms: {r:?}", took.as_millis());
    assert!(r.is_err(), "a commit whose answer never came succeeded");
    assert!(
        took <= REQUEST_TIMEOUT + MARGIN,
        "the commit took {took:?}, request.timeout.ms {REQUEST_TIMEOUT:?}"
    );
    // The request reached the broker: the commit took effect there.
    assert_eq!(committed(), Some(10));

    proxy.set_all(Mode::Pass);
    let started = Instant::now();
    let r = commit(&z, 20, Duration::from_secs(20));
    eprintln!(
        "the next commit: {} ms: {r:?}",
        started.elapsed().as_millis()
    );
    r.expect("the commit after the lost answer");
    // A resend of the unanswered commit would take the group back to 10: watch for one over
    // twice request.timeout.ms, polling the member meanwhile.
    let watch = Instant::now();
    while watch.elapsed() < 2 * REQUEST_TIMEOUT {
        z.poll(Duration::from_millis(200)).unwrap();
        assert_eq!(committed(), Some(20), "the commit was applied again");
    }
    z.close(Some(Duration::from_secs(5))).unwrap();
}

//! Network partitions of a group member. Each test starts a cluster of its own whose nodes have
//! one proxied listener (tests/kafka_broker.py `--proxied-listeners 1`), with the test's TCP
//! proxy (support/proxy.rs) in front of every node. The isolated member Z bootstraps at the
//! proxy; since the broker advertises the proxy's ports on that listener, every connection Z
//! makes goes through it, while the other member W and the producer talk to the brokers
//! directly.
//!
//! - Z cut off from its group coordinator only (three nodes: the partition leaders on the other
//!   nodes stay reachable), and Z cut off from every node, each for longer than
//!   `session.timeout.ms`, while W takes over and a producer writes throughout. Two groups read
//!   the topic side by side through the same cut: in one Z is lagless, in the other it is the
//!   Java consumer (tests/interop/java/InteropClient.java, the broker's own kafka-clients) with
//!   the same settings and the same loop (commit after every poll, synchronously). W is lagless
//!   in both, so that the groups differ in Z alone. For each group: every produced offset is
//!   processed; no commit of Z is reported as a success from the cut until Z reports its
//!   partitions lost; W starts each partition it takes over exactly at Z's last successful
//!   commit; nothing covered by a successful commit is processed again; the double processing is
//!   measured (records, seconds) and printed for both clients. Every commit of the lagless Z
//!   returns within its timeout. Compared: lagless' zombie processes records W also processes
//!   over a span no longer than the Java client's by more than one commit cycle, and reports its
//!   partitions lost after the cut no later than the Java client by more than a reconnect and a
//!   heartbeat (see `compare`).
//! - A commit whose request reaches the broker but whose answer never comes back: the call
//!   fails within `request.timeout.ms`, the commit is applied once (a later commit is never
//!   overwritten by a resend), and the next commit works.
//! - KIP-848: a static member whose heartbeat answers are lost for 2 s is not fenced by its own
//!   retry (apache/kafka #23542) and reads on with its partitions.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/java_client.rs"]
mod java_client;
#[path = "support/member_log.rs"]
mod member_log;
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

use lagless::{Consumer, OffsetAndMetadata, ProducerRecord, TopicPartition};
use member_log::{run_member, start_java_member, Commit, Event, Log, Shared};
use own_broker::OwnBroker;
use proxy::{Mode, Proxy};
use wait::wait_until;

/// Clusters are started one at a time: three JVMs each on a shared two-core machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// `session.timeout.ms` of [`SETTINGS`].
const SESSION: Duration = Duration::from_secs(6);
/// `request.timeout.ms` and `default.api.timeout.ms` of [`SETTINGS`].
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How much later than its deadline a call may return: scheduling on a loaded two-core machine.
const MARGIN: Duration = Duration::from_secs(1);
const PARTITIONS: i32 = 6;

/// Every member's settings beyond `configs::group_member_settings`, lagless or Java (which takes
/// them with --config). Both offer `cooperative-sticky,range` (lagless' default; InteropClient's
/// --strategy), so both groups run the same assignor, eagerly.
const SETTINGS: [(&str, &str); 8] = [
    ("enable.auto.commit", "false"),
    ("session.timeout.ms", "6000"),
    ("heartbeat.interval.ms", "500"),
    ("max.poll.interval.ms", "60000"),
    ("request.timeout.ms", "3000"),
    ("default.api.timeout.ms", "3000"),
    ("reconnect.backoff.ms", "100"),
    ("reconnect.backoff.max.ms", "1000"),
];

fn member(bootstrap: &str, group: &str, client_id: &str) -> Consumer {
    let own = [("bootstrap.servers", bootstrap), ("client.id", client_id)];
    configs::consumer(&[&own[..], &configs::group_member_settings(group), &SETTINGS].concat())
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

/// Writes numbered records to every partition, directly to the brokers, until `stop`; returns
/// the (partition, offset) of every record written.
fn run_producer(
    bootstrap: String,
    topic: String,
    stop: Arc<AtomicBool>,
) -> JoinHandle<BTreeSet<(i32, i64)>> {
    std::thread::spawn(move || {
        let p = configs::producer(&[
            ("bootstrap.servers", bootstrap.as_str()),
            ("linger.ms", "5"),
        ]);
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

/// Which client Z is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Lagless,
    Java,
}

/// One group of the scenario: W (lagless, direct) and Z (through the proxy).
struct Group {
    z_client: Client,
    name: String,
    z: Shared,
    w: Shared,
    /// Z's partitions when the cut began.
    z_before: BTreeSet<i32>,
}

/// A group name of the form `{prefix}-{k}` whose offsets live in `partition` of
/// `__consumer_offsets` (so that two groups have one coordinator).
fn group_in(prefix: &str, partition: i32, offsets_partitions: i32) -> String {
    (0..)
        .map(|k| format!("{prefix}-{k}"))
        .find(|g| offsets_partition(g, offsets_partitions) == partition)
        .unwrap()
}

/// When `w` first owned every partition from `cut_at` on, replaying its callbacks from what it
/// owned at the cut (`owned`).
fn full_at(w: &Log, owned: &BTreeSet<i32>, cut_at: Instant) -> Option<Instant> {
    let mut owned = owned.clone();
    for (t, e) in w.events.iter().filter(|(t, _)| *t >= cut_at) {
        match e {
            Event::Assigned(p) => owned.extend(p.iter().map(|tp| tp.partition)),
            Event::Revoked(p) | Event::Lost(p) => {
                for tp in p {
                    owned.remove(&tp.partition);
                }
            }
        }
        if owned.len() == PARTITIONS as usize {
            return Some(*t);
        }
    }
    None
}

/// What a partition scenario measured, per group.
struct Outcome {
    z_client: Client,
    produced: usize,
    /// Records processed more than once, in all.
    duplicates: usize,
    /// Of them, those Z processed in its zombie time (after its last successful commit before
    /// the cut, before it reported its partitions lost) while W processed them too.
    zombie_duplicates: usize,
    /// The span of Z's processing of those.
    window: Duration,
    cut_to_takeover: Duration,
    heal_to_lost: Duration,
    refused_commits: usize,
    /// The refused commits' errors, by kind (the error text up to its first colon).
    refusals: BTreeMap<String, usize>,
}

fn partition_scenario(nodes: u32, cut: Cut) -> Vec<Outcome> {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let broker = OwnBroker::start_proxied(nodes, 1);
    let proxy = proxy_for(&broker);
    let topic = unique("partition");
    lagless::admin::create_topic(&broker.bootstrap, &topic, PARTITIONS, 1).expect("topic");
    // offsets.topic.num.partitions=3 in tests/kafka_broker.py. Both groups on one coordinator,
    // so that one cut isolates both Z's from it.
    let offsets_at = offsets_partition(&format!("{topic}-lagless"), 3);
    let names = [
        (Client::Lagless, format!("{topic}-lagless")),
        (
            Client::Java,
            group_in(&format!("{topic}-java"), offsets_at, 3),
        ),
    ];

    let stop_producer = Arc::new(AtomicBool::new(false));
    let stop_members = Arc::new(AtomicBool::new(false));
    let producer = run_producer(
        broker.bootstrap.clone(),
        topic.clone(),
        stop_producer.clone(),
    );
    let mut groups = Vec::new();
    let mut threads = Vec::new();
    let mut java = Vec::new();
    for (z_client, name) in names {
        let (bootstrap, group) = (broker.bootstrap.clone(), name.clone());
        let (w, w_thread) = run_member(
            move || member(&bootstrap, &group, "W"),
            topic.clone(),
            "W",
            REQUEST_TIMEOUT,
            stop_members.clone(),
        );
        threads.push(w_thread);
        let z = match z_client {
            Client::Lagless => {
                let (bootstrap, group) = (proxy.bootstrap(), name.clone());
                let (z, z_thread) = run_member(
                    move || member(&bootstrap, &group, "Z"),
                    topic.clone(),
                    "Z",
                    REQUEST_TIMEOUT,
                    stop_members.clone(),
                );
                threads.push(z_thread);
                z
            }
            Client::Java => {
                let settings = [
                    &configs::group_member_settings(&name)[..],
                    &SETTINGS,
                    &[("client.id", "Z-java")],
                ]
                .concat();
                let (z, client) =
                    start_java_member(&proxy.bootstrap(), &name, &topic, "Z-java", &settings);
                java.push(client);
                z
            }
        };
        groups.push(Group {
            z_client,
            name,
            z,
            w,
            z_before: BTreeSet::new(),
        });
    }
    let half = PARTITIONS as usize / 2;
    wait_until(
        "in each group, Z and W share the partitions, Z processing and committing",
        Duration::from_secs(90),
        || {
            groups.iter().all(|g| {
                let (z, w) = (g.z.lock().unwrap(), g.w.lock().unwrap());
                z.assignment.len() == half
                    && w.assignment.len() == half
                    && z.commits.iter().any(|c| c.result.is_ok())
            })
        },
    );
    let coordinator = broker.leader_of("__consumer_offsets", offsets_at);
    let mut w_before = Vec::new();
    for g in &mut groups {
        let owned = |log: &Shared| -> BTreeSet<i32> {
            log.lock()
                .unwrap()
                .assignment
                .iter()
                .map(|tp| tp.partition)
                .collect()
        };
        g.z_before = owned(&g.z);
        w_before.push(owned(&g.w));
        let reachable: Vec<i32> = g
            .z_before
            .iter()
            .copied()
            .filter(|p| broker.leader_of(&topic, *p) != coordinator)
            .collect();
        eprintln!(
            "{cut:?}, {:?} Z: coordinator node {coordinator}, Z owns {:?}, led elsewhere {reachable:?}",
            g.z_client, g.z_before
        );
    }

    let cut_at = Instant::now();
    match cut {
        Cut::CoordinatorOnly => proxy.set(coordinator as usize - 1, Mode::Blackhole),
        Cut::Everything => proxy.set_all(Mode::Blackhole),
    }
    wait_until(
        "W owns every partition in each group",
        Duration::from_secs(30),
        || {
            groups
                .iter()
                .all(|g| g.w.lock().unwrap().assignment.len() == PARTITIONS as usize)
        },
    );
    let takeovers: Vec<Instant> = groups
        .iter()
        .zip(&w_before)
        .map(|(g, before)| {
            full_at(&g.w.lock().unwrap(), before, cut_at).expect("W's callbacks show the takeover")
        })
        .collect();
    // The cut lasts well beyond the session timeout, and beyond the takeovers.
    let last_takeover = *takeovers.iter().max().unwrap();
    let cut_for =
        (SESSION + Duration::from_secs(4)).max(last_takeover - cut_at + Duration::from_secs(2));
    if matches!(cut, Cut::CoordinatorOnly) {
        // Each Z keeps fetching from the leaders it still reaches (at least one of its three
        // partitions: a node leads two of six).
        let before: Vec<usize> = groups
            .iter()
            .map(|g| g.z.lock().unwrap().processed.len())
            .collect();
        wait_until("each Z processing during the cut", cut_for, || {
            groups
                .iter()
                .zip(&before)
                .all(|(g, n)| g.z.lock().unwrap().processed.len() > *n)
        });
    }
    wait_until(
        "the end of the cut",
        cut_for + Duration::from_secs(1),
        || cut_at.elapsed() >= cut_for,
    );
    proxy.set_all(Mode::Pass);
    let healed_at = Instant::now();
    let lost_at = |z: &Log| {
        z.events
            .iter()
            .find(|(t, e)| *t >= cut_at && matches!(e, Event::Lost(p) if !p.is_empty()))
            .map(|(t, _)| *t)
    };
    wait_until(
        "each Z reports its partitions lost and rejoins",
        Duration::from_secs(30),
        || {
            groups.iter().all(|g| {
                let z = g.z.lock().unwrap();
                lost_at(&z).is_some() && !z.assignment.is_empty()
            })
        },
    );
    stop_producer.store(true, Ordering::SeqCst);
    let produced = producer.join().expect("producer");
    // What Z processed as a zombie (from the cut until it reported its partitions lost) does not
    // count: its commits were refused, so a record only it took there would be lost to the group.
    wait_until(
        "every produced record processed in each group, the zombie's work left out",
        Duration::from_secs(30),
        || {
            groups.iter().all(|g| {
                let (z, w) = (g.z.lock().unwrap(), g.w.lock().unwrap());
                let zombie = cut_at..lost_at(&z).expect("waited for above");
                let seen: BTreeSet<(i32, i64)> = z
                    .processed
                    .iter()
                    .filter(|(_, _, t)| !zombie.contains(t))
                    .chain(&w.processed)
                    .map(|(p, o, _)| (*p, *o))
                    .collect();
                produced.is_subset(&seen)
            })
        },
    );
    stop_members.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().expect("a lagless member");
    }
    for mut j in java {
        j.stop(Duration::from_secs(15));
    }
    // Nothing lost (checked above by waiting), and the producer wrote throughout.
    assert!(
        produced.len() > 1000,
        "only {} records produced",
        produced.len()
    );
    groups
        .iter()
        .zip(takeovers)
        .map(|(g, takeover_at)| {
            let (z, w) = (g.z.lock().unwrap(), g.w.lock().unwrap());
            let lost_at = lost_at(&z).unwrap();
            eprintln!("{:?} Z (group {}):", g.z_client, g.name);
            let mut o = check_group(g.z_client, &z, &w, &g.z_before, cut_at, lost_at);
            o.produced = produced.len();
            o.cut_to_takeover = takeover_at - cut_at;
            o.heal_to_lost = lost_at.saturating_duration_since(healed_at);
            o
        })
        .collect()
}

/// The properties every group must have, checked on what Z and W did (see the module's
/// header); returns what was measured.
fn check_group(
    client: Client,
    z: &Log,
    w: &Log,
    z_before: &BTreeSet<i32>,
    cut_at: Instant,
    lost_at: Instant,
) -> Outcome {
    // No commit of Z succeeded from the cut until Z reported its partitions lost, and it tried.
    let zombie: Vec<&Commit> = z
        .commits
        .iter()
        .filter(|c| c.started >= cut_at && c.ended <= lost_at)
        .collect();
    assert!(!zombie.is_empty(), "Z made no commit during the cut");
    // Each commit returned within its deadline (REQUEST_TIMEOUT: lagless' commit_sync timeout,
    // the Java client's default.api.timeout.ms). Checked for lagless; the Java client's longest
    // is printed.
    let longest = z.commits.iter().map(|c| c.ended - c.started).max().unwrap();
    eprintln!("  Z's longest commit: {} ms", longest.as_millis());
    if client == Client::Lagless {
        assert!(
            longest <= REQUEST_TIMEOUT + MARGIN,
            "a commit of Z took {longest:?}, its timeout {REQUEST_TIMEOUT:?}"
        );
    }
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for c in &zombie {
        eprintln!(
            "  Z commit {:?} at +{} ms: {:?}",
            c.offsets,
            (c.started - cut_at).as_millis(),
            c.result
        );
        match &c.result {
            Ok(()) => panic!(
                "Z's commit {:?}, {} ms after the cut, was reported a success",
                c.offsets,
                (c.started - cut_at).as_millis()
            ),
            Err(e) => {
                let kind: String = e.split(':').next().unwrap_or(e).chars().take(60).collect();
                *refusals.entry(kind).or_default() += 1;
            }
        }
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
    assert_eq!(&lost, z_before, "Z lost other partitions than it owned");
    assert!(
        !z_after
            .iter()
            .take_while(|e| !matches!(e, Event::Lost(_)))
            .any(|e| matches!(e, Event::Revoked(p) if !p.is_empty())),
        "Z revoked partitions before it reported them lost: {z_after:?}"
    );

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
    for p in z_before {
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
    for (name, log) in [("Z", z), ("W", w)] {
        for (p, o, t) in &log.processed {
            by_record.entry((*p, *o)).or_default().push((name, *t));
        }
    }
    let mut duplicates = 0;
    let mut zombie_duplicates = 0;
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
        if !zombie.is_empty() && seen.iter().any(|(who, _)| *who == "W") {
            zombie_duplicates += 1;
            zombie_times.extend(zombie);
        }
        // Outside the zombie's time a record comes twice only as at-least-once allows: its first
        // processor had not committed past it (its commit failed in a rebalance, say Z's rejoin
        // after the cut) when the second took it.
        let (who, _) = seen[0];
        let (again, t2) = seen[1];
        let log = if who == "Z" { z } else { w };
        let covered = log.commits.iter().any(|c| {
            c.result.is_ok() && c.ended < t2 && c.offsets.iter().any(|(q, c)| *q == p && *c > o)
        });
        assert!(
            !covered || in_zombie_time(again, t2),
            "record {p}/{o}, committed by {who}, was processed again by {again} ({seen:?})"
        );
    }
    // When Z processed them (ms from the cut, by poll): how the window comes about.
    let mut by_poll: BTreeMap<i128, usize> = BTreeMap::new();
    for t in &zombie_times {
        let ms = t.saturating_duration_since(cut_at).as_millis() as i128
            - cut_at.saturating_duration_since(*t).as_millis() as i128;
        *by_poll.entry(ms).or_default() += 1;
    }
    eprintln!("  Z processed W's records as a zombie at (ms from the cut: records) {by_poll:?}");
    let window = match (zombie_times.iter().min(), zombie_times.iter().max()) {
        (Some(f), Some(l)) => *l - *f,
        _ => Duration::ZERO,
    };
    Outcome {
        z_client: client,
        produced: 0,
        duplicates,
        zombie_duplicates,
        window,
        cut_to_takeover: Duration::ZERO,
        heal_to_lost: Duration::ZERO,
        refused_commits: zombie.len(),
        refusals,
    }
}

/// Prints both groups' measures, and checks that lagless' zombie is not worse than the Java
/// client's beyond the noise of the scenario.
fn compare(what: &str, outcomes: &[Outcome]) {
    for o in outcomes {
        eprintln!(
            "{what}, {:?} Z: {} records produced; W took over {:.2} s after the cut; Z reported \
             its partitions lost {:.2} s after the cut ended; {} commits of Z refused ({:?}); \
             {} records processed twice, {} of them by Z as a zombie, within {:.2} s",
            o.z_client,
            o.produced,
            o.cut_to_takeover.as_secs_f64(),
            o.heal_to_lost.as_secs_f64(),
            o.refused_commits,
            o.refusals,
            o.duplicates,
            o.zombie_duplicates,
            o.window.as_secs_f64()
        );
    }
    let of = |c: Client| outcomes.iter().find(|o| o.z_client == c).unwrap();
    let (lagless, java) = (of(Client::Lagless), of(Client::Java));
    // A zombie processes in bursts one commit timeout apart (each of its commits blocks that
    // long during the cut), and where the cut falls in that cycle decides whether a burst comes
    // right after it: windows that differ by up to one cycle are the same behaviour.
    let noise = REQUEST_TIMEOUT + MARGIN;
    assert!(
        lagless.window <= java.window + noise,
        "{what}: lagless' zombie processed records W also processed over {:?}, the Java \
         client's over {:?}",
        lagless.window,
        java.window
    );
    // Both learn of the fencing from the coordinator once the cut ends, at their next heartbeat
    // or commit, after a reconnect backoff (reconnect.backoff.max.ms 1 s, heartbeat 0.5 s).
    let noise = Duration::from_millis(1500) + MARGIN;
    assert!(
        lagless.heal_to_lost <= java.heal_to_lost + noise,
        "{what}: lagless reported its partitions lost {:?} after the cut ended, the Java client \
         {:?}",
        lagless.heal_to_lost,
        java.heal_to_lost
    );
    // (The record counts are printed, not compared: they follow the production rate and how
    // much one poll returns after a blocked commit, see the README.)
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
    compare("cut from the coordinator only", &o);
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_member_cut_off_entirely_is_fenced_and_loses_its_partitions() {
    let o = partition_scenario(1, Cut::Everything);
    compare("cut from every broker", &o);
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
    let p = configs::producer(&[("bootstrap.servers", broker.bootstrap.as_str())]);
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
    let observer = configs::consumer(&[
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", &group),
    ]);
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

/// KIP-848, a static member whose heartbeat answers are lost (apache/kafka #23542: the Java
/// client's retry after a lost answer could have the member fenced by its own instance id as
/// UNRELEASED_INSTANCE_ID). Through the proxy, every answer is thrown away for 2 s (4 heartbeat
/// intervals, a third of the session): the member sends on, its requests time out, and once
/// answers come again it carries on in the group with its partitions: no error from `poll()`,
/// its epoch kept or moved on (not reset by a new join), and every record produced afterwards
/// read.
#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_static_member_whose_heartbeat_answers_are_lost_is_not_fenced_by_its_retry() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let broker = OwnBroker::start_proxied(1, 1);
    let proxy = proxy_for(&broker);
    let topic = unique("static-lost-answers");
    lagless::admin::create_topic(&broker.bootstrap, &topic, 2, 1).expect("topic");
    let group = format!("{topic}-group");
    let z = configs::consumer(&[
        ("bootstrap.servers", proxy.bootstrap().as_str()),
        ("group.id", group.as_str()),
        ("group.protocol", "consumer"),
        ("group.instance.id", "static-z"),
        ("client.id", "Z"),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("request.timeout.ms", "1000"),
        ("default.api.timeout.ms", "3000"),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "500"),
    ]);
    z.subscribe(&[&topic], None).unwrap();
    wait_until("Z owns both partitions", Duration::from_secs(60), || {
        z.poll(Duration::from_millis(100)).unwrap();
        z.assignment().len() == 2
    });
    let before = z.group_metadata().expect("a member");
    let (asked_before, _) = proxy.forwarded(0);
    proxy.set_all(Mode::LoseAnswers);
    let cut = Instant::now();
    while cut.elapsed() < Duration::from_secs(2) {
        // poll() returns no error while the answers are lost (records need no answer here:
        // nothing is produced yet).
        z.poll(Duration::from_millis(100))
            .expect("poll while heartbeat answers are lost");
    }
    // The member went on sending (heartbeats, fetches) whose answers were thrown away.
    let (asked_during, _) = proxy.forwarded(0);
    assert!(
        asked_during > asked_before,
        "nothing was sent during the cut"
    );
    proxy.set_all(Mode::Pass);
    let p = configs::producer(&[("bootstrap.servers", broker.bootstrap.as_str())]);
    for i in 0..40 {
        p.send(ProducerRecord::new(&topic, format!("{i}")).with_partition(i % 2))
            .unwrap();
    }
    p.close(Duration::from_secs(10)).unwrap();
    let mut read = BTreeSet::new();
    wait_until(
        "Z reads the 40 records after the cut",
        Duration::from_secs(30),
        || {
            for r in z
                .poll(Duration::from_millis(100))
                .expect("poll after the answers came back")
            {
                read.insert((r.partition, r.offset));
            }
            read.len() == 40
        },
    );
    let after = z.group_metadata().expect("still a member");
    eprintln!(
        "static member: {} request bytes sent into the cut; epoch {} before the lost answers, \
         {} after; member id kept: {}",
        asked_during - asked_before,
        before.generation_id,
        after.generation_id,
        before.member_id == after.member_id
    );
    assert_eq!(z.assignment().len(), 2, "Z still owns both partitions");
    assert!(
        after.generation_id >= before.generation_id,
        "the epoch went back: {} -> {}",
        before.generation_id,
        after.generation_id
    );
    z.close(Some(Duration::from_secs(5))).unwrap();
}

//! Learner assignments (`partition.assignment.strategy=learner-sticky`) against a real broker:
//! a member that joins a busy group first learns the partitions it will own and warms up
//! (`on_partitions_learning`) while their owners keep consuming them; only once it is ready do
//! they move. Every record is counted.
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::{Consumer, ProducerRecord, RebalanceListener, TopicPartition};
use support::*;

const PARTITIONS: i32 = 4;
/// How long the joining member's warm-up takes.
const WARM_UP: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
enum Event {
    Record {
        member: &'static str,
        partition: i32,
        offset: i64,
        at: Instant,
    },
    LearningStarted(Vec<i32>, Instant),
    LearningDone(Instant),
    Assigned(&'static str, Vec<i32>, Instant),
    Revoked(&'static str, Vec<i32>, Instant),
}

type Log = Arc<Mutex<Vec<Event>>>;

struct Listener {
    member: &'static str,
    log: Log,
    warm_up: Duration,
}

impl RebalanceListener for Listener {
    fn on_partitions_assigned(
        &mut self,
        _c: &Consumer,
        tps: &[TopicPartition],
    ) -> lagless::Result<()> {
        let ps = tps.iter().map(|tp| tp.partition).collect();
        self.log
            .lock()
            .unwrap()
            .push(Event::Assigned(self.member, ps, Instant::now()));
        Ok(())
    }
    fn on_partitions_revoked(
        &mut self,
        c: &Consumer,
        tps: &[TopicPartition],
    ) -> lagless::Result<()> {
        // Members that close at the same moment rebalance under each other: a commit that
        // meets a rebalance fails and its records are delivered again (never lost), which the
        // count below allows for.
        match c.commit_sync(None, None) {
            Ok(_) | Err(lagless::Error::CommitFailed(_)) => {}
            Err(e) => return Err(e),
        }
        let ps = tps.iter().map(|tp| tp.partition).collect();
        self.log
            .lock()
            .unwrap()
            .push(Event::Revoked(self.member, ps, Instant::now()));
        Ok(())
    }
    fn on_partitions_learning(
        &mut self,
        _c: &Consumer,
        tps: &[TopicPartition],
    ) -> lagless::Result<()> {
        let ps = tps.iter().map(|tp| tp.partition).collect();
        self.log
            .lock()
            .unwrap()
            .push(Event::LearningStarted(ps, Instant::now()));
        // Loading state, filling caches: the owners keep consuming meanwhile.
        std::thread::sleep(self.warm_up);
        self.log
            .lock()
            .unwrap()
            .push(Event::LearningDone(Instant::now()));
        Ok(())
    }
}

fn member(
    bs: &str,
    group: &str,
    topic: &str,
    name: &'static str,
    log: &Log,
    warm_up: Duration,
) -> Consumer {
    let c = consumer(
        bs,
        &[
            ("group.id", group),
            (
                "partition.assignment.strategy",
                "learner-sticky,cooperative-sticky",
            ),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "300"),
            ("max.poll.interval.ms", "30000"),
        ],
    );
    let listener = Listener {
        member: name,
        log: log.clone(),
        warm_up,
    };
    c.subscribe(&[topic], Some(Box::new(listener))).unwrap();
    c
}

/// Polls until `stop`, logging every record and committing after every poll.
fn run_member(c: Consumer, name: &'static str, log: Log, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let records = c.poll(Duration::from_millis(50)).unwrap();
        let now = Instant::now();
        {
            let mut l = log.lock().unwrap();
            for r in &records {
                l.push(Event::Record {
                    member: name,
                    partition: r.partition,
                    offset: r.offset,
                    at: now,
                });
            }
        }
        if !records.is_empty() {
            // A commit during a rebalance fails (and is retried after it, or made in
            // on_partitions_revoked): re-delivery, never loss.
            let _ = c.commit_sync(None, None);
        }
    }
    c.close(None).unwrap();
}

#[test]
fn a_joining_member_warms_up_while_the_owners_keep_consuming() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "learners", PARTITIONS);
    let group = unique_name("learners");
    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));

    // A steady producer: a record on every partition every 10 ms.
    let producing = Arc::new(AtomicBool::new(true));
    let produced = {
        let (bs, topic, producing) = (bs.clone(), topic.clone(), producing.clone());
        std::thread::spawn(move || {
            let p = producer(&bs, &[("linger.ms", "0")]);
            let mut n = 0i64;
            while producing.load(Ordering::Relaxed) {
                for part in 0..PARTITIONS {
                    p.send(ProducerRecord::new(&topic, "x").with_partition(part))
                        .unwrap();
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            p.flush(Duration::from_secs(30)).unwrap();
            n
        })
    };

    let a = member(&bs, &group, &topic, "a", &log, Duration::ZERO);
    let b = member(&bs, &group, &topic, "b", &log, Duration::ZERO);
    let (la, lb, sa, sb) = (log.clone(), log.clone(), stop.clone(), stop.clone());
    let ta = std::thread::spawn(move || run_member(a, "a", la, sa));
    let tb = std::thread::spawn(move || run_member(b, "b", lb, sb));

    // Both owners consuming everything.
    let owners = |log: &Log| {
        let mut owned: BTreeMap<&'static str, BTreeSet<i32>> = BTreeMap::new();
        for e in log.lock().unwrap().iter() {
            match e {
                Event::Assigned(m, ps, _) => owned.entry(m).or_default().extend(ps),
                Event::Revoked(m, ps, _) => {
                    let o = owned.entry(m).or_default();
                    for p in ps {
                        o.remove(p);
                    }
                }
                _ => {}
            }
        }
        owned
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while owners(&log).values().map(|s| s.len()).collect::<Vec<_>>() != vec![2, 2] {
        assert!(
            Instant::now() < deadline,
            "a and b never split the partitions: {:?}",
            owners(&log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // c joins and warms up for WARM_UP.
    let c = member(&bs, &group, &topic, "c", &log, WARM_UP);
    let (lc, sc) = (log.clone(), stop.clone());
    let tc = std::thread::spawn(move || run_member(c, "c", lc, sc));
    let deadline = Instant::now() + Duration::from_secs(60);
    while owners(&log).get("c").is_none_or(|s| s.is_empty()) {
        assert!(
            Instant::now() < deadline,
            "c never got a partition: {:?}",
            owners(&log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1)); // c consumes a little
    producing.store(false, Ordering::Relaxed);
    let rounds = produced.join().unwrap();
    std::thread::sleep(Duration::from_secs(2)); // the tail is read
    stop.store(true, Ordering::Relaxed);
    for t in [ta, tb, tc] {
        t.join().unwrap();
    }

    let events = log.lock().unwrap().clone();
    let (learned, started) = events
        .iter()
        .find_map(|e| match e {
            Event::LearningStarted(ps, at) => Some((ps.clone(), *at)),
            _ => None,
        })
        .expect("c never learned anything");
    let ready = events
        .iter()
        .find_map(|e| match e {
            Event::LearningDone(at) => Some(*at),
            _ => None,
        })
        .unwrap();
    // Balance says one partition of four moves to the third member; the checks below hold for
    // whatever set it learns.
    assert!(!learned.is_empty());
    // c got exactly what it learned, and only after it was ready.
    let (c_got, c_assigned_at) = events
        .iter()
        .find_map(|e| match e {
            Event::Assigned("c", ps, at) if !ps.is_empty() => Some((ps.clone(), *at)),
            _ => None,
        })
        .unwrap();
    assert_eq!(c_got, learned);
    assert!(
        c_assigned_at > ready,
        "c owned partitions {learned:?} before it was ready"
    );
    for &p in &learned {
        // The owner kept consuming p through the whole warm-up: it delivered records of p after c
        // started learning and after c was ready (it gives p up only in the rebalance that follows).
        let owner_records: Vec<Instant> = events
            .iter()
            .filter_map(|e| match e {
                Event::Record {
                    member,
                    partition,
                    at,
                    ..
                } if *member != "c" && *partition == p => Some(*at),
                _ => None,
            })
            .collect();
        assert!(owner_records.iter().any(|at| *at > started && *at < ready));
        assert!(
            owner_records.iter().any(|at| *at >= ready),
            "the owner stopped consuming partition {p} before c was ready"
        );
        let revoked_at = events
            .iter()
            .find_map(|e| match e {
                Event::Revoked(m, ps, at) if *m != "c" && ps.contains(&p) => Some(*at),
                _ => None,
            })
            .expect("the owner never gave the partition up");
        assert!(
            revoked_at > ready,
            "partition {p} was revoked before c was ready"
        );
    }
    // Nothing lost: every produced offset of every partition was delivered.
    let mut seen: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for e in &events {
        if let Event::Record {
            partition, offset, ..
        } = e
        {
            seen.entry(*partition).or_default().insert(*offset);
        }
    }
    for part in 0..PARTITIONS {
        let got = seen.get(&part).cloned().unwrap_or_default();
        let want: BTreeSet<i64> = (0..rounds).collect();
        let missing: Vec<&i64> = want.difference(&got).take(5).collect();
        assert!(
            missing.is_empty(),
            "partition {part}: missing offsets {missing:?}"
        );
    }
}

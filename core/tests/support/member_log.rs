//! A group member's loop (poll, process, commit synchronously) recorded with the time of each
//! step: what it processed, its commits and their results, its rebalance listener's calls. The
//! member is lagless on a thread of the test, or the Java consumer in a process of its own
//! (support/java_client.rs) whose JSON lines are read into the same record, so that a scenario
//! checks both clients with one code.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lagless::{Consumer, OffsetAndMetadata, RebalanceListener, TopicPartition};
use serde_json::Value;

use super::java_client::{self, JavaClient};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

pub struct Commit {
    pub started: Instant,
    pub ended: Instant,
    /// (partition, offset) committed.
    pub offsets: Vec<(i32, i64)>,
    pub result: Result<(), String>,
}

/// What one member did, with when.
#[derive(Default)]
pub struct Log {
    /// (partition, offset, when the poll that returned it ended) of every record.
    pub processed: Vec<(i32, i64, Instant)>,
    pub commits: Vec<Commit>,
    /// The rebalance listener's calls.
    pub events: Vec<(Instant, Event)>,
    /// What it owns now.
    pub assignment: Vec<TopicPartition>,
}

pub type Shared = Arc<Mutex<Log>>;

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

/// A lagless member's loop on a thread of its own, with the consumer `make` returns: subscribe
/// to `topic`, poll, process (log), commit the batch's offsets synchronously (waiting up to
/// `commit_timeout`); with nothing new for a second, commit the positions of its partitions
/// again (so that a member that reads nothing still tries to commit). Until `stop`.
pub fn run_member(
    make: impl FnOnce() -> Consumer + Send + 'static,
    topic: String,
    name: &'static str,
    commit_timeout: Duration,
    stop: Arc<AtomicBool>,
) -> (Shared, JoinHandle<()>) {
    let log: Shared = Arc::default();
    let l = log.clone();
    let handle = std::thread::spawn(move || {
        let c = make();
        c.subscribe(&[&topic], Some(Box::new(Listener(l.clone()))))
            .unwrap();
        let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
        let mut last_commit = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            let events_before = l.lock().unwrap().events.len();
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
                // A partition given up in this poll (revoked or lost) is no longer this
                // member's: what it processed of it before says nothing once it comes back,
                // when it resumes at the group's committed offset. Committing that old position
                // would move the group's offset back below what the partition's owner meanwhile
                // committed (an application bug, which lagless, as the Java client, carries
                // out as told), and the records in between would be processed again.
                for (_, e) in &log.events[events_before..] {
                    if let Event::Revoked(p) | Event::Lost(p) = e {
                        for tp in p {
                            positions.remove(&tp.partition);
                        }
                    }
                }
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
                .map(|(p, o)| {
                    let om = OffsetAndMetadata {
                        offset: *o,
                        metadata: String::new(),
                    };
                    (TopicPartition::new(&topic, *p), om)
                })
                .collect();
            let started = Instant::now();
            let result = c
                .commit_sync(Some(&list), Some(commit_timeout))
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

/// The Java consumer as a member of `group`: InteropClient with `settings` (its --config),
/// offering `cooperative-sticky,range` (lagless' default), committing after every poll as
/// [`run_member`] does, its commits waiting up to `default.api.timeout.ms`. Its lines go into the
/// same kind of log as a lagless member's.
pub fn start_java_member(
    bootstrap: &str,
    group: &str,
    topic: &str,
    name: &str,
    settings: &[(&str, &str)],
) -> (Shared, JavaClient) {
    let log: Shared = Arc::default();
    let l = log.clone();
    let settings: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec![
        "consume",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--strategy",
        "cooperative-sticky,range",
        "--commit",
        "--commit-idle-ms",
        "1000",
        "--trace",
    ];
    for s in &settings {
        args.extend(["--config", s.as_str()]);
    }
    let client = JavaClient::start(name, &args, &[], Box::new(move |v| java_line(&l, v)));
    (log, client)
}

/// One line of the Java member into its log: records, commits and listener events, each at the
/// time the client printed with it.
fn java_line(log: &Shared, v: &Value) {
    let at = |key: &str| java_client::instant_of(v[key].as_i64().expect(key));
    let pairs = |key: &str| -> Vec<(i32, i64)> {
        v[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|po| (po[0].as_i64().unwrap() as i32, po[1].as_i64().unwrap()))
            .collect()
    };
    let partitions = |key: &str| -> Vec<TopicPartition> {
        v[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|tp| TopicPartition::new(tp[0].as_str().unwrap(), tp[1].as_i64().unwrap() as i32))
            .collect()
    };
    let mut log = log.lock().unwrap();
    match v["event"].as_str() {
        None => {
            if let (Some(p), Some(o)) = (v["partition"].as_i64(), v["offset"].as_i64()) {
                log.processed.push((p as i32, o, at("ts_us")));
            }
        }
        Some("commit") => log.commits.push(Commit {
            started: at("start_us"),
            ended: at("end_us"),
            offsets: pairs("offsets"),
            result: match v["error"].as_str() {
                None => Ok(()),
                Some(e) => Err(e.to_string()),
            },
        }),
        Some(kind @ ("assigned" | "revoked" | "lost")) => {
            let p = partitions("partitions");
            let e = match kind {
                "assigned" => Event::Assigned(p),
                "revoked" => Event::Revoked(p),
                _ => Event::Lost(p),
            };
            log.assignment = partitions("assignment");
            log.events.push((at("ts_us"), e));
        }
        _ => eprintln!("Java Z: {v}"),
    }
}

//! Asynchronous commits at a high rate, against a real broker (`LAGLESS_BOOTSTRAP`): a member
//! commits after every `poll()` while a producer keeps writing, and a separate consumer of the
//! same group reads the committed offsets from outside the whole time. They must never go
//! backwards, must reach the log end, the member must keep its session, and every commit's
//! callback must get a result.
mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::{Consumer, ProducerRecord, RebalanceListener, TopicPartition};
use support::{bootstrap, consumer, new_topic, producer, unique_name};

const PARTITIONS: i32 = 2;
const RECORDS: usize = 20_000;

/// Counts `on_partitions_lost`.
struct LostCounter(Arc<AtomicUsize>);

impl RebalanceListener for LostCounter {
    fn on_partitions_lost(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// What the outside reader saw of the group's committed offsets.
#[derive(Default, Debug)]
struct Seen {
    latest: BTreeMap<i32, i64>,
    backwards: usize,
    largest_drop: i64,
    /// (partition, from, to) of the first backward steps.
    examples: Vec<(i32, i64, i64)>,
    samples: usize,
    /// The reader's failed OffsetFetches, and the last error.
    errors: usize,
    last_error: Option<String>,
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn async_commit_after_every_poll_never_moves_the_committed_offset_backwards() {
    let b = bootstrap();
    let topic = new_topic(&b, "async-commits", PARTITIONS);
    let group = unique_name("async-commits");
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();

    // The producer writes all the time the member consumes (about 2,000 records/s).
    let produced = {
        let b = b.clone();
        let topic = topic.clone();
        std::thread::spawn(move || {
            let p = producer(&b, &[("linger.ms", "5")]);
            for i in 0..RECORDS {
                p.send(
                    ProducerRecord::new(&topic, format!("v{i}"))
                        .with_partition((i % PARTITIONS as usize) as i32),
                )
                .unwrap();
                if i % 200 == 199 {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            p.flush(Duration::from_secs(60)).unwrap();
        })
    };

    // The outside reader: its own consumer of the group (never subscribed), sampling the
    // committed offsets with OffsetFetch.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let reader = {
        let (b, group, tps) = (b.clone(), group.clone(), tps.clone());
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let r = consumer(&b, &[("group.id", group.as_str())]);
            while !stop.load(Ordering::SeqCst) {
                let answer = r.committed(&tps, Some(Duration::from_secs(5)));
                let mut s = seen.lock().unwrap();
                match answer {
                    Err(e) => {
                        s.errors += 1;
                        s.last_error = Some(e.to_string());
                    }
                    Ok(now) => {
                        s.samples += 1;
                        for (tp, c) in now {
                            let Some(c) = c else { continue };
                            let before = s.latest.insert(tp.partition, c.offset);
                            if let Some(before) = before.filter(|&o| c.offset < o) {
                                s.backwards += 1;
                                s.largest_drop = s.largest_drop.max(before - c.offset);
                                if s.examples.len() < 5 {
                                    s.examples.push((tp.partition, before, c.offset));
                                }
                            }
                        }
                    }
                }
                drop(s);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let lost = Arc::new(AtomicUsize::new(0));
    let c = consumer(
        &b,
        &[
            ("group.id", group.as_str()),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
            ("max.poll.records", "5"),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
        ],
    );
    c.subscribe(&[&topic], Some(Box::new(LostCounter(lost.clone()))))
        .unwrap();

    let calls = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let mut consumed = 0usize;
    let commit = |c: &Consumer| {
        calls.fetch_add(1, Ordering::SeqCst);
        let (results, failures) = (results.clone(), failures.clone());
        c.commit_async(
            None,
            Some(Box::new(move |r| {
                results.fetch_add(1, Ordering::SeqCst);
                if let Err(e) = r {
                    let mut f = failures.lock().unwrap();
                    if f.len() < 1000 {
                        f.push(e.to_string());
                    }
                }
            })),
        )
        .unwrap();
    };
    let started = Instant::now();
    let deadline = started + Duration::from_secs(180);
    while consumed < RECORDS {
        assert!(
            Instant::now() < deadline,
            "consumed {consumed} of {RECORDS} records in 180 s"
        );
        for r in c.poll(Duration::from_millis(50)).unwrap() {
            let n = next.entry(r.partition).or_insert(0);
            assert_eq!(
                r.offset, *n,
                "partition {} skipped or repeated",
                r.partition
            );
            *n += 1;
            consumed += 1;
        }
        commit(&c);
    }
    let rate = calls.load(Ordering::SeqCst) as f64 / started.elapsed().as_secs_f64();
    produced.join().unwrap();
    let ends: BTreeMap<i32, i64> = c
        .end_offsets(&tps, None)
        .unwrap()
        .into_iter()
        .map(|(tp, o)| (tp.partition, o))
        .collect();
    assert_eq!(ends.values().sum::<i64>(), RECORDS as i64);
    assert_eq!(next, ends, "every record was delivered once");
    // One more commit of the final positions, then wait for every callback and for the reader
    // to see the log end.
    commit(&c);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        c.poll(Duration::from_millis(50)).unwrap();
        let done = results.load(Ordering::SeqCst) == calls.load(Ordering::SeqCst);
        let reader_sees = format!("{:?}", seen.lock().unwrap());
        let at_end = seen.lock().unwrap().latest == ends;
        if done && at_end {
            break;
        }
        assert!(
            Instant::now() < until,
            "60 s after the last poll: {} of {} callbacks ran, {} failed (e.g. {:?}); the log end is {ends:?}; the reader: {reader_sees}",
            results.load(Ordering::SeqCst),
            calls.load(Ordering::SeqCst),
            failures.lock().unwrap().len(),
            failures.lock().unwrap().last().cloned(),
        );
    }
    stop.store(true, Ordering::SeqCst);
    reader.join().unwrap();
    c.close(None).unwrap();

    let seen = seen.lock().unwrap();
    let failures = failures.lock().unwrap();
    eprintln!(
        "{} async commits ({rate:.0}/s), {} failed; the reader took {} samples, saw {} backward steps (largest {}: {:?})",
        calls.load(Ordering::SeqCst),
        failures.len(),
        seen.samples,
        seen.backwards,
        seen.largest_drop,
        seen.examples
    );
    assert!(
        seen.samples > 100,
        "the reader sampled only {}",
        seen.samples
    );
    assert_eq!(
        seen.backwards, 0,
        "the committed offset went backwards {} times, by up to {} records: {:?}",
        seen.backwards, seen.largest_drop, seen.examples
    );
    assert_eq!(
        lost.load(Ordering::SeqCst),
        0,
        "the member lost its partitions"
    );
    assert!(
        failures.len() * 100 <= calls.load(Ordering::SeqCst),
        "{} of {} async commits failed, e.g. {:?}",
        failures.len(),
        calls.load(Ordering::SeqCst),
        failures.iter().take(3).collect::<Vec<_>>()
    );
}

/// Commits the offset it is given in `on_partitions_revoked` (so also in the default
/// `on_partitions_lost`), as users who commit by hand do, and keeps the results.
struct CommitOnRevoke {
    offset: i64,
    results: Arc<Mutex<Vec<lagless::Result<()>>>>,
}

impl RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        let offsets: Vec<(TopicPartition, lagless::OffsetAndMetadata)> = partitions
            .iter()
            .map(|tp| {
                (
                    tp.clone(),
                    lagless::OffsetAndMetadata {
                        offset: self.offset,
                        metadata: String::new(),
                    },
                )
            })
            .collect();
        if !offsets.is_empty() {
            let r = consumer.commit_sync(Some(&offsets), Some(Duration::from_secs(10)));
            self.results.lock().unwrap().push(r);
        }
        Ok(())
    }
}

/// After `max.poll.interval.ms` the member leaves the group and the next `poll()` reports its
/// partitions lost. A commit made then (here from `on_partitions_revoked`, which the default
/// `on_partitions_lost` calls) must fail as the Java client's does: sent as generation -1 the
/// broker would take it (the group is empty) and move the offset backwards.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_member_that_lost_its_partitions_cannot_commit_them() {
    let b = bootstrap();
    let topic = new_topic(&b, "lost-commit", 1);
    let group = unique_name("lost-commit");
    let tp = TopicPartition::new(&topic, 0);
    let results = Arc::new(Mutex::new(Vec::new()));
    let c = consumer(
        &b,
        &[
            ("group.id", group.as_str()),
            ("enable.auto.commit", "false"),
            ("max.poll.interval.ms", "2000"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
        ],
    );
    c.subscribe(
        &[&topic],
        Some(Box::new(CommitOnRevoke {
            offset: 3,
            results: results.clone(),
        })),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "never assigned");
        c.poll(Duration::from_millis(50)).unwrap();
    }
    let eight = lagless::OffsetAndMetadata {
        offset: 8,
        metadata: String::new(),
    };
    c.commit_sync(Some(&[(tp.clone(), eight)]), None).unwrap();
    // Stop polling until the poll timeout makes the member leave.
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.group_metadata().is_some_and(|m| m.generation_id >= 0) {
        assert!(Instant::now() < deadline, "the member never left the group");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.poll(Duration::from_millis(50));
    // Taken out, not held: if the member has joined again by close(), close() revokes through
    // the same listener, which needs this lock.
    let results = std::mem::take(&mut *results.lock().unwrap());
    assert_eq!(results.len(), 1, "on_partitions_lost ran once: {results:?}");
    let committed = c.committed(std::slice::from_ref(&tp), None).unwrap()[0]
        .1
        .clone()
        .map(|c| c.offset);
    assert_eq!(
        committed,
        Some(8),
        "a commit after the partitions were lost moved the offset (result {:?})",
        results[0]
    );
    // Which refusal the callback sees depends on whether the member has taken in the lost
    // partitions yet when it runs; both name why the commit cannot be made.
    assert!(
        matches!(&results[0], Err(lagless::Error::CommitFailed(m))
            if m.contains("not part of an active group")
                || m.contains("poll() was not called within max.poll.interval.ms")),
        "{:?}",
        results[0]
    );
    c.close(None).unwrap();
}

/// `close()` lets the asynchronous commits in flight complete and runs their callbacks.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn close_completes_the_async_commits_in_flight_and_runs_their_callbacks() {
    let b = bootstrap();
    let topic = new_topic(&b, "close-async", 1);
    let group = unique_name("close-async");
    let c = consumer(
        &b,
        &[
            ("group.id", group.as_str()),
            ("enable.auto.commit", "false"),
        ],
    );
    c.subscribe(&[&topic], None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "never assigned");
        c.poll(Duration::from_millis(50)).unwrap();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    for offset in 0..20 {
        let ran = ran.clone();
        let offsets = vec![(
            TopicPartition::new(&topic, 0),
            lagless::OffsetAndMetadata {
                offset,
                metadata: String::new(),
            },
        )];
        c.commit_async(
            Some(offsets),
            Some(Box::new(move |r| {
                assert!(r.is_ok(), "{r:?}");
                ran.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .unwrap();
    }
    c.close(None).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 20, "callbacks run by close()");
    let reader = consumer(&b, &[("group.id", group.as_str())]);
    let tp = TopicPartition::new(&topic, 0);
    let committed = reader.committed(std::slice::from_ref(&tp), None).unwrap()[0]
        .1
        .clone()
        .map(|c| c.offset);
    assert_eq!(
        committed,
        Some(19),
        "the newest commit is the one that stays"
    );
}

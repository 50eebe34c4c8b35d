//! The async front (`lagless::aio`) and the blocking API inside a tokio runtime, against a real
//! broker (`LAGLESS_BOOTSTRAP`): group membership with commit-on-revoke, a slow handler past
//! `max.poll.interval.ms`, cancelled `recv()`s counted offset by offset, and drops in async code.
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::aio::{self, BoxFuture};
use lagless::{ProducerRecord, TopicPartition};
use support::{bootstrap, config, new_topic};

/// Produces `per_partition` records to each partition of `topic` with the async producer and
/// waits for every delivery report.
async fn produce(topic: &str, partitions: i32, per_partition: usize) {
    let p = aio::Producer::from_config(&config(&[
        ("bootstrap.servers", &bootstrap()),
        ("linger.ms", "5"),
    ]))
    .unwrap();
    let mut reports = Vec::new();
    for i in 0..per_partition {
        for part in 0..partitions {
            let r = ProducerRecord::new(topic, format!("v{i}")).with_partition(part);
            reports.push(p.send(r).unwrap());
        }
    }
    for r in reports {
        r.await.expect("delivery report");
    }
    p.close(Duration::from_secs(10)).await.unwrap();
}

fn aio_consumer(extra: &[(&str, &str)]) -> aio::Consumer {
    let b = bootstrap();
    let mut c = config(&[("bootstrap.servers", &b), ("client.id", "lagless-aio-test")]);
    for (k, v) in extra {
        c.set(k, v).unwrap();
    }
    aio::Consumer::from_config(&c).expect("async consumer")
}

type Seen = Arc<Mutex<BTreeMap<TopicPartition, Vec<i64>>>>;

fn record(seen: &Seen, r: &lagless::ConsumerRecord) {
    seen.lock()
        .unwrap()
        .entry(TopicPartition::new(r.topic.to_string(), r.partition))
        .or_default()
        .push(r.offset);
}

/// Commits the consumed positions of the revoked partitions before giving them up (auto-commit
/// is off), and notes every callback.
struct CommitOnRevoke {
    name: &'static str,
    events: Arc<Mutex<Vec<String>>>,
}

impl aio::RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked<'a>(
        &'a mut self,
        consumer: &'a aio::Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            let offsets: Vec<_> = consumer
                .consumed_offsets()
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            // An await inside the callback: the commit goes out before the partitions go.
            consumer.commit(Some(&offsets)).await?;
            self.events
                .lock()
                .unwrap()
                .push(format!("{} revoked {}", self.name, partitions.len()));
            Ok(())
        })
    }
    fn on_partitions_assigned<'a>(
        &'a mut self,
        _consumer: &'a aio::Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            self.events.lock().unwrap().push(format!(
                "{} assigned {}",
                self.name,
                partitions.len()
            ));
            Ok(())
        })
    }
    fn on_partitions_lost<'a>(
        &'a mut self,
        _consumer: &'a aio::Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            self.events
                .lock()
                .unwrap()
                .push(format!("{} lost {}", self.name, partitions.len()));
            Ok(())
        })
    }
}

/// Two async members of one group: the second joins while the first consumes; the first's
/// async listener commits on revoke, so every offset is handed out exactly once in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_hand_over_with_commit_on_revoke() {
    let topic = new_topic(&bootstrap(), "aio-group", 4);
    let per_partition = 200;
    produce(&topic, 4, per_partition).await;
    let group = support::unique_name("aio-group");
    let settings = [
        ("group.id", group.as_str()),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("max.poll.records", "10"),
    ];
    let seen: Seen = Arc::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let total = 4 * per_partition;
    let count = |seen: &Seen| seen.lock().unwrap().values().map(Vec::len).sum::<usize>();

    let a = aio_consumer(&settings);
    let listener = CommitOnRevoke {
        name: "a",
        events: events.clone(),
    };
    a.subscribe(&[&topic], Some(Box::new(listener))).unwrap();
    // The first member consumes part of the records, slowly, before the second joins.
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&seen) < total / 4 {
        assert!(Instant::now() < deadline, "the first member got no records");
        for r in a.recv_batch(10).await.unwrap() {
            record(&seen, &r);
        }
    }
    let b = Arc::new(aio_consumer(&settings));
    let listener = CommitOnRevoke {
        name: "b",
        events: events.clone(),
    };
    b.subscribe(&[&topic], Some(Box::new(listener))).unwrap();
    let b_assigned = |events: &Arc<Mutex<Vec<String>>>| {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("b assigned") && e != "b assigned 0")
    };
    // Both go on until every record came and the second member owns partitions, then a while
    // longer, so a record handed out twice (the second member reading from an offset the
    // first did not commit) would show.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b_task = {
        let (b, seen, done) = (b.clone(), seen.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                if let Ok(batch) = b.recv_batch_timeout(10, Duration::from_millis(200)).await {
                    for r in batch {
                        record(&seen, &r);
                    }
                }
            }
        })
    };
    let mut settled: Option<Instant> = None;
    while settled.is_none_or(|t| t.elapsed() < Duration::from_secs(2)) {
        assert!(
            Instant::now() < deadline,
            "not done in time: {:?}",
            events.lock().unwrap()
        );
        for r in a
            .recv_batch_timeout(10, Duration::from_millis(200))
            .await
            .unwrap()
        {
            record(&seen, &r);
        }
        // Processing takes time: the rebalance happens while this member still has records.
        tokio::time::sleep(Duration::from_millis(50)).await;
        if settled.is_none() && count(&seen) >= total && b_assigned(&events) {
            settled = Some(Instant::now());
        }
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    b_task.await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();

    let events = events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("b assigned") && e != "b assigned 0"),
        "the second member never got partitions: {events:?}"
    );
    assert!(
        events.iter().any(|e| e.starts_with("a revoked")),
        "the first member revoked nothing: {events:?}"
    );
    let seen = seen.lock().unwrap();
    for p in 0..4 {
        let mut offsets = seen
            .get(&TopicPartition::new(topic.clone(), p))
            .cloned()
            .unwrap_or_default();
        offsets.sort();
        let want: Vec<i64> = (0..per_partition as i64).collect();
        assert_eq!(
            offsets, want,
            "partition {p}: every offset once (a gap is a lost record, a repeat a double owner) \
             events: {events:?}"
        );
    }
}

/// A handler slower than `max.poll.interval.ms` (an await between two `recv()`s): the member
/// leaves the group, the next `recv()` reports its partitions lost, and it rejoins and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_past_the_poll_interval_loses_the_partitions_and_rejoins() {
    let topic = new_topic(&bootstrap(), "aio-slow", 1);
    produce(&topic, 1, 20).await;
    let group = support::unique_name("aio-slow");
    let events = Arc::new(Mutex::new(Vec::new()));
    let c = aio_consumer(&[
        ("group.id", group.as_str()),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("max.poll.interval.ms", "2000"),
        ("max.poll.records", "1"),
    ]);
    let listener = CommitOnRevoke {
        name: "c",
        events: events.clone(),
    };
    c.subscribe(&[&topic], Some(Box::new(listener))).unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), c.recv())
        .await
        .expect("a first record")
        .unwrap();
    let generation = c.group_metadata().unwrap().generation_id;
    // The slow handler.
    tokio::time::sleep(Duration::from_millis(4000)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut later = Vec::new();
    while !events.lock().unwrap().iter().any(|e| e == "c lost 1") {
        assert!(
            Instant::now() < deadline,
            "no partitions lost after the poll interval: {:?}",
            events.lock().unwrap()
        );
        if let Ok(batch) = c.recv_batch_timeout(1, Duration::from_millis(200)).await {
            later.extend(batch);
        }
    }
    // It rejoins and goes on consuming from the last commit (none: the start).
    let r = tokio::time::timeout(Duration::from_secs(60), c.recv())
        .await
        .expect("a record after rejoining")
        .unwrap();
    let events_now = events.lock().unwrap().clone();
    assert!(
        events_now.iter().filter(|e| *e == "c assigned 1").count() >= 2,
        "not assigned again: {events_now:?}"
    );
    assert!(c.group_metadata().unwrap().generation_id > generation);
    assert_eq!(first.offset, 0);
    assert!(later.is_empty() || later[0].offset == 1, "{later:?}");
    assert_eq!(r.offset, 0, "nothing was committed: it starts again from 0");
    c.close().await.unwrap();
}

/// `recv()` cancelled over and over inside `tokio::select!` while records trickle in: every
/// offset comes out once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_recv_loses_no_record() {
    let topic = new_topic(&bootstrap(), "aio-cancel", 1);
    let n = 300usize;
    let producer = {
        let topic = topic.clone();
        tokio::spawn(async move {
            for chunk in 0..30 {
                produce(&topic, 1, n / 30).await;
                if chunk % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };
    let c = aio_consumer(&[("auto.offset.reset", "earliest"), ("max.poll.records", "7")]);
    let tp = TopicPartition::new(topic.clone(), 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let mut got: Vec<i64> = Vec::new();
    let mut cancelled = 0usize;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut round = 0u64;
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} records",
            got.len()
        );
        round += 1;
        // Alternate single records, batches and the stream, each raced against a short timer.
        let timer = tokio::time::sleep(Duration::from_micros(200 + (round % 7) * 300));
        match round % 3 {
            0 => tokio::select! {
                r = c.recv() => got.push(r.unwrap().offset),
                _ = timer => cancelled += 1,
            },
            1 => tokio::select! {
                r = c.recv_batch(5) => got.extend(r.unwrap().iter().map(|r| r.offset)),
                _ = timer => cancelled += 1,
            },
            _ => {
                let mut stream = c.stream();
                tokio::select! {
                    r = poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx)) => {
                        got.push(r.unwrap().unwrap().offset)
                    }
                    _ = timer => cancelled += 1,
                }
            }
        }
    }
    producer.await.unwrap();
    let want: Vec<i64> = (0..n as i64).collect();
    assert_eq!(got, want, "every offset once, in order");
    assert!(
        cancelled > 0,
        "no recv() was ever cancelled: the test proved nothing"
    );
    eprintln!("{cancelled} cancelled recv() calls over {n} records");
}

/// Dropping an async consumer in async code: no panic, and its drop leaves the group at once
/// (a new member gets every partition well before the session timeout would have freed them).
#[tokio::test(flavor = "current_thread")]
async fn dropping_an_async_consumer_in_async_code_leaves_the_group() {
    let topic = new_topic(&bootstrap(), "aio-drop", 2);
    produce(&topic, 2, 5).await;
    let group = support::unique_name("aio-drop");
    let settings = [
        ("group.id", group.as_str()),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "45000"),
    ];
    let a = aio_consumer(&settings);
    a.subscribe(&[&topic], None).unwrap();
    tokio::time::timeout(Duration::from_secs(60), a.recv())
        .await
        .expect("a record")
        .unwrap();
    drop(a);
    let b = aio_consumer(&settings);
    b.subscribe(&[&topic], None).unwrap();
    let start = Instant::now();
    while b.assignment().len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the dropped member did not leave: the group waits for its session to expire"
        );
        let _ = b.recv_batch_timeout(10, Duration::from_millis(200)).await;
    }
    b.close().await.unwrap();
    // An async consumer needs a runtime: outside one it is a clear error, not a panic.
    let e = std::thread::spawn(|| {
        aio::Consumer::from_config(&config(&[("bootstrap.servers", "x:1")])).err()
    })
    .join()
    .unwrap()
    .expect("an error outside a runtime");
    assert!(e.to_string().contains("inside a tokio runtime"), "{e}");
}

/// The blocking API inside a runtime of either flavour: create, poll (with a group, so the
/// group steps run), commit_sync, committed, drop, and the producer and admin calls; these
/// panicked before ("Cannot start a runtime from within a runtime", "Cannot drop a runtime in
/// a context where blocking is not allowed").
async fn blocking_api_inside(flavour: &str) {
    let topic = new_topic(&bootstrap(), &format!("aio-blocking-{flavour}"), 2);
    let producer = support::producer(&bootstrap(), &[("linger.ms", "5")]);
    for i in 0..20 {
        producer
            .send(ProducerRecord::new(topic.as_str(), format!("v{i}")).with_partition(i % 2))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    drop(producer);
    let group = support::unique_name("aio-blocking");
    let c = support::consumer(
        &bootstrap(),
        &[
            ("group.id", group.as_str()),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ],
    );
    c.subscribe(&[&topic], None).unwrap();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 20 {
        assert!(
            Instant::now() < deadline,
            "only {} of 20 records",
            seen.len()
        );
        for r in c.poll(Duration::from_millis(200)).unwrap() {
            assert!(seen.insert((r.partition, r.offset)), "{r:?} twice");
        }
    }
    c.commit_sync(None, None).unwrap();
    let parts = [
        TopicPartition::new(topic.clone(), 0),
        TopicPartition::new(topic.clone(), 1),
    ];
    let committed = c.committed(&parts, None).unwrap();
    assert!(
        committed
            .iter()
            .all(|(_, om)| om.as_ref().map(|o| o.offset) == Some(10)),
        "{committed:?}"
    );
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocking_api_works_inside_a_multi_thread_runtime() {
    blocking_api_inside("multi").await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_blocking_api_works_inside_a_current_thread_runtime() {
    blocking_api_inside("current").await;
}

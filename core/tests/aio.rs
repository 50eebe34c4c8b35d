//! The async front (`lagless::aio`) against a real
//! broker (`LAGLESS_BOOTSTRAP`): group membership with commit-on-revoke, a slow handler past
//! `max.poll.interval.ms`, cancelled `recv()`s counted offset by offset, drops in async code,
//! an awaiting learner warm-up that leaves the runtime's other tasks running, and a takeover's
//! recovery stream (KIP-333) drained through `recv_batch()` and the stream.
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
            reports.push(p.send(r).await.unwrap());
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
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
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
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
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
    // It rejoins and goes on consuming from the last commit (none: the start); the records the
    // lost generation had buffered are not handed out. The recv() that reported the loss may
    // have rejoined and returned the first of them already.
    let r = match later.first() {
        Some(r) => r.clone(),
        None => tokio::time::timeout(Duration::from_secs(60), c.recv())
            .await
            .expect("a record after rejoining")
            .unwrap(),
    };
    let events_now = events.lock().unwrap().clone();
    assert!(
        events_now.iter().filter(|e| *e == "c assigned 1").count() >= 2,
        "not assigned again: {events_now:?}"
    );
    assert!(c.group_metadata().unwrap().generation_id > generation);
    assert_eq!(first.offset, 0);
    assert_eq!(r.offset, 0, "nothing was committed: it starts again from 0");
    c.close().await.unwrap();
}

/// `recv()` cancelled over and over inside `tokio::select!` while records trickle in: every
/// offset comes out once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
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
    // The metrics count what was handed out, once: the cancelled calls' records among them.
    let m = c.metrics();
    assert_eq!(m.records_consumed_total, n as u64);
    assert_eq!(m.partitions[0].records_consumed, n as u64);
    assert_eq!(m.partitions[0].position, Some(n as i64));
    assert!(
        cancelled > 0,
        "no recv() was ever cancelled: the test proved nothing"
    );
    eprintln!("{cancelled} cancelled recv() calls over {n} records");
}

/// Dropping an async consumer in async code: no panic, and its drop leaves the group at once
/// (a new member gets every partition well before the session timeout would have freed them).
#[tokio::test(flavor = "current_thread")]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
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

/// (what happened, how many partitions, when).
type LearnerEvents = Arc<Mutex<Vec<(&'static str, usize, Instant)>>>;

/// Notes when each learning warm-up began and ended, and when partitions were assigned.
struct WarmingLearner {
    events: LearnerEvents,
}

impl aio::RebalanceListener for WarmingLearner {
    fn on_partitions_learning<'a>(
        &'a mut self,
        _consumer: &'a aio::Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            let n = partitions.len();
            self.events
                .lock()
                .unwrap()
                .push(("learning", n, Instant::now()));
            // The warm-up awaits: the runtime's other tasks (the owner, the ticker) go on.
            tokio::time::sleep(Duration::from_secs(2)).await;
            self.events
                .lock()
                .unwrap()
                .push(("ready", n, Instant::now()));
            Ok(())
        })
    }
    fn on_partitions_assigned<'a>(
        &'a mut self,
        _consumer: &'a aio::Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            let n = partitions.len();
            self.events
                .lock()
                .unwrap()
                .push(("assigned", n, Instant::now()));
            Ok(())
        })
    }
}

/// Learner assignments on one current-thread runtime: the new member's `on_partitions_learning`
/// awaits a 2 s warm-up while the owner keeps consuming on the same thread and a ticker task
/// measures how late it wakes (a warm-up that blocked the thread would make it 2 s late); the
/// partitions move only after the warm-up, and every offset is read.
#[tokio::test(flavor = "current_thread")]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn an_awaiting_learner_warm_up_leaves_the_other_tasks_running() {
    let topic = new_topic(&bootstrap(), "aio-learner", 4);
    let per_partition = 50usize;
    produce(&topic, 4, per_partition).await;
    let group = support::unique_name("aio-learner");
    let settings = [
        ("group.id", group.as_str()),
        (
            "partition.assignment.strategy",
            "learner-sticky,cooperative-sticky",
        ),
        ("auto.offset.reset", "earliest"),
        ("heartbeat.interval.ms", "300"),
        ("max.poll.records", "5"),
    ];
    let seen: Seen = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = |stop: &Arc<std::sync::atomic::AtomicBool>| {
        !stop.load(std::sync::atomic::Ordering::Acquire)
    };

    let owner = Arc::new(aio_consumer(&settings));
    owner.subscribe(&[&topic], None).unwrap();
    while owner.assignment().len() < 4 {
        // The call that completes the join may hand out the first records already: they count.
        for r in owner
            .recv_batch_timeout(5, Duration::from_millis(100))
            .await
            .unwrap()
        {
            record(&seen, &r);
        }
    }
    let owner_task = {
        let (owner, seen, stop) = (owner.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            while running(&stop) {
                for r in owner
                    .recv_batch_timeout(5, Duration::from_millis(50))
                    .await
                    .unwrap_or_default()
                {
                    record(&seen, &r);
                }
                // Slow processing, so records remain for the learner to take over.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let lateness = Arc::new(Mutex::new(Duration::ZERO));
    let ticker = {
        let (lateness, stop) = (lateness.clone(), stop.clone());
        tokio::spawn(async move {
            while running(&stop) {
                let asked = Instant::now();
                tokio::time::sleep(Duration::from_millis(10)).await;
                let late = asked.elapsed().saturating_sub(Duration::from_millis(10));
                let mut l = lateness.lock().unwrap();
                *l = (*l).max(late);
            }
        })
    };

    let events: LearnerEvents = Arc::default();
    let learner = aio_consumer(&settings);
    let listener = WarmingLearner {
        events: events.clone(),
    };
    learner
        .subscribe(&[&topic], Some(Box::new(listener)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let total = 4 * per_partition;
    let count = |seen: &Seen| seen.lock().unwrap().values().map(Vec::len).sum::<usize>();
    while learner.assignment().is_empty() || count(&seen) < total {
        assert!(
            Instant::now() < deadline,
            "not done in time: {} of {total} records, learner events {:?}",
            count(&seen),
            events.lock().unwrap()
        );
        for r in learner
            .recv_batch_timeout(5, Duration::from_millis(50))
            .await
            .unwrap()
        {
            record(&seen, &r);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    owner_task.await.unwrap();
    ticker.await.unwrap();
    learner.close().await.unwrap();
    owner.close().await.unwrap();

    let events = events.lock().unwrap().clone();
    let at = |what: &str| {
        events
            .iter()
            .find(|(w, n, _)| *w == what && *n > 0)
            .map(|e| e.2)
    };
    let (learning, ready, assigned) = (at("learning"), at("ready"), at("assigned"));
    let (Some(learning), Some(ready), Some(assigned)) = (learning, ready, assigned) else {
        panic!("the learner did not learn, warm up and take partitions: {events:?}");
    };
    assert!(ready.duration_since(learning) >= Duration::from_secs(2));
    assert!(
        assigned >= ready,
        "partitions moved before the warm-up ended: {events:?}"
    );
    let late = *lateness.lock().unwrap();
    eprintln!("ticker at most {late:?} late while the learner warmed up for 2 s");
    assert!(
        late < Duration::from_millis(500),
        "the warm-up blocked the runtime's thread: the ticker was {late:?} late"
    );
    let seen = seen.lock().unwrap();
    for p in 0..4 {
        let offsets: BTreeSet<i64> = seen
            .get(&TopicPartition::new(topic.clone(), p))
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(
            offsets.len(),
            per_partition,
            "partition {p}: every offset read"
        );
    }
}

/// A partition's error comes out of `recv_batch()` and the stream as from the blocking `poll()`:
/// once, naming the partition, while the other partition's records keep coming. Partition 1
/// has no committed offset under `auto.offset.reset=none`; partition 0 was sought to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn a_partition_error_comes_out_once_while_the_other_partition_flows() {
    let topic = new_topic(&bootstrap(), "aio-partition-error", 2);
    let n = 40usize;
    produce(&topic, 2, n).await;
    let group = support::unique_name("aio-partition-error");
    let c = aio_consumer(&[
        ("group.id", group.as_str()),
        ("auto.offset.reset", "none"),
        ("enable.auto.commit", "false"),
        ("max.poll.records", "3"),
    ]);
    let (tp0, tp1) = (
        TopicPartition::new(topic.clone(), 0),
        TopicPartition::new(topic.clone(), 1),
    );
    c.assign(&[tp0.clone(), tp1.clone()]).unwrap();
    c.seek(&tp0, 0).unwrap();
    let mut offsets: Vec<i64> = Vec::new();
    let mut errors: Vec<i32> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut round = 0u32;
    while offsets.len() < n || errors.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} of {n} records of partition 0, errors for partitions {errors:?}",
            offsets.len()
        );
        round += 1;
        // Batches and the stream in turn: both report the error the same way.
        let got: Vec<lagless::Result<lagless::ConsumerRecord>> = if round.is_multiple_of(2) {
            match c.recv_batch_timeout(5, Duration::from_millis(200)).await {
                Ok(rs) => rs.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            }
        } else {
            let mut stream = c.stream();
            let next =
                poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx));
            match tokio::time::timeout(Duration::from_millis(200), next).await {
                Ok(Some(r)) => vec![r],
                _ => vec![],
            }
        };
        for r in got {
            match r {
                Ok(r) => {
                    assert_eq!(
                        r.partition, 0,
                        "a record of the partition without an offset"
                    );
                    offsets.push(r.offset);
                }
                Err(lagless::Error::NoOffset(p)) => {
                    assert_eq!(p.topic, topic);
                    errors.push(p.partition);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    assert_eq!(
        offsets,
        (0..n as i64).collect::<Vec<_>>(),
        "every offset once, in order"
    );
    assert_eq!(errors, vec![1], "one error, naming partition 1");
    c.close().await.unwrap();
}

/// KIP-333 through the async front: a takeover with a backlog (committed 70, the log at 3,070,
/// a producer still writing) delivers fresh records through `recv_batch()` and the stream while
/// the backlog drains, each record flagged with its stream and each stream in order, through
/// `recv()`s cancelled mid-way; a commit while the backlog drains is held at the lowest offset
/// not yet handed out; every offset from 70 on comes exactly once, and the final commit is the
/// log end with no recovery token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn a_takeover_with_a_backlog_drains_through_the_async_front_while_fresh_records_flow() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "aio-recovery", 1);
    let group = support::unique_name("aio-recovery");
    let tp = TopicPartition::new(topic.clone(), 0);
    produce(&topic, 1, 70).await;
    {
        // The previous owner committed 70 and is gone.
        let departed = aio_consumer(&[("group.id", &group), ("enable.auto.commit", "false")]);
        departed.assign(std::slice::from_ref(&tp)).unwrap();
        departed
            .commit(Some(&[(
                tp.clone(),
                lagless::OffsetAndMetadata {
                    offset: 70,
                    metadata: String::new(),
                },
            )]))
            .await
            .unwrap();
        departed.close().await.unwrap();
    }
    produce(&topic, 1, 3_000).await;
    let end = 3_070i64;
    let c = aio_consumer(&[
        ("group.id", &group),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("enable.parallel.rebalance", "true"),
        ("parallel.rebalance.min.lag", "10"),
        ("max.poll.records", "50"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
    ]);
    c.subscribe(&[&topic], None).unwrap();
    // The join happens inside recv(): take what the call that completes it hands out.
    let mut delivered: BTreeSet<i64> = BTreeSet::new();
    let (mut last_main, mut last_recovery) = (-1i64, -1i64);
    let mut fresh_while_recovering = None;
    let mut cancelled = 0usize;
    let mut held_commits = 0usize;
    let mut take = |r: &lagless::ConsumerRecord,
                    delivered: &mut BTreeSet<i64>,
                    last_main: &mut i64,
                    last_recovery: &mut i64| {
        assert!(
            r.offset >= 70,
            "offset {} below the committed one",
            r.offset
        );
        assert!(delivered.insert(r.offset), "offset {} twice", r.offset);
        if r.from_recovery {
            assert!(
                r.offset < end,
                "recovery record {} past the backlog",
                r.offset
            );
            assert!(r.offset > *last_recovery, "recovery stream out of order");
            *last_recovery = r.offset;
        } else {
            assert!(
                r.offset >= end,
                "main-stream record {} in the backlog",
                r.offset
            );
            assert!(r.offset > *last_main, "main stream out of order");
            *last_main = r.offset;
            if fresh_while_recovering.is_none() && *last_recovery < end - 1 {
                fresh_while_recovering = Some((r.offset, *last_recovery));
            }
        }
    };
    let first = c.recv_batch(50).await.unwrap();
    for r in &first {
        take(r, &mut delivered, &mut last_main, &mut last_recovery);
    }
    assert!(
        c.position(&tp).await.unwrap() >= end,
        "the main stream starts at the log end"
    );
    // Fresh records, one every 5 ms, while the backlog drains.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickle = {
        let (topic, stop) = (topic.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                produce(&topic, 1, 1).await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            n
        })
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut round = 0u64;
    loop {
        assert!(
            Instant::now() < deadline,
            "backlog not drained: {} delivered, recovery at {last_recovery}",
            delivered.len()
        );
        round += 1;
        let timer = tokio::time::sleep(Duration::from_micros(300 + (round % 5) * 400));
        let got: Vec<lagless::ConsumerRecord> = if round.is_multiple_of(2) {
            tokio::select! {
                r = c.recv_batch(20) => r.unwrap(),
                _ = timer => { cancelled += 1; Vec::new() }
            }
        } else {
            let mut stream = c.stream();
            tokio::select! {
                r = poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx)) => {
                    vec![r.unwrap().unwrap()]
                }
                _ = timer => { cancelled += 1; Vec::new() }
            }
        };
        for r in &got {
            take(r, &mut delivered, &mut last_main, &mut last_recovery);
        }
        if !got.is_empty() && round.is_multiple_of(25) && last_recovery < end - 1 {
            // Held at the lowest offset not handed out, whatever the main stream has passed.
            c.commit(None).await.unwrap();
            let lowest = (70..).find(|o| !delivered.contains(o)).unwrap();
            let com = c.committed(std::slice::from_ref(&tp)).await.unwrap()[0]
                .1
                .clone()
                .expect("a committed offset");
            assert_eq!(com.offset, lowest, "a commit while the backlog drains");
            held_commits += 1;
        }
        // Some processing time, so the backlog takes a while.
        if round.is_multiple_of(10) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if !c.recovery_active(&tp).unwrap() && last_recovery == end - 1 && last_main > end + 20 {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = trickle.await.unwrap() as i64;
    let total_end = end + written;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (delivered.len() as i64) < total_end - 70 {
        assert!(Instant::now() < deadline, "fresh records missing");
        if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_millis(200), c.recv()).await {
            assert!(!r.from_recovery);
            assert!(delivered.insert(r.offset), "offset {} twice", r.offset);
        }
    }
    assert_eq!(
        delivered,
        (70..total_end).collect::<BTreeSet<_>>(),
        "every offset from the committed one on, exactly once"
    );
    let (fresh, recovered) =
        fresh_while_recovering.expect("no fresh record came out before the backlog drained");
    assert!(
        cancelled > 0 && held_commits > 0,
        "cancelled {cancelled}, commits {held_commits}"
    );
    eprintln!(
        "first fresh record {fresh} after the backlog reached {recovered}; {cancelled} cancelled \
         recv()s; {held_commits} commits while draining"
    );
    c.commit(None).await.unwrap();
    let com = c.committed(std::slice::from_ref(&tp)).await.unwrap()[0]
        .1
        .clone()
        .expect("a committed offset");
    assert_eq!(com.offset, total_end);
    assert_eq!(com.metadata, "", "no token once every range is finished");
    c.close().await.unwrap();
}

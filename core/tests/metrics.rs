//! The consumer's metrics against a real broker: each partition's position, committed offset,
//! lag and deliveries counted against what the test produced, consumed and committed; the group
//! member's rebalance count as a second member joins; and the JSON rendering.
#[path = "support/proxy.rs"]
mod proxy;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::metrics::{ConsumerMetrics, PartitionMetrics};
use lagless::{Consumer, OffsetAndMetadata, TopicPartition};
use serde_json::Value;
use support::*;

const PER_PARTITION: usize = 20;

fn at(offset: i64) -> OffsetAndMetadata {
    OffsetAndMetadata {
        offset,
        metadata: String::new(),
    }
}

fn partition<'a>(m: &'a ConsumerMetrics, tp: &TopicPartition) -> &'a PartitionMetrics {
    m.partitions
        .iter()
        .find(|p| p.topic == tp.topic && p.partition == tp.partition)
        .unwrap_or_else(|| panic!("{tp} is in the metrics"))
}

/// Every number in the JSON is a real value: no negative stands for "unknown" (that is null).
fn assert_no_negative(v: &Value, path: &str) {
    match v {
        Value::Number(n) => assert!(
            n.as_i64().is_none_or(|i| i >= 0),
            "{path} is {n}: a negative number where null would say unknown"
        ),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_no_negative(x, &format!("{path}[{i}]"));
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                assert_no_negative(x, &format!("{path}.{k}"));
            }
        }
        _ => {}
    }
}

/// Each partition in the JSON: a lag only where both the position and the end offset are known.
fn assert_lag_only_where_known(v: &Value) {
    let parts = v["partitions"].as_array().expect("partitions is an array");
    for p in parts {
        let known = !p["position"].is_null() && !p["hi_offset"].is_null();
        assert_eq!(!p["consumer_lag"].is_null(), known, "{p}");
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn metrics_count_each_partitions_position_commit_lag_and_deliveries() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics", 3);
    let written = produce(&bs, &topic, 3, PER_PARTITION);
    assert_eq!(
        written.values().map(|o| o.len()).sum::<usize>(),
        3 * PER_PARTITION
    );
    let group = unique_name("metrics-g");
    let c = consumer(
        &bs,
        &[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "7"),
        ],
    );
    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    c.assign(&tps).unwrap();

    // At once, before the partitions' first fetches: whatever is not known yet is null.
    let early = c.metrics().to_json();
    assert_no_negative(&early, "$");
    assert_lag_only_where_known(&early);
    assert_eq!(early["assigned_partitions"], 3);
    assert_eq!(
        early["group"],
        Value::Null,
        "a manual assignment has no member"
    );

    // Consume part: at least one record of each partition, about half in all.
    let mut got: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 3 || got.values().map(Vec::len).sum::<usize>() < 3 * PER_PARTITION / 2 {
        assert!(
            Instant::now() < deadline,
            "consumed only {got:?} within 60 s"
        );
        for r in c.poll(Duration::from_millis(200)).unwrap() {
            let bytes =
                r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len());
            got.entry(r.partition).or_default().push((r.offset, bytes));
        }
    }
    let consumed: usize = got.values().map(Vec::len).sum();
    // Commit some: partition 0 at an offset of the test's choosing, partition 1 at its position,
    // partition 2 not at all.
    let pos1 = c.position(&tps[1], None).unwrap();
    c.commit_sync(
        Some(&[(tps[0].clone(), at(3)), (tps[1].clone(), at(pos1))]),
        None,
    )
    .unwrap();

    let m = c.metrics();
    let ends: BTreeMap<TopicPartition, i64> =
        c.end_offsets(&tps, None).unwrap().into_iter().collect();
    for tp in &tps {
        let pm = partition(&m, tp);
        let recs = &got[&tp.partition];
        let position = c.position(tp, None).unwrap();
        // Delivered in order from 0: the position is after the last one handed out.
        assert_eq!(
            recs.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..recs.len() as i64).collect::<Vec<_>>()
        );
        assert_eq!(pm.position, Some(position), "{tp}");
        assert_eq!(position, recs.len() as i64, "{tp}");
        assert_eq!(pm.high_watermark, Some(ends[tp]), "{tp}");
        assert_eq!(ends[tp], PER_PARTITION as i64);
        assert_eq!(pm.lag, Some(ends[tp] - position), "{tp}");
        assert_eq!(pm.records_consumed, recs.len() as u64, "{tp}");
        assert_eq!(
            pm.bytes_consumed,
            recs.iter().map(|r| r.1 as u64).sum::<u64>(),
            "{tp}"
        );
        assert!(!pm.paused);
        assert_eq!(pm.failing, None, "{tp}");
        assert_eq!(pm.recovery, None);
        eprintln!(
            "{tp}: position {position}, hi {:?}, lag {:?}, records {}, bytes {}",
            pm.high_watermark, pm.lag, pm.records_consumed, pm.bytes_consumed
        );
    }
    assert_eq!(partition(&m, &tps[0]).committed_offset, Some(3));
    assert_eq!(partition(&m, &tps[1]).committed_offset, Some(pos1));
    assert_eq!(partition(&m, &tps[2]).committed_offset, None);
    // What the group holds agrees.
    let committed = c.committed(&tps, None).unwrap();
    assert_eq!(committed[0].1.as_ref().map(|o| o.offset), Some(3));
    assert_eq!(committed[1].1.as_ref().map(|o| o.offset), Some(pos1));
    assert_eq!(committed[2].1, None);

    assert_eq!(m.records_consumed_total, consumed as u64);
    assert_eq!(
        m.bytes_consumed_total,
        got.values().flatten().map(|r| r.1 as u64).sum::<u64>()
    );
    let total_lag: i64 = m.partitions.iter().map(|p| p.lag.unwrap()).sum();
    assert_eq!(total_lag, (3 * PER_PARTITION - consumed) as i64);
    assert!(m.fetch_buffer_max_bytes > 0);

    let json: Value = serde_json::from_str(&m.to_json_string()).unwrap();
    assert_no_negative(&json, "$");
    assert_lag_only_where_known(&json);
    assert_eq!(json["records_consumed_total"], consumed as u64);
    assert_eq!(json["partitions"][0]["committed_offset"], 3);
    assert_eq!(json["partitions"][2]["committed_offset"], Value::Null);

    // A consumer that takes over partition 0 learns its committed offset from the lookup.
    drop(c);
    let next = consumer(
        &bs,
        &[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    next.assign(&tps[..1]).unwrap();
    assert_eq!(next.position(&tps[0], None).unwrap(), 3);
    assert_eq!(
        partition(&next.metrics(), &tps[0]).committed_offset,
        Some(3)
    );
    next.close(None).unwrap();
    eprintln!("consumed {consumed} of {}", 3 * PER_PARTITION);
}

fn member(bs: &str, group: &str) -> Consumer {
    consumer(
        bs,
        &[
            ("group.id", group),
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "range"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
            ("max.poll.interval.ms", "30000"),
        ],
    )
}

/// Polls both members until `done` holds of the first one's metrics; returns them.
fn poll_until(
    what: &str,
    members: &[&Consumer],
    mut done: impl FnMut(&ConsumerMetrics) -> bool,
) -> ConsumerMetrics {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for m in members {
            m.poll(Duration::from_millis(50)).unwrap();
        }
        let m = members[0].metrics();
        if done(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "{what} within 60 s: {m:?}");
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_second_member_joining_counts_one_rebalance_on_the_first() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-rebalance", 3);
    let group = unique_name("metrics-rebalance-g");
    let a = member(&bs, &group);
    a.subscribe(&[&topic], None).unwrap();
    let before = a
        .metrics()
        .group
        .expect("a subscribed consumer is a member");
    assert_eq!(before.rebalance_count, 0);
    assert_eq!(before.protocol, "classic");
    assert!(before.since_last_poll <= before.max_poll_interval);
    assert_eq!(before.since_last_rebalance, None);
    assert_eq!(before.rebalance_latency_max, None);
    let one = poll_until("the first member owns all 3 partitions", &[&a], |m| {
        m.group
            .as_ref()
            .is_some_and(|g| g.state == "stable" && g.assigned_partitions == 3)
    });
    let g1 = one.group.unwrap();
    assert_eq!(g1.rebalance_count, 1);
    let first = g1.last_rebalance.clone().expect("a rebalance completed");
    assert_eq!(first.reason, "the subscription changed");
    assert!(g1.member_id.is_some() && g1.generation_id.is_some());
    assert_eq!(g1.assignor.as_deref(), Some("range"));
    assert_eq!(g1.max_poll_interval, Duration::from_secs(30));

    let b = member(&bs, &group);
    b.subscribe(&[&topic], None).unwrap();
    let two = poll_until(
        "the partitions are shared by both members",
        &[&a, &b],
        |m| {
            let bm = b.metrics().group.unwrap();
            m.group.as_ref().is_some_and(|g| {
                g.state == "stable"
                    && bm.state == "stable"
                    && g.generation_id == bm.generation_id
                    && g.assigned_partitions + bm.assigned_partitions == 3
                    && bm.assigned_partitions > 0
            })
        },
    );
    let g2 = two.group.unwrap();
    assert_eq!(g2.rebalance_count, g1.rebalance_count + 1, "{g2:?}");
    // The Java consumer's rebalance-latency-avg/-max over the two, and last-rebalance-seconds-ago.
    let second = g2.last_rebalance.as_ref().unwrap().duration;
    let max = g2
        .rebalance_latency_max
        .expect("two rebalances in the window");
    // (Kept as milliseconds in f64: equal to well within a millisecond.)
    let longest = first.duration.max(second);
    assert!(
        max.abs_diff(longest) < Duration::from_millis(1),
        "{max:?} vs {longest:?}"
    );
    let avg = g2.rebalance_latency_avg.unwrap();
    let want = (first.duration + second) / 2;
    assert!(
        avg.abs_diff(want) < Duration::from_millis(1),
        "{avg:?} vs {want:?}"
    );
    assert!(g2.since_last_rebalance.expect("completed") < Duration::from_secs(30));
    assert!(g2.generation_id > g1.generation_id);
    assert_eq!(g2.assigned_partitions, two.partitions.len());
    let bm = b.metrics().group.unwrap();
    assert_eq!(bm.rebalance_count, 1);
    eprintln!(
        "first member: {} rebalances, last because {:?}, taking {:?}; second: {}",
        g2.rebalance_count,
        g2.last_rebalance.as_ref().map(|r| &r.reason),
        g2.last_rebalance.as_ref().map(|r| r.duration),
        bm.rebalance_count
    );
    let json = a.metrics().to_json();
    assert_eq!(json["group"]["rebalance_cnt"], 2);
    assert_no_negative(&json, "$");
    b.close(None).unwrap();
    a.close(None).unwrap();
}

/// Under read_committed the lag runs to the last stable offset: with a transaction open on the
/// partition, `ls_offset` stays at its first record while `hi_offset` is past it, and a consumer
/// that read everything below has no lag; once the transaction commits, it reads the rest.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn under_read_committed_the_lag_runs_to_the_last_stable_offset() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-lso", 1);
    produce(&bs, &topic, 1, 10);
    let p = producer(
        &bs,
        &[
            ("transactional.id", &unique_name("metrics-tx")),
            ("transaction.timeout.ms", "30000"),
        ],
    );
    let t = Duration::from_secs(30);
    p.init_transactions(t).unwrap();
    p.begin_transaction().unwrap();
    for i in 0..5 {
        p.send(lagless::ProducerRecord::new(&topic, format!("tx{i}")).with_partition(0))
            .unwrap();
    }
    p.flush(t).unwrap();
    let c = consumer(
        &bs,
        &[
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", "earliest"),
            ("fetch.max.wait.ms", "100"),
        ],
    );
    let tp = TopicPartition::new(&topic, 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let mut got = 0usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The 10 committed records; then until a fetch answer names the open transaction's end.
    let open = loop {
        assert!(
            Instant::now() < deadline,
            "{got} records, {:?}",
            c.metrics()
        );
        got += c.poll(Duration::from_millis(100)).unwrap().len();
        let m = c.metrics();
        let pm = partition(&m, &tp).clone();
        if got == 10 && pm.high_watermark == Some(15) {
            break pm;
        }
    };
    assert_eq!(open.last_stable_offset, Some(10));
    assert_eq!(open.position, Some(10));
    assert_eq!(
        open.lag,
        Some(0),
        "read_committed: nothing to read below the LSO"
    );
    p.commit_transaction(t).unwrap();
    // 5 records and the commit marker at offset 15: the LSO and the high watermark reach 16.
    let done = loop {
        assert!(
            Instant::now() < deadline,
            "{got} records, {:?}",
            c.metrics()
        );
        got += c.poll(Duration::from_millis(100)).unwrap().len();
        let m = c.metrics();
        let pm = partition(&m, &tp).clone();
        if got == 15 && pm.last_stable_offset == Some(16) && pm.position == Some(16) {
            break pm;
        }
    };
    assert_eq!(done.high_watermark, Some(16));
    assert_eq!(done.lag, Some(0));
    assert_eq!(done.records_consumed, 15);
    eprintln!("open transaction: {open:?}\ncommitted: {done:?}");
    p.close(t).unwrap();
    c.close(None).unwrap();
}

/// KIP-848 (`group.protocol=consumer`): the member's epoch is its generation, and the
/// reconciliations that change what it owns count as its rebalances.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_consumer_protocol_member_counts_its_rebalances_as_a_second_member_joins() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-kip848", 3);
    let group = unique_name("metrics-kip848-g");
    let settings = [
        ("group.id", group.as_str()),
        ("group.protocol", "consumer"),
        ("auto.offset.reset", "earliest"),
    ];
    let a = consumer(&bs, &settings);
    a.subscribe(&[&topic], None).unwrap();
    let one = poll_until("the first member owns all 3 partitions", &[&a], |m| {
        m.group
            .as_ref()
            .is_some_and(|g| g.state == "stable" && g.assigned_partitions == 3)
    });
    let g1 = one.group.unwrap();
    assert_eq!(g1.protocol, "consumer");
    assert!(g1.generation_id.is_some_and(|e| e > 0), "{g1:?}");
    assert!(g1.member_id.is_some());
    assert!(g1.rebalance_count >= 1, "{g1:?}");
    let b = consumer(&bs, &settings);
    b.subscribe(&[&topic], None).unwrap();
    let two = poll_until(
        "the partitions are shared by both members",
        &[&a, &b],
        |m| {
            let bm = b.metrics().group.unwrap();
            m.group.as_ref().is_some_and(|g| {
                g.state == "stable"
                    && bm.state == "stable"
                    && g.assigned_partitions + bm.assigned_partitions == 3
                    && bm.assigned_partitions > 0
            })
        },
    );
    let g2 = two.group.unwrap();
    assert!(
        g2.rebalance_count > g1.rebalance_count,
        "{g1:?} then {g2:?}"
    );
    assert!(g2.generation_id > g1.generation_id);
    eprintln!(
        "consumer protocol: first member {} rebalances after joining, {} after the second joined \
         (epoch {:?} -> {:?}, last because {:?})",
        g1.rebalance_count,
        g2.rebalance_count,
        g1.generation_id,
        g2.generation_id,
        g2.last_rebalance.as_ref().map(|r| &r.reason)
    );
    b.close(None).unwrap();
    a.close(None).unwrap();
}

/// The statistics callback (`statistics.interval.ms`, librdkafka's `stats_cb`) of a group
/// member: called on the thread in `poll()` before that poll takes records, so each snapshot
/// counts exactly the records the earlier polls handed out; not closer together than the
/// interval; and an error it returns comes out of that `poll()` without losing a record. Every
/// offset produced is read once.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn the_statistics_callback_counts_every_record_handed_out_before_it_on_the_polling_thread() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    const PARTITIONS: i32 = 3;
    const PER: usize = 100;
    const INTERVAL: Duration = Duration::from_millis(50);
    let b = bootstrap();
    let topic = new_topic(&b, "statistics", PARTITIONS);
    let written = produce(&b, &topic, PARTITIONS, PER);
    let group = unique_name("statistics");
    let c = group_member(
        &b,
        &group,
        &[("statistics.interval.ms", "50"), ("max.poll.records", "7")],
    );
    // What the test has been handed so far, read by the callback.
    let handed_out = Arc::new(AtomicU64::new(0));
    // Per call: (thread, when, handed out before it, the snapshot's total, the partitions' sum,
    // generation, assigned partitions).
    type Call = (
        std::thread::ThreadId,
        Instant,
        u64,
        u64,
        u64,
        Option<i32>,
        usize,
    );
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let fail_next = Arc::new(AtomicU64::new(0));
    {
        let (handed_out, calls, fail_next) = (handed_out.clone(), calls.clone(), fail_next.clone());
        c.set_statistics_callback(Some(Box::new(move |m| {
            let group = m.group.as_ref();
            calls.lock().unwrap().push((
                std::thread::current().id(),
                Instant::now(),
                handed_out.load(Ordering::SeqCst),
                m.records_consumed_total,
                m.partitions.iter().map(|p| p.records_consumed).sum(),
                group.and_then(|g| g.generation_id),
                group.map_or(0, |g| g.assigned_partitions),
            ));
            if fail_next.swap(0, Ordering::SeqCst) == 1 {
                return Err(lagless::Error::InvalidArgument(
                    "statistics callback failure".into(),
                ));
            }
            Ok(())
        })));
    }
    c.subscribe(&[&topic], None).unwrap();
    let mut read: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    let mut errors = Vec::new();
    let total = PARTITIONS as u64 * PER as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut failure_asked = false;
    while handed_out.load(Ordering::SeqCst) < total || errors.is_empty() {
        assert!(
            Instant::now() < deadline,
            "read {read:?} and an error {errors:?} within 60 s"
        );
        // Once half is read, the next call fails (once).
        if handed_out.load(Ordering::SeqCst) >= total / 2 && !failure_asked {
            fail_next.store(1, Ordering::SeqCst);
            failure_asked = true;
        }
        match c.poll(Duration::from_millis(100)) {
            Ok(records) => {
                for r in &records {
                    read.entry(r.partition).or_default().push(r.offset);
                }
                handed_out.fetch_add(records.len() as u64, Ordering::SeqCst);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    // One poll at the end: a snapshot after the last records.
    let end = Instant::now() + 2 * INTERVAL;
    while Instant::now() < end {
        assert!(c.poll(INTERVAL).unwrap().is_empty());
    }
    let last = c.metrics();
    c.close(None).unwrap();

    let calls = calls.lock().unwrap().clone();
    eprintln!(
        "{} statistics calls, {} errors out of poll(), {total} records",
        calls.len(),
        errors.len()
    );
    assert_eq!(
        errors,
        vec!["invalid argument: statistics callback failure".to_string()]
    );
    for (p, offsets) in &read {
        let want: Vec<i64> = written[p].iter().copied().collect();
        assert_eq!(offsets, &want, "partition {p}: every offset once, in order");
    }
    assert!(calls.len() >= 3, "{} calls", calls.len());
    let me = std::thread::current().id();
    for (i, (thread, _, before, total_seen, partitions_sum, _, _)) in calls.iter().enumerate() {
        assert_eq!(*thread, me, "call {i} ran on the polling thread");
        assert_eq!(
            total_seen, before,
            "call {i} counts the records handed out before it"
        );
        assert_eq!(
            partitions_sum, before,
            "call {i}: the partitions' counts add up"
        );
    }
    // Stamped inside the callback, a little after the emission the interval counts from.
    for (a, b) in calls.iter().zip(&calls[1..]) {
        assert!(
            b.1 - a.1 >= INTERVAL - Duration::from_millis(5),
            "two calls {:?} apart",
            b.1 - a.1
        );
    }
    let (_, _, _, final_total, _, generation, assigned) = *calls.last().unwrap();
    assert_eq!(final_total, total, "the last call saw every record");
    assert!(generation.is_some_and(|g| g >= 1) && assigned == PARTITIONS as usize);
    for p in &last.partitions {
        assert_eq!((p.position, p.lag), (Some(PER as i64), Some(0)), "{p:?}");
    }
}

/// KIP-333 with `parallel.rebalance.recovery.poll`: the records `recovery_poll()` returns count
/// in the consumed totals and rates (here `poll()` returns none), and the partition's recovery
/// stream shows its backlog shrinking by what was delivered, and its drain rate.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn recovery_poll_records_count_as_consumed_and_the_backlog_drain_rate_shows() {
    init_logs();
    const BACKLOG: usize = 500;
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-recovery", 1);
    let group = unique_name("metrics-recovery-g");
    let tp = TopicPartition::new(&topic, 0);
    produce(&bs, &topic, 1, 10);
    // The previous owner committed 10 and is gone; the log then grows by the backlog.
    {
        let c = group_member(&bs, &group, &[("enable.auto.commit", "false")]);
        c.subscribe(&[&topic], None).unwrap();
        let _ = wait_assigned(&c, Duration::from_secs(60));
        c.commit_sync(Some(&[(tp.clone(), at(10))]), None).unwrap();
        c.close(None).unwrap();
    }
    produce(&bs, &topic, 1, BACKLOG);
    let started = Instant::now();
    let c = group_member(
        &bs,
        &group,
        &[
            ("enable.auto.commit", "false"),
            ("enable.parallel.rebalance", "true"),
            ("parallel.rebalance.min.lag", "10"),
            ("parallel.rebalance.recovery.poll", "true"),
            ("max.poll.records", "50"),
        ],
    );
    c.subscribe(&[&topic], None).unwrap();
    assert!(wait_assigned(&c, Duration::from_secs(60)).is_empty());
    let deadline = Instant::now() + Duration::from_secs(30);
    let recovery = loop {
        if let Some(r) = partition(&c.metrics(), &tp).recovery.clone() {
            break r;
        }
        assert!(Instant::now() < deadline, "no recovery stream");
        assert!(c.poll(Duration::from_millis(50)).unwrap().is_empty());
    };
    assert_eq!(recovery.backlog, BACKLOG as i64, "{recovery:?}");
    assert_eq!(recovery.drain_rate, 0.0, "nothing drained yet");

    let mut got = 0;
    let mut checked_mid_drain = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < BACKLOG {
        assert!(Instant::now() < deadline, "recovered {got} of {BACKLOG}");
        assert!(
            c.poll(Duration::ZERO).unwrap().is_empty(),
            "no fresh record"
        );
        let batch = c.recovery_poll(Duration::from_millis(200)).unwrap();
        got += batch.len();
        if !batch.is_empty() && got < BACKLOG && !checked_mid_drain {
            checked_mid_drain = true;
            let m = c.metrics();
            let elapsed = started.elapsed().as_secs_f64();
            let r = partition(&m, &tp).recovery.clone().expect("still draining");
            // No control batch, nothing compacted: the backlog went down by what was delivered.
            assert_eq!(r.backlog, (BACKLOG - got) as i64, "{r:?}");
            let n = got as f64;
            assert!(
                r.drain_rate <= n / 30.0 && r.drain_rate >= n / (30.0 + elapsed),
                "{} for {n} in {elapsed} s",
                r.drain_rate
            );
            assert_eq!(
                m.to_json()["partitions"][0]["recovery"]["drain_rate"],
                r.drain_rate
            );
        }
    }
    assert!(checked_mid_drain, "the backlog came in one batch");
    let m = c.metrics();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(got, BACKLOG);
    assert_eq!(m.records_consumed_total, BACKLOG as u64);
    let bytes: u64 = (0..BACKLOG).map(|i| format!("v0-{i}").len() as u64).sum();
    assert_eq!(m.bytes_consumed_total, bytes);
    // poll() returned nothing: the rates are recovery_poll()'s.
    let n = BACKLOG as f64;
    let rate = m.poll.records_consumed_rate;
    assert!(
        rate <= n / 30.0 && rate >= n / (30.0 + elapsed),
        "{rate} for {n} in {elapsed} s"
    );
    let b = bytes as f64;
    let bytes_rate = m.poll.bytes_consumed_rate;
    assert!(
        bytes_rate <= b / 30.0 && bytes_rate >= b / (30.0 + elapsed),
        "{bytes_rate} for {b} in {elapsed} s"
    );
    c.close(None).unwrap();
}

/// A free port on loopback for the test's proxy.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn brokers_poll_rhythm_and_latencies_are_counted_and_a_cut_connection_shows() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-brokers", 2);
    produce(&bs, &topic, 2, PER_PARTITION);
    // The consumer is bootstrapped through a proxy: the broker advertises its own address, so
    // only the bootstrap connection goes through it, and cutting it leaves the rest alone.
    let broker = bs.split(',').next().unwrap().to_string();
    let port = free_port();
    let proxy = proxy::Proxy::start(&[(port, broker.clone())]);
    let started = Instant::now();
    let group = unique_name("metrics-brokers-g");
    let c = consumer(
        &proxy.bootstrap(),
        &[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    let tps: Vec<TopicPartition> = (0..2).map(|p| TopicPartition::new(&topic, p)).collect();
    c.assign(&tps).unwrap();
    let mut consumed = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumed < 2 * PER_PARTITION {
        assert!(Instant::now() < deadline, "consumed {consumed} within 30 s");
        consumed += c.poll(Duration::from_millis(200)).unwrap().len();
    }
    // Two commits: two OffsetCommit answers.
    c.commit_sync(None, None).unwrap();
    c.commit_sync(None, None).unwrap();
    // A poll at the log end: a Fetch answered after waiting there; the poll after it starts
    // at least 700 ms after it.
    assert!(c.poll(Duration::from_millis(700)).unwrap().is_empty());
    assert!(c.poll(Duration::ZERO).unwrap().is_empty());

    let m = c.metrics();
    let elapsed = started.elapsed().as_secs_f64();
    // The bootstrap server, known by its address only, then the broker by its node id.
    assert_eq!(m.brokers.len(), 2, "{:?}", m.brokers);
    let (boot, node) = (&m.brokers[0], &m.brokers[1]);
    assert_eq!(boot.node_id, None);
    assert_eq!(boot.address, proxy.bootstrap());
    assert_eq!((boot.connects_total, boot.connect_failures_total), (1, 0));
    assert!(boot.requests_total >= 1, "{boot:?}");
    let node_id = node.node_id.expect("the broker's node id");
    assert!(node_id >= 0);
    assert_eq!(node.address.rsplit(':').next(), broker.rsplit(':').next());
    assert_eq!(node.state, "up", "{node:?}");
    assert!(node.connections >= 1 && node.connects_total >= node.connections as u64);
    assert_eq!(node.connect_failures_total, 0);
    assert_eq!(node.disconnects_total, 0, "{node:?}");
    // The records' values alone are 2 x PER_PARTITION x 5-6 bytes; the answers carry more.
    assert!(
        node.bytes_received_total > 2 * PER_PARTITION as u64 * 5,
        "{node:?}"
    );
    assert!(
        node.bytes_sent_total > 0 && node.requests_total >= 4,
        "{node:?}"
    );
    let rtt = node.request_latency.as_ref().expect("answers came");
    assert!(rtt.count >= 4 && rtt.max >= rtt.avg, "{rtt:?}");
    let (p50, p99) = (rtt.p50.unwrap(), rtt.p99.unwrap());
    assert!(p50 <= p99 && p99 <= rtt.max, "{rtt:?}");
    let commits = m
        .commit_latency
        .as_ref()
        .expect("two commits were answered");
    assert_eq!(commits.count, 2, "{commits:?}");
    let fetches = m.fetch_latency.as_ref().expect("fetches were answered");
    assert!(fetches.count >= 2, "{fetches:?}");
    // The fetch at the log end waited up to fetch.max.wait.ms (500 ms) there.
    assert!(fetches.max >= Duration::from_millis(300), "{fetches:?}");

    // poll(): its rhythm and what it returned, windowed as the Java client's.
    let since = m.poll.since_last_poll.expect("polled");
    assert!(since < Duration::from_secs(5), "{since:?}");
    let between = m.poll.time_between_poll_max.expect("polled more than once");
    assert!(
        between >= Duration::from_millis(700),
        "a poll waited 700 ms: {between:?}"
    );
    let idle = m.poll.poll_idle_ratio_avg.expect("polls ended");
    assert!(idle > 0.0 && idle <= 1.0, "{idle}");
    // The Java client's rate: the records over the time since the first sample, counted as at
    // least one whole 30 s window.
    let rate = m.poll.records_consumed_rate;
    let n = consumed as f64;
    assert!(
        rate <= n / 30.0 && rate >= n / (30.0 + elapsed),
        "{rate} for {n} in {elapsed} s"
    );
    // The bytes likewise: no keys, values `v{partition}-{i}` as produced, all of them consumed.
    let produced: u64 = (0..2)
        .flat_map(|p| (0..PER_PARTITION).map(move |i| format!("v{p}-{i}").len() as u64))
        .sum();
    assert_eq!(m.bytes_consumed_total, produced);
    let bytes_rate = m.poll.bytes_consumed_rate;
    let b = produced as f64;
    assert!(
        bytes_rate <= b / 30.0 && bytes_rate >= b / (30.0 + elapsed),
        "{bytes_rate} for {b} bytes in {elapsed} s"
    );
    // Recorded with the records, poll by poll: the same windows, so the same bytes per record.
    assert!(
        (bytes_rate / rate - b / n).abs() < 1e-9,
        "{bytes_rate} / {rate} against {b} / {n}"
    );
    // The JSON has the same.
    let v = m.to_json();
    assert_eq!(v["brokers"][1]["node_id"], node_id);
    assert_eq!(v["commit_latency"]["count"], 2);
    assert_eq!(v["bytes_consumed_rate"], bytes_rate);

    // Cut the bootstrap connection: its broker entry goes down with one disconnect, the
    // broker's own connections stay up and the consumer goes on.
    proxy.set(0, proxy::Mode::Refuse);
    let deadline = Instant::now() + Duration::from_secs(10);
    let boot = loop {
        let m = c.metrics();
        if m.brokers[0].state == "down" {
            break m.brokers[0].clone();
        }
        assert!(Instant::now() < deadline, "still {:?}", m.brokers[0]);
        c.poll(Duration::from_millis(100)).unwrap();
    };
    assert_eq!(
        (boot.connects_total, boot.disconnects_total),
        (1, 1),
        "{boot:?}"
    );
    assert_eq!(boot.connections, 0);
    produce(&bs, &topic, 2, 1);
    let mut more = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while more < 2 {
        assert!(
            Instant::now() < deadline,
            "after the cut consumed {more} of 2"
        );
        more += c.poll(Duration::from_millis(200)).unwrap().len();
    }
    let node = c.metrics().brokers[1].clone();
    assert_eq!((node.state, node.disconnects_total), ("up", 0), "{node:?}");
    c.close(Some(Duration::from_secs(5))).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn the_producer_counts_what_it_delivered_and_its_broker() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "metrics-producer", 2);
    let p = producer(
        &bs,
        &[("linger.ms", "5"), ("client.id", "metrics-producer")],
    );
    let started = Instant::now();
    let before = p.metrics();
    assert_eq!(
        (before.records_sent_total, before.records_outstanding),
        (0, 0)
    );
    assert_eq!(before.produce_latency, None);
    let n = 150;
    let deliveries: Vec<_> = (0..n)
        .map(|i| {
            p.send(lagless::ProducerRecord::new(&topic, format!("r{i}")).with_partition(i % 2))
                .unwrap()
        })
        .collect();
    p.flush(Duration::from_secs(30)).unwrap();
    for d in deliveries {
        d.wait().unwrap();
    }
    let m = p.metrics();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(m.client_id, "metrics-producer");
    assert_eq!(
        (m.records_sent_total, m.records_failed_total),
        (n as u64, 0)
    );
    // Two partitions: at least a batch each, at most a record each.
    assert!((2..=n as u64).contains(&m.batches_sent_total), "{m:?}");
    assert_eq!((m.records_outstanding, m.buffered_bytes), (0, 0));
    let rate = m.record_send_rate;
    let n = n as f64;
    assert!(rate <= n / 30.0 && rate >= n / (30.0 + elapsed), "{rate}");
    assert_eq!(m.record_error_rate, 0.0);
    let produce = m.produce_latency.as_ref().expect("Produce answers came");
    assert!(
        produce.count >= 1 && produce.count <= m.batches_sent_total,
        "{produce:?}"
    );
    let node = m
        .brokers
        .iter()
        .find(|b| b.node_id.is_some())
        .expect("the broker by its node id");
    assert_eq!(node.state, "up");
    assert!(node.requests_total >= produce.count, "{node:?}");
    let v = m.to_json();
    assert_eq!(v["type"], "producer");
    assert_eq!(v["records_sent_total"], 150);
    p.close(Duration::from_secs(5)).unwrap();
}

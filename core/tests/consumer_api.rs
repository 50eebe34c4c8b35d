//! The consumer's positioning and flow-control API against a real broker: seek,
//! seek_to_beginning/end, position, pause/resume, offsets_for_times, watermarks, beginning/end
//! offsets, `auto.offset.reset=latest`, OFFSET_OUT_OF_RANGE handling per `auto.offset.reset`,
//! `max.poll.records`, and `wakeup()` from another thread.
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::{Consumer, ConsumerRecord, Error, ProducerRecord, TopicPartition, Watermarks};
use support::*;

/// Timestamps of the produced records: `BASE_AGO` ms before now, then 10 ms apart.
const BASE_AGO: i64 = 3_600_000;

/// Writes records `range` to partition `p` with value `p{p}-{i}` and timestamp `base + 10 * i`.
fn produce(bs: &str, topic: &str, p: i32, range: std::ops::Range<i64>, base: i64) {
    let producer = producer(bs, &[("linger.ms", "1")]);
    let deliveries: Vec<_> = range
        .map(|i| {
            producer
                .send(
                    ProducerRecord::new(topic, format!("p{p}-{i}"))
                        .with_partition(p)
                        .with_key(format!("k{i}"))
                        .with_timestamp(base + 10 * i),
                )
                .unwrap()
        })
        .collect();
    producer.flush(Duration::from_secs(30)).unwrap();
    for d in deliveries {
        d.wait().expect("delivered");
    }
    producer.close(Duration::from_secs(5)).unwrap();
}

fn value(r: &ConsumerRecord) -> String {
    String::from_utf8(r.value.as_deref().unwrap().to_vec()).unwrap()
}

/// Polls until `want` records came (or `within` passes), asserting nothing extra arrives within a
/// short grace period afterwards.
fn poll_exactly(c: &Consumer, want: usize, within: Duration) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        out.extend(c.poll(Duration::from_millis(200)).expect("poll"));
    }
    assert_eq!(
        out.len(),
        want,
        "records: {:?}",
        out.iter()
            .map(|r| (r.partition, r.offset))
            .collect::<Vec<_>>()
    );
    let extra = c.poll(Duration::from_millis(300)).expect("poll");
    assert!(
        extra.is_empty(),
        "unexpected records: {:?}",
        extra
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect::<Vec<_>>()
    );
    out
}

/// Polls until records of `tp` arrive and returns those of that poll (records of other
/// partitions are dropped).
fn first_of(c: &Consumer, tp: &TopicPartition) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let rs: Vec<ConsumerRecord> = c
            .poll(Duration::from_millis(200))
            .expect("poll")
            .into_iter()
            .filter(|r| r.partition == tp.partition && *r.topic == tp.topic)
            .collect();
        if !rs.is_empty() {
            return rs;
        }
    }
    panic!("no record of {tp} within 15 s");
}

fn offsets(rs: &[ConsumerRecord]) -> Vec<i64> {
    rs.iter().map(|r| r.offset).collect()
}

/// Waits until position() is no longer `old` (a fetch answer moved it), polling meanwhile.
fn wait_position_change(c: &Consumer, tp: &TopicPartition, old: i64) -> (i64, Vec<ConsumerRecord>) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = Vec::new();
    loop {
        seen.extend(c.poll(Duration::from_millis(100)).expect("poll"));
        let pos = c.position(tp, None).expect("position");
        if pos != old {
            return (pos, seen);
        }
        assert!(Instant::now() < deadline, "position of {tp} stayed {old}");
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn seek_position_and_seek_to_beginning_and_end() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-seek", 2);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..100, base);
    produce(&bs, &topic, 1, 0..100, base);
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);

    let c = consumer(
        &bs,
        &[
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "50"),
        ],
    );
    c.assign(std::slice::from_ref(&tp0)).unwrap();
    // Not yet polled: position() looks the offset up through the reset policy.
    assert_eq!(c.position(&tp0, None).unwrap(), 0);
    // An unassigned partition has no position.
    assert!(matches!(
        c.position(&tp1, None),
        Err(Error::IllegalState(_))
    ));
    assert!(matches!(c.seek(&tp1, 3), Err(Error::IllegalState(_))));
    assert!(matches!(c.seek(&tp0, -1), Err(Error::InvalidArgument(_))));

    c.seek(&tp0, 42).unwrap();
    assert_eq!(c.position(&tp0, None).unwrap(), 42);
    let mut got = first_of(&c, &tp0);
    let r = &got[0];
    assert_eq!((r.offset, value(r)), (42, "p0-42".to_string()));
    assert_eq!(r.key.as_deref(), Some(&b"k42"[..]));
    assert_eq!(r.timestamp, base + 420);
    // The position follows what poll() returned.
    let more = 100 - 42 - got.len();
    got.extend(poll_exactly(&c, more, Duration::from_secs(15)));
    assert_eq!(offsets(&got), (42..100).collect::<Vec<_>>());
    assert_eq!(c.position(&tp0, None).unwrap(), 100);

    // Seek backwards, with records buffered after the old position: the buffer is dropped.
    c.seek(&tp0, 10).unwrap();
    assert_eq!(first_of(&c, &tp0)[0].offset, 10);

    c.seek_to_end(std::slice::from_ref(&tp0)).unwrap();
    assert_eq!(c.position(&tp0, None).unwrap(), 100);
    poll_exactly(&c, 0, Duration::from_millis(500));

    c.seek_to_beginning(std::slice::from_ref(&tp0)).unwrap();
    assert_eq!(c.position(&tp0, None).unwrap(), 0);
    let all = poll_exactly(&c, 100, Duration::from_secs(15));
    assert_eq!(offsets(&all), (0..100).collect::<Vec<_>>());

    // assign() keeps the position of a partition that stays assigned; a new one starts per policy.
    c.seek(&tp0, 95).unwrap();
    c.assign(&[tp0.clone(), tp1.clone()]).unwrap();
    assert_eq!(c.position(&tp0, None).unwrap(), 95);
    assert_eq!(c.position(&tp1, None).unwrap(), 0);
    let got = poll_exactly(&c, 5 + 100, Duration::from_secs(15));
    let mut per: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in &got {
        per.entry(r.partition).or_default().push(r.offset);
    }
    assert_eq!(per[&0], (95..100).collect::<Vec<_>>());
    assert_eq!(per[&1], (0..100).collect::<Vec<_>>());
    assert_eq!(c.assignment(), vec![tp0, tp1]);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn watermarks_beginning_and_end_offsets() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-watermarks", 3);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..30, base);
    produce(&bs, &topic, 1, 0..7, base);
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    // No assignment needed for these.
    let c = consumer(&bs, &[]);
    assert_eq!(
        c.watermarks(&tps[0], None).unwrap(),
        Watermarks { low: 0, high: 30 }
    );
    assert_eq!(
        c.watermarks(&tps[1], None).unwrap(),
        Watermarks { low: 0, high: 7 }
    );
    assert_eq!(
        c.watermarks(&tps[2], None).unwrap(),
        Watermarks { low: 0, high: 0 }
    );
    let begin = c.beginning_offsets(&tps, None).unwrap();
    assert_eq!(
        begin,
        tps.iter().map(|tp| (tp.clone(), 0)).collect::<Vec<_>>()
    );
    let end = c.end_offsets(&tps, None).unwrap();
    assert_eq!(
        end,
        vec![
            (tps[0].clone(), 30),
            (tps[1].clone(), 7),
            (tps[2].clone(), 0)
        ]
    );
    // A partition given twice is asked once (the broker refuses a request that names it twice).
    assert_eq!(
        c.end_offsets(&[tps[1].clone(), tps[0].clone(), tps[1].clone()], None)
            .unwrap(),
        vec![(tps[0].clone(), 30), (tps[1].clone(), 7)]
    );
    // A negative partition, one the topic does not have, and a topic the cluster does not have.
    let e = c
        .beginning_offsets(&[TopicPartition::new(&topic, -1)], None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("must be >= 0")),
        "{e}"
    );
    assert!(c
        .end_offsets(&[TopicPartition::new(&topic, 9)], None)
        .is_err());
    let e = c
        .end_offsets(&[TopicPartition::new(unique_name("api-missing"), 0)], None)
        .unwrap_err();
    assert!(matches!(e, Error::UnknownTopic(_)), "{e}");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn offsets_for_times() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-times", 2);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..50, base);
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);
    let c = consumer(&bs, &[]);
    let res = c
        .offsets_for_times(&[(tp0.clone(), 0), (tp1.clone(), 0)], None)
        .unwrap();
    assert_eq!(
        res,
        vec![(tp0.clone(), Some((0, base))), (tp1.clone(), None)]
    );
    // Between two records: the later one. Exactly on one: that one.
    for (ts, want) in [
        (base + 55, Some((6, base + 60))),
        (base + 60, Some((6, base + 60))),
        (base + 490, Some((49, base + 490))),
        (base + 491, None),
    ] {
        let res = c.offsets_for_times(&[(tp0.clone(), ts)], None).unwrap();
        assert_eq!(
            res,
            vec![(tp0.clone(), want)],
            "timestamp base+{}",
            ts - base
        );
    }
    assert!(matches!(
        c.offsets_for_times(&[(tp0.clone(), -5)], None),
        Err(Error::InvalidArgument(_))
    ));
    // A partition given twice: asked once with the same timestamp, refused with two.
    assert_eq!(
        c.offsets_for_times(&[(tp0.clone(), base + 55), (tp0.clone(), base + 55)], None)
            .unwrap(),
        vec![(tp0.clone(), Some((6, base + 60)))]
    );
    let e = c
        .offsets_for_times(&[(tp0.clone(), base), (tp0.clone(), base + 55)], None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("given twice")),
        "{e}"
    );
    // The answer is usable for seek.
    let c = consumer(&bs, &[("auto.offset.reset", "earliest")]);
    c.assign(std::slice::from_ref(&tp0)).unwrap();
    let (_, found) = c
        .offsets_for_times(&[(tp0.clone(), base + 201)], None)
        .unwrap()
        .remove(0);
    c.seek(&tp0, found.unwrap().0).unwrap();
    let r = &first_of(&c, &tp0)[0];
    assert_eq!((r.offset, r.timestamp), (21, base + 210));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn pause_stops_one_partition_and_the_others_keep_flowing() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-pause", 2);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..300, base);
    produce(&bs, &topic, 1, 0..300, base);
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);
    let c = consumer(
        &bs,
        &[
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "20"),
        ],
    );
    c.assign(&[tp0.clone(), tp1.clone()]).unwrap();

    // Read until partition 0 has delivered something (and has more buffered, most likely).
    let mut next = [0i64; 2];
    while next[0] == 0 {
        for r in c.poll(Duration::from_secs(1)).unwrap() {
            assert_eq!(r.offset, next[r.partition as usize]);
            next[r.partition as usize] += 1;
        }
    }
    c.pause(std::slice::from_ref(&tp0)).unwrap();
    assert_eq!(c.paused(), vec![tp0.clone()]);
    let paused_at = next[0];
    assert_eq!(c.position(&tp0, None).unwrap(), paused_at);
    // Partition 1 runs to its end; partition 0 yields nothing, buffered records included.
    let deadline = Instant::now() + Duration::from_secs(20);
    while next[1] < 300 {
        assert!(
            Instant::now() < deadline,
            "partition 1 stalled at {}",
            next[1]
        );
        for r in c.poll(Duration::from_millis(200)).unwrap() {
            assert_eq!(
                r.partition, 1,
                "a record of paused partition 0 at offset {}",
                r.offset
            );
            assert_eq!(r.offset, next[1]);
            next[1] += 1;
        }
    }
    // More records for both: still only partition 1's.
    produce(&bs, &topic, 0, 300..310, base);
    produce(&bs, &topic, 1, 300..310, base);
    let got = poll_exactly(&c, 10, Duration::from_secs(10));
    assert!(got.iter().all(|r| r.partition == 1));
    assert_eq!(c.position(&tp0, None).unwrap(), paused_at);

    c.resume(std::slice::from_ref(&tp0)).unwrap();
    assert!(c.paused().is_empty());
    let got = poll_exactly(&c, (310 - paused_at) as usize, Duration::from_secs(15));
    assert!(got.iter().all(|r| r.partition == 0));
    assert_eq!(offsets(&got), (paused_at..310).collect::<Vec<_>>());
    assert!(matches!(
        c.pause(&[TopicPartition::new(&topic, 7)]),
        Err(Error::IllegalState(_))
    ));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn auto_offset_reset_latest_reads_only_new_records() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-latest", 1);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..50, base);
    let tp = TopicPartition::new(&topic, 0);
    let c = consumer(&bs, &[("auto.offset.reset", "latest")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    assert_eq!(c.position(&tp, None).unwrap(), 50);
    poll_exactly(&c, 0, Duration::from_millis(500));
    produce(&bs, &topic, 0, 50..60, base);
    let got = poll_exactly(&c, 10, Duration::from_secs(10));
    assert_eq!(offsets(&got), (50..60).collect::<Vec<_>>());
    assert_eq!(value(&got[0]), "p0-50");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn offset_out_of_range_resets_to_earliest() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-oor-earliest", 1);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..20, base);
    let tp = TopicPartition::new(&topic, 0);
    let c = consumer(&bs, &[("auto.offset.reset", "earliest")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    c.seek(&tp, 1000).unwrap();
    let (pos, seen) = wait_position_change(&c, &tp, 1000);
    assert!(
        seen.is_empty() || seen[0].offset == 0,
        "{:?}",
        offsets(&seen)
    );
    assert!(pos <= 20, "position {pos} after the reset");
    let mut all = seen;
    all.extend(poll_exactly(&c, 20 - all.len(), Duration::from_secs(10)));
    assert_eq!(offsets(&all), (0..20).collect::<Vec<_>>());
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn offset_out_of_range_resets_to_latest() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-oor-latest", 1);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..20, base);
    let tp = TopicPartition::new(&topic, 0);
    let c = consumer(&bs, &[("auto.offset.reset", "latest")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    c.seek(&tp, 1000).unwrap();
    let (pos, seen) = wait_position_change(&c, &tp, 1000);
    assert!(seen.is_empty(), "{:?}", offsets(&seen));
    assert_eq!(pos, 20);
    produce(&bs, &topic, 0, 20..25, base);
    let got = poll_exactly(&c, 5, Duration::from_secs(10));
    assert_eq!(offsets(&got), (20..25).collect::<Vec<_>>());
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn offset_out_of_range_with_reset_none_is_no_offset() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-oor-none", 1);
    let base = now_ms() - BASE_AGO;
    produce(&bs, &topic, 0, 0..5, base);
    let tp = TopicPartition::new(&topic, 0);
    let c = consumer(&bs, &[("auto.offset.reset", "none")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    c.seek(&tp, 1000).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let e = loop {
        match c.poll(Duration::from_millis(200)) {
            Ok(rs) => assert!(rs.is_empty()),
            Err(e) => break e,
        }
        assert!(
            Instant::now() < deadline,
            "no error for the out-of-range offset"
        );
    };
    assert!(
        matches!(&e, Error::NoOffset(p) if p.topic == topic && p.partition == 0),
        "{e}"
    );
    // The application seeks, and reading goes on.
    c.seek(&tp, 3).unwrap();
    assert_eq!(
        offsets(&poll_exactly(&c, 2, Duration::from_secs(10))),
        vec![3, 4]
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn max_poll_records_is_respected() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-max-poll", 3);
    let base = now_ms() - BASE_AGO;
    for p in 0..3 {
        produce(&bs, &topic, p, 0..100, base);
    }
    let c = consumer(
        &bs,
        &[("auto.offset.reset", "earliest"), ("max.poll.records", "7")],
    );
    c.assign(
        &(0..3)
            .map(|p| TopicPartition::new(&topic, p))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mut total = 0;
    let mut full = 0;
    let mut next = [0i64; 3];
    let deadline = Instant::now() + Duration::from_secs(20);
    while total < 300 {
        assert!(Instant::now() < deadline, "only {total} of 300");
        let rs = c.poll(Duration::from_millis(500)).unwrap();
        assert!(rs.len() <= 7, "poll returned {} records", rs.len());
        if rs.len() == 7 {
            full += 1;
        }
        for r in rs {
            assert_eq!(r.offset, next[r.partition as usize]);
            next[r.partition as usize] += 1;
            total += 1;
        }
    }
    assert!(
        full >= 30,
        "only {full} polls were full: the limit, not the buffer, should bound them"
    );
    assert_eq!(c.config().max_poll_records, 7);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn wakeup_ends_a_blocked_poll_at_once() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-wakeup", 1);
    let tp = TopicPartition::new(&topic, 0);
    let c = consumer(&bs, &[("auto.offset.reset", "earliest")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    assert!(c.poll(Duration::from_millis(300)).unwrap().is_empty());

    std::thread::scope(|s| {
        let waker = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            let at = Instant::now();
            c.wakeup();
            at
        });
        let started = Instant::now();
        let r = c.poll(Duration::from_secs(30));
        let returned = Instant::now();
        let woken_at = waker.join().unwrap();
        assert!(matches!(r, Err(Error::Wakeup)), "{r:?}");
        assert!(returned >= woken_at);
        let lag = returned - woken_at;
        // "At once": well below poll's 30 s, with room for a loaded 2-core machine.
        assert!(
            lag < Duration::from_millis(500),
            "poll returned {lag:?} after wakeup()"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    });
    // The wakeup is consumed: the next poll works normally.
    assert!(c.poll(Duration::from_millis(200)).unwrap().is_empty());
    // A wakeup before poll() ends the next poll at once.
    c.wakeup();
    let t = Instant::now();
    assert!(matches!(
        c.poll(Duration::from_secs(30)),
        Err(Error::Wakeup)
    ));
    assert!(t.elapsed() < Duration::from_millis(500));
    // And records still flow afterwards.
    produce(&bs, &topic, 0, 0..3, now_ms());
    assert_eq!(
        offsets(&poll_exactly(&c, 3, Duration::from_secs(10))),
        vec![0, 1, 2]
    );
}

/// A manually assigned consumer with a `group.id` commits through the group coordinator without
/// joining; the callback of its asynchronous commit runs on the caller's thread, inside a later
/// `poll()`, never on an I/O thread, and the commit is visible through `committed()`.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn async_commit_callback_of_a_manually_assigned_consumer_runs_inside_poll() {
    use std::sync::{Arc, Mutex};
    let bs = bootstrap();
    let topic = new_topic(&bs, "api-async-commit", 1);
    let tp = TopicPartition::new(&topic, 0);
    produce(&bs, &topic, 0, 0..10, now_ms());
    let group = unique_name("api-async-commit");
    let c = consumer(
        &bs,
        &[
            ("group.id", group.as_str()),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ],
    );
    c.assign(std::slice::from_ref(&tp)).unwrap();
    assert_eq!(
        offsets(&poll_exactly(&c, 10, Duration::from_secs(30))),
        (0..10).collect::<Vec<_>>()
    );
    let ran: Arc<Mutex<Vec<(std::thread::ThreadId, bool)>>> = Arc::default();
    let ran2 = ran.clone();
    c.commit_async(
        None,
        Some(Box::new(move |r| {
            ran2.lock()
                .unwrap()
                .push((std::thread::current().id(), r.is_ok()));
        })),
    )
    .unwrap();
    // The commit completes meanwhile, but its callback waits for this thread.
    wait_until(
        "the asynchronous commit reached the group",
        Duration::from_secs(30),
        || {
            let committed = c.committed(std::slice::from_ref(&tp), None).unwrap();
            committed[0].1.as_ref().map(|o| o.offset) == Some(10)
        },
    );
    assert!(
        ran.lock().unwrap().is_empty(),
        "the callback ran outside poll()"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while ran.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the callback never ran");
        c.poll(Duration::from_millis(100)).unwrap();
    }
    assert_eq!(
        *ran.lock().unwrap(),
        vec![(std::thread::current().id(), true)]
    );
    let committed = c.committed(std::slice::from_ref(&tp), None).unwrap();
    assert_eq!(committed[0].1.as_ref().map(|o| o.offset), Some(10));
    c.close(None).unwrap();
}

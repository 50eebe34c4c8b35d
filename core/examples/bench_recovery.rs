//! The recovery figure of `bench/run` (KIP-333), one mode per run:
//! `bench_recovery <bootstrap> <on|off|threads|shared> <backlog records> <partitions> <records/s> <window s> <work µs per record> [recovery threads]`.
//!
//! A takeover with a backlog under steady load. On a fresh topic: 1,000 records per partition
//! that a departed member processed (it commits their end C and leaves the group), then a backlog
//! of `backlog records` (round-robin over the partitions; the log end E after them), then a
//! producer thread writing `records/s` without pause. One second later the taking-over member
//! subscribes (`enable.parallel.rebalance` = on or off, auto-commit on) and processes every record
//! it gets: `work µs per record` of simulated I/O, slept once per poll for the whole poll.
//! `threads` is the mode on with `parallel.rebalance.recovery.poll`: the main stream's records
//! are processed on the thread calling `poll()`, the recovery streams' on a second thread calling
//! `recovery_poll()`, each at the same `work µs per record`; `recovery threads` (default 1, what
//! `bench/run` uses) runs that many threads calling `recovery_poll()`. `shared` is `threads` with
//! the `poll()` thread also taking a batch of the backlog (`HELP_BATCH` records, about a
//! millisecond of work) from `recovery_poll()` after each poll while a backlog drains: two
//! processing threads share the backlog and one of them serves the fresh records first.
//!
//! Every record's value holds its send time (µs since the epoch), so a delivery (the return of
//! the `poll()` holding it) gives its produce-to-delivery latency. Prints `PHASE <what>` while it
//! runs and one `RESULT key=value ...` line at the end, with times from `subscribe()`:
//! the assignment; the first record newer than the backlog (offset ≥ E); the latency of records
//! produced in the first `window s` after the assignment (p50, p99, max); when the backlog was
//! delivered (every offset below E, and every record produced before the assignment); and the
//! offsets from C on that never came (`missing`, checked up to the log end once the producer
//! stopped). Exits 1, after the RESULT line, when any offset is missing.
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use bytes::{BufMut, Bytes, BytesMut};
use lagless::{
    Config, Consumer, ConsumerRecord, OffsetAndMetadata, Producer, ProducerRecord,
    RebalanceListener, TopicPartition,
};

const VALUE_BYTES: usize = 100;
/// Records per partition the departed member processed before the backlog.
const PROCESSED_PER_PARTITION: u64 = 1_000;
/// How long the producer runs before the takeover starts.
const LEAD_IN: Duration = Duration::from_secs(1);
/// Give up (and report what is missing) this long after `subscribe()`.
const DEADLINE_S: i64 = 300;
/// `shared`: the backlog records the poll() thread takes after each poll; at 20 µs a record, a
/// millisecond of work before it polls again.
const HELP_BATCH: usize = 50;

/// Value kinds: records processed before the takeover, the backlog, the steady producer's.
const PROCESSED: u8 = b'C';
const BACKLOG: u8 = b'B';
const STEADY: u8 = b'F';

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A kind byte, the send time in µs (big-endian), and padding to `VALUE_BYTES`.
fn value(kind: u8, sent_us: i64) -> Bytes {
    let mut v = BytesMut::with_capacity(VALUE_BYTES);
    v.put_u8(kind);
    v.put_i64(sent_us);
    v.resize(VALUE_BYTES, b'.');
    v.freeze()
}

fn parse_value(v: &[u8]) -> Option<(u8, i64)> {
    let sent = i64::from_be_bytes(v.get(1..9)?.try_into().ok()?);
    Some((v[0], sent))
}

fn phase(what: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "PHASE {what}").ok();
    out.flush().ok();
}

/// Writes `n` records round-robin over the partitions with the batching of `bench_produce`
/// (batch.size 64 KiB, linger 20 ms, acks=1) and waits until all are acknowledged.
fn load(bs: &str, topic: &str, partitions: i32, n: u64, kind: u8) -> Result<()> {
    let producer = Producer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bs),
        ("client.id", "bench-recovery-load"),
        ("acks", "1"),
        ("linger.ms", "20"),
        ("batch.size", "65536"),
        ("buffer.memory", "67108864"),
    ])?)?;
    let failed = Arc::new(AtomicU64::new(0));
    for i in 0..n {
        let failed = failed.clone();
        let record = ProducerRecord::new(topic, value(kind, now_us()))
            .with_partition((i % partitions as u64) as i32);
        producer.send_with_callback(record, move |r| {
            if r.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        })?;
    }
    producer.flush(Duration::from_secs(600))?;
    producer.close(Duration::from_secs(10))?;
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        bail!("{failed} of {n} records were not acknowledged");
    }
    Ok(())
}

/// The steady producer: `rate` records/s round-robin over the partitions (linger 5 ms, acks=1),
/// each stamped with the time it was handed to `send()`, until stopped.
struct Steady {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<lagless::Result<(u64, u64)>>>,
}

impl Steady {
    fn start(bs: &str, topic: &str, partitions: i32, rate: f64) -> lagless::Result<Steady> {
        let producer = Producer::from_config(&Config::from_pairs([
            ("bootstrap.servers", bs),
            ("client.id", "bench-recovery-steady"),
            ("acks", "1"),
            ("linger.ms", "5"),
        ])?)?;
        producer.partitions_for(topic)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (topic, stop2) = (topic.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let failed = Arc::new(AtomicU64::new(0));
            let t0 = std::time::Instant::now();
            let mut sent: u64 = 0;
            while !stop2.load(Ordering::Relaxed) {
                let due = t0 + Duration::from_secs_f64(sent as f64 / rate);
                let now = std::time::Instant::now();
                if due > now {
                    std::thread::sleep((due - now).min(Duration::from_millis(1)));
                    continue;
                }
                let failed = failed.clone();
                let record = ProducerRecord::new(topic.as_str(), value(STEADY, now_us()))
                    .with_partition((sent % partitions as u64) as i32);
                producer.send_with_callback(record, move |r| {
                    if r.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                })?;
                sent += 1;
            }
            producer.flush(Duration::from_secs(60))?;
            producer.close(Duration::from_secs(10))?;
            Ok((sent, failed.load(Ordering::Relaxed)))
        });
        Ok(Steady {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops, waits until everything sent is acknowledged, and returns (sent, failed).
    fn stop(mut self) -> lagless::Result<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("producer thread")
    }
}

impl Drop for Steady {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Records when partitions were first assigned (µs since the epoch).
struct Assigned(Arc<Mutex<Option<i64>>>);

impl RebalanceListener for Assigned {
    fn on_partitions_assigned(
        &mut self,
        _consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        if !partitions.is_empty() {
            self.0.lock().unwrap().get_or_insert_with(now_us);
        }
        Ok(())
    }
}

fn log_ends(probe: &Consumer, tps: &[TopicPartition]) -> lagless::Result<Vec<i64>> {
    let ends = probe.end_offsets(tps, Some(Duration::from_secs(30)))?;
    Ok(tps
        .iter()
        .map(|tp| ends.iter().find(|(t, _)| t == tp).expect("end offset").1)
        .collect())
}

/// Commits `offsets` for `group` as a member that then leaves: the group's state once the
/// partitions' previous owner is gone.
fn commit_as_departed_member(
    bs: &str,
    group: &str,
    topic: &str,
    offsets: &[(TopicPartition, i64)],
) -> Result<()> {
    let c = Consumer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bs),
        ("client.id", "bench-recovery-departed"),
        ("group.id", group),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "latest"),
    ])?)?;
    c.subscribe(&[topic], None)?;
    let t = std::time::Instant::now();
    while c.assignment().len() < offsets.len() {
        if t.elapsed() > Duration::from_secs(60) {
            bail!("the departed member got no assignment within 60 s");
        }
        c.poll(Duration::from_millis(100))?;
    }
    let commit: Vec<(TopicPartition, OffsetAndMetadata)> = offsets
        .iter()
        .map(|(tp, o)| {
            (
                tp.clone(),
                OffsetAndMetadata {
                    offset: *o,
                    metadata: String::new(),
                },
            )
        })
        .collect();
    c.commit_sync(Some(&commit), None)?;
    c.close(Some(Duration::from_secs(10)))?;
    Ok(())
}

/// How often each offset from C on was delivered, per partition.
struct Deliveries {
    committed: Vec<i64>,
    counts: Vec<Vec<u8>>,
}

impl Deliveries {
    /// Counts a delivery; returns whether it was the offset's first.
    fn add(&mut self, partition: usize, offset: i64) -> bool {
        let i = (offset - self.committed[partition]) as usize;
        let c = &mut self.counts[partition];
        if c.len() <= i {
            c.resize(i + 1, 0);
        }
        c[i] = c[i].saturating_add(1);
        c[i] == 1
    }

    /// Offsets in [C, end) of each partition never delivered.
    fn missing(&self, ends: &[i64]) -> i64 {
        (0..ends.len())
            .map(|p| {
                let want = (ends[p] - self.committed[p]).max(0) as usize;
                let c = &self.counts[p];
                (0..want)
                    .filter(|&i| c.get(i).copied().unwrap_or(0) == 0)
                    .count() as i64
            })
            .sum()
    }
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 8 || !matches!(args[2].as_str(), "on" | "off" | "threads" | "shared") {
        eprintln!(
            "usage: bench_recovery <bootstrap> <on|off|threads|shared> <backlog records> \
             <partitions> <records/s> <window s> <work µs per record> [recovery threads]"
        );
        std::process::exit(2);
    }
    let bs = args[1].as_str();
    let mode_on = args[2] != "off";
    let poll_thread_helps = args[2] == "shared";
    let recovery_thread = args[2] == "threads" || poll_thread_helps;
    let backlog: u64 = args[3].parse().expect("backlog records");
    let partitions: i32 = args[4].parse().expect("partitions");
    let rate: f64 = args[5].parse().expect("records/s");
    let window_us = (args[6].parse::<f64>().expect("window s") * 1e6) as i64;
    let work_us: u64 = args[7].parse().expect("work µs per record");
    let recovery_threads: usize = args
        .get(8)
        .map_or(1, |a| a.parse().expect("recovery threads"));

    let stamp = now_us();
    let topic = format!("recovery-{}-{stamp}", args[2]);
    let group = format!("g-{topic}");
    lagless::admin::create_topic(bs, &topic, partitions, 1)?;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    let probe = Consumer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bs),
        ("client.id", "bench-recovery-probe"),
    ])?)?;

    phase("processed records and the departed member's commit");
    load(
        bs,
        &topic,
        partitions,
        PROCESSED_PER_PARTITION * partitions as u64,
        PROCESSED,
    )?;
    let committed = log_ends(&probe, &tps)?;
    let offsets: Vec<(TopicPartition, i64)> =
        tps.iter().cloned().zip(committed.iter().copied()).collect();
    commit_as_departed_member(bs, &group, &topic, &offsets)?;

    phase(&format!("backlog of {backlog} records"));
    let t = std::time::Instant::now();
    load(bs, &topic, partitions, backlog, BACKLOG)?;
    let backlog_load_s = t.elapsed().as_secs_f64();
    let backlog_end = log_ends(&probe, &tps)?;
    let backlog_total: i64 = (0..tps.len()).map(|p| backlog_end[p] - committed[p]).sum();

    phase(&format!("steady producer at {rate} records/s"));
    let steady = Steady::start(bs, &topic, partitions, rate)?;
    std::thread::sleep(LEAD_IN);

    phase(&format!(
        "takeover, enable.parallel.rebalance={}{}",
        if mode_on { "true" } else { "false" },
        if recovery_thread {
            ", parallel.rebalance.recovery.poll=true"
        } else {
            ""
        }
    ));
    let consumer = Arc::new(Consumer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bs),
        ("client.id", "bench-recovery"),
        ("group.id", group.as_str()),
        ("enable.auto.commit", "true"),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "500"),
        (
            "enable.parallel.rebalance",
            if mode_on { "true" } else { "false" },
        ),
        (
            "parallel.rebalance.recovery.poll",
            if recovery_thread { "true" } else { "false" },
        ),
    ])?)?);
    let assigned = Arc::new(Mutex::new(None));
    let t_sub = now_us();
    consumer.subscribe(
        &[topic.as_str()],
        Some(Box::new(Assigned(assigned.clone()))),
    )?;

    let mut seen = Deliveries {
        committed: committed.clone(),
        counts: vec![Vec::new(); tps.len()],
    };
    let mut backlog_left = backlog_total;
    let (mut backlog_done, mut first_newer) = (None, None);
    // (sent, delivered, from a recovery stream) of the steady producer's records, first deliveries.
    let mut steady_records: Vec<(i64, i64, bool)> = Vec::new();
    let (mut from_recovery, mut from_main, mut again, mut below_committed) =
        (0u64, 0u64, 0u64, 0u64);
    let (mut recovery_seen, mut recovery_end) = (false, None);
    let mut steady = Some(steady);
    let (mut final_end, mut produced) = (None::<Vec<i64>>, (0, 0));
    let mut last_progress = t_sub;
    let mut distinct: i64 = 0;
    // `threads`: the recovery thread processes its records and hands them here, with the time
    // its recovery_poll() returned them, for the same accounting.
    let stop_recovery = Arc::new(AtomicBool::new(false));
    let (recovered_tx, recovered_rx) = mpsc::channel::<(Vec<ConsumerRecord>, i64)>();
    let recovery_workers: Vec<_> = (0..if recovery_thread { recovery_threads } else { 0 })
        .map(|_| {
            let (consumer, stop) = (consumer.clone(), stop_recovery.clone());
            let recovered_tx = recovered_tx.clone();
            std::thread::spawn(move || -> lagless::Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    let records = consumer.recovery_poll(Duration::from_millis(100))?;
                    let t = now_us();
                    if records.is_empty() {
                        continue;
                    }
                    if work_us > 0 {
                        std::thread::sleep(Duration::from_micros(work_us * records.len() as u64));
                    }
                    if recovered_tx.send((records, t)).is_err() {
                        break;
                    }
                }
                // The last batch is processed: this call says so, so the final commit counts it.
                consumer.recovery_poll(Duration::ZERO)?;
                Ok(())
            })
        })
        .collect();
    let mut helped = 0;
    loop {
        // `shared`: no wait in poll() while the last help found backlog records to process.
        let wait = if helped > 0 { 0 } else { 100 };
        let polled = consumer.poll(Duration::from_millis(wait))?;
        let t_polled = now_us();
        let mut batches = vec![(polled, t_polled)];
        helped = 0;
        if poll_thread_helps && consumer.child_consumer_is_alive() {
            let help = consumer.recovery_poll_at_most(Duration::ZERO, HELP_BATCH)?;
            helped = help.len();
            batches.push((help, now_us()));
        }
        // Processed on this thread, below: the poll's records and the help.
        let records_polled = batches.iter().map(|(b, _)| b.len()).sum::<usize>();
        batches.extend(recovered_rx.try_iter());
        for (records, t) in &batches {
            let t = *t;
            for r in records {
                let p = r.partition as usize;
                if r.offset < committed[p] {
                    below_committed += 1;
                    continue;
                }
                if r.from_recovery {
                    from_recovery += 1;
                } else {
                    from_main += 1;
                }
                if !seen.add(p, r.offset) {
                    again += 1;
                    continue;
                }
                distinct += 1;
                if r.offset < backlog_end[p] {
                    backlog_left -= 1;
                    if backlog_left == 0 {
                        backlog_done = Some(t);
                    }
                } else if first_newer.is_none() {
                    first_newer = Some(t);
                }
                if let Some((STEADY, sent)) = r.value.as_deref().and_then(parse_value) {
                    steady_records.push((sent, t, r.from_recovery));
                }
            }
        }
        let t = t_polled;
        if consumer.child_consumer_is_alive() {
            recovery_seen = true;
        } else if recovery_seen && recovery_end.is_none() {
            recovery_end = Some(t);
        }
        if work_us > 0 && records_polled > 0 {
            std::thread::sleep(Duration::from_micros(work_us * records_polled as u64));
        }
        let t_assign = *assigned.lock().unwrap();
        if t - last_progress >= 1_000_000 {
            last_progress = t;
            phase(&format!(
                "{:.0} s: {} of {backlog_total} backlog records delivered, {} newer",
                (t - t_sub) as f64 / 1e6,
                backlog_total - backlog_left,
                distinct - (backlog_total - backlog_left)
            ));
        }
        // Once the backlog is in and the window is over, stop the producer and read the rest.
        if final_end.is_none()
            && backlog_left == 0
            && t_assign.is_some_and(|a| now_us() >= a + window_us)
        {
            produced = steady.take().unwrap().stop()?;
            final_end = Some(log_ends(&probe, &tps)?);
            phase("producer stopped; reading up to the log end");
        }
        if let Some(end) = &final_end {
            let want: i64 = (0..tps.len()).map(|p| end[p] - committed[p]).sum();
            if distinct >= want {
                break;
            }
        }
        if t - t_sub > DEADLINE_S * 1_000_000 {
            eprintln!("gave up {DEADLINE_S} s after subscribe()");
            break;
        }
    }
    if let Some(s) = steady.take() {
        produced = s.stop()?;
    }
    if poll_thread_helps {
        // Its last help is processed.
        consumer.recovery_poll(Duration::ZERO)?;
    }
    stop_recovery.store(true, Ordering::Relaxed);
    for w in recovery_workers {
        w.join().expect("recovery thread")?;
    }
    let end = match final_end {
        Some(e) => e,
        None => log_ends(&probe, &tps)?,
    };
    let missing = seen.missing(&end);
    let recovery_still_active = consumer.child_consumer_is_alive();
    consumer.close(Some(Duration::from_secs(10)))?;
    probe.close(Some(Duration::from_secs(5)))?;

    let t_assign = assigned.lock().unwrap().unwrap_or(i64::MAX);
    let since = |t: Option<i64>| t.map_or(f64::NAN, |t| (t - t_sub) as f64 / 1e6);
    // Fresh: produced in the window after the assignment. Join-time: produced before it, and so
    // part of the backlog the member found.
    let mut fresh: Vec<f64> = steady_records
        .iter()
        .filter(|(s, _, _)| *s >= t_assign && *s < t_assign + window_us)
        .map(|(s, d, _)| (d - s) as f64 / 1e3)
        .collect();
    fresh.sort_by(f64::total_cmp);
    let fresh_via_recovery = steady_records
        .iter()
        .filter(|(s, _, r)| *r && *s >= t_assign && *s < t_assign + window_us)
        .count();
    let join_time: Vec<&(i64, i64, bool)> = steady_records
        .iter()
        .filter(|(s, _, _)| *s < t_assign)
        .collect();
    let join_max_ms = join_time
        .iter()
        .map(|(s, d, _)| (d - s) as f64 / 1e3)
        .fold(0.0, f64::max);
    let drained = backlog_done.and_then(|b| join_time.iter().map(|(_, d, _)| *d).chain([b]).max());
    println!(
        "RESULT mode={} backlog={backlog_total} backlog_load_s={backlog_load_s:.2} \
         join_records={} produced={} produce_failed={} assign_s={:.3} first_newer_s={:.3} \
         fresh_records={} fresh_p50_ms={:.1} fresh_p99_ms={:.1} fresh_max_ms={:.1} \
         fresh_via_recovery={fresh_via_recovery} join_max_ms={join_max_ms:.1} \
         backlog_offsets_s={:.3} drained_s={:.3} recovery_end_s={:.3} from_recovery={from_recovery} \
         from_main={from_main} redelivered={again} below_committed={below_committed} \
         delivered={distinct} missing={missing} recovery_still_active={recovery_still_active}",
        args[2],
        join_time.len(),
        produced.0,
        produced.1,
        (t_assign - t_sub) as f64 / 1e6,
        since(first_newer),
        fresh.len(),
        percentile(&fresh, 0.50),
        percentile(&fresh, 0.99),
        fresh.last().copied().unwrap_or(f64::NAN),
        since(backlog_done),
        since(drained),
        since(recovery_end),
    );
    if missing > 0 {
        eprintln!(
            "FAILURE: {missing} offsets from the committed offset on were never delivered \
             (enable.parallel.rebalance={})",
            args[2]
        );
        std::process::exit(1);
    }
    Ok(())
}

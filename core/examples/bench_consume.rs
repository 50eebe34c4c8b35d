//! The lagless side of `bench/run`: `bench_consume <bootstrap> <topic> <partitions> <records>`.
//! Assigns partitions 0..N of the topic from offset 0 (no group) and polls until `records` records
//! arrived, counting key+value bytes. Prints, for the runner:
//!   START <cpu ticks>                 just before assign (the timed interval begins)
//!   PROGRESS <records>                about once a second
//!   RESULT <records> <bytes> <seconds> <cpu ticks>
//! where cpu ticks are utime+stime of this process from /proc/self/stat.
//!
//! `BENCH_LOOP=async-stream` reads through `lagless::aio::Consumer::stream()` on a two-worker
//! tokio runtime instead of the blocking `poll()`, the same records counted the same way;
//! `BENCH_LOOP=async-batch` through `recv_batch(500)`. With `BENCH_GROUP=<group.id>` the
//! consumer subscribes in that group instead of assigning (the group steps of each poll
//! included in what is measured).
use std::io::Write;
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, ConsumerRecord, TopicPartition};

/// Counts records and key+value bytes, and prints progress about once a second.
struct Tally<W: Write> {
    out: W,
    n: u64,
    bytes: u64,
    next_report: Instant,
}

impl<W: Write> Tally<W> {
    fn add(&mut self, r: &ConsumerRecord) {
        self.n += 1;
        self.bytes += r.key.as_ref().map_or(0, |k| k.len()) as u64
            + r.value.as_ref().map_or(0, |v| v.len()) as u64;
    }

    fn report(&mut self) {
        let now = Instant::now();
        if now >= self.next_report {
            writeln!(self.out, "PROGRESS {}", self.n).ok();
            self.out.flush().ok();
            self.next_report = now + Duration::from_secs(1);
        }
    }
}

/// The async loops: one record at a time from the stream, as a tokio service reads, or
/// `recv_batch(500)` (`batches`), the async twin of the blocking loop's `poll()`.
fn run_async(
    config: &Config,
    tps: &[TopicPartition],
    want: u64,
    batches: bool,
) -> lagless::Result<()> {
    use std::future::poll_fn;
    use std::pin::Pin;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let consumer = lagless::aio::Consumer::from_config(config)?;
        let mut tally = Tally {
            out: std::io::stdout().lock(),
            n: 0,
            bytes: 0,
            next_report: Instant::now() + Duration::from_secs(1),
        };
        writeln!(tally.out, "START {}", cpu_ticks()).ok();
        tally.out.flush().ok();
        let t = Instant::now();
        match tps
            .first()
            .filter(|_| matches!(config.get("group.id"), Ok(Some(_))))
        {
            Some(tp) => consumer.subscribe(&[&tp.topic], None)?,
            None => consumer.assign(tps)?,
        }
        // A watchdog instead of a timeout per record (a timer per record would be the bench's
        // own cost): the run fails when no record came for 60 s.
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let watched = seen.clone();
        tokio::spawn(async move {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                let now = watched.load(std::sync::atomic::Ordering::Relaxed);
                if now == last {
                    eprintln!("no records for 60 s after {now} of {want}");
                    std::process::exit(1);
                }
                last = now;
            }
        });
        if batches {
            while tally.n < want {
                for r in consumer.recv_batch(500).await? {
                    tally.add(&r);
                }
                seen.store(tally.n, std::sync::atomic::Ordering::Relaxed);
                tally.report();
            }
        } else {
            let mut stream = consumer.stream();
            while tally.n < want {
                match poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut stream), cx)).await
                {
                    Some(r) => tally.add(&r?),
                    None => break,
                }
                if tally.n % 4096 == 0 {
                    seen.store(tally.n, std::sync::atomic::Ordering::Relaxed);
                    tally.report();
                }
            }
        }
        let secs = t.elapsed().as_secs_f64();
        writeln!(
            tally.out,
            "RESULT {} {} {secs:.6} {}",
            tally.n,
            tally.bytes,
            cpu_ticks()
        )
        .ok();
        tally.out.flush().ok();
        consumer.close().await
    })
}

fn cpu_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is [0]; utime is field 14 of the line, [11] here.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn main() -> lagless::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: bench_consume <bootstrap> <topic> <partitions> <records>");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[1], &args[2]);
    let partitions: i32 = args[3].parse().expect("partitions");
    let want: u64 = args[4].parse().expect("records");
    let mut config = Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("client.id", "bench-lagless"),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("fetch.max.bytes", "52428800"),
        ("max.partition.fetch.bytes", "1048576"),
        ("fetch.max.wait.ms", "500"),
        ("check.crcs", "true"),
    ])?;
    // bench/run --tls: the security settings, one `key=value` a line.
    for line in std::env::var("BENCH_CONFIG").unwrap_or_default().lines() {
        if let Some((k, v)) = line.split_once('=') {
            config.set(k, v)?;
        }
    }
    if let Ok(group) = std::env::var("BENCH_GROUP") {
        config.set("group.id", &group)?;
    }
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic.as_str(), p))
        .collect();
    match std::env::var("BENCH_LOOP").as_deref() {
        Ok("async-stream") => return run_async(&config, &tps, want, false),
        Ok("async-batch") => return run_async(&config, &tps, want, true),
        _ => {}
    }
    let consumer = Consumer::from_config(&config)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "START {}", cpu_ticks()).ok();
    out.flush().ok();
    let t = Instant::now();
    if matches!(config.get("group.id"), Ok(Some(_))) {
        consumer.subscribe(&[topic], None)?;
    } else {
        consumer.assign(&tps)?;
    }
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut last_data = Instant::now();
    let mut next_report = Instant::now() + Duration::from_secs(1);
    while n < want {
        let records = consumer.poll(Duration::from_millis(1000))?;
        if records.is_empty() {
            if last_data.elapsed() > Duration::from_secs(60) {
                eprintln!("no records for 60 s after {n} of {want}");
                std::process::exit(1);
            }
            continue;
        }
        last_data = Instant::now();
        for r in &records {
            bytes += r.key.as_ref().map_or(0, |k| k.len()) as u64
                + r.value.as_ref().map_or(0, |v| v.len()) as u64;
        }
        n += records.len() as u64;
        if last_data >= next_report {
            writeln!(out, "PROGRESS {n}").ok();
            out.flush().ok();
            next_report = last_data + Duration::from_secs(1);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    writeln!(out, "RESULT {n} {bytes} {secs:.6} {}", cpu_ticks()).ok();
    out.flush().ok();
    consumer.close(Some(Duration::from_secs(5)))
}

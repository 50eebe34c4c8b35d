//! The lagless side of `bench/run`: `bench_consume <bootstrap> <topic> <partitions> <records>`.
//! Assigns partitions 0..N of the topic from offset 0 (no group) and polls until `records` records
//! arrived, counting key+value bytes. Prints, for the runner:
//!   START <cpu ticks>                 just before assign (the timed interval begins)
//!   PROGRESS <records>                about once a second
//!   RESULT <records> <bytes> <seconds> <cpu ticks>
//! where cpu ticks are utime+stime of this process from /proc/self/stat.
use std::io::Write;
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, TopicPartition};

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
    let consumer = Consumer::from_config(&config)?;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic.as_str(), p))
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "START {}", cpu_ticks()).ok();
    out.flush().ok();
    let t = Instant::now();
    consumer.assign(&tps)?;
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

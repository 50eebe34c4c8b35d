//! rust-rdkafka's side of `bench/run`: `bench-rdkafka <bootstrap> <topic> <partitions> <records>`.
//! The bench's common settings, partitions 0..N assigned from offset 0 (no group), one message at
//! a time until `records` messages arrived, counting key+value bytes: a `BaseConsumer` and its
//! `poll()`, or with `BENCH_LOOP=stream` a `StreamConsumer` and `recv().await` on a two-worker
//! tokio runtime (what a tokio service would pick). With `BENCH_GROUP=<group.id>` it subscribes
//! in that group instead of assigning. Same line protocol as core/examples/bench_consume.rs:
//!   START <cpu ticks>                 just before assign (the timed interval begins)
//!   PROGRESS <records>                about once a second
//!   RESULT <records> <bytes> <seconds> <cpu ticks>
use std::io::Write;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

fn cpu_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is [0]; utime is field 14 of the line, [11] here.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {e}");
    std::process::exit(1)
}

/// Counts messages and key+value bytes; prints progress about once a second and fails the run
/// after 60 s without a message.
struct Tally {
    out: std::io::StdoutLock<'static>,
    n: u64,
    bytes: u64,
    want: u64,
    started: Instant,
    last_data: Instant,
    next_report: Instant,
}

impl Tally {
    fn start(want: u64) -> Tally {
        let mut out = std::io::stdout().lock();
        writeln!(out, "START {}", cpu_ticks()).ok();
        out.flush().ok();
        let now = Instant::now();
        Tally {
            out,
            n: 0,
            bytes: 0,
            want,
            started: now,
            last_data: now,
            next_report: now + Duration::from_secs(1),
        }
    }

    fn done(&self) -> bool {
        self.n >= self.want
    }

    fn add(&mut self, m: &impl Message) {
        self.bytes += (m.key().map_or(0, |k| k.len()) + m.payload().map_or(0, |p| p.len())) as u64;
        self.n += 1;
        // Reading the clock per message would be a cost the other clients do not pay.
        if self.n % 4096 == 0 {
            self.last_data = Instant::now();
            if self.last_data >= self.next_report {
                writeln!(self.out, "PROGRESS {}", self.n).ok();
                self.out.flush().ok();
                self.next_report = self.last_data + Duration::from_secs(1);
            }
        }
    }

    fn nothing(&self) {
        if self.last_data.elapsed() > Duration::from_secs(60) {
            fail(
                "no records for 60 s",
                format!("{} of {}", self.n, self.want),
            );
        }
    }

    fn finish(mut self) {
        let secs = self.started.elapsed().as_secs_f64();
        writeln!(
            self.out,
            "RESULT {} {} {secs:.6} {}",
            self.n,
            self.bytes,
            cpu_ticks()
        )
        .ok();
        self.out.flush().ok();
    }
}

/// Assigns partitions 0..N from offset 0, or subscribes in `group`.
fn start(c: &impl Consumer, topic: &str, partitions: i32, group: Option<&str>) {
    let started = match group {
        Some(_) => c.subscribe(&[topic]),
        None => {
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition_offset(topic, p, Offset::Beginning)
                    .expect("partition");
            }
            c.assign(&tpl)
        }
    };
    if let Err(e) = started {
        fail("assign/subscribe", e);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: bench-rdkafka <bootstrap> <topic> <partitions> <records>");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[1], args[2].as_str());
    let partitions: i32 = args[3].parse().expect("partitions");
    let want: u64 = args[4].parse().expect("records");
    let group = std::env::var("BENCH_GROUP").ok().filter(|g| !g.is_empty());
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-rdkafka")
        // librdkafka needs a group id even for manual assignment; no group is joined then.
        .set("group.id", group.as_deref().unwrap_or("bench-rdkafka"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "1048576")
        .set("fetch.wait.max.ms", "500")
        // librdkafka's default (1000 ms) idles a reader faster than its fetch queue refills: as
        // bench/py/clients.py, a user tuning for throughput would lower it.
        .set("fetch.queue.backoff.ms", "10")
        .set("check.crcs", "true")
        // As bench/py/clients.py: room for a whole fetch.max.bytes answer.
        .set("receive.message.max.bytes", "53477376");
    if std::env::var("BENCH_LOOP").as_deref() == Ok("stream") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| fail("a tokio runtime", e));
        rt.block_on(async {
            let consumer: StreamConsumer = config
                .create()
                .unwrap_or_else(|e| fail("creating the consumer", e));
            let mut tally = Tally::start(want);
            start(&consumer, topic, partitions, group.as_deref());
            while !tally.done() {
                match tokio::time::timeout(Duration::from_secs(1), consumer.recv()).await {
                    Err(_) => tally.nothing(),
                    Ok(Err(e)) => fail("recv", e),
                    Ok(Ok(m)) => tally.add(&m),
                }
            }
            tally.finish();
        });
        return;
    }
    let consumer: BaseConsumer = config
        .create()
        .unwrap_or_else(|e| fail("creating the consumer", e));
    let mut tally = Tally::start(want);
    start(&consumer, topic, partitions, group.as_deref());
    while !tally.done() {
        match consumer.poll(Duration::from_millis(1000)) {
            None => tally.nothing(),
            Some(Err(e)) => fail("poll", e),
            Some(Ok(m)) => tally.add(&m),
        }
    }
    tally.finish();
}

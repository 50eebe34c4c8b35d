//! rust-rdkafka's side of `bench/run`: `bench-rdkafka <bootstrap> <topic> <partitions> <records>`.
//! A `BaseConsumer` with the bench's common settings, partitions 0..N assigned from offset 0 (no
//! group), `poll()` per message until `records` messages arrived, counting key+value bytes. Same
//! line protocol as core/examples/bench_consume.rs:
//!   START <cpu ticks>                 just before assign (the timed interval begins)
//!   PROGRESS <records>                about once a second
//!   RESULT <records> <bytes> <seconds> <cpu ticks>
use std::io::Write;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

fn cpu_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is [0]; utime is field 14 of the line, [11] here.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: bench-rdkafka <bootstrap> <topic> <partitions> <records>");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[1], &args[2]);
    let partitions: i32 = args[3].parse().expect("partitions");
    let want: u64 = args[4].parse().expect("records");
    // BENCH_GROUP=<group.id>: subscribe in that group instead of assigning.
    let group = std::env::var("BENCH_GROUP").ok().filter(|g| !g.is_empty());
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-rdkafka")
        // librdkafka needs a group id even for manual assignment; no group is joined.
        .set("group.id", group.as_deref().unwrap_or("bench-rdkafka"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "1048576")
        .set("fetch.wait.max.ms", "500")
        .set("check.crcs", "true")
        // As bench/py/clients.py: room for a whole fetch.max.bytes answer.
        .set("receive.message.max.bytes", "53477376")
        .create()
        .unwrap_or_else(|e| {
            eprintln!("creating the consumer: {e}");
            std::process::exit(1)
        });
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "START {}", cpu_ticks()).ok();
    out.flush().ok();
    let t = Instant::now();
    let started = match &group {
        Some(_) => consumer.subscribe(&[topic.as_str()]),
        None => consumer.assign(&tpl),
    };
    if let Err(e) = started {
        eprintln!("assign/subscribe: {e}");
        std::process::exit(1);
    }
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut last_data = Instant::now();
    let mut next_report = Instant::now() + Duration::from_secs(1);
    while n < want {
        match consumer.poll(Duration::from_millis(1000)) {
            None => {
                if last_data.elapsed() > Duration::from_secs(60) {
                    eprintln!("no records for 60 s after {n} of {want}");
                    std::process::exit(1);
                }
            }
            Some(Err(e)) => {
                eprintln!("poll: {e}");
                std::process::exit(1);
            }
            Some(Ok(m)) => {
                bytes += (m.key_len() + m.payload_len()) as u64;
                n += 1;
                // Reading the clock per message would be a cost the other clients do not pay.
                if n % 4096 == 0 {
                    last_data = Instant::now();
                    if last_data >= next_report {
                        writeln!(out, "PROGRESS {n}").ok();
                        out.flush().ok();
                        next_report = last_data + Duration::from_secs(1);
                    }
                }
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    writeln!(out, "RESULT {n} {bytes} {secs:.6} {}", cpu_ticks()).ok();
    out.flush().ok();
}

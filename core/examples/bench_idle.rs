//! The lagless side of `bench/idle/run`: `bench_idle <bootstrap> <topic> <partitions>`.
//! Assigns every partition of the topic (no group; from the log end), prints `READY`, then calls
//! `poll_at_most(1 s, 500)` until the runner ends it: what an application waiting for records
//! does. The runner reads the process' CPU from /proc.
use std::time::Duration;

use lagless::{Config, Consumer, TopicPartition};

fn main() -> lagless::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bootstrap, topic, partitions] = &args[..] else {
        eprintln!("usage: bench_idle <bootstrap> <topic> <partitions>");
        std::process::exit(2);
    };
    let partitions: i32 = partitions.parse().expect("a partition count");
    let config = Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("client.id", "idle-lagless"),
        ("auto.offset.reset", "latest"),
        ("fetch.max.wait.ms", "500"),
    ])?;
    let consumer = Consumer::from_config(&config)?;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic.as_str(), p))
        .collect();
    consumer.assign(&tps)?;
    println!("READY");
    loop {
        consumer.poll_at_most(Duration::from_secs(1), 500)?;
    }
}

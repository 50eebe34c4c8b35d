//! Produce throughput: `produce_perf <bootstrap> [records] [value bytes] [acks] [partitions]`.
//! Creates a fresh topic, sends unkeyed records as fast as `send` accepts them, and reports
//! records/s from the first send until every delivery is acknowledged.
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use lagless::config::{Config, ProducerConfig};
use lagless::producer::{Producer, ProducerRecord};

fn main() -> lagless::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let bootstrap = args
        .get(1)
        .cloned()
        .or_else(|| std::env::var("LAGLESS_BOOTSTRAP").ok())
        .expect("usage: produce_perf <bootstrap> [records] [value bytes] [acks] [partitions]");
    let arg = |i: usize, d: i64| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (n, size, acks, partitions) = (arg(2, 1_000_000), arg(3, 100), arg(4, 1), arg(5, 6));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let topic = format!("perf-{nanos}");
    lagless::admin::create_topic(&bootstrap, &topic, partitions as i32, 1)?;
    let config = Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("client.id", "produce-perf"),
        ("acks", &acks.to_string()),
    ])?;
    let producer = Producer::new(ProducerConfig::from_config(&config)?)?;
    producer.partitions_for(&topic)?;
    let value = Bytes::from(vec![b'x'; size as usize]);
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let t = Instant::now();
    for _ in 0..n {
        let failed = failed.clone();
        producer.send_with_callback(ProducerRecord::new(&topic, value.clone()), move |r| {
            if r.is_err() {
                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })?;
    }
    producer.flush(Duration::from_secs(300))?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{n} records of {size} B, acks={acks}, {partitions} partitions: {:.0} records/s, {:.1} MiB/s, {} failed",
        n as f64 / secs,
        (n * size) as f64 / secs / 1048576.0,
        failed.load(std::sync::atomic::Ordering::Relaxed)
    );
    producer.close(Duration::from_secs(10))
}

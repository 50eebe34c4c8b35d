//! KIP-572 against a broker that stops answering: on a three-node cluster, the leader of some
//! partitions is frozen (SIGSTOP: its sockets stay open, nothing is answered, as with a hung
//! machine). Those partitions, and only those, are reported `PartitionStuck` about
//! `task.timeout.ms` after they last made progress, well before a fetch hung on the frozen broker
//! times out (`request.timeout.ms`), while the other partitions keep delivering. Once the broker
//! continues, every record of every partition comes once, in order.
#[path = "support/own_broker.rs"]
mod own_broker;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Error, Producer, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;

const PARTITIONS: i32 = 6;
const BEFORE: usize = 100;
const TASK_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

fn producer(bootstrap: &str) -> Producer {
    Producer::from_config(
        &Config::from_pairs([("bootstrap.servers", bootstrap), ("acks", "1")]).unwrap(),
    )
    .unwrap()
}

/// Sends `part:i` for i in `from..to` to each of `partitions` and waits for every delivery.
fn produce(
    p: &Producer,
    topic: &str,
    partitions: &[i32],
    from: usize,
    to: usize,
) -> lagless::Result<()> {
    let mut deliveries = Vec::new();
    for i in from..to {
        for &part in partitions {
            deliveries.push(
                p.send(ProducerRecord::new(topic, format!("{part}:{i}")).with_partition(part))?,
            );
        }
    }
    for d in deliveries {
        d.wait()?;
    }
    Ok(())
}

/// Every record delivered so far, checked in sequence: `next[p]` is the `i` partition `p` must
/// deliver next (nothing lost, nothing repeated).
#[derive(Default)]
struct Seen {
    next: BTreeMap<i32, usize>,
}

impl Seen {
    fn take(&mut self, records: Vec<lagless::ConsumerRecord>) -> BTreeMap<i32, usize> {
        let mut got = BTreeMap::new();
        for r in records {
            let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            let expected = self.next.entry(r.partition).or_default();
            assert_eq!(
                value,
                format!("{}:{}", r.partition, expected),
                "lost or repeated at offset {}",
                r.offset
            );
            *expected += 1;
            *got.entry(r.partition).or_default() += 1;
        }
        got
    }

    fn of(&self, partition: i32) -> usize {
        self.next.get(&partition).copied().unwrap_or(0)
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_partition_whose_leader_stops_answering_is_reported_stuck_after_task_timeout() {
    let cluster = OwnBroker::start(3);
    let b = cluster.bootstrap.clone();
    let topic = "stopped-leader";
    lagless::admin::create_topic(&b, topic, PARTITIONS, 1).unwrap();
    let frozen_node = cluster.leader_of(topic, 0);
    let (frozen, live): (Vec<i32>, Vec<i32>) =
        (0..PARTITIONS).partition(|&p| cluster.leader_of(topic, p) == frozen_node);
    assert!(!live.is_empty(), "node {frozen_node} leads every partition");
    let live_bootstrap: String = (1..=3)
        .filter(|&n| n != frozen_node)
        .map(|n| cluster.address(n))
        .collect::<Vec<_>>()
        .join(",");
    eprintln!("node {frozen_node} leads {frozen:?}; others lead {live:?}");
    let all: Vec<i32> = (0..PARTITIONS).collect();
    produce(&producer(&b), topic, &all, 0, BEFORE).unwrap();

    let consumer = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", b.as_str()),
            ("auto.offset.reset", "earliest"),
            (
                "task.timeout.ms",
                &TASK_TIMEOUT.as_millis().to_string() as &str,
            ),
            (
                "request.timeout.ms",
                &REQUEST_TIMEOUT.as_millis().to_string() as &str,
            ),
            ("fetch.max.wait.ms", "500"),
        ])
        .unwrap(),
    )
    .unwrap();
    let parts: Vec<TopicPartition> = all.iter().map(|&p| TopicPartition::new(topic, p)).collect();
    consumer.assign(&parts).unwrap();
    let mut seen = Seen::default();
    let start = Instant::now();
    while all.iter().any(|&p| seen.of(p) < BEFORE) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "before the freeze, only {:?} of {BEFORE} per partition came",
            seen.next
        );
        seen.take(consumer.poll(Duration::from_millis(100)).expect("poll"));
    }

    // The live partitions keep getting records while the node is frozen.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        let live = live.clone();
        std::thread::spawn(move || {
            let p = producer(&live_bootstrap);
            let mut i = BEFORE;
            while !stop.load(Ordering::Relaxed) {
                produce(&p, topic, &live, i, i + 1).expect("producing to a live partition");
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            i
        })
    };
    // Everything of the frozen partitions came already: they are idle at the log end, each with a
    // fetch waiting up to fetch.max.wait.ms on the node about to freeze.
    let guard = cluster.freeze(frozen_node);
    let frozen_at = Instant::now();
    let mut stuck_at: BTreeMap<i32, Duration> = BTreeMap::new();
    let mut live_after_report = 0usize;
    while frozen_at.elapsed() < Duration::from_secs(40) {
        if stuck_at.len() == frozen.len() && live_after_report >= 20 {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Ok(records) => {
                let got = seen.take(records);
                for (p, n) in got {
                    assert!(live.contains(&p), "a record of frozen partition {p}");
                    if stuck_at.len() == frozen.len() {
                        live_after_report += n;
                    }
                }
            }
            Err(Error::PartitionStuck { partition, cause }) => {
                let at = frozen_at.elapsed();
                eprintln!(
                    "{at:?}: {}-{} stuck: {cause}",
                    partition.topic, partition.partition
                );
                assert!(
                    frozen.contains(&partition.partition),
                    "partition {} of a live node reported stuck: {cause}",
                    partition.partition
                );
                stuck_at.entry(partition.partition).or_insert(at);
            }
            Err(e) => assert!(!e.is_fatal(), "{e}"),
        }
    }
    eprintln!(
        "stuck reports after the freeze: {stuck_at:?}; live partitions delivered {live_after_report} records after the last first report"
    );
    assert_eq!(
        stuck_at.keys().copied().collect::<Vec<_>>(),
        frozen,
        "every partition of the frozen node is reported stuck"
    );
    for (p, at) in &stuck_at {
        // The last progress came at most fetch.max.wait.ms before the freeze. Without the fix a
        // report waits for the hung fetch: request.timeout.ms + fetch.max.wait.ms + task.timeout.ms.
        assert!(
            *at >= TASK_TIMEOUT - Duration::from_secs(1) && *at <= TASK_TIMEOUT + Duration::from_secs(4),
            "partition {p} reported stuck {at:?} after its leader froze; task.timeout.ms is {TASK_TIMEOUT:?}, request.timeout.ms {REQUEST_TIMEOUT:?}"
        );
    }
    assert!(
        live_after_report > 0,
        "the live partitions delivered nothing after the stuck reports"
    );

    // The node continues: the frozen partitions resume and nothing is lost anywhere.
    stop.store(true, Ordering::Relaxed);
    let live_total = feeder.join().unwrap();
    guard.thaw();
    let thawed = Instant::now();
    let want = |p: i32| {
        if live.contains(&p) {
            live_total
        } else {
            BEFORE
        }
    };
    // The frozen partitions get new records too, to show they are read again (the producer
    // retries until delivery.timeout.ms while the node comes back).
    produce(&producer(&b), topic, &frozen, BEFORE, BEFORE + 10).expect("producing after the thaw");
    while thawed.elapsed() < Duration::from_secs(90) {
        let done = all.iter().all(|&p| {
            seen.of(p)
                == if frozen.contains(&p) {
                    BEFORE + 10
                } else {
                    want(p)
                }
        });
        if done {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Ok(records) => {
                seen.take(records);
            }
            Err(e) => assert!(!e.is_fatal(), "{e}"),
        }
    }
    for &p in &all {
        let expected = if frozen.contains(&p) {
            BEFORE + 10
        } else {
            want(p)
        };
        assert_eq!(
            seen.of(p),
            expected,
            "partition {p} after the node continued"
        );
    }
}

//! A group member for the rebalance figure of `bench/run`:
//! `bench_member <bootstrap> <topic> <group> <strategy> <seconds> [<warm-up ms>]`.
//! Subscribes with `partition.assignment.strategy` = strategy (range, cooperative-sticky,
//! learner-sticky,cooperative-sticky), or with `group.protocol=consumer` for `consumer`, polls for `seconds`, and after every poll that returned
//! records prints `D <partition> <unix ms>` once per partition in it. Then closes (leaving the
//! group). With a warm-up, the member spends that long preparing for partitions it is about to
//! own (loading state, say) before it consumes them: with learner-sticky on a thread of its own,
//! started by `on_partitions_learning` (`learner.readiness=explicit`: `poll()` goes on serving
//! the partitions the member owns, and the thread calls `learner_ready`), else in
//! `on_partitions_assigned` (the new partitions wait).
//!
//! Scale-down: once the file named by `BENCH_LEAVE_FILE` exists the member leaves and prints
//! `L <unix ms>`: with learner-sticky it prepares to leave and polls on until it owns nothing
//! (at most 60 s), then closes; otherwise it closes at once.
//!
//! A busy member: once the file named by `BENCH_BUSY_FILE` exists, the member spends
//! `BENCH_BUSY_MS` processing after every poll (it sleeps, away from `poll()`).
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lagless::{Config, Consumer, RebalanceListener, TopicPartition};

/// Sleeps `warm_up` for partitions the member is about to own; a learner hands them to its
/// warm-up thread instead.
struct WarmUp {
    warm_up: Duration,
    learner: bool,
    to_warm_up: mpsc::Sender<Vec<TopicPartition>>,
}

impl RebalanceListener for WarmUp {
    fn on_partitions_assigned(
        &mut self,
        _: &Consumer,
        tps: &[TopicPartition],
    ) -> lagless::Result<()> {
        if !self.learner && !tps.is_empty() {
            std::thread::sleep(self.warm_up);
        }
        Ok(())
    }
    fn on_partitions_learning(
        &mut self,
        _: &Consumer,
        tps: &[TopicPartition],
    ) -> lagless::Result<()> {
        if !tps.is_empty() {
            let _ = self.to_warm_up.send(tps.to_vec());
        }
        Ok(())
    }
}

fn main() -> lagless::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: bench_member <bootstrap> <topic> <group> <strategy> <seconds>");
        std::process::exit(2);
    }
    if let Ok(filter) = std::env::var("RUST_LOG") {
        // The library's own log, to stderr, when asked for (RUST_LOG=lagless=debug).
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let seconds: f64 = args[5].parse().expect("seconds");
    let warm_up = Duration::from_millis(args.get(6).map_or(0, |a| a.parse().expect("warm-up ms")));
    let mut config = Config::from_pairs([
        ("bootstrap.servers", args[1].as_str()),
        ("client.id", "bench-member"),
        ("group.id", args[3].as_str()),
        ("auto.offset.reset", "latest"),
        ("enable.auto.commit", "true"),
        ("fetch.max.wait.ms", "500"),
    ])?;
    // `consumer`: KIP-848's protocol, the broker's assignor (no client-side strategy).
    if args[4] == "consumer" {
        config.set("group.protocol", "consumer")?;
    } else {
        config.set("partition.assignment.strategy", &args[4])?;
    }
    let learner = args[4].starts_with("learner-sticky");
    if learner {
        config.set("learner.readiness", "explicit")?;
    }
    let consumer = Arc::new(Consumer::from_config(&config)?);
    let (to_warm_up, warm_ups) = mpsc::channel::<Vec<TopicPartition>>();
    {
        let consumer = consumer.clone();
        std::thread::spawn(move || {
            for tps in warm_ups {
                std::thread::sleep(warm_up);
                // Closed meanwhile: nothing left to be ready for.
                let _ = consumer.learner_ready(&tps);
            }
        });
    }
    let listener = WarmUp {
        warm_up,
        learner,
        to_warm_up,
    };
    consumer.subscribe(&[args[2].as_str()], Some(Box::new(listener)))?;
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let leave_file = std::env::var_os("BENCH_LEAVE_FILE");
    let busy_file = std::env::var_os("BENCH_BUSY_FILE");
    let busy = Duration::from_millis(
        std::env::var("BENCH_BUSY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    let mut leaving_since: Option<Instant> = None;
    let mut out = std::io::stdout().lock();
    while Instant::now() < end {
        if let Some(since) = leaving_since {
            if consumer.assignment().is_empty() || since.elapsed() > Duration::from_secs(60) {
                break;
            }
        } else if leave_file
            .as_ref()
            .is_some_and(|f| std::path::Path::new(f).exists())
        {
            let ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis();
            writeln!(out, "L {ms}").ok();
            out.flush().ok();
            if !consumer.prepare_to_leave()? {
                break;
            }
            leaving_since = Some(Instant::now());
        }
        let records = consumer.poll(Duration::from_millis(100))?;
        if busy_file
            .as_ref()
            .is_some_and(|f| std::path::Path::new(f).exists())
        {
            std::thread::sleep(busy);
        }
        if records.is_empty() {
            continue;
        }
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let parts: BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
        for p in parts {
            writeln!(out, "D {p} {ms}").ok();
        }
        out.flush().ok();
    }
    consumer.close(Some(Duration::from_secs(10)))
}

//! `statistics.interval.ms`: the metrics snapshot handed to the application's statistics
//! callback every interval, the way librdkafka's `stats_cb` gets its JSON. The callback runs on
//! the thread inside `poll()` (never beside the application's own code), and a `poll()` waiting
//! for records wakes for it. [`statistics_due`] decides when; this file only carries it out.
use std::time::Instant;

use crate::consumer::Consumer;
use crate::error::Result;
use crate::metrics::ConsumerMetrics;
// The decision and the callback's holder serve the producer too: they live below both.
pub(crate) use crate::metrics::callbacks::Statistics;
pub use crate::metrics::callbacks::{statistics_due, StatisticsDue};

/// The statistics callback: given the snapshot every `statistics.interval.ms`, on the thread in
/// `poll()`. An error it returns comes out of that `poll()` (no record is held back by it: the
/// callback runs before the call takes records).
pub type StatisticsCallback = Box<dyn FnMut(&ConsumerMetrics) -> Result<()> + Send>;

impl Consumer {
    /// Sets (or with `None` removes) the statistics callback: every `statistics.interval.ms`
    /// (0, the default, is off and the callback is never called) a `poll()` hands it the
    /// [`Consumer::metrics`] snapshot, on the polling thread and before it takes records; a
    /// `poll()` waiting for records wakes for it, one that is not called meanwhile delays it
    /// (a gap of several intervals gives one call, not one per interval). The first call comes
    /// one interval after the consumer was created. `recovery_poll()` never calls it. The
    /// callback must not call this consumer's `poll()`.
    pub fn set_statistics_callback(&self, callback: Option<StatisticsCallback>) {
        self.statistics.set(callback);
    }

    /// Calls the statistics callback if an emission is due now; the instant the next one is due
    /// (for a waiting `poll()` to wake at), `None` when there is none to wait for. With
    /// `statistics.interval.ms=0` (the default) it takes no lock and reads no clock: `poll()`
    /// calls it on every pass of its loop.
    pub(crate) fn emit_statistics(&self) -> Result<Option<Instant>> {
        self.statistics
            .emit(self.shared.config.statistics_interval, || self.metrics())
    }
}

#[cfg(test)]
mod consumer_tests {
    use std::sync::{Arc, Mutex};
    use std::thread::ThreadId;

    use std::time::Duration;

    use super::*;
    use crate::{Config, Error, ErrorKind};

    /// A consumer with nothing to reach: its snapshot is there all the same.
    fn consumer(interval: &str) -> Consumer {
        let config = Config::from_pairs([
            ("bootstrap.servers", "127.0.0.1:1"),
            ("statistics.interval.ms", interval),
        ])
        .unwrap();
        Consumer::from_config(&config).unwrap()
    }

    type Seen = Arc<Mutex<Vec<(ThreadId, Instant)>>>;

    fn recording(c: &Consumer) -> Seen {
        let seen: Seen = Default::default();
        let s = seen.clone();
        c.set_statistics_callback(Some(Box::new(move |m: &ConsumerMetrics| {
            assert_eq!(m.partitions.len(), 0);
            s.lock()
                .unwrap()
                .push((std::thread::current().id(), Instant::now()));
            Ok(())
        })));
        seen
    }

    #[test]
    fn one_long_poll_wakes_for_each_interval_on_its_own_thread() {
        let c = consumer("50");
        let seen = recording(&c);
        let start = Instant::now();
        let records = c.poll(Duration::from_millis(600)).unwrap();
        let waited = start.elapsed();
        assert!(records.is_empty());
        let seen = seen.lock().unwrap().clone();
        // 600 ms of one poll at 50 ms: at most 12 calls (never closer than the interval), and
        // well above none even on a loaded machine.
        assert!(
            (3..=12).contains(&seen.len()),
            "{} calls in a poll of {waited:?}",
            seen.len()
        );
        let me = std::thread::current().id();
        assert!(seen.iter().all(|(t, _)| *t == me));
        for pair in seen.windows(2) {
            assert!(
                pair[1].1 - pair[0].1 >= Duration::from_millis(50),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn interval_zero_or_no_callback_calls_nothing() {
        let c = consumer("0");
        let seen = recording(&c);
        c.poll(Duration::from_millis(200)).unwrap();
        assert_eq!(seen.lock().unwrap().len(), 0);

        let c = consumer("20");
        let seen = recording(&c);
        c.set_statistics_callback(None);
        c.poll(Duration::from_millis(200)).unwrap();
        assert_eq!(seen.lock().unwrap().len(), 0);
    }

    /// poll() asks on every pass of its loop: with statistics off the answer takes no lock, so
    /// it comes while the statistics' lock is held elsewhere (with them on, it waits for it).
    #[test]
    fn interval_zero_answers_without_the_statistics_lock() {
        let c = Arc::new(consumer("0"));
        recording(&c);
        let held = c.statistics.state.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = c.clone();
        let asking = std::thread::spawn(move || tx.send(c2.emit_statistics().unwrap()).unwrap());
        let answer = rx.recv_timeout(Duration::from_secs(10));
        drop(held);
        asking.join().unwrap();
        assert_eq!(answer, Ok(None));
    }

    #[test]
    fn an_error_of_the_callback_comes_out_of_poll_and_the_next_poll_goes_on() {
        let c = consumer("20");
        let calls = Arc::new(Mutex::new(0));
        let n = calls.clone();
        c.set_statistics_callback(Some(Box::new(move |_: &ConsumerMetrics| {
            *n.lock().unwrap() += 1;
            Err(Error::Callback("statistics callback: broken".into()))
        })));
        let e = c.poll(Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Callback);
        assert_eq!(*calls.lock().unwrap(), 1);
        // The callback is kept: the next interval calls it again.
        let e = c.poll(Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Callback);
        assert_eq!(*calls.lock().unwrap(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_async_consumer_calls_it_from_a_waiting_recv() {
        let config = Config::from_pairs([
            ("bootstrap.servers", "127.0.0.1:1"),
            ("statistics.interval.ms", "50"),
        ])
        .unwrap();
        let c = crate::aio::Consumer::from_config(&config).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        c.set_statistics_callback(Some(Box::new(move |_: &ConsumerMetrics| {
            s.lock().unwrap().push(Instant::now());
            Ok(())
        })));
        // Nothing assigned: recv() waits the whole time, waking for each interval.
        let r = tokio::time::timeout(Duration::from_millis(600), c.recv()).await;
        assert!(r.is_err(), "no record can come");
        let seen = seen.lock().unwrap().clone();
        assert!((3..=12).contains(&seen.len()), "{} calls", seen.len());
        for pair in seen.windows(2) {
            assert!(pair[1] - pair[0] >= Duration::from_millis(50), "{pair:?}");
        }
    }

    #[test]
    fn statistics_interval_is_zero_or_ten_ms_to_a_day() {
        for ok in ["0", "10", "1000", "86400000"] {
            assert!(
                Config::new().set("statistics.interval.ms", ok).is_ok(),
                "{ok}"
            );
        }
        for bad in ["-1", "5", "86400001", "soon"] {
            let e = Config::new()
                .set("statistics.interval.ms", bad)
                .unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("statistics.interval.ms") && msg.contains(&format!("`{bad}`")),
                "{msg}"
            );
        }
        assert_eq!(
            consumer("250").config().statistics_interval,
            Duration::from_millis(250)
        );
    }
}

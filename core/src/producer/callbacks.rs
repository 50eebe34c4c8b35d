//! The producer's statistics and error callbacks (librdkafka's `stats_cb` and `error_cb` of a
//! producer). The producer has no poll loop of its own: they run where the application serves
//! them, [`Producer::serve_callbacks`], which the C producer's `lagless_producer_poll`/`_flush`
//! and the Python producer's `poll()`/`flush()` call, on the calling thread, as librdkafka's
//! `rd_kafka_poll` serves its producer's. When and what is decided as for the consumer
//! (`metrics::callbacks`, `cluster::health`); this file only wires them to the producer.
use std::time::Instant;

use super::Producer;
use crate::error::Result;
use crate::metrics::callbacks::ErrorCallback;
use crate::metrics::ProducerMetrics;

/// The producer's statistics callback: given the [`Producer::metrics`] snapshot every
/// `statistics.interval.ms`, inside [`Producer::serve_callbacks`].
pub type ProducerStatisticsCallback = Box<dyn FnMut(&ProducerMetrics) -> Result<()> + Send>;

impl Producer {
    /// Sets (or with `None` removes) the statistics callback: every `statistics.interval.ms`
    /// (0, the default, is off) [`Producer::serve_callbacks`] hands it the
    /// [`Producer::metrics`] snapshot; a gap of several intervals between serves gives one
    /// call, not one per interval missed. The first call comes one interval after the producer
    /// was created.
    pub fn set_statistics_callback(&self, callback: Option<ProducerStatisticsCallback>) {
        self.statistics.set(callback);
    }

    /// Sets (or with `None` removes) the error callback: conditions of the whole cluster that
    /// no single send fails with, each once as it begins, handed over by
    /// [`Producer::serve_callbacks`]: every known broker failed its last connection attempt
    /// (`ErrorKind::Transport`, "all brokers are down"), a broker refused the credentials
    /// (`ErrorKind::Authentication`) or the TLS handshake failed (`ErrorKind::Tls`). The
    /// producer goes on retrying meanwhile; each record still fails on its own with its
    /// delivery. Conditions raised while no callback is set are logged only.
    pub fn set_error_callback(&self, callback: Option<ErrorCallback>) {
        self.error_callback.set(callback);
    }

    /// Runs the callbacks that are due, on this thread: the error callback with what the
    /// cluster raised since the last call, then the statistics callback if an interval has
    /// passed. Returns when the next statistics call is due (for a caller that waits to wake
    /// then), `None` when none is to come. What a callback returns as an error is the result
    /// (the statistics callback is then not run this time). The C and Python producers call it
    /// in their `poll` and `flush`; a Rust application that sets a callback calls it from its
    /// own loop. A callback must not call `serve_callbacks` itself.
    pub fn serve_callbacks(&self) -> Result<Option<Instant>> {
        self.error_callback
            .emit(self.shared.cluster.take_raised())?;
        self.statistics
            .emit(self.shared.config.statistics_interval, || self.metrics())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::super::tests::test_config;
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn serving_hands_the_snapshot_to_the_statistics_callback_once_an_interval_passed() {
        let mut c = test_config("127.0.0.1:1");
        c.statistics_interval = Duration::from_millis(50);
        let p = Producer::new(c).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        p.set_statistics_callback(Some(Box::new(move |m: &ProducerMetrics| {
            g.lock().unwrap().push(m.client_id.clone());
            Ok(())
        })));
        let start = Instant::now();
        let first = p.serve_callbacks().unwrap();
        // Not an interval yet since the producer was created: nothing, and a time to wake at.
        if start.elapsed() < Duration::from_millis(40) {
            assert!(got.lock().unwrap().is_empty());
        }
        assert!(first.is_some());
        while got.lock().unwrap().is_empty() && start.elapsed() < Duration::from_secs(5) {
            p.serve_callbacks().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*got.lock().unwrap(), vec!["lagless-test".to_string()]);
        p.close(Duration::from_millis(10)).unwrap();
    }

    #[test]
    fn without_an_interval_serving_never_calls_and_never_waits() {
        let p = Producer::new(test_config("127.0.0.1:1")).unwrap();
        let called = Arc::new(Mutex::new(0));
        let c = called.clone();
        p.set_statistics_callback(Some(Box::new(move |_: &ProducerMetrics| {
            *c.lock().unwrap() += 1;
            Ok(())
        })));
        assert_eq!(p.serve_callbacks().unwrap(), None);
        assert_eq!(*called.lock().unwrap(), 0);
        p.close(Duration::from_millis(10)).unwrap();
    }

    #[test]
    fn all_brokers_down_reaches_the_error_callback_once_and_its_error_comes_out() {
        let mut c = test_config("127.0.0.1:1");
        c.common.default_api_timeout = Duration::from_millis(1_000);
        let p = Producer::new(c).unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = heard.clone();
        p.set_error_callback(Some(Box::new(move |e: &crate::Error| {
            h.lock().unwrap().push((e.kind(), e.to_string()));
            Err(crate::Error::Callback("stop".into()))
        })));
        // Nothing connects until there is something to send: a metadata lookup starts it.
        let _ = p.partitions_for("t");
        let start = Instant::now();
        let mut served = Ok(None);
        while heard.lock().unwrap().is_empty() && start.elapsed() < Duration::from_secs(10) {
            served = p.serve_callbacks();
            std::thread::sleep(Duration::from_millis(20));
        }
        let heard = heard.lock().unwrap().clone();
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert_eq!(heard[0].0, ErrorKind::Transport, "{heard:?}");
        assert!(heard[0].1.contains("all brokers are down"), "{heard:?}");
        assert!(
            matches!(served, Err(crate::Error::Callback(_))),
            "{served:?}"
        );
        p.close(Duration::from_millis(10)).unwrap();
    }
}

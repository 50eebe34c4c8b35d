//! [`ProducerMetrics::to_prometheus`]: the producer's snapshot in the same Prometheus text
//! format as the consumer's, encoded the same way (one collector holding a copy of the snapshot,
//! in a registry of its own). Every name starts with `lagless_producer_`; labels `client_id` on
//! every sample and `transactional_id` on a transactional producer's; the broker families are
//! the consumer's, under the producer's prefix. A value not known has no sample.
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::{brokers, family, once, Labels};
use crate::metrics::{LatencyMetrics, ProducerMetrics};

/// The prefix of every name.
const PREFIX: &str = "lagless_producer";

impl ProducerMetrics {
    /// The snapshot in the Prometheus text exposition format 0.0.4 (serve it with
    /// [`super::CONTENT_TYPE`]; README.md's "Metrics" section names each metric).
    pub fn to_prometheus(&self) -> String {
        super::render(PREFIX, Box::new(Snapshot(self.clone())))
    }
}

/// The collector: one snapshot, written as it is on each encoding.
#[derive(Debug)]
struct Snapshot(ProducerMetrics);

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let m = &self.0;
        let mut producer: Labels = vec![("client_id", m.client_id.clone())];
        if let Some(id) = &m.transactional_id {
            producer.push(("transactional_id", id.clone()));
        }
        family(
            &mut e,
            "records_sent",
            "Records the brokers acknowledged since the producer was created.",
            once(&producer, ConstCounter::new(m.records_sent_total)),
        )?;
        family(
            &mut e,
            "records_failed",
            "Records whose delivery failed since the producer was created.",
            once(&producer, ConstCounter::new(m.records_failed_total)),
        )?;
        family(
            &mut e,
            "batches_sent",
            "Batches the brokers acknowledged since the producer was created.",
            once(&producer, ConstCounter::new(m.batches_sent_total)),
        )?;
        family(
            &mut e,
            "batch_retries",
            "Batches put back for another attempt after a retriable error.",
            once(&producer, ConstCounter::new(m.batch_retries_total)),
        )?;
        family(
            &mut e,
            "record_send_rate",
            "Records acknowledged per second, over the last 30 to 60 s.",
            once(&producer, ConstGauge::new(m.record_send_rate)),
        )?;
        family(
            &mut e,
            "record_error_rate",
            "Records failed per second, over the last 30 to 60 s.",
            once(&producer, ConstGauge::new(m.record_error_rate)),
        )?;
        family(
            &mut e,
            "records_outstanding",
            "Records sent and not acknowledged or failed yet (what flush waits for).",
            once(&producer, ConstGauge::new(m.records_outstanding)),
        )?;
        family(
            &mut e,
            "buffered_bytes",
            "What the records not acknowledged or failed yet weigh against buffer.memory.",
            once(&producer, ConstGauge::new(m.buffered_bytes)),
        )?;
        family(
            &mut e,
            "buffer_memory_bytes",
            "buffer.memory.",
            once(&producer, ConstGauge::new(m.buffer_memory)),
        )?;
        let latency = |f: fn(&LatencyMetrics) -> Option<std::time::Duration>| {
            m.produce_latency
                .as_ref()
                .and_then(f)
                .map(|d| once(&producer, ConstGauge::new(d.as_secs_f64())))
                .unwrap_or_default()
        };
        family(
            &mut e,
            "produce_latency_avg_seconds",
            "The average Produce answer latency, over the last 30 to 60 s.",
            latency(|l| Some(l.avg)),
        )?;
        family(
            &mut e,
            "produce_latency_max_seconds",
            "The longest Produce answer latency, over the last 30 to 60 s.",
            latency(|l| Some(l.max)),
        )?;
        family(
            &mut e,
            "produce_latency_p50_seconds",
            "Half of the Produce answers came within this, over the last 30 to 60 s.",
            latency(|l| l.p50),
        )?;
        family(
            &mut e,
            "produce_latency_p99_seconds",
            "99% of the Produce answers came within this, over the last 30 to 60 s.",
            latency(|l| l.p99),
        )?;
        brokers(&mut e, &m.brokers, &producer)
    }
}

#[cfg(test)]
#[path = "prometheus_producer_tests.rs"]
mod tests;

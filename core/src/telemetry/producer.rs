//! The producer's snapshot ([`ProducerMetrics`]) as the metrics a push carries: the Java
//! producer's names under `org.apache.kafka.producer.` (its `producer-metrics` group, dotted),
//! only those a field of the snapshot backs, each with that field's value. Pure, as
//! [`super::collect`], whose encoding they go through.
//!
//! | name | type | snapshot field |
//! |---|---|---|
//! | `org.apache.kafka.producer.record.send.total` | sum | `records_sent_total` |
//! | `org.apache.kafka.producer.record.error.total` | sum | `records_failed_total` |
//! | `org.apache.kafka.producer.record.send.rate` | gauge | `record_send_rate` |
//! | `org.apache.kafka.producer.record.error.rate` | gauge | `record_error_rate` |
//! | `org.apache.kafka.producer.buffer.total.bytes` | gauge | `buffer_memory` |
//! | `org.apache.kafka.producer.buffer.available.bytes` | gauge | `buffer_memory - buffered_bytes` |
//! | `org.apache.kafka.producer.request.latency.avg`, `.max` | gauge | `produce_latency` (ms; while the window holds one) |
//!
//! The resource's attribute is the Java producer's: `transactional_id`, when set.
use super::collect::Point;
use crate::metrics::ProducerMetrics;

/// `records_sent_total`.
pub const RECORD_SEND_TOTAL: &str = "org.apache.kafka.producer.record.send.total";
/// `records_failed_total`.
pub const RECORD_ERROR_TOTAL: &str = "org.apache.kafka.producer.record.error.total";
/// `record_send_rate`.
pub const RECORD_SEND_RATE: &str = "org.apache.kafka.producer.record.send.rate";
/// `record_error_rate`.
pub const RECORD_ERROR_RATE: &str = "org.apache.kafka.producer.record.error.rate";
/// `buffer_memory`.
pub const BUFFER_TOTAL_BYTES: &str = "org.apache.kafka.producer.buffer.total.bytes";
/// `buffer_memory - buffered_bytes`.
pub const BUFFER_AVAILABLE_BYTES: &str = "org.apache.kafka.producer.buffer.available.bytes";
/// `produce_latency.avg` (milliseconds).
pub const REQUEST_LATENCY_AVG: &str = "org.apache.kafka.producer.request.latency.avg";
/// `produce_latency.max` (milliseconds).
pub const REQUEST_LATENCY_MAX: &str = "org.apache.kafka.producer.request.latency.max";

/// Every point the producer's snapshot backs, in a fixed order.
pub fn points(m: &ProducerMetrics) -> Vec<Point> {
    let point = |name, counter, value: f64| Point {
        name,
        counter,
        attributes: Vec::new(),
        value,
    };
    let mut out = vec![
        point(RECORD_SEND_TOTAL, true, m.records_sent_total as f64),
        point(RECORD_ERROR_TOTAL, true, m.records_failed_total as f64),
        point(RECORD_SEND_RATE, false, m.record_send_rate),
        point(RECORD_ERROR_RATE, false, m.record_error_rate),
        point(BUFFER_TOTAL_BYTES, false, m.buffer_memory as f64),
        point(
            BUFFER_AVAILABLE_BYTES,
            false,
            m.buffer_memory.saturating_sub(m.buffered_bytes) as f64,
        ),
    ];
    if let Some(l) = &m.produce_latency {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        out.push(point(REQUEST_LATENCY_AVG, false, ms(l.avg)));
        out.push(point(REQUEST_LATENCY_MAX, false, ms(l.max)));
    }
    out
}

/// The resource attributes of the producer.
pub fn resource(m: &ProducerMetrics) -> Vec<(&'static str, String)> {
    m.transactional_id
        .iter()
        .map(|id| ("transactional_id", id.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::LatencyMetrics;

    fn snapshot() -> ProducerMetrics {
        ProducerMetrics {
            client_id: "p".into(),
            transactional_id: None,
            records_sent_total: 150,
            records_failed_total: 2,
            batches_sent_total: 7,
            batch_retries_total: 1,
            record_send_rate: 2.5,
            record_error_rate: 0.0,
            records_outstanding: 3,
            buffered_bytes: 1_000,
            buffer_memory: 33_554_432,
            produce_latency: None,
            brokers: Vec::new(),
        }
    }

    #[test]
    fn the_producers_points_are_its_snapshots_values() {
        let m = snapshot();
        let got: Vec<(&str, bool, f64)> = points(&m)
            .iter()
            .map(|p| (p.name, p.counter, p.value))
            .collect();
        assert_eq!(
            got,
            vec![
                (RECORD_SEND_TOTAL, true, 150.0),
                (RECORD_ERROR_TOTAL, true, 2.0),
                (RECORD_SEND_RATE, false, 2.5),
                (RECORD_ERROR_RATE, false, 0.0),
                (BUFFER_TOTAL_BYTES, false, 33_554_432.0),
                (BUFFER_AVAILABLE_BYTES, false, 33_553_432.0),
            ]
        );
        assert!(resource(&m).is_empty());
    }

    #[test]
    fn latency_and_transactional_id_when_known() {
        let mut m = snapshot();
        m.transactional_id = Some("tx-1".into());
        m.produce_latency = Some(LatencyMetrics {
            count: 2,
            avg: Duration::from_micros(1_500),
            max: Duration::from_millis(2),
            p50: None,
            p99: None,
        });
        let latencies: Vec<(&str, f64)> = points(&m)
            .iter()
            .filter(|p| p.name.contains("latency"))
            .map(|p| (p.name, p.value))
            .collect();
        assert_eq!(
            latencies,
            vec![(REQUEST_LATENCY_AVG, 1.5), (REQUEST_LATENCY_MAX, 2.0)]
        );
        assert_eq!(resource(&m), vec![("transactional_id", "tx-1".to_string())]);
    }
}

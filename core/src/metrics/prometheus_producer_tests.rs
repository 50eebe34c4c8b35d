use std::time::Duration;

use crate::metrics::*;

/// A producer with no broker known yet and no Produce answer in the window.
fn snapshot() -> ProducerMetrics {
    ProducerMetrics {
        client_id: "orders-1".into(),
        transactional_id: None,
        records_sent_total: 30,
        records_failed_total: 2,
        batches_sent_total: 4,
        batch_retries_total: 1,
        record_send_rate: 0.5,
        record_error_rate: 0.0,
        records_outstanding: 3,
        buffered_bytes: 270,
        buffer_memory: 33_554_432,
        produce_latency: None,
        brokers: Vec::new(),
    }
}

#[test]
fn a_producer_snapshot_renders_as_the_text_format() {
    let want = r#"# HELP lagless_producer_records_sent_total Records the brokers acknowledged since the producer was created.
# TYPE lagless_producer_records_sent_total counter
lagless_producer_records_sent_total{client_id="orders-1"} 30
# HELP lagless_producer_records_failed_total Records whose delivery failed since the producer was created.
# TYPE lagless_producer_records_failed_total counter
lagless_producer_records_failed_total{client_id="orders-1"} 2
# HELP lagless_producer_batches_sent_total Batches the brokers acknowledged since the producer was created.
# TYPE lagless_producer_batches_sent_total counter
lagless_producer_batches_sent_total{client_id="orders-1"} 4
# HELP lagless_producer_batch_retries_total Batches put back for another attempt after a retriable error.
# TYPE lagless_producer_batch_retries_total counter
lagless_producer_batch_retries_total{client_id="orders-1"} 1
# HELP lagless_producer_record_send_rate Records acknowledged per second, over the last 30 to 60 s.
# TYPE lagless_producer_record_send_rate gauge
lagless_producer_record_send_rate{client_id="orders-1"} 0.5
# HELP lagless_producer_record_error_rate Records failed per second, over the last 30 to 60 s.
# TYPE lagless_producer_record_error_rate gauge
lagless_producer_record_error_rate{client_id="orders-1"} 0.0
# HELP lagless_producer_records_outstanding Records sent and not acknowledged or failed yet (what flush waits for).
# TYPE lagless_producer_records_outstanding gauge
lagless_producer_records_outstanding{client_id="orders-1"} 3
# HELP lagless_producer_buffered_bytes What the records not acknowledged or failed yet weigh against buffer.memory.
# TYPE lagless_producer_buffered_bytes gauge
lagless_producer_buffered_bytes{client_id="orders-1"} 270
# HELP lagless_producer_buffer_memory_bytes buffer.memory.
# TYPE lagless_producer_buffer_memory_bytes gauge
lagless_producer_buffer_memory_bytes{client_id="orders-1"} 33554432
"#;
    let got = snapshot().to_prometheus();
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {}", n + 1);
    }
    assert_eq!(got, want);
}

#[test]
fn a_transactional_producer_carries_its_id_latencies_and_brokers() {
    let m = ProducerMetrics {
        transactional_id: Some("txn \"a\"".into()),
        produce_latency: Some(LatencyMetrics {
            count: 4,
            avg: Duration::from_millis(12),
            max: Duration::from_millis(40),
            p50: Some(Duration::from_millis(10)),
            p99: None,
        }),
        brokers: vec![BrokerMetrics {
            node_id: Some(1),
            address: "127.0.0.1:9092".into(),
            state: "up",
            connections: 1,
            connects_total: 1,
            connect_failures_total: 0,
            disconnects_total: 0,
            requests_in_flight: 0,
            requests_total: 7,
            bytes_sent_total: 2_000,
            bytes_received_total: 600,
            request_latency: None,
        }],
        ..snapshot()
    };
    let text = m.to_prometheus();
    let p = r#"client_id="orders-1",transactional_id="txn \"a\"""#;
    let node = format!(r#"{p},broker="127.0.0.1:9092",node_id="1""#);
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    for present in [
        format!("lagless_producer_records_sent_total{{{p}}} 30"),
        format!("lagless_producer_produce_latency_avg_seconds{{{p}}} 0.012"),
        format!("lagless_producer_produce_latency_max_seconds{{{p}}} 0.04"),
        format!("lagless_producer_produce_latency_p50_seconds{{{p}}} 0.01"),
        format!("lagless_producer_broker_state{{{node},state=\"up\"}} 1"),
        format!("lagless_producer_broker_state{{{node},state=\"down\"}} 0"),
        format!("lagless_producer_broker_requests_total{{{node}}} 7"),
        format!("lagless_producer_broker_sent_bytes_total{{{node}}} 2000"),
    ] {
        assert!(samples.contains(&present.as_str()), "{present}: {text}");
    }
    for absent in [
        "lagless_producer_produce_latency_p99_seconds",
        "lagless_producer_broker_request_latency_avg_seconds",
        "lagless_consumer_",
    ] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
}

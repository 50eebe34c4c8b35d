//! The snapshot the renderings are tested with: the JSON (`metrics_tests.rs`), the Prometheus
//! text (`prometheus_tests.rs`) and the KIP-714 points (`telemetry::collect`). One set of
//! literals, so that a field added to the snapshot is added to every rendering's tests at once.
use std::time::Duration;

use super::*;

/// A partition of `orders` with nothing known yet.
pub(crate) fn partition(n: i32) -> PartitionMetrics {
    PartitionMetrics {
        topic: "orders".into(),
        partition: n,
        position: None,
        committed_offset: None,
        high_watermark: None,
        last_stable_offset: None,
        log_start_offset: None,
        lag: None,
        records_consumed: 0,
        bytes_consumed: 0,
        paused: false,
        fetch_errors: 0,
        failing: None,
        recovery: None,
    }
}

/// A stable member of `billing` that learns two partitions (one warming, one ready).
pub(crate) fn group() -> GroupMetrics {
    GroupMetrics {
        group_id: "billing".into(),
        state: "stable",
        generation_id: Some(3),
        member_id: Some("m-1".into()),
        group_instance_id: None,
        protocol: "classic",
        assignor: Some("range".into()),
        assigned_partitions: 2,
        rebalance_count: 2,
        last_rebalance: Some(LastRebalance {
            reason: "the subscription changed".into(),
            duration: Duration::from_millis(3_250),
        }),
        rejoin_reason: None,
        since_last_rebalance: Some(Duration::from_millis(12_000)),
        since_last_heartbeat_answer: Some(Duration::from_millis(1_500)),
        rebalance_latency_avg: Some(Duration::from_millis(3_250)),
        rebalance_latency_max: Some(Duration::from_millis(3_250)),
        since_last_poll: Duration::from_millis(2_500),
        max_poll_interval: Duration::from_secs(300),
        learning: vec![
            LearnerPartition {
                topic: "orders".into(),
                partition: 2,
                state: "warming",
            },
            LearnerPartition {
                topic: "orders".into(),
                partition: 3,
                state: "ready",
            },
        ],
        learned_promoted: 1,
    }
}

/// A group member under read_committed with two partitions: 0 with every value known (paused,
/// failing, a recovery stream failing too), 1 with none; poll statistics, a fetch latency and
/// no commit latency; a bootstrap server and a broker.
pub(crate) fn sample_metrics() -> ConsumerMetrics {
    ConsumerMetrics {
        client_id: "billing-1".into(),
        read_committed: true,
        records_consumed_total: 12,
        bytes_consumed_total: 340,
        buffered_bytes: 1024,
        fetch_buffer_held_bytes: 65_536,
        fetch_buffer_max_bytes: 67_108_864,
        group: Some(group()),
        partitions: vec![
            PartitionMetrics {
                position: Some(40),
                committed_offset: Some(30),
                high_watermark: Some(100),
                last_stable_offset: Some(90),
                log_start_offset: Some(0),
                lag: Some(50),
                records_consumed: 12,
                bytes_consumed: 340,
                paused: true,
                fetch_errors: 4,
                failing: Some(Failing {
                    since: Duration::from_millis(2_000),
                    last_error: Some("NOT_LEADER_OR_FOLLOWER".into()),
                }),
                recovery: Some(RecoveryMetrics {
                    backlog: 500,
                    drain_rate: 12.5,
                    failing: Some(Failing {
                        since: Duration::from_millis(250),
                        last_error: None,
                    }),
                }),
                ..partition(0)
            },
            partition(1),
        ],
        poll: PollStats {
            since_last_poll: Some(Duration::from_millis(1_500)),
            time_between_poll_avg: Some(Duration::from_millis(250)),
            time_between_poll_max: Some(Duration::from_millis(900)),
            poll_idle_ratio_avg: Some(0.25),
            records_consumed_rate: 4.5,
            bytes_consumed_rate: 127.5,
        },
        fetch_latency: Some(LatencyMetrics {
            count: 8,
            avg: Duration::from_micros(501_500),
            max: Duration::from_millis(502),
            p50: Some(Duration::from_millis(500)),
            p99: Some(Duration::from_millis(502)),
        }),
        commit_latency: None,
        brokers: vec![
            BrokerMetrics {
                node_id: None,
                address: "127.0.0.1:9092".into(),
                state: "down",
                connections: 0,
                connects_total: 1,
                connect_failures_total: 0,
                disconnects_total: 1,
                requests_in_flight: 0,
                requests_total: 1,
                bytes_sent_total: 60,
                bytes_received_total: 400,
                request_latency: None,
            },
            BrokerMetrics {
                node_id: Some(1),
                address: "127.0.0.1:9092".into(),
                state: "up",
                connections: 2,
                connects_total: 2,
                connect_failures_total: 1,
                disconnects_total: 0,
                requests_in_flight: 1,
                requests_total: 30,
                bytes_sent_total: 3_000,
                bytes_received_total: 90_000,
                request_latency: Some(LatencyMetrics {
                    count: 29,
                    avg: Duration::from_micros(2_250),
                    max: Duration::from_millis(502),
                    p50: Some(Duration::from_micros(1_500)),
                    p99: None,
                }),
            },
        ],
    }
}

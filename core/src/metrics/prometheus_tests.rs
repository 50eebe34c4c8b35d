use std::time::Duration;

use crate::metrics::fixtures::{group, partition, sample_metrics};
use crate::metrics::*;

/// [`sample_metrics`] without poll statistics, latencies or brokers (their families have a test
/// of their own): the rest, whose text [`a_snapshot_renders_as_the_text_format`] has in full.
fn snapshot() -> ConsumerMetrics {
    ConsumerMetrics {
        poll: PollStats::default(),
        fetch_latency: None,
        brokers: vec![],
        ..sample_metrics()
    }
}

/// The sample lines of a rendering (no `#` line), for the tests that look at a few.
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn a_snapshot_renders_as_the_text_format() {
    let want = r#"# HELP lagless_consumer_records_consumed_total Records handed to the application since the consumer was created.
# TYPE lagless_consumer_records_consumed_total counter
lagless_consumer_records_consumed_total{client_id="billing-1",group_id="billing"} 12
# HELP lagless_consumer_bytes_consumed_total Key and value bytes of the records handed to the application since the consumer was created.
# TYPE lagless_consumer_bytes_consumed_total counter
lagless_consumer_bytes_consumed_total{client_id="billing-1",group_id="billing"} 340
# HELP lagless_consumer_buffered_bytes What the records buffered for the application weigh (key, value, headers and 64 bytes a record).
# TYPE lagless_consumer_buffered_bytes gauge
lagless_consumer_buffered_bytes{client_id="billing-1",group_id="billing"} 1024
# HELP lagless_consumer_fetch_buffer_held_bytes Memory the fetch path holds (what fetch.buffer.max.bytes bounds).
# TYPE lagless_consumer_fetch_buffer_held_bytes gauge
lagless_consumer_fetch_buffer_held_bytes{client_id="billing-1",group_id="billing"} 65536
# HELP lagless_consumer_fetch_buffer_max_bytes fetch.buffer.max.bytes.
# TYPE lagless_consumer_fetch_buffer_max_bytes gauge
lagless_consumer_fetch_buffer_max_bytes{client_id="billing-1",group_id="billing"} 67108864
# HELP lagless_consumer_assigned_partitions Partitions assigned to the consumer.
# TYPE lagless_consumer_assigned_partitions gauge
lagless_consumer_assigned_partitions{client_id="billing-1",group_id="billing"} 2
# HELP lagless_consumer_records_consumed_rate Records returned by polls per second, over the last 30 to 60 s.
# TYPE lagless_consumer_records_consumed_rate gauge
lagless_consumer_records_consumed_rate{client_id="billing-1",group_id="billing"} 0.0
# HELP lagless_consumer_bytes_consumed_rate Key and value bytes of the records returned by polls per second, over the last 30 to 60 s.
# TYPE lagless_consumer_bytes_consumed_rate gauge
lagless_consumer_bytes_consumed_rate{client_id="billing-1",group_id="billing"} 0.0
# HELP lagless_consumer_records_lag_max The largest lag of the partitions whose lag is known, now.
# TYPE lagless_consumer_records_lag_max gauge
lagless_consumer_records_lag_max{client_id="billing-1",group_id="billing"} 50
# HELP lagless_consumer_records_lead_min The smallest position minus log start offset of the partitions where both are known, now.
# TYPE lagless_consumer_records_lead_min gauge
lagless_consumer_records_lead_min{client_id="billing-1",group_id="billing"} 40
# HELP lagless_consumer_group_state Where the group member is in the join protocol: 1 for its state, 0 for the others.
# TYPE lagless_consumer_group_state gauge
lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="unjoined"} 0
lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="preparing_rebalance"} 0
lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="completing_rebalance"} 0
lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="stable"} 1
# HELP lagless_consumer_group_generation The group generation the member is in.
# TYPE lagless_consumer_group_generation gauge
lagless_consumer_group_generation{client_id="billing-1",group_id="billing"} 3
# HELP lagless_consumer_group_assigned_partitions Partitions the group member owns.
# TYPE lagless_consumer_group_assigned_partitions gauge
lagless_consumer_group_assigned_partitions{client_id="billing-1",group_id="billing"} 2
# HELP lagless_consumer_group_rebalances_total Rebalances the member completed (joins whose assignment it applied).
# TYPE lagless_consumer_group_rebalances_total counter
lagless_consumer_group_rebalances_total{client_id="billing-1",group_id="billing"} 2
# HELP lagless_consumer_group_last_rebalance_duration_seconds How long the last completed rebalance took, from the start of its join to its assignment applied.
# TYPE lagless_consumer_group_last_rebalance_duration_seconds gauge
lagless_consumer_group_last_rebalance_duration_seconds{client_id="billing-1",group_id="billing"} 3.25
# HELP lagless_consumer_group_last_rebalance_seconds_ago Time since the member's last rebalance completed.
# TYPE lagless_consumer_group_last_rebalance_seconds_ago gauge
lagless_consumer_group_last_rebalance_seconds_ago{client_id="billing-1",group_id="billing"} 12.0
# HELP lagless_consumer_group_last_heartbeat_answer_seconds_ago Time since the group coordinator last answered a heartbeat.
# TYPE lagless_consumer_group_last_heartbeat_answer_seconds_ago gauge
lagless_consumer_group_last_heartbeat_answer_seconds_ago{client_id="billing-1",group_id="billing"} 1.5
# HELP lagless_consumer_group_rebalance_latency_avg_seconds The average duration of the rebalances completed in the last 30 to 60 s.
# TYPE lagless_consumer_group_rebalance_latency_avg_seconds gauge
lagless_consumer_group_rebalance_latency_avg_seconds{client_id="billing-1",group_id="billing"} 3.25
# HELP lagless_consumer_group_rebalance_latency_max_seconds The longest duration of the rebalances completed in the last 30 to 60 s.
# TYPE lagless_consumer_group_rebalance_latency_max_seconds gauge
lagless_consumer_group_rebalance_latency_max_seconds{client_id="billing-1",group_id="billing"} 3.25
# HELP lagless_consumer_group_time_since_last_poll_seconds Time since max.poll.interval.ms's timer was last restarted (by poll, or by subscribe before the first).
# TYPE lagless_consumer_group_time_since_last_poll_seconds gauge
lagless_consumer_group_time_since_last_poll_seconds{client_id="billing-1",group_id="billing"} 2.5
# HELP lagless_consumer_group_learning Partitions the member learns before the group moves them here (learner assignments): 1 for the partition's state (warming, ready), 0 for the other.
# TYPE lagless_consumer_group_learning gauge
lagless_consumer_group_learning{client_id="billing-1",group_id="billing",topic="orders",partition="2",state="warming"} 1
lagless_consumer_group_learning{client_id="billing-1",group_id="billing",topic="orders",partition="2",state="ready"} 0
lagless_consumer_group_learning{client_id="billing-1",group_id="billing",topic="orders",partition="3",state="warming"} 0
lagless_consumer_group_learning{client_id="billing-1",group_id="billing",topic="orders",partition="3",state="ready"} 1
# HELP lagless_consumer_group_learned_promoted_total Learned partitions a join then gave the member to own.
# TYPE lagless_consumer_group_learned_promoted_total counter
lagless_consumer_group_learned_promoted_total{client_id="billing-1",group_id="billing"} 1
# HELP lagless_consumer_group_max_poll_interval_seconds max.poll.interval.ms, in seconds.
# TYPE lagless_consumer_group_max_poll_interval_seconds gauge
lagless_consumer_group_max_poll_interval_seconds{client_id="billing-1",group_id="billing"} 300.0
# HELP lagless_consumer_position The offset of the next record poll returns.
# TYPE lagless_consumer_position gauge
lagless_consumer_position{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 40
# HELP lagless_consumer_committed_offset The group's committed offset as the consumer last knew it.
# TYPE lagless_consumer_committed_offset gauge
lagless_consumer_committed_offset{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 30
# HELP lagless_consumer_high_watermark The high watermark the last fetch answer named.
# TYPE lagless_consumer_high_watermark gauge
lagless_consumer_high_watermark{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 100
# HELP lagless_consumer_last_stable_offset The last stable offset the last fetch answer named.
# TYPE lagless_consumer_last_stable_offset gauge
lagless_consumer_last_stable_offset{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 90
# HELP lagless_consumer_log_start_offset The log start offset the last fetch answer named.
# TYPE lagless_consumer_log_start_offset gauge
lagless_consumer_log_start_offset{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 0
# HELP lagless_consumer_records_lag The end offset (the high watermark, or the last stable offset under read_committed) minus the position.
# TYPE lagless_consumer_records_lag gauge
lagless_consumer_records_lag{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 50
# HELP lagless_consumer_partition_records_consumed_total Records handed to the application from the partition since it was assigned.
# TYPE lagless_consumer_partition_records_consumed_total counter
lagless_consumer_partition_records_consumed_total{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 12
lagless_consumer_partition_records_consumed_total{client_id="billing-1",group_id="billing",topic="orders",partition="1"} 0
# HELP lagless_consumer_partition_bytes_consumed_total Key and value bytes of the records handed to the application from the partition since it was assigned.
# TYPE lagless_consumer_partition_bytes_consumed_total counter
lagless_consumer_partition_bytes_consumed_total{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 340
lagless_consumer_partition_bytes_consumed_total{client_id="billing-1",group_id="billing",topic="orders",partition="1"} 0
# HELP lagless_consumer_partition_fetch_errors_total Fetches and position lookups of the partition that failed since it was assigned.
# TYPE lagless_consumer_partition_fetch_errors_total counter
lagless_consumer_partition_fetch_errors_total{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 4
lagless_consumer_partition_fetch_errors_total{client_id="billing-1",group_id="billing",topic="orders",partition="1"} 0
# HELP lagless_consumer_partition_paused 1 while the partition is paused by pause().
# TYPE lagless_consumer_partition_paused gauge
lagless_consumer_partition_paused{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 1
lagless_consumer_partition_paused{client_id="billing-1",group_id="billing",topic="orders",partition="1"} 0
# HELP lagless_consumer_partition_failing_seconds Time since the partition's stream last made progress, while its last attempt failed (KIP-572).
# TYPE lagless_consumer_partition_failing_seconds gauge
lagless_consumer_partition_failing_seconds{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 2.0
# HELP lagless_consumer_partition_recovery_backlog Offsets left in the backlog of the partition's recovery stream (KIP-333), while one drains.
# TYPE lagless_consumer_partition_recovery_backlog gauge
lagless_consumer_partition_recovery_backlog{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 500
# HELP lagless_consumer_partition_recovery_drain_rate Offsets of the recovery stream's backlog drained per second, over the last 30 to 60 s (KIP-333), while one drains.
# TYPE lagless_consumer_partition_recovery_drain_rate gauge
lagless_consumer_partition_recovery_drain_rate{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 12.5
# HELP lagless_consumer_partition_recovery_failing_seconds Time since the partition's recovery stream last made progress, while its last attempt failed (KIP-572).
# TYPE lagless_consumer_partition_recovery_failing_seconds gauge
lagless_consumer_partition_recovery_failing_seconds{client_id="billing-1",group_id="billing",topic="orders",partition="0"} 0.25
"#;
    let got = snapshot().to_prometheus();
    // Line by line first, so that a difference names its line.
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {}", n + 1);
    }
    assert_eq!(got, want);
}

#[test]
fn label_values_escape_backslash_double_quote_and_newline() {
    let m = ConsumerMetrics {
        client_id: "app \"blue\"\\east\nrack-2".into(),
        group: Some(GroupMetrics {
            group_id: "g\\1".into(),
            ..group()
        }),
        partitions: vec![PartitionMetrics {
            topic: "a\"b".into(),
            position: Some(7),
            ..partition(3)
        }],
        ..snapshot()
    };
    let text = m.to_prometheus();
    let labels = r#"client_id="app \"blue\"\\east\nrack-2",group_id="g\\1""#;
    assert!(
        text.contains(&format!(
            "lagless_consumer_records_consumed_total{{{labels}}} 12\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "lagless_consumer_position{{{labels},topic=\"a\\\"b\",partition=\"3\"}} 7\n"
        )),
        "{text}"
    );
    // No raw newline inside a sample: every line is a comment or a whole sample.
    for line in text.lines() {
        assert!(
            line.starts_with("# ") || line.starts_with("lagless_consumer_"),
            "{line:?}"
        );
    }
}

#[test]
fn values_not_known_have_no_sample_and_a_family_without_one_is_left_out() {
    let m = ConsumerMetrics {
        group: Some(GroupMetrics {
            state: "unjoined",
            generation_id: None,
            member_id: None,
            assignor: None,
            assigned_partitions: 0,
            rebalance_count: 0,
            last_rebalance: None,
            ..group()
        }),
        partitions: vec![partition(0), partition(1)],
        ..snapshot()
    };
    let text = m.to_prometheus();
    for absent in [
        "lagless_consumer_group_generation",
        "lagless_consumer_group_last_rebalance_duration_seconds",
        "lagless_consumer_position",
        "lagless_consumer_committed_offset",
        "lagless_consumer_high_watermark",
        "lagless_consumer_last_stable_offset",
        "lagless_consumer_log_start_offset",
        "lagless_consumer_records_lag",
        "lagless_consumer_partition_failing_seconds",
        "lagless_consumer_partition_recovery_backlog",
        "lagless_consumer_partition_recovery_failing_seconds",
    ] {
        assert!(!text.contains(&format!("{absent} ")), "{absent}: {text}");
        assert!(!text.contains(&format!("{absent}{{")), "{absent}: {text}");
    }
    // What is known still is, zero included.
    let s = samples(&text);
    for present in [
        r#"lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="unjoined"} 1"#,
        r#"lagless_consumer_group_state{client_id="billing-1",group_id="billing",state="stable"} 0"#,
        r#"lagless_consumer_group_rebalances_total{client_id="billing-1",group_id="billing"} 0"#,
        r#"lagless_consumer_partition_records_consumed_total{client_id="billing-1",group_id="billing",topic="orders",partition="1"} 0"#,
        r#"lagless_consumer_assigned_partitions{client_id="billing-1",group_id="billing"} 2"#,
    ] {
        assert!(s.contains(&present), "{present}: {text}");
    }
}

#[test]
fn a_consumer_outside_a_group_has_no_group_id_and_no_group_family() {
    let m = ConsumerMetrics {
        group: None,
        ..snapshot()
    };
    let text = m.to_prometheus();
    assert!(!text.contains("group_id="), "{text}");
    assert!(!text.contains("lagless_consumer_group_"), "{text}");
    assert!(samples(&text).contains(
        &r#"lagless_consumer_records_lag{client_id="billing-1",topic="orders",partition="0"} 50"#
    ));
}

#[test]
fn a_member_state_outside_the_known_ones_is_a_sample_of_its_own() {
    let m = ConsumerMetrics {
        group: Some(GroupMetrics {
            state: "reconciling",
            ..group()
        }),
        ..snapshot()
    };
    let text = m.to_prometheus();
    let states: Vec<&str> = samples(&text)
        .into_iter()
        .filter(|l| l.starts_with("lagless_consumer_group_state{"))
        .map(|l| l.rsplit_once(",state=").unwrap().1)
        .collect();
    assert_eq!(
        states,
        [
            r#""unjoined"} 0"#,
            r#""preparing_rebalance"} 0"#,
            r#""completing_rebalance"} 0"#,
            r#""stable"} 0"#,
            r#""reconciling"} 1"#,
        ]
    );
}

#[test]
fn poll_latency_and_broker_families_carry_the_broker_labels_and_leave_unknowns_out() {
    let m = ConsumerMetrics {
        group: None,
        poll: PollStats {
            since_last_poll: Some(Duration::from_millis(1_500)),
            time_between_poll_avg: None,
            time_between_poll_max: Some(Duration::from_millis(900)),
            poll_idle_ratio_avg: Some(0.25),
            records_consumed_rate: 4.5,
            bytes_consumed_rate: 127.5,
        },
        fetch_latency: Some(LatencyMetrics {
            count: 2,
            avg: Duration::from_millis(250),
            max: Duration::from_millis(500),
            p50: None,
            p99: None,
        }),
        // The fixture's bootstrap entry (down) and broker 1 (up).
        brokers: sample_metrics().brokers,
        ..snapshot()
    };
    let m = ConsumerMetrics {
        group: Some(GroupMetrics {
            since_last_rebalance: Some(Duration::from_millis(12_500)),
            since_last_heartbeat_answer: None,
            rebalance_latency_avg: Some(Duration::from_millis(250)),
            rebalance_latency_max: Some(Duration::from_millis(400)),
            ..group()
        }),
        ..m
    };
    let text = m.to_prometheus();
    let s = samples(&text);
    let g = r#"client_id="billing-1",group_id="billing""#;
    for present in [
        format!("lagless_consumer_group_last_rebalance_seconds_ago{{{g}}} 12.5"),
        format!("lagless_consumer_group_rebalance_latency_avg_seconds{{{g}}} 0.25"),
        format!("lagless_consumer_group_rebalance_latency_max_seconds{{{g}}} 0.4"),
        format!("lagless_consumer_records_lag_max{{{g}}} 50"),
        format!("lagless_consumer_records_lead_min{{{g}}} 40"),
    ] {
        assert!(s.contains(&present.as_str()), "{present}: {text}");
    }
    let bootstrap = r#"client_id="billing-1",group_id="billing",broker="127.0.0.1:9092""#;
    let node = r#"client_id="billing-1",group_id="billing",broker="127.0.0.1:9092",node_id="1""#;
    for present in [
        r#"lagless_consumer_last_poll_seconds_ago{client_id="billing-1",group_id="billing"} 1.5"#.to_string(),
        r#"lagless_consumer_time_between_poll_max_seconds{client_id="billing-1",group_id="billing"} 0.9"#.into(),
        r#"lagless_consumer_poll_idle_ratio_avg{client_id="billing-1",group_id="billing"} 0.25"#.into(),
        r#"lagless_consumer_records_consumed_rate{client_id="billing-1",group_id="billing"} 4.5"#.into(),
        r#"lagless_consumer_bytes_consumed_rate{client_id="billing-1",group_id="billing"} 127.5"#.into(),
        r#"lagless_consumer_fetch_latency_avg_seconds{client_id="billing-1",group_id="billing"} 0.25"#.into(),
        r#"lagless_consumer_fetch_latency_max_seconds{client_id="billing-1",group_id="billing"} 0.5"#.into(),
        format!("lagless_consumer_broker_state{{{bootstrap},state=\"down\"}} 1"),
        format!("lagless_consumer_broker_state{{{bootstrap},state=\"up\"}} 0"),
        format!("lagless_consumer_broker_state{{{node},state=\"up\"}} 1"),
        format!("lagless_consumer_broker_state{{{node},state=\"init\"}} 0"),
        format!("lagless_consumer_broker_connections{{{node}}} 2.0"),
        format!("lagless_consumer_broker_connects_total{{{node}}} 2"),
        format!("lagless_consumer_broker_connect_failures_total{{{node}}} 1"),
        format!("lagless_consumer_broker_disconnects_total{{{bootstrap}}} 1"),
        format!("lagless_consumer_broker_requests_in_flight{{{node}}} 1.0"),
        format!("lagless_consumer_broker_requests_total{{{node}}} 30"),
        format!("lagless_consumer_broker_sent_bytes_total{{{node}}} 3000"),
        format!("lagless_consumer_broker_received_bytes_total{{{node}}} 90000"),
        format!("lagless_consumer_broker_request_latency_avg_seconds{{{node}}} 0.00225"),
        format!("lagless_consumer_broker_request_latency_max_seconds{{{node}}} 0.502"),
        format!("lagless_consumer_broker_request_latency_p50_seconds{{{node}}} 0.0015"),
    ] {
        assert!(s.contains(&present.as_str()), "{present}: {text}");
    }
    for absent in [
        "lagless_consumer_time_between_poll_avg_seconds",
        "lagless_consumer_commit_latency_avg_seconds",
        "lagless_consumer_broker_request_latency_p99_seconds",
    ] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
    // The bootstrap server's latency is unknown: only the node's sample.
    let avg: Vec<&&str> = s
        .iter()
        .filter(|l| l.starts_with("lagless_consumer_broker_request_latency_avg_seconds"))
        .collect();
    assert_eq!(avg.len(), 1, "{text}");
}

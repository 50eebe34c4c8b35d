use super::fixtures::sample_metrics;
use super::*;

#[test]
fn lag_runs_to_the_high_watermark_or_under_read_committed_the_last_stable_offset() {
    // (position, high watermark, last stable offset, read_committed) -> lag
    type Row = (Option<i64>, Option<i64>, Option<i64>, bool, Option<i64>);
    let table: [Row; 9] = [
        (Some(40), Some(100), Some(90), false, Some(60)),
        (Some(40), Some(100), Some(90), true, Some(50)),
        (Some(100), Some(100), Some(100), false, Some(0)),
        // Nothing known yet: no value, not a sentinel.
        (None, Some(100), Some(90), false, None),
        (Some(40), None, None, false, None),
        (Some(40), Some(100), None, true, None),
        (None, None, None, true, None),
        // The high watermark alone is known: read_uncommitted does not need the other.
        (Some(0), Some(7), None, false, Some(7)),
        // Sought past the end: the real difference, negative.
        (Some(120), Some(100), Some(100), false, Some(-20)),
    ];
    for (position, hw, lso, rc, want) in table {
        assert_eq!(
            lag(position, hw, lso, rc),
            want,
            "{position:?} {hw:?} {lso:?} {rc}"
        );
    }
}

#[test]
fn learned_partitions_are_ready_once_warmed_up_and_warming_until_then() {
    let tp = |p| TopicPartition::new("orders", p);
    let learning: BTreeSet<TopicPartition> = [tp(4), tp(1), tp(2)].into();
    let ready: BTreeSet<TopicPartition> = [tp(2)].into();
    let got: Vec<(i32, &str)> = LearnerPartition::of(&learning, &ready)
        .iter()
        .map(|l| (l.partition, l.state))
        .collect();
    assert_eq!(got, vec![(1, "warming"), (2, "ready"), (4, "warming")]);
    assert!(LearnerPartition::of(&BTreeSet::new(), &ready).is_empty());
}

#[test]
fn the_lead_runs_from_the_log_start_to_the_position_once_both_are_known() {
    let p = |position, log_start_offset| PartitionMetrics {
        position,
        log_start_offset,
        ..fixtures::partition(0)
    };
    assert_eq!(p(Some(40), Some(15)).lead(), Some(25));
    assert_eq!(p(None, Some(15)).lead(), None);
    assert_eq!(p(Some(40), None).lead(), None);
}

#[test]
fn a_broker_offset_of_minus_one_is_unknown() {
    assert_eq!(known(-1), None);
    assert_eq!(known(0), Some(0));
    assert_eq!(known(42), Some(42));
}

#[test]
fn the_json_names_each_value_and_leaves_what_is_unknown_null() {
    let v: Value = serde_json::from_str(&sample_metrics().to_json_string()).unwrap();
    // In parts: one json! of it all passes the macro's recursion limit.
    let group = json!({
        "group_id": "billing",
        "state": "stable",
        "generation_id": 3,
        "member_id": "m-1",
        "group_instance_id": null,
        "protocol": "classic",
        "assignor": "range",
        "assigned_partitions": 2,
        "rebalance_cnt": 2,
        "rebalance_reason": "the subscription changed",
        "rebalance_duration_ms": 3250,
        "rejoin_reason": null,
        "last_rebalance_seconds_ago": 12.0,
        "last_heartbeat_answer_seconds_ago": 1.5,
        "rebalance_latency_avg_ms": 3250.0,
        "rebalance_latency_max_ms": 3250.0,
        "last_poll_ms_ago": 2500,
        "max_poll_interval_ms": 300000,
        "learning": [
            {"topic": "orders", "partition": 2, "state": "warming"},
            {"topic": "orders", "partition": 3, "state": "ready"},
        ],
        "learned_promoted": 1,
    });
    let partitions = json!([
        {
            "topic": "orders", "partition": 0,
            "position": 40, "committed_offset": 30,
            "hi_offset": 100, "ls_offset": 90, "lo_offset": 0,
            "consumer_lag": 50,
            "records_consumed": 12, "bytes_consumed": 340,
            "paused": true,
            "fetch_errors": 4,
            "failing_for_ms": 2000, "last_error": "NOT_LEADER_OR_FOLLOWER",
            "recovery": {"backlog": 500, "drain_rate": 12.5, "failing_for_ms": 250, "last_error": null},
        },
        {
            "topic": "orders", "partition": 1,
            "position": null, "committed_offset": null,
            "hi_offset": null, "ls_offset": null, "lo_offset": null,
            "consumer_lag": null,
            "records_consumed": 0, "bytes_consumed": 0,
            "paused": false,
            "fetch_errors": 0,
            "failing_for_ms": null, "last_error": null,
            "recovery": null,
        },
    ]);
    let brokers = json!([
        {
            "node_id": null, "address": "127.0.0.1:9092", "state": "down",
            "connections": 0, "connects": 1, "connect_failures": 0, "disconnects": 1,
            "requests_in_flight": 0, "requests": 1, "bytes_sent": 60, "bytes_received": 400,
            "rtt": null,
        },
        {
            "node_id": 1, "address": "127.0.0.1:9092", "state": "up",
            "connections": 2, "connects": 2, "connect_failures": 1, "disconnects": 0,
            "requests_in_flight": 1, "requests": 30, "bytes_sent": 3000, "bytes_received": 90000,
            "rtt": {"count": 29, "avg_ms": 2.25, "max_ms": 502.0, "p50_ms": 1.5, "p99_ms": null},
        },
    ]);
    let want = json!({
        "type": "consumer",
        "client_id": "billing-1",
        "isolation_level": "read_committed",
        "records_consumed_total": 12,
        "bytes_consumed_total": 340,
        "buffered_bytes": 1024,
        "fetch_buffer_held_bytes": 65536,
        "fetch_buffer_max_bytes": 67108864,
        "assigned_partitions": 2,
        // Partition 0 alone knows its lag (50) and its lead (position 40 - log start 0).
        "records_lag_max": 50,
        "records_lead_min": 40,
        "group": group,
        "partitions": partitions,
        "last_poll_seconds_ago": 1.5,
        "time_between_poll_avg_ms": 250.0,
        "time_between_poll_max_ms": 900.0,
        "poll_idle_ratio_avg": 0.25,
        "records_consumed_rate": 4.5,
        "bytes_consumed_rate": 127.5,
        "fetch_latency": {"count": 8, "avg_ms": 501.5, "max_ms": 502.0, "p50_ms": 500.0, "p99_ms": 502.0},
        "commit_latency": null,
        "brokers": brokers,
    });
    assert_eq!(v, want);
}

#[test]
fn a_consumer_outside_a_group_renders_no_group() {
    let m = ConsumerMetrics {
        read_committed: false,
        group: None,
        partitions: vec![],
        poll: PollStats::default(),
        fetch_latency: None,
        brokers: vec![],
        ..sample_metrics()
    };
    let v = m.to_json();
    // Nothing polled, nothing fetched: no value rather than a sentinel.
    assert_eq!(v["last_poll_seconds_ago"], Value::Null);
    assert_eq!(v["poll_idle_ratio_avg"], Value::Null);
    assert_eq!(v["records_consumed_rate"], 0.0);
    assert_eq!(v["bytes_consumed_rate"], 0.0);
    assert_eq!(v["fetch_latency"], Value::Null);
    assert_eq!(v["brokers"], json!([]));
    assert_eq!(v["group"], Value::Null);
    assert_eq!(v["isolation_level"], "read_uncommitted");
    assert_eq!(v["assigned_partitions"], 0);
    assert_eq!(v["records_lag_max"], Value::Null);
    assert_eq!(v["records_lead_min"], Value::Null);
}

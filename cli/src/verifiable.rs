//! `lagless verifiable-producer` and `lagless verifiable-consumer`: the command-line flags and
//! the JSON events (one object a line on stdout) of Kafka's own `VerifiableProducer` and
//! `VerifiableConsumer` (org.apache.kafka.tools), so that Kafka's system tests, and any harness
//! built for those tools, can drive lagless in their place.
//!
//! The events are built by the pure functions below (tested from literal inputs); the two loops
//! only carry them out. SIGTERM or SIGINT ends either tool as Java's shutdown hook does: the
//! producer stops sending, flushes and prints `shutdown_complete` and `tool_data`; the consumer
//! leaves its poll loop, closes (revoking its partitions) and prints `shutdown_complete`.
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use lagless::{
    Config, Consumer, ConsumerRecord, OffsetAndMetadata, Producer, ProducerRecord,
    RebalanceListener, TopicPartition,
};
use serde_json::{json, Map, Value};

use crate::settings::parse_config_file;

#[derive(Args)]
pub(crate) struct ProducerArgs {
    /// Produce messages to this topic.
    #[arg(long)]
    pub topic: String,
    /// The server(s) to connect to (HOST1:PORT1,HOST2:PORT2,...).
    #[arg(long = "bootstrap-server")]
    pub bootstrap_server: String,
    /// Produce this many messages; -1: until the process is stopped.
    #[arg(long = "max-messages", default_value_t = -1, allow_hyphen_values = true)]
    pub max_messages: i64,
    /// If >= 0, at most about this many messages a second.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub throughput: i64,
    /// Acks required on each message: 0, 1 or -1.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true, value_parser = parse_acks)]
    pub acks: i32,
    /// (Deprecated by Java's tool) a producer config properties file.
    #[arg(long = "producer.config", conflicts_with = "command_config")]
    pub producer_config: Option<std::path::PathBuf>,
    /// Send messages with creation time starting at this value, in ms since the epoch.
    #[arg(long = "message-create-time", default_value_t = -1, allow_hyphen_values = true)]
    pub message_create_time: i64,
    /// Each value is this prefix, a dot and the counter.
    #[arg(long = "value-prefix")]
    pub value_prefix: Option<i64>,
    /// Keys count from 0 up to this (exclusive), then start over; no key without it.
    #[arg(long = "repeating-keys")]
    pub repeating_keys: Option<u64>,
    /// A config properties file (settings shared with the flags above are overridden).
    #[arg(long = "command-config")]
    pub command_config: Option<std::path::PathBuf>,
}

#[derive(Args)]
pub(crate) struct ConsumerArgs {
    /// The server(s) to connect to (HOST1:PORT1,HOST2:PORT2,...).
    #[arg(long = "bootstrap-server", required_unless_present = "broker_list")]
    pub bootstrap_server: Option<String>,
    /// Deprecated name of --bootstrap-server (ignored when that is given).
    #[arg(long = "broker-list")]
    pub broker_list: Option<String>,
    /// Consume messages from this topic.
    #[arg(long)]
    pub topic: String,
    /// classic or consumer (KIP-848).
    #[arg(long = "group-protocol", default_value = "classic")]
    pub group_protocol: String,
    /// The broker-side assignor (only with --group-protocol consumer).
    #[arg(long = "group-remote-assignor")]
    pub group_remote_assignor: Option<String>,
    /// The group shared among the members.
    #[arg(long = "group-id")]
    pub group_id: String,
    /// A static member's unique id.
    #[arg(long = "group-instance-id")]
    pub group_instance_id: Option<String>,
    /// Consume this many messages; -1: until the process is stopped.
    #[arg(long = "max-messages", default_value_t = -1, allow_hyphen_values = true)]
    pub max_messages: i64,
    /// The member's session timeout in ms (classic protocol only).
    #[arg(long = "session-timeout", default_value_t = 30000)]
    pub session_timeout: u32,
    /// Print every record consumed (record_data events).
    #[arg(long)]
    pub verbose: bool,
    /// Let the consumer commit on its own instead of after each poll.
    #[arg(long = "enable-autocommit")]
    pub enable_autocommit: bool,
    /// earliest, latest or none.
    #[arg(long = "reset-policy", default_value = "earliest")]
    pub reset_policy: String,
    /// The assignor (classic protocol only); Java class names are understood.
    #[arg(
        long = "assignment-strategy",
        default_value = "org.apache.kafka.clients.consumer.RangeAssignor"
    )]
    pub assignment_strategy: String,
    /// A consumer config properties file (settings shared with the flags are overridden).
    #[arg(long = "consumer.config")]
    pub consumer_config: Option<std::path::PathBuf>,
}

fn parse_acks(s: &str) -> Result<i32, String> {
    match s {
        "0" | "1" | "-1" => Ok(s.parse().expect("checked")),
        _ => Err(format!("{s:?}: acks must be 0, 1 or -1")),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// An event as the Java tools print it: `timestamp` and `name` beside the event's own fields
/// (Java prints those two first; a JSON reader does not see the order).
pub fn event(timestamp: i64, name: &str, fields: Value) -> Value {
    let mut m = Map::new();
    m.insert("timestamp".into(), json!(timestamp));
    m.insert("name".into(), json!(name));
    if let Value::Object(rest) = fields {
        m.extend(rest);
    }
    Value::Object(m)
}

/// The value of message `i`: `<prefix>.<i>` or `<i>`.
pub fn message_value(prefix: Option<i64>, i: u64) -> String {
    match prefix {
        Some(p) => format!("{p}.{i}"),
        None => i.to_string(),
    }
}

/// The key of message `i`: with `--repeating-keys n`, `i mod n`; otherwise none.
pub fn message_key(repeating: Option<u64>, i: u64) -> Option<String> {
    repeating.filter(|n| *n > 0).map(|n| (i % n).to_string())
}

/// How long to wait before sending message `sent` (0-based) to keep to `throughput` messages a
/// second, `elapsed` after the start; Java's ThroughputThrottler, without its busy waits.
pub fn throttle(throughput: i64, sent: u64, elapsed: Duration) -> Duration {
    if throughput < 0 {
        return Duration::ZERO;
    }
    if throughput == 0 {
        // Java's tool sends nothing more: wait as long as one can.
        return Duration::from_secs(3600);
    }
    let due = Duration::from_secs_f64(sent as f64 / throughput as f64);
    due.saturating_sub(elapsed)
}

/// `records_consumed` for one poll's records, capped at `left` (a `--max-messages` limit), with
/// the offsets to commit: per partition its count, first and last offset, and last + 1.
pub fn records_consumed(
    records: &[ConsumerRecord],
    left: Option<u64>,
) -> (Value, Vec<(TopicPartition, OffsetAndMetadata)>, u64) {
    let taken = match left {
        Some(n) => &records[..records.len().min(n as usize)],
        None => records,
    };
    // Per partition, in the order partitions first appear.
    let mut order: Vec<(String, i32)> = Vec::new();
    let mut summary: BTreeMap<(String, i32), (u64, i64, i64)> = BTreeMap::new();
    for r in taken {
        let key = (r.topic.to_string(), r.partition);
        let s = summary.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            (0, r.offset, r.offset)
        });
        s.0 += 1;
        s.1 = s.1.min(r.offset);
        s.2 = s.2.max(r.offset);
    }
    let mut partitions = Vec::new();
    let mut offsets = Vec::new();
    for key in order {
        let (count, min, max) = summary[&key];
        partitions.push(json!({
            "topic": key.0, "partition": key.1, "count": count, "minOffset": min, "maxOffset": max,
        }));
        offsets.push((
            TopicPartition::new(key.0, key.1),
            OffsetAndMetadata {
                offset: max + 1,
                metadata: String::new(),
            },
        ));
    }
    let fields = json!({"count": records.len(), "partitions": partitions});
    (fields, offsets, taken.len() as u64)
}

/// `offsets_committed` for a commit of `offsets` and its outcome; `error` only on a failure.
pub fn offsets_committed(
    offsets: &[(TopicPartition, OffsetAndMetadata)],
    error: Option<String>,
) -> Value {
    let list: Vec<Value> = offsets
        .iter()
        .map(|(tp, o)| json!({"topic": tp.topic, "partition": tp.partition, "offset": o.offset}))
        .collect();
    let mut fields = json!({"offsets": list, "success": error.is_none()});
    if let Some(e) = error {
        fields["error"] = json!(e);
    }
    fields
}

fn partitions_field(partitions: &[TopicPartition]) -> Value {
    let list: Vec<Value> = partitions
        .iter()
        .map(|tp| json!({"topic": tp.topic, "partition": tp.partition}))
        .collect();
    json!({ "partitions": list })
}

/// One JSON object a line on stdout, lines never interleaved (callbacks print from other
/// threads); a closed stdout ends nothing, as Java's PrintStream.
fn print(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// Set when SIGTERM or SIGINT arrives.
fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| format!("installing the signal handler: {e}"))?;
    }
    Ok(stop)
}

fn properties(path: &std::path::Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading config file {}: {e}", path.display()))?;
    parse_config_file(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

fn set(c: &mut Config, key: &str, value: &str) -> Result<(), String> {
    c.set(key, value).map_err(|e| e.to_string())
}

pub fn produce(a: &ProducerArgs) -> Result<(), String> {
    let mut c = Config::new();
    set(&mut c, "bootstrap.servers", &a.bootstrap_server)?;
    set(&mut c, "acks", &a.acks.to_string())?;
    // As Java's tool: no retries of a failed send (delivery.timeout.ms still bounds each).
    set(&mut c, "retries", "0")?;
    if a.acks != -1 {
        // acks other than all rules idempotence out, as the Java producer decides by itself.
        set(&mut c, "enable.idempotence", "false")?;
    }
    for file in [&a.producer_config, &a.command_config]
        .into_iter()
        .flatten()
    {
        for (k, v) in properties(file)? {
            set(&mut c, &k, &v)?;
        }
    }
    let producer = Producer::from_config(&c).map_err(|e| e.to_string())?;
    let stop = stop_flag()?;
    let acked = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    print(&event(now_ms(), "startup_complete", json!({})));
    let limit = u64::try_from(a.max_messages).unwrap_or(u64::MAX);
    let mut sent = 0u64;
    while sent < limit && !stop.load(Ordering::Relaxed) {
        let wait = throttle(a.throughput, sent, started.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait.min(Duration::from_millis(100)));
            continue;
        }
        let (key, value) = (
            message_key(a.repeating_keys, sent),
            message_value(a.value_prefix, sent),
        );
        let mut record = ProducerRecord::new(a.topic.as_str(), value.clone());
        if let Some(k) = &key {
            record = record.with_key(k.clone());
        }
        if a.message_create_time >= 0 {
            record =
                record.with_timestamp(a.message_create_time + started.elapsed().as_millis() as i64);
        }
        sent += 1;
        let (topic, acked) = (a.topic.clone(), acked.clone());
        let (k2, v2) = (key.clone(), value.clone());
        let callback = move |result: lagless::Result<lagless::RecordMetadata>| match result {
            Ok(md) => {
                acked.fetch_add(1, Ordering::Relaxed);
                print(&event(
                    now_ms(),
                    "producer_send_success",
                    json!({"key": k2, "value": v2, "topic": md.topic, "partition": md.partition,
                           "offset": md.offset}),
                ));
            }
            Err(e) => print(&event(
                now_ms(),
                "producer_send_error",
                send_error(&topic, &k2, &v2, &e),
            )),
        };
        if let Err(e) = producer.send_with_callback(record, callback) {
            print(&event(
                now_ms(),
                "producer_send_error",
                send_error(&a.topic, &key, &value, &e),
            ));
        }
    }
    let closed = producer.close(Duration::from_secs(3600));
    print(&event(now_ms(), "shutdown_complete", json!({})));
    let acked = acked.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    print(&event(
        now_ms(),
        "tool_data",
        json!({"sent": sent, "acked": acked, "target_throughput": a.throughput,
               "avg_throughput": acked as f64 / secs}),
    ));
    closed.map_err(|e| e.to_string())
}

/// `producer_send_error`'s fields; `exception` names lagless' error kind where Java names the
/// exception's class.
fn send_error(topic: &str, key: &Option<String>, value: &str, e: &lagless::Error) -> Value {
    json!({"key": key, "value": value, "topic": topic,
           "exception": format!("class lagless.{:?}", e.kind()), "message": e.to_string()})
}

/// Prints the group's assignment changes as the Java tool's listener does.
struct PrintingListener;

impl RebalanceListener for PrintingListener {
    fn on_partitions_revoked(
        &mut self,
        _: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        print(&event(
            now_ms(),
            "partitions_revoked",
            partitions_field(partitions),
        ));
        Ok(())
    }
    fn on_partitions_assigned(
        &mut self,
        _: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        print(&event(
            now_ms(),
            "partitions_assigned",
            partitions_field(partitions),
        ));
        Ok(())
    }
}

pub fn consume(a: &ConsumerArgs) -> Result<(), String> {
    let mut c = Config::new();
    if let Some(file) = &a.consumer_config {
        for (k, v) in properties(file)? {
            set(&mut c, &k, &v)?;
        }
    }
    let bootstrap = a
        .bootstrap_server
        .as_ref()
        .or(a.broker_list.as_ref())
        .ok_or("--bootstrap-server is required")?;
    set(&mut c, "bootstrap.servers", bootstrap)?;
    set(&mut c, "group.id", &a.group_id)?;
    if let Some(id) = &a.group_instance_id {
        set(&mut c, "group.instance.id", id)?;
    }
    if a.group_protocol.eq_ignore_ascii_case("consumer") {
        set(&mut c, "group.protocol", "consumer")?;
        if let Some(assignor) = &a.group_remote_assignor {
            set(&mut c, "group.remote.assignor", assignor)?;
        }
    } else {
        set(&mut c, "group.protocol", &a.group_protocol)?;
        set(
            &mut c,
            "partition.assignment.strategy",
            &a.assignment_strategy,
        )?;
        set(&mut c, "session.timeout.ms", &a.session_timeout.to_string())?;
    }
    set(
        &mut c,
        "enable.auto.commit",
        if a.enable_autocommit { "true" } else { "false" },
    )?;
    set(&mut c, "auto.offset.reset", &a.reset_policy)?;
    let consumer = Consumer::from_config(&c).map_err(|e| e.to_string())?;
    let stop = stop_flag()?;
    print(&event(now_ms(), "startup_complete", json!({})));
    let result = consume_loop(&consumer, a, &stop);
    let closed = consumer.close(None).map_err(|e| e.to_string());
    print(&event(now_ms(), "shutdown_complete", json!({})));
    result.and(closed)
}

fn consume_loop(consumer: &Consumer, a: &ConsumerArgs, stop: &AtomicBool) -> Result<(), String> {
    consumer
        .subscribe(&[&a.topic], Some(Box::new(PrintingListener)))
        .map_err(|e| e.to_string())?;
    let limit = u64::try_from(a.max_messages).ok();
    let mut consumed = 0u64;
    while limit.is_none_or(|n| consumed < n) && !stop.load(Ordering::Relaxed) {
        let records = consumer
            .poll(Duration::from_millis(100))
            .map_err(|e| e.to_string())?;
        if records.is_empty() {
            continue;
        }
        let left = limit.map(|n| n - consumed);
        let (fields, offsets, taken) = records_consumed(&records, left);
        if a.verbose {
            for r in &records[..taken as usize] {
                print(&event(
                    now_ms(),
                    "record_data",
                    json!({"key": r.key.as_deref().map(String::from_utf8_lossy),
                           "value": r.value.as_deref().map(String::from_utf8_lossy),
                           "topic": &*r.topic, "partition": r.partition, "offset": r.offset}),
                ));
            }
        }
        print(&event(now_ms(), "records_consumed", fields));
        consumed += taken;
        if !a.enable_autocommit {
            let error = consumer
                .commit_sync(Some(&offsets), None)
                .err()
                .map(|e| e.to_string());
            print(&event(
                now_ms(),
                "offsets_committed",
                offsets_committed(&offsets, error),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(p: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: "t".into(),
            partition: p,
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
            from_recovery: false,
        }
    }

    #[test]
    fn events_carry_timestamp_and_name_beside_their_fields() {
        let e = event(
            5,
            "producer_send_success",
            json!({"key": null, "value": "3", "offset": 7}),
        );
        assert_eq!(
            e,
            json!({"timestamp": 5, "name": "producer_send_success", "key": null, "value": "3",
                   "offset": 7})
        );
    }

    #[test]
    fn keys_repeat_and_values_carry_their_prefix() {
        let keys: Vec<Option<String>> = (0..5).map(|i| message_key(Some(3), i)).collect();
        assert_eq!(keys, ["0", "1", "2", "0", "1"].map(|k| Some(k.to_string())));
        assert_eq!(message_key(None, 4), None);
        assert_eq!(message_value(Some(7), 12), "7.12");
        assert_eq!(message_value(None, 12), "12");
    }

    #[test]
    fn the_throttle_keeps_to_the_rate_and_minus_one_is_unbounded() {
        assert_eq!(throttle(-1, 1000, Duration::ZERO), Duration::ZERO);
        // 100 a second: message 50 is due at 0.5 s.
        assert_eq!(
            throttle(100, 50, Duration::from_millis(200)),
            Duration::from_millis(300)
        );
        assert_eq!(
            throttle(100, 50, Duration::from_millis(600)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_poll_is_summed_per_partition_capped_at_the_limit_with_offsets_to_commit() {
        let records = [
            record(1, 10),
            record(0, 4),
            record(1, 11),
            record(0, 5),
            record(1, 12),
        ];
        let (fields, offsets, taken) = records_consumed(&records, Some(4));
        assert_eq!(taken, 4);
        assert_eq!(
            fields,
            json!({"count": 5, "partitions": [
                {"topic": "t", "partition": 1, "count": 2, "minOffset": 10, "maxOffset": 11},
                {"topic": "t", "partition": 0, "count": 2, "minOffset": 4, "maxOffset": 5},
            ]})
        );
        let next: Vec<(i32, i64)> = offsets
            .iter()
            .map(|(tp, o)| (tp.partition, o.offset))
            .collect();
        assert_eq!(next, [(1, 12), (0, 6)]);
        let (_, _, all) = records_consumed(&records, None);
        assert_eq!(all, 5);
    }

    #[test]
    fn a_commit_names_its_error_only_when_it_failed() {
        let offsets = [(
            TopicPartition::new("t", 0),
            OffsetAndMetadata {
                offset: 6,
                metadata: String::new(),
            },
        )];
        assert_eq!(
            offsets_committed(&offsets, None),
            json!({"offsets": [{"topic": "t", "partition": 0, "offset": 6}], "success": true})
        );
        let failed = offsets_committed(&offsets, Some("REBALANCE_IN_PROGRESS".into()));
        assert_eq!(failed["success"], json!(false));
        assert_eq!(failed["error"], json!("REBALANCE_IN_PROGRESS"));
    }
}

//! `lagless_tool`: a small command-line producer and consumer for tests in any language.
//!
//! Build it with `cargo build --release --example lagless_tool`; the binary is
//! `target/release/examples/lagless_tool`. Everything it reports goes to stdout as one JSON
//! object per line (flushed as it goes, so a test can read it while the tool runs); diagnostics
//! go to stderr. The exit status is 0 on success, 1 on a runtime error, 2 on a usage error.
//!
//! ```text
//! lagless_tool produce --bootstrap B --topic T --count N
//!     [--keyed] [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0|-1]
//!     [--start I] [--quiet] [--transaction-size N [--abort-every K]] [--config KEY=VALUE]...
//! lagless_tool consume --bootstrap B (--topic T | --regex R)
//!     [--group G] [--assign-all] [--count N] [--timeout-ms MS]
//!     [--strategy range|cooperative-sticky|roundrobin|LIST]
//!     [--session-timeout-ms X] [--max-poll-interval-ms Y] [--commit] [--hex]
//!     [--poll-delay-ms D] [--config KEY=VALUE]...
//! lagless_tool transform --bootstrap B --topic IN --output OUT --group G --transactional-id ID
//!     [--strategy S] [--session-timeout-ms X] [--poll-delay-ms D] [--config KEY=VALUE]...
//! ```
//!
//! `produce` sends records `i = start .. start+count` with value `value-<i>`, a header `h` =
//! `<i>` and, with `--keyed`, the key `key-<i>` (the default partitioner then places it as the
//! Java client does). It prints, in send order, one line per record
//! `{"partition":p,"offset":o,"key":"key-<i>","aborted":false}` (`"key":null` without
//! `--keyed`), or with `--quiet` only the summary line
//! `{"event":"produced","count":N,"partitions":{"p":n,...}}`. With `--transaction-size N` the
//! producer is transactional and writes N records per transaction; with `--abort-every K` every
//! K-th transaction is aborted after its records were written (`"aborted":true` on them).
//!
//! `consume` with `--group` (and without `--assign-all`) subscribes to the topic as a member of
//! group G (with `--regex R` instead of `--topic`: to the topics whose whole name matches R, the
//! group coordinator's server-side regex, KIP-848; needs `--config group.protocol=consumer`; its
//! record lines then start with `"topic":t` and the `done` line's positions are keyed `"t:p"`);
//! its rebalance listener prints
//! `{"event":"assigned"|"revoked"|"lost"|"learning","partitions":[["t",p],...],"assignment":[...],"generation":g,"protocol":"a","ts_us":t}`
//! where `partitions` is what the callback was given, `assignment` the member's whole
//! assignment after the callback's change (cooperative rebalancing hands out and takes back
//! partitions incrementally, so `assignment` is the one to track ownership with) and `protocol`
//! the assignor the group agreed on (`null` before); `ts_us` is the wall-clock time of the callback
//! in microseconds since the Unix epoch (to order events across processes). `learning` (learner-sticky only) lists the
//! partitions the member learns before they move to it; it is ready at once. Without a group,
//! or with `--assign-all`, it assigns every partition of the topic and reads from the earliest
//! offset (with a group, from the committed one). Each record is printed as
//! `{"partition":p,"offset":o,"key":k,"value":v,"headers":{"name":value,...}}` (plus
//! `"recovery":true` for a record of a KIP-333 recovery stream) with keys, values
//! and header values as JSON strings (`null` when absent); `--hex` prints them as lowercase hex of
//! the raw bytes instead, for byte-exact comparisons.
//!
//! It stops after `--count` records, or once `--timeout-ms` passed without a new record (the
//! clock starts at launch), or on SIGTERM/SIGINT; then it closes the consumer (revoking through
//! the listener and leaving the group) and prints
//! `{"event":"done","records":n,"reason":...,"positions":{"p":next_offset,...}}` (positions of the
//! partitions assigned at the end, keyed by partition number).
//! With `--commit` it commits the offsets of the printed records synchronously after every poll
//! that returned records, and the consumed positions in the revoked callback. `--poll-delay-ms D`
//! makes it a slow member: after printing a batch it waits D ms (its "processing") before it
//! commits and polls again. Auto-commit is off unless `--config
//! enable.auto.commit=true` turns it on. `--config` passes any other lagless setting (Java key
//! names).
//!
//! `transform` is an exactly-once consume-transform-produce loop: a member of group G reading IN
//! at read_committed writes, for every record polled, a record keyed `<partition>-<offset>` of
//! the input (the value copied) to OUT, in one transaction per poll that also carries the
//! polled offsets (`send_offsets_to_transaction` with the member's group metadata), and commits
//! it. `--poll-delay-ms D` is its processing: the transaction's records are flushed, then it
//! waits D ms before it commits (so that a kill most likely lands in an open transaction). A
//! transaction that can only be aborted is aborted and the partitions of its records are read
//! again from their committed offsets. It prints `{"event":"open","records":n}` once a
//! transaction's records are flushed (with `--poll-delay-ms`), `{"event":"committed","records":n}`
//! per committed transaction and `{"event":"aborted","why":"..."}` per aborted one, and runs
//! until SIGTERM/SIGINT (then `{"event":"done",...}`). Its `--config` settings go to the consumer.
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lagless::producer::Delivery;
use lagless::{
    Config, Consumer, ConsumerRecord, Error, OffsetAndMetadata, Producer, ProducerRecord,
    RebalanceListener, TopicPartition,
};

const USAGE: &str = "\
usage: lagless_tool produce --bootstrap B --topic T --count N [--keyed] [--compression C]
                            [--acks A] [--start I] [--quiet] [--config KEY=VALUE]...
                            [--transaction-size N [--abort-every K]]
       lagless_tool consume --bootstrap B (--topic T | --regex R) [--group G] [--assign-all]
                            [--count N]
                            [--timeout-ms MS] [--strategy S] [--session-timeout-ms X]
                            [--max-poll-interval-ms Y] [--commit] [--hex] [--poll-delay-ms D]
                            [--config KEY=VALUE]...
       lagless_tool transform --bootstrap B --topic IN --output OUT --group G
                            --transactional-id ID [--strategy S] [--session-timeout-ms X]
                            [--poll-delay-ms D] [--config KEY=VALUE]...
(see the header of core/examples/lagless_tool.rs for the output format)";

/// How long one `poll()` waits; also how quickly a signal or the idle timeout is noticed.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long `close()` and the producer's final flush may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------------------------

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// SIGTERM and SIGINT set [`STOP`]; the consume loop sees it within one poll interval.
#[allow(unsafe_code)]
fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Raw bytes as JSON: `null` when absent, else a string (hex with `hex`; otherwise UTF-8, with
/// invalid sequences replaced, so use `--hex` for binary data).
fn json_bytes(b: Option<&[u8]>, hex: bool) -> String {
    match b {
        None => "null".to_string(),
        Some(b) if hex => {
            let mut s = String::with_capacity(2 * b.len() + 2);
            s.push('"');
            for x in b {
                let _ = write!(s, "{x:02x}");
            }
            s.push('"');
            s
        }
        Some(b) => json_str(&String::from_utf8_lossy(b)),
    }
}

fn json_partitions(parts: &[TopicPartition]) -> String {
    let items: Vec<String> = parts
        .iter()
        .map(|tp| format!("[{},{}]", json_str(&tp.topic), tp.partition))
        .collect();
    format!("[{}]", items.join(","))
}

fn record_line(r: &ConsumerRecord, hex: bool) -> String {
    let headers: Vec<String> = r
        .headers
        .iter()
        .map(|h| {
            format!(
                "{}:{}",
                json_str(&h.key),
                json_bytes(h.value.as_deref(), hex)
            )
        })
        .collect();
    format!(
        "{{\"partition\":{},\"offset\":{},\"key\":{},\"value\":{},\"headers\":{{{}}}{}}}",
        r.partition,
        r.offset,
        json_bytes(r.key.as_deref(), hex),
        json_bytes(r.value.as_deref(), hex),
        headers.join(","),
        if r.from_recovery {
            ",\"recovery\":true"
        } else {
            ""
        }
    )
}

/// Prints one line and flushes, so a reader sees it at once.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Args {
    bootstrap: Option<String>,
    topic: Option<String>,
    /// consume: a server-side regex subscription (KIP-848) instead of `topic`.
    regex: Option<String>,
    count: Option<u64>,
    start: u64,
    keyed: bool,
    quiet: bool,
    compression: Option<String>,
    acks: Option<String>,
    group: Option<String>,
    assign_all: bool,
    timeout_ms: Option<u64>,
    strategy: Option<String>,
    session_timeout_ms: Option<String>,
    max_poll_interval_ms: Option<String>,
    commit: bool,
    hex: bool,
    poll_delay_ms: u64,
    /// produce: records per transaction (a transactional producer); 0: no transactions.
    transaction_size: u64,
    /// produce: every K-th transaction (the K-th, 2K-th, ...) is aborted; 0: none.
    abort_every: u64,
    /// transform: the topic written.
    output: Option<String>,
    /// transform: the producer's transactional.id.
    transactional_id: Option<String>,
    config: Vec<(String, String)>,
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |name: &str, v: String| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{name} must be a non-negative integer, got `{v}`"))
        };
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = Some(value(flag)?),
            "--topic" => a.topic = Some(value(flag)?),
            "--regex" => a.regex = Some(value(flag)?),
            "--count" => a.count = Some(number(flag, value(flag)?)?),
            "--start" => a.start = number(flag, value(flag)?)?,
            "--keyed" => a.keyed = true,
            "--transaction-size" => a.transaction_size = number(flag, value(flag)?)?,
            "--abort-every" => a.abort_every = number(flag, value(flag)?)?,
            "--quiet" => a.quiet = true,
            "--compression" => a.compression = Some(value(flag)?),
            "--acks" => a.acks = Some(value(flag)?),
            "--group" => a.group = Some(value(flag)?),
            "--assign-all" => a.assign_all = true,
            "--timeout-ms" => a.timeout_ms = Some(number(flag, value(flag)?)?),
            "--strategy" => a.strategy = Some(value(flag)?),
            "--session-timeout-ms" => a.session_timeout_ms = Some(value(flag)?),
            "--max-poll-interval-ms" => a.max_poll_interval_ms = Some(value(flag)?),
            "--commit" => a.commit = true,
            "--hex" => a.hex = true,
            "--poll-delay-ms" => a.poll_delay_ms = number(flag, value(flag)?)?,
            "--output" => a.output = Some(value(flag)?),
            "--transactional-id" => a.transactional_id = Some(value(flag)?),
            "--config" => {
                let kv = value(flag)?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("--config takes KEY=VALUE, got `{kv}`"))?;
                a.config.push((k.to_string(), v.to_string()));
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.bootstrap.is_none() {
        return Err("--bootstrap is required".into());
    }
    if a.topic.is_none() && a.regex.is_none() {
        return Err("--topic (or, to consume, --regex) is required".into());
    }
    if a.regex.is_some() && (a.group.is_none() || a.assign_all) {
        return Err("--regex needs --group (a subscription) and no --assign-all".into());
    }
    Ok(a)
}

/// A lagless config from `pairs`, then the user's `--config` settings on top.
fn build_config(pairs: &[(&str, &str)], extra: &[(String, String)]) -> lagless::Result<Config> {
    let mut c = Config::new();
    for (k, v) in pairs {
        c.set(k, v)?;
    }
    for (k, v) in extra {
        c.set(k, v)?;
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------------
// produce
// ---------------------------------------------------------------------------------------------

/// Records in flight before the oldest deliveries are waited for (bounds memory, keeps order).
const PRODUCE_WINDOW: usize = 10_000;

fn produce(a: &Args) -> lagless::Result<()> {
    let count = a
        .count
        .ok_or_else(|| Error::InvalidArgument("produce needs --count".into()))?;
    let topic = a
        .topic
        .as_deref()
        .ok_or_else(|| Error::InvalidArgument("produce needs --topic".into()))?;
    let mut pairs: Vec<(&str, &str)> = vec![
        (
            "bootstrap.servers",
            a.bootstrap.as_deref().expect("checked"),
        ),
        ("client.id", "lagless-tool-producer"),
    ];
    if let Some(c) = &a.compression {
        pairs.push(("compression.type", c));
    }
    if let Some(x) = &a.acks {
        pairs.push(("acks", x));
    }
    let transactional_id = format!("lagless-tool-{}-{}", std::process::id(), a.start);
    if a.transaction_size > 0 {
        pairs.push(("transactional.id", &transactional_id));
    }
    let producer = Producer::from_config(&build_config(&pairs, &a.config)?)?;
    let mut per_partition: BTreeMap<i32, u64> = BTreeMap::new();
    // (key, delivery, in an aborted transaction)
    let mut pending: VecDeque<(Option<String>, Delivery, bool)> = VecDeque::new();
    // Waits for the oldest deliveries until `keep` are left, printing where each record went.
    let mut settle = |pending: &mut VecDeque<(Option<String>, Delivery, bool)>,
                      keep: usize|
     -> lagless::Result<()> {
        while pending.len() > keep {
            let (key, d, aborted) = pending.pop_front().expect("non-empty");
            let md = d.wait()?;
            *per_partition.entry(md.partition).or_default() += 1;
            if !a.quiet {
                let key = key.as_deref().map_or("null".to_string(), json_str);
                emit(&format!(
                    "{{\"partition\":{},\"offset\":{},\"key\":{key},\"aborted\":{aborted}}}",
                    md.partition, md.offset
                ));
            }
        }
        Ok(())
    };
    let size = a.transaction_size;
    if size > 0 {
        producer.init_transactions(CLOSE_TIMEOUT)?;
    }
    for i in a.start..a.start + count {
        let n = i - a.start;
        // The transaction (from 1) record i belongs to, and whether it is aborted.
        let txn = n.checked_div(size).map_or(0, |t| t + 1);
        let aborted = size > 0 && a.abort_every > 0 && txn.is_multiple_of(a.abort_every);
        if size > 0 && n.is_multiple_of(size) {
            producer.begin_transaction()?;
        }
        let mut rec = ProducerRecord::new(topic, format!("value-{i}"))
            .with_header("h", Some(i.to_string().into()));
        let key = a.keyed.then(|| format!("key-{i}"));
        if let Some(k) = &key {
            rec = rec.with_key(k.clone());
        }
        pending.push_back((key, producer.send(rec)?, aborted));
        let last_of_txn = size > 0 && (n % size == size - 1 || n + 1 == count);
        if last_of_txn {
            // Written before the transaction ends, so that an aborted one's records have
            // offsets (they stay in the log, invisible to read_committed).
            producer.flush(CLOSE_TIMEOUT)?;
            settle(&mut pending, 0)?;
            if aborted {
                producer.abort_transaction(CLOSE_TIMEOUT)?;
            } else {
                producer.commit_transaction(CLOSE_TIMEOUT)?;
            }
        } else if size == 0 {
            settle(&mut pending, PRODUCE_WINDOW)?;
        }
    }
    producer.flush(CLOSE_TIMEOUT)?;
    settle(&mut pending, 0)?;
    producer.close(CLOSE_TIMEOUT)?;
    let parts: Vec<String> = per_partition
        .iter()
        .map(|(p, n)| format!("\"{p}\":{n}"))
        .collect();
    emit(&format!(
        "{{\"event\":\"produced\",\"count\":{count},\"partitions\":{{{}}}}}",
        parts.join(",")
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// consume
// ---------------------------------------------------------------------------------------------

/// Prints every assignment change; with `commit`, commits consumed offsets before giving
/// partitions up.
struct PrintingListener {
    commit: bool,
}

impl PrintingListener {
    fn report(&self, event: &str, c: &Consumer, parts: &[TopicPartition], leaving: bool) {
        let mut assignment = c.assignment();
        if leaving {
            // The callback runs before the consumer drops them: report the state after.
            assignment.retain(|tp| !parts.contains(tp));
        }
        let meta = c.group_metadata();
        let generation = meta.as_ref().map_or(-1, |g| g.generation_id);
        let protocol = meta
            .and_then(|g| g.protocol)
            .map_or_else(|| "null".to_string(), |p| json_str(&p));
        let ts_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        emit(&format!(
            "{{\"event\":\"{event}\",\"partitions\":{},\"assignment\":{},\"generation\":{generation},\"protocol\":{protocol},\"ts_us\":{ts_us}}}",
            json_partitions(parts),
            json_partitions(&assignment)
        ));
    }
}

impl RebalanceListener for PrintingListener {
    fn on_partitions_revoked(&mut self, c: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        if self.commit && !p.is_empty() {
            if let Err(e) = c.commit_sync(None, None) {
                eprintln!("lagless_tool: commit in on_partitions_revoked failed: {e}");
            }
        }
        self.report("revoked", c, p, true);
        Ok(())
    }

    fn on_partitions_assigned(
        &mut self,
        c: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        self.report("assigned", c, p, false);
        Ok(())
    }

    fn on_partitions_lost(&mut self, c: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        self.report("lost", c, p, true);
        Ok(())
    }

    fn on_partitions_learning(
        &mut self,
        c: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        self.report("learning", c, p, false);
        Ok(())
    }
}

fn consume(a: &Args) -> lagless::Result<()> {
    // parse_args checked that there is a topic or a regex (and a group with the regex).
    let topic = a.topic.as_deref().unwrap_or_default();
    let subscribe = a.group.is_some() && !a.assign_all;
    let mut pairs: Vec<(&str, &str)> = vec![
        (
            "bootstrap.servers",
            a.bootstrap.as_deref().expect("checked"),
        ),
        ("client.id", "lagless-tool-consumer"),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
    ];
    if let Some(g) = &a.group {
        pairs.push(("group.id", g));
    }
    if let Some(s) = &a.strategy {
        pairs.push(("partition.assignment.strategy", s));
    }
    if let Some(x) = &a.session_timeout_ms {
        pairs.push(("session.timeout.ms", x));
    }
    if let Some(x) = &a.max_poll_interval_ms {
        pairs.push(("max.poll.interval.ms", x));
    }
    let consumer = Consumer::from_config(&build_config(&pairs, &a.config)?)?;
    if let Some(regex) = &a.regex {
        consumer.subscribe_regex(regex, Some(Box::new(PrintingListener { commit: a.commit })))?;
    } else if subscribe {
        consumer.subscribe(
            &[topic],
            Some(Box::new(PrintingListener { commit: a.commit })),
        )?;
    } else {
        let parts: Vec<TopicPartition> = consumer
            .partitions_for(topic, None)?
            .into_iter()
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        consumer.assign(&parts)?;
        emit(&format!(
            "{{\"event\":\"assigned\",\"partitions\":{},\"assignment\":{},\"generation\":-1}}",
            json_partitions(&parts),
            json_partitions(&parts)
        ));
    }

    let idle = a.timeout_ms.map(Duration::from_millis);
    let mut last_record = Instant::now();
    let mut records: u64 = 0;
    let mut failure: Option<Error> = None;
    let reason = loop {
        if STOP.load(Ordering::SeqCst) {
            break "signal";
        }
        if a.count.is_some_and(|n| records >= n) {
            break "count";
        }
        if idle.is_some_and(|d| last_record.elapsed() >= d) {
            break "idle";
        }
        match consumer.poll(POLL_INTERVAL) {
            Ok(batch) if batch.is_empty() => {}
            Ok(mut batch) => {
                last_record = Instant::now();
                if let Some(n) = a.count {
                    // Print (and commit) exactly --count records; rewind to the first record
                    // not printed, so that a commit of the position (in the revoked callback,
                    // on close) does not skip it.
                    let rest = batch.split_off(((n - records) as usize).min(batch.len()));
                    let mut rewind: BTreeMap<TopicPartition, i64> = BTreeMap::new();
                    for r in &rest {
                        let tp = TopicPartition::new(&*r.topic, r.partition);
                        rewind.entry(tp).or_insert(r.offset);
                    }
                    for (tp, offset) in rewind {
                        consumer.seek(&tp, offset)?;
                    }
                }
                records += batch.len() as u64;
                let mut out = String::new();
                let mut next: BTreeMap<TopicPartition, i64> = BTreeMap::new();
                for r in &batch {
                    if a.regex.is_some() {
                        // Several topics: the line names its topic first.
                        let _ = write!(out, "{{\"topic\":{},", json_str(&r.topic));
                        out.push_str(&record_line(r, a.hex)[1..]);
                    } else {
                        out.push_str(&record_line(r, a.hex));
                    }
                    out.push('\n');
                    next.insert(TopicPartition::new(&*r.topic, r.partition), r.offset + 1);
                }
                {
                    let mut stdout = std::io::stdout().lock();
                    let _ = stdout.write_all(out.as_bytes());
                    let _ = stdout.flush();
                }
                // A slow member: "processing" the batch keeps it from polling.
                let processed_at = Instant::now() + Duration::from_millis(a.poll_delay_ms);
                while Instant::now() < processed_at && !STOP.load(Ordering::SeqCst) {
                    std::thread::sleep(
                        Duration::from_millis(20)
                            .min(processed_at.saturating_duration_since(Instant::now())),
                    );
                }
                if a.commit {
                    let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = next
                        .into_iter()
                        .map(|(tp, offset)| {
                            let metadata = String::new();
                            (tp, OffsetAndMetadata { offset, metadata })
                        })
                        .collect();
                    if let Err(e) = consumer.commit_sync(Some(&offsets), None) {
                        // A rebalance can fail a commit; the next owner re-reads from the last
                        // committed offset (at least once).
                        eprintln!("lagless_tool: commit failed: {e}");
                    }
                }
            }
            Err(e) if e.is_fatal() => {
                failure = Some(e);
                break "error";
            }
            Err(e) => eprintln!("lagless_tool: poll: {e}"),
        }
    };
    // The next offset of every assigned partition: past the last record read, and past any
    // transaction markers after it.
    let positions: Vec<String> = consumer
        .assignment()
        .iter()
        .filter_map(|tp| {
            let pos = consumer.position(tp, Some(Duration::from_secs(5))).ok()?;
            if a.regex.is_some() {
                return Some(format!(
                    "{}:{pos}",
                    json_str(&format!("{}:{}", tp.topic, tp.partition))
                ));
            }
            Some(format!("\"{}\":{pos}", tp.partition))
        })
        .collect();
    let closed = consumer.close(Some(CLOSE_TIMEOUT));
    emit(&format!(
        "{{\"event\":\"done\",\"records\":{records},\"reason\":\"{reason}\",\"positions\":{{{}}}}}",
        positions.join(",")
    ));
    if let Some(e) = failure {
        return Err(e);
    }
    closed
}

// ---------------------------------------------------------------------------------------------
// transform
// ---------------------------------------------------------------------------------------------

/// The exactly-once loop of `transform` (see the header).
fn transform(a: &Args, input: &str, output: &str, group: &str, id: &str) -> lagless::Result<()> {
    let bootstrap = a.bootstrap.as_deref().expect("checked");
    let mut pairs: Vec<(&str, &str)> = vec![
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-tool-transform"),
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("isolation.level", "read_committed"),
    ];
    if let Some(s) = &a.strategy {
        pairs.push(("partition.assignment.strategy", s));
    }
    if let Some(x) = &a.session_timeout_ms {
        pairs.push(("session.timeout.ms", x));
    }
    let consumer = Consumer::from_config(&build_config(&pairs, &a.config)?)?;
    let producer = Producer::from_config(&build_config(
        &[
            ("bootstrap.servers", bootstrap),
            ("client.id", "lagless-tool-transform"),
            ("transactional.id", id),
            ("linger.ms", "5"),
        ],
        &[],
    )?)?;
    producer.init_transactions(CLOSE_TIMEOUT)?;
    consumer.subscribe(&[input], None)?;
    let mut committed_records: u64 = 0;
    while !STOP.load(Ordering::SeqCst) {
        let records = consumer.poll(POLL_INTERVAL)?;
        if records.is_empty() {
            continue;
        }
        // Taken with the records: it ties their offsets to the generation that owned them.
        let metadata = consumer.group_metadata();
        producer.begin_transaction()?;
        let mut next: std::collections::HashMap<TopicPartition, OffsetAndMetadata> =
            std::collections::HashMap::new();
        let written = records.iter().try_for_each(|r| {
            let mut out = ProducerRecord::new(output, r.value.clone().unwrap_or_default())
                .with_key(format!("{}-{}", r.partition, r.offset));
            out.headers = r.headers.clone();
            next.insert(
                TopicPartition::new(&*r.topic, r.partition),
                OffsetAndMetadata {
                    offset: r.offset + 1,
                    metadata: String::new(),
                },
            );
            producer.send(out).map(drop)
        });
        let ended = written
            .and_then(|()| {
                if a.poll_delay_ms > 0 {
                    producer.flush(CLOSE_TIMEOUT)?;
                    emit(&format!(
                        "{{\"event\":\"open\",\"records\":{}}}",
                        records.len()
                    ));
                    std::thread::sleep(Duration::from_millis(a.poll_delay_ms));
                }
                let metadata = metadata.as_ref().ok_or_else(|| {
                    Error::TransactionAbortable("the member is not in the group".into())
                })?;
                producer.send_offsets_to_transaction(&next, metadata, CLOSE_TIMEOUT)
            })
            .and_then(|()| producer.commit_transaction(CLOSE_TIMEOUT));
        match ended {
            Ok(()) => {
                committed_records += records.len() as u64;
                emit(&format!(
                    "{{\"event\":\"committed\",\"records\":{}}}",
                    records.len()
                ));
            }
            Err(Error::TransactionAbortable(why)) => {
                emit(&format!(
                    "{{\"event\":\"aborted\",\"why\":{}}}",
                    json_str(&why)
                ));
                producer.abort_transaction(CLOSE_TIMEOUT)?;
                // The transaction's records are read again: from the committed offsets of the
                // partitions still owned (the new owner of the others starts there too).
                let tps: Vec<TopicPartition> = next.into_keys().collect();
                for (tp, committed) in consumer.committed(&tps, Some(CLOSE_TIMEOUT))? {
                    if consumer.assignment().contains(&tp) {
                        consumer.seek(&tp, committed.map_or(0, |o| o.offset))?;
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    let closed = consumer.close(Some(CLOSE_TIMEOUT));
    producer.close(CLOSE_TIMEOUT)?;
    emit(&format!(
        "{{\"event\":\"done\",\"records\":{committed_records},\"reason\":\"signal\"}}"
    ));
    closed
}

// ---------------------------------------------------------------------------------------------

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = argv.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let args = match parse_args(rest) {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("lagless_tool: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Ok(filter) = std::env::var("RUST_LOG") {
        // The library's own log, to stderr, when asked for (RUST_LOG=lagless=debug).
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let result = match cmd.as_str() {
        "produce" => produce(&args),
        "consume" => {
            install_signal_handlers();
            consume(&args)
        }
        "transform" => {
            let (Some(output), Some(group), Some(id), Some(input)) = (
                args.output.as_deref(),
                args.group.as_deref(),
                args.transactional_id.as_deref(),
                args.topic.as_deref(),
            ) else {
                eprintln!(
                    "lagless_tool: transform needs --topic, --output, --group and \
                     --transactional-id\n{USAGE}"
                );
                return ExitCode::from(2);
            };
            install_signal_handlers();
            transform(&args, input, output, group, id)
        }
        other => {
            eprintln!("lagless_tool: unknown command `{other}`\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lagless_tool {cmd}: {e}");
            ExitCode::from(1)
        }
    }
}

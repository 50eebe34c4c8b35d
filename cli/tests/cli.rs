//! The `lagless` binary against a real broker (`LAGLESS_BOOTSTRAP`): produce and consume round
//! trips counted record by record, a group's lag against its committed offsets and against
//! Kafka's own kafka-consumer-groups tool, and offset resets (dry run, execute, refused with
//! members). Tests that need a broker are `#[ignore]`d, as the core's are, so a plain
//! `cargo test` passes without one; tests/run runs them with `--include-ignored`.
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lagless::admin::AdminClient;
use lagless::{Config, TopicPartition};

const T: Duration = Duration::from_secs(30);

/// partition -> (committed, end, lag), `None` where a tool prints `-`.
type LagRows = BTreeMap<i32, (Option<i64>, Option<i64>, Option<i64>)>;

fn bootstrap() -> String {
    std::env::var("LAGLESS_BOOTSTRAP").expect(
        "LAGLESS_BOOTSTRAP is not set: this test needs a Kafka broker (run it through tests/run, \
         or as `python3 tests/kafka_broker.py run -- cargo test ... -- --include-ignored`)",
    )
}

fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{nanos}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn new_topic(bootstrap: &str, prefix: &str, partitions: i32) -> String {
    let name = unique(prefix);
    lagless::admin::create_topic(bootstrap, &name, partitions, 1).unwrap();
    name
}

/// Runs the binary with `args` (and `stdin`), bounded by the test harness' own timeouts (every
/// command has --timeout and a count or an idle exit).
fn lagless(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lagless"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lagless binary runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "lagless failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn admin(bootstrap: &str) -> AdminClient {
    AdminClient::new(&Config::from_pairs([("bootstrap.servers", bootstrap)]).unwrap()).unwrap()
}

/// Table rows of the tool's output (header skipped), split on whitespace.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// `group lag` as partition -> (committed, end, lag), `-` as None.
fn lag_table(bootstrap: &str, group: &str) -> LagRows {
    let out = ok(lagless(
        &["-b", bootstrap, "group", "lag", "-g", group],
        None,
    ));
    rows(&out)
        .into_iter()
        .map(|r| {
            let n = |s: &str| s.parse::<i64>().ok();
            (r[1].parse().unwrap(), (n(&r[2]), n(&r[3]), n(&r[4])))
        })
        .collect()
}

fn committed(bootstrap: &str, group: &str) -> BTreeMap<TopicPartition, i64> {
    admin(bootstrap)
        .list_consumer_group_offsets(group, None, T)
        .unwrap()
        .into_iter()
        .filter_map(|(tp, r)| r.unwrap().map(|om| (tp, om.offset)))
        .collect()
}

#[test]
fn a_bad_setting_is_one_line_and_exit_status_1() {
    let out = lagless(
        &[
            "-b",
            "127.0.0.1:1",
            "-X",
            "fetch.min.byts=1",
            "topic",
            "list",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("lagless: error: ") && stderr.contains("fetch.min.bytes"),
        "{stderr}"
    );
    let out = lagless(&["topic", "list"], None);
    assert_eq!(out.status.code(), Some(1));
    // A usage error is clap's, exit status 2.
    let out = lagless(&["group", "lag"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn produced_lines_come_back_as_json_with_keys_and_headers() {
    const N: usize = 500;
    let b = bootstrap();
    let topic = new_topic(&b, "cli-round-trip", 3);
    let input: String = (0..N)
        .map(|i| format!("key-{i}:value {i}: with colon\n"))
        .collect();
    let dir = std::env::temp_dir().join(unique("cli-config"));
    std::fs::write(&dir, "# kcat style\nclient.id=cli-test\nlinger.ms=5\n").unwrap();
    ok(lagless(
        &[
            "-b",
            &b,
            "-F",
            dir.to_str().unwrap(),
            "produce",
            "-t",
            &topic,
            "-k",
            ":",
            "-H",
            "source=cli",
            "-H",
            "run=a=b",
            "-z",
            "lz4",
        ],
        Some(&input),
    ));
    let _ = std::fs::remove_file(&dir);
    let out = ok(lagless(
        &[
            "-b",
            &b,
            "consume",
            "-t",
            &topic,
            "--from",
            "earliest",
            "-c",
            &N.to_string(),
            "--format",
            "json",
            "--timeout",
            "30",
        ],
        None,
    ));
    let mut seen = BTreeSet::new();
    let mut offsets: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for line in out.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["topic"], topic.as_str());
        let key = r["key"].as_str().unwrap();
        let i: usize = key.strip_prefix("key-").unwrap().parse().unwrap();
        assert_eq!(r["value"], format!("value {i}: with colon"));
        assert_eq!(
            r["headers"],
            serde_json::json!([{"key": "source", "value": "cli"}, {"key": "run", "value": "a=b"}])
        );
        assert!(r["timestamp"].as_i64().unwrap() > 0);
        assert!(seen.insert(i), "record {i} twice");
        offsets
            .entry(r["partition"].as_i64().unwrap())
            .or_default()
            .push(r["offset"].as_i64().unwrap());
    }
    assert_eq!(seen.len(), N, "every line came back once");
    assert_eq!(seen.iter().next_back(), Some(&(N - 1)));
    // Within each partition, the offsets 0..n, in order.
    for (p, o) in &offsets {
        let want: Vec<i64> = (0..o.len() as i64).collect();
        assert_eq!(o, &want, "partition {p}");
    }
    let ends: i64 = offsets.values().map(|o| o.len() as i64).sum();
    assert_eq!(ends, N as i64);
}

/// Runs one of Kafka's own tools (`class`, from the jars tests/kafka_broker.py fetched) with
/// `args`; its stdout (stderr dropped: the tools log there).
fn java_tool(class: &str, args: &[&str]) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let fetch = Command::new("python3")
        .arg(root.join("tests/kafka_broker.py"))
        .arg("fetch")
        .output()
        .unwrap();
    let lib = String::from_utf8(fetch.stdout)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let out = Command::new("java")
        .args([
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
        ])
        .arg("-cp")
        .arg(format!("{lib}/*"))
        .arg(class)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Kafka's kafka-consumer-groups answer for `group`: partition -> (current, end, lag).
fn java_describe(bootstrap: &str, group: &str) -> LagRows {
    let text = java_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ],
    );
    // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .find(|l| l.starts_with("GROUP"))
        .unwrap_or_else(|| panic!("no table from kafka-consumer-groups: {text}"))
        .split_whitespace()
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (p, c, e, l) = (
        col("PARTITION"),
        col("CURRENT-OFFSET"),
        col("LOG-END-OFFSET"),
        col("LAG"),
    );
    lines
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let n = |s: &str| s.parse::<i64>().ok();
            (f[p].parse().unwrap(), (n(f[c]), n(f[e]), n(f[l])))
        })
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn group_lag_is_end_minus_committed_as_kafka_consumer_groups_says() {
    let b = bootstrap();
    let topic = new_topic(&b, "cli-lag", 2);
    let lines = |n: usize| -> String { (0..n).map(|i| format!("v{i}\n")).collect() };
    ok(lagless(
        &["-b", &b, "produce", "-t", &topic, "-p", "0"],
        Some(&lines(30)),
    ));
    ok(lagless(
        &["-b", &b, "produce", "-t", &topic, "-p", "1"],
        Some(&lines(50)),
    ));
    let group = unique("cli-lag-group");
    let out = ok(lagless(
        &[
            "-b", &b, "consume", "-t", &topic, "-g", &group, "--from", "earliest", "-c", "45",
        ],
        None,
    ));
    assert_eq!(out.lines().count(), 45);
    let committed = committed(&b, &group);
    assert_eq!(committed.values().sum::<i64>(), 45, "{committed:?}");
    let lag = lag_table(&b, &group);
    let ends = [30, 50];
    let mut total_lag = 0;
    for p in 0..2 {
        let c = committed.get(&TopicPartition::new(&topic, p)).copied();
        let (tc, te, tl) = lag[&p];
        assert_eq!((tc, te), (c, Some(ends[p as usize])), "partition {p}");
        assert_eq!(tl, c.map(|c| ends[p as usize] - c), "partition {p}");
        total_lag += tl.unwrap_or(ends[p as usize]);
    }
    assert_eq!(total_lag, 80 - 45);
    // Kafka's own tool says the same, partition by partition.
    assert_eq!(java_describe(&b, &group), lag);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn reset_offsets_is_a_dry_run_until_execute_and_refused_with_members() {
    let b = bootstrap();
    let topic = new_topic(&b, "cli-reset", 2);
    // 20 records in each partition: a reset to offset 3 lands on 3 in both (an offset past a
    // partition's end would be brought to the end).
    let lines: String = (0..20).map(|i| format!("v{i}\n")).collect();
    for p in ["0", "1"] {
        ok(lagless(
            &["-b", &b, "produce", "-t", &topic, "-p", p],
            Some(&lines),
        ));
    }
    let group = unique("cli-reset-group");
    ok(lagless(
        &[
            "-b", &b, "consume", "-t", &topic, "-g", &group, "--from", "earliest", "-c", "40",
        ],
        None,
    ));
    let before = committed(&b, &group);
    assert_eq!(before.values().sum::<i64>(), 40);

    let dry = lagless(
        &[
            "-b",
            &b,
            "group",
            "reset-offsets",
            "-g",
            &group,
            "-t",
            &topic,
            "--to",
            "earliest",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&dry.stderr).to_string();
    let plan = rows(&ok(dry));
    assert_eq!(plan.len(), 2);
    for r in &plan {
        assert_eq!(r[3], "0", "{r:?}");
    }
    assert!(stderr.contains("dry run"), "{stderr}");
    assert_eq!(committed(&b, &group), before, "a dry run changes nothing");

    ok(lagless(
        &[
            "-b",
            &b,
            "group",
            "reset-offsets",
            "-g",
            &group,
            "-t",
            &topic,
            "--to",
            "offset:3",
            "--execute",
        ],
        None,
    ));
    let after: Vec<i64> = committed(&b, &group).into_values().collect();
    assert_eq!(after, vec![3, 3]);

    // With a member in the group the reset is refused, and nothing moves.
    let member = lagless::Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", b.as_str()),
            ("group.id", group.as_str()),
            ("enable.auto.commit", "false"),
        ])
        .unwrap(),
    )
    .unwrap();
    member.subscribe(&[&topic], None).unwrap();
    let deadline = Instant::now() + T;
    while member.assignment().is_empty() {
        assert!(Instant::now() < deadline, "the member got no assignment");
        member.poll(Duration::from_millis(100)).unwrap();
    }
    let refused = lagless(
        &[
            "-b",
            &b,
            "group",
            "reset-offsets",
            "-g",
            &group,
            "-t",
            &topic,
            "--to",
            "earliest",
            "--execute",
        ],
        None,
    );
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("inactive"), "{stderr}");
    member.close(Some(T)).unwrap();
    let kept: Vec<i64> = committed(&b, &group).into_values().collect();
    assert_eq!(kept, vec![3, 3]);
}

/// The JSON events of a verifiable tool's stdout (lines that are not JSON, such as log lines,
/// are skipped, as Kafka's system tests do).
fn events(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("name").is_some())
        .collect()
}

fn named<'a>(events: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["name"] == name).collect()
}

/// Per event name, the field names it carries (and, for lists of objects, those objects' field
/// names as `field[].inner`): what a harness reading the events depends on.
fn schema(events: &[serde_json::Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events {
        let fields = out
            .entry(e["name"].as_str().unwrap().to_string())
            .or_default();
        for (k, v) in e.as_object().unwrap() {
            fields.insert(k.clone());
            for item in v.as_array().into_iter().flatten() {
                for inner in item.as_object().into_iter().flat_map(|o| o.keys()) {
                    fields.insert(format!("{k}[].{inner}"));
                }
            }
        }
    }
    out
}

/// The values a verifiable producer's events say were acknowledged, checked: startup first,
/// `n` distinct successes at distinct offsets, shutdown and tool_data with sent = acked = n.
fn acknowledged(tool: &str, events: &[serde_json::Value], n: usize) -> BTreeSet<String> {
    assert_eq!(
        events.first().map(|e| &e["name"]),
        Some(&serde_json::json!("startup_complete")),
        "{tool}"
    );
    let ok = named(events, "producer_send_success");
    let at: BTreeSet<(i64, i64)> = ok
        .iter()
        .map(|e| {
            (
                e["partition"].as_i64().unwrap(),
                e["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        (ok.len(), at.len()),
        (n, n),
        "{tool}: successes, distinct offsets"
    );
    assert!(named(events, "producer_send_error").is_empty(), "{tool}");
    assert_eq!(named(events, "shutdown_complete").len(), 1, "{tool}");
    let data = named(events, "tool_data");
    assert_eq!(data.len(), 1, "{tool}");
    assert_eq!(
        (data[0]["sent"].as_u64(), data[0]["acked"].as_u64()),
        (Some(n as u64), Some(n as u64)),
        "{tool}"
    );
    ok.iter()
        .map(|e| e["value"].as_str().unwrap().to_string())
        .collect()
}

/// The values a verifiable consumer's events (with --verbose) say it consumed, checked: startup
/// first and shutdown last, an assignment, records_consumed counts adding up to `n`, and every
/// commit a success.
fn consumed(tool: &str, events: &[serde_json::Value], n: usize) -> BTreeSet<String> {
    assert_eq!(
        events.first().map(|e| &e["name"]),
        Some(&serde_json::json!("startup_complete")),
        "{tool}"
    );
    assert_eq!(
        events.last().map(|e| &e["name"]),
        Some(&serde_json::json!("shutdown_complete")),
        "{tool}"
    );
    assert!(!named(events, "partitions_assigned").is_empty(), "{tool}");
    let counted: u64 = named(events, "records_consumed")
        .iter()
        .flat_map(|e| e["partitions"].as_array().unwrap())
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, n as u64, "{tool}: records_consumed");
    let commits = named(events, "offsets_committed");
    assert!(!commits.is_empty(), "{tool}");
    assert!(
        commits.iter().all(|c| c["success"] == true),
        "{tool}: {commits:?}"
    );
    let records = named(events, "record_data");
    assert_eq!(records.len(), n, "{tool}: record_data");
    records
        .iter()
        .map(|e| e["value"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn the_verifiable_pair_speaks_the_java_tools_events_and_loses_nothing() {
    const N: usize = 300;
    let bootstrap = bootstrap();
    let b = bootstrap.as_str();
    let (from_lagless, from_java) = (new_topic(b, "vp-lagless", 3), new_topic(b, "vp-java", 3));
    let n = N.to_string();
    let producer_args = |topic: &str| -> Vec<String> {
        [
            "--topic",
            topic,
            "--bootstrap-server",
            b,
            "--max-messages",
            &n,
            "--repeating-keys",
            "7",
        ]
        .map(String::from)
        .to_vec()
    };
    let args = producer_args(&from_lagless);
    let mut cmd: Vec<&str> = vec!["verifiable-producer"];
    cmd.extend(args.iter().map(String::as_str));
    let lagless_produced = events(&ok(lagless(&cmd, None)));
    let args = producer_args(&from_java);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let java_produced = events(&java_tool(
        "org.apache.kafka.tools.VerifiableProducer",
        &args,
    ));
    let all: BTreeSet<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(acknowledged("lagless", &lagless_produced, N), all);
    assert_eq!(acknowledged("java", &java_produced, N), all);
    assert_eq!(
        schema(&lagless_produced),
        schema(&java_produced),
        "producer events"
    );

    // Each consumer reads what the other side's producer wrote.
    let (g_lagless, g_java) = (unique("vc-lagless"), unique("vc-java"));
    let lagless_consumed = events(&ok(lagless(
        &[
            "verifiable-consumer",
            "--topic",
            &from_java,
            "--group-id",
            &g_lagless,
            "--bootstrap-server",
            b,
            "--max-messages",
            &n,
            "--verbose",
            "--session-timeout",
            "10000",
        ],
        None,
    )));
    let java_consumed = events(&java_tool(
        "org.apache.kafka.tools.VerifiableConsumer",
        &[
            "--topic",
            &from_lagless,
            "--group-id",
            &g_java,
            "--bootstrap-server",
            b,
            "--max-messages",
            &n,
            "--verbose",
            "--session-timeout",
            "10000",
        ],
    ));
    assert_eq!(
        consumed("lagless", &lagless_consumed, N),
        all,
        "lagless read what Java wrote"
    );
    assert_eq!(
        consumed("java", &java_consumed, N),
        all,
        "Java read what lagless wrote"
    );
    // The lagless member committed every partition to its end.
    let ends: i64 = committed(b, &g_lagless).values().sum();
    assert_eq!(ends, N as i64);
    let (ls, js) = (schema(&lagless_consumed), schema(&java_consumed));
    for name in [
        "startup_complete",
        "partitions_assigned",
        "records_consumed",
        "record_data",
        "offsets_committed",
        "shutdown_complete",
    ] {
        assert_eq!(ls.get(name), js.get(name), "consumer event {name}");
    }
    // Without --max-messages the consumer runs until stopped: SIGTERM ends it as Java's
    // shutdown hook does (close, shutdown_complete, exit status 0).
    let g_stopped = unique("vc-sigterm");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lagless"))
        .args([
            "verifiable-consumer",
            "--topic",
            &from_java,
            "--group-id",
            &g_stopped,
        ])
        .args(["--bootstrap-server", b])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (stdout, pid) = (child.stdout.take().unwrap(), child.id().to_string());
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let (mut lines, mut counted, mut stopped) = (Vec::new(), 0, false);
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) {
                if e["name"] == "records_consumed" {
                    counted += e["count"].as_u64().unwrap();
                }
                // Everything read and committed: stop it.
                if counted == N as u64 && e["name"] == "offsets_committed" && !stopped {
                    stopped = Command::new("kill")
                        .args(["-TERM", &pid])
                        .status()
                        .unwrap()
                        .success();
                }
            }
            lines.push(line);
        }
        lines
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the verifiable consumer did not end within 60 s of its start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stopped = events(&reader.join().unwrap().join("\n"));
    assert!(status.success(), "{status}");
    assert_eq!(
        stopped.last().map(|e| &e["name"]),
        Some(&serde_json::json!("shutdown_complete"))
    );
    assert!(
        !named(&stopped, "partitions_revoked").is_empty(),
        "closed as a member: revoked"
    );
    assert_eq!(committed(b, &g_stopped).values().sum::<i64>(), N as i64);
    println!(
        "verifiable pair: {N} produced and acknowledged by each, each read by the other; events: \
         lagless producer {}, Java producer {}, lagless consumer {}, Java consumer {}",
        lagless_produced.len(),
        java_produced.len(),
        lagless_consumed.len(),
        java_consumed.len()
    );
}

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

/// Kafka's kafka-consumer-groups answer for `group`: partition -> (current, end, lag).
fn java_describe(bootstrap: &str, group: &str) -> LagRows {
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
        .arg("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
        .args([
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
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

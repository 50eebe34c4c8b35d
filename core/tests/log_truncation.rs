//! KIP-320 against a real unclean leader election: on a three-node cluster, a partition on nodes
//! 1 and 2 with `unclean.leader.election.enable=true` takes records acknowledged by its leader
//! alone (acks=1) while its follower is stopped; two consumers read them. The leader is then
//! killed and the lagging follower, started again, becomes leader without those records: the
//! log is truncated below both consumers' positions. The consumer with `auto.offset.reset=none`
//! gets a `LogTruncation` error naming the position and the divergent offset; the one with
//! `earliest` resets to the divergent offset by itself and reads every record the new leader
//! holds after it once: nothing re-read from before it, nothing skipped. A consumer that
//! committed its position before the truncation passes the position's leader epoch on with the
//! commit: its successor in the group detects the truncation from the committed offset alone.
//!
//! The Java consumer (tests/interop/java/InteropClient.java, the broker's own kafka-clients) runs
//! the same three roles in the same run, and reads offset for offset what lagless reads: with
//! `earliest` it resets to the divergent offset (and logs "Truncation detected"), with `none`
//! `poll()` throws a LogTruncationException naming the divergent offset (the client then seeks
//! there), and its successor starts from lagless' commit and its leader epoch.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/java_client.rs"]
mod java_client;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/unclean_election.rs"]
mod unclean_election;

use std::time::{Duration, Instant};

use java_client::JavaClient;
use lagless::{Consumer, TopicPartition};
use unclean_election::{assert_log_truncation, elect_node_2_uncleanly, expected, read};

const TOPIC: &str = "truncated";
/// Records on both replicas, then records only the leader took, then records of the new leader.
const BOTH: usize = 10;
const LEADER_ONLY: usize = 20;
const AFTER: usize = 5;

fn produce(bootstrap: &str, acks: &str, prefix: &str, n: usize) {
    unclean_election::produce(bootstrap, TOPIC, acks, prefix, n);
}

fn consumer(bootstrap: &str, reset: &str) -> Consumer {
    consumer_in(bootstrap, reset, "")
}

/// A consumer of group `group` (none when empty) with manual assignment.
fn consumer_in(bootstrap: &str, reset: &str, group: &str) -> Consumer {
    let mut pairs = unclean_election::consumer_settings(bootstrap, reset);
    if !group.is_empty() {
        pairs.push(("group.id", group));
    }
    let c = configs::consumer(&pairs);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    c
}

/// The Java consumer reading the topic's partition from the beginning (or, with `--group`, from
/// its group's commit), with `extra` arguments; its log says what it does on a truncation.
fn java_consumer(name: &str, bootstrap: &str, extra: &[&str]) -> JavaClient {
    let mut args = vec![
        "consume",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--assign-all",
        "--trace",
        "--config",
        "fetch.max.wait.ms=200",
    ];
    args.extend(extra);
    JavaClient::start(
        name,
        &args,
        &["org.apache.kafka.clients.consumer.internals.SubscriptionState"],
        Box::new(|_| {}),
    )
}

/// Waits until `j` printed `n` records in all; returns them (offset, value).
fn java_read(j: &JavaClient, n: usize, within: Duration) -> Vec<(i64, String)> {
    let start = Instant::now();
    loop {
        let got: Vec<(i64, String)> = j.records().into_iter().map(|(_, o, v)| (o, v)).collect();
        if got.len() >= n {
            return got;
        }
        assert!(
            start.elapsed() < within,
            "{}: only {} of {n} records within {within:?}: {got:?}\n{}",
            j.name,
            got.len(),
            j.stderr_tail(20)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops `j` and returns the position its last line reports for the partition and how many
/// records it printed in all.
fn java_stop(mut j: JavaClient) -> (i64, usize) {
    j.stop(Duration::from_secs(15));
    let lines = j.stderr_lines_with("runcation");
    eprintln!("{}'s log on the truncation: {lines:?}", j.name);
    let done = j
        .events()
        .into_iter()
        .find(|e| e["event"] == "done")
        .unwrap_or_else(|| panic!("{} printed no done line\n{}", j.name, j.stderr_tail(20)));
    let position = done["positions"]["0"]
        .as_i64()
        .unwrap_or_else(|| panic!("{}: {done}", j.name));
    (position, j.records().len())
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn an_uncleanly_elected_leader_truncates_below_the_position_and_the_consumer_detects_it() {
    let started = Instant::now();
    let cluster = unclean_election::start(TOPIC);
    let b = cluster.bootstrap.clone();
    produce(&b, "all", "a", BOTH);
    // The Java consumer in the same roles (its successor comes after the truncation).
    let java_resetting = java_consumer("java-earliest", &b, &[]);
    let java_strict = java_consumer(
        "java-none",
        &b,
        &["--config", "auto.offset.reset=none", "--seek-on-truncation"],
    );

    let strict = consumer(&b, "none");
    strict.seek(&TopicPartition::new(TOPIC, 0), 0).unwrap();
    let resetting = consumer(&b, "earliest");
    // Commits its position before the truncation; a successor in its group starts from it.
    let committer = consumer_in(&b, "earliest", "truncation-group");
    for c in [&strict, &resetting, &committer] {
        let (got, e) = read(c, BOTH, Duration::from_secs(30));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(got, expected("a", 0, BOTH));
    }

    // The follower stops (a controlled shutdown takes it out of the ISR); the leader alone takes
    // the next records, and both consumers read them.
    cluster.stop_node(2);
    produce(&b, "1", "b", LEADER_ONLY);
    for c in [&strict, &resetting, &committer] {
        let (got, e) = read(c, LEADER_ONLY, Duration::from_secs(30));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(got, expected("b", BOTH as i64, LEADER_ONLY));
    }
    let position = (BOTH + LEADER_ONLY) as i64;
    let before_truncation = [
        expected("a", 0, BOTH),
        expected("b", BOTH as i64, LEADER_ONLY),
    ]
    .concat();
    for j in [&java_resetting, &java_strict] {
        let got = java_read(j, BOTH + LEADER_ONLY, Duration::from_secs(60));
        assert_eq!(got, before_truncation, "{}", j.name);
    }
    // The commit carries the position's leader epoch (KIP-320).
    committer.commit_sync(None, None).unwrap();
    committer.close(None).unwrap();

    // The leader dies before the follower comes back: the follower, never in the ISR again, is
    // elected uncleanly and its log ends where the records of both replicas end.
    let survivors = elect_node_2_uncleanly(&cluster, TOPIC);
    produce(&survivors, "1", "c", AFTER);

    // earliest: back to the divergent offset, then exactly the new leader's records after it.
    let (got, e) = read(&resetting, AFTER, Duration::from_secs(60));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));
    // The Java consumer reads the same, offset for offset.
    let java_got = java_read(
        &java_resetting,
        BOTH + LEADER_ONLY + AFTER,
        Duration::from_secs(60),
    );
    eprintln!(
        "after the truncation, earliest: lagless {got:?}, Java {:?}",
        &java_got[BOTH + LEADER_ONLY..]
    );
    assert_eq!(
        java_got[BOTH + LEADER_ONLY..],
        got[..],
        "earliest: Java read otherwise"
    );
    assert_eq!(
        resetting
            .position(&TopicPartition::new(TOPIC, 0), None)
            .unwrap(),
        (BOTH + AFTER) as i64
    );

    // A successor starting from the commit checks the committed offset's epoch on its first
    // fetch: it resets to the divergent offset too, rather than to the log start (what an
    // offset out of range with earliest does).
    let successor = consumer_in(&survivors, "earliest", "truncation-group");
    let java_successor = java_consumer(
        "java-successor",
        &survivors,
        &["--group", "truncation-group"],
    );
    let (got, e) = read(&successor, AFTER, Duration::from_secs(60));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));
    // The Java consumer, from lagless' commit and its leader epoch, reads the same.
    let java_got = java_read(&java_successor, AFTER, Duration::from_secs(60));
    eprintln!("the successor: lagless {got:?}, Java {java_got:?}");
    assert_eq!(java_got, got, "successor: Java read otherwise");

    // none: the truncation is reported with the offsets, and no record comes before it.
    let (got, e) = read(&strict, 1, Duration::from_secs(60));
    assert!(got.is_empty(), "records after the truncation: {got:?}");
    assert_log_truncation(e, TOPIC, position, BOTH as i64);
    // The application seeks to the divergent offset and reads on from there.
    strict
        .seek(&TopicPartition::new(TOPIC, 0), BOTH as i64)
        .unwrap();
    let (got, e) = read(&strict, AFTER, Duration::from_secs(30));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));
    // The Java consumer: a LogTruncationException with the same offsets, before any record of
    // the new leader; it seeks to the divergent offset and reads the same.
    let java_got = java_read(
        &java_strict,
        BOTH + LEADER_ONLY + AFTER,
        Duration::from_secs(60),
    );
    eprintln!(
        "after the truncation, none: lagless {got:?}, Java {:?}",
        &java_got[BOTH + LEADER_ONLY..]
    );
    assert_eq!(
        java_got[BOTH + LEADER_ONLY..],
        got[..],
        "none: Java read otherwise"
    );
    let truncations: Vec<_> = java_strict
        .lines()
        .into_iter()
        .filter(|l| l["event"] == "truncation")
        .collect();
    eprintln!("Java's LogTruncationException: {truncations:?}");
    assert_eq!(truncations.len(), 1, "{truncations:?}");
    assert_eq!(truncations[0]["divergent"], serde_json::json!([[0, BOTH]]));
    assert_eq!(
        truncations[0]["positions"],
        serde_json::json!([[0, position]])
    );
    let first_after = java_strict
        .lines()
        .iter()
        .position(|l| l["event"] == "truncation")
        .unwrap();
    assert_eq!(
        java_strict.lines()[..first_after]
            .iter()
            .filter(|l| l.get("offset").is_some() && l.get("event").is_none())
            .count(),
        BOTH + LEADER_ONLY,
        "Java returned records of the new leader before the exception"
    );
    // Nothing read twice or beyond: each ends at the log end with the records counted above.
    let end = (BOTH + AFTER) as i64;
    let all = BOTH + LEADER_ONLY + AFTER;
    for (j, records) in [
        (java_resetting, all),
        (java_strict, all),
        (java_successor, AFTER),
    ] {
        let name = j.name.clone();
        assert_eq!(java_stop(j), (end, records), "{name}: position, records");
    }
    eprintln!("whole scenario: {:?}", started.elapsed());
}

//! The transactional producer (`transactional.id`) against a broker of the test's own, read
//! back by lagless consumers:
//!
//! - committed and aborted transactions interleaved over three partitions: read_committed
//!   delivers exactly the committed records, in order per partition; read_uncommitted all of
//!   them; under transaction version 2 (KIP-890, the default of a Kafka 4.x cluster) and, on a
//!   cluster formatted with transaction.version 1, under the classic protocol, each told apart
//!   by the epochs and sequences the partition saw;
//! - fencing: a second producer with the same transactional.id fences the first (its next
//!   commit fails with PRODUCER_FENCED, fatal) and aborts the first one's open transaction;
//! - consume-transform-produce with `send_offsets_to_transaction`: the group's offsets move
//!   only when the transaction commits; an aborted one leaves them where they were.
//! - an exactly-once pipeline: three instances (processes) consume, transform and produce in
//!   transactions carrying their offsets while input flows; three are SIGKILLed inside open
//!   transactions and restarted: the output read committed holds each input record once; with
//!   the members on the classic and on the consumer group protocol;
//! - a revocation in the middle of a transaction (eager, cooperative-sticky, consumer
//!   protocol): the listener aborts it and rewinds the partitions the member keeps; a member
//!   whose poll interval ran out mid-transaction can not commit its offsets;
//! - a producer SIGKILLed with a transaction open (its records flushed into the log): nothing
//!   of it is read committed, and a successor with the same transactional.id aborts it at
//!   init_transactions and goes on.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/transactional.rs"]
mod txn_support;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use lagless::{Consumer, OffsetAndMetadata, Producer, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;
use txn_support::*;

/// The broker's finalized `transaction.version` feature and its highest EndTxn version, from a
/// raw ApiVersions v3: lagless speaks the classic protocol (EndTxn v4, AddPartitionsToTxn v3)
/// either way, which a transaction-version-2 broker serves as version 1 transactions.
fn transaction_version(addr: &str) -> (Option<i16>, i16) {
    use lagless::protocol::msg::{ApiVersionsRequest, StrBytes};
    use lagless::protocol::wire::{decode_response, encode_request};
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(T)).unwrap();
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("lagless-test"))
        .with_client_software_version(StrBytes::from_static_str("0"));
    sock.write_all(&encode_request(&req, 3, 1, "transactions-test").unwrap())
        .unwrap();
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    sock.read_exact(&mut body).unwrap();
    let resp = decode_response::<ApiVersionsRequest>(bytes::Bytes::from(body), 3).unwrap();
    let tv = resp
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| f.max_version_level);
    let end_txn = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == 26)
        .map_or(-1, |k| k.max_version);
    (tv, end_txn)
}

/// Request `req` of api `key` at `version`, sent to broker `addr` on a connection of its own, and
/// its answer: for what lagless itself does not ask (DescribeProducers), or asks only inside
/// its own calls (OffsetFetch's committed leader epoch).
fn raw_call<Req, Resp>(addr: &str, key: i16, version: i16, req: &Req) -> Resp
where
    Req: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
    Resp: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
{
    use kafka_protocol::messages::{RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use std::io::{Read, Write};
    let header = RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("transactions-test")));
    let mut frame = bytes::BytesMut::new();
    header
        .encode(&mut frame, Req::header_version(version))
        .unwrap();
    req.encode(&mut frame, version).unwrap();
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(T)).unwrap();
    sock.write_all(&(frame.len() as i32).to_be_bytes()).unwrap();
    sock.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    sock.read_exact(&mut body).unwrap();
    let mut body = bytes::Bytes::from(body);
    ResponseHeader::decode(&mut body, Resp::header_version(version)).unwrap();
    Resp::decode(&mut body, version).unwrap()
}

/// The producers partition `partition` of `topic` knows of (DescribeProducers v0, asked of its
/// leader `addr`): (producer id, epoch, last sequence). What the partition saw tells which
/// transaction protocol the producer spoke: under version 2 (KIP-890) every transaction ends
/// with a new epoch and the sequences restart; under version 1 one epoch runs on.
fn producers_of(addr: &str, topic: &str, partition: i32) -> Vec<(i64, i32, i32)> {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{
        ApiKey, DescribeProducersRequest, DescribeProducersResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_indexes(vec![partition])]);
    let resp: DescribeProducersResponse = raw_call(addr, ApiKey::DescribeProducers as i16, 0, &req);
    let part = &resp.topics[0].partitions[0];
    assert_eq!(
        part.error_code, 0,
        "DescribeProducers of {topic}-{partition}"
    );
    part.active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence))
        .collect()
}

/// The leader epochs committed with `group`'s offsets of `topic` (OffsetFetch v7 to its
/// coordinator `addr`), per partition: -1 where an offset was committed without one.
fn committed_leader_epochs(addr: &str, group: &str, topic: &str) -> Vec<i32> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{
        ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_indexes((0..PARTITIONS).collect())]))
        .with_require_stable(true);
    let resp: OffsetFetchResponse = raw_call(addr, ApiKey::OffsetFetch as i16, 7, &req);
    assert_eq!(resp.error_code, 0, "OffsetFetch of {group}");
    let mut epochs: Vec<(i32, i32)> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_leader_epoch))
        .collect();
    epochs.sort();
    epochs.into_iter().map(|(_, e)| e).collect()
}

/// The transaction protocol a broker formatted with the release's defaults speaks: Kafka 4.x
/// finalizes transaction.version 2 (KIP-890) for a new cluster.
const DEFAULT_PROTOCOL: Protocol = Protocol::V2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Protocol {
    V1,
    V2,
}

/// The settings of a cluster formatted for transaction version 1 (the classic protocol).
const CLASSIC: &[&str] = &["--feature", "transaction.version=1"];

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn committed_and_aborted_transactions_are_read_committed_exactly() {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    interleaved_transactions(&broker.bootstrap, DEFAULT_PROTOCOL);
}

/// Both transaction protocols, on a cluster formatted with transaction.version 1: partitions
/// and the group join transactions by AddPartitionsToTxn and AddOffsetsToTxn, and one epoch
/// runs through every transaction.
#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn transactions_of_the_classic_protocol_where_the_cluster_speaks_only_it() {
    let _one = one_cluster();
    let broker = OwnBroker::start_with(1, CLASSIC);
    interleaved_transactions(&broker.bootstrap, Protocol::V1);
    offsets_committed_only_with_their_transaction(&broker.bootstrap);
}

/// 12 transactions of 30 records over three partitions, every third aborted: read_committed
/// delivers exactly the committed records, in order per partition; read_uncommitted all. The
/// partitions' producer state shows the protocol `want` was spoken.
fn interleaved_transactions(bootstrap: &str, want: Protocol) {
    let topic = "tx-interleaved";
    lagless::admin::create_topic(bootstrap, topic, PARTITIONS, 1).unwrap();
    let (tv, end_txn) = transaction_version(bootstrap.split(',').next().unwrap());
    println!("broker: finalized transaction.version {tv:?}, EndTxn up to v{end_txn}");
    let p = transactional(bootstrap, "tx-interleaved-1");
    p.init_transactions(T).unwrap();
    let (mut committed, mut all) = (Keys::new(), Keys::new());
    // 12 transactions of 30 records (10 per partition, the partitions interleaved); every
    // third aborted, after its records were written (flushed), so that read_uncommitted sees
    // them.
    for t in 0..12 {
        p.begin_transaction().unwrap();
        let abort = t % 3 == 2;
        let mut deliveries = Vec::new();
        for i in 0..30 {
            let partition = i % PARTITIONS;
            let key = format!("t{t}-{i}");
            let record = ProducerRecord::new(topic, "v")
                .with_key(key.clone())
                .with_partition(partition);
            deliveries.push(p.send(record).unwrap());
            all.entry(partition).or_default().push(key.clone());
            if !abort {
                committed.entry(partition).or_default().push(key);
            }
        }
        if abort {
            p.flush(T).unwrap();
            p.abort_transaction(T).unwrap();
        } else {
            p.commit_transaction(T).unwrap();
        }
        for d in deliveries {
            d.wait().unwrap();
        }
    }
    p.close(T).unwrap();
    let rc = read_all(bootstrap, topic, "read_committed");
    let ru = read_all(bootstrap, topic, "read_uncommitted");
    println!(
        "read_committed {} records (expected {}), read_uncommitted {} (expected {})",
        count(&rc),
        count(&committed),
        count(&ru),
        count(&all)
    );
    assert_eq!(count(&committed), 240);
    assert_eq!(
        rc, committed,
        "read_committed: exactly the committed, in order"
    );
    assert_eq!(count(&all), 360);
    assert_eq!(ru, all, "read_uncommitted: every record, in order");
    // Each partition got 10 records in each of the 12 transactions.
    let producers = producers_of(bootstrap.split(',').next().unwrap(), topic, 0);
    println!("producers of {topic}-0 (id, epoch, last sequence): {producers:?}");
    let [(_, epoch, last_sequence)] = producers[..] else {
        panic!("one producer wrote {topic}-0: {producers:?}");
    };
    match want {
        // The epoch went up at the end of each transaction; the sequences restarted with it.
        Protocol::V2 => assert!(epoch >= 11 && last_sequence < 10, "{producers:?}"),
        // One epoch, one run of sequences: 120 records.
        Protocol::V1 => assert_eq!((epoch, last_sequence), (0, 119)),
    }
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_second_producer_fences_the_first_and_aborts_its_transaction() {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    let topic = "tx-fencing";
    lagless::admin::create_topic(bootstrap, topic, PARTITIONS, 1).unwrap();
    let first = transactional(bootstrap, "tx-fenced");
    first.init_transactions(T).unwrap();
    first.begin_transaction().unwrap();
    for i in 0..30 {
        let r = ProducerRecord::new(topic, "v")
            .with_key(format!("first-{i}"))
            .with_partition(i % PARTITIONS);
        first.send(r).unwrap();
    }
    // The first producer's records are in the log, its transaction open.
    first.flush(T).unwrap();
    let second = transactional(bootstrap, "tx-fenced");
    second.init_transactions(T).unwrap();
    let e = first.commit_transaction(T).unwrap_err();
    println!("the fenced producer's commit: {e}");
    assert!(e.is_producer_fenced() && e.is_fatal(), "{e}");
    // Fatal: every later call fails the same way.
    let e = first.send(ProducerRecord::new(topic, "v")).err().unwrap();
    assert!(e.is_producer_fenced(), "{e}");
    let e = first.abort_transaction(T).unwrap_err();
    assert!(e.is_producer_fenced(), "{e}");
    second.begin_transaction().unwrap();
    let mut committed = Keys::new();
    for i in 0..12 {
        let key = format!("second-{i}");
        let partition = i % PARTITIONS;
        let r = ProducerRecord::new(topic, "v")
            .with_key(key.clone())
            .with_partition(partition);
        second.send(r).unwrap();
        committed.entry(partition).or_default().push(key);
    }
    second.commit_transaction(T).unwrap();
    second.close(T).unwrap();
    let rc = read_all(bootstrap, topic, "read_committed");
    let ru = read_all(bootstrap, topic, "read_uncommitted");
    println!(
        "read_committed {} records, read_uncommitted {}",
        count(&rc),
        count(&ru)
    );
    assert_eq!(
        rc, committed,
        "nothing of the fenced producer's transaction"
    );
    assert_eq!(count(&ru), 42, "the aborted 30 are in the log");
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn offsets_sent_to_a_transaction_are_committed_only_with_it() {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    offsets_committed_only_with_their_transaction(&broker.bootstrap);
}

/// Consume-transform-produce: 90 input records in transactions carrying their offsets, every
/// third transaction aborted (its offsets stay, its records are read again).
fn offsets_committed_only_with_their_transaction(bootstrap: &str) {
    let (input, output) = ("ctp-in", "ctp-out");
    lagless::admin::create_topic(bootstrap, input, PARTITIONS, 1).unwrap();
    lagless::admin::create_topic(bootstrap, output, PARTITIONS, 1).unwrap();
    let plain = configs::producer(&[("bootstrap.servers", bootstrap)]);
    const INPUT: usize = 90;
    for i in 0..INPUT {
        let r = ProducerRecord::new(input, format!("{i}"))
            .with_key(format!("in-{i}"))
            .with_partition(i as i32 % PARTITIONS);
        plain.send(r).unwrap();
    }
    plain.close(T).unwrap();
    let mut settings = configs::group_member_settings("ctp");
    settings.extend([
        ("bootstrap.servers", bootstrap),
        ("isolation.level", "read_committed"),
        ("enable.auto.commit", "false"),
        ("max.poll.records", "20"),
    ]);
    let c = configs::consumer(&settings);
    c.subscribe(&[input], None).unwrap();
    let p = transactional(bootstrap, "ctp-1");
    p.init_transactions(T).unwrap();
    let (mut rounds, mut aborted_rounds, mut consumed) = (0, 0, 0usize);
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumed < INPUT {
        assert!(Instant::now() < deadline, "consumed {consumed} of {INPUT}");
        let records = c.poll(Duration::from_millis(200)).unwrap();
        if records.is_empty() {
            continue;
        }
        let before = committed_offsets(&c, input);
        p.begin_transaction().unwrap();
        let mut next: HashMap<TopicPartition, OffsetAndMetadata> = HashMap::new();
        for r in &records {
            let key = String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
            p.send(ProducerRecord::new(output, "out").with_key(key.replace("in-", "out-")))
                .unwrap();
            next.insert(
                TopicPartition::new(input, r.partition),
                OffsetAndMetadata {
                    offset: r.offset + 1,
                    metadata: String::new(),
                },
            );
        }
        let group = c.group_metadata().expect("a group member");
        p.send_offsets_to_transaction(&next, &group, T).unwrap();
        rounds += 1;
        if rounds % 3 == 1 {
            // Abort: the offsets stay where they were, and the records are read again.
            p.abort_transaction(T).unwrap();
            aborted_rounds += 1;
            assert_eq!(committed_offsets(&c, input), before, "after an abort");
            for tp in next.keys() {
                let at = before[tp.partition as usize].max(0);
                c.seek(tp, at).unwrap();
            }
        } else {
            p.commit_transaction(T).unwrap();
            let after = committed_offsets(&c, input);
            for (tp, o) in &next {
                assert_eq!(after[tp.partition as usize], o.offset, "after a commit");
            }
            consumed += records.len();
        }
    }
    p.close(T).unwrap();
    let committed = committed_offsets(&c, input);
    c.close(None).unwrap();
    assert_eq!(
        committed,
        vec![30, 30, 30],
        "every input record's offset committed"
    );
    // KIP-320: the offsets went with the leader epoch the consumer read them under (the
    // topic's first leader: epoch 0), so that a next owner can check them against the log.
    let epochs = committed_leader_epochs(bootstrap.split(',').next().unwrap(), "ctp", input);
    println!("committed leader epochs of {input}: {epochs:?}");
    assert_eq!(epochs, vec![0, 0, 0]);
    let out = read_all(bootstrap, output, "read_committed");
    let mut keys: Vec<String> = out.values().flatten().cloned().collect();
    keys.sort();
    let mut want: Vec<String> = (0..INPUT).map(|i| format!("out-{i}")).collect();
    want.sort();
    println!(
        "{rounds} transactions ({aborted_rounds} aborted); {} output records read_committed",
        keys.len()
    );
    assert!(aborted_rounds > 0);
    assert_eq!(keys, want, "each input record once in the committed output");
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_member_that_lost_its_partitions_mid_transaction_can_not_commit_their_offsets() {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    let (input, output) = ("lost-in", "lost-out");
    lagless::admin::create_topic(bootstrap, input, PARTITIONS, 1).unwrap();
    lagless::admin::create_topic(bootstrap, output, PARTITIONS, 1).unwrap();
    let plain = configs::producer(&[("bootstrap.servers", bootstrap)]);
    for i in 0..30 {
        let r = ProducerRecord::new(input, "v")
            .with_key(format!("in-{i}"))
            .with_partition(i % PARTITIONS);
        plain.send(r).unwrap();
    }
    plain.close(T).unwrap();
    let member = |poll_interval: &'static str| {
        let mut settings = configs::group_member_settings("lost");
        settings.extend([
            ("bootstrap.servers", bootstrap),
            ("isolation.level", "read_committed"),
            ("enable.auto.commit", "false"),
            ("max.poll.interval.ms", poll_interval),
        ]);
        let c = configs::consumer(&settings);
        c.subscribe(&[input], None).unwrap();
        c
    };
    // A polls its records and the group metadata that goes with them, opens a transaction and
    // writes its output, then stops polling past max.poll.interval.ms.
    let a = member("3000");
    let deadline = Instant::now() + T;
    let records = loop {
        let r = a.poll(Duration::from_millis(200)).unwrap();
        if !r.is_empty() {
            break r;
        }
        assert!(Instant::now() < deadline, "A got no records");
    };
    let group = a.group_metadata().expect("a group member");
    let p = transactional(bootstrap, "lost-1");
    p.init_transactions(T).unwrap();
    p.begin_transaction().unwrap();
    let mut next: HashMap<TopicPartition, OffsetAndMetadata> = HashMap::new();
    for r in &records {
        p.send(ProducerRecord::new(output, "out").with_partition(r.partition))
            .unwrap();
        next.insert(
            TopicPartition::new(input, r.partition),
            OffsetAndMetadata {
                offset: r.offset + 1,
                metadata: String::new(),
            },
        );
    }
    // B joins; A does not poll, so the rebalance goes on without it once its poll interval is
    // over, and B ends up with every partition.
    let b = member("30000");
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.assignment().len() < PARTITIONS as usize {
        b.poll(Duration::from_millis(200)).unwrap();
        assert!(Instant::now() < deadline, "B has {:?}", b.assignment());
    }
    let b_group = b.group_metadata().unwrap();
    println!(
        "A: generation {} member {}; B: generation {} with {} partitions",
        group.generation_id,
        group.member_id,
        b_group.generation_id,
        b.assignment().len()
    );
    // A's offsets, sent with its lost generation, are refused: the transaction can not commit.
    let e = p.send_offsets_to_transaction(&next, &group, T).unwrap_err();
    println!("A's send_offsets_to_transaction: {e}");
    assert!(matches!(e, lagless::Error::TransactionAbortable(_)), "{e}");
    let e = p.commit_transaction(T).unwrap_err();
    assert!(matches!(e, lagless::Error::TransactionAbortable(_)), "{e}");
    p.abort_transaction(T).unwrap();
    // The group's offsets did not move, and nothing of A's transaction is visible.
    let committed: Vec<i64> = b
        .committed(&tps(input), Some(T))
        .unwrap()
        .into_iter()
        .map(|(_, o)| o.map_or(-1, |o| o.offset))
        .collect();
    assert_eq!(committed, vec![-1, -1, -1]);
    assert_eq!(count(&read_all(bootstrap, output, "read_committed")), 0);
    // The producer goes on: the next transaction commits.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new(output, "after").with_key("after"))
        .unwrap();
    p.commit_transaction(T).unwrap();
    p.close(T).unwrap();
    assert_eq!(count(&read_all(bootstrap, output, "read_committed")), 1);
    b.close(None).unwrap();
    drop(a);
}

/// Set in the environment of the producer run as its own process by
/// `a_producer_killed_mid_transaction_leaves_nothing_visible_and_its_successor_aborts_it`: the
/// test binary runs again with `--exact <that test>`, whose first line runs the producer and
/// never returns. The producer is no test of its own, so a normal run cannot pass without it.
const CHILD_ROLE: &str = "LAGLESS_TXN_CHILD";

/// The producer that is killed: commits one transaction of 30 records ("c-0".."c-29", 10 per
/// partition), writes 60 more ("open-*") in a second one and flushes them into the log, says so
/// through the file `LAGLESS_TXN_CHILD_OUT`, and waits to be killed.
fn killed_producer_if_spawned() {
    match std::env::var(CHILD_ROLE).as_deref() {
        Err(_) => return,
        Ok("producer") => {}
        Ok("pipeline") => pipeline_process(),
        Ok(other) => panic!("unknown {CHILD_ROLE} {other:?}"),
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (bootstrap, topic, out) = (
        var("LAGLESS_TXN_CHILD_BOOTSTRAP"),
        var("LAGLESS_TXN_CHILD_TOPIC"),
        var("LAGLESS_TXN_CHILD_OUT"),
    );
    let p = transactional(&bootstrap, "tx-killed");
    p.init_transactions(T).unwrap();
    for (prefix, n, commit) in [("c", 30, true), ("open", 60, false)] {
        p.begin_transaction().unwrap();
        for i in 0..n {
            let r = ProducerRecord::new(topic.as_str(), "v")
                .with_key(format!("{prefix}-{i}"))
                .with_partition(i % PARTITIONS);
            p.send(r).unwrap();
        }
        p.flush(T).unwrap();
        if commit {
            p.commit_transaction(T).unwrap();
        }
    }
    std::fs::write(&out, "open transaction flushed\n").unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_producer_killed_mid_transaction_leaves_nothing_visible_and_its_successor_aborts_it() {
    killed_producer_if_spawned();
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    let topic = "tx-killed";
    lagless::admin::create_topic(bootstrap, topic, PARTITIONS, 1).unwrap();
    let out = std::env::temp_dir().join(format!("lagless-tx-killed-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_producer_killed_mid_transaction_leaves_nothing_visible_and_its_successor_aborts_it",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ROLE, "producer")
        .env("LAGLESS_TXN_CHILD_BOOTSTRAP", bootstrap)
        .env("LAGLESS_TXN_CHILD_TOPIC", topic)
        .env("LAGLESS_TXN_CHILD_OUT", &out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the producer ended before its transaction was open: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the producer never flushed its open transaction"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: no abort, no EndTxn, the transaction stays open
    child.wait().unwrap();
    let _ = std::fs::remove_file(&out);

    // The open transaction holds the last stable offset at its first record: read_committed
    // sees the committed 30 and stops there; read_uncommitted sees all 90.
    let rc = read_all(bootstrap, topic, "read_committed");
    let ru = read_all(bootstrap, topic, "read_uncommitted");
    println!(
        "after the kill: read_committed {}, read_uncommitted {}",
        count(&rc),
        count(&ru)
    );
    assert_eq!(count(&rc), 30, "{rc:?}");
    assert!(rc.values().flatten().all(|k| k.starts_with("c-")), "{rc:?}");
    assert_eq!(count(&ru), 90);

    // A successor with the same transactional.id: init_transactions aborts the open
    // transaction (well before its 30 s transaction.timeout.ms) and the successor goes on.
    let successor = transactional(bootstrap, "tx-killed");
    let started = Instant::now();
    successor.init_transactions(T).unwrap();
    successor.begin_transaction().unwrap();
    for i in 0..30 {
        let r = ProducerRecord::new(topic, "v")
            .with_key(format!("s-{i}"))
            .with_partition(i % PARTITIONS);
        successor.send(r).unwrap();
    }
    successor.commit_transaction(T).unwrap();
    println!(
        "successor: init and one transaction in {:?}",
        started.elapsed()
    );
    successor.close(T).unwrap();

    let rc = read_all(bootstrap, topic, "read_committed");
    let ru = read_all(bootstrap, topic, "read_uncommitted");
    println!(
        "after the successor: read_committed {}, read_uncommitted {}",
        count(&rc),
        count(&ru)
    );
    let mut expected = Keys::new();
    for (prefix, n) in [("c", 30), ("s", 30)] {
        for i in 0..n {
            expected
                .entry(i % PARTITIONS)
                .or_default()
                .push(format!("{prefix}-{i}"));
        }
    }
    assert_eq!(
        rc, expected,
        "read_committed: the two committed transactions, in order"
    );
    assert_eq!(count(&ru), 120, "read_uncommitted: every record");
}

/// Input partitions of the exactly-once pipeline (two per instance).
const PIPELINE_INPUT_PARTITIONS: i32 = 6;

/// One instance of the exactly-once pipeline, run as a child process until killed: a member of
/// the group reads the input and, per poll, writes each record to the output as `<partition>-
/// <offset>` in one transaction that also carries the member's offsets (send_offsets_to_
/// transaction with its group metadata). A transaction the broker refuses (the member's
/// generation is gone) is aborted and its partitions read again from the group's committed
/// offsets, as Java's exactly-once loop does.
fn pipeline_process() -> ! {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (bootstrap, slot) = (var("LAGLESS_TXN_CHILD_BOOTSTRAP"), var("LAGLESS_TXN_SLOT"));
    // Present while a transaction with written records is open.
    let open_marker = var("LAGLESS_TXN_CHILD_OUT");
    let mut settings = configs::group_member_settings("pipeline");
    settings.extend([
        ("bootstrap.servers", bootstrap.as_str()),
        ("enable.auto.commit", "false"),
        ("max.poll.records", "50"),
    ]);
    let c = configs::consumer(&settings);
    c.subscribe(&["pipe-in"], None).unwrap();
    let id = format!("pipe-{slot}");
    let p = configs::producer(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("transactional.id", id.as_str()),
        ("linger.ms", "5"),
        ("transaction.timeout.ms", "10000"),
    ]);
    p.init_transactions(T).unwrap();
    loop {
        let records = c.poll(Duration::from_millis(100)).unwrap();
        if records.is_empty() {
            continue;
        }
        p.begin_transaction().unwrap();
        let mut next: HashMap<TopicPartition, OffsetAndMetadata> = HashMap::new();
        for r in &records {
            let key = format!("{}-{}", r.partition, r.offset);
            let out = ProducerRecord::new("pipe-out", "v")
                .with_key(key)
                .with_partition(r.partition % PARTITIONS);
            p.send(out).unwrap();
            let offset = OffsetAndMetadata {
                offset: r.offset + 1,
                metadata: String::new(),
            };
            next.insert(TopicPartition::new("pipe-in", r.partition), offset);
        }
        // The records reach the log before the transaction ends, and the "processing" takes a
        // while: a kill most likely lands in an open transaction whose records are written.
        p.flush(T).unwrap();
        std::fs::write(&open_marker, "").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let sent = match c.group_metadata() {
            Some(group) => p.send_offsets_to_transaction(&next, &group, T),
            None => Err(lagless::Error::TransactionAbortable(
                "no group metadata".into(),
            )),
        };
        let ended = sent.and_then(|()| p.commit_transaction(T));
        let _ = std::fs::remove_file(&open_marker);
        match ended {
            Ok(()) => {}
            Err(lagless::Error::TransactionAbortable(why)) => {
                eprintln!("pipeline {slot}: aborting a transaction: {why}");
                p.abort_transaction(T).unwrap();
                let tps: Vec<TopicPartition> = next.into_keys().collect();
                for (tp, committed) in c.committed(&tps, Some(T)).unwrap() {
                    // A partition no longer ours is read again by its new owner.
                    let _ = c.seek(&tp, committed.map_or(0, |o| o.offset));
                }
            }
            Err(e) => panic!("pipeline {slot}: {e}"),
        }
    }
}

/// Kills the pipeline's processes when the test ends, passed or not.
struct Instances(Vec<std::process::Child>);

impl Drop for Instances {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The file instance `slot` keeps while it has a transaction open with records written.
fn open_marker(slot: usize) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lagless-pipeline-{}-{slot}", std::process::id()))
}

/// Starts pipeline instance `slot`; `group_protocol` is its consumer's `group.protocol`.
fn spawn_instance(bootstrap: &str, slot: usize, group_protocol: &str) -> std::process::Child {
    let _ = std::fs::remove_file(open_marker(slot));
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_exactly_once_pipeline_of_three_survives_rolling_kills",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ROLE, "pipeline")
        .env("LAGLESS_TXN_CHILD_BOOTSTRAP", bootstrap)
        .env("LAGLESS_TXN_SLOT", slot.to_string())
        .env("LAGLESS_TXN_CHILD_OUT", open_marker(slot))
        // support/configs.rs's group member settings follow it.
        .env("LAGLESS_TEST_GROUP_PROTOCOL", group_protocol)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn an_exactly_once_pipeline_of_three_survives_rolling_kills() {
    killed_producer_if_spawned();
    pipeline_with_rolling_kills("classic");
}

/// The pipeline with its members on the consumer group protocol (KIP-848): the broker assigns
/// incrementally, and the offsets of a transaction go with the member's epoch, which a member
/// that lost partitions no longer has.
#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn an_exactly_once_pipeline_under_the_consumer_protocol_survives_rolling_kills() {
    pipeline_with_rolling_kills("consumer");
}

/// Three pipeline instances (processes, members of one group on `group_protocol`) while the
/// input flows; three SIGKILLs inside open transactions, each instance restarted at once.
fn pipeline_with_rolling_kills(group_protocol: &str) {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    lagless::admin::create_topic(bootstrap, "pipe-in", PIPELINE_INPUT_PARTITIONS, 1).unwrap();
    lagless::admin::create_topic(bootstrap, "pipe-out", PARTITIONS, 1).unwrap();
    let mut instances = Instances(
        (0..3)
            .map(|slot| spawn_instance(bootstrap, slot, group_protocol))
            .collect(),
    );
    // The input flows in rounds of 150 records, one every 300 ms, from a thread of its own: at
    // least 20 rounds, and on until the kills are done (a victim must have records to hold a
    // transaction open with; a fixed number of rounds could all be processed before the last
    // kill's victim got partitions again), at most 200.
    const ROUNDS: usize = 20;
    const PER_ROUND: usize = 150;
    let kills_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let bootstrap = bootstrap.to_string();
        let kills_done = kills_done.clone();
        std::thread::spawn(move || -> usize {
            let input = configs::producer(&[("bootstrap.servers", &bootstrap), ("linger.ms", "5")]);
            let mut round = 0;
            let done = || kills_done.load(std::sync::atomic::Ordering::Acquire);
            while round < ROUNDS || (!done() && round < 200) {
                for i in 0..PER_ROUND {
                    let partition = ((round * PER_ROUND + i) as i32) % PIPELINE_INPUT_PARTITIONS;
                    input
                        .send(ProducerRecord::new("pipe-in", "v").with_partition(partition))
                        .unwrap();
                }
                input.flush(T).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                round += 1;
            }
            input.close(T).unwrap();
            round * PER_ROUND
        })
    };
    let all: Vec<TopicPartition> = (0..PIPELINE_INPUT_PARTITIONS)
        .map(|p| TopicPartition::new("pipe-in", p))
        .collect();
    let observer = configs::consumer(&[("bootstrap.servers", bootstrap), ("group.id", "pipeline")]);
    let committed_sum = || -> i64 {
        observer
            .committed(&all, Some(T))
            .unwrap()
            .into_iter()
            .map(|(_, o)| o.map_or(0, |o| o.offset))
            .sum()
    };
    // Once the group has committed 400, 1000 and 1600 records, one instance is SIGKILLed inside
    // a transaction whose records are written (its marker file says so) and started again at
    // once with the same transactional.id, whose init_transactions aborts what the killed one
    // left open.
    let mut kills = 0;
    for (slot, threshold) in [(0usize, 400i64), (1, 1000), (2, 1600)] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while committed_sum() < threshold {
            assert!(
                Instant::now() < deadline,
                "the group never committed {threshold}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        while !open_marker(slot).exists() {
            assert!(
                Instant::now() < deadline,
                "instance {slot} never had a transaction open"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let child = &mut instances.0[slot];
        child.kill().unwrap();
        child.wait().unwrap();
        *child = spawn_instance(bootstrap, slot, group_protocol);
        kills += 1;
    }
    kills_done.store(true, std::sync::atomic::Ordering::Release);
    let fed = feeder.join().unwrap();
    let ends: Vec<i64> = observer
        .end_offsets(&all, Some(T))
        .unwrap()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    assert_eq!(ends.iter().sum::<i64>(), fed as i64);
    // Until the group has committed every input offset (or 120 s); an instance that ends by
    // itself fails the test.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut committed = Vec::new();
    while Instant::now() < deadline {
        for (slot, child) in instances.0.iter_mut().enumerate() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("pipeline instance {slot} ended by itself: {status}");
            }
        }
        committed = observer
            .committed(&all, Some(T))
            .unwrap()
            .into_iter()
            .map(|(_, o)| o.map_or(-1, |o| o.offset))
            .collect();
        if committed == ends {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    drop(instances);
    observer.close(None).unwrap();
    assert_eq!(
        committed, ends,
        "the group's committed offsets against the input's end"
    );
    let out = read_all(bootstrap, "pipe-out", "read_committed");
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for key in out.values().flatten() {
        *seen.entry(key.clone()).or_default() += 1;
    }
    let twice: Vec<&String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k)
        .collect();
    let missing: Vec<String> = (0..PIPELINE_INPUT_PARTITIONS)
        .flat_map(|p| (0..ends[p as usize]).map(move |o| format!("{p}-{o}")))
        .filter(|k| !seen.contains_key(k))
        .collect();
    let uncommitted = count(&read_all(bootstrap, "pipe-out", "read_uncommitted"));
    println!(
        "{kills} kills; input {} records; output read_committed {} ({} distinct, {} twice, {} \
         missing); read_uncommitted {uncommitted}",
        ends.iter().sum::<i64>(),
        count(&out),
        seen.len(),
        twice.len(),
        missing.len()
    );
    assert_eq!(kills, 3);
    assert!(
        uncommitted > fed,
        "the killed instances' open transactions wrote records: {uncommitted}"
    );
    assert!(twice.is_empty(), "read twice: {twice:?}");
    assert!(missing.is_empty(), "missing: {missing:?}");
    assert_eq!(count(&out), fed);
}

/// The listener of the recommended exactly-once loop: a revocation (or a loss) in the middle of
/// a transaction aborts it, so the partitions' records are read again (by their new owner, or
/// by this member from the committed offsets) and the new owner never waits for it.
struct AbortOnRevoke {
    producer: std::sync::Arc<Producer>,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    aborted_in_callback: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// The recommended listener of a consume-transform-produce loop: a revocation in the middle of
/// a transaction aborts it, and the partitions the member keeps (under cooperative or
/// consumer-protocol rebalancing) are read again from their committed offsets, since the abort
/// undid their records too; the revoked ones are read again by their new owner.
impl lagless::RebalanceListener for AbortOnRevoke {
    fn on_partitions_revoked(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        use std::sync::atomic::Ordering;
        if self.open.swap(false, Ordering::SeqCst) {
            self.producer.abort_transaction(T)?;
            let kept: Vec<TopicPartition> = consumer
                .assignment()
                .into_iter()
                .filter(|tp| !partitions.contains(tp))
                .collect();
            if !kept.is_empty() {
                for (tp, committed) in consumer.committed(&kept, Some(T))? {
                    consumer.seek(&tp, committed.map_or(0, |o| o.offset))?;
                }
            }
            self.aborted_in_callback.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Writes `records` as `<partition>-<offset>` into `p`'s open transaction and sends their
/// offsets with `c`'s group metadata.
fn transact_records(c: &Consumer, p: &Producer, records: &[lagless::ConsumerRecord], output: &str) {
    let mut next: HashMap<TopicPartition, OffsetAndMetadata> = HashMap::new();
    for r in records {
        let key = format!("{}-{}", r.partition, r.offset);
        p.send(ProducerRecord::new(output, "v").with_key(key))
            .unwrap();
        let offset = OffsetAndMetadata {
            offset: r.offset + 1,
            metadata: String::new(),
        };
        next.insert(TopicPartition::new(&*r.topic, r.partition), offset);
    }
    p.flush(T).unwrap();
    let group = c.group_metadata().expect("a group member");
    p.send_offsets_to_transaction(&next, &group, T).unwrap();
}

/// One round of the exactly-once loop: `records` polled by `c` go out in one transaction of
/// `p`, committed at once.
fn transact_round(
    c: &Consumer,
    p: &Producer,
    open: &std::sync::atomic::AtomicBool,
    records: &[lagless::ConsumerRecord],
    output: &str,
) {
    use std::sync::atomic::Ordering;
    if records.is_empty() {
        return;
    }
    p.begin_transaction().unwrap();
    open.store(true, Ordering::SeqCst);
    transact_records(c, p, records, output);
    p.commit_transaction(T).unwrap();
    open.store(false, Ordering::SeqCst);
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_revocation_in_the_middle_of_a_transaction_aborts_it_and_nothing_is_read_twice() {
    // Eager: every partition is revoked at the rebalance, so the open transaction's records of
    // both partitions are read again from the committed offsets.
    revocation_mid_transaction(&[
        ("group.protocol", "classic"),
        ("partition.assignment.strategy", "range"),
    ]);
}

/// Cooperative: only the partition that moves to B is revoked. The abort undid A's records of
/// the partition it keeps too, so the listener reads those again from the committed offsets.
#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_cooperative_revocation_in_the_middle_of_a_transaction_rewinds_the_kept_partitions_too() {
    revocation_mid_transaction(&[
        ("group.protocol", "classic"),
        ("partition.assignment.strategy", "cooperative-sticky"),
    ]);
}

/// The same under the consumer group protocol (KIP-848): the broker assigns, incrementally, and
/// the offsets go with the member's epoch.
#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_revocation_under_the_consumer_protocol_in_the_middle_of_a_transaction() {
    revocation_mid_transaction(&[("group.protocol", "consumer")]);
}

/// A owns both partitions of the input and holds a transaction open across its polls; B joins,
/// and the revocation comes in the middle of A's transaction: the listener aborts it (once).
/// Then both transact a poll at a time until the group has committed all 40 input offsets:
/// the output read_committed holds each input record once. `protocol`: the members' group
/// protocol and assignor settings.
fn revocation_mid_transaction(protocol: &[(&'static str, &'static str)]) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    let (input, output) = ("revoke-in", "revoke-out");
    lagless::admin::create_topic(bootstrap, input, 2, 1).unwrap();
    lagless::admin::create_topic(bootstrap, output, 1, 1).unwrap();
    let plain = configs::producer(&[("bootstrap.servers", bootstrap)]);
    for i in 0..40 {
        plain
            .send(ProducerRecord::new(input, "v").with_partition(i % 2))
            .unwrap();
    }
    plain.close(T).unwrap();
    let member = |id: &str| {
        let mut settings = vec![
            ("group.id", "revoke"),
            ("auto.offset.reset", "earliest"),
            ("bootstrap.servers", bootstrap),
            ("enable.auto.commit", "false"),
            ("max.poll.records", "6"),
        ];
        if !protocol.contains(&("group.protocol", "consumer")) {
            settings.extend([
                ("session.timeout.ms", "6000"),
                ("heartbeat.interval.ms", "500"),
            ]);
        }
        settings.extend(protocol.iter().copied());
        let c = Arc::new(configs::consumer(&settings));
        let p = Arc::new(transactional(bootstrap, id));
        p.init_transactions(T).unwrap();
        let open = Arc::new(AtomicBool::new(false));
        let aborted = Arc::new(AtomicUsize::new(0));
        let listener = AbortOnRevoke {
            producer: p.clone(),
            open: open.clone(),
            aborted_in_callback: aborted.clone(),
        };
        c.subscribe(&[input], Some(Box::new(listener))).unwrap();
        (c, p, open, aborted)
    };
    // A owns both partitions and opens a transaction with records written and offsets sent;
    // then B joins, and the revocation comes in the middle of A's transaction.
    let (a, pa, a_open, a_aborted) = member("revoke-a");
    let deadline = Instant::now() + T;
    let records = loop {
        let r = a.poll(Duration::from_millis(100)).unwrap();
        if !r.is_empty() {
            break r;
        }
        assert!(Instant::now() < deadline, "A got no records");
    };
    pa.begin_transaction().unwrap();
    a_open.store(true, Ordering::SeqCst);
    transact_records(&a, &pa, &records, output);
    let mut in_open_transaction = records.len();
    let (b, pb, b_open, _) = member("revoke-b");
    // Both poll (and transact) until the group has committed all 40 input offsets. A keeps its
    // transaction open across its polls, adding what they bring, until the revocation aborts
    // it; after that it commits a transaction per poll like B.
    let all = [TopicPartition::new(input, 0), TopicPartition::new(input, 1)];
    let observer = configs::consumer(&[("bootstrap.servers", bootstrap), ("group.id", "revoke")]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let committed = loop {
        let records = b.poll(Duration::from_millis(100)).unwrap();
        transact_round(&b, &pb, &b_open, &records, output);
        let records = a.poll(Duration::from_millis(100)).unwrap();
        if a_open.load(Ordering::SeqCst) {
            if !records.is_empty() {
                transact_records(&a, &pa, &records, output);
                in_open_transaction += records.len();
            }
        } else {
            transact_round(&a, &pa, &a_open, &records, output);
        }
        // The committed offsets are read stable (KIP-447, as Java): while a transaction with
        // offsets is open they are not given, so the observer asks briefly and asks again.
        let committed: Vec<i64> = match observer.committed(&all, Some(Duration::from_millis(200))) {
            Ok(c) => c
                .into_iter()
                .map(|(_, o)| o.map_or(-1, |o| o.offset))
                .collect(),
            Err(_) => continue,
        };
        if committed == [20, 20] || Instant::now() > deadline {
            break committed;
        }
    };
    observer.close(None).unwrap();
    let a_partitions = a.assignment();
    let b_partitions = b.assignment();
    a.close(None).unwrap();
    b.close(None).unwrap();
    let out = read_all_one(bootstrap, output, "read_committed");
    let uncommitted = read_all_one(bootstrap, output, "read_uncommitted").len();
    let mut distinct = out.clone();
    distinct.sort();
    distinct.dedup();
    println!(
        "A held {in_open_transaction} records in its open transaction, aborted in \
         on_partitions_revoked {} time(s); then A {:?}, B {:?}; committed {committed:?}; output \
         read_committed {} ({} distinct), read_uncommitted {uncommitted}",
        a_aborted.load(Ordering::SeqCst),
        a_partitions,
        b_partitions,
        out.len(),
        distinct.len()
    );
    assert_eq!(
        a_aborted.load(Ordering::SeqCst),
        1,
        "the revocation aborted A's transaction"
    );
    assert_eq!(committed, [20, 20]);
    assert_eq!(b_partitions.len(), 1, "B took a partition over");
    assert_eq!(out.len(), 40, "each input record once: {out:?}");
    assert_eq!(distinct.len(), 40);
    assert_eq!(
        uncommitted,
        40 + in_open_transaction,
        "the aborted records were written"
    );
}

/// Every key of a one-partition `topic` read from the start with `isolation`.
fn read_all_one(bootstrap: &str, topic: &str, isolation: &str) -> Vec<String> {
    let c = configs::consumer(&[
        ("bootstrap.servers", bootstrap),
        ("isolation.level", isolation),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "100"),
    ]);
    let tp = TopicPartition::new(topic, 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let end = c.end_offsets(std::slice::from_ref(&tp), Some(T)).unwrap()[0].1;
    let mut keys = Vec::new();
    let deadline = Instant::now() + T;
    while c.position(&tp, Some(T)).unwrap() < end {
        assert!(Instant::now() < deadline, "{topic} not read to {end}");
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            keys.push(String::from_utf8(r.key.unwrap().to_vec()).unwrap());
        }
    }
    c.close(None).unwrap();
    keys
}

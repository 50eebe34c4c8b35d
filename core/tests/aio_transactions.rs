//! The async front's transactions against a broker of the test's own: a consume-transform-
//! produce loop of `lagless::aio` on a current_thread tokio runtime. The producer's sender and
//! both clients' connections run on that one thread, so a transactional call that blocked it
//! (instead of awaiting) would hang the loop until the test's deadline.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/transactional.rs"]
mod txn_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lagless::aio;
use lagless::{OffsetAndMetadata, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;
use txn_support::*;

const INPUT: usize = 90;

/// What the loop did: transactions, the aborted one's records (flushed into the log before
/// the abort), and the group's committed offsets of the input at the end.
struct Run {
    rounds: usize,
    aborted_records: usize,
    committed: Vec<i64>,
}

async fn committed_of(c: &aio::Consumer, topic: &str) -> Vec<i64> {
    c.committed(&tps(topic))
        .await
        .unwrap()
        .into_iter()
        .map(|(_, o)| o.map_or(-1, |o| o.offset))
        .collect()
}

/// Consumes `input` and writes each record transformed to `output` in transactions that carry
/// the consumer's offsets; the first transaction is aborted (and its records read again).
async fn consume_transform_produce(bootstrap: &str, input: &str, output: &str) -> Run {
    let mut settings = configs::group_member_settings("aio-ctp");
    settings.extend([
        ("bootstrap.servers", bootstrap),
        ("isolation.level", "read_committed"),
        ("enable.auto.commit", "false"),
        ("max.poll.records", "20"),
    ]);
    let c = aio::Consumer::from_config(&configs::config(&settings)).unwrap();
    c.subscribe(&[input], None).unwrap();
    let p = aio::Producer::from_config(&configs::config(&transactional_settings(
        bootstrap, "aio-1",
    )))
    .unwrap();
    p.init_transactions(T).await.unwrap();
    let (mut rounds, mut aborted_records, mut consumed) = (0, 0, 0usize);
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumed < INPUT {
        assert!(Instant::now() < deadline, "consumed {consumed} of {INPUT}");
        let records = c
            .recv_batch_timeout(20, Duration::from_millis(200))
            .await
            .unwrap();
        if records.is_empty() {
            continue;
        }
        let before = committed_of(&c, input).await;
        p.begin_transaction().await.unwrap();
        let mut next: HashMap<TopicPartition, OffsetAndMetadata> = HashMap::new();
        let mut deliveries = Vec::with_capacity(records.len());
        for r in &records {
            let key = String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
            let out = ProducerRecord::new(output, "out")
                .with_key(key.replace("in-", "out-"))
                .with_partition(r.partition);
            deliveries.push(p.send(out).await.unwrap());
            next.insert(
                TopicPartition::new(input, r.partition),
                OffsetAndMetadata {
                    offset: r.offset + 1,
                    metadata: String::new(),
                },
            );
        }
        let group = c.group_metadata().expect("a group member");
        p.send_offsets_to_transaction(&next, &group, T)
            .await
            .unwrap();
        rounds += 1;
        if rounds == 1 {
            // In the log, then aborted: never read_committed, and its offsets not committed.
            p.flush(T).await.unwrap();
            p.abort_transaction(T).await.unwrap();
            for d in deliveries {
                d.await.expect("flushed before the abort: written");
            }
            aborted_records = records.len();
            assert_eq!(committed_of(&c, input).await, before, "after the abort");
            for tp in next.keys() {
                c.seek(tp, before[tp.partition as usize].max(0)).unwrap();
            }
            continue;
        }
        p.commit_transaction(T).await.unwrap();
        for d in deliveries {
            d.await.expect("a committed transaction's record");
        }
        let after = committed_of(&c, input).await;
        for (tp, o) in &next {
            assert_eq!(after[tp.partition as usize], o.offset, "after a commit");
        }
        consumed += records.len();
    }
    p.close(T).await.unwrap();
    let committed = committed_of(&c, input).await;
    c.close().await.unwrap();
    Run {
        rounds,
        aborted_records,
        committed,
    }
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn an_async_consume_transform_produce_loop_writes_each_input_once() {
    let _one = one_cluster();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    let (input, output) = ("aio-ctp-in", "aio-ctp-out");
    lagless::admin::create_topic(bootstrap, input, PARTITIONS, 1).unwrap();
    lagless::admin::create_topic(bootstrap, output, PARTITIONS, 1).unwrap();
    let plain = configs::producer(&[("bootstrap.servers", bootstrap)]);
    for i in 0..INPUT {
        let r = ProducerRecord::new(input, format!("{i}"))
            .with_key(format!("in-{i}"))
            .with_partition(i as i32 % PARTITIONS);
        plain.send(r).unwrap();
    }
    plain.close(T).unwrap();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = rt.block_on(consume_transform_produce(bootstrap, input, output));
    drop(rt);

    let probe = configs::consumer(&[("bootstrap.servers", bootstrap)]);
    let ends: Vec<i64> = probe
        .end_offsets(&tps(input), Some(T))
        .unwrap()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    probe.close(None).unwrap();
    let out = read_all(bootstrap, output, "read_committed");
    let every = read_all(bootstrap, output, "read_uncommitted");
    let mut keys: Vec<String> = out.values().flatten().cloned().collect();
    keys.sort();
    let mut want: Vec<String> = (0..INPUT).map(|i| format!("out-{i}")).collect();
    want.sort();
    println!(
        "{} transactions (the first aborted with {} records); committed offsets {:?}, end \
         offsets {ends:?}; output read_committed {}, read_uncommitted {}",
        run.rounds,
        run.aborted_records,
        run.committed,
        keys.len(),
        count(&every)
    );
    assert_eq!(run.committed, ends, "every input record's offset committed");
    assert_eq!(ends, vec![(INPUT as i64) / PARTITIONS as i64; 3]);
    assert_eq!(keys, want, "each input record once in the committed output");
    assert!(run.aborted_records > 0);
    assert_eq!(count(&every), INPUT + run.aborted_records);
}

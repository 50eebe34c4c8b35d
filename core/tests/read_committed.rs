//! `isolation.level=read_committed` against a real broker, with transactions written by the Java
//! client (tests/interop/java/InteropClient.java, the broker's own kafka-clients: lagless'
//! producer has no transactions).
//!
//! Three transactional producers write to a three-partition topic, every transaction spanning
//! the partitions: C (lz4) writes committed and aborted transactions and then holds one more
//! open; while it is open, A (gzip) and B (uncompressed) write theirs side by side, so that
//! transactions of two producers interleave in each partition, some aborted. A read_committed
//! consumer first stops at the last stable offset (C's open transaction): it has delivered
//! exactly the committed records below it, its position is the LSO, `end_offsets` and
//! `watermarks` say the LSO, so its lag is 0, while a read_uncommitted consumer's end offsets are
//! the high watermarks beyond. C then aborts; the read_committed consumer delivers exactly every
//! committed record, in order per partition, each once, and ends at the high watermark (lag 0).
//! A read_uncommitted consumer delivers every data record, aborted ones too, and no marker.
//!
//! A group member with recovery streams (`enable.parallel.rebalance`, KIP-333) takes the
//! partitions over from a commit at offset 0 while C's transaction is open: the backlog ends at
//! the LSO, the recovery stream delivers exactly the committed records below it, and the main
//! stream, from the LSO, exactly the committed records from there on once C aborted.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/java_client.rs"]
mod java_client;
#[path = "support/own_broker.rs"]
mod own_broker;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use java_client::JavaClient;
use lagless::{Consumer, OffsetAndMetadata, TopicPartition};
use own_broker::OwnBroker;

const PARTITIONS: i32 = 3;
const TOPIC: &str = "transactions";

/// A record a producer wrote: (offset, key), and whether it is in an aborted (or still open)
/// transaction.
type Written = (i64, String, bool);

/// What a consumer delivered: per partition, (offset, key) in the order delivered.
type Delivered = BTreeMap<i32, Vec<(i64, String)>>;

/// Starts a transactional Java producer of `count` records in transactions of `size` records,
/// every `abort_every`-th aborted, with `extra` arguments.
fn producer(
    name: &str,
    bootstrap: &str,
    count: usize,
    size: usize,
    abort_every: usize,
    compression: &str,
    extra: &[&str],
) -> JavaClient {
    let (count, size, abort_every) = (count.to_string(), size.to_string(), abort_every.to_string());
    let partitions = PARTITIONS.to_string();
    let prefix = format!("{name}-");
    let mut args = vec![
        "produce",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--count",
        &count,
        "--keyed",
        "--key-prefix",
        &prefix,
        "--partitions",
        &partitions,
        "--compression",
        compression,
        "--transaction-size",
        &size,
        "--abort-every",
        &abort_every,
        "--transactional-id",
        name,
    ];
    args.extend(extra);
    JavaClient::start(name, &args, &[], Box::new(|_| {}))
}

/// Waits until `j` printed the event `event` (or exited), at most `within`.
fn wait_event(j: &mut JavaClient, event: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if j.events().iter().any(|e| e["event"] == event) {
            return;
        }
        assert!(
            j.alive() && Instant::now() < deadline,
            "{}: no {event} event within {within:?}: {}",
            j.name,
            j.stderr_tail(20)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What `j` wrote, per partition.
fn written(j: &JavaClient) -> BTreeMap<i32, Vec<Written>> {
    let mut out: BTreeMap<i32, Vec<Written>> = BTreeMap::new();
    for v in j.lines().iter().filter(|v| v.get("event").is_none()) {
        out.entry(v["partition"].as_i64().unwrap() as i32)
            .or_default()
            .push((
                v["offset"].as_i64().unwrap(),
                v["key"].as_str().unwrap().to_string(),
                v["aborted"].as_bool().unwrap(),
            ));
    }
    out
}

fn tps() -> Vec<TopicPartition> {
    (0..PARTITIONS)
        .map(|p| TopicPartition::new(TOPIC, p))
        .collect()
}

fn consumer(bootstrap: &str, isolation: &str) -> Consumer {
    let c = configs::consumer(&[
        ("bootstrap.servers", bootstrap),
        ("isolation.level", isolation),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "100"),
        // Small fetches: aborted runs span several of them.
        ("max.partition.fetch.bytes", "1024"),
    ]);
    c.assign(&tps()).unwrap();
    c
}

/// A read_committed member of `group` with recovery streams, taking the partitions over from a
/// commit of offset 0 (made by a consumer of the group that assigns them and leaves).
fn recovery_member(bootstrap: &str, group: &str) -> Consumer {
    let committer = configs::consumer(&[
        ("bootstrap.servers", bootstrap),
        ("group.id", group),
        ("enable.auto.commit", "false"),
    ]);
    committer.assign(&tps()).unwrap();
    let zero: Vec<(TopicPartition, OffsetAndMetadata)> = tps()
        .into_iter()
        .map(|tp| {
            let o = OffsetAndMetadata {
                offset: 0,
                metadata: String::new(),
            };
            (tp, o)
        })
        .collect();
    committer.commit_sync(Some(&zero), None).unwrap();
    committer.close(None).unwrap();
    let mut settings = configs::group_member_settings(group);
    settings.extend([
        ("bootstrap.servers", bootstrap),
        ("isolation.level", "read_committed"),
        ("enable.auto.commit", "false"),
        ("enable.parallel.rebalance", "true"),
        ("parallel.rebalance.min.lag", "10"),
        ("fetch.max.wait.ms", "100"),
        ("max.partition.fetch.bytes", "1024"),
    ]);
    let c = configs::consumer(&settings);
    c.subscribe(&[TOPIC], None).unwrap();
    c
}

/// Polls the recovery member `m` into `got` (per stream, main false and recovery true; per
/// partition) until it owns the partitions, no recovery stream is left and its positions are
/// `ends`; returns the positions then. Panics after `within`.
fn read_member_to(
    m: &Consumer,
    got: &mut BTreeMap<bool, Delivered>,
    ends: &[i64],
    within: Duration,
) -> Vec<i64> {
    let deadline = Instant::now() + within;
    loop {
        for r in m.poll(Duration::from_millis(100)).unwrap() {
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            got.entry(r.from_recovery)
                .or_default()
                .entry(r.partition)
                .or_default()
                .push((r.offset, key));
        }
        if m.assignment().len() == tps().len() {
            let positions: Vec<i64> = tps()
                .iter()
                .map(|tp| m.position(tp, Some(Duration::from_secs(10))).unwrap())
                .collect();
            let recovering = tps().iter().any(|tp| m.recovery_active(tp).unwrap());
            if positions == ends && !recovering {
                return positions;
            }
        }
        assert!(
            Instant::now() < deadline,
            "member: assignment {:?}, not at {ends:?} with no recovery left after {within:?}",
            m.assignment()
        );
    }
}

fn end_offsets(c: &Consumer) -> Vec<i64> {
    let ends = c
        .end_offsets(&tps(), Some(Duration::from_secs(10)))
        .unwrap();
    ends.into_iter().map(|(_, o)| o).collect()
}

/// Polls `c` into `got` (per partition: (offset, key)) until its positions are `ends`; returns
/// the positions then. Panics after `within`.
fn read_to(c: &Consumer, got: &mut Delivered, ends: &[i64], within: Duration) -> Vec<i64> {
    let deadline = Instant::now() + within;
    loop {
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            got.entry(r.partition).or_default().push((r.offset, key));
        }
        let positions: Vec<i64> = tps()
            .iter()
            .map(|tp| c.position(tp, Some(Duration::from_secs(10))).unwrap())
            .collect();
        if positions == ends {
            return positions;
        }
        assert!(
            Instant::now() < deadline,
            "positions {positions:?}, not {ends:?}, after {within:?}; delivered per partition: {:?}",
            got.iter().map(|(p, r)| (*p, r.len())).collect::<Vec<_>>()
        );
    }
}

/// The (offset, key) of the records of `all` that `keep` keeps, per partition, in offset order.
fn expected(all: &[&BTreeMap<i32, Vec<Written>>], keep: impl Fn(&Written) -> bool) -> Delivered {
    let mut out: Delivered = BTreeMap::new();
    for w in all {
        for (p, records) in w.iter() {
            let kept = records.iter().filter(|r| keep(r));
            out.entry(*p)
                .or_default()
                .extend(kept.map(|(o, k, _)| (*o, k.clone())));
        }
    }
    for records in out.values_mut() {
        records.sort();
    }
    out
}

fn count(m: &Delivered) -> usize {
    m.values().map(Vec::len).sum()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn read_committed_delivers_exactly_the_committed_records_and_stops_at_the_lso() {
    let started = Instant::now();
    let broker = OwnBroker::start(1);
    let bootstrap = broker.bootstrap.as_str();
    lagless::admin::create_topic(bootstrap, TOPIC, PARTITIONS, 1).unwrap();

    // C: 90 records in transactions of 9 (3 per partition), every third aborted, then 6 records
    // (2 per partition) in a transaction it holds open.
    let mut c = producer("c", bootstrap, 90, 9, 3, "lz4", &["--hold-open", "6"]);
    wait_event(&mut c, "holding", Duration::from_secs(60));
    // A and B side by side, behind C's open transaction.
    let mut a = producer("a", bootstrap, 450, 15, 3, "gzip", &[]);
    let mut b = producer("b", bootstrap, 300, 7, 2, "none", &[]);
    wait_event(&mut a, "produced", Duration::from_secs(60));
    wait_event(&mut b, "produced", Duration::from_secs(60));
    let (wa, wb) = (written(&a), written(&b));
    let wc_open = written(&c);
    let open_records: usize = wc_open.values().map(|r| r.len()).sum();
    assert_eq!(open_records, 96, "C's 90 records and its 6 open ones");
    // The LSO of each partition: the first offset of C's open transaction there.
    let open_lines: Vec<(i32, i64)> = c
        .lines()
        .iter()
        .filter(|v| v["open"] == true)
        .map(|v| {
            (
                v["partition"].as_i64().unwrap() as i32,
                v["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(open_lines.len(), 6);
    let lso: Vec<i64> = (0..PARTITIONS)
        .map(|p| {
            open_lines
                .iter()
                .filter(|(q, _)| *q == p)
                .map(|(_, o)| *o)
                .min()
                .expect("an open record in every partition")
        })
        .collect();

    // Phase 1: C's transaction open. read_committed ends at the LSO.
    let rc = consumer(bootstrap, "read_committed");
    let ru = consumer(bootstrap, "read_uncommitted");
    assert_eq!(
        end_offsets(&rc),
        lso,
        "read_committed end offsets are the LSOs"
    );
    let high: Vec<i64> = end_offsets(&ru);
    for p in 0..PARTITIONS as usize {
        assert!(
            high[p] > lso[p],
            "A and B wrote past the LSO: {high:?} {lso:?}"
        );
        let w = rc
            .watermarks(&tps()[p], Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(w.high, lso[p]);
    }
    let mut got_rc = BTreeMap::new();
    let positions = read_to(&rc, &mut got_rc, &lso, Duration::from_secs(30));
    // Nothing more arrives while the transaction is open: a few more polls deliver nothing.
    for _ in 0..5 {
        assert!(rc.poll(Duration::from_millis(100)).unwrap().is_empty());
    }
    let below_lso = expected(&[&wa, &wb, &wc_open], |(_, _, aborted)| !aborted)
        .into_iter()
        .map(|(p, r)| {
            let r: Vec<(i64, String)> = r
                .into_iter()
                .filter(|(o, _)| *o < lso[p as usize])
                .collect();
            (p, r)
        })
        .collect::<BTreeMap<_, _>>();
    assert_eq!(got_rc, below_lso);
    assert_eq!(positions, end_offsets(&rc), "lag 0 at the LSO");
    let phase1 = count(&got_rc);
    // Only C's committed records lie below its open transaction: 7 of its 10 transactions.
    assert_eq!(phase1, 63);

    // A takeover from offset 0 meanwhile: the backlog ends at the LSO, not the high watermark.
    let member = recovery_member(bootstrap, "takeover");
    let mut got_member = BTreeMap::new();
    read_member_to(&member, &mut got_member, &lso, Duration::from_secs(60));
    assert_eq!(
        got_member.get(&true),
        Some(&below_lso),
        "the recovery stream's records"
    );
    assert_eq!(
        got_member.get(&false),
        None,
        "nothing for the main stream yet"
    );

    // Phase 2: C aborts. read_committed reads on to the high watermark.
    c.stop(Duration::from_secs(30));
    assert!(
        c.events().iter().any(|e| e["event"] == "aborted"),
        "C aborted its open transaction: {}",
        c.stderr_tail(20)
    );
    let wc = written(&c);
    let high = end_offsets(&ru);
    assert_eq!(
        end_offsets(&rc),
        high,
        "no transaction open: LSO = high watermark"
    );
    let positions = read_to(&rc, &mut got_rc, &high, Duration::from_secs(30));
    let committed = expected(&[&wa, &wb, &wc], |(_, _, aborted)| !aborted);
    assert_eq!(
        got_rc, committed,
        "exactly the committed records, in order, once"
    );
    assert_eq!(positions, end_offsets(&rc), "lag 0");
    read_member_to(&member, &mut got_member, &high, Duration::from_secs(30));
    let from_lso: Delivered = committed
        .iter()
        .map(|(p, r)| {
            let r = r.iter().filter(|(o, _)| *o >= lso[*p as usize]).cloned();
            (*p, r.collect())
        })
        .collect();
    assert_eq!(
        got_member.get(&false),
        Some(&from_lso),
        "the main stream's records"
    );
    assert_eq!(
        got_member.get(&true),
        Some(&below_lso),
        "no more recovery records"
    );
    let (n_recovery, n_main) = (count(&below_lso), count(&from_lso));
    assert_eq!(n_recovery + n_main, count(&committed));

    // read_uncommitted: every data record, aborted and once-open ones too.
    let mut got_ru = BTreeMap::new();
    read_to(&ru, &mut got_ru, &high, Duration::from_secs(30));
    let all = expected(&[&wa, &wb, &wc], |_| true);
    assert_eq!(got_ru, all);

    let (n_committed, n_all) = (count(&committed), count(&all));
    // A: 450 records, 10 of 30 transactions aborted; B: 300, 21 of 43 (the last one of 6
    // records); C: 90, 3 of 10, and its 6 open ones aborted.
    assert_eq!(n_all, 450 + 300 + 96);
    assert_eq!(n_committed, (450 - 150) + (300 - 147) + (90 - 27));
    let markers: i64 = high.iter().sum::<i64>() - n_all as i64;
    eprintln!(
        "read_committed: {phase1} records below the LSOs {lso:?} while C's transaction was open, \
         {n_committed} of {n_all} data records in all ({} aborted), positions {positions:?} = \
         end offsets (lag 0), {markers} transaction markers skipped; read_uncommitted: {}; \
         recovery member: {n_recovery} from the recovery stream below the LSOs, {n_main} from \
         the main stream; {:.1} s",
        n_all - n_committed,
        count(&got_ru),
        started.elapsed().as_secs_f64()
    );
    drop(member);
    drop(rc);
    drop(ru);
    drop(broker);
}

//! Incremental fetch sessions (KIP-227) against a real broker, through a proxy that counts the
//! bytes: an idle consumer of many partitions no longer sends and receives every partition with
//! every Fetch, records produced to any partition of the session still come (the broker fetches
//! the partitions a request leaves out at the offsets it holds), and a broker restart (which
//! forgets every session) costs nothing but a full Fetch.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/proxy.rs"]
mod proxy;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::{Consumer, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;
use proxy::Proxy;

const PARTITIONS: i32 = 200;

/// Produces `per_partition` records to every partition; their values say (round, partition, i).
fn produce_round(bootstrap: &str, topic: &str, round: usize, per_partition: usize) {
    let p = configs::producer(&[("bootstrap.servers", bootstrap), ("linger.ms", "5")]);
    let deliveries: Vec<_> = (0..PARTITIONS)
        .flat_map(|part| (0..per_partition).map(move |i| (part, i)))
        .map(|(part, i)| {
            p.send(ProducerRecord::new(topic, format!("r{round}-p{part}-{i}")).with_partition(part))
                .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().unwrap();
    }
}

/// Reads until every partition's position is `want` (60 s at most); the offsets read per
/// partition are added to `read`.
fn read_to(c: &Consumer, topic: &str, want: i64, read: &mut BTreeMap<i32, Vec<i64>>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for r in c.poll(Duration::from_millis(200)).unwrap() {
            read.entry(r.partition).or_default().push(r.offset);
        }
        let behind = (0..PARTITIONS)
            .filter(|&p| {
                read.get(&p).and_then(|o| o.last()).map_or(0, |o| o + 1) < want
                    && c.position(&TopicPartition::new(topic, p), Some(Duration::from_secs(5)))
                        .unwrap()
                        < want
            })
            .count();
        if behind == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{behind} partitions never reached offset {want}"
        );
    }
}

/// Polls for `idle` with nothing to read; the bytes the proxy forwarded meanwhile.
///
/// Polls 600 ms first, uncounted: the partitions whose records were buffered are left out of the
/// session's requests until those records are delivered, then come back in one request listing
/// them all (a full request's worth of bytes), which would otherwise fall into the count.
fn idle_bytes(c: &Consumer, proxy: &Proxy, idle: Duration) -> (usize, usize) {
    let settle = Instant::now() + Duration::from_millis(600);
    while Instant::now() < settle {
        assert!(c.poll(Duration::from_millis(200)).unwrap().is_empty());
    }
    let (req0, ans0) = proxy.forwarded(0);
    let until = Instant::now() + idle;
    while Instant::now() < until {
        assert!(c.poll(Duration::from_millis(200)).unwrap().is_empty());
    }
    let (req1, ans1) = proxy.forwarded(0);
    (req1 - req0, ans1 - ans0)
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with -- --include-ignored"]
fn an_idle_consumer_of_many_partitions_sends_only_what_changed_and_misses_no_record() {
    let broker = OwnBroker::start_proxied(1, 1);
    let (advertised, bound) = broker.proxied[0][0];
    let proxy = Proxy::start(&[(advertised, format!("127.0.0.1:{bound}"))]);
    let b = proxy.bootstrap();
    let topic = "fetch-sessions";
    lagless::admin::create_topic(&b, topic, PARTITIONS, 1).unwrap();
    let (c, _) = configs::assigned_all(&b, topic, PARTITIONS);
    let mut read = BTreeMap::new();

    produce_round(&b, topic, 0, 3);
    read_to(&c, topic, 3, &mut read);
    // Idle at the log end for 3 s, a Fetch per fetch.max.wait.ms (500 ms). A full Fetch of 200
    // partitions is about 6 KB asked and 10 KB answered; in a session, tens of bytes.
    let (asked, answered) = idle_bytes(&c, &proxy, Duration::from_secs(3));
    println!("idle 3 s, 200 partitions: {asked} bytes asked, {answered} answered");
    assert!(
        asked < 3_000 && answered < 3_000,
        "idle fetches are full ones: {asked} bytes asked, {answered} answered in 3 s"
    );

    // Records to every partition, which the idle requests left out: all come.
    produce_round(&b, topic, 1, 2);
    read_to(&c, topic, 5, &mut read);

    // A restarted broker knows no session: the next incremental Fetch is refused and a full one
    // follows; nothing is lost and the consumer is idle-cheap again.
    broker.restart(1, Some(Duration::from_secs(1)));
    produce_round(&b, topic, 2, 1);
    read_to(&c, topic, 6, &mut read);
    let (asked, answered) = idle_bytes(&c, &proxy, Duration::from_secs(3));
    println!("after the restart, idle 3 s: {asked} bytes asked, {answered} answered");
    assert!(
        asked < 3_000 && answered < 3_000,
        "no session after the restart: {asked} bytes asked, {answered} answered in 3 s"
    );

    // Every offset once, in order, per partition.
    for p in 0..PARTITIONS {
        assert_eq!(
            read.get(&p).cloned().unwrap_or_default(),
            (0..6).collect::<Vec<i64>>(),
            "partition {p}"
        );
    }
}

/// Closing a consumer ends its fetch session on the broker (KIP-227's final epoch), as the Java
/// consumer does; otherwise the session keeps a slot of the broker's cache for
/// `min.incremental.fetch.session.eviction.ms` (2 minutes), and while the cache is full new
/// consumers get no session: every idle Fetch of theirs lists all their partitions.
///
/// The broker here has 8 slots, one in each of its 8 cache shards, which new sessions take in
/// turn: 8 consumers closed without ending their sessions would fill them all, and the ninth
/// would fetch in full.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with -- --include-ignored"]
fn a_closed_consumer_gives_its_fetch_session_back_to_the_broker() {
    let broker = OwnBroker::start_with(
        1,
        &[
            "--proxied-listeners",
            "1",
            "--broker-property",
            "max.incremental.fetch.session.cache.slots=8",
        ],
    );
    let (advertised, bound) = broker.proxied[0][0];
    let proxy = Proxy::start(&[(advertised, format!("127.0.0.1:{bound}"))]);
    let b = proxy.bootstrap();
    let topic = "fetch-sessions-closed";
    lagless::admin::create_topic(&b, topic, PARTITIONS, 1).unwrap();
    produce_round(&b, topic, 0, 1);
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    for i in 0..9 {
        let c = configs::consumer(&[
            ("bootstrap.servers", b.as_str()),
            ("auto.offset.reset", "earliest"),
            ("fetch.max.wait.ms", "500"),
            ("client.id", &format!("closes-its-session-{i}")),
        ]);
        c.assign(&tps).unwrap();
        let mut read = BTreeMap::new();
        read_to(&c, topic, 1, &mut read);
        // Two idle Fetches (fetch.max.wait.ms 500): some 13 KB each way without a session.
        let (asked, answered) = idle_bytes(&c, &proxy, Duration::from_secs(1));
        println!("consumer {i}, idle 1 s: {asked} bytes asked, {answered} answered");
        assert!(
            asked < 1_500 && answered < 1_500,
            "consumer {i} got no fetch session (the cache is full of closed consumers' \
             sessions?): {asked} bytes asked, {answered} answered in 1 s"
        );
        for p in 0..PARTITIONS {
            assert_eq!(
                read.get(&p).cloned().unwrap_or_default(),
                [0],
                "partition {p}"
            );
        }
        let closing = Instant::now();
        c.close(None).unwrap();
        println!("consumer {i} closed in {:?}", closing.elapsed());
    }
}

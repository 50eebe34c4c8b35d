//! Slow and stalled brokers. Each test starts a one-node cluster of its own with a proxied
//! listener (tests/kafka_broker.py `--proxied-listeners 1`) and puts the test's TCP proxy
//! (support/proxy.rs) in front of it. Clients bootstrap at the proxy, and since the broker
//! advertises the proxy's port on that listener, every connection they make goes through it.
//! Topics are created and records produced on the broker's own PLAINTEXT listener.
//!
//! - a broker that accepts connections and never answers: every call returns within its
//!   deadline with an error naming the broker or the operation;
//! - answers later than `request.timeout.ms`: calls fail in time, and once answers come in time
//!   again every record is read, once;
//! - connections cut inside the ApiVersions answer, inside the Metadata answer and inside a Fetch
//!   answer: no panic, reconnections paced by `reconnect.backoff.ms`, nothing lost afterwards;
//! - 100 consumers made, used against a stalled or cutting broker and closed leave no file
//!   descriptor and no thread behind.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/wait.rs"]
mod wait;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use lagless::{Consumer, OffsetAndMetadata, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;
use proxy::{Mode, Proxy};
use wait::wait_until;

/// The leak test counts the whole process's threads and descriptors: it runs alone (write lock),
/// the other tests share (read lock).
static ALONE: RwLock<()> = RwLock::new(());

/// How much later than its deadline a call may return: scheduling on a loaded two-core machine.
const MARGIN: Duration = Duration::from_secs(1);

/// A broker with one proxied listener and a proxy in front of it, passing traffic.
struct Setup {
    broker: OwnBroker,
    proxy: Proxy,
    /// The proxy's address: what clients bootstrap at, and what errors should name.
    address: String,
}

fn setup() -> Setup {
    let broker = OwnBroker::start_proxied(1, 1);
    let (advertised, bound) = broker.proxied[0][0];
    let proxy = Proxy::start(&[(advertised, format!("127.0.0.1:{bound}"))]);
    let address = proxy.bootstrap();
    Setup {
        broker,
        proxy,
        address,
    }
}

fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Consumer {
    let base = [
        ("bootstrap.servers", bootstrap),
        ("client.id", "stalled-brokers"),
        ("auto.offset.reset", "earliest"),
    ];
    configs::consumer(&[&base[..], extra].concat())
}

fn new_topic(broker: &OwnBroker, partitions: i32) -> String {
    let name = format!(
        "stalled-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    lagless::admin::create_topic(&broker.bootstrap, &name, partitions, 1).expect("create topic");
    name
}

/// Writes `count` records of 100 bytes to partition 0 of `topic`, directly to the broker.
fn produce(broker: &OwnBroker, topic: &str, count: usize) {
    let p = configs::producer(&[("bootstrap.servers", broker.bootstrap.as_str())]);
    let deliveries: Vec<_> = (0..count)
        .map(|i| {
            p.send(ProducerRecord::new(topic, format!("{i:0100}")).with_partition(0))
                .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().expect("delivery");
    }
    p.close(Duration::from_secs(5)).unwrap();
}

/// Runs `call`, returning what it returned and how long it took; prints both beside `deadline`.
fn timed<T>(what: &str, deadline: Duration, call: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let r = call();
    let took = start.elapsed();
    eprintln!(
        "{what}: {} ms (deadline {} ms)",
        took.as_millis(),
        deadline.as_millis()
    );
    (r, took)
}

/// A call against a broker that does not answer: it fails, within `deadline` + [`MARGIN`], and
/// its error says what timed out or which broker could not be reached.
fn assert_fails_in_time<T: std::fmt::Debug>(
    what: &str,
    deadline: Duration,
    address: &str,
    call: impl FnOnce() -> lagless::Result<T>,
) -> lagless::Error {
    let (r, took) = timed(what, deadline, call);
    let e = r.expect_err(&format!("{what} succeeded against a stalled broker"));
    eprintln!("  {what}: {e}");
    assert!(
        took <= deadline + MARGIN,
        "{what} took {took:?}, deadline {deadline:?}: {e}"
    );
    assert!(
        e.is_retriable(),
        "{what}: a stalled broker is a retriable error: {e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains(address) || text.contains("within") || text.contains("did not complete"),
        "{what}: the error names neither the broker ({address}) nor the deadline: {text}"
    );
    e
}

#[test]
fn the_proxy_decides_from_its_table() {
    proxy::check_release_table();
}

#[test]
fn reconnects_in_a_window_are_bounded_by_the_growing_backoff() {
    // Waits of 160, 320, 640, 800, 800, 800, 800 ms fit in 5 s, the next does not.
    assert_eq!(most_attempts(Duration::from_secs(5), 200, 1000), 8);
    assert_eq!(most_attempts(Duration::from_millis(100), 200, 1000), 1);
    assert_eq!(most_attempts(Duration::from_secs(1), 100, 100), 13);
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_broker_that_never_answers_fails_every_call_within_its_deadline() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    let topic = new_topic(&s.broker, 1);
    produce(&s.broker, &topic, 10);
    let tp = TopicPartition::new(&topic, 0);
    let request_timeout = "2000";
    let api_timeout = Duration::from_millis(3000);
    let settings = [
        ("request.timeout.ms", request_timeout),
        ("default.api.timeout.ms", "3000"),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "1000"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
    ];
    let group = format!("{topic}-group");
    let mut group_settings = settings.to_vec();
    group_settings.push(("group.id", &group));

    // A member that joined while the broker answered: its open connections freeze.
    let member = consumer(&s.address, &group_settings);
    member.subscribe(&[&topic], None).unwrap();
    wait_until(
        "the member's first records",
        Duration::from_secs(60),
        || !member.poll(Duration::from_millis(100)).unwrap().is_empty(),
    );
    member.commit_sync(None, None).unwrap();

    // A producer that knows the partition's leader: its deliveries then fail within
    // delivery.timeout.ms, and flush returns by then.
    let delivery_timeout = Duration::from_millis(4000);
    let p = configs::producer(&[
        ("bootstrap.servers", s.address.as_str()),
        ("request.timeout.ms", request_timeout),
        ("delivery.timeout.ms", "4000"),
        ("linger.ms", "0"),
    ]);
    p.send(ProducerRecord::new(&topic, "before").with_partition(0))
        .unwrap()
        .wait()
        .expect("a delivery while the broker answers");

    s.proxy.set(0, Mode::Blackhole);
    let address = s.address.as_str();

    // A consumer made now: every connection it opens hangs after the TCP handshake.
    let fresh = consumer(&s.address, &group_settings);
    fresh.assign(std::slice::from_ref(&tp)).unwrap();
    assert_fails_in_time("fresh: partitions_for", api_timeout, address, || {
        fresh.partitions_for(&topic, None)
    });
    assert_fails_in_time("fresh: position", api_timeout, address, || {
        fresh.position(&tp, None)
    });
    assert_fails_in_time("fresh: committed", api_timeout, address, || {
        fresh.committed(std::slice::from_ref(&tp), None)
    });
    let offsets = [(
        tp.clone(),
        OffsetAndMetadata {
            offset: 1,
            metadata: String::new(),
        },
    )];
    assert_fails_in_time("fresh: commit_sync", api_timeout, address, || {
        fresh.commit_sync(Some(&offsets), None)
    });
    assert_fails_in_time("fresh: end_offsets", api_timeout, address, || {
        fresh.end_offsets(std::slice::from_ref(&tp), None)
    });
    // Deadlines shorter than request.timeout.ms bound the connection setup (ApiVersions) too.
    let short = Duration::from_millis(500);
    let another = consumer(&s.address, &group_settings);
    another.assign(std::slice::from_ref(&tp)).unwrap();
    assert_fails_in_time("another: partitions_for (500 ms)", short, address, || {
        another.partitions_for(&topic, Some(short))
    });
    assert_fails_in_time("another: committed (500 ms)", short, address, || {
        another.committed(std::slice::from_ref(&tp), Some(short))
    });
    let (r, took) = timed("another: close (500 ms)", short, || {
        another.close(Some(short))
    });
    eprintln!("  another: close: {r:?}");
    assert!(took <= short + MARGIN, "close took {took:?}");
    let (r, took) = timed("fresh: close", api_timeout, || fresh.close(None));
    eprintln!("  fresh: close: {r:?}");
    assert!(took <= api_timeout + MARGIN, "close took {took:?}");

    // The member, on frozen connections.
    assert_fails_in_time("member: committed", api_timeout, address, || {
        member.committed(std::slice::from_ref(&tp), None)
    });
    assert_fails_in_time("member: commit_sync", api_timeout, address, || {
        member.commit_sync(Some(&offsets), None)
    });
    assert_fails_in_time(
        "member: partitions_for (new topic)",
        api_timeout,
        address,
        || member.partitions_for("no-such-topic-while-stalled", None),
    );
    // poll() returns within its timeout, records or not.
    let poll_timeout = Duration::from_millis(3000);
    let (r, took) = timed("member: poll", poll_timeout, || member.poll(poll_timeout));
    eprintln!("  member: poll: {:?}", r.as_ref().map(|v| v.len()));
    assert!(took <= poll_timeout + MARGIN, "poll took {took:?}");
    let (r, took) = timed("member: close", api_timeout, || member.close(None));
    eprintln!("  member: close: {r:?}");
    assert!(took <= api_timeout + MARGIN, "close took {took:?}");

    let (sent, took) = timed("producer: send", delivery_timeout, || {
        p.send(ProducerRecord::new(&topic, "stalled").with_partition(0))
    });
    assert!(took <= delivery_timeout + MARGIN, "send took {took:?}");
    if let Ok(delivery) = sent {
        let (r, took) = timed("producer: flush", delivery_timeout, || {
            p.flush(delivery_timeout + MARGIN)
        });
        eprintln!("  producer: flush: {r:?}");
        assert!(took <= delivery_timeout + MARGIN, "flush took {took:?}");
        assert_fails_in_time("producer: delivery", delivery_timeout, address, || {
            delivery.wait()
        });
    } else {
        eprintln!("  producer: send: {:?}", sent.err());
    }
    let (_, took) = timed("producer: close", Duration::from_secs(3), || {
        p.close(Duration::from_secs(3))
    });
    assert!(
        took <= Duration::from_secs(3) + MARGIN,
        "producer close took {took:?}"
    );
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn answers_later_than_the_request_timeout_fail_in_time_then_every_record_comes_once() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    let topic = new_topic(&s.broker, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce(&s.broker, &topic, 100);
    let c = consumer(
        &s.address,
        &[
            ("request.timeout.ms", "1500"),
            ("default.api.timeout.ms", "2500"),
            ("reconnect.backoff.ms", "100"),
            ("reconnect.backoff.max.ms", "1000"),
            ("fetch.max.wait.ms", "100"),
        ],
    );
    c.assign(std::slice::from_ref(&tp)).unwrap();
    // Half the records read on time...
    let mut seen = BTreeSet::new();
    wait_until("the first records", Duration::from_secs(30), || {
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            assert!(seen.insert(r.offset), "offset {} twice", r.offset);
        }
        !seen.is_empty()
    });
    // ... then every answer comes 3 s late: twice the request timeout.
    s.proxy.set(0, Mode::Delay(Duration::from_millis(3000)));
    produce(&s.broker, &topic, 100);
    let deadline = Duration::from_millis(2500);
    assert_fails_in_time("delayed: end_offsets", deadline, &s.address, || {
        c.end_offsets(std::slice::from_ref(&tp), None)
    });
    assert_fails_in_time("delayed: partitions_for", deadline, &s.address, || {
        c.partitions_for("no-such-topic-while-delayed", None)
    });
    for _ in 0..10 {
        let (r, took) = timed("delayed: poll", Duration::from_millis(500), || {
            c.poll(Duration::from_millis(500))
        });
        assert!(
            took <= Duration::from_millis(500) + MARGIN,
            "poll took {took:?}"
        );
        for r in r.unwrap_or_default() {
            assert!(seen.insert(r.offset), "offset {} twice", r.offset);
        }
    }
    s.proxy.set(0, Mode::Pass);
    wait_until(
        "every record after the delay",
        Duration::from_secs(60),
        || {
            if let Ok(records) = c.poll(Duration::from_millis(200)) {
                for r in records {
                    assert!(seen.insert(r.offset), "offset {} twice", r.offset);
                }
            }
            seen.len() >= 200
        },
    );
    assert_eq!(seen, (0..200).collect::<BTreeSet<i64>>());
    c.close(None).unwrap();
}

/// The size of the broker's ApiVersions v3 answer (length prefix included), as a fresh
/// connection gets it: the first bytes every proxied connection receives.
fn api_versions_answer_len(bound_port: u16) -> usize {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", bound_port)).unwrap();
    let mut body = Vec::new();
    body.extend(18i16.to_be_bytes()); // ApiVersions
    body.extend(3i16.to_be_bytes());
    body.extend(1i32.to_be_bytes()); // correlation id
    body.extend(1i16.to_be_bytes()); // client id "x"
    body.push(b'x');
    body.push(0); // header tags
    body.extend([8, b'l', b'a', b'g', b'l', b'e', b's', b's']); // compact "lagless"
    body.extend([2, b'0']); // compact "0"
    body.push(0); // body tags
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    4 + i32::from_be_bytes(len) as usize
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn connections_cut_mid_answer_reconnect_with_backoff_and_lose_nothing() {
    let _shared = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    let topic = new_topic(&s.broker, 1);
    let tp = TopicPartition::new(&topic, 0);
    produce(&s.broker, &topic, 300);
    let api_versions = api_versions_answer_len(s.broker.proxied[0][0].1);
    eprintln!("ApiVersions answer: {api_versions} bytes");
    let backoff_ms = 200u64;
    let backoff_max_ms = 1000u64;
    let cuts = [
        ("inside the ApiVersions answer", 10),
        ("inside the Metadata answer", api_versions + 30),
        // Metadata, ListOffsets and the start of a Fetch answer of 30 KB of records.
        ("inside a Fetch answer", api_versions + 8000),
    ];
    for (where_, cut) in cuts {
        s.proxy.set(0, Mode::CutAfter(cut));
        let c = consumer(
            &s.address,
            &[
                ("request.timeout.ms", "2000"),
                ("default.api.timeout.ms", "3000"),
                ("reconnect.backoff.ms", "200"),
                ("reconnect.backoff.max.ms", "1000"),
                ("retry.backoff.ms", "100"),
                ("retry.backoff.max.ms", "1000"),
            ],
        );
        c.assign(std::slice::from_ref(&tp)).unwrap();
        let window = Duration::from_secs(5);
        let before = s.proxy.accepted(0);
        let start = Instant::now();
        let mut errors = BTreeSet::new();
        let mut delivered = 0usize;
        while start.elapsed() < window {
            match c.poll(Duration::from_millis(200)) {
                Ok(records) => delivered += records.len(),
                Err(e) => {
                    errors.insert(e.to_string());
                }
            }
        }
        let accepted = s.proxy.accepted(0) - before;
        // Per connection slot (the bootstrap entry and broker 1's default lane, the only ones a
        // consumer without a group opens): one attempt, then one after each backoff wait. A
        // connection cut before it served a request is a failure like one never made, so the
        // waits grow: each at least 0.8 x min(backoff x 2^n, max).
        let bound = 2 * most_attempts(window, backoff_ms, backoff_max_ms);
        eprintln!(
            "cut {where_} ({cut} bytes): {accepted} connections in {window:?} (bound {bound}, \
             backoff {backoff_ms}..{backoff_max_ms} ms), {delivered} records, errors: {errors:?}"
        );
        assert!(
            accepted <= bound,
            "cut {where_}: {accepted} connections in {window:?}: a reconnect storm"
        );
        assert!(accepted >= 2, "cut {where_}: the client stopped trying");
        // A call that needs the broker says what failed, within its deadline.
        let (r, took) = timed("cut: end_offsets", Duration::from_millis(1500), || {
            c.end_offsets(std::slice::from_ref(&tp), Some(Duration::from_millis(1500)))
        });
        eprintln!("  cut {where_}: end_offsets: {r:?}");
        assert!(
            took <= Duration::from_millis(1500) + MARGIN,
            "end_offsets took {took:?}"
        );
        if where_ != "inside a Fetch answer" {
            let e = r.expect_err("end_offsets through connections cut before any answer");
            assert!(e.is_retriable(), "{e:?}");
        }
        if where_ != "inside a Fetch answer" {
            assert_eq!(
                delivered, 0,
                "cut {where_}: records came through a cut connection"
            );
        }
        s.proxy.set(0, Mode::Pass);
        let mut seen = BTreeSet::new();
        // What came before the cut (a Fetch cut after some records' answers) counts too: the
        // position moved past them.
        let position_before = delivered as i64;
        wait_until(
            "every record after the cuts",
            Duration::from_secs(60),
            || {
                if let Ok(records) = c.poll(Duration::from_millis(200)) {
                    for r in records {
                        assert!(seen.insert(r.offset), "offset {} twice", r.offset);
                    }
                }
                position_before + seen.len() as i64 >= 300
            },
        );
        assert_eq!(
            seen,
            (position_before..300).collect::<BTreeSet<i64>>(),
            "cut {where_}"
        );
        c.close(None).unwrap();
    }
}

/// The most connection attempts one slot makes in `window` with reconnect backoff
/// `initial_ms` doubling to `max_ms`, every wait the shortest its jitter allows (0.8 x).
fn most_attempts(window: Duration, initial_ms: u64, max_ms: u64) -> usize {
    let (mut attempts, mut spent, mut failures) = (1, 0u64, 0u32);
    loop {
        let wait = (initial_ms << failures.min(20)).min(max_ms) * 8 / 10;
        if spent + wait > window.as_millis() as u64 {
            return attempts;
        }
        spent += wait;
        attempts += 1;
        failures += 1;
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
#[ignore = "needs a Kafka broker (starts its own)"]
fn a_hundred_consumers_against_a_stalled_broker_leave_nothing_behind() {
    let s = setup();
    let topic = new_topic(&s.broker, 1);
    let tp = TopicPartition::new(&topic, 0);
    // The other tests of this binary make consumers and threads too: count alone.
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    let cycle = |i: usize| {
        // Half the cycles against a broker that never answers, half against one whose every
        // connection is cut inside the ApiVersions answer.
        s.proxy.set(
            0,
            if i.is_multiple_of(2) {
                Mode::Blackhole
            } else {
                Mode::CutAfter(10)
            },
        );
        let c = consumer(
            &s.address,
            &[
                ("request.timeout.ms", "300"),
                ("default.api.timeout.ms", "300"),
                ("reconnect.backoff.ms", "50"),
                ("reconnect.backoff.max.ms", "200"),
                ("group.id", "stalled-leaks"),
            ],
        );
        c.assign(std::slice::from_ref(&tp)).unwrap();
        let (r, took) = timed("cycle: position", Duration::from_millis(300), || {
            c.position(&tp, None)
        });
        assert!(r.is_err(), "position succeeded against a stalled broker");
        assert!(
            took <= Duration::from_millis(300) + MARGIN,
            "position took {took:?}"
        );
        if i.is_multiple_of(3) {
            c.close(None).ok();
        }
        // Otherwise dropped without close().
    };
    // One cycle first: what is made once per process (the log subscriber, thread-local random
    // generators, the proxy's first connection task) is not a leak.
    cycle(0);
    wait_until(
        "the proxy's connections closed",
        Duration::from_secs(10),
        || s.proxy.open(0) == 0,
    );
    let (fds, tasks) = (open_fds(), threads());
    let start = Instant::now();
    for i in 1..=100 {
        cycle(i);
    }
    let took = start.elapsed();
    // The consumers' runtimes stop in the background after a drop; the proxy closes its side of
    // each connection when the client's side closes. Both take a moment.
    let start = Instant::now();
    loop {
        let now = (s.proxy.open(0), open_fds(), threads());
        if now.0 == 0 && now.1 <= fds && now.2 <= tasks {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "after 100 cycles and 15 s: {} proxied connections open, fds {fds} -> {}, \
             threads {tasks} -> {}",
            now.0,
            now.1,
            now.2
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "100 cycles in {took:?}: fds {fds} -> {}, threads {tasks} -> {} (settled in {:?})",
        open_fds(),
        threads(),
        start.elapsed()
    );
}

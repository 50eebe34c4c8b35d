//! Errors a user meets: configuration mistakes (named, with a suggestion or the expected form),
//! unknown topics, an unreachable cluster (bounded by the call's timeout, never a hang), and
//! `auto.offset.reset=none` without a committed offset.
mod support;

use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Error, ProducerRecord, TopicPartition};
use support::*;

fn config_error(key: &str, value: &str) -> (String, String) {
    match Config::new().set(key, value) {
        Err(Error::Config { key, message }) => (key, message),
        other => panic!("{key}={value}: expected a config error, got {other:?}"),
    }
}

#[test]
fn unknown_key_is_named_with_the_closest_known_key() {
    for (typo, meant) in [
        ("max.poll.record", "max.poll.records"),
        ("auto.ofset.reset", "auto.offset.reset"),
        ("bootstrap.server", "bootstrap.servers"),
        ("session.timeout.sm", "session.timeout.ms"),
        ("enable.auto.comit", "enable.auto.commit"),
    ] {
        let (key, message) = config_error(typo, "1");
        assert_eq!(key, typo);
        assert!(message.contains(&format!("`{typo}`")), "{message}");
        assert!(
            message.contains(&format!("did you mean `{meant}`")),
            "{typo}: {message}"
        );
        // The Display form says it all too.
        let e = Config::new().set(typo, "1").unwrap_err();
        assert!(e.to_string().contains(meant), "{e}");
        assert_eq!(e.name(), "CONFIG");
    }
    // Nothing close: no suggestion, still named.
    let (key, message) = config_error("completely.different", "x");
    assert_eq!(key, "completely.different");
    assert!(message.contains("completely.different"), "{message}");
    assert!(!message.contains("did you mean"), "{message}");
    // Config::get and from_pairs report the same way.
    assert!(matches!(
        Config::new().get("max.poll.record"),
        Err(Error::Config { .. })
    ));
    let e = Config::from_pairs([("bootstrap.servers", "x:1"), ("group.idd", "g")]).unwrap_err();
    assert!(e.to_string().contains("group.id"), "{e}");
}

#[test]
fn bad_value_names_the_key_and_the_expected_form() {
    let (key, message) = config_error("max.poll.records", "many");
    assert_eq!(key, "max.poll.records");
    assert!(
        message.contains("max.poll.records")
            && message.contains("integer")
            && message.contains("many"),
        "{message}"
    );
    let (key, message) = config_error("max.poll.records", "0");
    assert_eq!(key, "max.poll.records");
    assert!(message.contains("from 1"), "{message}");
    let (key, message) = config_error("auto.offset.reset", "smallest");
    assert_eq!(key, "auto.offset.reset");
    for v in ["earliest", "latest", "none", "smallest"] {
        assert!(message.contains(v), "{message}");
    }
    let (key, message) = config_error("enable.auto.commit", "yes please");
    assert_eq!(key, "enable.auto.commit");
    assert!(
        message.contains("true") && message.contains("false"),
        "{message}"
    );
    let (key, message) = config_error("session.timeout.ms", "10s");
    assert_eq!(key, "session.timeout.ms");
    assert!(message.contains("10s"), "{message}");
    let (key, message) = config_error("compression.type", "brotli");
    assert_eq!(key, "compression.type");
    assert!(
        message.contains("zstd") && message.contains("brotli"),
        "{message}"
    );
    // The key's documented form is what the message says.
    let info = lagless::config::key_info("fetch.max.wait.ms").unwrap();
    let (_, message) = config_error("fetch.max.wait.ms", "-3");
    assert!(
        message.contains(&info.expected()),
        "{message} / {}",
        info.expected()
    );
    // Keys of the other client are refused when the client is built, naming the key.
    let c = config(&[("bootstrap.servers", "127.0.0.1:1"), ("linger.ms", "5")]);
    match Consumer::from_config(&c) {
        Err(Error::Config { key, .. }) => assert_eq!(key, "linger.ms"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a consumer accepted linger.ms"),
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn unknown_topic_is_reported_by_consumer_poll_and_producer_send() {
    let bs = bootstrap();
    let missing = unique_name("errors-missing");
    let c = consumer(&bs, &[("auto.offset.reset", "earliest")]);
    c.assign(&[TopicPartition::new(&missing, 0)]).unwrap();
    let started = Instant::now();
    let e = loop {
        match c.poll(Duration::from_millis(500)) {
            Ok(rs) => assert!(rs.is_empty()),
            Err(e) => break e,
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "poll reported nothing for topic {missing}"
        );
    };
    assert!(matches!(&e, Error::UnknownTopic(t) if *t == missing), "{e}");
    assert!(e.to_string().contains(&missing));
    // Other lookups say the same.
    assert!(matches!(
        c.partitions_for(&missing, None),
        Err(Error::UnknownTopic(_))
    ));

    // The consumer still serves a topic that exists, next to the missing one.
    let topic = new_topic(&bs, "errors-present", 1);
    let p = producer(&bs, &[]);
    p.send(ProducerRecord::new(&topic, "here").with_partition(0))
        .unwrap()
        .wait()
        .unwrap();
    c.assign(&[
        TopicPartition::new(&missing, 0),
        TopicPartition::new(&topic, 0),
    ])
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(Instant::now() < deadline, "no record from {topic}");
        match c.poll(Duration::from_millis(200)) {
            Ok(rs) => got = rs,
            Err(Error::UnknownTopic(t)) => assert_eq!(t, missing),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got[0].value.as_deref(), Some(&b"here"[..]));

    let t = Instant::now();
    let e = p
        .send(ProducerRecord::new(&missing, "v"))
        .err()
        .expect("send to a missing topic");
    assert!(matches!(&e, Error::UnknownTopic(t) if *t == missing), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// The consumer's own background metadata refresh runs with `request.timeout.ms` (30 s by
/// default) and keeps retrying while no broker answers; a call with a 2 s timeout made meanwhile
/// must still end in about 2 s, with the reason the cluster did not answer.
#[test]
fn a_failing_background_refresh_does_not_hold_up_a_shorter_call() {
    let c = consumer(
        "127.0.0.1:1",
        &[("socket.connection.setup.timeout.ms", "500")],
    );
    // The fetch loop starts its refresh at once on creation: the first call may race it, the
    // later ones (each after the earlier one's 2 s) certainly run while it retries.
    for _ in 0..3 {
        let t = Instant::now();
        let e = c
            .partitions_for("anything", Some(Duration::from_secs(2)))
            .expect_err("no broker listens there");
        let took = t.elapsed();
        assert!(
            took < Duration::from_secs(6),
            "partitions_for took {took:?}: {e}"
        );
        assert!(
            matches!(&e, Error::Transport(m) if m.contains("127.0.0.1:1")),
            "the error names the unreachable broker: {e:?}"
        );
    }
    c.close(Some(Duration::from_secs(2))).unwrap();
}

/// Calls given a 2 s timeout against a port nobody listens on end within 2 s plus slack.
#[test]
fn unreachable_bootstrap_errors_within_the_timeout() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    const SLACK: Duration = Duration::from_millis(1500);
    let dead = "127.0.0.1:1";
    let tp = TopicPartition::new("anything", 0);
    let c = consumer(
        dead,
        &[
            ("auto.offset.reset", "earliest"),
            ("request.timeout.ms", "1000"),
        ],
    );

    let timed = |what: &str, f: &dyn Fn() -> Result<(), Error>| {
        let t = Instant::now();
        let r = f();
        let took = t.elapsed();
        let e = r.expect_err(what);
        assert!(took <= TIMEOUT + SLACK, "{what} took {took:?}: {e}");
        assert!(
            matches!(e, Error::Timeout(_) | Error::Transport(_)),
            "{what}: {e:?}"
        );
        eprintln!("{what}: {e} after {took:?}");
    };
    timed("partitions_for", &|| {
        c.partitions_for("anything", Some(TIMEOUT)).map(|_| ())
    });
    timed("end_offsets", &|| {
        c.end_offsets(std::slice::from_ref(&tp), Some(TIMEOUT))
            .map(|_| ())
    });
    timed("beginning_offsets", &|| {
        c.beginning_offsets(std::slice::from_ref(&tp), Some(TIMEOUT))
            .map(|_| ())
    });
    timed("offsets_for_times", &|| {
        c.offsets_for_times(&[(tp.clone(), 0)], Some(TIMEOUT))
            .map(|_| ())
    });
    timed("watermarks", &|| {
        c.watermarks(&tp, Some(TIMEOUT)).map(|_| ())
    });
    c.assign(std::slice::from_ref(&tp)).unwrap();
    timed("position", &|| c.position(&tp, Some(TIMEOUT)).map(|_| ()));
    // poll() does not fail on a missing cluster; it returns (empty) when its timeout is up.
    let t = Instant::now();
    let r = c.poll(TIMEOUT);
    assert!(
        t.elapsed() <= TIMEOUT + SLACK,
        "poll took {:?}",
        t.elapsed()
    );
    assert!(matches!(&r, Ok(v) if v.is_empty()) || r.is_err(), "{r:?}");
    let t = Instant::now();
    c.close(Some(TIMEOUT)).unwrap();
    assert!(
        t.elapsed() <= TIMEOUT + SLACK,
        "close took {:?}",
        t.elapsed()
    );

    let p = producer(
        dead,
        &[
            ("default.api.timeout.ms", "2000"),
            ("request.timeout.ms", "1000"),
            ("linger.ms", "0"),
            ("delivery.timeout.ms", "2000"),
        ],
    );
    let t = Instant::now();
    let e = p.partitions_for("anything").unwrap_err();
    assert!(
        t.elapsed() <= TIMEOUT + SLACK,
        "partitions_for took {:?}: {e}",
        t.elapsed()
    );
    let t = Instant::now();
    let r = p
        .send(ProducerRecord::new("anything", "v"))
        .and_then(|d| d.wait());
    let e = r.expect_err("send to an unreachable cluster");
    assert!(
        t.elapsed() <= TIMEOUT + SLACK,
        "send took {:?}: {e}",
        t.elapsed()
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn reset_none_without_a_committed_offset_is_no_offset() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "errors-reset-none", 2);
    let p = producer(&bs, &[]);
    for part in 0..2 {
        p.send(ProducerRecord::new(&topic, "v").with_partition(part))
            .unwrap()
            .wait()
            .unwrap();
    }
    let group = unique_name("errors-group");
    let settings = [
        ("auto.offset.reset", "none"),
        ("group.id", group.as_str()),
        ("enable.auto.commit", "false"),
    ];
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);

    // From poll(): one error per partition, naming it; nothing else comes.
    let c = consumer(&bs, &settings);
    c.assign(&[tp0.clone(), tp1.clone()]).unwrap();
    let mut reported = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while reported.len() < 2 {
        assert!(Instant::now() < deadline, "reported only {reported:?}");
        match c.poll(Duration::from_millis(200)) {
            Ok(rs) => assert!(rs.is_empty(), "records without an offset: {rs:?}"),
            Err(Error::NoOffset(p)) => {
                assert_eq!(p.topic, topic);
                reported.push(p.partition);
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    reported.sort();
    assert_eq!(reported, vec![0, 1]);
    // position() after poll() reported it: still no offset.
    assert!(matches!(
        c.position(&tp0, Some(Duration::from_secs(5))),
        Err(Error::NoOffset(_))
    ));
    // A seek gives the partition a position; the other stays without one.
    c.seek(&tp0, 0).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let rs = loop {
        let rs = c.poll(Duration::from_millis(200)).expect("poll after seek");
        if !rs.is_empty() {
            break rs;
        }
        assert!(Instant::now() < deadline);
    };
    assert_eq!((rs[0].partition, rs[0].offset), (0, 0));
    assert!(matches!(c.position(&tp1, None), Err(Error::NoOffset(_))));
    drop(c);

    // From position() first, before any poll().
    let c = consumer(&bs, &settings);
    c.assign(std::slice::from_ref(&tp1)).unwrap();
    let t = Instant::now();
    let e = c.position(&tp1, Some(Duration::from_secs(10))).unwrap_err();
    assert!(
        matches!(&e, Error::NoOffset(p) if p.topic == topic && p.partition == 1),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(e.name(), "NO_OFFSET");
    assert!(e.to_string().contains("auto.offset.reset"), "{e}");
}

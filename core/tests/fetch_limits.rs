//! The prefetch buffer's bound (`fetch.buffer.max.bytes`) and CRC checking (`check.crcs`),
//! against an in-process fake broker that counts fetches and can serve batches whose CRC is
//! wrong.
//!
//! No real broker is needed (`LAGLESS_BOOTSTRAP` is not read).
#[path = "support/fake_broker.rs"]
mod fake_broker;
#[path = "support/wait.rs"]
mod wait;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use lagless::{Config, Consumer, Error, TopicPartition};
use wait::wait_until;

const TOPIC: &str = "fetch-limits";

fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Consumer {
    let mut pairs = vec![
        ("bootstrap.servers", bootstrap),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "100"),
    ];
    pairs.extend_from_slice(extra);
    Consumer::from_config(&Config::from_pairs(pairs).unwrap()).unwrap()
}

/// With nobody polling, the consumer fetches until `fetch.buffer.max.bytes` is reached and then
/// stops asking the broker; polling frees room and fetching resumes, and every record comes
/// once, in order.
#[test]
fn prefetch_stops_at_fetch_buffer_max_bytes_until_poll_makes_room() {
    const TOTAL: i64 = 20_000;
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: TOTAL,
            per_sec: 0,
        }],
    );
    // A fetch answer holds 200 records of ~75 bytes as the buffer counts them: ~15 KB. A 40 KB
    // bound is reached after three answers; the whole log is ~1.5 MB.
    let c = consumer(&broker.addr, &[("fetch.buffer.max.bytes", "40000")]);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    // Fetching stops: no new fetch for 1 s (ten fetch.max.wait.ms). A consumer that kept
    // fetching into a full buffer would stop only at the end of the log, ~100 fetches later.
    let mut last = (0, Instant::now());
    wait_until("fetching to stop", Duration::from_secs(60), || {
        let n = broker.fetches_of(0);
        if n != last.0 {
            last = (n, Instant::now());
        }
        n > 0 && last.1.elapsed() >= Duration::from_secs(1)
    });
    let filled = broker.fetches_of(0);
    assert!(
        (1..=4).contains(&filled),
        "{filled} fetches of ~15 KB before a 40 KB buffer was full"
    );

    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < TOTAL {
        assert!(Instant::now() < deadline, "only {next} of {TOTAL} records");
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            assert_eq!(r.offset, next);
            next += 1;
        }
    }
    assert!(
        broker.fetches_of(0) >= (TOTAL / 200) as usize,
        "fetching resumed once poll() made room"
    );
    c.close(None).unwrap();
}

/// A batch whose CRC does not match is an error naming the partition and offset with
/// `check.crcs=true` (the default), and is delivered as it is with `check.crcs=false`.
#[test]
fn check_crcs_decides_whether_a_bad_crc_is_an_error() {
    let broker = FakeBroker::start(TOPIC, vec![Behavior::CorruptCrc { total: 1000 }]);
    let tp = TopicPartition::new(TOPIC, 0);

    let c = consumer(&broker.addr, &[]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let err = loop {
        assert!(Instant::now() < deadline, "no CRC error reported");
        match c.poll(Duration::from_millis(100)) {
            Ok(records) => assert!(records.is_empty(), "records with a bad CRC were delivered"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("fetch-limits-0") && text.contains("offset 0"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("crc"), "{text}");
    c.close(None).unwrap();

    let c = consumer(&broker.addr, &[("check.crcs", "false")]);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while next < 1000 {
        assert!(Instant::now() < deadline, "only {next} of 1000 records");
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            assert_eq!(r.offset, next);
            assert_eq!(r.value.as_deref(), Some(format!("v{next}").as_bytes()));
            next += 1;
        }
    }
    c.close(None).unwrap();
}

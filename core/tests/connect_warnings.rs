//! A client pointed at a broker that cannot be reached says so at WARN, the default level of
//! most log setups, naming the address and the cause: at once, and then rarely (no line per
//! reconnect attempt). No broker needed: nothing listens on 127.0.0.1:1.
//!
//! Its own test binary, because the log callback is global to the process.
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::log::{set_log_callback, LogLevel};
use support::*;

#[test]
fn an_unreachable_bootstrap_is_warned_of_once_while_the_attempts_go_on() {
    let events: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::default();
    let sink = events.clone();
    set_log_callback(
        LogLevel::Debug,
        Arc::new(move |level, _target, message: &str| {
            if message.contains("127.0.0.1:1") {
                sink.lock().unwrap().push((level, message.to_string()));
            }
        }),
    )
    .unwrap();
    let consumer = configs::consumer(&[
        ("bootstrap.servers", "127.0.0.1:1"),
        ("group.id", "connect-warnings"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "200"),
    ]);
    consumer.subscribe(&["t"], None).unwrap();
    // The first attempt is refused at once on loopback: its warning is there when the first
    // poll returns.
    let first = consumer.poll(Duration::from_secs(2)).unwrap();
    assert!(first.is_empty());
    let warned = |events: &[(LogLevel, String)]| {
        events
            .iter()
            .filter(|(l, _)| *l == LogLevel::Warn)
            .map(|(_, m)| m.clone())
            .collect::<Vec<_>>()
    };
    let after_first = warned(&events.lock().unwrap());
    assert_eq!(after_first.len(), 1, "{after_first:?}");
    assert!(
        after_first[0].contains("cannot connect to broker 127.0.0.1:1")
            && after_first[0].to_lowercase().contains("refused"),
        "the warning names the address and the cause: {after_first:?}"
    );
    // More attempts, each after at most 200 ms: none of them warned of within 30 s.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        consumer.poll(Duration::from_millis(200)).unwrap();
    }
    let all = events.lock().unwrap().clone();
    let failed_quietly = all
        .iter()
        .filter(|(l, m)| *l == LogLevel::Debug && m.contains("cannot connect"))
        .count();
    assert!(
        failed_quietly >= 2,
        "the attempts went on at DEBUG ({failed_quietly}): {all:?}"
    );
    assert_eq!(
        warned(&all).len(),
        1,
        "one warning for the whole run: {all:?}"
    );
}

//! The error callback hears of whole-cluster conditions on the polling thread. No broker needed:
//! nothing listens on 127.0.0.1:1 or 127.0.0.1:2. (Refused credentials and certificates reach
//! it too: tests/security.rs.)
mod support;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use lagless::{Error, ErrorKind};
use support::*;

type Heard = Arc<Mutex<Vec<(ThreadId, ErrorKind, String)>>>;

fn listen(consumer: &lagless::Consumer) -> Heard {
    let heard: Heard = Arc::default();
    let sink = heard.clone();
    consumer.set_error_callback(Some(Box::new(move |e: &Error| {
        sink.lock()
            .unwrap()
            .push((std::thread::current().id(), e.kind(), e.to_string()));
        Ok(())
    })));
    heard
}

#[test]
fn every_bootstrap_server_unreachable_is_all_brokers_down_once_on_the_polling_thread() {
    let consumer = configs::consumer(&[
        ("bootstrap.servers", "127.0.0.1:1,127.0.0.1:2"),
        ("group.id", "error-callback"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "100"),
    ]);
    let heard = listen(&consumer);
    consumer.subscribe(&["t"], None).unwrap();
    // Polled for 3 s: each address is tried many times over (every 100 ms at most).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(consumer
            .poll(Duration::from_millis(300))
            .unwrap()
            .is_empty());
    }
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "once while it lasts: {heard:?}");
    let (thread, kind, text) = &heard[0];
    assert_eq!(
        *thread,
        std::thread::current().id(),
        "on the polling thread"
    );
    assert_eq!(*kind, ErrorKind::Transport, "{text}");
    assert!(text.contains("all brokers are down"), "{text}");
    assert!(text.contains("2 known broker"), "{text}");
    assert!(
        text.contains("127.0.0.1:"),
        "names the last address tried: {text}"
    );
}

#[test]
fn an_error_returned_by_the_callback_comes_out_of_poll_and_the_callback_stays() {
    let consumer = configs::consumer(&[
        ("bootstrap.servers", "127.0.0.1:1"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "100"),
    ]);
    consumer.set_error_callback(Some(Box::new(|e: &Error| {
        Err(Error::Callback(format!("the application gives up: {e}")))
    })));
    consumer
        .assign(&[lagless::TopicPartition::new("t", 0)])
        .unwrap();
    let started = Instant::now();
    let e = loop {
        match consumer.poll(Duration::from_millis(100)) {
            Err(e) => break e,
            Ok(records) => assert!(records.is_empty()),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the callback's error never came out of poll()"
        );
    };
    assert_eq!(e.kind(), ErrorKind::Callback, "{e}");
    assert!(e.to_string().contains("all brokers are down"), "{e}");
    // Raised once: the next polls go on without an error.
    for _ in 0..5 {
        assert!(consumer
            .poll(Duration::from_millis(100))
            .unwrap()
            .is_empty());
    }
}

#[test]
fn without_a_callback_nothing_is_kept_for_later() {
    let consumer = configs::consumer(&[
        ("bootstrap.servers", "127.0.0.1:2"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "100"),
    ]);
    consumer
        .assign(&[lagless::TopicPartition::new("t", 0)])
        .unwrap();
    for _ in 0..5 {
        assert!(consumer
            .poll(Duration::from_millis(200))
            .unwrap()
            .is_empty());
    }
    // A callback set now hears of nothing raised before it.
    let heard = listen(&consumer);
    assert!(consumer
        .poll(Duration::from_millis(200))
        .unwrap()
        .is_empty());
    assert!(
        heard.lock().unwrap().is_empty(),
        "{:?}",
        heard.lock().unwrap()
    );
}

/// The async consumer runs it from a `recv()` that waits for records (which wakes every 100 ms),
/// on the application's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_async_recv_runs_it() {
    let config = lagless::Config::from_pairs([
        ("bootstrap.servers", "127.0.0.1:1"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "100"),
    ])
    .unwrap();
    let consumer = lagless::aio::Consumer::from_config(&config).unwrap();
    let heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = heard.clone();
    consumer.set_error_callback(Some(Box::new(move |e: &Error| {
        sink.lock().unwrap().push(e.to_string());
        Ok(())
    })));
    consumer
        .assign(&[lagless::TopicPartition::new("t", 0)])
        .unwrap();
    // One recv of 2 s: nothing to read, but the condition is heard while it waits.
    let got = consumer
        .recv_batch_timeout(10, Duration::from_secs(2))
        .await
        .unwrap();
    assert!(got.is_empty());
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].contains("all brokers are down"), "{heard:?}");
}

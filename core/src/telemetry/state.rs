//! KIP-714's client side as the Java client's `ClientTelemetryReporter` runs it: which request
//! comes next and when, given what the broker answered. Pure: time comes in as an argument, the
//! jitter of the first push as a number in `[0, 1)`, the backoff after a failed request as the
//! delay the caller drew; nothing here sends, sleeps or logs. The I/O task (`super::task`)
//! carries out what [`Telemetry::next`] says.
//!
//! States (Java's `ClientTelemetryState` less its in-progress ones, which the task's own await
//! stands for): a subscription is needed (at first, after an answer that asks for none, after
//! UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE), a push is needed (every
//! `PushIntervalMs`, the first one after a jittered 0.5 to 1.5 of it), the terminating push is
//! needed (on close, once a subscription asked for metrics), done (after that push, or for
//! good after an error that retrying cannot mend: INVALID_REQUEST, INVALID_RECORD,
//! UNSUPPORTED_VERSION, a code KIP-714 does not name, a broker without the APIs).
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::error::codes;
use crate::protocol::records::Compression;

/// Java's `DEFAULT_PUSH_INTERVAL_MS`: the interval when the broker names none (zero or less),
/// and the wait before asking again after TELEMETRY_TOO_LARGE or THROTTLING_QUOTA_EXCEEDED
/// with no subscription known.
pub const DEFAULT_PUSH_INTERVAL: Duration = Duration::from_secs(300);

/// The bounds of the first push's jitter, as fractions of the push interval (Java's
/// `INITIAL_PUSH_JITTER_LOWER` and `_UPPER`): clients started together spread their pushes.
pub const FIRST_PUSH_JITTER: (f64, f64) = (0.5, 1.5);

const UNKNOWN_SUBSCRIPTION_ID: i16 = 117;
const TELEMETRY_TOO_LARGE: i16 = 118;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

/// Which metrics the broker asked for (`RequestedMetrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// An empty list: none; the client asks again after the push interval.
    Nothing,
    /// A single `*` (what the Java client takes for all) or a single empty string (KIP-714's
    /// text): every metric.
    All,
    /// Metrics whose name starts with one of these.
    Prefixes(Vec<String>),
}

impl Selector {
    /// The selector of a `RequestedMetrics` list.
    pub fn of(requested: &[String]) -> Selector {
        match requested {
            [] => Selector::Nothing,
            [one] if one == "*" || one.is_empty() => Selector::All,
            prefixes => Selector::Prefixes(prefixes.to_vec()),
        }
    }

    /// Whether a metric of this name is to be pushed.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::All => true,
            Selector::Prefixes(p) => p.iter().any(|p| name.starts_with(p.as_str())),
        }
    }
}

/// The codec a push uses: the first of the broker's `AcceptedCompressionTypes` (its order is
/// its preference) that is zstd, lz4 or gzip and built into this lagless; else none. Ids are
/// Kafka's `CompressionType` ids (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); unknown ones are
/// passed over.
pub fn choose_compression(accepted: &[i8]) -> Compression {
    accepted
        .iter()
        .find_map(|id| {
            let c = match id {
                1 => Compression::Gzip,
                3 => Compression::Lz4,
                4 => Compression::Zstd,
                _ => return None,
            };
            c.is_enabled().then_some(c)
        })
        .unwrap_or(Compression::None)
}

/// Kafka's `CompressionType` id of a codec, as PushTelemetry's `CompressionType` carries it.
pub fn compression_id(c: Compression) -> i8 {
    match c {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// A subscription as the broker gave it, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// The id the broker gave the client.
    pub client_instance_id: Uuid,
    /// The subscription's id, named in each push.
    pub subscription_id: i32,
    /// `PushIntervalMs` (the default when the broker named none).
    pub push_interval: Duration,
    /// The codec of the pushes ([`choose_compression`]).
    pub compression: Compression,
    /// `DeltaTemporality`: counters as the change since the last push.
    pub delta_temporality: bool,
    /// `RequestedMetrics`.
    pub selector: Selector,
    /// `TelemetryMaxBytes`: the largest (compressed) payload the broker takes.
    pub max_bytes: usize,
}

/// The fields of a GetTelemetrySubscriptions answer the decision needs, as they came.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // The answer's fields, named as in the message.
pub struct SubscriptionAnswer {
    pub error_code: i16,
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub accepted_compression_types: Vec<i8>,
    pub push_interval_ms: i32,
    pub telemetry_max_bytes: i32,
    pub delta_temporality: bool,
    pub requested_metrics: Vec<String>,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Send GetTelemetrySubscriptions at this time.
    Subscribe {
        /// When.
        at: Instant,
    },
    /// Push the metrics at this time (`terminating`: the last push, on close).
    Push {
        /// When.
        at: Instant,
        /// The last push.
        terminating: bool,
    },
    /// Nothing more, ever (the reason is the one to log, once; `None`: a normal end).
    Stop {
        /// Why, to log once.
        reason: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    SubscriptionNeeded,
    PushNeeded,
    TerminatingPushNeeded,
    Done(Option<String>),
}

/// The client's telemetry state: its subscription, its state and when the next request is due.
#[derive(Debug, Clone)]
pub struct Telemetry {
    state: State,
    subscription: Option<Subscription>,
    /// The client instance id the broker gave (zero until the first subscription).
    client_instance_id: Uuid,
    due: Instant,
}

/// What an error code of either answer means (Java's `maybeFetchErrorIntervalMs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorVerdict {
    /// Fetch the subscription again, at once.
    Resubscribe,
    /// Fetch the subscription again after the push interval.
    ResubscribeLater,
    /// Stop for good.
    Disable,
}

fn verdict(code: i16) -> ErrorVerdict {
    match code {
        UNKNOWN_SUBSCRIPTION_ID | UNSUPPORTED_COMPRESSION_TYPE => ErrorVerdict::Resubscribe,
        TELEMETRY_TOO_LARGE | THROTTLING_QUOTA_EXCEEDED => ErrorVerdict::ResubscribeLater,
        // INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION, and any code KIP-714 does not
        // name: retrying sends the same request.
        _ => ErrorVerdict::Disable,
    }
}

fn code_name(code: i16) -> String {
    format!("{} ({code})", crate::error::kafka_error_name(code))
}

impl Telemetry {
    /// A client that asks for its subscription at `now`, with the zero client instance id.
    pub fn new(now: Instant) -> Telemetry {
        Telemetry {
            state: State::SubscriptionNeeded,
            subscription: None,
            client_instance_id: Uuid::nil(),
            due: now,
        }
    }

    /// What to do next, and when.
    pub fn next(&self) -> Next {
        match &self.state {
            State::SubscriptionNeeded => Next::Subscribe { at: self.due },
            State::PushNeeded => Next::Push {
                at: self.due,
                terminating: false,
            },
            State::TerminatingPushNeeded => Next::Push {
                at: self.due,
                terminating: true,
            },
            State::Done(reason) => Next::Stop {
                reason: reason.clone(),
            },
        }
    }

    /// The client instance id for the next GetTelemetrySubscriptions: zero before the broker
    /// gave one.
    pub fn client_instance_id(&self) -> Uuid {
        self.client_instance_id
    }

    /// The subscription in force, once there is one.
    pub fn subscription(&self) -> Option<&Subscription> {
        self.subscription.as_ref()
    }

    fn stop(&mut self, reason: String) {
        self.state = State::Done(Some(reason));
    }

    fn interval_or_default(&self) -> Duration {
        self.subscription
            .as_ref()
            .map_or(DEFAULT_PUSH_INTERVAL, |s| s.push_interval)
    }

    /// A GetTelemetrySubscriptions answer arrived at `now`; `jitter` in `[0, 1)` places the
    /// first push between 0.5 and 1.5 push intervals from now.
    pub fn on_subscription(&mut self, answer: &SubscriptionAnswer, now: Instant, jitter: f64) {
        if self.is_terminating() {
            return;
        }
        if answer.error_code != codes::NONE {
            self.on_error_code("GetTelemetrySubscriptions", answer.error_code, now);
            return;
        }
        if answer.client_instance_id.is_nil() {
            // A broker that gives no id cannot be pushed to: the request would name none.
            self.stop(
                "the broker's GetTelemetrySubscriptions answer has no client instance id".into(),
            );
            return;
        }
        let push_interval = if answer.push_interval_ms > 0 {
            Duration::from_millis(answer.push_interval_ms as u64)
        } else {
            DEFAULT_PUSH_INTERVAL
        };
        let selector = Selector::of(&answer.requested_metrics);
        let subscription = Subscription {
            client_instance_id: answer.client_instance_id,
            subscription_id: answer.subscription_id,
            push_interval,
            compression: choose_compression(&answer.accepted_compression_types),
            delta_temporality: answer.delta_temporality,
            selector,
            max_bytes: usize::try_from(answer.telemetry_max_bytes).unwrap_or(0),
        };
        self.client_instance_id = answer.client_instance_id;
        if subscription.selector == Selector::Nothing {
            // Nothing to push: ask again after the interval.
            self.state = State::SubscriptionNeeded;
            self.due = now + push_interval;
        } else {
            self.state = State::PushNeeded;
            self.due = now + first_push_delay(push_interval, jitter);
        }
        self.subscription = Some(subscription);
    }

    /// A PushTelemetry answer with `error_code` arrived at `now`.
    pub fn on_push(&mut self, error_code: i16, now: Instant) {
        match self.state {
            State::TerminatingPushNeeded => {
                // The last push, answered whatever the answer.
                self.state = State::Done(None);
            }
            State::PushNeeded => {
                if error_code != codes::NONE {
                    self.on_error_code("PushTelemetry", error_code, now);
                } else {
                    self.due = now + self.interval_or_default();
                }
            }
            _ => {}
        }
    }

    fn on_error_code(&mut self, api: &str, code: i16, now: Instant) {
        match verdict(code) {
            ErrorVerdict::Resubscribe => {
                self.state = State::SubscriptionNeeded;
                self.due = now;
            }
            ErrorVerdict::ResubscribeLater => {
                self.state = State::SubscriptionNeeded;
                self.due = now + self.interval_or_default();
            }
            ErrorVerdict::Disable => self.stop(format!(
                "the broker answered {api} with {}, which retrying cannot mend",
                code_name(code)
            )),
        }
    }

    /// A request failed at `now` without an answer (the connection, a timeout, an answer that
    /// did not decode): the subscription is fetched again after `delay` (the caller's backoff).
    /// The last push is not retried.
    pub fn on_failure(&mut self, now: Instant, delay: Duration) {
        match self.state {
            State::TerminatingPushNeeded => self.state = State::Done(None),
            State::Done(_) => {}
            _ => {
                self.state = State::SubscriptionNeeded;
                self.due = now + delay;
            }
        }
    }

    /// The broker does not speak the telemetry APIs (no GetTelemetrySubscriptions or
    /// PushTelemetry version in common): stop for good.
    pub fn on_unsupported(&mut self, why: String) {
        if !matches!(self.state, State::Done(_)) {
            self.stop(why);
        }
    }

    /// The consumer is closing at `now`: the terminating push is due at once when a
    /// subscription asks for metrics (Java: when the state is not "subscription needed");
    /// otherwise there is nothing more to do.
    pub fn on_close(&mut self, now: Instant) {
        match self.state {
            State::PushNeeded => {
                self.state = State::TerminatingPushNeeded;
                self.due = now;
            }
            State::SubscriptionNeeded => self.state = State::Done(None),
            State::TerminatingPushNeeded | State::Done(_) => {}
        }
    }

    fn is_terminating(&self) -> bool {
        matches!(self.state, State::TerminatingPushNeeded | State::Done(_))
    }
}

/// The first push's delay after a subscription: `interval` times a factor drawn from
/// [`FIRST_PUSH_JITTER`] by `jitter` in `[0, 1)` (clamped), rounded to the millisecond.
pub fn first_push_delay(interval: Duration, jitter: f64) -> Duration {
    let (lo, hi) = FIRST_PUSH_JITTER;
    let f = lo + (hi - lo) * jitter.clamp(0.0, 1.0);
    Duration::from_millis((interval.as_millis() as f64 * f).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(requested: &[&str]) -> SubscriptionAnswer {
        SubscriptionAnswer {
            error_code: 0,
            client_instance_id: Uuid::from_u128(7),
            subscription_id: 42,
            accepted_compression_types: vec![],
            push_interval_ms: 1000,
            telemetry_max_bytes: 1 << 20,
            delta_temporality: false,
            requested_metrics: requested.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn subscribed(t0: Instant) -> Telemetry {
        let mut t = Telemetry::new(t0);
        t.on_subscription(&answer(&["*"]), t0, 0.5);
        t
    }

    #[test]
    fn the_first_request_is_a_subscription_at_once_with_the_zero_id() {
        let t0 = Instant::now();
        let t = Telemetry::new(t0);
        assert_eq!(t.next(), Next::Subscribe { at: t0 });
        assert!(t.client_instance_id().is_nil());
    }

    #[test]
    fn a_subscription_places_the_first_push_between_half_and_one_and_a_half_intervals() {
        let t0 = Instant::now();
        for (jitter, ms) in [(0.0, 500), (0.5, 1000), (0.999, 1499), (2.0, 1500)] {
            let mut t = Telemetry::new(t0);
            t.on_subscription(&answer(&["org.apache.kafka.consumer."]), t0, jitter);
            assert_eq!(
                t.next(),
                Next::Push {
                    at: t0 + Duration::from_millis(ms),
                    terminating: false
                },
                "jitter {jitter}"
            );
            assert_eq!(t.client_instance_id(), Uuid::from_u128(7));
            let s = t.subscription().unwrap();
            assert_eq!(s.subscription_id, 42);
            assert_eq!(s.push_interval, Duration::from_secs(1));
        }
    }

    #[test]
    fn later_pushes_come_every_interval() {
        let t0 = Instant::now();
        let mut t = subscribed(t0);
        let t1 = t0 + Duration::from_millis(1000);
        t.on_push(0, t1);
        assert_eq!(
            t.next(),
            Next::Push {
                at: t1 + Duration::from_secs(1),
                terminating: false
            }
        );
    }

    #[test]
    fn an_interval_of_zero_or_less_is_the_default() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(t0);
        let mut a = answer(&["*"]);
        a.push_interval_ms = 0;
        t.on_subscription(&a, t0, 0.5);
        assert_eq!(
            t.subscription().unwrap().push_interval,
            DEFAULT_PUSH_INTERVAL
        );
        assert_eq!(
            t.next(),
            Next::Push {
                at: t0 + DEFAULT_PUSH_INTERVAL,
                terminating: false
            }
        );
    }

    #[test]
    fn no_requested_metric_asks_again_after_the_interval() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(t0);
        t.on_subscription(&answer(&[]), t0, 0.5);
        assert_eq!(
            t.next(),
            Next::Subscribe {
                at: t0 + Duration::from_secs(1)
            }
        );
        // The next request names the id the broker gave.
        assert_eq!(t.client_instance_id(), Uuid::from_u128(7));
    }

    #[test]
    fn unknown_subscription_and_unsupported_compression_fetch_the_subscription_at_once() {
        let t0 = Instant::now();
        for code in [117, 76] {
            let mut t = subscribed(t0);
            let t1 = t0 + Duration::from_secs(1);
            t.on_push(code, t1);
            assert_eq!(t.next(), Next::Subscribe { at: t1 }, "code {code}");
            assert_eq!(t.client_instance_id(), Uuid::from_u128(7));
        }
    }

    #[test]
    fn too_large_and_throttled_fetch_the_subscription_after_the_interval() {
        let t0 = Instant::now();
        for code in [118, 89] {
            let mut t = subscribed(t0);
            t.on_push(code, t0);
            assert_eq!(
                t.next(),
                Next::Subscribe {
                    at: t0 + Duration::from_secs(1)
                }
            );
        }
        // Before any subscription: the default interval.
        let mut t = Telemetry::new(t0);
        t.on_subscription(
            &SubscriptionAnswer {
                error_code: 89,
                ..answer(&["*"])
            },
            t0,
            0.5,
        );
        assert_eq!(
            t.next(),
            Next::Subscribe {
                at: t0 + DEFAULT_PUSH_INTERVAL
            }
        );
    }

    #[test]
    fn invalid_record_unsupported_version_invalid_request_and_unknown_codes_stop() {
        let t0 = Instant::now();
        for (code, name) in [
            (87, "INVALID_RECORD"),
            (35, "UNSUPPORTED_VERSION"),
            (42, "INVALID_REQUEST"),
            (3, "UNKNOWN_TOPIC_OR_PARTITION"),
        ] {
            let mut t = subscribed(t0);
            t.on_push(code, t0);
            let Next::Stop { reason: Some(r) } = t.next() else {
                panic!("{code}: {:?}", t.next())
            };
            assert!(r.contains(name) && r.contains("PushTelemetry"), "{r}");
            // And it stays stopped: a close has nothing to push.
            t.on_close(t0);
            assert!(matches!(t.next(), Next::Stop { .. }));
            // The same codes in a subscription answer.
            let mut t = Telemetry::new(t0);
            t.on_subscription(
                &SubscriptionAnswer {
                    error_code: code,
                    ..answer(&["*"])
                },
                t0,
                0.5,
            );
            assert!(matches!(t.next(), Next::Stop { reason: Some(_) }));
        }
    }

    #[test]
    fn a_zero_client_instance_id_in_the_answer_stops() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(t0);
        t.on_subscription(
            &SubscriptionAnswer {
                client_instance_id: Uuid::nil(),
                ..answer(&["*"])
            },
            t0,
            0.5,
        );
        let Next::Stop { reason: Some(r) } = t.next() else {
            panic!()
        };
        assert!(r.contains("client instance id"), "{r}");
    }

    #[test]
    fn a_failed_request_fetches_the_subscription_after_the_backoff() {
        let t0 = Instant::now();
        let mut t = subscribed(t0);
        t.on_failure(t0, Duration::from_millis(150));
        assert_eq!(
            t.next(),
            Next::Subscribe {
                at: t0 + Duration::from_millis(150)
            }
        );
        assert_eq!(t.client_instance_id(), Uuid::from_u128(7));
    }

    #[test]
    fn a_broker_without_the_apis_stops() {
        let t0 = Instant::now();
        let mut t = Telemetry::new(t0);
        t.on_unsupported("no GetTelemetrySubscriptions".into());
        assert_eq!(
            t.next(),
            Next::Stop {
                reason: Some("no GetTelemetrySubscriptions".into())
            }
        );
    }

    #[test]
    fn close_pushes_once_more_when_subscribed_and_then_stops() {
        let t0 = Instant::now();
        let mut t = subscribed(t0);
        let t1 = t0 + Duration::from_millis(300);
        t.on_close(t1);
        assert_eq!(
            t.next(),
            Next::Push {
                at: t1,
                terminating: true
            }
        );
        // A late subscription answer does not undo the close.
        t.on_subscription(&answer(&["*"]), t1, 0.5);
        assert!(matches!(
            t.next(),
            Next::Push {
                terminating: true,
                ..
            }
        ));
        t.on_push(0, t1);
        assert_eq!(t.next(), Next::Stop { reason: None });

        // A failed last push is not retried.
        let mut t = subscribed(t0);
        t.on_close(t1);
        t.on_failure(t1, Duration::from_millis(100));
        assert_eq!(t.next(), Next::Stop { reason: None });

        // Without a subscription that asks for metrics there is nothing to push.
        let mut t = Telemetry::new(t0);
        t.on_close(t1);
        assert_eq!(t.next(), Next::Stop { reason: None });
    }

    #[test]
    fn requested_metrics_select_by_prefix() {
        let lag = "org.apache.kafka.consumer.fetch.manager.records.lag";
        assert!(!Selector::of(&[]).matches(lag));
        assert!(Selector::of(&["*".into()]).matches(lag));
        assert!(Selector::of(&["".into()]).matches(lag));
        let s = Selector::of(&[
            "org.apache.kafka.consumer.coordinator.".into(),
            "org.apache.kafka.consumer.fetch.manager.records.".into(),
        ]);
        assert!(s.matches(lag));
        assert!(s.matches("org.apache.kafka.consumer.coordinator.assigned.partitions"));
        assert!(!s.matches("org.apache.kafka.consumer.fetch.manager.bytes.consumed.total"));
        // "*" among others is a prefix like any other, as in the Java client.
        assert!(!Selector::of(&["*".into(), "x".into()]).matches(lag));
    }

    #[test]
    fn compression_is_the_brokers_first_choice_that_is_built_in() {
        assert_eq!(choose_compression(&[]), Compression::None);
        // snappy (2) and unknown ids are passed over.
        assert_eq!(choose_compression(&[2, 9]), Compression::None);
        let zstd = if cfg!(feature = "zstd") {
            Compression::Zstd
        } else {
            choose_compression(&[3, 1])
        };
        assert_eq!(choose_compression(&[2, 4, 3, 1]), zstd);
        if cfg!(feature = "lz4") {
            assert_eq!(choose_compression(&[3, 4]), Compression::Lz4);
        }
        if cfg!(feature = "gzip") {
            assert_eq!(choose_compression(&[1]), Compression::Gzip);
        }
        assert_eq!(compression_id(Compression::Zstd), 4);
        assert_eq!(compression_id(Compression::None), 0);
    }
}

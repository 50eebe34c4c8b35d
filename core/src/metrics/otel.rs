//! OpenTelemetry metrics of a consumer (the `opentelemetry` feature), named by OpenTelemetry's
//! messaging semantic conventions, so that dashboards built for them (and for the Java agent's
//! Kafka instrumentation) read lagless too:
//!
//! - `messaging.client.consumed.messages` (counter, `{message}`): records handed to the
//!   application by `poll()`, `recovery_poll()` or the async front, per topic and partition.
//! - `messaging.client.operation.duration` (histogram, seconds): each poll (`receive`) and each
//!   commit (`settle`: explicit, asynchronous or automatic), with `error.type` when it failed.
//! - `messaging.process.duration` (histogram, seconds): the application's time with a batch,
//!   from the poll that returned records to the next poll: what `max.poll.interval.ms` bounds.
//!
//! The instruments come from the global meter provider (`opentelemetry::global`) at the first
//! poll or commit, or from the provider given to [`crate::Consumer::set_meter_provider`] before
//! then. Without the feature the same calls compile to nothing.
//!
//! Recording costs what the OpenTelemetry SDK charges per measurement: one counter add per
//! partition of a poll's records and one histogram record per poll or commit; nothing per record.
// Without the feature only the no-op instruments below are used; the pure parts stay compiled
// (and unit-tested) either way.
#![cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
use std::sync::Arc;

use crate::error::Error;

/// The semantic conventions' bucket boundaries for messaging durations, in seconds.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// What a consumer's operation was, as `messaging.operation.name` / `.type` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `poll()` and the async front's `recv*()` (`poll`, `receive`).
    Poll,
    /// `recovery_poll()` (KIP-333's recovery records; `poll`, `receive`).
    RecoveryPoll,
    /// OffsetCommit of any kind (`commit`, `settle`).
    Commit,
}

impl Operation {
    /// `messaging.operation.name`: Kafka's own name of the call.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Operation::Poll | Operation::RecoveryPoll => "poll",
            Operation::Commit => "commit",
        }
    }

    /// `messaging.operation.type`: the conventions' kind of operation.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Operation::Poll | Operation::RecoveryPoll => "receive",
            Operation::Commit => "settle",
        }
    }
}

/// How many records of each partition a poll returned, in the order the partitions first
/// appear: consecutive records of one partition are counted as one run, and runs of the same
/// partition are added up. `records` gives (topic, partition) per record.
pub(crate) fn per_partition<'a>(
    records: impl IntoIterator<Item = (&'a Arc<str>, i32)>,
) -> Vec<(&'a Arc<str>, i32, u64)> {
    let mut counts: Vec<(&'a Arc<str>, i32, u64)> = Vec::new();
    let mut last: Option<usize> = None;
    for (topic, partition) in records {
        let same = |c: &(&Arc<str>, i32, u64)| c.1 == partition && *c.0 == *topic;
        let at = match last {
            // A poll's records come partition by partition: nearly always the run goes on.
            Some(i) if same(&counts[i]) => i,
            _ => match counts.iter().position(same) {
                Some(i) => i,
                None => {
                    counts.push((topic, partition, 0));
                    counts.len() - 1
                }
            },
        };
        counts[at].2 += 1;
        last = Some(at);
    }
    counts
}

/// `error.type` of a failed operation: the error's stable kind name (`TIMEOUT`, `KAFKA`, ...),
/// a small fixed set as the conventions ask.
pub(crate) fn error_type(e: &Error) -> &'static str {
    e.name()
}

#[cfg(feature = "opentelemetry")]
pub(crate) use run::ConsumedRun;
#[cfg(feature = "opentelemetry")]
pub(crate) use with_sdk::ConsumerInstruments;
#[cfg(not(feature = "opentelemetry"))]
pub(crate) use without_sdk::{ConsumedRun, ConsumerInstruments};

#[cfg(feature = "opentelemetry")]
mod with_sdk {
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::Instant;

    use opentelemetry::metrics::{Counter, Histogram, MeterProvider};
    use opentelemetry::{InstrumentationScope, KeyValue};

    use super::{error_type, per_partition, Operation, DURATION_BUCKETS};
    use crate::error::{Error, Result};
    use crate::sync::Unpoisoned;

    /// A consumer's instruments, made at their first use.
    pub struct ConsumerInstruments {
        /// `group.id`: `messaging.consumer.group.name` on every measurement.
        group_id: Option<String>,
        made: OnceLock<Instruments>,
        /// When the last poll that returned records ended (the start of the application's
        /// processing of them).
        processing_since: Mutex<Option<Instant>>,
    }

    struct Instruments {
        consumed: Counter<u64>,
        operation_duration: Histogram<f64>,
        process_duration: Histogram<f64>,
        /// `messaging.system` and the group.
        common: Vec<KeyValue>,
    }

    impl std::fmt::Debug for ConsumerInstruments {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("ConsumerInstruments")
                .field("made", &self.made.get().is_some())
                .finish()
        }
    }

    impl ConsumerInstruments {
        pub fn new(group_id: Option<&str>) -> ConsumerInstruments {
            ConsumerInstruments {
                group_id: group_id.map(str::to_owned),
                made: OnceLock::new(),
                processing_since: Mutex::new(None),
            }
        }

        /// Makes the instruments from `provider`; refused once they were made (from the global
        /// provider at the first poll or commit, or by an earlier call).
        pub fn set_provider(&self, provider: &dyn MeterProvider) -> Result<()> {
            let mut fresh = Some(self.make(provider));
            self.made.get_or_init(|| fresh.take().expect("taken once"));
            match fresh {
                None => Ok(()),
                Some(_) => Err(Error::IllegalState(
                    "the consumer's OpenTelemetry instruments exist already (made at the first \
                     poll or commit, or by an earlier set_meter_provider()); give the meter \
                     provider before polling"
                        .into(),
                )),
            }
        }

        fn make(&self, provider: &dyn MeterProvider) -> Instruments {
            let meter = provider.meter_with_scope(
                InstrumentationScope::builder("lagless")
                    .with_version(env!("CARGO_PKG_VERSION"))
                    .build(),
            );
            let mut common = vec![KeyValue::new("messaging.system", "kafka")];
            if let Some(g) = &self.group_id {
                common.push(KeyValue::new("messaging.consumer.group.name", g.clone()));
            }
            Instruments {
                consumed: meter
                    .u64_counter("messaging.client.consumed.messages")
                    .with_unit("{message}")
                    .with_description("Records handed to the application")
                    .build(),
                operation_duration: meter
                    .f64_histogram("messaging.client.operation.duration")
                    .with_unit("s")
                    .with_description("Duration of polls and commits")
                    .with_boundaries(DURATION_BUCKETS.to_vec())
                    .build(),
                process_duration: meter
                    .f64_histogram("messaging.process.duration")
                    .with_unit("s")
                    .with_description(
                        "The application's time with a poll's records, until its next poll",
                    )
                    .with_boundaries(DURATION_BUCKETS.to_vec())
                    .build(),
                common,
            }
        }

        fn instruments(&self) -> &Instruments {
            self.made
                .get_or_init(|| self.make(&*opentelemetry::global::meter_provider()))
        }

        fn attributes(&self, op: Operation, error: Option<&Error>) -> Vec<KeyValue> {
            let mut a = self.instruments().common.clone();
            a.push(KeyValue::new("messaging.operation.name", op.name()));
            a.push(KeyValue::new("messaging.operation.type", op.kind()));
            if let Some(e) = error {
                a.push(KeyValue::new("error.type", error_type(e)));
            }
            a
        }

        /// A poll of `op` starts at `now`: the main poll ends the processing of the records
        /// the previous one returned.
        pub fn poll_started(&self, op: Operation, now: Instant) {
            if op != Operation::Poll {
                return;
            }
            let since = self.processing_since.lock().unpoisoned().take();
            if let Some(since) = since {
                let mut a = self.instruments().common.clone();
                a.push(KeyValue::new("messaging.operation.name", "process"));
                a.push(KeyValue::new("messaging.operation.type", "process"));
                self.instruments()
                    .process_duration
                    .record(now.saturating_duration_since(since).as_secs_f64(), &a);
            }
        }

        /// A poll of `op` started at `started` ended at `now`, returning records of the
        /// (topic, partition) pairs `records` gives, or failing with `error`.
        pub fn poll_ended<'a>(
            &self,
            op: Operation,
            started: Instant,
            now: Instant,
            records: impl IntoIterator<Item = (&'a Arc<str>, i32)>,
            error: Option<&Error>,
        ) {
            let i = self.instruments();
            i.operation_duration.record(
                now.saturating_duration_since(started).as_secs_f64(),
                &self.attributes(op, error),
            );
            let counts = per_partition(records);
            if counts.is_empty() {
                return;
            }
            if op == Operation::Poll {
                *self.processing_since.lock().unpoisoned() = Some(now);
            }
            for (topic, partition, n) in counts {
                self.consumed(op, topic, partition, n);
            }
        }

        /// `n` records of `topic`'s `partition` were handed to the application by `op`.
        pub fn consumed(&self, op: Operation, topic: &Arc<str>, partition: i32, n: u64) {
            let i = self.instruments();
            let mut a = i.common.clone();
            a.push(KeyValue::new("messaging.operation.name", op.name()));
            a.push(KeyValue::new(
                "messaging.destination.name",
                opentelemetry::StringValue::from(topic.clone()),
            ));
            a.push(KeyValue::new(
                "messaging.destination.partition.id",
                partition.to_string(),
            ));
            i.consumed.add(n, &a);
        }

        /// A commit started at `started` ended at `now` (failing with `error`).
        pub fn commit_ended(&self, started: Instant, now: Instant, error: Option<&Error>) {
            self.instruments().operation_duration.record(
                now.saturating_duration_since(started).as_secs_f64(),
                &self.attributes(Operation::Commit, error),
            );
        }
    }
}

/// Records a stream hands out one at a time, counted per run of one partition (at most
/// [`RUN_MAX`] records) so that the instruments take one measurement per run, not per record.
pub(crate) const RUN_MAX: u64 = 1024;

#[cfg(feature = "opentelemetry")]
mod run {
    use std::sync::Arc;

    use super::{ConsumerInstruments, Operation, RUN_MAX};

    /// The run of one partition's records being counted (see [`RUN_MAX`]).
    #[derive(Debug, Default)]
    pub struct ConsumedRun {
        run: Option<(Arc<str>, i32, u64)>,
    }

    impl ConsumedRun {
        pub fn new() -> ConsumedRun {
            ConsumedRun::default()
        }

        /// One more record of `topic`'s `partition`: a run of another partition, or one that
        /// is full, is measured first.
        #[inline]
        pub fn push(&mut self, to: &ConsumerInstruments, topic: &Arc<str>, partition: i32) {
            match &mut self.run {
                Some((t, p, n)) if *p == partition && (Arc::ptr_eq(t, topic) || t == topic) => {
                    *n += 1;
                    if *n >= RUN_MAX {
                        self.flush(to);
                    }
                }
                _ => {
                    self.flush(to);
                    self.run = Some((topic.clone(), partition, 1));
                }
            }
        }

        /// Measures the run counted so far.
        pub fn flush(&mut self, to: &ConsumerInstruments) {
            if let Some((t, p, n)) = self.run.take() {
                to.consumed(Operation::Poll, &t, p, n);
            }
        }
    }
}

#[cfg(not(feature = "opentelemetry"))]
mod without_sdk {
    use std::sync::Arc;
    use std::time::Instant;

    use super::Operation;
    use crate::error::Error;

    /// Without the `opentelemetry` feature: nothing is recorded.
    #[derive(Debug)]
    pub struct ConsumerInstruments;

    impl ConsumerInstruments {
        pub fn new(_group_id: Option<&str>) -> ConsumerInstruments {
            ConsumerInstruments
        }

        #[inline]
        pub fn poll_started(&self, _op: Operation, _now: Instant) {}

        #[inline]
        pub fn poll_ended<'a>(
            &self,
            _op: Operation,
            _started: Instant,
            _now: Instant,
            _records: impl IntoIterator<Item = (&'a Arc<str>, i32)>,
            _error: Option<&Error>,
        ) {
        }

        #[inline]
        pub fn commit_ended(&self, _started: Instant, _now: Instant, _error: Option<&Error>) {}
    }

    /// Without the `opentelemetry` feature: nothing is counted.
    #[derive(Debug, Default)]
    pub struct ConsumedRun;

    impl ConsumedRun {
        pub fn new() -> ConsumedRun {
            ConsumedRun
        }

        #[inline]
        pub fn push(&mut self, _to: &ConsumerInstruments, _topic: &Arc<str>, _partition: i32) {}

        #[inline]
        pub fn flush(&mut self, _to: &ConsumerInstruments) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_counted_per_partition_in_order_of_first_appearance() {
        let a: Arc<str> = Arc::from("a");
        let a2: Arc<str> = Arc::from("a"); // the same topic through another allocation
        let b: Arc<str> = Arc::from("b");
        let records = [
            (&a, 0),
            (&a, 0),
            (&b, 0),
            (&a2, 1),
            (&a2, 0),
            (&b, 0),
            (&b, 0),
        ];
        let counts: Vec<(String, i32, u64)> = per_partition(records.iter().map(|(t, p)| (*t, *p)))
            .into_iter()
            .map(|(t, p, n)| (t.to_string(), p, n))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("a".to_string(), 0, 3),
                ("b".to_string(), 0, 3),
                ("a".to_string(), 1, 1)
            ]
        );
        assert!(per_partition(std::iter::empty()).is_empty());
    }

    #[test]
    fn operations_are_named_as_the_conventions_name_them() {
        assert_eq!(
            [Operation::Poll, Operation::RecoveryPoll, Operation::Commit]
                .map(|o| (o.name(), o.kind())),
            [
                ("poll", "receive"),
                ("poll", "receive"),
                ("commit", "settle")
            ]
        );
        assert_eq!(error_type(&Error::Timeout("x".into())), "TIMEOUT");
    }
}

//! How the record-taking exports take records and hand them to C, written once:
//! `lagless_consumer_poll`, `_poll_batch`, `_recovery_poll` and `_consume_batch` differ only in
//! the stream they take from and the shape they hand out.
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Duration;

use lagless::{ConsumerRecord, Result};

use crate::batch::TopicNames;
use crate::boundary::{nonzero, out_slots, write_out};
use crate::cast::to_box;
use crate::consumer::{lagless_consumer, CConsumer};
use crate::error::lagless_error;
use crate::message::{lagless_message, CMessage};

/// Which of the consumer's record streams a call takes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Stream {
    /// `poll`: runs due rebalance and commit callbacks on the calling thread.
    Main,
    /// `recovery_poll` (KIP-333 backlogs, for a thread of their own): runs no callbacks.
    Recovery,
}

/// How long one call of the core waits for a C timeout, and whether an empty answer is asked
/// again: a timeout >= 0 is the call's own; a negative one waits until records, an error or a
/// wakeup, in calls of an hour.
fn wait_plan(timeout_ms: i32) -> (Duration, bool) {
    match u64::try_from(timeout_ms) {
        Ok(ms) => (Duration::from_millis(ms), false),
        Err(_) => (Duration::from_secs(3600), true),
    }
}

/// Calls `take` as `wait_plan` says.
fn take_within(
    timeout_ms: i32,
    mut take: impl FnMut(Duration) -> Result<Vec<ConsumerRecord>>,
) -> Result<Vec<ConsumerRecord>> {
    let (each, again) = wait_plan(timeout_ms);
    loop {
        let records = take(each)?;
        if !again || !records.is_empty() {
            return Ok(records);
        }
    }
}

impl CConsumer {
    /// Up to `max` records (and at most `max.poll.records`) of `stream`, waiting as `timeout_ms`
    /// says. The core counts them as handed out: every one must reach the caller.
    pub(crate) fn take(
        &self,
        stream: Stream,
        timeout_ms: i32,
        max: usize,
    ) -> Result<Vec<ConsumerRecord>> {
        let c = self.open()?;
        match stream {
            Stream::Main => {
                let r = take_within(timeout_ms, |t| c.poll_at_most(t, max));
                self.run_commit_callbacks();
                r
            }
            Stream::Recovery => take_within(timeout_ms, |t| c.recovery_poll_at_most(t, max)),
        }
    }
}

/// A message of its own (the caller destroys it), named `topic`.
pub(crate) fn own_message(
    topic: Arc<std::ffi::CString>,
    record: ConsumerRecord,
) -> *mut lagless_message {
    to_box(CMessage {
        record,
        topic,
        in_batch: false,
    })
}

/// Writes `make(record)` of each record into the slots, in order, and returns how many. The core
/// returns at most the `max` it was asked for, the slots' count; more would be a bug of lagless,
/// which panics (an error at the boundary) rather than write past the caller's array.
fn hand_out<T>(
    records: Vec<ConsumerRecord>,
    slots: &mut [MaybeUninit<T>],
    mut make: impl FnMut(ConsumerRecord) -> T,
) -> usize {
    assert!(
        records.len() <= slots.len(),
        "{} records for {} slots",
        records.len(),
        slots.len()
    );
    let n = records.len();
    for (slot, r) in slots.iter_mut().zip(records) {
        slot.write(make(r));
    }
    n
}

/// The body of `lagless_consumer_poll_batch` (`Stream::Main`) and `_recovery_poll`
/// (`Stream::Recovery`): up to `capacity` records into `out_messages[0 .. *out_count]`, each a
/// message of its own.
pub(crate) fn poll_into(
    consumer: *mut lagless_consumer,
    stream: Stream,
    timeout_ms: i32,
    out_messages: *mut *mut lagless_message,
    capacity: usize,
    out_count: *mut usize,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_messages);
        try_out!(out_count);
        let records = h.take(stream, timeout_ms, nonzero(capacity, "capacity")?)?;
        let mut names = TopicNames::new(&h.topics);
        let n = hand_out(records, out_slots(out_messages, capacity), |r| {
            own_message(names.name(&r.topic), r)
        });
        write_out(out_count, n);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless::Error;

    fn records(n: i64) -> Vec<ConsumerRecord> {
        (0..n)
            .map(|offset| ConsumerRecord {
                topic: "orders".into(),
                partition: 0,
                offset,
                timestamp: 0,
                key: None,
                value: None,
                headers: Vec::new(),
                from_recovery: false,
            })
            .collect()
    }

    #[test]
    fn a_timeout_is_the_call_s_own_and_a_negative_one_asks_until_records() {
        assert_eq!(wait_plan(0), (Duration::ZERO, false));
        assert_eq!(wait_plan(250), (Duration::from_millis(250), false));
        assert_eq!(
            wait_plan(i32::MAX),
            (Duration::from_millis(i32::MAX as u64), false)
        );
        assert_eq!(wait_plan(-1), (Duration::from_secs(3600), true));
        assert_eq!(wait_plan(i32::MIN), (Duration::from_secs(3600), true));
    }

    #[test]
    fn take_within_asks_again_only_without_a_timeout_and_stops_at_an_error() {
        // With a timeout: one call, empty or not.
        let mut calls = 0;
        let got = take_within(5, |_| {
            calls += 1;
            Ok(Vec::new())
        });
        assert_eq!((got.unwrap().len(), calls), (0, 1));
        // Without: empty answers are asked again until records come ...
        let mut calls = 0;
        let got = take_within(-1, |_| {
            calls += 1;
            Ok(if calls < 3 { Vec::new() } else { records(2) })
        });
        assert_eq!((got.unwrap().len(), calls), (2, 3));
        // ... or an error (a wakeup).
        let mut calls = 0;
        let got = take_within(-1, |_| {
            calls += 1;
            if calls < 2 {
                Ok(Vec::new())
            } else {
                Err(Error::Wakeup)
            }
        });
        assert!(matches!(got, Err(Error::Wakeup)));
        assert_eq!(calls, 2);
    }

    #[test]
    fn records_are_handed_out_in_order_into_the_first_slots() {
        let mut slots = [MaybeUninit::new(-1i64); 4];
        assert_eq!(hand_out(records(3), &mut slots, |r| r.offset), 3);
        // SAFETY: every slot was initialized above.
        let got: Vec<i64> = slots.iter().map(|s| unsafe { s.assume_init() }).collect();
        assert_eq!(got, [0, 1, 2, -1]);
        assert_eq!(hand_out(Vec::new(), &mut slots, |r| r.offset), 0);
        assert_eq!(hand_out(records(4), &mut slots, |r| r.offset), 4);
    }

    #[test]
    #[should_panic(expected = "3 records for 2 slots")]
    fn more_records_than_slots_is_a_panic_not_a_write_past_the_array() {
        let mut slots = [MaybeUninit::<i64>::uninit(); 2];
        hand_out(records(3), &mut slots, |r| r.offset);
    }
}

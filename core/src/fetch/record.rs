//! The record the fetch path hands to `poll()`, `recovery_poll()` and the async front's
//! `recv()`. Defined here, below the consumer, so that delivery (`deliver.rs`) builds it without
//! importing the consumer that calls it; the public path is `lagless::consumer::ConsumerRecord`
//! (and `lagless::ConsumerRecord`).
use std::sync::Arc;

use bytes::Bytes;

use crate::protocol::records::Header;

/// A record as `poll()` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic the record was read from.
    pub topic: Arc<str>,
    /// The partition the record was read from.
    pub partition: i32,
    /// The record's offset in its partition; the position to commit after it is `offset + 1`.
    pub offset: i64,
    /// Milliseconds since the epoch (create time or log-append time, as the topic says).
    pub timestamp: i64,
    /// The record's key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The record's value; `None` for a null value (a tombstone on a compacted topic).
    pub value: Option<Bytes>,
    /// The record's headers, in the order they were written.
    pub headers: Vec<Header>,
    /// Whether the record came from a recovery stream (`enable.parallel.rebalance`).
    pub from_recovery: bool,
}

/// Key + value bytes of `records`: what the consumed-bytes metrics count (the Java consumer's
/// `bytes-consumed-*` count fetched bytes instead). Once per batch, after the fetch lock.
pub(crate) fn key_value_bytes(records: &[ConsumerRecord]) -> u64 {
    records
        .iter()
        .map(|r| {
            (r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())) as u64
        })
        .sum()
}

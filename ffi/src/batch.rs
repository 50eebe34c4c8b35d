//! Batches: the records of one poll handed to C in one piece.
//!
//! `lagless_consumer_consume_batch` moves the records the core returned into one `lagless_batch`
//! (one allocation for the handle and one for its message array, whatever the record count). Its
//! messages are views into it: keys, values and headers are the fetched bytes themselves (no
//! copy), and every message of a topic shares one NUL-terminated name, interned once per consumer.
//! The `lagless_message_*` accessors read them; everything they return stays valid until
//! `lagless_batch_destroy`, also after the consumer is closed or destroyed.
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use lagless::buffers::Pool;
use lagless::sync::Unpoisoned;
use lagless::ConsumerRecord;

use crate::boundary::{nonzero, read};
use crate::cast::{free_box, set_box, to_ref};
use crate::consumer::lagless_consumer;
use crate::error::{cstring_lossy, lagless_error};
use crate::message::{lagless_message, CMessage};
use crate::poll::Stream;

/// The consumer's NUL-terminated topic names, shared by every message of a topic.
#[derive(Default)]
pub(crate) struct TopicCache(Mutex<TopicCacheState>);

#[derive(Default)]
struct TopicCacheState {
    names: HashMap<Arc<str>, Arc<CString>>,
    /// The names handed out last, by the record's own `Arc<str>` (the core shares one per
    /// partition): the per-message poll asks once per record, round-robin over the partitions,
    /// and finds the name here by pointer without hashing it.
    recent: VecDeque<(Arc<str>, Arc<CString>)>,
}

/// How many partitions' topic names [`TopicCacheState::recent`] keeps.
const RECENT_TOPICS: usize = 32;

impl TopicCache {
    /// The C name of `topic`, made once per consumer and topic.
    pub(crate) fn name(&self, topic: &Arc<str>) -> Arc<CString> {
        let mut s = self.0.lock().unpoisoned();
        if let Some((_, c)) = s.recent.iter().find(|(t, _)| Arc::ptr_eq(t, topic)) {
            return c.clone();
        }
        let c = s
            .names
            .entry(topic.clone())
            .or_insert_with(|| Arc::new(cstring_lossy(topic)))
            .clone();
        if s.recent.len() == RECENT_TOPICS {
            s.recent.pop_front();
        }
        s.recent.push_back((topic.clone(), c.clone()));
        c
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unpoisoned().names.len()
    }
}

/// The names of the topics met in one poll: the consumer's cache is locked once per topic per
/// poll, not once per record.
pub(crate) struct TopicNames<'a> {
    cache: &'a TopicCache,
    seen: Vec<(Arc<str>, Arc<CString>)>,
}

impl<'a> TopicNames<'a> {
    pub(crate) fn new(cache: &'a TopicCache) -> Self {
        TopicNames {
            cache,
            seen: Vec::new(),
        }
    }

    /// The C name of `topic`. A poll's records come in runs of one partition, so the last name
    /// is checked first (by pointer: the core shares one `Arc<str>` per topic).
    pub(crate) fn name(&mut self, topic: &Arc<str>) -> Arc<CString> {
        if let Some((_, c)) = self
            .seen
            .iter()
            .rev()
            .find(|(t, _)| Arc::ptr_eq(t, topic) || **t == **topic)
        {
            return c.clone();
        }
        let c = self.cache.name(topic);
        self.seen.push((topic.clone(), c.clone()));
        c
    }

    /// A message owned by a batch (`lagless_message_destroy` leaves it alone).
    pub(crate) fn view(&mut self, record: ConsumerRecord) -> CMessage {
        let topic = self.name(&record.topic);
        CMessage {
            record,
            topic,
            in_batch: true,
        }
    }
}

/// The records of one `lagless_consumer_consume_batch`, in the order the consumer delivered
/// them. Owned by the caller, freed with `lagless_batch_destroy`. Immutable: any thread may read
/// it, one thread destroys it.
pub struct lagless_batch {
    _private: [u8; 0],
}

castable! { lagless_batch: Box<CBatch> }

/// What a `lagless_batch` points at.
pub(crate) struct CBatch {
    messages: Vec<CMessage>,
}

/// The message arrays of destroyed batches, kept for the next batches to fill (the core's
/// buffer pool, see `lagless::buffers`). A loop of `consume_batch` and `lagless_batch_destroy`
/// made and freed one array per batch (76 KB for 500 messages), which glibc took from the top of
/// the heap and trimmed back at times, to be faulted in again: 5M x 100 B lz4 records read
/// 18-19k page faults against 7.5-7.7k with the arrays kept, and 20% more CPU.
static MESSAGE_ARRAYS: Pool<CMessage> = Pool::new();

impl Drop for CBatch {
    fn drop(&mut self) {
        // The pool drops the records (their buffers go back to the core's pools) and keeps the
        // array if it has room.
        MESSAGE_ARRAYS.give(std::mem::take(&mut self.messages));
    }
}

/// Waits up to `timeout_ms` (negative: until a record, an error or a wakeup) and hands over up
/// to `max` records (and at most `max.poll.records`) as one batch in `*out_batch`, which the
/// caller frees with `lagless_batch_destroy`. The batch is empty (count 0, not NULL) when the
/// timeout passed with no record. Costs one allocation per batch, not per record: the messages
/// are views into the batch (see `lagless_batch_message`). Otherwise the same as
/// `lagless_consumer_poll_batch`: due rebalance and commit callbacks run on this thread first,
/// positions advance past the records handed over, `max` 0 is `LAGLESS_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn lagless_consumer_consume_batch(
    consumer: *mut lagless_consumer,
    max: usize,
    timeout_ms: i32,
    out_batch: *mut *mut lagless_batch,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_batch);
        let records = h.take(Stream::Main, timeout_ms, nonzero(max, "max")?)?;
        let mut names = TopicNames::new(&h.topics);
        let mut messages = MESSAGE_ARRAYS.take(records.len());
        messages.extend(records.into_iter().map(|r| names.view(r)));
        set_box(out_batch, CBatch { messages });
        Ok(())
    }
}

/// The number of messages in the batch; 0 for NULL.
#[no_mangle]
pub extern "C" fn lagless_batch_count(batch: *const lagless_batch) -> usize {
    read(batch, |b| b.messages.len())
}

/// Message `index` of the batch, borrowed from it: read it with the `lagless_message_*`
/// accessors until `lagless_batch_destroy` (`lagless_message_destroy` on it does nothing). NULL
/// for a NULL batch or an index past the end.
#[no_mangle]
pub extern "C" fn lagless_batch_message(
    batch: *const lagless_batch,
    index: usize,
) -> *const lagless_message {
    read(batch, |b| {
        b.messages.get(index).map_or(std::ptr::null(), to_ref)
    })
}

/// Frees a batch and everything borrowed from it. NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_batch_destroy(batch: *mut lagless_batch) {
    ffi_panic_boundary! { free_box(batch) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cast::to_box;

    fn record(topic: &Arc<str>) -> ConsumerRecord {
        ConsumerRecord {
            topic: topic.clone(),
            partition: 0,
            offset: 0,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
            from_recovery: false,
        }
    }

    #[test]
    fn one_name_per_topic_shared_by_its_messages_and_across_polls() {
        let cache = TopicCache::default();
        let (a, b): (Arc<str>, Arc<str>) = ("orders".into(), "payments".into());
        // The same name under another allocation, as a later fetch may bring it.
        let a2: Arc<str> = "orders".into();
        let mut names = TopicNames::new(&cache);
        let m = [a.clone(), b.clone(), a2.clone(), a.clone()].map(|t| names.view(record(&t)));
        assert!(Arc::ptr_eq(&m[0].topic, &m[2].topic) && Arc::ptr_eq(&m[0].topic, &m[3].topic));
        assert!(!Arc::ptr_eq(&m[0].topic, &m[1].topic));
        assert_eq!(m[1].topic.to_str().unwrap(), "payments");
        assert_eq!(cache.len(), 2);
        // A later poll finds the names in the consumer's cache.
        let again = TopicNames::new(&cache).view(record(&a2));
        assert!(Arc::ptr_eq(&again.topic, &m[0].topic));
        assert!(m.iter().all(|m| m.in_batch));
    }

    #[test]
    fn the_per_message_lookup_keeps_a_bounded_list_of_recent_names() {
        let cache = TopicCache::default();
        // One Arc per partition, as the core has them, more than the list holds.
        let arcs: Vec<Arc<str>> = (0..RECENT_TOPICS * 2)
            .map(|i| Arc::from(if i % 2 == 0 { "orders" } else { "payments" }))
            .collect();
        for _ in 0..2 {
            for a in &arcs {
                assert_eq!(cache.name(a).to_str().unwrap(), &**a);
            }
        }
        let s = cache.0.lock().unwrap();
        assert_eq!(s.names.len(), 2, "one C name per topic");
        assert_eq!(s.recent.len(), RECENT_TOPICS);
        let orders = s.names.get("orders").unwrap();
        assert!(s
            .recent
            .iter()
            .all(|(t, c)| &**t != "orders" || Arc::ptr_eq(c, orders)));
    }

    #[test]
    fn a_destroyed_batch_leaves_its_emptied_array_for_the_next() {
        let cache = TopicCache::default();
        let topic: Arc<str> = "orders".into();
        let value = bytes::Bytes::from(vec![7u8; 100_000]);
        let mut names = TopicNames::new(&cache);
        let mut messages = MESSAGE_ARRAYS.take(500);
        messages.extend((0..500).map(|_| {
            let mut r = record(&topic);
            r.value = Some(value.slice(10..20));
            names.view(r)
        }));
        let at = messages.as_ptr();
        let b: *mut lagless_batch = to_box(CBatch { messages });
        assert_eq!(lagless_batch_count(b), 500);
        lagless_batch_destroy(b);
        // The records are gone (no slice of the value is held any more) ...
        assert!(value.is_unique());
        // ... and the next batch of about that size fills the same array, emptied.
        let again = MESSAGE_ARRAYS.take(450);
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
        assert!(again.capacity() >= 500);
    }

    #[test]
    fn null_and_out_of_range_give_neutral_values() {
        assert_eq!(lagless_batch_count(std::ptr::null()), 0);
        assert!(lagless_batch_message(std::ptr::null(), 0).is_null());
        lagless_batch_destroy(std::ptr::null_mut());
        let b: *mut lagless_batch = to_box(CBatch {
            messages: Vec::new(),
        });
        assert_eq!(lagless_batch_count(b), 0);
        assert!(lagless_batch_message(b, 0).is_null());
        lagless_batch_destroy(b);
    }
}

//! The consumer handle.
//!
//! Thread rule (the core's, kept here): rebalance callbacks and commit callbacks run only on the
//! thread that called `lagless_consumer_poll`, `_poll_batch`, `_commit_sync`, `_unsubscribe` or
//! `_close`, never on a library thread.
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lagless::sync::Unpoisoned;
use lagless::{Consumer, Error, OffsetAndMetadata, Result, TopicPartition};

use crate::batch::TopicCache;
use crate::boundary::{api_timeout, c_strs, read, write_opt, write_out, Opaque};
use crate::cast::{free_box, set_box, to_ref, try_from};
use crate::config::lagless_config;
use crate::error::{cstring_lossy, lagless_error, CError};
use crate::message::lagless_message;
use crate::poll::{own_message, poll_into, Stream};
use crate::rebalance::CCallbacks;
use crate::tplist::{lagless_tplist, TpList, LAGLESS_OFFSET_INVALID};

/// A Kafka consumer. Created by `lagless_consumer_new`, freed by `lagless_consumer_destroy`.
///
/// Thread-safety: the handle may move between threads and its functions are memory-safe from
/// any thread, but poll, commit, subscribe and close are meant for one thread at a time (the
/// thread that polls runs the callbacks). `lagless_consumer_wakeup` may be called from any thread
/// at any time.
pub struct lagless_consumer {
    _private: [u8; 0],
}

castable! { lagless_consumer: Box<CConsumer> }

/// What a `lagless_consumer` points at.
pub(crate) struct CConsumer {
    inner: Consumer,
    closed: AtomicBool,
    /// NUL-terminated topic names shared by every message of a topic.
    pub(crate) topics: TopicCache,
    /// Finished asynchronous commits whose callbacks wait for the polling thread.
    commits_done: Arc<Mutex<VecDeque<CommitDone>>>,
    /// The rebalance callbacks, shared with the listener the core holds.
    pub(crate) callbacks: Arc<Mutex<CCallbacks>>,
}

/// A rebalance callback: `partitions` is borrowed for the duration of the call. Return 0 on
/// success; any other value makes the poll (or close, unsubscribe) that ran the callback return
/// `LAGLESS_ERR_CALLBACK` after the assignment change completed. The callback may call consumer
/// functions on `consumer` (e.g. `lagless_consumer_commit_sync` inside `on_revoked`) but must not
/// destroy it, and must not unwind (longjmp, C++ exceptions) through lagless.
pub type lagless_rebalance_cb = Option<
    unsafe extern "C" fn(
        opaque: *mut c_void,
        consumer: *mut lagless_consumer,
        partitions: *const lagless_tplist,
    ) -> c_int,
>;

/// The rebalance listener given to `lagless_consumer_subscribe`. Its callbacks run only inside
/// `lagless_consumer_poll`/`_poll_batch`, `_close` and `_unsubscribe`, on the thread that called
/// them. Any callback may be NULL. `opaque` is passed to each callback untouched and must stay
/// valid until the consumer is closed or unsubscribed (or a new listener replaces it). The
/// layout is fixed; the learner-assignment callback is set with
/// `lagless_consumer_set_learning_callback`.
#[repr(C)]
pub struct lagless_rebalance_listener {
    pub opaque: *mut c_void,
    /// Partitions newly assigned (called once per rebalance, possibly with an empty list).
    pub on_assigned: lagless_rebalance_cb,
    /// Partitions given up; commit their offsets here when committing by hand.
    pub on_revoked: lagless_rebalance_cb,
    /// Partitions that may already belong to another member (committing is no longer possible).
    /// When NULL, `on_revoked` is called instead.
    pub on_lost: lagless_rebalance_cb,
}

// The caller's own struct, read during `lagless_consumer_subscribe`.
castable! { lagless_rebalance_listener: Ref<lagless_rebalance_listener> }

/// Called with the outcome of `lagless_consumer_commit_async`: `err` is NULL on success, else
/// borrowed for the duration of the call. Runs on the polling thread.
pub type lagless_commit_cb =
    Option<unsafe extern "C" fn(opaque: *mut c_void, err: *const lagless_error)>;

/// A finished asynchronous commit: the C callback, its opaque pointer, the outcome.
type CommitDone = (lagless_commit_cb, Opaque, Result<()>);

impl CConsumer {
    pub(crate) fn open(&self) -> Result<&Consumer> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(&self.inner)
        }
    }

    /// Runs the callbacks of finished asynchronous commits, on this (the caller's) thread.
    pub(crate) fn run_commit_callbacks(&self) {
        loop {
            let next = self.commits_done.lock().unpoisoned().pop_front();
            let Some((cb, opaque, res)) = next else { break };
            if let Some(cb) = cb {
                let err = res.err().map(|e| CError::new(&e));
                let p = err.as_ref().map_or(std::ptr::null(), to_ref);
                // SAFETY: the caller's callback with its opaque pointer; `err` outlives the call.
                unsafe { cb(opaque.0, p) };
            }
        }
    }
}

/// The offsets of a commit: those of `offsets`, or None (the consumed positions) for NULL.
fn commit_offsets(
    offsets: *const lagless_tplist,
) -> Result<Option<Vec<(TopicPartition, OffsetAndMetadata)>>> {
    try_from(offsets).map(TpList::offsets).transpose()
}

/// The body of the exports that apply one consumer operation to a list of partitions.
fn on_partitions(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
    op: fn(&Consumer, &[TopicPartition]) -> Result<()>,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let list = try_ref!(partitions);
        op(h.open()?, &list.partitions())
    }
}

/// The body of the exports that hand out a new list of some of the consumer's partitions.
fn partitions_of(
    consumer: *mut lagless_consumer,
    out_partitions: *mut *mut lagless_tplist,
    of: fn(&Consumer) -> Vec<TopicPartition>,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_partitions);
        set_box(out_partitions, TpList::from_partitions(of(h.open()?)));
        Ok(())
    }
}

/// A consumer from `config` (copied; it may be destroyed afterwards). A bad setting gives
/// `LAGLESS_ERR_CONFIG` naming the key. No connection is made before the first call that needs
/// one. On success `*out_consumer` receives the new handle.
#[no_mangle]
pub extern "C" fn lagless_consumer_new(
    config: *const lagless_config,
    out_consumer: *mut *mut lagless_consumer,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_ref!(config);
        try_out!(out_consumer);
        let inner = Consumer::from_config(config)?;
        set_box(out_consumer, CConsumer {
            inner,
            closed: AtomicBool::new(false),
            topics: TopicCache::default(),
            commits_done: Arc::new(Mutex::new(VecDeque::new())),
            callbacks: Arc::new(Mutex::new(CCallbacks::default())),
        });
        Ok(())
    }
}

/// Joins the group `group.id` and reads the partitions it assigns from the `topic_count` topics in
/// `topics`. Replaces an earlier subscription. `listener` may be NULL (no callbacks, or keep the
/// earlier listener); it is copied, but its `opaque` must stay valid (see
/// `lagless_rebalance_listener`). The group is joined inside the following polls.
#[no_mangle]
pub extern "C" fn lagless_consumer_subscribe(
    consumer: *mut lagless_consumer,
    topics: *const *const c_char,
    topic_count: usize,
    listener: *const lagless_rebalance_listener,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let names = c_strs(topics, topic_count, "topics")?;
        h.subscribe_with(consumer, listener, |l| c.subscribe(&names, l))
    }
}

/// Like `lagless_consumer_subscribe`, for every topic whose whole name matches `pattern`, a
/// regular expression (Rust `regex` syntax, anchored at both ends: `orders-.*` matches
/// `orders-eu`, not `old-orders-eu`). Topics created later that match join the subscription when
/// metadata is next refreshed (`metadata.max.age.ms`). A pattern that does not compile gives
/// `LAGLESS_ERR_INVALID_ARGUMENT` naming it.
#[no_mangle]
pub extern "C" fn lagless_consumer_subscribe_pattern(
    consumer: *mut lagless_consumer,
    pattern: *const c_char,
    listener: *const lagless_rebalance_listener,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let pattern = try_str!(pattern);
        let c = h.open()?;
        h.subscribe_with(consumer, listener, |l| c.subscribe_pattern(pattern, l))
    }
}

/// Like `lagless_consumer_subscribe`, for the topics whose whole name matches `regex`, matched by
/// the group coordinator rather than by this consumer (KIP-848's server-side regex, the Java
/// client's `subscribe(SubscriptionPattern)`): RE2/J syntax, `orders-.*` matches `orders-eu`,
/// not `old-orders-eu`. Needs `group.protocol=consumer`, otherwise `LAGLESS_ERR_ILLEGAL_STATE`;
/// an empty `regex` gives `LAGLESS_ERR_INVALID_ARGUMENT`. The coordinator resolves the regex
/// asynchronously, so the first assignment may come some polls after the join; a regex it cannot
/// compile makes `lagless_consumer_poll` fail with `LAGLESS_ERR_KAFKA` (Kafka error 128,
/// INVALID_REGULAR_EXPRESSION) naming it, until the consumer unsubscribes.
#[no_mangle]
pub extern "C" fn lagless_consumer_subscribe_regex(
    consumer: *mut lagless_consumer,
    regex: *const c_char,
    listener: *const lagless_rebalance_listener,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let regex = try_str!(regex);
        let c = h.open()?;
        h.subscribe_with(consumer, listener, |l| c.subscribe_regex(regex, l))
    }
}

/// The topics of the current subscription (for a pattern: those it matched so far), each with
/// partition -1, in a new list the caller frees with `lagless_tplist_destroy`; empty when not
/// subscribed.
#[no_mangle]
pub extern "C" fn lagless_consumer_subscription(
    consumer: *mut lagless_consumer,
    out_topics: *mut *mut lagless_tplist,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_topics);
        let topics = h.open()?.subscription();
        let list = TpList::from_partitions(topics.iter().map(|t| TopicPartition::new(t, -1)));
        set_box(out_topics, list);
        Ok(())
    }
}

/// The member's place in its group: the generation it belongs to (-1 before it has joined) and
/// its member id, a new string the caller frees with `lagless_string_destroy` (empty before the
/// first join). Either out-parameter may be NULL. `LAGLESS_ERR_ILLEGAL_STATE` without a
/// subscription.
#[no_mangle]
pub extern "C" fn lagless_consumer_group_metadata(
    consumer: *mut lagless_consumer,
    out_generation_id: *mut i32,
    out_member_id: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let md = h.open()?.group_metadata().ok_or_else(|| {
            Error::IllegalState("group metadata needs a subscription".into())
        })?;
        write_opt(out_generation_id, md.generation_id);
        if !out_member_id.is_null() {
            write_out(out_member_id, cstring_lossy(&md.member_id).into_raw());
        }
        Ok(())
    }
}

/// Asks the group for a rebalance (e.g. after the member's capacity changed); the next poll
/// starts it. `reason` (may be NULL) is logged and sent to the coordinator.
/// `LAGLESS_ERR_ILLEGAL_STATE` without a subscription.
#[no_mangle]
pub extern "C" fn lagless_consumer_enforce_rebalance(
    consumer: *mut lagless_consumer,
    reason: *const c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let reason = if reason.is_null() { "requested by the application" } else { try_str!(reason) };
        h.open()?.enforce_rebalance(reason)
    }
}

/// Learner assignments (`partition.assignment.strategy=learner-sticky,cooperative-sticky`): sets
/// the callback told of partitions this member will own once it is ready, while their current
/// owners keep consuming them. Warm up inside it (load state, fill caches); return 0 when ready:
/// the member then rejoins and the partitions move to it (their owners revoke them, a later
/// rebalance assigns them here, with `on_assigned`). Any other value leaves the member not ready
/// (the owners keep the partitions) and makes the poll that ran the callback return
/// `LAGLESS_ERR_CALLBACK`; a later poll calls it again for them after a backoff
/// (`retry.backoff.ms`, growing to `retry.backoff.max.ms`). It runs under the thread rules
/// of `lagless_rebalance_listener` (inside poll, on the caller's thread), with `opaque` passed
/// untouched; `opaque` must stay valid until the consumer is closed or the callback is replaced.
/// May be called before or after `lagless_consumer_subscribe`, which keeps it; `on_learning`
/// NULL clears it (learned partitions are then ready at once). Without learner-sticky chosen by
/// the group it is never called.
#[no_mangle]
pub extern "C" fn lagless_consumer_set_learning_callback(
    consumer: *mut lagless_consumer,
    on_learning: lagless_rebalance_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        h.open()?;
        let mut cbs = h.callbacks.lock().unpoisoned();
        cbs.on_learning = on_learning;
        cbs.learning_opaque = Opaque(opaque);
        Ok(())
    }
}

/// Reads exactly the partitions in `partitions` (manual assignment, no group rebalancing).
/// NULL or an empty list unassigns everything. Not allowed while subscribed.
#[no_mangle]
pub extern "C" fn lagless_consumer_assign(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let parts = try_from(partitions).map(TpList::partitions).unwrap_or_default();
        c.assign(&parts)
    }
}

/// The partitions currently assigned, as a new list the caller destroys.
#[no_mangle]
pub extern "C" fn lagless_consumer_assignment(
    consumer: *mut lagless_consumer,
    out_partitions: *mut *mut lagless_tplist,
) -> *mut lagless_error {
    partitions_of(consumer, out_partitions, Consumer::assignment)
}

/// Leaves the group: commits (with auto-commit), calls `on_revoked` on this thread, sends
/// LeaveGroup.
#[no_mangle]
pub extern "C" fn lagless_consumer_unsubscribe(
    consumer: *mut lagless_consumer,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let r = h.open()?.unsubscribe();
        h.run_commit_callbacks();
        r
    }
}

/// Waits up to `timeout_ms` (negative: until a record, an error or a wakeup) for the next record.
/// Runs due rebalance and commit callbacks on this thread first. On success `*out_message`
/// receives a message the caller destroys, or NULL when the timeout passed with no record.
/// Errors of single partitions (unknown topic, stuck partition) come out here one per call;
/// the consumer keeps serving the others. `LAGLESS_ERR_WAKEUP` after `lagless_consumer_wakeup`.
#[no_mangle]
pub extern "C" fn lagless_consumer_poll(
    consumer: *mut lagless_consumer,
    timeout_ms: i32,
    out_message: *mut *mut lagless_message,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_message);
        let mut records = h.take(Stream::Main, timeout_ms, 1)?;
        // One record: the consumer's cache directly (its last name), no per-poll list.
        let m = records
            .pop()
            .map_or(std::ptr::null_mut(), |r| own_message(h.topics.name(&r.topic), r));
        write_out(out_message, m);
        Ok(())
    }
}

/// Like `lagless_consumer_poll`, returning up to `capacity` messages (and at most
/// `max.poll.records`) into `out_messages[0 .. *out_count]`. Each message is the caller's to
/// destroy. `*out_count` is 0 when the timeout passed with no record. Positions advance only past
/// the messages returned.
#[no_mangle]
pub extern "C" fn lagless_consumer_poll_batch(
    consumer: *mut lagless_consumer,
    timeout_ms: i32,
    out_messages: *mut *mut lagless_message,
    capacity: usize,
    out_count: *mut usize,
) -> *mut lagless_error {
    poll_into(
        consumer,
        Stream::Main,
        timeout_ms,
        out_messages,
        capacity,
        out_count,
    )
}

/// `parallel.rebalance.recovery.poll`: the recovery streams' records (KIP-333 backlogs), for a
/// thread of their own while another thread polls (which then gets main-stream records only).
/// Waits up to `timeout_ms` (negative: until a record, a wakeup or close) and returns up to
/// `capacity` messages (and at most `max.poll.records`) into `out_messages[0 .. *out_count]`,
/// each the caller's to destroy; `*out_count` is 0 when the timeout passed with no record.
/// The messages count as processed, for every commit, once the same thread calls again: until then
/// commits hold at the first of them, and a partition revoked meanwhile gives them to its next
/// owner again. A recovery thread that stops makes one last call (timeout 0) once its last
/// messages are processed. Runs no rebalance or commit callbacks; errors of single partitions
/// come out of the polling thread's poll. `LAGLESS_ERR_WAKEUP` after `lagless_consumer_wakeup`,
/// `LAGLESS_ERR_CLOSED` once closed, `LAGLESS_ERR_ILLEGAL_STATE` without the setting.
/// Thread-safety: any thread may call it, the polling one too (to share a backlog between its
/// polls); each thread's messages are held until its own next call. With more than one thread
/// calling it, a partition's backlog is no longer processed in order.
#[no_mangle]
pub extern "C" fn lagless_consumer_recovery_poll(
    consumer: *mut lagless_consumer,
    timeout_ms: i32,
    out_messages: *mut *mut lagless_message,
    capacity: usize,
    out_count: *mut usize,
) -> *mut lagless_error {
    poll_into(
        consumer,
        Stream::Recovery,
        timeout_ms,
        out_messages,
        capacity,
        out_count,
    )
}

/// Commits and waits (up to `timeout_ms`; negative: `default.api.timeout.ms`). `offsets` NULL
/// commits the consumed positions of every assigned partition (the offset after the last message
/// polled); otherwise each entry's offset (set with `lagless_tplist_set_offset`) is committed,
/// with its metadata (`lagless_tplist_set_metadata`). With `enable.parallel.rebalance`, an offset
/// past the low-water mark of a partition whose recovery stream still runs is committed as the
/// low-water mark with the recovery token: the group's offset never passes undelivered records.
/// Allowed inside rebalance callbacks.
#[no_mangle]
pub extern "C" fn lagless_consumer_commit_sync(
    consumer: *mut lagless_consumer,
    offsets: *const lagless_tplist,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let offsets = commit_offsets(offsets)?;
        let r = c.commit_sync(offsets.as_deref(), api_timeout(timeout_ms));
        h.run_commit_callbacks();
        r
    }
}

/// Sends a commit (of `offsets`, or the consumed positions when NULL) and returns at once.
/// `callback` (may be NULL) runs with the outcome on the polling thread, inside a later
/// `lagless_consumer_poll`/`_poll_batch`, `_commit_sync`, `_unsubscribe` or `_close`. Callbacks
/// of commits still unfinished when the consumer is closed are not called.
#[no_mangle]
pub extern "C" fn lagless_consumer_commit_async(
    consumer: *mut lagless_consumer,
    offsets: *const lagless_tplist,
    callback: lagless_commit_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let offsets = commit_offsets(offsets)?;
        let done = h.commits_done.clone();
        let opaque = Opaque(opaque);
        // The core runs this on the polling thread for a group member, but on an I/O thread for
        // a manually assigned consumer: queue the outcome either way and run the C callback from
        // the caller's next poll.
        let cb: lagless::CommitCallback = Box::new(move |res| {
            let res = res.and_then(|per_partition| {
                per_partition.into_iter().try_for_each(|(_, _, r)| r)
            });
            done.lock().unpoisoned().push_back((callback, opaque, res));
        });
        c.commit_async(offsets, Some(cb))
    }
}

/// Fills in, for each entry of `partitions`, the group's committed offset (or
/// `LAGLESS_OFFSET_INVALID` when there is none) and its commit metadata (see
/// `lagless_tplist_get_metadata`; with `enable.parallel.rebalance` it may be the recovery token), waiting up to `timeout_ms` (negative:
/// `default.api.timeout.ms`). The list's offsets are written only on success.
#[no_mangle]
pub extern "C" fn lagless_consumer_committed(
    consumer: *mut lagless_consumer,
    partitions: *mut lagless_tplist,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let list = try_mut!(partitions);
        let c = h.open()?;
        let res = c.committed(&list.partitions(), api_timeout(timeout_ms))?;
        for (e, (_, om)) in list.items.iter_mut().zip(res) {
            let (offset, metadata) = om.map_or((LAGLESS_OFFSET_INVALID, String::new()), |o| (o.offset, o.metadata));
            e.offset = offset;
            e.metadata = cstring_lossy(&metadata);
        }
        Ok(())
    }
}

/// The offset of the next record the consumer returns for (`topic`, `partition`), which must be
/// assigned; looks it up (committed offset or reset policy) if needed, up to `timeout_ms`
/// (negative: `default.api.timeout.ms`).
#[no_mangle]
pub extern "C" fn lagless_consumer_position(
    consumer: *mut lagless_consumer,
    topic: *const c_char,
    partition: i32,
    timeout_ms: i32,
    out_offset: *mut i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let topic = try_str!(topic);
        try_out!(out_offset);
        let c = h.open()?;
        let pos = c.position(&TopicPartition::new(topic, partition), api_timeout(timeout_ms))?;
        write_out(out_offset, pos);
        Ok(())
    }
}

/// KIP-333 (`enable.parallel.rebalance`): whether (`topic`, `partition`) has a recovery stream
/// still draining the backlog it was taken over with, i.e. whether messages with
/// `lagless_message_from_recovery` true may still come for it. On success `*out_active`
/// receives the answer (always false with the mode off). `LAGLESS_ERR_ILLEGAL_STATE` when the
/// partition is not assigned to this consumer; `LAGLESS_ERR_CLOSED` after
/// `lagless_consumer_close`. Does not wait.
#[no_mangle]
pub extern "C" fn lagless_consumer_recovery_active(
    consumer: *mut lagless_consumer,
    topic: *const c_char,
    partition: i32,
    out_active: *mut bool,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let topic = try_str!(topic);
        try_out!(out_active);
        let active = h.open()?.recovery_active(&TopicPartition::new(topic, partition))?;
        write_out(out_active, active);
        Ok(())
    }
}

/// KIP-333 (`enable.parallel.rebalance`): whether any assigned partition has a recovery stream
/// still draining a backlog (the proposal's "child consumer"). False with the mode off, for a
/// closed consumer and for NULL. Does not wait.
#[no_mangle]
pub extern "C" fn lagless_consumer_child_consumer_is_alive(
    consumer: *mut lagless_consumer,
) -> bool {
    read(consumer, |h| {
        h.open().is_ok_and(Consumer::child_consumer_is_alive)
    })
}

/// What the consumer is doing now, as one JSON object (README.md's "Metrics" section
/// names every field): each assigned partition's position, committed offset, watermarks, lag and
/// deliveries, the group member's state and rebalances, and the totals. A value not known yet is
/// `null`. A new string the caller frees with `lagless_string_destroy`. `LAGLESS_ERR_CLOSED`
/// after `lagless_consumer_close`. Does not wait.
#[no_mangle]
pub extern "C" fn lagless_consumer_metrics_json(
    consumer: *mut lagless_consumer,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_json);
        let json = h.open()?.metrics().to_json_string();
        write_out(out_json, cstring_lossy(&json).into_raw());
        Ok(())
    }
}

/// The same snapshot as `lagless_consumer_metrics_json`, in the Prometheus text exposition
/// format 0.0.4 (serve it with `Content-Type: text/plain; version=0.0.4; charset=utf-8`):
/// `lagless_consumer_*` metrics labelled with `client_id`, `group_id` and, per partition,
/// `topic` and `partition` (README.md's "Metrics" section maps each to its JSON field). A value
/// not known yet has no sample. A new string the caller frees with `lagless_string_destroy`.
/// `LAGLESS_ERR_CLOSED` after `lagless_consumer_close`. Does not wait.
#[no_mangle]
pub extern "C" fn lagless_consumer_metrics_prometheus(
    consumer: *mut lagless_consumer,
    out_text: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_text);
        let text = h.open()?.metrics().to_prometheus();
        write_out(out_text, cstring_lossy(&text).into_raw());
        Ok(())
    }
}

/// Makes the next record returned for (`topic`, `partition`) the one at `offset` (>= 0). The
/// partition must be assigned.
#[no_mangle]
pub extern "C" fn lagless_consumer_seek(
    consumer: *mut lagless_consumer,
    topic: *const c_char,
    partition: i32,
    offset: i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let topic = try_str!(topic);
        h.open()?.seek(&TopicPartition::new(topic, partition), offset)
    }
}

/// Makes the next record returned for each partition of `partitions` (assigned ones) the first
/// one still in the log (`lagless_consumer_seek_to_beginning`) or the next one written after the
/// call (`_seek_to_end`). The position is looked up lazily, by the next poll or position call.
/// Like `lagless_consumer_seek`, it ends any recovery stream of the partition.
#[no_mangle]
pub extern "C" fn lagless_consumer_seek_to_beginning(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
) -> *mut lagless_error {
    on_partitions(consumer, partitions, Consumer::seek_to_beginning)
}

/// See `lagless_consumer_seek_to_beginning`.
#[no_mangle]
pub extern "C" fn lagless_consumer_seek_to_end(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
) -> *mut lagless_error {
    on_partitions(consumer, partitions, Consumer::seek_to_end)
}

/// Looks up offsets by time: each entry of `partitions` carries a timestamp (milliseconds since
/// the epoch, >= 0) in its offset field and, on success, gets the offset of the earliest record
/// whose timestamp is at or after it, or `LAGLESS_OFFSET_INVALID` when the partition has no such
/// record. The partitions need not be assigned. Waits up to `timeout_ms` (negative:
/// `default.api.timeout.ms`); the list is changed only on success.
#[no_mangle]
pub extern "C" fn lagless_consumer_offsets_for_times(
    consumer: *mut lagless_consumer,
    partitions: *mut lagless_tplist,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let list = try_mut!(partitions);
        let query: Vec<(TopicPartition, i64)> =
            list.items.iter().map(|e| (e.tp.clone(), e.offset)).collect();
        // The core answers once per partition, in partition order: match by partition.
        let found: HashMap<TopicPartition, i64> = h
            .open()?
            .offsets_for_times(&query, api_timeout(timeout_ms))?
            .into_iter()
            .map(|(tp, o)| (tp, o.map_or(LAGLESS_OFFSET_INVALID, |o| o.0)))
            .collect();
        for e in &mut list.items {
            e.offset = found.get(&e.tp).copied().unwrap_or(LAGLESS_OFFSET_INVALID);
        }
        Ok(())
    }
}

/// The log start offset (`*out_low`) and high watermark (`*out_high`: the offset the next record
/// written will get) of (`topic`, `partition`), asked of its leader; the partition need not be
/// assigned. Either out-parameter may be NULL. Waits up to `timeout_ms` (negative:
/// `default.api.timeout.ms`). An unknown topic gives `LAGLESS_ERR_UNKNOWN_TOPIC`.
#[no_mangle]
pub extern "C" fn lagless_consumer_watermarks(
    consumer: *mut lagless_consumer,
    topic: *const c_char,
    partition: i32,
    timeout_ms: i32,
    out_low: *mut i64,
    out_high: *mut i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let topic = try_str!(topic);
        let w = h.open()?.watermarks(&TopicPartition::new(topic, partition), api_timeout(timeout_ms))?;
        write_opt(out_low, w.low);
        write_opt(out_high, w.high);
        Ok(())
    }
}

/// The partitions of `topic`, offsets `LAGLESS_OFFSET_INVALID`, in a new list the caller frees
/// with `lagless_tplist_destroy`. Waits up to `timeout_ms` (negative: `default.api.timeout.ms`)
/// for metadata; an unknown topic gives `LAGLESS_ERR_UNKNOWN_TOPIC`.
#[no_mangle]
pub extern "C" fn lagless_consumer_partitions_for(
    consumer: *mut lagless_consumer,
    topic: *const c_char,
    timeout_ms: i32,
    out_partitions: *mut *mut lagless_tplist,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let topic = try_str!(topic);
        try_out!(out_partitions);
        let parts = h.open()?.partitions_for(topic, api_timeout(timeout_ms))?;
        let list = TpList::from_partitions(parts.into_iter().map(|p| TopicPartition::new(topic, p)));
        set_box(out_partitions, list);
        Ok(())
    }
}

/// The partitions paused by `lagless_consumer_pause` (and still assigned), in a new list the
/// caller frees with `lagless_tplist_destroy`.
#[no_mangle]
pub extern "C" fn lagless_consumer_paused(
    consumer: *mut lagless_consumer,
    out_partitions: *mut *mut lagless_tplist,
) -> *mut lagless_error {
    partitions_of(consumer, out_partitions, Consumer::paused)
}

/// Stops returning records of `partitions` (assigned ones) until `lagless_consumer_resume`;
/// the group membership is unaffected.
#[no_mangle]
pub extern "C" fn lagless_consumer_pause(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
) -> *mut lagless_error {
    on_partitions(consumer, partitions, Consumer::pause)
}

/// Resumes partitions paused by `lagless_consumer_pause`.
#[no_mangle]
pub extern "C" fn lagless_consumer_resume(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
) -> *mut lagless_error {
    on_partitions(consumer, partitions, Consumer::resume)
}

/// Learner assignments with `learner.readiness=explicit`: this member has warmed up for
/// `partitions` and is ready to own them; the member rejoins at its next poll (which this wakes)
/// so the group moves them here. Partitions it does not learn (any more) are left out;
/// `*out_taken` (if not NULL) receives how many were taken as ready. Without a subscription:
/// `LAGLESS_ERR_ILLEGAL_STATE`.
/// Thread-safety: any thread, also while another thread polls or inside the learning callback.
#[no_mangle]
pub extern "C" fn lagless_consumer_learner_ready(
    consumer: *mut lagless_consumer,
    partitions: *const lagless_tplist,
    out_taken: *mut usize,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let list = try_ref!(partitions);
        let taken = h.open()?.learner_ready(&list.partitions())?;
        write_opt(out_taken, taken);
        Ok(())
    }
}

/// Scale-down without a stop (learner assignments): this member is about to leave. It stays in
/// the group and keeps consuming while a learner-sticky group has the members that stay learn
/// its partitions; each moves (revoked here) once its learner is ready. Keep polling until
/// `lagless_consumer_assignment` is empty (or a hand-over deadline of your own passes), then
/// close. `*out_learner_sticky` (if not NULL) says whether the group assigns with
/// learner-sticky now; if not, nothing is handed over ahead and close hands the partitions over
/// as any leave does. Without a subscription: `LAGLESS_ERR_ILLEGAL_STATE`.
#[no_mangle]
pub extern "C" fn lagless_consumer_prepare_to_leave(
    consumer: *mut lagless_consumer,
    out_learner_sticky: *mut bool,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let learner_sticky = h.open()?.prepare_to_leave()?;
        write_opt(out_learner_sticky, learner_sticky);
        Ok(())
    }
}

/// Makes a blocked poll (or the next one) return `LAGLESS_ERR_WAKEUP` at once.
/// Thread-safety: any thread, at any time while the handle is not destroyed.
#[no_mangle]
pub extern "C" fn lagless_consumer_wakeup(consumer: *mut lagless_consumer) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        h.open()?.wakeup();
        Ok(())
    }
}

/// Closes the consumer within `timeout_ms` (negative: `default.api.timeout.ms`): commits with
/// auto-commit, calls `on_revoked` on this thread, leaves the group, stops fetching. Every later
/// call on the handle except `lagless_consumer_destroy` gives `LAGLESS_ERR_CLOSED`; closing again
/// is a no-op that succeeds. An error returned here (e.g. a failing callback) still leaves the
/// consumer closed.
#[no_mangle]
pub extern "C" fn lagless_consumer_close(
    consumer: *mut lagless_consumer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        if h.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let r = h.inner.close(api_timeout(timeout_ms));
        h.closed.store(true, Ordering::Release);
        h.run_commit_callbacks();
        r
    }
}

/// Frees the consumer. Without a prior `lagless_consumer_close` it still commits (with
/// auto-commit) and leaves the group, bounded in time, but calls no callbacks. NULL is ignored.
/// Must not be called from a callback of this consumer, nor while another thread uses it.
#[no_mangle]
pub extern "C" fn lagless_consumer_destroy(consumer: *mut lagless_consumer) {
    ffi_panic_boundary! { free_box(consumer) }
}

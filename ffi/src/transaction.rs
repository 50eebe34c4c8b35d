//! A transactional producer's calls (`transactional.id` set): the Java producer's
//! init/begin/send offsets/commit/abort, and the group metadata handle that ties offsets sent
//! inside a transaction to the consumer group member that read their records.
use std::collections::HashMap;

use lagless::{Error, GroupMetadata};

use crate::boundary::api_timeout;
use crate::cast::{free_box, set_box};
use crate::consumer::lagless_consumer;
use crate::error::lagless_error;
use crate::producer::lagless_producer;
use crate::tplist::lagless_tplist;

/// A consumer's place in its group at one moment (group id, generation, member id,
/// `group.instance.id`), for `lagless_producer_send_offsets_to_transaction`. Made by
/// `lagless_consumer_group_metadata_handle`, freed by `lagless_group_metadata_destroy`.
/// Immutable: any thread may use it.
pub struct lagless_group_metadata {
    _private: [u8; 0],
}

castable! { lagless_group_metadata: Box<GroupMetadata> }

/// A snapshot of the member's group metadata, for `lagless_producer_send_offsets_to_transaction`:
/// on success `*out_metadata` receives a new handle, freed by `lagless_group_metadata_destroy`.
/// Take it right after the `lagless_consumer_poll` that returned the records whose offsets the
/// transaction sends: one taken later may belong to a later generation (or to none), and then no
/// longer ties the offsets to the member that owned those records. `LAGLESS_ERR_ILLEGAL_STATE`
/// without a subscription.
#[no_mangle]
pub extern "C" fn lagless_consumer_group_metadata_handle(
    consumer: *mut lagless_consumer,
    out_metadata: *mut *mut lagless_group_metadata,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        try_out!(out_metadata);
        let md = h.open()?.group_metadata().ok_or_else(|| {
            Error::IllegalState("group metadata needs a subscription".into())
        })?;
        set_box(out_metadata, md);
        Ok(())
    }
}

/// Frees group metadata. NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_group_metadata_destroy(metadata: *mut lagless_group_metadata) {
    ffi_panic_boundary! { free_box(metadata) }
}

/// Gets the producer id of the producer's `transactional.id` from its transaction coordinator,
/// waiting up to `timeout_ms` (negative: `delivery.timeout.ms`). Call it once, before the first
/// `lagless_producer_begin_transaction`. It fences every older producer with the same
/// `transactional.id` (their next call fails with the fatal broker error `PRODUCER_FENCED`,
/// `lagless_error_kafka_code` 90) and aborts the transaction such a producer left open.
/// `LAGLESS_ERR_ILLEGAL_STATE` without `transactional.id`; after a timeout it may be called
/// again.
#[no_mangle]
pub extern "C" fn lagless_producer_init_transactions(
    producer: *mut lagless_producer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let timeout = api_timeout(timeout_ms).unwrap_or(h.delivery_timeout());
        h.open()?.init_transactions(timeout)
    }
}

/// Starts a transaction: the records sent until `lagless_producer_commit_transaction` (or
/// `_abort_transaction`) belong to it. Local only; no request is sent.
/// `LAGLESS_ERR_ILLEGAL_STATE` before `_init_transactions` or with a transaction open.
#[no_mangle]
pub extern "C" fn lagless_producer_begin_transaction(
    producer: *mut lagless_producer,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        h.open()?.begin_transaction()
    }
}

/// Adds consumed offsets to the open transaction: the group of `group_metadata` commits
/// `offsets` (each entry's offset, the next record to read, must be >= 0; its commit metadata is
/// sent along) if and only if the transaction commits. `group_metadata` comes from
/// `lagless_consumer_group_metadata_handle`, taken with the records; a member that lost its
/// generation since is refused (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and
/// the transaction becomes abortable (`LAGLESS_ERR_TRANSACTION_ABORTABLE`). Waits up to
/// `timeout_ms` (negative: `delivery.timeout.ms`) for the coordinators. The list is read during
/// the call only.
#[no_mangle]
pub extern "C" fn lagless_producer_send_offsets_to_transaction(
    producer: *mut lagless_producer,
    offsets: *const lagless_tplist,
    group_metadata: *const lagless_group_metadata,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let offsets = try_ref!(offsets);
        let group = try_ref!(group_metadata);
        let offsets: HashMap<_, _> = offsets.offsets()?.into_iter().collect();
        let timeout = api_timeout(timeout_ms).unwrap_or(h.delivery_timeout());
        h.open()?.send_offsets_to_transaction(&offsets, group, timeout)
    }
}

/// Flushes every record of the open transaction and commits it (with the offsets sent to it),
/// waiting up to `timeout_ms` (negative: `delivery.timeout.ms`); after a timeout it may be
/// called again to finish. `LAGLESS_ERR_TRANSACTION_ABORTABLE` when a record or request of the
/// transaction failed: call `lagless_producer_abort_transaction`, then begin the next one. A
/// fatal error (`lagless_error_fatal`; `lagless_error_kafka_code` 90, PRODUCER_FENCED, when a
/// newer producer with the same `transactional.id` fenced this one) means the producer can no
/// longer be used: close and destroy it.
#[no_mangle]
pub extern "C" fn lagless_producer_commit_transaction(
    producer: *mut lagless_producer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let timeout = api_timeout(timeout_ms).unwrap_or(h.delivery_timeout());
        let r = h.open()?.commit_transaction(timeout);
        // Delivery reports of the transaction's records are ready now; serve them like _flush.
        h.serve_ready();
        r
    }
}

/// Aborts the open transaction: records not sent yet fail (`LAGLESS_ERR_TRANSACTION_ABORTABLE`
/// in their delivery reports), those on the wire are awaited, the transaction's records and
/// offsets are discarded. Waits up to `timeout_ms` (negative: `delivery.timeout.ms`); after a
/// timeout it may be called again to finish. Errors as for `_commit_transaction`.
#[no_mangle]
pub extern "C" fn lagless_producer_abort_transaction(
    producer: *mut lagless_producer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let timeout = api_timeout(timeout_ms).unwrap_or(h.delivery_timeout());
        let r = h.open()?.abort_transaction(timeout);
        h.serve_ready();
        r
    }
}

//! Messages returned by the consumer's poll functions, and their accessors.
//!
//! Every pointer an accessor returns is borrowed from the message and stays valid until
//! `lagless_message_destroy` (even after the consumer is closed or destroyed). A message is
//! immutable: any thread may read it, one thread destroys it.
use std::ffi::{c_char, CString};
use std::sync::Arc;

use lagless::{ConsumerRecord, Error};

use crate::boundary::{read, write_opt, write_out};
use crate::cast::{free_box, try_from};
use crate::error::lagless_error;

/// One consumed record. Owned by the caller, freed with `lagless_message_destroy`, except the
/// messages of a `lagless_batch`, which belong to the batch.
pub struct lagless_message {
    _private: [u8; 0],
}

// Boxed for a message of its own; a batch lends its messages (`to_ref`), which
// `lagless_message_destroy` tells apart by `in_batch`.
castable! { lagless_message: Box<CMessage> }

/// What a `lagless_message` points at.
pub(crate) struct CMessage {
    pub(crate) record: ConsumerRecord,
    pub(crate) topic: Arc<CString>,
    /// Part of a `lagless_batch` (freed with it), not a message of its own.
    pub(crate) in_batch: bool,
}

/// A payload (key or value) with its length in `*out_len` (which may be NULL): NULL and 0 for a
/// null payload and for a NULL message.
fn payload(
    message: *const lagless_message,
    out_len: *mut usize,
    which: fn(&ConsumerRecord) -> Option<&[u8]>,
) -> *const u8 {
    ffi_panic_boundary! {
        match try_from(message).and_then(|m| which(&m.record)) {
            Some(b) => {
                write_opt(out_len, b.len());
                // An empty slice's pointer is dangling-but-non-NULL: fine to return, never read.
                b.as_ptr()
            }
            None => {
                write_opt(out_len, 0);
                std::ptr::null()
            }
        }
    }
}

/// The topic; NULL for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_topic(message: *const lagless_message) -> *const c_char {
    read(message, |m| m.topic.as_ptr())
}

/// The partition; -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_partition(message: *const lagless_message) -> i32 {
    read(message, |m| m.record.partition)
}

/// The offset; -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_offset(message: *const lagless_message) -> i64 {
    read(message, |m| m.record.offset)
}

/// The timestamp in milliseconds since the epoch (create or log-append time, as the topic
/// says); -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_timestamp(message: *const lagless_message) -> i64 {
    read(message, |m| m.record.timestamp)
}

/// The key's bytes, with their count in `*out_len` (`out_len` may be NULL). NULL (and length 0)
/// for a record without a key; a non-NULL pointer with length 0 for an empty key.
#[no_mangle]
pub extern "C" fn lagless_message_key(
    message: *const lagless_message,
    out_len: *mut usize,
) -> *const u8 {
    payload(message, out_len, |r| r.key.as_deref())
}

/// The value's bytes, with their count in `*out_len` (`out_len` may be NULL). NULL (and length 0)
/// for a null value (a tombstone).
#[no_mangle]
pub extern "C" fn lagless_message_value(
    message: *const lagless_message,
    out_len: *mut usize,
) -> *const u8 {
    payload(message, out_len, |r| r.value.as_deref())
}

/// The number of headers; 0 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_header_count(message: *const lagless_message) -> usize {
    read(message, |m| m.record.headers.len())
}

/// Header `index`: its key (UTF-8, NOT NUL-terminated) with its length, and its value with its
/// length (NULL and 0 for a null value). All borrowed from the message. `out_value` and
/// `out_value_len` may be NULL.
#[no_mangle]
pub extern "C" fn lagless_message_header_get(
    message: *const lagless_message,
    index: usize,
    out_key: *mut *const c_char,
    out_key_len: *mut usize,
    out_value: *mut *const u8,
    out_value_len: *mut usize,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let m = try_ref!(message);
        try_out!(out_key);
        try_out!(out_key_len);
        let h = m.record.headers.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "header index {index} is out of range: the message has {} headers",
                m.record.headers.len()
            ))
        })?;
        write_out(out_key, h.key.as_ptr().cast::<c_char>());
        write_out(out_key_len, h.key.len());
        let (v, n) = match &h.value {
            Some(v) => (v.as_ptr(), v.len()),
            None => (std::ptr::null(), 0),
        };
        write_opt(out_value, v);
        write_opt(out_value_len, n);
        Ok(())
    }
}

/// Whether the record came from a recovery stream (`enable.parallel.rebalance`).
#[no_mangle]
pub extern "C" fn lagless_message_from_recovery(message: *const lagless_message) -> bool {
    read(message, |m| m.record.from_recovery)
}

/// Frees a message and everything borrowed from it. NULL is ignored, and so is a message of a
/// `lagless_batch` (freed with its batch by `lagless_batch_destroy`).
#[no_mangle]
pub extern "C" fn lagless_message_destroy(message: *mut lagless_message) {
    ffi_panic_boundary! {
        if try_from(message).is_some_and(|m| !m.in_batch) {
            free_box(message);
        }
    }
}

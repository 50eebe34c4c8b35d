//! Messages returned by the consumer's poll functions, and their accessors.
//!
//! Every pointer an accessor returns is borrowed from the message and stays valid until
//! `lagless_message_destroy` (even after the consumer is closed or destroyed). A message is
//! immutable: any thread may read it, one thread destroys it.
use std::ffi::{c_char, CString};
use std::sync::Arc;

use lagless::{ConsumerRecord, Error};

use crate::boundary::{write_opt, write_out};
use crate::error::lagless_error;

/// One consumed record. Owned by the caller, freed with `lagless_message_destroy`, except the
/// messages of a `lagless_batch`, which belong to the batch.
pub struct lagless_message {
    pub(crate) record: ConsumerRecord,
    pub(crate) topic: Arc<CString>,
    /// Part of a `lagless_batch` (freed with it), not a message of its own.
    pub(crate) in_batch: bool,
}

fn with_msg<T>(m: *const lagless_message, f: impl FnOnce(&lagless_message) -> T, none: T) -> T {
    // SAFETY: the header requires NULL or a message not yet destroyed.
    match unsafe { m.as_ref() } {
        Some(m) => f(m),
        None => none,
    }
}

fn bytes_out(b: Option<&[u8]>, out_len: *mut usize) -> *const u8 {
    match b {
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

/// The topic; NULL for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_topic(message: *const lagless_message) -> *const c_char {
    ffi_panic_boundary! {
        with_msg(message, |m| m.topic.as_ptr(), std::ptr::null())
    }
}

/// The partition; -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_partition(message: *const lagless_message) -> i32 {
    ffi_panic_boundary! { with_msg(message, |m| m.record.partition, -1) }
}

/// The offset; -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_offset(message: *const lagless_message) -> i64 {
    ffi_panic_boundary! { with_msg(message, |m| m.record.offset, -1) }
}

/// The timestamp in milliseconds since the epoch (create or log-append time, as the topic
/// says); -1 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_timestamp(message: *const lagless_message) -> i64 {
    ffi_panic_boundary! { with_msg(message, |m| m.record.timestamp, -1) }
}

/// The key's bytes, with their count in `*out_len` (`out_len` may be NULL). NULL (and length 0)
/// for a record without a key; a non-NULL pointer with length 0 for an empty key.
#[no_mangle]
pub extern "C" fn lagless_message_key(
    message: *const lagless_message,
    out_len: *mut usize,
) -> *const u8 {
    ffi_panic_boundary! {
        with_msg(message, |m| bytes_out(m.record.key.as_deref(), out_len), {
            write_opt(out_len, 0);
            std::ptr::null()
        })
    }
}

/// The value's bytes, with their count in `*out_len` (`out_len` may be NULL). NULL (and length 0)
/// for a null value (a tombstone).
#[no_mangle]
pub extern "C" fn lagless_message_value(
    message: *const lagless_message,
    out_len: *mut usize,
) -> *const u8 {
    ffi_panic_boundary! {
        with_msg(message, |m| bytes_out(m.record.value.as_deref(), out_len), {
            write_opt(out_len, 0);
            std::ptr::null()
        })
    }
}

/// The number of headers; 0 for a NULL message.
#[no_mangle]
pub extern "C" fn lagless_message_header_count(message: *const lagless_message) -> usize {
    ffi_panic_boundary! { with_msg(message, |m| m.record.headers.len(), 0) }
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
    ffi_panic_boundary! { with_msg(message, |m| m.record.from_recovery, false) }
}

/// Frees a message and everything borrowed from it. NULL is ignored, and so is a message of a
/// `lagless_batch` (freed with its batch by `lagless_batch_destroy`).
#[no_mangle]
pub extern "C" fn lagless_message_destroy(message: *mut lagless_message) {
    ffi_panic_boundary! {
        // SAFETY: the header requires NULL or a message not yet destroyed.
        if unsafe { message.as_ref() }.is_some_and(|m| !m.in_batch) {
            // SAFETY: a message of its own from a lagless poll function, destroyed once.
            drop(unsafe { Box::from_raw(message) });
        }
    }
}

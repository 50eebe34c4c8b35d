//! Error objects: what every fallible export returns (NULL means success).
use std::any::Any;
use std::ffi::{c_char, CString};
use std::sync::LazyLock;

use lagless::Error;

use crate::boundary::Neutral;
use crate::cast::{free_box, to_box, try_from};

// The error kinds of the core (`lagless::ErrorKind`), one constant each: `LAGLESS_ERR_` and the
// kind's name, with its stable number. A test checks every core kind has its constant.

/// A configuration key is unknown or its value is bad; the message names the key.
pub const LAGLESS_ERR_CONFIG: i32 = 1;
/// An argument is bad: NULL, not UTF-8, out of range.
pub const LAGLESS_ERR_INVALID_ARGUMENT: i32 = 2;
/// A broker answered with an error code (see `lagless_error_kafka_code`).
pub const LAGLESS_ERR_KAFKA: i32 = 3;
/// A deadline passed before the operation completed.
pub const LAGLESS_ERR_TIMEOUT: i32 = 4;
/// No connection could be made, or a connection broke.
pub const LAGLESS_ERR_TRANSPORT: i32 = 5;
/// Malformed data from the wire or from another group member.
pub const LAGLESS_ERR_CORRUPT: i32 = 6;
/// The topic does not exist in the cluster.
pub const LAGLESS_ERR_UNKNOWN_TOPIC: i32 = 7;
/// `auto.offset.reset=none` and the partition has no valid committed offset.
pub const LAGLESS_ERR_NO_OFFSET: i32 = 8;
/// A partition made no progress within `task.timeout.ms`; the others keep flowing.
pub const LAGLESS_ERR_PARTITION_STUCK: i32 = 9;
/// A commit failed because the group rebalanced or the member left it.
pub const LAGLESS_ERR_COMMIT_FAILED: i32 = 10;
/// `lagless_consumer_wakeup` interrupted the call.
pub const LAGLESS_ERR_WAKEUP: i32 = 11;
/// The handle was closed (`lagless_consumer_close`, `lagless_producer_close`).
pub const LAGLESS_ERR_CLOSED: i32 = 12;
/// A rebalance callback returned non-zero; the assignment change completed anyway.
pub const LAGLESS_ERR_CALLBACK: i32 = 13;
/// The call is not allowed in the handle's state (e.g. commit without `group.id`).
pub const LAGLESS_ERR_ILLEGAL_STATE: i32 = 14;
/// SASL authentication failed (wrong credentials, refused mechanism, no token); fatal.
pub const LAGLESS_ERR_AUTHENTICATION: i32 = 15;
/// TLS failed: the broker's certificate is untrusted, expired or for another host, the client
/// certificate was refused, or `security.protocol` mismatches the listener; fatal.
pub const LAGLESS_ERR_SSL: i32 = 16;
/// A partition's log was truncated below the position (an unclean leader election lost records
/// already read) and `auto.offset.reset` is none; the message names the position and the offset
/// the log diverges at. The partition waits for a seek; the others keep flowing.
pub const LAGLESS_ERR_LOG_TRUNCATION: i32 = 17;
/// A transactional producer's transaction can not commit (a record or a request of it failed):
/// abort it, then begin the next one.
pub const LAGLESS_ERR_TRANSACTION_ABORTABLE: i32 = 18;
/// lagless hit an internal bug (a Rust panic, caught at the C boundary).
pub const LAGLESS_ERR_PANIC: i32 = 100;

/// An error. Owned by the caller, who frees it with `lagless_error_destroy`. Its strings are
/// borrowed from it and valid until it is destroyed. Immutable: any thread may read it.
pub struct lagless_error {
    _private: [u8; 0],
}

castable! { lagless_error: Box<CError> }

/// What a `lagless_error` points at: the core error's parts, as C reads them.
pub(crate) struct CError {
    code: i32,
    name: CString,
    message: CString,
    retriable: bool,
    fatal: bool,
    kafka_code: i32,
    topic: Option<CString>,
    partition: i32,
}

pub(crate) fn cstring_lossy(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{fffd}")).expect("interior NULs were replaced")
}

impl CError {
    pub(crate) fn new(e: &Error) -> CError {
        let (topic, partition) = match e.partition() {
            Some(p) => (Some(cstring_lossy(&p.topic)), p.partition),
            None => (None, -1),
        };
        CError {
            code: e.code(),
            name: cstring_lossy(e.name()),
            message: cstring_lossy(&e.to_string()),
            retriable: e.is_retriable(),
            fatal: e.is_fatal(),
            kafka_code: e.kafka_code().map_or(0, i32::from),
            topic,
            partition,
        }
    }

    fn panic(payload: &Box<dyn Any + Send>) -> CError {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        CError {
            code: LAGLESS_ERR_PANIC,
            name: cstring_lossy("PANIC"),
            message: cstring_lossy(&format!("internal error in lagless: {what}")),
            retriable: false,
            fatal: true,
            kafka_code: 0,
            topic: None,
            partition: -1,
        }
    }
}

/// A new error object for the caller: what a fallible export returns for `Err(e)`.
pub(crate) fn boxed(e: &Error) -> *mut lagless_error {
    to_box(CError::new(e))
}

/// A new error object for a panic caught at the boundary.
pub(crate) fn boxed_panic(payload: &Box<dyn Any + Send>) -> *mut lagless_error {
    to_box(CError::panic(payload))
}

/// What the accessors read for a NULL error, which means success: no error.
static SUCCESS: LazyLock<CError> = LazyLock::new(|| CError {
    code: 0,
    name: cstring_lossy("NONE"),
    message: CString::default(),
    retriable: false,
    fatal: false,
    kafka_code: 0,
    topic: None,
    partition: -1,
});

fn with_err<T: Neutral>(err: *const lagless_error, f: impl FnOnce(&CError) -> T) -> T {
    ffi_panic_boundary! { f(try_from(err).unwrap_or(&SUCCESS)) }
}

/// The error's kind, one of the `LAGLESS_ERR_*` codes; 0 for a NULL error (success).
#[no_mangle]
pub extern "C" fn lagless_error_code(err: *const lagless_error) -> i32 {
    with_err(err, |e| e.code)
}

/// A short upper-case name of the kind ("CONFIG", "TIMEOUT", ...); for broker errors, Kafka's name
/// of the error code ("NOT_COORDINATOR"). Borrowed from `err`; "NONE" for a NULL error.
#[no_mangle]
pub extern "C" fn lagless_error_name(err: *const lagless_error) -> *const c_char {
    with_err(err, |e| e.name.as_ptr())
}

/// A human-readable message (for config errors it names the key). Borrowed from `err`, valid
/// until `lagless_error_destroy(err)`; "" for a NULL error.
#[no_mangle]
pub extern "C" fn lagless_error_message(err: *const lagless_error) -> *const c_char {
    with_err(err, |e| e.message.as_ptr())
}

/// Whether the same call may succeed if tried again.
#[no_mangle]
pub extern "C" fn lagless_error_retriable(err: *const lagless_error) -> bool {
    with_err(err, |e| e.retriable)
}

/// Whether the handle that returned it can no longer be used (close and destroy it).
#[no_mangle]
pub extern "C" fn lagless_error_fatal(err: *const lagless_error) -> bool {
    with_err(err, |e| e.fatal)
}

/// The broker's error code for `LAGLESS_ERR_KAFKA` errors; 0 (Kafka's NONE) otherwise.
#[no_mangle]
pub extern "C" fn lagless_error_kafka_code(err: *const lagless_error) -> i32 {
    with_err(err, |e| e.kafka_code)
}

/// The topic the error belongs to, or NULL if it belongs to no partition. Borrowed from `err`.
#[no_mangle]
pub extern "C" fn lagless_error_topic(err: *const lagless_error) -> *const c_char {
    with_err(err, |e| {
        e.topic.as_ref().map_or(std::ptr::null(), |t| t.as_ptr())
    })
}

/// The partition the error belongs to, or -1.
#[no_mangle]
pub extern "C" fn lagless_error_partition(err: *const lagless_error) -> i32 {
    with_err(err, |e| e.partition)
}

/// Frees an error. NULL is ignored. Thread-safety: any thread, once.
#[no_mangle]
pub extern "C" fn lagless_error_destroy(err: *mut lagless_error) {
    ffi_panic_boundary! { free_box(err) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    use lagless::ErrorKind;

    /// The C layer maps the core's kinds in one place, the `LAGLESS_ERR_<name>` constants of
    /// the header (generated from this file): a kind added to the core without its constant, or
    /// a constant whose number is not the kind's, fails here.
    #[test]
    fn every_core_error_kind_has_its_constant_in_the_header() {
        let header = include_str!("../../include/lagless.h");
        let defined: HashMap<&str, i32> = header
            .lines()
            .filter_map(|l| l.strip_prefix("#define LAGLESS_ERR_"))
            .filter_map(|rest| {
                let (name, value) = rest.split_once(' ')?;
                Some((name, value.trim().parse().ok()?))
            })
            .collect();
        for kind in ErrorKind::ALL {
            assert_eq!(
                defined.get(kind.name()),
                Some(&kind.code()),
                "include/lagless.h must define LAGLESS_ERR_{} {} (add the constant to \
                 ffi/src/error.rs and run ffi/gen-header.sh)",
                kind.name(),
                kind.code()
            );
        }
        for (name, code) in &defined {
            let kind = ErrorKind::from_code(*code).map(ErrorKind::name);
            assert!(
                *name == "PANIC" && *code == LAGLESS_ERR_PANIC || kind == Some(*name),
                "LAGLESS_ERR_{name} {code} is no core error kind"
            );
        }
    }

    #[test]
    fn broker_errors_keep_code_name_and_partition() {
        let e = boxed(&Error::kafka_partition(6, "fetch", "orders", 3));
        assert_eq!(lagless_error_code(e), LAGLESS_ERR_KAFKA);
        assert_eq!(lagless_error_kafka_code(e), 6);
        assert_eq!(lagless_error_partition(e), 3);
        let name = unsafe { std::ffi::CStr::from_ptr(lagless_error_name(e)) };
        assert_eq!(name.to_str().unwrap(), "NOT_LEADER_OR_FOLLOWER");
        assert!(lagless_error_retriable(e));
        lagless_error_destroy(e);
        assert_eq!(lagless_error_code(std::ptr::null()), 0);
    }
}

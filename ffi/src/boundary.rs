//! The panic boundary every export sits behind, and the checked conversions of C arguments.
//!
//! A Rust panic must never unwind into C (that aborts the process, or worse). Each export wraps
//! its body in [`ffi_panic_boundary!`]; a panic becomes an error object (fallible functions) or
//! the neutral value of [`PanicValue`] (infallible accessors).
use std::ffi::{c_char, CStr};
use std::time::Duration;

use lagless::Error;

/// What an infallible export returns when its body panicked.
pub(crate) trait PanicValue {
    fn panic_value() -> Self;
}

impl PanicValue for () {
    fn panic_value() -> Self {}
}
impl PanicValue for bool {
    fn panic_value() -> Self {
        false
    }
}
impl PanicValue for i32 {
    fn panic_value() -> Self {
        -1
    }
}
impl PanicValue for u32 {
    /// `lagless_version_int`: 0 is older than every release.
    fn panic_value() -> Self {
        0
    }
}
impl PanicValue for i64 {
    fn panic_value() -> Self {
        -1
    }
}
impl PanicValue for usize {
    fn panic_value() -> Self {
        0
    }
}
impl PanicValue for *const c_char {
    fn panic_value() -> Self {
        std::ptr::null()
    }
}
impl PanicValue for *const u8 {
    fn panic_value() -> Self {
        std::ptr::null()
    }
}
impl PanicValue for *mut crate::config::lagless_config {
    fn panic_value() -> Self {
        std::ptr::null_mut()
    }
}
impl PanicValue for *mut crate::tplist::lagless_tplist {
    fn panic_value() -> Self {
        std::ptr::null_mut()
    }
}

/// Runs an export's body so that no panic escapes into C.
///
/// - `ffi_panic_boundary! { fallible: BODY }`: BODY is a `Result<(), lagless::Error>`; the export
///   returns NULL for `Ok`, an owned `lagless_error *` for `Err` and for a panic.
/// - `ffi_panic_boundary! { BODY }`: the export returns BODY's value, or
///   [`PanicValue::panic_value`] if BODY panicked.
macro_rules! ffi_panic_boundary {
    (fallible: $($body:tt)*) => {{
        let r = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<(), ::lagless::Error> { $($body)* },
        ));
        match r {
            Ok(Ok(())) => ::std::ptr::null_mut(),
            Ok(Err(e)) => $crate::error::lagless_error::boxed(&e),
            Err(p) => $crate::error::lagless_error::boxed_panic(&p),
        }
    }};
    ($($body:tt)*) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(v) => v,
            Err(_) => $crate::boundary::PanicValue::panic_value(),
        }
    }};
}

/// Borrows a handle argument, failing with `INVALID_ARGUMENT` naming the parameter when it is
/// NULL.
macro_rules! try_ref {
    ($p:expr) => {
        // SAFETY: the header requires handle arguments to be NULL or a live handle of the type.
        unsafe { $crate::boundary::borrow($p, stringify!($p)) }?
    };
}

/// Like `try_ref!`, for arguments the function changes.
macro_rules! try_mut {
    ($p:expr) => {
        // SAFETY: the header requires these arguments to be NULL or a live, unshared handle.
        unsafe { $crate::boundary::borrow_mut($p, stringify!($p)) }?
    };
}

/// A NUL-terminated UTF-8 string argument.
macro_rules! try_str {
    ($p:expr) => {
        // SAFETY: the header requires string arguments to be NULL or NUL-terminated.
        unsafe { $crate::boundary::c_str($p, stringify!($p)) }?
    };
}

/// An out-parameter, which must not be NULL.
macro_rules! try_out {
    ($p:expr) => {
        if $p.is_null() {
            return Err($crate::boundary::null_arg(stringify!($p)));
        }
    };
}

pub(crate) fn null_arg(name: &str) -> Error {
    Error::InvalidArgument(format!("`{name}` is NULL"))
}

pub(crate) unsafe fn borrow<'a, T>(p: *const T, name: &str) -> Result<&'a T, Error> {
    p.as_ref().ok_or_else(|| null_arg(name))
}

pub(crate) unsafe fn borrow_mut<'a, T>(p: *mut T, name: &str) -> Result<&'a mut T, Error> {
    p.as_mut().ok_or_else(|| null_arg(name))
}

pub(crate) unsafe fn c_str<'a>(p: *const c_char, name: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(null_arg(name));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| Error::InvalidArgument(format!("`{name}` is not valid UTF-8")))
}

/// `len` bytes at `p`; NULL means "no bytes" (a null key or value) and then `len` must be 0.
pub(crate) unsafe fn bytes<'a>(
    p: *const u8,
    len: usize,
    name: &str,
) -> Result<Option<&'a [u8]>, Error> {
    if p.is_null() {
        if len != 0 {
            return Err(Error::InvalidArgument(format!(
                "`{name}` is NULL but its length is {len}"
            )));
        }
        return Ok(None);
    }
    Ok(Some(std::slice::from_raw_parts(p, len)))
}

/// `len` elements at `p` (an array argument with its count); NULL is allowed only with `len` 0.
pub(crate) unsafe fn array<'a, T>(p: *const T, len: usize, name: &str) -> Result<&'a [T], Error> {
    if p.is_null() {
        if len != 0 {
            return Err(null_arg(name));
        }
        return Ok(&[]);
    }
    Ok(std::slice::from_raw_parts(p, len))
}

/// Writes an out-parameter that may be NULL (the caller does not want that output).
pub(crate) fn write_opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the header requires optional out-parameters to be NULL or writable.
        unsafe { p.write(v) }
    }
}

/// Writes an out-parameter checked with `try_out!`.
pub(crate) fn write_out<T>(p: *mut T, v: T) {
    debug_assert!(!p.is_null());
    // SAFETY: checked non-NULL by `try_out!`; the header requires it to be writable.
    unsafe { p.write(v) }
}

/// A timeout argument: negative means "the default" (`default.api.timeout.ms`).
pub(crate) fn api_timeout(ms: i32) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

/// A pointer the caller handed over for callbacks. lagless only passes it back to the caller's
/// own functions, on the caller's thread (or, for the log callback, on threads the caller was
/// told about), so moving it between Rust threads is the caller's contract, not a data race.
#[derive(Clone, Copy)]
pub(crate) struct Opaque(pub *mut std::ffi::c_void);
// SAFETY: see the type's comment; lagless never dereferences it.
unsafe impl Send for Opaque {}
// SAFETY: as above.
unsafe impl Sync for Opaque {}

impl Opaque {
    /// Through a method, so closures capture the whole `Opaque` (which is `Send`), not the field.
    pub(crate) fn ptr(self) -> *mut std::ffi::c_void {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::*;

    fn panics_fallible() -> *mut lagless_error {
        ffi_panic_boundary! { fallible:
            panic!("boom");
        }
    }

    fn panics_count() -> usize {
        ffi_panic_boundary! {
            if true { panic!("boom") }
            7usize
        }
    }

    #[test]
    fn a_panic_becomes_an_error_object() {
        let e = panics_fallible();
        assert!(!e.is_null());
        assert_eq!(lagless_error_code(e), LAGLESS_ERR_PANIC);
        let msg = unsafe { CStr::from_ptr(lagless_error_message(e)) };
        assert!(msg.to_str().unwrap().contains("boom"), "{msg:?}");
        lagless_error_destroy(e);
    }

    #[test]
    fn a_panic_in_an_accessor_gives_its_neutral_value() {
        assert_eq!(panics_count(), 0);
    }
}

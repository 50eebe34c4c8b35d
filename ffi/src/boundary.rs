//! The panic boundary every export sits behind, and the checked conversions of C arguments.
//!
//! A Rust panic must never unwind into C (that aborts the process, or worse). Each export wraps
//! its body in [`ffi_panic_boundary!`]; a panic becomes an error object (fallible functions) or
//! the neutral value of [`Neutral`] (infallible accessors).
use std::ffi::{c_char, CStr};
use std::mem::MaybeUninit;
use std::time::Duration;

use lagless::Error;

use crate::cast::{try_from, Castable};

/// What an infallible export returns when it has no answer: its body panicked, or (see
/// [`read`]) the handle it reads is NULL. One rule per kind of value, so every accessor of a type
/// agrees: pointers are NULL; counts, flags and versions zero (0 is older than every release);
/// partitions, offsets and timestamps -1, Kafka's "none".
pub(crate) trait Neutral {
    fn neutral() -> Self;
}

impl<T> Neutral for *const T {
    fn neutral() -> Self {
        std::ptr::null()
    }
}

impl<T> Neutral for *mut T {
    fn neutral() -> Self {
        std::ptr::null_mut()
    }
}

macro_rules! neutral {
    ($($t:ty => $v:expr),* $(,)?) => {
        $(impl Neutral for $t {
            fn neutral() -> Self {
                $v
            }
        })*
    };
}

neutral! { () => (), bool => false, u32 => 0, usize => 0, i32 => -1, i64 => -1 }

/// Runs an export's body so that no panic escapes into C.
///
/// - `ffi_panic_boundary! { fallible: BODY }`: BODY is a `Result<(), lagless::Error>`; the export
///   returns NULL for `Ok`, an owned `lagless_error *` for `Err` and for a panic.
/// - `ffi_panic_boundary! { BODY }`: the export returns BODY's value, or [`Neutral::neutral`]
///   if BODY panicked.
macro_rules! ffi_panic_boundary {
    (fallible: $($body:tt)*) => {{
        let r = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::std::result::Result<(), ::lagless::Error> { $($body)* },
        ));
        match r {
            Ok(Ok(())) => ::std::ptr::null_mut(),
            Ok(Err(e)) => $crate::error::boxed(&e),
            Err(p) => $crate::error::boxed_panic(&p),
        }
    }};
    ($($body:tt)*) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(v) => v,
            Err(_) => $crate::boundary::Neutral::neutral(),
        }
    }};
}

/// Borrows a handle argument (see [`crate::cast`]), failing with `INVALID_ARGUMENT` naming the
/// parameter when it is NULL.
macro_rules! try_ref {
    ($p:expr) => {
        $crate::cast::try_ref($p, stringify!($p))?
    };
}

/// Like `try_ref!`, for arguments the function changes.
macro_rules! try_mut {
    ($p:expr) => {
        $crate::cast::try_mut($p, stringify!($p))?
    };
}

/// A NUL-terminated UTF-8 string argument.
macro_rules! try_str {
    ($p:expr) => {
        $crate::boundary::c_str($p, stringify!($p))?
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

/// The body of an infallible accessor: `f` of the object behind `p`, or the [`Neutral`] value of
/// the answer's type when `p` is NULL or `f` panicked.
pub(crate) fn read<C: Castable, T: Neutral>(p: *const C, f: impl FnOnce(&C::RustType) -> T) -> T {
    ffi_panic_boundary! { try_from(p).map_or_else(T::neutral, f) }
}

pub(crate) fn null_arg(name: &str) -> Error {
    Error::InvalidArgument(format!("`{name}` is NULL"))
}

/// A count argument that must be at least 1 (`max`, `capacity`).
pub(crate) fn nonzero(n: usize, name: &str) -> Result<usize, Error> {
    if n == 0 {
        return Err(Error::InvalidArgument(format!("`{name}` is 0")));
    }
    Ok(n)
}

/// A string argument; NULL and invalid UTF-8 are invalid arguments naming the parameter.
pub(crate) fn c_str<'a>(p: *const c_char, name: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: the header requires string arguments to be NULL or NUL-terminated.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::InvalidArgument(format!("`{name}` is not valid UTF-8")))
}

/// `len` bytes at `p`; NULL means "no bytes" (a null key or value) and then `len` must be 0.
pub(crate) fn bytes<'a>(p: *const u8, len: usize, name: &str) -> Result<Option<&'a [u8]>, Error> {
    if p.is_null() {
        if len != 0 {
            return Err(Error::InvalidArgument(format!(
                "`{name}` is NULL but its length is {len}"
            )));
        }
        return Ok(None);
    }
    // SAFETY: the header requires a non-NULL byte argument to hold `len` readable bytes.
    Ok(Some(unsafe { std::slice::from_raw_parts(p, len) }))
}

/// `len` strings at `p` (an array argument with its count; NULL only with `len` 0), each checked
/// as `c_str` does, named `name[i]`.
pub(crate) fn c_strs<'a>(
    p: *const *const c_char,
    len: usize,
    name: &str,
) -> Result<Vec<&'a str>, Error> {
    if p.is_null() {
        return if len == 0 {
            Ok(Vec::new())
        } else {
            Err(null_arg(name))
        };
    }
    // SAFETY: the header requires a non-NULL array argument to hold `len` pointers.
    let ptrs = unsafe { std::slice::from_raw_parts(p, len) };
    ptrs.iter()
        .enumerate()
        .map(|(i, &s)| c_str(s, &format!("{name}[{i}]")))
        .collect()
}

/// An array out-parameter with room for `len` items, checked non-NULL with `try_out!`; its slots
/// may hold anything before they are written.
pub(crate) fn out_slots<'a, T>(p: *mut T, len: usize) -> &'a mut [MaybeUninit<T>] {
    debug_assert!(!p.is_null());
    // SAFETY: the header requires an array out-parameter to have room for `len` items that no one
    // else uses during the call; `MaybeUninit` reads nothing of what they hold.
    unsafe { std::slice::from_raw_parts_mut(p.cast::<MaybeUninit<T>>(), len) }
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

    #[test]
    fn each_kind_of_answer_has_one_neutral_value() {
        assert!(<*const u8>::neutral().is_null());
        assert!(<*const c_char>::neutral().is_null());
        assert!(<*mut lagless_error>::neutral().is_null());
        assert_eq!(
            (
                i32::neutral(),
                i64::neutral(),
                usize::neutral(),
                u32::neutral()
            ),
            (-1, -1, 0, 0)
        );
        assert!(!bool::neutral());
    }

    #[test]
    fn read_gives_the_neutral_value_for_null_and_for_a_panic() {
        let list = crate::tplist::lagless_tplist_new();
        assert_eq!(read(list, |l| l.items.len() as i64 + 5), 5);
        assert_eq!(
            read(std::ptr::null::<crate::tplist::lagless_tplist>(), |_| 5i64),
            -1
        );
        let panicked: i64 = read(list, |_| panic!("boom"));
        assert_eq!(panicked, -1);
        crate::tplist::lagless_tplist_destroy(list);
    }
}

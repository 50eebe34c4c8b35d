//! Typed ownership of what C holds pointers to (the `Castable` pattern of rustls-ffi).
//!
//! Each handle type of the header (`lagless_consumer`, `lagless_message`, ...) is an empty
//! marker: C sees only pointers to it, and Rust code cannot read anything through it. What such
//! a pointer points at is its [`Castable::RustType`]; how the pointer was made, and so how it may
//! be turned back, is its [`Castable::Ownership`]:
//! - [`OwnershipBox`]: a `Box` handed to the caller, who frees it once with the type's
//!   `_destroy` ([`to_box`], [`set_box`], [`free_box`]); lagless may also lend one of its own
//!   for the duration of a call ([`to_ref`]: the lists and errors a callback receives).
//! - [`OwnershipRef`]: memory the caller owns and lagless only reads (the structs a C program
//!   fills in: a rebalance listener, record headers); lagless never frees or changes it.
//!
//! The functions here are the only place a handle pointer is dereferenced or freed, with the
//! NULL checks in one place; the bounds on `Ownership` make the wrong use a compile error
//! (freeing or changing borrowed memory). What they cannot see is a pointer that is not NULL
//! but not a live object of its type either (freed, or another type cast in C): the header
//! makes that undefined behaviour, as every C library does, and the sanitizer and valgrind runs
//! of tests/c/run.sh look for it.
use lagless::Error;

use crate::boundary::{null_arg, write_out};

/// A C type whose pointers stand for a `RustType` held as `Ownership` says.
pub(crate) trait Castable {
    type Ownership: Ownership;
    type RustType;
}

/// Declares how a C type is held: `castable! { lagless_consumer: Box<CConsumer> }` (see
/// [`OwnershipBox`]) or `castable! { lagless_header: Ref<lagless_header> }` ([`OwnershipRef`]).
macro_rules! castable {
    ($c:ident: Box<$rust:ty>) => {
        impl $crate::cast::Castable for $c {
            type Ownership = $crate::cast::OwnershipBox;
            type RustType = $rust;
        }
    };
    ($c:ident: Ref<$rust:ty>) => {
        impl $crate::cast::Castable for $c {
            type Ownership = $crate::cast::OwnershipRef;
            type RustType = $rust;
        }
    };
}

/// Boxed, given to the caller, freed with the type's `_destroy`.
pub(crate) struct OwnershipBox;
/// The caller's own memory, read for the duration of a call.
pub(crate) struct OwnershipRef;

/// The two kinds of ownership (sealed: the kind decides which functions below apply).
pub(crate) trait Ownership: sealed::Sealed {}
impl Ownership for OwnershipBox {}
impl Ownership for OwnershipRef {}
mod sealed {
    pub trait Sealed {}
    impl Sealed for super::OwnershipBox {}
    impl Sealed for super::OwnershipRef {}
}

/// The object behind `p`, or None for NULL.
pub(crate) fn try_from<'a, C: Castable>(p: *const C) -> Option<&'a C::RustType> {
    // SAFETY: the header requires every such argument to be NULL or a live object of its type,
    // and every pointer lagless hands out for `C` points at a `C::RustType` (made below).
    unsafe { p.cast::<C::RustType>().as_ref() }
}

/// The object behind `p` to change, or None for NULL. Only lagless' own boxes change.
pub(crate) fn try_from_mut<'a, C>(p: *mut C) -> Option<&'a mut C::RustType>
where
    C: Castable<Ownership = OwnershipBox>,
{
    // SAFETY: as in `try_from`; the header also requires the object not to be used by another
    // thread during the call (the types that change are documented as not synchronized).
    unsafe { p.cast::<C::RustType>().as_mut() }
}

/// A required argument: NULL is an invalid argument naming the parameter `name`.
pub(crate) fn try_ref<'a, C: Castable>(p: *const C, name: &str) -> Result<&'a C::RustType, Error> {
    try_from(p).ok_or_else(|| null_arg(name))
}

/// A required argument the call changes.
pub(crate) fn try_mut<'a, C>(p: *mut C, name: &str) -> Result<&'a mut C::RustType, Error>
where
    C: Castable<Ownership = OwnershipBox>,
{
    try_from_mut(p).ok_or_else(|| null_arg(name))
}

/// `len` objects at `p` the caller filled in; NULL only with `len` 0.
pub(crate) fn try_slice<'a, C>(
    p: *const C,
    len: usize,
    name: &str,
) -> Result<&'a [C::RustType], Error>
where
    C: Castable<Ownership = OwnershipRef>,
{
    if p.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(null_arg(name))
        };
    }
    // SAFETY: the header requires `p` to hold `len` initialized objects, which the caller does
    // not change during the call.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<C::RustType>(), len) })
}

/// A new box for the caller, who frees it with the type's `_destroy`.
pub(crate) fn to_box<C>(v: C::RustType) -> *mut C
where
    C: Castable<Ownership = OwnershipBox>,
{
    Box::into_raw(Box::new(v)).cast()
}

/// Writes a new box into an out-parameter already checked with `try_out!`.
pub(crate) fn set_box<C>(out: *mut *mut C, v: C::RustType)
where
    C: Castable<Ownership = OwnershipBox>,
{
    write_out(out, to_box(v));
}

/// Lends `v` to C for as long as `v` lives (a callback's argument, a message of a batch). The
/// receiver must not free it: for boxed types `_destroy` says which pointers it ignores or must
/// not be given.
pub(crate) fn to_ref<C: Castable>(v: &C::RustType) -> *const C {
    (v as *const C::RustType).cast()
}

/// Frees what `to_box` made; NULL is ignored.
pub(crate) fn free_box<C>(p: *mut C)
where
    C: Castable<Ownership = OwnershipBox>,
{
    if !p.is_null() {
        // SAFETY: the header requires `p` to come from lagless (`to_box`) and to be destroyed
        // once, after every other use.
        drop(unsafe { Box::from_raw(p.cast::<C::RustType>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use lagless::ErrorKind;

    /// A handle whose object counts its drops.
    struct handle {
        _private: [u8; 0],
    }
    struct Counted {
        value: i32,
        drops: Arc<AtomicUsize>,
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    castable! { handle: Box<Counted> }

    #[repr(C)]
    #[derive(Debug)]
    struct pair {
        a: u32,
        b: u32,
    }
    castable! { pair: Ref<pair> }

    fn counted(value: i32) -> (Counted, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        (
            Counted {
                value,
                drops: drops.clone(),
            },
            drops,
        )
    }

    #[test]
    fn a_box_round_trips_and_is_freed_once() {
        let (v, drops) = counted(7);
        let p: *mut handle = to_box(v);
        assert_eq!(try_from(p).map(|c| c.value), Some(7));
        try_mut(p, "h").unwrap().value = 8;
        assert_eq!(try_ref(p, "h").unwrap().value, 8);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        free_box(p);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn null_is_none_or_an_invalid_argument_naming_the_parameter() {
        let p = std::ptr::null_mut::<handle>();
        assert!(try_from(p).is_none());
        assert!(try_from_mut(p).is_none());
        for e in [
            try_ref(p, "consumer").err().unwrap(),
            try_mut(p, "consumer").err().unwrap(),
        ] {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("`consumer` is NULL"), "{e}");
        }
        // Freeing NULL does nothing, as every `_destroy` documents.
        free_box(p);
    }

    #[test]
    fn set_box_hands_a_new_box_to_the_out_parameter() {
        let (v, drops) = counted(3);
        let mut out = std::ptr::null_mut::<handle>();
        set_box(&mut out, v);
        assert_eq!(try_from(out).map(|c| c.value), Some(3));
        free_box(out);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_lent_object_reads_as_itself_and_stays_the_lender_s() {
        let (v, drops) = counted(5);
        let p: *const handle = to_ref(&v);
        assert!(std::ptr::eq(try_from(p).unwrap(), &v));
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_slice_of_the_caller_s_structs_null_only_when_empty() {
        let pairs = [pair { a: 1, b: 2 }, pair { a: 3, b: 4 }];
        let s = try_slice(pairs.as_ptr(), 2, "pairs").unwrap();
        assert_eq!(s.iter().map(|p| p.a + p.b).collect::<Vec<_>>(), [3, 7]);
        assert!(try_slice(std::ptr::null::<pair>(), 0, "pairs")
            .unwrap()
            .is_empty());
        let e = try_slice(std::ptr::null::<pair>(), 2, "pairs").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("`pairs` is NULL"), "{e}");
        // A caller's struct is read in place, not copied.
        assert!(std::ptr::eq(try_from(&pairs[1]).unwrap(), &pairs[1]));
    }
}

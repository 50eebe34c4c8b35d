//! The C ABI of lagless (see include/lagless.h, generated from this crate by cbindgen).
//!
//! Conventions, the same for every export:
//! - Names start with `lagless_`. Handles are opaque, created by `_new` and freed by `_destroy`.
//! - A fallible function returns `lagless_error *`: NULL means success; otherwise the caller
//!   owns the error and frees it with `lagless_error_destroy`. Out-parameters come last and are
//!   written only on success.
//! - Every export runs inside [`ffi_panic_boundary!`]: a Rust panic never crosses into C; it
//!   becomes an error with code `LAGLESS_ERR_PANIC` (or a documented neutral value for the few
//!   infallible accessors). Every pointer argument is checked for NULL.
//! - Handles are opaque markers whose Rust value and ownership (a box for the caller, or the
//!   caller's own memory) are declared once per type ([`cast::Castable`]); every handle pointer
//!   is read, lent and freed through `cast`, with its NULL check there.
//! - Callbacks (rebalance listener, commit and delivery reports) run on the caller's thread,
//!   inside the lagless call that serves them; only the log callback runs on library threads.
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]
// Exports are called from C, where an `unsafe fn` marker means nothing: each one null-checks its
// pointers and the header states what a non-NULL pointer must be.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[macro_use]
mod boundary;
#[macro_use]
mod cast;
mod admin;
mod batch;
mod config;
mod consumer;
mod error;
mod error_callback;
mod log;
mod message;
mod poll;
mod producer;
mod rebalance;
mod statistics;
mod tplist;
mod transaction;

#[cfg(test)]
mod export_tests;

pub use admin::*;
pub use batch::*;
pub use config::*;
pub use consumer::*;
pub use error::*;
pub use error_callback::*;
pub use log::*;
pub use message::*;
pub use producer::*;
pub use statistics::*;
pub use tplist::*;
pub use transaction::*;

use std::ffi::c_char;

/// The major version of the library these declarations belong to.
pub const LAGLESS_VERSION_MAJOR: u32 = 0;
/// The minor version of the library these declarations belong to.
pub const LAGLESS_VERSION_MINOR: u32 = 1;
/// The patch version of the library these declarations belong to.
pub const LAGLESS_VERSION_PATCH: u32 = 0;

/// The library's version, "MAJOR.MINOR.PATCH" (compare with `LAGLESS_VERSION` to detect a
/// header/library mismatch).
///
/// Thread-safety: any thread. Lifetime: a static string, never freed.
#[no_mangle]
pub extern "C" fn lagless_version() -> *const c_char {
    ffi_panic_boundary! {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast::<c_char>()
    }
}

/// The version as one number, `0xMMmmpp` followed by `ff` (major, minor, patch, then 0xff for
/// a release, as `rd_kafka_version()` does), so that versions compare as integers:
/// 0.1.0 is `0x000100ff`. Compare with `LAGLESS_VERSION_MAJOR` and friends to detect a
/// header/library mismatch at run time.
///
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn lagless_version_int() -> u32 {
    ffi_panic_boundary! {
        version_int(LAGLESS_VERSION_MAJOR, LAGLESS_VERSION_MINOR, LAGLESS_VERSION_PATCH)
    }
}

/// Packs a version the way librdkafka does: a byte each for major, minor and patch, then 0xff,
/// the pre-release byte of a final release. Parts above 255 are clamped, not wrapped into the
/// next byte, so that a larger version never compares smaller.
const fn version_int(major: u32, minor: u32, patch: u32) -> u32 {
    const fn byte(v: u32) -> u32 {
        if v > 0xff {
            0xff
        } else {
            v
        }
    }
    (byte(major) << 24) | (byte(minor) << 16) | (byte(patch) << 8) | 0xff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_int_packs_major_minor_patch_like_librdkafka() {
        assert_eq!(version_int(0, 1, 0), 0x0001_00ff);
        assert_eq!(version_int(2, 3, 4), 0x0203_04ff);
        assert!(version_int(1, 0, 0) > version_int(0, 255, 255));
        assert!(version_int(0, 2, 0) > version_int(0, 1, 9));
        assert_eq!(
            version_int(0, 300, 0),
            0x00ff_00ff,
            "clamped, not carried into major"
        );
        assert_eq!(
            lagless_version_int(),
            version_int(
                env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap(),
                env!("CARGO_PKG_VERSION_MINOR").parse().unwrap(),
                env!("CARGO_PKG_VERSION_PATCH").parse().unwrap(),
            )
        );
    }

    #[test]
    fn version_constants_match_cargo_toml() {
        assert_eq!(
            LAGLESS_VERSION_MAJOR.to_string(),
            env!("CARGO_PKG_VERSION_MAJOR")
        );
        assert_eq!(
            LAGLESS_VERSION_MINOR.to_string(),
            env!("CARGO_PKG_VERSION_MINOR")
        );
        assert_eq!(
            LAGLESS_VERSION_PATCH.to_string(),
            env!("CARGO_PKG_VERSION_PATCH")
        );
        let v = unsafe { std::ffi::CStr::from_ptr(lagless_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}

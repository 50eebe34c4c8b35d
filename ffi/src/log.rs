//! The log callback: lagless' log events for C callers.
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use lagless::log::{clear_log_callback, set_log_callback, LogLevel};
use lagless::Error;

use crate::boundary::Opaque;
use crate::error::{cstring_lossy, lagless_error};

/// Log levels, most severe first.
pub const LAGLESS_LOG_ERROR: i32 = 1;
pub const LAGLESS_LOG_WARN: i32 = 2;
pub const LAGLESS_LOG_INFO: i32 = 3;
pub const LAGLESS_LOG_DEBUG: i32 = 4;
pub const LAGLESS_LOG_TRACE: i32 = 5;

/// Receives one log event: its level (`LAGLESS_LOG_*`), target (the lagless module) and message,
/// both borrowed for the duration of the call. Thread: ANY lagless thread (the I/O threads) or a
/// thread inside a lagless call; it must be thread-safe, quick, and must not call lagless.
pub type lagless_log_cb = Option<
    unsafe extern "C" fn(
        opaque: *mut c_void,
        level: i32,
        target: *const c_char,
        message: *const c_char,
    ),
>;

/// Sends lagless' log events at `max_level` (`LAGLESS_LOG_*`) and more severe to `callback`,
/// process-wide, replacing an earlier callback. A NULL `callback` stops the logging. `opaque`
/// is passed to every call and must stay valid while the callback is installed. Fails with
/// `LAGLESS_ERR_ILLEGAL_STATE` if the process already routes Rust `tracing` events elsewhere.
#[no_mangle]
pub extern "C" fn lagless_set_log_callback(
    max_level: i32,
    callback: lagless_log_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let Some(cb) = callback else {
            clear_log_callback();
            return Ok(());
        };
        let level = LogLevel::from_i32(max_level).ok_or_else(|| {
            Error::InvalidArgument(format!("log level {max_level} is not one of 1 (error) to 5 (trace)"))
        })?;
        let opaque = Opaque(opaque);
        set_log_callback(
            level,
            Arc::new(move |level: LogLevel, target: &str, message: &str| {
                let t = cstring_lossy(target);
                let m = cstring_lossy(message);
                // SAFETY: the caller's callback, documented to be callable from any thread.
                unsafe { cb(opaque.ptr(), level as i32, t.as_ptr(), m.as_ptr()) };
            }),
        )
    }
}

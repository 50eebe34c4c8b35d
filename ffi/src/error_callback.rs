//! The error callback in C (librdkafka's `error_cb`): whole-cluster conditions (all brokers
//! down, refused credentials or certificate, a silent group coordinator) handed to a C
//! callback inside `lagless_consumer_poll` on the polling thread.
use std::ffi::c_void;

use crate::boundary::Opaque;
use crate::consumer::lagless_consumer;
use crate::error::{boxed, lagless_error, lagless_error_destroy};

/// The error callback: `error` is borrowed for the duration of the call (read it with
/// `lagless_error_code`, `_name`, `_message`, ...; do not destroy it). Runs only inside
/// `lagless_consumer_poll`/`_poll_batch`, on the thread that called it, once as each condition
/// begins. It must not call `lagless_consumer_poll` on the same consumer nor destroy it, and
/// must not unwind (longjmp, C++ exceptions) through lagless.
pub type lagless_error_cb =
    Option<unsafe extern "C" fn(opaque: *mut c_void, error: *const lagless_error)>;

/// Sets the error callback, for conditions of the whole cluster that no single call fails with,
/// each heard once as it begins: every known broker failed its last connection attempt
/// (`LAGLESS_ERR_TRANSPORT`, "all brokers are down"), a broker refused the credentials
/// (`LAGLESS_ERR_AUTHENTICATION`) or the TLS handshake failed (`LAGLESS_ERR_SSL`), the group
/// coordinator answered no heartbeat for `session.timeout.ms` (`LAGLESS_ERR_TIMEOUT`). The
/// consumer goes on retrying meanwhile. A poll calls it before it takes records; a poll waiting
/// for records calls it within about 100 ms of the condition. Conditions raised while no
/// callback is set are logged only. NULL `error_cb` removes it. `opaque` is passed to it
/// untouched and must stay valid until the callback is replaced or the consumer destroyed.
#[no_mangle]
pub extern "C" fn lagless_consumer_set_error_callback(
    consumer: *mut lagless_consumer,
    error_cb: lagless_error_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let opaque = Opaque(opaque);
        c.set_error_callback(error_cb.map(|cb| {
            Box::new(move |e: &lagless::Error| {
                let error = boxed(e);
                // SAFETY: the caller's function with the caller's pointer; the error lives
                // through the call, as the callback's contract says, and is freed after it.
                unsafe { cb(opaque.ptr(), error) };
                lagless_error_destroy(error);
                Ok(())
            }) as lagless::ErrorCallback
        }));
        Ok(())
    }
}

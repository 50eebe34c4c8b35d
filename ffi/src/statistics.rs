//! `statistics.interval.ms` in C: the metrics snapshot as JSON handed to a C callback, the way
//! librdkafka's `stats_cb` gets it, inside `lagless_consumer_poll` on the polling thread.
use std::ffi::{c_char, c_void};

use lagless::metrics::ConsumerMetrics;

use crate::boundary::Opaque;
use crate::consumer::lagless_consumer;
use crate::error::{cstring_lossy, lagless_error};

/// The statistics callback: `json` is the consumer's metrics snapshot (the object
/// `lagless_consumer_metrics_json` returns), `json_len` bytes long and NUL-terminated, borrowed
/// for the duration of the call (copy it to keep it). Runs only inside
/// `lagless_consumer_poll`/`_poll_batch`, on the thread that called it, every
/// `statistics.interval.ms`. It must not call `lagless_consumer_poll` on the same consumer nor
/// destroy it, and must not unwind (longjmp, C++ exceptions) through lagless.
pub type lagless_statistics_cb =
    Option<unsafe extern "C" fn(opaque: *mut c_void, json: *const c_char, json_len: usize)>;

/// Sets the statistics callback: every `statistics.interval.ms` (a config key; 0, the default,
/// means never) a poll calls it with the metrics snapshot as JSON before it takes records, and a
/// poll waiting for records wakes for it; a consumer not polled meanwhile gets one call when
/// polled again, not one per interval missed. The first call comes one interval after the
/// consumer was created. NULL `statistics_cb` removes it. `opaque` is passed to it untouched
/// and must stay valid until the callback is replaced or the consumer destroyed.
#[no_mangle]
pub extern "C" fn lagless_consumer_set_statistics_callback(
    consumer: *mut lagless_consumer,
    statistics_cb: lagless_statistics_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(consumer);
        let c = h.open()?;
        let opaque = Opaque(opaque);
        c.set_statistics_callback(statistics_cb.map(|cb| {
            Box::new(move |m: &ConsumerMetrics| {
                let json = cstring_lossy(&m.to_json_string());
                let len = json.as_bytes().len();
                // SAFETY: the caller's function with the caller's pointer; the string lives
                // through the call, as the callback's contract says.
                unsafe { cb(opaque.ptr(), json.as_ptr(), len) };
                Ok(())
            }) as lagless::StatisticsCallback
        }));
        Ok(())
    }
}

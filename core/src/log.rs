//! Logs for callers that are not Rust: one callback receives lagless' log events (level, target,
//! message). The C ABI and the Python package use it; Rust programs can use any `tracing`
//! subscriber instead.
//!
//! The callback runs on the thread that logs: a lagless I/O thread or the caller's own thread
//! (inside `poll()` and friends). It must be thread-safe and must not block for long.
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock, RwLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

use crate::error::{Error, Result};
use crate::sync::Unpoisoned;

/// Log levels, most severe first; the numbers are part of the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i32)]
pub enum LogLevel {
    /// Events at `tracing`'s ERROR level; C ABI number 1.
    Error = 1,
    /// Events at `tracing`'s WARN level; C ABI number 2.
    Warn = 2,
    /// Events at `tracing`'s INFO level; C ABI number 3.
    Info = 3,
    /// Events at `tracing`'s DEBUG level; C ABI number 4.
    Debug = 4,
    /// Events at `tracing`'s TRACE level; C ABI number 5.
    Trace = 5,
}

impl LogLevel {
    fn of(l: &tracing::Level) -> LogLevel {
        match *l {
            tracing::Level::ERROR => LogLevel::Error,
            tracing::Level::WARN => LogLevel::Warn,
            tracing::Level::INFO => LogLevel::Info,
            tracing::Level::DEBUG => LogLevel::Debug,
            tracing::Level::TRACE => LogLevel::Trace,
        }
    }

    /// The level with C ABI number `v` (1 for `Error` to 5 for `Trace`), if there is one.
    pub fn from_i32(v: i32) -> Option<LogLevel> {
        Some(match v {
            1 => LogLevel::Error,
            2 => LogLevel::Warn,
            3 => LogLevel::Info,
            4 => LogLevel::Debug,
            5 => LogLevel::Trace,
            _ => return None,
        })
    }
}

/// Receives (level, target, message).
pub type LogCallback = dyn Fn(LogLevel, &str, &str) + Send + Sync;

struct Sink {
    max_level: LogLevel,
    callback: Arc<LogCallback>,
}

static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Sends lagless' log events at `max_level` and above to `callback`, replacing an earlier
/// callback. Fails if the process already has another global `tracing` subscriber.
pub fn set_log_callback(max_level: LogLevel, callback: Arc<LogCallback>) -> Result<()> {
    let installed = *INSTALLED.get_or_init(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(CallbackLayer))
            .is_ok()
    });
    if !installed {
        return Err(Error::IllegalState(
            "another global tracing subscriber is installed; lagless logs go to it".into(),
        ));
    }
    *SINK.write().unpoisoned() = Some(Sink {
        max_level,
        callback,
    });
    Ok(())
}

/// Stops sending log events to the callback.
pub fn clear_log_callback() {
    *SINK.write().unpoisoned() = None;
}

struct CallbackLayer;

impl<S: Subscriber> Layer<S> for CallbackLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = LogLevel::of(event.metadata().level());
        // The sink's lock is not held while the callback runs: a callback may wait for a lock of
        // its own (Python's logging lock), which a thread replacing the callback may hold while it
        // waits for this one (Python's `dictConfig` sets levels under that lock, and the package
        // follows level changes).
        let cb = {
            let sink = SINK.read().unpoisoned();
            let Some(sink) = sink.as_ref() else { return };
            if level > sink.max_level {
                return;
            }
            sink.callback.clone()
        };
        let mut v = MessageVisitor::default();
        event.record(&mut v);
        let target = event.metadata().target();
        // A panicking callback must not take an I/O thread down.
        let message = v.message + &v.fields;
        let _ =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(level, target, &message)));
    }
}

/// Formats `message` first, then the other fields as `key=value`.
#[derive(Default)]
struct MessageVisitor {
    message: String,
    fields: String,
}

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }
}

//! Core log events to the Python logger `lagless`.
//!
//! The core calls the callback on whatever thread logs, I/O threads included, so it attaches to
//! the interpreter first. It uses `try_attach`: when the interpreter is finalizing the event is
//! dropped rather than waiting for a GIL that will not come back. Every blocking core call of
//! this package runs detached, so an I/O thread waiting here never waits for a thread that
//! waits for it.
use std::sync::Arc;

use lagless::log::{clear_log_callback, set_log_callback, LogLevel};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::errors::IntoPyResult;

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn python_level(l: LogLevel) -> i32 {
    match l {
        LogLevel::Error => 40,
        LogLevel::Warn => 30,
        LogLevel::Info => 20,
        LogLevel::Debug => 10,
        LogLevel::Trace => 5,
    }
}

fn core_level(python: i32) -> LogLevel {
    match python {
        l if l > 30 => LogLevel::Error,
        l if l > 20 => LogLevel::Warn,
        l if l > 10 => LogLevel::Info,
        l if l > 5 => LogLevel::Debug,
        _ => LogLevel::Trace,
    }
}

fn emit(level: LogLevel, target: &str, message: &str) {
    let _ = Python::try_attach(|py| -> PyResult<()> {
        let logger = LOGGER.get_or_try_init(py, || {
            py.import("logging")?
                .call_method1("getLogger", ("lagless",))
                .map(Bound::unbind)
        })?;
        logger
            .bind(py)
            .call_method1("log", (python_level(level), "%s: %s", target, message))?;
        Ok(())
    });
}

/// Forwards core events at `level` (a Python logging level) and above; None stops forwarding.
#[pyfunction]
#[pyo3(signature = (level))]
pub fn _set_log_level(py: Python<'_>, level: Option<i32>) -> PyResult<()> {
    match level {
        None => {
            py.detach(clear_log_callback);
            Ok(())
        }
        Some(l) => py
            .detach(|| set_log_callback(core_level(l), Arc::new(emit)))
            .py(py),
    }
}

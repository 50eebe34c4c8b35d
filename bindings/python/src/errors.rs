//! Core errors as the Python exception classes of `lagless._errors`, with their attributes.
//!
//! The classes are plain Python (attributes and docs are easier there); this module only picks
//! the class by the core error's stable code and fills in the attributes.
use lagless::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The class for each stable core error code (`Error::code`).
fn class_name(code: i32) -> &'static str {
    match code {
        1 => "ConfigError",
        2 => "InvalidArgumentError",
        3 => "KafkaError",
        4 => "LaglessTimeout",
        5 => "TransportError",
        6 => "CorruptError",
        7 => "UnknownTopicError",
        8 => "NoOffsetError",
        9 => "PartitionStuckError",
        10 => "CommitFailedError",
        11 => "WakeupError",
        12 => "ClosedError",
        13 => "CallbackError",
        14 => "IllegalStateError",
        15 => "AuthenticationError",
        16 => "SslError",
        _ => "LaglessError",
    }
}

fn build(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let module =
        ERRORS_MODULE.get_or_try_init(py, || py.import("lagless._errors").map(Bound::unbind))?;
    let cls = module.bind(py).getattr(class_name(e.code()))?;
    let kw = PyDict::new(py);
    kw.set_item("code", e.code())?;
    kw.set_item("name", e.name())?;
    kw.set_item("retriable", e.is_retriable())?;
    kw.set_item("fatal", e.is_fatal())?;
    kw.set_item("kafka_code", e.kafka_code())?;
    if let Some(p) = e.partition() {
        kw.set_item("topic", &p.topic)?;
        kw.set_item("partition", p.partition)?;
    }
    match e {
        Error::Config { key, .. } => kw.set_item("key", key)?,
        Error::UnknownTopic(t) => kw.set_item("topic", t)?,
        _ => {}
    }
    let exc = cls.call((e.to_string(),), Some(&kw))?;
    Ok(PyErr::from_value(exc))
}

/// The Python exception for a core error.
pub fn to_py(py: Python<'_>, e: &Error) -> PyErr {
    match build(py, e) {
        Ok(err) => err,
        // lagless._errors could not be imported: still say what went wrong.
        Err(import_err) => import_err,
    }
}

/// `?`-friendly conversion of a core result, attaching to the interpreter where needed.
pub trait IntoPyResult<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for lagless::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}

//! Core errors as the Python exception classes of `lagless._errors`, with their attributes.
//!
//! The classes are plain Python (attributes and docs are easier there); each says the core error
//! kind it stands for (`kind`, the core's `ErrorKind::name`), and this module asks
//! `lagless._errors` for the class of a kind and fills in the attributes.
use lagless::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Every core error kind as (stable code, name): what the package's test checks its exception
/// classes against.
#[pyfunction]
pub fn _error_kinds() -> Vec<(i32, &'static str)> {
    ErrorKind::ALL
        .iter()
        .map(|k| (k.code(), k.name()))
        .collect()
}

fn build(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let module =
        ERRORS_MODULE.get_or_try_init(py, || py.import("lagless._errors").map(Bound::unbind))?;
    let cls = module
        .bind(py)
        .call_method1("_class_for", (e.kind().name(),))?;
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

/// The exception object of `err`, as callbacks and per-partition results hand it to Python
/// code (not raised).
pub fn exception(py: Python<'_>, err: &PyErr) -> Py<PyAny> {
    err.value(py).clone().into_any().unbind()
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

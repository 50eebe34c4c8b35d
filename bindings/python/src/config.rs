//! A Python mapping (a dict, usually) of Java-named settings as a core `Config`.
use lagless::Config;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyMapping, PyString};

use crate::errors::IntoPyResult;

/// Any mapping is accepted (the stubs type it `Mapping[str, Any]`, so that a `dict[str, object]`
/// of mixed values passes mypy). Values may be str, int, float or bool (True becomes "true");
/// the core checks keys and values and names the key in its `ConfigError`.
pub fn from_mapping(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Config> {
    let mapping = config.cast::<PyMapping>().map_err(|_| {
        let got = config
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".to_string());
        PyTypeError::new_err(format!(
            "config must be a mapping (a dict) of str keys to str, int, float or bool values, got {got}"
        ))
    })?;
    let mut c = Config::new();
    for item in mapping.items()?.iter() {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("config keys must be str, got {k:?}")))?;
        let value: String = if v.is_instance_of::<PyBool>() {
            if v.is_truthy()? { "true" } else { "false" }.to_string()
        } else if v.is_instance_of::<PyString>()
            || v.is_instance_of::<PyInt>()
            || v.is_instance_of::<PyFloat>()
        {
            v.str()?.to_string()
        } else {
            return Err(PyTypeError::new_err(format!(
                "config `{key}`: value must be str, int, float or bool, got {}",
                v.get_type().name()?
            )));
        };
        c.set(&key, &value).py(py)?;
    }
    Ok(c)
}

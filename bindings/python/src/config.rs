//! A Python dict of Java-named settings as a core `Config`.
use lagless::Config;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

use crate::errors::IntoPyResult;

/// Values may be str, int, float or bool (True becomes "true"); the core checks keys and values
/// and names the key in its `ConfigError`.
pub fn from_dict(py: Python<'_>, config: &Bound<'_, PyDict>) -> PyResult<Config> {
    let mut c = Config::new();
    for (k, v) in config.iter() {
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

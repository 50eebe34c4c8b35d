//! A Python mapping (a dict, usually) of Java-named settings as a core `Config`, with `oauth_cb`,
//! the application's OAUTHBEARER token provider (a callable, named as confluent-kafka names it).
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use lagless::sasl::oauthbearer::ProviderError;
use lagless::sasl::{OAuthBearerToken, OAuthBearerTokenProvider};
use lagless::secret::Secret;
use lagless::Config;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyMapping, PyString};

use crate::errors::IntoPyResult;

/// The key of the token provider: not a core key, since its value is code.
const OAUTH_CB: &str = "oauth_cb";

/// Any mapping is accepted (the stubs type it `Mapping[str, Any]`, so that a `dict[str, object]`
/// of mixed values passes mypy). Values may be str, int, float or bool (True becomes "true");
/// the core checks keys and values and names the key in its `ConfigError`. `oauth_cb` must be
/// callable.
pub fn from_mapping(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Config> {
    let (c, callbacks) = parse(py, config)?;
    if callbacks.stats_cb.is_some() {
        return Err(PyTypeError::new_err(format!(
            "config `{STATS_CB}`: only a Consumer or a Producer has statistics"
        )));
    }
    if callbacks.error_cb.is_some() {
        return Err(PyTypeError::new_err(format!(
            "config `{ERROR_CB}`: only a Consumer or a Producer has an error callback"
        )));
    }
    Ok(c)
}

/// The key of the statistics callback (confluent-kafka's name): not a core key either.
const STATS_CB: &str = "stats_cb";

/// The key of the error callback (confluent-kafka's name).
const ERROR_CB: &str = "error_cb";

/// The callables of a consumer's config.
#[derive(Default)]
pub struct ConsumerCallbacks {
    /// `stats_cb`: given the statistics JSON (a str) every `statistics.interval.ms`.
    pub stats_cb: Option<Py<PyAny>>,
    /// `error_cb`: given a `LaglessError` for each whole-cluster condition.
    pub error_cb: Option<Py<PyAny>>,
}

/// A consumer's or a producer's config: as [`from_mapping`], and its callables `stats_cb` and
/// `error_cb`.
pub fn consumer_from_mapping(
    py: Python<'_>,
    config: &Bound<'_, PyAny>,
) -> PyResult<(Config, ConsumerCallbacks)> {
    parse(py, config)
}

fn parse(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<(Config, ConsumerCallbacks)> {
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
    let mut oauth_cb = None;
    let mut callbacks = ConsumerCallbacks::default();
    for item in mapping.items()?.iter() {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("config keys must be str, got {k:?}")))?;
        if key == OAUTH_CB {
            if !v.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "config `{OAUTH_CB}`: must be callable (oauthbearer_config) -> (token, \
                     expiry), got {}",
                    v.get_type().name()?
                )));
            }
            oauth_cb = Some(v.unbind());
            continue;
        }
        if key == STATS_CB || key == ERROR_CB {
            if !v.is_callable() {
                let takes = if key == STATS_CB {
                    "json: str"
                } else {
                    "error: LaglessError"
                };
                return Err(PyTypeError::new_err(format!(
                    "config `{key}`: must be callable ({takes}) -> None, got {}",
                    v.get_type().name()?
                )));
            }
            let slot = if key == STATS_CB {
                &mut callbacks.stats_cb
            } else {
                &mut callbacks.error_cb
            };
            *slot = Some(v.unbind());
            continue;
        }
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
    if let Some(callback) = oauth_cb {
        let argument = c.get("sasl.oauthbearer.config").py(py)?.unwrap_or_default();
        c.set_oauthbearer_token_provider(Arc::new(PyTokenProvider {
            callback,
            argument: Secret::new(argument),
        }));
    }
    Ok((c, callbacks))
}

/// `oauth_cb(oauthbearer_config) -> (token, expiry[, principal[, extensions]])`, as in
/// confluent-kafka: `expiry` in seconds since the epoch, `extensions` a dict of str (KIP-342).
struct PyTokenProvider {
    callback: Py<PyAny>,
    /// `sasl.oauthbearer.config`, handed to the callable: it may hold a client secret.
    argument: Secret,
}

impl OAuthBearerTokenProvider for PyTokenProvider {
    // Called on one of the core's blocking threads, never on a thread that holds the GIL: every
    // call of the bindings that may connect to a broker releases it first.
    fn token(&self) -> Result<OAuthBearerToken, ProviderError> {
        Python::try_attach(|py| {
            let result = self
                .callback
                .call1(py, (self.argument.expose(),))
                .map_err(|e| raised(py, &e))?;
            token_from(result.bind(py))
        })
        .unwrap_or_else(|| Err("oauth_cb: the Python interpreter is shutting down".into()))
    }
}

/// What the callable raised, by class and message. The traceback stays out: it may show locals.
fn raised(py: Python<'_>, e: &PyErr) -> ProviderError {
    let class = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an exception".to_string());
    format!("oauth_cb raised {class}: {}", e.value(py)).into()
}

/// The token of the callable's answer; the error says which part is wrong, never the token.
fn token_from(answer: &Bound<'_, PyAny>) -> Result<OAuthBearerToken, ProviderError> {
    let shape = "oauth_cb must return (token, expiry) or (token, expiry, principal) or (token, \
                 expiry, principal, extensions), with expiry in seconds since the epoch";
    let parts: Vec<Bound<'_, PyAny>> = match answer.try_iter() {
        Ok(items) if !answer.is_instance_of::<PyString>() => {
            items.collect::<PyResult<_>>().map_err(|_| shape)?
        }
        _ => return Err(format!("{shape}; it returned a {}", type_name(answer)).into()),
    };
    if !(2..=4).contains(&parts.len()) {
        return Err(format!("{shape}; it returned {} items", parts.len()).into());
    }
    let value: String = parts[0].extract().map_err(|_| {
        format!(
            "oauth_cb returned a {} as the token, not a str",
            type_name(&parts[0])
        )
    })?;
    let expiry: f64 = parts[1].extract().map_err(|_| {
        format!(
            "oauth_cb returned a {} as the expiry, not seconds since the epoch (int or float)",
            type_name(&parts[1])
        )
    })?;
    let expires_at = Duration::try_from_secs_f64(expiry)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| {
            format!("oauth_cb returned the expiry {expiry}, not seconds since the epoch")
        })?;
    let principal: String = match parts.get(2) {
        Some(p) if !p.is_none() => p.extract().map_err(|_| {
            format!(
                "oauth_cb returned a {} as the principal, not a str",
                type_name(p)
            )
        })?,
        _ => String::new(),
    };
    let extensions: BTreeMap<String, String> = match parts.get(3) {
        Some(x) if !x.is_none() => x.extract().map_err(|_| {
            format!(
                "oauth_cb returned a {} as the extensions, not a dict of str to str",
                type_name(x)
            )
        })?,
        _ => BTreeMap::new(),
    };
    Ok(OAuthBearerToken {
        value: Secret::new(value),
        expires_at,
        principal,
        extensions,
    })
}

fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "value".to_string())
}

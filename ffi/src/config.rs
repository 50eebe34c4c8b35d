//! Config handles: string keys and values (the Java client's key names), checked as they are set.
use std::ffi::{c_char, CString};

use lagless::Config;

use crate::boundary::write_out;
use crate::error::{cstring_lossy, lagless_error};

/// Settings for a consumer or a producer. Owned by the caller (`lagless_config_new` /
/// `lagless_config_destroy`). `lagless_consumer_new` and `lagless_producer_new` copy it: it may
/// be destroyed or reused right after. Not synchronized: use one config from one thread at a
/// time.
pub struct lagless_config {
    pub(crate) inner: Config,
}

/// A new, empty config (every key at its default). Returns NULL only if lagless failed
/// internally.
#[no_mangle]
pub extern "C" fn lagless_config_new() -> *mut lagless_config {
    ffi_panic_boundary! {
        Box::into_raw(Box::new(lagless_config { inner: Config::new() }))
    }
}

/// Sets `key` to `value`. An unknown key or a bad value gives `LAGLESS_ERR_CONFIG` whose message
/// names the key (and, for a misspelt key, the closest known one); the config is then unchanged.
#[no_mangle]
pub extern "C" fn lagless_config_set(
    config: *mut lagless_config,
    key: *const c_char,
    value: *const c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_mut!(config);
        let key = try_str!(key);
        let value = try_str!(value);
        config.inner.set(key, value)
    }
}

/// The effective value of `key` (set, else its default) as a new string the caller frees with
/// `lagless_string_destroy`; `*out_value` is set to NULL when the key has neither a value nor a
/// default. An unknown key gives `LAGLESS_ERR_CONFIG`.
#[no_mangle]
pub extern "C" fn lagless_config_get(
    config: *const lagless_config,
    key: *const c_char,
    out_value: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_ref!(config);
        let key = try_str!(key);
        try_out!(out_value);
        let v = config.inner.get(key)?;
        write_out(out_value, v.map_or(std::ptr::null_mut(), |v| cstring_lossy(&v).into_raw()));
        Ok(())
    }
}

/// Every key with its effective value, one `key=value` per line, in the table's order; sensitive
/// values show as `[hidden]`. A new string the caller frees with `lagless_string_destroy`.
#[no_mangle]
pub extern "C" fn lagless_config_dump(
    config: *const lagless_config,
    out_dump: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_ref!(config);
        try_out!(out_dump);
        let mut s = String::new();
        for (k, v) in config.inner.dump() {
            s.push_str(&k);
            s.push('=');
            s.push_str(&v);
            s.push('\n');
        }
        write_out(out_dump, cstring_lossy(&s).into_raw());
        Ok(())
    }
}

/// Frees a config. NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_config_destroy(config: *mut lagless_config) {
    ffi_panic_boundary! {
        if !config.is_null() {
            // SAFETY: `config` came from lagless_config_new and is destroyed once.
            drop(unsafe { Box::from_raw(config) });
        }
    }
}

/// Frees a string lagless returned as owned (`lagless_config_get`, `lagless_config_dump`).
/// NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_string_destroy(s: *mut c_char) {
    ffi_panic_boundary! {
        if !s.is_null() {
            // SAFETY: `s` came from CString::into_raw in lagless and is destroyed once.
            drop(unsafe { CString::from_raw(s) });
        }
    }
}

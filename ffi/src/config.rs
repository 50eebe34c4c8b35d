//! Config handles: string keys and values (the Java client's key names), checked as they are set.
use std::ffi::{c_char, CString};

use lagless::Config;

use crate::boundary::write_out;
use crate::cast::{free_box, to_box};
use crate::error::{cstring_lossy, lagless_error};

/// Settings for a consumer or a producer. Owned by the caller (`lagless_config_new` /
/// `lagless_config_destroy`). `lagless_consumer_new` and `lagless_producer_new` copy it: it may
/// be destroyed or reused right after. Not synchronized: use one config from one thread at a
/// time.
pub struct lagless_config {
    _private: [u8; 0],
}

castable! { lagless_config: Box<Config> }

/// A new, empty config (every key at its default). Returns NULL only if lagless failed
/// internally.
#[no_mangle]
pub extern "C" fn lagless_config_new() -> *mut lagless_config {
    ffi_panic_boundary! { to_box(Config::new()) }
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
        config.set(key, value)
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
        let v = config.get(key)?;
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
        for (k, v) in config.dump() {
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
    ffi_panic_boundary! { free_box(config) }
}

/// Frees a string lagless returned as owned (`lagless_config_get`, `lagless_config_dump`,
/// `lagless_consumer_metrics_json`).
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
/// Where an application's OAUTHBEARER tokens come from. Called whenever a connection needs a
/// token and the cached one has passed 80% of its lifetime, from a lagless thread (not the
/// caller's), possibly from several clients at once: it may block, and `opaque` must be safe to
/// use from any thread. On success it writes the token (NUL-terminated) into `token`
/// (`token_size` bytes), the token's expiry in milliseconds since the Unix epoch into
/// `expires_at_ms`, the principal it names into `principal` (`principal_size` bytes) and returns
/// 0; on failure it returns non-zero with a message in `errstr` (`errstr_size` bytes), which
/// becomes a `LAGLESS_ERR_AUTHENTICATION` error. Never put the token or a secret in `errstr`.
pub type lagless_oauthbearer_token_cb = Option<
    unsafe extern "C" fn(
        opaque: *mut std::ffi::c_void,
        token: *mut c_char,
        token_size: usize,
        expires_at_ms: *mut i64,
        principal: *mut c_char,
        principal_size: usize,
        errstr: *mut c_char,
        errstr_size: usize,
    ) -> i32,
>;

/// Room for a token: JWTs with many claims reach several kilobytes.
const TOKEN_SIZE: usize = 64 * 1024;
const PRINCIPAL_SIZE: usize = 1024;
const ERRSTR_SIZE: usize = 1024;

struct CTokenProvider {
    cb: unsafe extern "C" fn(
        *mut std::ffi::c_void,
        *mut c_char,
        usize,
        *mut i64,
        *mut c_char,
        usize,
        *mut c_char,
        usize,
    ) -> i32,
    opaque: *mut std::ffi::c_void,
}

// SAFETY: the header requires `opaque` to be usable from any thread.
unsafe impl Send for CTokenProvider {}
unsafe impl Sync for CTokenProvider {}

/// The NUL-terminated string at the start of `buf` (all of it if the callback wrote no NUL).
fn c_buf_str(buf: &[u8]) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl lagless::sasl::OAuthBearerTokenProvider for CTokenProvider {
    fn token(
        &self,
    ) -> Result<lagless::sasl::OAuthBearerToken, lagless::sasl::oauthbearer::ProviderError> {
        let mut token = vec![0u8; TOKEN_SIZE];
        let mut principal = vec![0u8; PRINCIPAL_SIZE];
        let mut errstr = vec![0u8; ERRSTR_SIZE];
        let mut expires_at_ms: i64 = 0;
        // SAFETY: the buffers are as long as the sizes passed; the callback's contract is in
        // the header.
        let rc = unsafe {
            (self.cb)(
                self.opaque,
                token.as_mut_ptr().cast(),
                TOKEN_SIZE,
                &mut expires_at_ms,
                principal.as_mut_ptr().cast(),
                PRINCIPAL_SIZE,
                errstr.as_mut_ptr().cast(),
                ERRSTR_SIZE,
            )
        };
        let value = lagless::secret::Secret::new(c_buf_str(&token));
        token.iter_mut().for_each(|b| *b = 0);
        if rc != 0 {
            let e = c_buf_str(&errstr);
            return Err(if e.is_empty() {
                format!("the callback returned {rc}").into()
            } else {
                e.into()
            });
        }
        let expires_at = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(expires_at_ms).unwrap_or(0));
        Ok(lagless::sasl::OAuthBearerToken {
            value,
            expires_at,
            principal: c_buf_str(&principal),
            extensions: Default::default(),
        })
    }
}

/// Makes `cb` the source of OAUTHBEARER tokens (with `sasl.mechanism=OAUTHBEARER`); it wins
/// over `sasl.oauthbearer.*`. A NULL `cb` gives `LAGLESS_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn lagless_config_set_oauthbearer_token_cb(
    config: *mut lagless_config,
    cb: lagless_oauthbearer_token_cb,
    opaque: *mut std::ffi::c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_mut!(config);
        let Some(cb) = cb else {
            return Err(lagless::Error::InvalidArgument("cb is NULL".into()));
        };
        config.set_oauthbearer_token_provider(std::sync::Arc::new(CTokenProvider { cb, opaque }));
        Ok(())
    }
}

#[cfg(test)]
mod oauthbearer_tests {
    use super::*;
    use lagless::sasl::OAuthBearerTokenProvider;

    unsafe extern "C" fn good(
        opaque: *mut std::ffi::c_void,
        token: *mut c_char,
        _token_size: usize,
        expires_at_ms: *mut i64,
        principal: *mut c_char,
        _principal_size: usize,
        _errstr: *mut c_char,
        _errstr_size: usize,
    ) -> i32 {
        *(opaque as *mut i32) += 1;
        std::ptr::copy_nonoverlapping(c"tok-abc".as_ptr(), token, 8);
        std::ptr::copy_nonoverlapping(c"alice".as_ptr(), principal, 6);
        *expires_at_ms = 4_102_444_800_000;
        0
    }

    unsafe extern "C" fn bad(
        _opaque: *mut std::ffi::c_void,
        _token: *mut c_char,
        _token_size: usize,
        _expires_at_ms: *mut i64,
        _principal: *mut c_char,
        _principal_size: usize,
        errstr: *mut c_char,
        _errstr_size: usize,
    ) -> i32 {
        std::ptr::copy_nonoverlapping(c"idp down".as_ptr(), errstr, 9);
        -1
    }

    #[test]
    fn the_callback_s_token_principal_and_expiry_are_taken() {
        let mut calls = 0i32;
        let p = CTokenProvider {
            cb: good,
            opaque: (&mut calls as *mut i32).cast(),
        };
        let t = p.token().unwrap();
        assert_eq!(t.value.expose(), "tok-abc");
        assert_eq!(t.principal, "alice");
        assert_eq!(
            t.expires_at,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(4_102_444_800)
        );
        assert_eq!(calls, 1);
        let e = CTokenProvider {
            cb: bad,
            opaque: std::ptr::null_mut(),
        }
        .token()
        .unwrap_err();
        assert_eq!(e.to_string(), "idp down");
    }

    #[test]
    fn setting_the_callback_checks_its_arguments() {
        let c = lagless_config_new();
        let e = lagless_config_set_oauthbearer_token_cb(c, None, std::ptr::null_mut());
        assert_eq!(
            crate::error::lagless_error_code(e),
            crate::error::LAGLESS_ERR_INVALID_ARGUMENT
        );
        crate::error::lagless_error_destroy(e);
        let e = lagless_config_set_oauthbearer_token_cb(c, Some(good), std::ptr::null_mut());
        assert!(e.is_null());
        lagless_config_destroy(c);
    }
}

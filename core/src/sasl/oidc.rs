//! OAUTHBEARER tokens from an OAuth 2 token endpoint with the client-credentials grant
//! (`sasl.oauthbearer.method=oidc`; RFC 6749 section 4.4), as librdkafka and the Java client's
//! `OAuthBearerLoginCallbackHandler` fetch them.
//!
//! The request is a form POST of `grant_type=client_credentials` (and `scope`), the client
//! authenticated with HTTP Basic (RFC 6749 section 2.3.1); the answer's `access_token` is the
//! token and `expires_in` its lifetime (else the JWT's `exp`). The principal is the JWT's `sub`
//! where the token is a JWT, else the client id. HTTPS is required except to a loopback address.
use std::collections::BTreeMap;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as BASE64URL};
use base64::Engine;
use serde_json::Value;

use super::oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider, ProviderError};
use crate::error::{Error, Result};
use crate::secret::Secret;

#[derive(Debug, Clone)]
pub(crate) struct Oidc {
    endpoint: String,
    client_id: String,
    client_secret: Secret,
    scope: Option<String>,
    extensions: BTreeMap<String, String>,
    timeout: Duration,
}

impl Oidc {
    pub(crate) fn new(
        endpoint: &str,
        client_id: &str,
        client_secret: Secret,
        scope: Option<String>,
        extensions: BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<Oidc> {
        const URL_KEY: &str = "sasl.oauthbearer.token.endpoint.url";
        let rest = if let Some(rest) = endpoint.strip_prefix("https://") {
            if !cfg!(feature = "tls") {
                return Err(Error::config(
                    URL_KEY,
                    format!(
                        "`{endpoint}` needs TLS, which this build of lagless leaves out: turn on \
                         the lagless crate's `tls` feature (on by default)"
                    ),
                ));
            }
            rest
        } else if let Some(rest) = endpoint.strip_prefix("http://") {
            if !is_loopback(rest) {
                return Err(Error::config(
                    URL_KEY,
                    format!(
                        "`{endpoint}` is plain http to a remote host: the client secret would \
                         cross the network unencrypted; use https"
                    ),
                ));
            }
            rest
        } else {
            return Err(Error::config(
                URL_KEY,
                format!("`{endpoint}` is not an https:// URL"),
            ));
        };
        if rest.is_empty() || rest.starts_with('/') {
            return Err(Error::config(URL_KEY, format!("`{endpoint}` has no host")));
        }
        if client_id.is_empty() {
            return Err(Error::config(
                "sasl.oauthbearer.client.id",
                "the OIDC client-credentials flow needs a client id",
            ));
        }
        if client_secret.is_empty() {
            return Err(Error::config(
                "sasl.oauthbearer.client.secret",
                "the OIDC client-credentials flow needs a client secret",
            ));
        }
        Ok(Oidc {
            endpoint: endpoint.to_string(),
            client_id: client_id.to_string(),
            client_secret,
            scope: scope.filter(|s| !s.is_empty()),
            extensions,
            timeout,
        })
    }

    fn fetch(&self) -> Result<OAuthBearerToken> {
        let fail = |m: String| {
            Error::Authentication(format!("OAUTHBEARER token endpoint {}: {m}", self.endpoint))
        };
        let agent = ureq::AgentBuilder::new().timeout(self.timeout);
        #[cfg(feature = "tls")]
        let agent = agent.tls_config(tls_config());
        let agent = agent.build();
        let basic = BASE64.encode(format!(
            "{}:{}",
            form_encode(&self.client_id),
            form_encode(self.client_secret.expose())
        ));
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        let sent_at = SystemTime::now();
        let answer = agent
            .post(&self.endpoint)
            .set("Authorization", &format!("Basic {basic}"))
            .set("Accept", "application/json")
            .send_form(&form);
        let body = match answer {
            Ok(r) => r
                .into_string()
                .map_err(|e| fail(format!("cannot read the answer: {e}")))?,
            Err(ureq::Error::Status(status, r)) => {
                let body = r.into_string().unwrap_or_default();
                return Err(fail(format!(
                    "HTTP {status}{}",
                    describe_oauth_error(&body)
                )));
            }
            // ureq's transport errors name the URL and the cause, never the request's headers.
            Err(ureq::Error::Transport(t)) => return Err(fail(t.to_string())),
        };
        parse_token_answer(&body, sent_at, &self.client_id, &self.extensions).map_err(fail)
    }
}

impl OAuthBearerTokenProvider for Oidc {
    fn token(&self) -> std::result::Result<OAuthBearerToken, ProviderError> {
        // The message alone: the token source wraps it in its own authentication error.
        self.fetch().map_err(|e| match e {
            Error::Authentication(m) => m.into(),
            other => other.to_string().into(),
        })
    }
}

/// The system's trusted roots, as for broker connections without `ssl.ca.location`. Loaded once.
#[cfg(feature = "tls")]
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!("cannot load a system CA certificate for the token endpoint: {e}");
        }
        let (_, bad) = roots.add_parsable_certificates(found.certs);
        if bad > 0 {
            tracing::warn!("{bad} system CA certificates could not be parsed");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Arc::new(config)
    }))
}

/// The latest expiry a token may have, in seconds since the epoch: 9999-12-31T23:59:59Z.
/// Lifetimes come from outside (a token endpoint's `expires_in`, a JWT's `exp`, a config); one
/// beyond this is no real lifetime, and adding it to the clock could overflow, which panics.
pub const LATEST_EXPIRY_SECS: u64 = 253_402_300_799;

/// The token endpoint's JSON answer to a request sent at `sent_at`, as a token: a pure function,
/// for the tests and the fuzz target. The expiry is `sent_at` plus `expires_in`, else the JWT's
/// `exp`; a token already expired, or expiring after [`LATEST_EXPIRY_SECS`], is a bad answer.
/// Errors name the field at fault, never the token.
pub fn parse_token_answer(
    body: &str,
    sent_at: SystemTime,
    client_id: &str,
    extensions: &BTreeMap<String, String>,
) -> std::result::Result<OAuthBearerToken, String> {
    let Ok(Value::Object(o)) = serde_json::from_str::<Value>(body) else {
        return Err(format!(
            "the answer is not a JSON object ({} bytes)",
            body.len()
        ));
    };
    let Some(token) = o.get("access_token").and_then(Value::as_str) else {
        return Err(format!(
            "the answer has no `access_token`{}",
            describe_oauth_error(body)
        ));
    };
    if let Some(kind) = o.get("token_type").and_then(Value::as_str) {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(format!("the token type is `{kind}`, not Bearer"));
        }
    }
    let claims = jwt_claims(token);
    let latest = UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS);
    let expires_at = match o.get("expires_in") {
        Some(v) => {
            // Some servers send the number as a string.
            let secs = match v {
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => v.as_f64(),
            }
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or("`expires_in` is not a positive number of seconds")?;
            // Compared before the sum: a lifetime past the latest expiry could overflow it.
            let room = latest
                .duration_since(sent_at)
                .map_or(0.0, |d| d.as_secs_f64());
            (secs <= room)
                .then(|| sent_at.checked_add(Duration::from_secs_f64(secs)))
                .flatten()
                .filter(|t| *t <= latest)
                .ok_or("`expires_in` is out of range: the token would expire after the year 9999")?
        }
        None => {
            let exp = claims
                .as_ref()
                .and_then(|c| c.get("exp"))
                .and_then(Value::as_f64)
                .ok_or("the answer has no `expires_in` and the token no `exp` claim")?;
            // `exp` is seconds since the epoch (RFC 7519 NumericDate).
            if !(0.0..=LATEST_EXPIRY_SECS as f64).contains(&exp) {
                return Err(
                    "the token's `exp` claim is out of range: before 1970 or after the \
                            year 9999"
                        .into(),
                );
            }
            UNIX_EPOCH + Duration::from_secs_f64(exp)
        }
    };
    if expires_at <= sent_at {
        return Err(match o.get("expires_in") {
            Some(_) => "`expires_in` is too short: the token expires as it is fetched".into(),
            None => {
                "the token's `exp` claim is in the past: it expired before it was fetched".into()
            }
        });
    }
    let principal = claims
        .as_ref()
        .and_then(|c| c.get("sub"))
        .and_then(Value::as_str)
        .unwrap_or(client_id)
        .to_string();
    Ok(OAuthBearerToken {
        value: Secret::new(token),
        expires_at,
        principal,
        extensions: extensions.clone(),
    })
}

/// A JWT's claims, if the token is a JWT (`header.claims.signature`, base64url).
fn jwt_claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    let payload = token.split('.').nth(1)?;
    let bytes = BASE64URL.decode(payload.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(o) => Some(o),
        _ => None,
    }
}

/// `: <error> (<error_description>)` from an RFC 6749 error answer, else nothing: the rest of a
/// body could echo the request.
fn describe_oauth_error(body: &str) -> String {
    let Ok(Value::Object(o)) = serde_json::from_str::<Value>(body) else {
        return String::new();
    };
    let field = |k: &str| o.get(k).and_then(Value::as_str);
    match (field("error"), field("error_description")) {
        (Some(e), Some(d)) => format!(": {e} ({d})"),
        (Some(e), None) => format!(": {e}"),
        _ => String::new(),
    }
}

/// `application/x-www-form-urlencoded` encoding, as RFC 6749 section 2.3.1 asks for the client
/// id and secret inside the Basic credentials.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn is_loopback(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    const SECRET: &str = "s3cr3t client+secret";

    fn oidc(url: &str) -> Result<Oidc> {
        Oidc::new(
            url,
            "my-client",
            Secret::new(SECRET),
            Some("kafka".into()),
            BTreeMap::new(),
            Duration::from_secs(10),
        )
    }

    /// A one-request HTTP server: answers `status` and `body`, hands back the request it got.
    fn serve_once(status: &str, body: &str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
        let (status, body) = (status.to_string(), body.to_string());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut form = vec![0; length];
            reader.read_exact(&mut form).unwrap();
            let mut stream = reader.into_inner();
            write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            head + &String::from_utf8(form).unwrap()
        });
        (url, handle)
    }

    #[test]
    fn client_credentials_are_posted_and_the_token_parsed() {
        // A JWT whose claims name the principal.
        let jwt = format!(
            "eyJhbGciOiJSUzI1NiJ9.{}.c2ln",
            BASE64URL.encode(r#"{"sub":"svc-orders","exp":4102444800}"#)
        );
        let (url, server) = serve_once(
            "200 OK",
            &format!(r#"{{"access_token":"{jwt}","token_type":"Bearer","expires_in":300}}"#),
        );
        let before = SystemTime::now();
        let token = oidc(&url).unwrap().fetch().unwrap();
        let request = server.join().unwrap();

        assert!(
            request.starts_with("POST /oauth2/token HTTP/1.1"),
            "{request}"
        );
        let basic = BASE64.encode("my-client:s3cr3t+client%2Bsecret");
        assert!(request.contains(&format!("Basic {basic}")), "{request}");
        assert!(
            request.ends_with("grant_type=client_credentials&scope=kafka"),
            "{request}"
        );
        assert_eq!(token.value.expose(), jwt);
        assert_eq!(token.principal, "svc-orders");
        // `expires_in` counts from when the request was sent.
        let after = SystemTime::now();
        let life = Duration::from_secs(300);
        assert!(
            token.expires_at >= before + life && token.expires_at <= after + life,
            "{:?}",
            token.expires_at.duration_since(before)
        );
    }

    #[test]
    fn endpoint_errors_are_authentication_errors_without_the_secret() {
        let (url, server) = serve_once(
            "401 Unauthorized",
            r#"{"error":"invalid_client","error_description":"bad secret"}"#,
        );
        let e = oidc(&url).unwrap().fetch().unwrap_err();
        server.join().unwrap();
        assert_eq!(e.name(), "AUTHENTICATION");
        let m = e.to_string();
        assert!(
            m.contains("401") && m.contains("invalid_client") && m.contains(&url),
            "{m}"
        );
        assert!(!m.contains("s3cr3t"), "{m}");

        // Nobody listening: a transport failure, within the timeout.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = oidc(&format!("http://127.0.0.1:{port}/t"))
            .unwrap()
            .fetch()
            .unwrap_err();
        assert_eq!(e.name(), "AUTHENTICATION");
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
    }

    #[test]
    fn token_answers_are_checked() {
        let none = BTreeMap::new();
        let t0 = UNIX_EPOCH + Duration::from_secs(1000);
        let ok = parse_token_answer(
            r#"{"access_token":"opaque","expires_in":"60"}"#,
            t0,
            "cid",
            &none,
        )
        .unwrap();
        assert_eq!(ok.expires_at, t0 + Duration::from_secs(60));
        assert_eq!(ok.principal, "cid", "an opaque token names the client");
        let jwt = format!("h.{}.s", BASE64URL.encode(r#"{"exp":2000}"#));
        let from_exp =
            parse_token_answer(&format!(r#"{{"access_token":"{jwt}"}}"#), t0, "cid", &none)
                .unwrap();
        assert_eq!(from_exp.expires_at, UNIX_EPOCH + Duration::from_secs(2000));
        for (body, expect) in [
            ("", "not a JSON object"),
            ("[]", "not a JSON object"),
            (
                r#"{"error":"invalid_scope"}"#,
                "no `access_token`: invalid_scope",
            ),
            (
                r#"{"access_token":"x","token_type":"mac","expires_in":5}"#,
                "not Bearer",
            ),
            (r#"{"access_token":"x","expires_in":-5}"#, "expires_in"),
            (r#"{"access_token":"x","expires_in":"soon"}"#, "expires_in"),
            (r#"{"access_token":"x"}"#, "no `expires_in`"),
        ] {
            let m = parse_token_answer(body, t0, "cid", &none).unwrap_err();
            assert!(m.contains(expect), "{body}: {m}");
        }
    }

    #[test]
    fn out_of_range_expiries_are_bad_answers_not_panics() {
        let none = BTreeMap::new();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let token = "tok3n-SECRET";
        let jwt = |claims: &str| format!("{token}.{}.s", BASE64URL.encode(claims));
        let cases = [
            // `expires_in` past any clock, as a number and as a string.
            (
                r#""expires_in":18446744073709551615"#.to_string(),
                "`expires_in` is out of range",
            ),
            (
                r#""expires_in":"18446744073709551615""#.into(),
                "`expires_in` is out of range",
            ),
            (
                r#""expires_in":9223372036854775807"#.into(),
                "`expires_in` is out of range",
            ),
            (
                r#""expires_in":1e300"#.into(),
                "`expires_in` is out of range",
            ),
            (
                r#""expires_in":"1e300""#.into(),
                "`expires_in` is out of range",
            ),
            // One second past the year 9999.
            (
                format!(r#""expires_in":{}"#, LATEST_EXPIRY_SECS - 1_700_000_000 + 1),
                "`expires_in` is out of range",
            ),
            (r#""expires_in":1e-300"#.into(), "`expires_in` is too short"),
            // A JWT `exp` past any clock, before the epoch, or already past.
            (r#""x":1"#.into(), "exp:1e300"),
            (r#""x":1"#.into(), "exp:18446744073709551615"),
            (r#""x":1"#.into(), "exp:1e19"),
            (r#""x":1"#.into(), "exp:-1"),
            (r#""x":1"#.into(), "exp:1600000000"),
        ];
        for (field, expect) in cases {
            let (access_token, expect) = match expect.strip_prefix("exp:") {
                Some(exp) => (
                    jwt(&format!(r#"{{"sub":"svc","exp":{exp}}}"#)),
                    if exp == "1600000000" {
                        "the token's `exp` claim is in the past"
                    } else {
                        "the token's `exp` claim is out of range"
                    },
                ),
                None => (token.to_string(), expect),
            };
            let body = format!(r#"{{"access_token":"{access_token}",{field}}}"#);
            let answer = std::panic::catch_unwind(|| parse_token_answer(&body, t0, "cid", &none));
            let m = match answer {
                Ok(Err(m)) => m,
                Ok(Ok(t)) => panic!("{body}: a token expiring at {:?}", t.expires_at),
                Err(_) => panic!("{body}: panicked"),
            };
            assert!(m.contains(expect), "{body}: {m}");
            assert!(!m.contains("tok3n") && !m.contains("SECRET"), "{body}: {m}");
        }
        // The edges: the year 9999 itself, and a fraction of a second.
        let last = format!(
            r#"{{"access_token":"t","expires_in":"{}"}}"#,
            LATEST_EXPIRY_SECS - 1_700_000_000
        );
        let t = parse_token_answer(&last, t0, "cid", &none).unwrap();
        assert_eq!(
            t.expires_at,
            UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS)
        );
        let t =
            parse_token_answer(r#"{"access_token":"t","expires_in":0.5}"#, t0, "", &none).unwrap();
        assert_eq!(t.expires_at, t0 + Duration::from_millis(500));
        // A clock past the year 9999 gets no token rather than a panic.
        let late = UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS + 10);
        let m = parse_token_answer(r#"{"access_token":"t","expires_in":1}"#, late, "", &none)
            .unwrap_err();
        assert!(m.contains("out of range"), "{m}");
    }

    #[test]
    #[cfg(feature = "tls")]
    fn endpoints_must_be_https_except_on_loopback() {
        for ok in [
            "https://idp.example.com/token",
            "http://127.0.0.1:8080/token",
            "http://localhost/token",
            "http://[::1]:9/t",
        ] {
            assert!(oidc(ok).is_ok(), "{ok}");
        }
        for (bad, expect) in [
            ("http://idp.example.com/token", "use https"),
            ("http://127.0.0.1.evil.com/token", "use https"),
            ("ftp://x/token", "not an https:// URL"),
            ("https:///token", "no host"),
        ] {
            let m = oidc(bad).unwrap_err().to_string();
            assert!(m.contains(expect), "{bad}: {m}");
        }
        let e = Oidc::new(
            "https://x/t",
            "id",
            Secret::default(),
            None,
            BTreeMap::new(),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.to_string().contains("client secret"), "{e}");
        assert!(!format!("{:?}", oidc("https://x/t").unwrap()).contains("s3cr3t"));
    }

    #[test]
    fn an_https_endpoint_with_tls_left_out_names_the_key_and_feature() {
        let r = oidc("https://idp.example.com/token");
        if cfg!(feature = "tls") {
            assert!(r.is_ok(), "{:?}", r.err());
        } else {
            match r {
                Err(Error::Config { key, message }) => {
                    assert_eq!(key, "sasl.oauthbearer.token.endpoint.url");
                    assert!(
                        message.contains("lagless crate's `tls` feature"),
                        "{message}"
                    );
                }
                other => panic!("not a config error: {:?}", other.err()),
            }
        }
        // Plain http to a loopback endpoint (a local token service) needs no TLS.
        assert!(oidc("http://127.0.0.1:8080/token").is_ok());
    }

    #[test]
    fn form_encoding_follows_rfc_6749() {
        assert_eq!(form_encode("a b+c/d:é"), "a+b%2Bc%2Fd%3A%C3%A9");
    }
}

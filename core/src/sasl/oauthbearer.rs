//! OAUTHBEARER (RFC 7628, KIP-255): the tokens an application provides.
//!
//! A client caches the token its [`OAuthBearerTokenProvider`] (or a built-in one) gives, shared
//! by all its connections: a token is reused until 80% of its lifetime has passed, as the Java
//! client's refresh window does, then fetched again. A failed refresh falls back to the cached
//! token while it is still valid.
//
// Crate-private: `TokenSource` (a provider with that cache) and the client response.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::SaslExchange;
use crate::error::{Error, Result};
use crate::secret::Secret;

/// A bearer token, with when it expires, whom it names and the SASL extensions to send with it
/// (KIP-342; e.g. Confluent Cloud's `logicalCluster` and `identityPoolId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthBearerToken {
    /// The token itself, sent to the broker: RFC 6750 bearer-token characters only, else
    /// refused. Never shown in logs or `Debug`.
    pub value: Secret,
    /// When the token expires. A token already expired when fetched is refused; a valid one is
    /// reused until 80% of its lifetime has passed.
    pub expires_at: SystemTime,
    /// The principal the token names (for logs; the broker reads it from the token).
    pub principal: String,
    /// SASL extensions sent with the token (KIP-342), name to value.
    pub extensions: BTreeMap<String, String>,
}

/// The error an application's token provider returns.
pub type ProviderError = Box<dyn std::error::Error + Send + Sync>;

/// Where an application's tokens come from. Called on a blocking thread whenever a token is
/// needed and the cached one is due for refresh, so it may do blocking I/O.
pub trait OAuthBearerTokenProvider: Send + Sync + 'static {
    /// A fresh token, or why there is none (the connection then fails with
    /// [`Error::Authentication`] unless a cached token is still valid).
    fn token(&self) -> std::result::Result<OAuthBearerToken, ProviderError>;
}

impl<F> OAuthBearerTokenProvider for F
where
    F: Fn() -> std::result::Result<OAuthBearerToken, ProviderError> + Send + Sync + 'static,
{
    fn token(&self) -> std::result::Result<OAuthBearerToken, ProviderError> {
        self()
    }
}

/// The share of a token's lifetime after which it is refreshed.
const REFRESH_AT: f64 = 0.8;

struct Cached {
    token: OAuthBearerToken,
    refresh_at: SystemTime,
}

/// A token provider with a cache; cloning shares both. See the module docs.
#[derive(Clone)]
pub(crate) struct TokenSource {
    provider: Arc<dyn OAuthBearerTokenProvider>,
    /// What the provider is, for messages: "application", "unsecured", "oidc".
    kind: &'static str,
    cache: Arc<tokio::sync::Mutex<Option<Cached>>>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

// Two sources are the same when they share a provider: configs compare equal only when they
// would authenticate the same way.
impl PartialEq for TokenSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.cache, &other.cache)
    }
}

impl Eq for TokenSource {}

impl TokenSource {
    /// Tokens from the application.
    pub fn application(provider: Arc<dyn OAuthBearerTokenProvider>) -> TokenSource {
        TokenSource::new(provider, "application")
    }

    pub(crate) fn new(provider: Arc<dyn OAuthBearerTokenProvider>, kind: &'static str) -> Self {
        TokenSource {
            provider,
            kind,
            cache: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// What the provider is: "application", "unsecured" or "oidc".
    // The tests check which source a config chose (with TLS: some use an https endpoint);
    // messages read the field.
    #[cfg(all(test, feature = "tls"))]
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// A token to authenticate with now: the cached one, or a fresh one when it is due.
    pub async fn token(&self) -> Result<OAuthBearerToken> {
        // Held across the fetch so that connections opening at once fetch one token between them.
        let mut cache = self.cache.lock().await;
        let now = SystemTime::now();
        if let Some(c) = cache.as_ref() {
            if now < c.refresh_at {
                return Ok(c.token.clone());
            }
        }
        let provider = Arc::clone(&self.provider);
        let fetched = tokio::task::spawn_blocking(move || provider.token())
            .await
            .map_err(|e| {
                Error::Authentication(format!(
                    "the {} OAUTHBEARER token provider panicked: {e}",
                    self.kind
                ))
            })?
            .map_err(|e| {
                Error::Authentication(format!(
                    "the {} OAUTHBEARER token provider failed: {e}",
                    self.kind
                ))
            })
            .and_then(|t| check_token(t, SystemTime::now()));
        match fetched {
            Ok(token) => {
                let refresh_at = refresh_time(now, token.expires_at);
                *cache = Some(Cached {
                    token: token.clone(),
                    refresh_at,
                });
                Ok(token)
            }
            Err(e) => match cache.as_ref() {
                Some(c) if now < c.token.expires_at => {
                    tracing::warn!(
                        "OAUTHBEARER token refresh failed, using the current token until it \
                         expires: {e}"
                    );
                    Ok(c.token.clone())
                }
                _ => Err(e),
            },
        }
    }
}

/// When a token fetched at `now` and expiring at `expires_at` is due for refresh.
fn refresh_time(now: SystemTime, expires_at: SystemTime) -> SystemTime {
    let lifetime = expires_at.duration_since(now).unwrap_or(Duration::ZERO);
    now + lifetime.mul_f64(REFRESH_AT)
}

/// Refuses a token that would be refused by the broker anyway, or that would break the framing
/// of the client response.
fn check_token(token: OAuthBearerToken, now: SystemTime) -> Result<OAuthBearerToken> {
    if token.expires_at <= now {
        return Err(Error::Authentication(format!(
            "the OAUTHBEARER token for `{}` has already expired",
            token.principal
        )));
    }
    if !is_b64token(token.value.expose()) {
        // Never show the value: it may be a real token with one bad character.
        return Err(Error::Authentication(
            "the OAUTHBEARER token is not a valid bearer token (RFC 6750: letters, digits and \
             -._~+/ followed by optional =)"
                .into(),
        ));
    }
    for (k, v) in &token.extensions {
        check_extension(k, v)?;
    }
    Ok(token)
}

/// RFC 6750's b64token: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// RFC 7628 section 3.1: key `1*(ALPHA)`, value `*(VCHAR / SP / HTAB / CR / LF)`; `auth` is
/// the token's own key.
pub(crate) fn check_extension(key: &str, value: &str) -> Result<()> {
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(Error::config(
            "sasl.oauthbearer.extensions",
            format!("SASL extension name `{key}` must be letters only (RFC 7628)"),
        ));
    }
    if key == "auth" {
        return Err(Error::config(
            "sasl.oauthbearer.extensions",
            "`auth` is reserved for the token and cannot be an extension name",
        ));
    }
    if !value
        .bytes()
        .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
    {
        return Err(Error::config(
            "sasl.oauthbearer.extensions",
            format!("SASL extension `{key}` has a value with characters RFC 7628 forbids"),
        ));
    }
    Ok(())
}

/// The RFC 7628 client response: `n,,` (no authorization identity, no channel binding), then
/// `auth=Bearer <token>` and each extension, every one ended by `\x01`, and a last `\x01`.
pub(crate) fn client_response(token: &OAuthBearerToken) -> Vec<u8> {
    let mut m = String::from("n,,\x01auth=Bearer ");
    m.push_str(token.value.expose());
    m.push('\x01');
    for (k, v) in &token.extensions {
        m.push_str(k);
        m.push('=');
        m.push_str(v);
        m.push('\x01');
    }
    m.push('\x01');
    m.into_bytes()
}

pub(super) struct OAuthBearerExchange {
    response: Option<Vec<u8>>,
    principal: String,
    sent: bool,
}

impl OAuthBearerExchange {
    pub(super) fn new(token: &OAuthBearerToken) -> OAuthBearerExchange {
        OAuthBearerExchange {
            response: Some(client_response(token)),
            principal: token.principal.clone(),
            sent: false,
        }
    }
}

impl SaslExchange for OAuthBearerExchange {
    fn next(&mut self, broker: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        match (broker, self.sent) {
            (None, false) => {
                self.sent = true;
                Ok(self.response.take())
            }
            (Some([]), true) => Ok(None),
            // RFC 7628 section 3.2.2: a non-empty answer is the server's error, a JSON object
            // with `status` (and maybe `scope`, `openid-configuration`). The protocol wants a
            // dummy `\x01` before the server fails the exchange; the connection is given up
            // anyway, so the error is reported here, where its content is known.
            (Some(answer), true) => Err(Error::Authentication(format!(
                "OAUTHBEARER: the broker refused the token for `{}`: {}",
                self.principal,
                describe_server_error(answer)
            ))),
            _ => Err(Error::Authentication(
                "OAUTHBEARER: the exchange was driven out of order".into(),
            )),
        }
    }
}

/// A one-line account of an RFC 7628 server error message.
fn describe_server_error(answer: &[u8]) -> String {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(answer)
    else {
        return format!(
            "unreadable error answer ({} bytes): {:?}",
            answer.len(),
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        );
    };
    let field = |k: &str| o.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let mut m = format!(
        "status {}",
        field("status").unwrap_or_else(|| "unknown".into())
    );
    if let Some(scope) = field("scope") {
        m.push_str(&format!(", required scope `{scope}`"));
    }
    if let Some(conf) = field("openid-configuration") {
        m.push_str(&format!(", openid-configuration {conf}"));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn token(value: &str, life: Duration) -> OAuthBearerToken {
        OAuthBearerToken {
            value: Secret::new(value),
            expires_at: SystemTime::now() + life,
            principal: "alice".into(),
            extensions: BTreeMap::new(),
        }
    }

    #[test]
    fn client_response_follows_rfc_7628() {
        let mut t = token(
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.",
            Duration::from_secs(60),
        );
        assert_eq!(
            client_response(&t),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01\x01"
        );
        t.extensions.insert("logicalCluster".into(), "lkc-1".into());
        t.extensions
            .insert("identityPoolId".into(), "pool-2".into());
        // Extensions in key order, each ended by \x01, then the closing \x01.
        assert_eq!(
            client_response(&t),
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01\
              identityPoolId=pool-2\x01logicalCluster=lkc-1\x01\x01"
        );
    }

    #[test]
    fn exchange_succeeds_on_an_empty_answer_and_fails_on_an_error_answer() {
        let t = token("abc", Duration::from_secs(60));
        let mut x = OAuthBearerExchange::new(&t);
        assert!(x.next(None).unwrap().is_some());
        assert_eq!(x.next(Some(b"")).unwrap(), None);

        let mut x = OAuthBearerExchange::new(&t);
        x.next(None).unwrap();
        let e = x
            .next(Some(br#"{"status":"invalid_token","scope":"kafka"}"#))
            .unwrap_err();
        assert_eq!(e.name(), "AUTHENTICATION");
        let m = e.to_string();
        assert!(
            m.contains("invalid_token") && m.contains("kafka") && m.contains("alice"),
            "{m}"
        );
        assert!(!m.contains("abc"), "{m}");

        for junk in [
            &b"\xff\xfe"[..],
            b"{",
            b"[1,2]",
            b"\"x\"",
            b"{\"status\":5}",
        ] {
            let mut x = OAuthBearerExchange::new(&t);
            x.next(None).unwrap();
            let e = x.next(Some(junk)).unwrap_err();
            assert_eq!(e.name(), "AUTHENTICATION", "{junk:?}");
        }
        let mut x = OAuthBearerExchange::new(&t);
        assert!(x.next(Some(b"")).is_err(), "an answer before the response");
    }

    #[test]
    fn bad_tokens_and_extensions_are_refused_without_showing_the_token() {
        let now = SystemTime::now();
        let e = check_token(token("has space-secret", Duration::from_secs(9)), now).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        let e = check_token(token("x\x01y", Duration::from_secs(9)), now).unwrap_err();
        assert_eq!(e.name(), "AUTHENTICATION");
        let mut t = token("ok", Duration::ZERO);
        t.expires_at = now - Duration::from_secs(1);
        assert!(check_token(t, now)
            .unwrap_err()
            .to_string()
            .contains("expired"));
        assert!(is_b64token("a-b.c_d~e+f/g=="));
        assert!(!is_b64token("=="));
        assert!(check_extension("auth", "x").is_err());
        assert!(check_extension("a1", "x").is_err());
        assert!(check_extension("ok", "a\x01b").is_err());
        assert!(check_extension("ok", "a b\tc").is_ok());
    }

    #[test]
    fn refresh_is_due_at_80_percent_of_the_lifetime() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        assert_eq!(
            refresh_time(now, now + Duration::from_secs(100)),
            now + Duration::from_secs(80)
        );
        assert_eq!(refresh_time(now, now - Duration::from_secs(5)), now);
    }

    #[tokio::test]
    async fn tokens_are_cached_until_due_and_refresh_failures_fall_back() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let source = TokenSource::application(Arc::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            match n {
                0 => Ok(token("first", Duration::from_secs(3600))),
                _ => Err("endpoint down".into()),
            }
        }));
        let shared = source.clone();
        assert_eq!(source.token().await.unwrap().value.expose(), "first");
        assert_eq!(shared.token().await.unwrap().value.expose(), "first");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "the clone shares the cache"
        );
        assert_eq!(source, shared);

        // Make the cached token due; the failing refresh falls back to it (still valid).
        source.cache.lock().await.as_mut().unwrap().refresh_at = SystemTime::now();
        assert_eq!(source.token().await.unwrap().value.expose(), "first");
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        // Once expired, the failure is reported.
        {
            let mut cache = source.cache.lock().await;
            let c = cache.as_mut().unwrap();
            c.token.expires_at = SystemTime::now() - Duration::from_secs(1);
            c.refresh_at = c.token.expires_at;
        }
        let e = source.token().await.unwrap_err();
        assert_eq!(e.name(), "AUTHENTICATION");
        assert!(e.to_string().contains("endpoint down"), "{e}");
        assert!(e.to_string().contains("application"), "{e}");
    }

    #[test]
    fn debug_shows_no_token() {
        let t = token("tok-secret-value", Duration::from_secs(60));
        assert!(!format!("{t:?}").contains("tok-secret"));
        let s = TokenSource::application(Arc::new(|| Err("x".into())));
        assert!(format!("{s:?}").contains("application"));
    }
}

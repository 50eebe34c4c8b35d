//! SASL authentication (`security.protocol=SASL_PLAINTEXT` or `SASL_SSL`): PLAIN (RFC 4616),
//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, 7677) and OAUTHBEARER (RFC 7628, KIP-255).
//!
//! The mechanisms are chosen and configured with keys (`sasl.mechanism`, `sasl.username`,
//! `sasl.password`, `sasl.jaas.config`, `sasl.oauthbearer.*`); what is public here is what an
//! application implements itself: an OAUTHBEARER token provider ([`OAuthBearerTokenProvider`],
//! given to [`Config::set_oauthbearer_token_provider`](crate::Config::set_oauthbearer_token_provider))
//! and the [`OAuthBearerToken`] it returns.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//! use lagless::sasl::OAuthBearerToken;
//! use lagless::secret::Secret;
//!
//! let mut config = lagless::Config::from_pairs([
//!     ("bootstrap.servers", "broker:9093"),
//!     ("security.protocol", "SASL_PLAINTEXT"),
//!     ("sasl.mechanism", "OAUTHBEARER"),
//! ])?;
//! // Called on a blocking thread, again before 80% of the token's lifetime has passed; an error
//! // it returns fails authentication, naming it.
//! config.set_oauthbearer_token_provider(Arc::new(|| {
//!     Ok(OAuthBearerToken {
//!         value: Secret::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."),
//!         expires_at: SystemTime::now() + Duration::from_secs(3600),
//!         principal: "alice".into(),
//!         extensions: Default::default(),
//!     })
//! }));
//! // The provider is not called yet: tokens are fetched when a connection authenticates.
//! assert_eq!(config.get("sasl.mechanism")?.as_deref(), Some("OAUTHBEARER"));
//! # Ok::<(), lagless::Error>(())
//! ```
//
// Inside the crate the mechanisms are sans-IO: nothing here touches a socket. The connection
// names `SaslMechanism::name` in its SaslHandshake, gets an exchange from `start_exchange`, then
// loops:
//
//     let mut exchange = sasl::start_exchange(&creds).await?;
//     let mut broker = None;
//     while let Some(bytes) = exchange.next(broker.as_deref())? {
//         let answer = send SaslAuthenticate { auth_bytes: bytes };
//         if answer.error_code != 0 { return Err(sasl::broker_refused(...)) }
//         broker = Some(answer.auth_bytes);
//     }
//     // authenticated
//
// `next(None)` gives the client's first message; each later call takes the broker's last
// `auth_bytes`. `Ok(None)` means the client is satisfied (for SCRAM: the broker proved it knows
// the password). Every failure is an `Error::Authentication`, fatal for the client, and no
// message ever carries a password or token.
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::secret::Secret;
use jaas::{JaasEntry, LoginModule};

pub(crate) mod jaas;
pub mod oauthbearer;
mod oidc;
mod plain;
mod scram;
mod unsecured;

pub(crate) use oauthbearer::TokenSource;
pub use oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider};
// The token endpoint's answer reader: public only for the fuzz targets.
#[cfg(feature = "unstable-fuzzing")]
pub use oidc::{parse_token_answer, LATEST_EXPIRY_SECS};

/// The mechanisms lagless speaks, by the names the broker knows (`sasl.enabled.mechanisms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SaslMechanism {
    /// `PLAIN` (RFC 4616): user name and password in clear, so only over `SASL_SSL` in
    /// production.
    Plain,
    /// `SCRAM-SHA-256` (RFC 7677): a salted challenge-response; the password never crosses the
    /// wire.
    ScramSha256,
    /// `SCRAM-SHA-512`: SCRAM with SHA-512.
    ScramSha512,
    /// `OAUTHBEARER` (KIP-255): a bearer token from the application, an OIDC token endpoint or
    /// the unsecured built-in provider.
    OAuthBearer,
}

/// The `sasl.mechanism` values lagless accepts.
pub(crate) const MECHANISM_NAMES: &[&str] =
    &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

impl SaslMechanism {
    /// The name sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SaslMechanism {
    type Err = Error;

    /// A `sasl.mechanism` value. Mechanism names are upper case on the wire; any case is accepted
    /// here, as a user who writes `scram-sha-512` means nothing else.
    fn from_str(s: &str) -> Result<SaslMechanism> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "GSSAPI" => Err(Error::config(
                "sasl.mechanism",
                "GSSAPI (Kerberos) is not supported; use SCRAM-SHA-512, PLAIN over SSL or \
                 OAUTHBEARER",
            )),
            "" => Err(Error::config(
                "sasl.mechanism",
                format!("`sasl.mechanism` is empty; expected one of {MECHANISM_NAMES:?}"),
            )),
            _ => Err(Error::config(
                "sasl.mechanism",
                format!("unknown SASL mechanism `{s}`; expected one of {MECHANISM_NAMES:?}"),
            )),
        }
    }
}

/// What a client authenticates with: the mechanism and its credentials. Cloning shares the
/// OAUTHBEARER token cache, so every connection of a client reuses one token until it is due
/// for refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SaslCredentials {
    /// The mechanism to authenticate with (`sasl.mechanism`).
    pub mechanism: SaslMechanism,
    /// PLAIN and SCRAM: the user name.
    pub username: Option<String>,
    /// PLAIN and SCRAM: the password.
    pub password: Option<Secret>,
    /// OAUTHBEARER: where tokens come from.
    pub oauthbearer: Option<TokenSource>,
}

impl SaslCredentials {
    /// PLAIN or SCRAM credentials. Fails for OAUTHBEARER (see [`SaslCredentials::oauthbearer`])
    /// and for a name or password that the mechanism cannot carry.
    pub fn password(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> Result<SaslCredentials> {
        let username = username.into();
        let password = password.into();
        if mechanism == SaslMechanism::OAuthBearer {
            return Err(Error::config(
                "sasl.mechanism",
                "OAUTHBEARER authenticates with a token, not a user name and password",
            ));
        }
        if username.is_empty() {
            return Err(Error::config(
                "sasl.username",
                format!("{mechanism} needs a user name"),
            ));
        }
        // PLAIN separates its fields with NUL, and SCRAM forbids it (RFC 5802 saslname).
        if username.contains('\0') {
            return Err(Error::config(
                "sasl.username",
                "the user name contains a NUL character",
            ));
        }
        if password.expose().contains('\0') {
            return Err(Error::config(
                "sasl.password",
                "the password contains a NUL character",
            ));
        }
        Ok(SaslCredentials {
            mechanism,
            username: Some(username),
            password: Some(password),
            oauthbearer: None,
        })
    }

    /// OAUTHBEARER credentials: tokens from `source`.
    pub fn oauthbearer(source: TokenSource) -> SaslCredentials {
        SaslCredentials {
            mechanism: SaslMechanism::OAuthBearer,
            username: None,
            password: None,
            oauthbearer: Some(source),
        }
    }

    fn user_and_password(&self) -> Result<(&str, &Secret)> {
        match (&self.username, &self.password) {
            (Some(u), Some(p)) => Ok((u, p)),
            _ => Err(Error::Authentication(format!(
                "{} needs sasl.username and sasl.password (or sasl.jaas.config)",
                self.mechanism
            ))),
        }
    }
}

/// How long a token endpoint may take to answer (connect, send, receive).
const TOKEN_ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// The configuration keys [`credentials_from`] reads. `sensitive` ones must be masked wherever
/// a config is shown.
// The tests hold the config table (config/keys.rs) and the security settings to this list.
#[cfg(test)]
pub(crate) const CONFIG_KEYS: &[(&str, bool)] = &[
    ("sasl.mechanism", false),
    ("sasl.mechanisms", false),
    ("sasl.username", false),
    ("sasl.password", true),
    ("sasl.jaas.config", true),
    ("sasl.oauthbearer.method", false),
    ("sasl.oauthbearer.config", true),
    ("sasl.oauthbearer.token.endpoint.url", false),
    ("sasl.oauthbearer.client.id", false),
    ("sasl.oauthbearer.client.secret", true),
    ("sasl.oauthbearer.scope", false),
    ("sasl.oauthbearer.extensions", false),
];

/// The SASL credentials a configuration describes. `get` is the config lookup: a key's effective
/// value, `None` (or empty) when unset. `provider` is the application's OAUTHBEARER token
/// provider, if it gave one; it wins over every configured token source.
///
/// Credentials come from librdkafka's keys (`sasl.username`/`sasl.password`,
/// `sasl.oauthbearer.*`) or from Java's `sasl.jaas.config`, not both. For OAUTHBEARER without a
/// provider: `sasl.oauthbearer.method=oidc` (or, as in Java, a token endpoint URL) fetches tokens
/// with the client-credentials grant; else `sasl.oauthbearer.config` or the JAAS
/// `unsecuredLogin*` options make unsecured tokens (for testing).
pub(crate) fn credentials_from(
    get: &dyn Fn(&str) -> Option<String>,
    provider: Option<Arc<dyn OAuthBearerTokenProvider>>,
) -> Result<SaslCredentials> {
    let get = |key: &str| get(key).filter(|v| !v.trim().is_empty());
    let jaas = get("sasl.jaas.config")
        .map(|text| jaas::parse(&text))
        .transpose()?;
    let named = match (get("sasl.mechanism"), get("sasl.mechanisms")) {
        (Some(m), _) => Some(("sasl.mechanism", m)),
        // librdkafka's plural name.
        (None, Some(m)) => Some(("sasl.mechanisms", m)),
        (None, None) => None,
    };
    let mechanism = match (named, &jaas) {
        (Some((key, m)), _) => m.parse::<SaslMechanism>().map_err(|e| match e {
            Error::Config { message, .. } => Error::config(key, message),
            other => other,
        })?,
        // The login module says which mechanism, except for SCRAM's two.
        (None, Some(entry)) if entry.module == LoginModule::Plain => SaslMechanism::Plain,
        (None, Some(entry)) if entry.module == LoginModule::OAuthBearer => {
            SaslMechanism::OAuthBearer
        }
        _ => {
            return Err(Error::config(
                "sasl.mechanism",
                format!(
                    "a SASL security.protocol needs sasl.mechanism, one of {MECHANISM_NAMES:?}"
                ),
            ))
        }
    };
    if let Some(entry) = &jaas {
        let fits = match mechanism {
            SaslMechanism::OAuthBearer => entry.module == LoginModule::OAuthBearer,
            // Java hands either module's user and password to PLAIN and SCRAM alike.
            _ => entry.module != LoginModule::OAuthBearer,
        };
        if !fits {
            return Err(Error::config(
                "sasl.jaas.config",
                format!(
                    "the login module ({:?}) does not fit sasl.mechanism {mechanism}",
                    entry.module
                ),
            ));
        }
    }
    match mechanism {
        SaslMechanism::OAuthBearer => {
            let source = match provider {
                Some(p) => TokenSource::application(p),
                None => configured_token_source(&get, jaas.as_ref())?,
            };
            Ok(SaslCredentials::oauthbearer(source))
        }
        _ => {
            let from_keys = (get("sasl.username"), get("sasl.password"));
            let from_jaas = jaas
                .as_ref()
                .map(|e| (e.get("username").map(str::to_string), e.secret("password")));
            let (user, password) = match (from_keys, from_jaas) {
                ((None, None), Some((u, p))) => (u, p),
                ((u, p), None) => (u, p.map(Secret::from)),
                _ => {
                    return Err(Error::config(
                        "sasl.jaas.config",
                        "credentials are given twice: use either sasl.username/sasl.password \
                         or sasl.jaas.config",
                    ))
                }
            };
            match (user, password) {
                (Some(user), Some(password)) => {
                    SaslCredentials::password(mechanism, user, password)
                }
                (None, _) => Err(Error::config(
                    "sasl.username",
                    format!(
                        "{mechanism} needs sasl.username and sasl.password (or username and \
                         password in sasl.jaas.config)"
                    ),
                )),
                (Some(_), None) => Err(Error::config(
                    "sasl.password",
                    format!("{mechanism} needs sasl.password (or password in sasl.jaas.config)"),
                )),
            }
        }
    }
}

fn configured_token_source(
    get: &dyn Fn(&str) -> Option<String>,
    jaas: Option<&JaasEntry>,
) -> Result<TokenSource> {
    let method = get("sasl.oauthbearer.method").map(|m| m.trim().to_ascii_lowercase());
    let url = get("sasl.oauthbearer.token.endpoint.url");
    let oidc = match method.as_deref() {
        Some("oidc") => true,
        // Java has no method key: a token endpoint means the client-credentials flow.
        None | Some("default") => url.is_some(),
        Some(other) => {
            return Err(Error::config(
                "sasl.oauthbearer.method",
                format!("unknown method `{other}`; expected `default` or `oidc`"),
            ))
        }
    };
    let jaas_get = |name: &str| jaas.and_then(|e| e.get(name)).map(str::to_string);
    if oidc {
        let url = url.ok_or_else(|| {
            Error::config(
                "sasl.oauthbearer.token.endpoint.url",
                "sasl.oauthbearer.method=oidc needs the token endpoint URL",
            )
        })?;
        let mut extensions = match get("sasl.oauthbearer.extensions") {
            Some(list) => parse_extensions(&list)?,
            None => BTreeMap::new(),
        };
        if let Some(entry) = jaas {
            for (name, value) in entry.with_prefix("extension_") {
                oauthbearer::check_extension(name, value)?;
                extensions.insert(name.to_string(), value.to_string());
            }
        }
        let client_secret = get("sasl.oauthbearer.client.secret")
            .map(Secret::from)
            .or_else(|| jaas.and_then(|e| e.secret("clientSecret")))
            .unwrap_or_default();
        let oidc = oidc::Oidc::new(
            &url,
            &get("sasl.oauthbearer.client.id")
                .or_else(|| jaas_get("clientId"))
                .unwrap_or_default(),
            client_secret,
            get("sasl.oauthbearer.scope").or_else(|| jaas_get("scope")),
            extensions,
            TOKEN_ENDPOINT_TIMEOUT,
        )?;
        return Ok(TokenSource::new(Arc::new(oidc), "oidc"));
    }
    let unsecured =
        match (get("sasl.oauthbearer.config"), jaas) {
            (Some(text), None) => unsecured::UnsecuredJws::from_config(&text)?,
            (None, Some(entry)) => unsecured::UnsecuredJws::from_jaas(entry)?,
            (Some(_), Some(_)) => return Err(Error::config(
                "sasl.oauthbearer.config",
                "the unsecured token is described twice: use either sasl.oauthbearer.config or \
                 sasl.jaas.config",
            )),
            (None, None) => {
                return Err(Error::config(
                    "sasl.oauthbearer.method",
                    "OAUTHBEARER needs a token source: an application token provider, \
                 sasl.oauthbearer.method=oidc with sasl.oauthbearer.token.endpoint.url, or \
                 sasl.oauthbearer.config=principal=<name> (unsecured tokens, for testing)",
                ))
            }
        };
    tracing::warn!(
        "OAUTHBEARER uses unsecured (unsigned) tokens: only a broker with the unsecured \
         validator accepts them; use them for testing only"
    );
    Ok(TokenSource::new(Arc::new(unsecured), "unsecured"))
}

/// librdkafka's `sasl.oauthbearer.extensions`: `name=value` pairs separated by commas.
fn parse_extensions(list: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            Error::config(
                "sasl.oauthbearer.extensions",
                format!("`{pair}` is not name=value"),
            )
        })?;
        oauthbearer::check_extension(name, value)?;
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}

/// One authentication exchange, sans-IO: the connection sends what `next` returns in
/// SaslAuthenticate and feeds back the broker's `auth_bytes`. See the module docs.
pub(crate) trait SaslExchange: Send {
    /// `broker` is `None` on the first call, then the broker's last answer. `Ok(Some(bytes))`:
    /// send them; `Ok(None)`: authentication is complete on the client's side.
    fn next(&mut self, broker: Option<&[u8]>) -> Result<Option<Vec<u8>>>;
}

/// Starts an exchange for `creds`. Async because OAUTHBEARER may have to fetch a token first
/// (the token provider runs on a blocking thread).
pub(crate) async fn start_exchange(creds: &SaslCredentials) -> Result<Box<dyn SaslExchange>> {
    match creds.mechanism {
        SaslMechanism::Plain => {
            let (user, password) = creds.user_and_password()?;
            Ok(Box::new(plain::PlainExchange::new(user, password)))
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let (user, password) = creds.user_and_password()?;
            Ok(Box::new(scram::ScramExchange::new(
                creds.mechanism,
                user,
                password,
            )))
        }
        SaslMechanism::OAuthBearer => {
            let source = creds.oauthbearer.as_ref().ok_or_else(|| {
                Error::Authentication(
                    "OAUTHBEARER needs a token source: a token provider, \
                     sasl.oauthbearer.config, sasl.oauthbearer.method=oidc or sasl.jaas.config"
                        .into(),
                )
            })?;
            let token = source.token().await?;
            Ok(Box::new(oauthbearer::OAuthBearerExchange::new(&token)))
        }
    }
}

/// The error for a SaslAuthenticate (or SaslHandshake) answer with an error code: names the
/// mechanism, the broker and what the broker said. The broker's message never holds the
/// password (brokers do not echo credentials).
pub(crate) fn broker_refused(
    mechanism: SaslMechanism,
    broker: &str,
    code: i16,
    message: Option<&str>,
) -> Error {
    let mut m = format!(
        "{mechanism} authentication with broker {broker} failed: {}",
        crate::error::kafka_error_name(code)
    );
    if let Some(message) = message.filter(|m| !m.is_empty()) {
        m.push_str(": ");
        m.push_str(message);
    }
    Error::Authentication(m)
}

/// The error for a SaslHandshake that refuses the mechanism, naming those the broker offers.
pub(crate) fn mechanism_not_enabled(
    mechanism: SaslMechanism,
    broker: &str,
    enabled: &[String],
) -> Error {
    Error::Authentication(format!(
        "broker {broker} does not enable SASL mechanism {mechanism}; it offers {enabled:?} \
         (set sasl.mechanism to one of them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanism_names_parse_and_print() {
        for name in MECHANISM_NAMES {
            let m: SaslMechanism = name.parse().unwrap();
            assert_eq!(m.name(), *name);
            assert_eq!(m.to_string(), *name);
        }
        assert_eq!(
            "scram-sha-512".parse::<SaslMechanism>().unwrap(),
            SaslMechanism::ScramSha512
        );
    }

    #[test]
    fn gssapi_is_refused_naming_the_alternatives() {
        let e = "GSSAPI".parse::<SaslMechanism>().unwrap_err();
        let m = e.to_string();
        assert!(m.contains("not supported"), "{m}");
        assert!(
            m.contains("SCRAM-SHA-512") && m.contains("OAUTHBEARER"),
            "{m}"
        );
        assert_eq!(e.code(), Error::config("", "").code());
    }

    #[test]
    fn unknown_mechanism_names_the_valid_ones() {
        let m = "SCRAM-SHA-1"
            .parse::<SaslMechanism>()
            .unwrap_err()
            .to_string();
        assert!(m.contains("SCRAM-SHA-1"), "{m}");
        for name in MECHANISM_NAMES {
            assert!(m.contains(name), "{m}");
        }
    }

    #[test]
    fn credentials_refuse_what_the_mechanism_cannot_carry() {
        let e = SaslCredentials::password(SaslMechanism::Plain, "", "pw").unwrap_err();
        assert!(e.to_string().contains("user name"), "{e}");
        let e = SaslCredentials::password(SaslMechanism::Plain, "a\0b", "pw").unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let e = SaslCredentials::password(SaslMechanism::Plain, "a", "p\0w-secret").unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        let e = SaslCredentials::password(SaslMechanism::OAuthBearer, "a", "b").unwrap_err();
        assert!(e.to_string().contains("token"), "{e}");
    }

    #[test]
    fn credentials_never_show_the_password() {
        let c = SaslCredentials::password(SaslMechanism::ScramSha256, "alice", "alice-pw-secret")
            .unwrap();
        let shown = format!("{c:?} {c:#?}");
        assert!(!shown.contains("alice-pw-secret"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
    }

    #[test]
    fn broker_errors_name_mechanism_broker_and_cause() {
        let e = broker_refused(
            SaslMechanism::ScramSha512,
            "127.0.0.1:9093",
            58,
            Some("Authentication failed during authentication due to invalid credentials"),
        );
        assert!(e.is_fatal() && !e.is_retriable());
        assert_eq!(e.name(), "AUTHENTICATION");
        let m = e.to_string();
        for part in [
            "SCRAM-SHA-512",
            "127.0.0.1:9093",
            "SASL_AUTHENTICATION_FAILED",
            "invalid credentials",
        ] {
            assert!(m.contains(part), "{m}");
        }
        let e = mechanism_not_enabled(SaslMechanism::Plain, "b:1", &["SCRAM-SHA-256".to_string()]);
        assert!(e.to_string().contains("SCRAM-SHA-256"), "{e}");
    }

    const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                              username=\"alice\" password=\"pw-secret\";";
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    const OAUTH_JAAS: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
         unsecuredLoginStringClaim_sub=\"alice\";";

    fn creds(pairs: &[(&str, &str)]) -> Result<SaslCredentials> {
        creds_with(pairs, None)
    }

    fn creds_with(
        pairs: &[(&str, &str)],
        provider: Option<Arc<dyn OAuthBearerTokenProvider>>,
    ) -> Result<SaslCredentials> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for k in map.keys() {
            assert!(CONFIG_KEYS.iter().any(|(n, _)| n == k), "{k} is not listed");
        }
        credentials_from(&|k| map.get(k).cloned(), provider)
    }

    #[test]
    fn password_credentials_come_from_either_family_of_keys() {
        let c = creds(&[
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "pw-secret"),
        ])
        .unwrap();
        assert_eq!(c.mechanism, SaslMechanism::ScramSha512);
        assert_eq!(c.username.as_deref(), Some("alice"));
        assert_eq!(c.password.as_ref().unwrap().expose(), "pw-secret");

        let j = creds(&[
            ("sasl.mechanism", "PLAIN"),
            ("sasl.jaas.config", PLAIN_JAAS),
        ])
        .unwrap();
        assert_eq!(j.username.as_deref(), Some("alice"));
        assert_eq!(j.password.as_ref().unwrap().expose(), "pw-secret");
        // Java hands a PlainLoginModule's user to SCRAM too.
        assert!(creds(&[
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.jaas.config", PLAIN_JAAS)
        ])
        .is_ok());
    }

    #[test]
    // Uses SASL_SSL or an https token endpoint.
    #[cfg(feature = "tls")]
    fn config_errors_name_the_key_and_never_the_secret() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (&[], "sasl.mechanism", "needs sasl.mechanism"),
            (&[("sasl.mechanism", "GSSAPI")], "sasl.mechanism", "not supported"),
            (&[("sasl.mechanism", "PLAIN")], "sasl.username", "needs sasl.username"),
            (
                &[("sasl.mechanism", "PLAIN"), ("sasl.password", "pw-secret")],
                "sasl.username",
                "needs sasl.username",
            ),
            (
                &[
                    ("sasl.mechanism", "PLAIN"),
                    ("sasl.username", "alice"),
                    ("sasl.jaas.config", PLAIN_JAAS),
                ],
                "sasl.jaas.config",
                "given twice",
            ),
            (
                &[("sasl.mechanism", "PLAIN"), ("sasl.jaas.config", OAUTH_JAAS)],
                "sasl.jaas.config",
                "does not fit",
            ),
            (
                &[("sasl.mechanism", "OAUTHBEARER"), ("sasl.jaas.config", PLAIN_JAAS)],
                "sasl.jaas.config",
                "does not fit",
            ),
            (
                &[
                    ("sasl.mechanism", "PLAIN"),
                    ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"pw-secret"),
                ],
                "sasl.jaas.config",
                "no closing double quote",
            ),
            (&[("sasl.mechanism", "OAUTHBEARER")], "sasl.oauthbearer.method", "token source"),
            (
                &[("sasl.mechanism", "OAUTHBEARER"), ("sasl.oauthbearer.method", "magic")],
                "sasl.oauthbearer.method",
                "`magic`",
            ),
            (
                &[("sasl.mechanism", "OAUTHBEARER"), ("sasl.oauthbearer.method", "oidc")],
                "sasl.oauthbearer.token.endpoint.url",
                "needs the token endpoint",
            ),
            (
                &[
                    ("sasl.mechanism", "OAUTHBEARER"),
                    ("sasl.oauthbearer.method", "oidc"),
                    ("sasl.oauthbearer.token.endpoint.url", "https://idp/t"),
                    ("sasl.oauthbearer.client.secret", "pw-secret"),
                ],
                "sasl.oauthbearer.client.id",
                "client id",
            ),
            (
                &[
                    ("sasl.mechanism", "OAUTHBEARER"),
                    ("sasl.oauthbearer.config", "principal=a"),
                    ("sasl.jaas.config", OAUTH_JAAS),
                ],
                "sasl.oauthbearer.config",
                "twice",
            ),
            (
                &[
                    ("sasl.mechanism", "OAUTHBEARER"),
                    ("sasl.oauthbearer.method", "oidc"),
                    ("sasl.oauthbearer.token.endpoint.url", "https://idp/t"),
                    ("sasl.oauthbearer.extensions", "pool"),
                ],
                "sasl.oauthbearer.extensions",
                "not name=value",
            ),
        ];
        for (pairs, key, expect) in cases {
            let e = creds(pairs).unwrap_err();
            let m = e.to_string();
            assert!(
                matches!(&e, Error::Config { key: k, .. } if k == key),
                "{pairs:?}: {m}"
            );
            assert!(m.contains(expect), "{pairs:?}: {m}");
            assert!(
                !m.contains("pw-secret") && !format!("{e:?}").contains("pw-secret"),
                "{m}"
            );
        }
    }

    #[test]
    // Uses SASL_SSL or an https token endpoint.
    #[cfg(feature = "tls")]
    fn oauthbearer_token_sources_in_order_of_precedence() {
        let app: Arc<dyn OAuthBearerTokenProvider> = Arc::new(|| Err("unused".into()));
        let c = creds_with(
            &[
                ("sasl.mechanism", "OAUTHBEARER"),
                ("sasl.oauthbearer.config", "principal=a"),
            ],
            Some(app),
        )
        .unwrap();
        assert_eq!(c.oauthbearer.as_ref().unwrap().kind(), "application");

        let kind = |pairs: &[(&str, &str)]| creds(pairs).unwrap().oauthbearer.unwrap().kind();
        assert_eq!(
            kind(&[
                ("sasl.mechanism", "OAUTHBEARER"),
                ("sasl.oauthbearer.config", "principal=a")
            ]),
            "unsecured"
        );
        assert_eq!(
            kind(&[
                ("sasl.mechanism", "OAUTHBEARER"),
                ("sasl.jaas.config", OAUTH_JAAS)
            ]),
            "unsecured"
        );
        let oidc = [
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "OIDC"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example.com/token",
            ),
            ("sasl.oauthbearer.client.id", "id"),
            ("sasl.oauthbearer.client.secret", "pw-secret"),
            (
                "sasl.oauthbearer.extensions",
                "logicalCluster=lkc-1,identityPoolId=pool-2",
            ),
        ];
        assert_eq!(kind(&oidc), "oidc");
        let shown = format!("{:?}", creds(&oidc).unwrap());
        assert!(!shown.contains("pw-secret"), "{shown}");
        // Java's way: the endpoint URL and the client in the JAAS line.
        assert_eq!(
            kind(&[
                ("sasl.mechanism", "OAUTHBEARER"),
                (
                    "sasl.oauthbearer.token.endpoint.url",
                    "https://idp.example.com/token"
                ),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                     required clientId=\"id\" clientSecret=\"pw-secret\" scope=\"kafka\";"
                ),
            ]),
            "oidc"
        );
    }

    #[tokio::test]
    async fn unsecured_tokens_reach_the_client_response() {
        let c = creds(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.oauthbearer.config",
                "principal=alice extension_traceId=t1",
            ),
        ])
        .unwrap();
        let mut x = start_exchange(&c).await.unwrap();
        let first = String::from_utf8(x.next(None).unwrap().unwrap()).unwrap();
        assert!(
            first.starts_with("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0."),
            "{first:?}"
        );
        assert!(first.ends_with(".\x01traceId=t1\x01\x01"), "{first:?}");
        assert_eq!(x.next(Some(b"")).unwrap(), None);
    }

    #[tokio::test]
    async fn plain_exchange_sends_one_message_and_is_done() {
        let c = SaslCredentials::password(SaslMechanism::Plain, "alice", "alice-secret").unwrap();
        let mut x = start_exchange(&c).await.unwrap();
        assert_eq!(x.next(None).unwrap().unwrap(), b"\0alice\0alice-secret");
        assert_eq!(x.next(Some(b"")).unwrap(), None);
    }
}

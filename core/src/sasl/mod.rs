//! SASL mechanisms, sans-IO: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, 7677)
//! and OAUTHBEARER (RFC 7628, KIP-255).
//!
//! Nothing here touches a socket. The connection names [`SaslMechanism::name`] in its
//! SaslHandshake, gets an exchange from [`start_exchange`], then loops:
//!
//! ```text
//! let mut exchange = sasl::start_exchange(&creds).await?;
//! let mut broker = None;
//! while let Some(bytes) = exchange.next(broker.as_deref())? {
//!     let answer = send SaslAuthenticate { auth_bytes: bytes };
//!     if answer.error_code != 0 { return Err(sasl::broker_refused(...)) }
//!     broker = Some(answer.auth_bytes);
//! }
//! // authenticated
//! ```
//!
//! `next(None)` gives the client's first message; each later call takes the broker's last
//! `auth_bytes`. `Ok(None)` means the client is satisfied (for SCRAM: the broker proved it knows
//! the password). Every failure is an [`Error::Authentication`], fatal for the client, and no
//! message ever carries a password or token.
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::secret::Secret;

pub mod jaas;
pub mod oauthbearer;
mod plain;
mod scram;

pub use oauthbearer::{OAuthBearerToken, OAuthBearerTokenProvider, TokenSource};

/// The mechanisms lagless speaks, by the names the broker knows (`sasl.enabled.mechanisms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

/// The `sasl.mechanism` values lagless accepts.
pub const MECHANISM_NAMES: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

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
pub struct SaslCredentials {
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

/// One authentication exchange, sans-IO: the connection sends what `next` returns in
/// SaslAuthenticate and feeds back the broker's `auth_bytes`. See the module docs.
pub trait SaslExchange: Send {
    /// `broker` is `None` on the first call, then the broker's last answer. `Ok(Some(bytes))`:
    /// send them; `Ok(None)`: authentication is complete on the client's side.
    fn next(&mut self, broker: Option<&[u8]>) -> Result<Option<Vec<u8>>>;
}

/// Starts an exchange for `creds`. Async because OAUTHBEARER may have to fetch a token first
/// (the token provider runs on a blocking thread).
pub async fn start_exchange(creds: &SaslCredentials) -> Result<Box<dyn SaslExchange>> {
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
pub fn broker_refused(
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
pub fn mechanism_not_enabled(mechanism: SaslMechanism, broker: &str, enabled: &[String]) -> Error {
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

    #[tokio::test]
    async fn plain_exchange_sends_one_message_and_is_done() {
        let c = SaslCredentials::password(SaslMechanism::Plain, "alice", "alice-secret").unwrap();
        let mut x = start_exchange(&c).await.unwrap();
        assert_eq!(x.next(None).unwrap().unwrap(), b"\0alice\0alice-secret");
        assert_eq!(x.next(Some(b"")).unwrap(), None);
    }
}

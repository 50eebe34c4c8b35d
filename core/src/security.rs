//! `security.protocol` and what it needs: the TLS setup and the SASL credentials every
//! connection of a client uses.
//!
//! Built from plain [`SecuritySettings`], which the config fills when a typed config is made
//! (so a missing file or a bad password fails when the client is created, naming the key); the
//! connection layer (`net`) only uses the result. Nothing here reads a `Config`.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::sasl::{self, OAuthBearerTokenProvider, SaslCredentials};
use tls::Tls;

#[cfg(feature = "tls")]
pub mod tls;
// Without the `tls` feature: the same names, refusing SSL and SASL_SSL when a client is created.
#[cfg(not(feature = "tls"))]
#[path = "security/no_tls.rs"]
pub mod tls;

/// What `keytool` users must do with a JKS store: the one format lagless cannot read. Refused
/// by the config as a store type is set (the `ssl.*` keys are checked alike with or without the
/// `tls` feature, so a config stays portable between builds) and by the TLS setup when a store
/// file turns out to be one.
pub(crate) const JKS_HINT: &str = "JKS stores are not supported: convert it to PKCS#12 with \
     `keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 -deststoretype PKCS12` \
     and set the store type to PKCS12 (or use PEM files)";

/// What a client's security is built from, as plain data: the values of `security.protocol`
/// and of every `ssl.*` and `sasl.*` key, and the OAUTHBEARER token provider given in code. The
/// config fills it ([`crate::config::Config`]); this module only reads it.
pub(crate) struct SecuritySettings {
    /// Every key of the settings with its effective value (its default when unset); `None` when
    /// the value is empty. A key missing here is one no config has.
    pub values: BTreeMap<&'static str, Option<String>>,
    /// The `ssl.*` and `sasl.*` keys set explicitly, with their values: two clients built from
    /// the same ones compare equal. Never shown.
    pub set: Vec<(String, String)>,
    /// The application's OAUTHBEARER token provider, if it gave one.
    pub oauthbearer_token_provider: Option<Arc<dyn OAuthBearerTokenProvider>>,
}

impl SecuritySettings {
    /// The value of a key, `None` when it is unset or empty (paths, PEM texts, passwords). A key
    /// the settings do not hold is an error, as a misspelt key is for a config.
    pub(crate) fn opt(&self, key: &str) -> Result<Option<String>> {
        self.values
            .get(key)
            .cloned()
            .ok_or_else(|| Error::config(key, format!("`{key}` is not a security setting")))
    }
}

/// The four protocols of a Kafka listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    fn parse(value: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(value))
    }
}

/// How a client's connections reach the brokers. Cheap to clone.
#[derive(Clone)]
pub struct Security {
    protocol: SecurityProtocol,
    tls: Option<Tls>,
    sasl: Option<SaslCredentials>,
    /// The `ssl.*` and `sasl.*` settings it was built from: two clients built from the same
    /// settings compare equal. Never shown.
    settings: Vec<(String, String)>,
}

impl Default for Security {
    fn default() -> Self {
        Security {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            settings: Vec::new(),
        }
    }
}

impl PartialEq for Security {
    fn eq(&self, other: &Self) -> bool {
        self.protocol == other.protocol
            && self.settings == other.settings
            && self.sasl == other.sasl
    }
}

impl Eq for Security {}

// By hand: the settings hold keys and passwords.
impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("protocol", &self.protocol)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| s.mechanism))
            .finish()
    }
}

impl Security {
    /// The security `c` describes. TLS files are read and SASL settings checked here, so a
    /// mistake fails when the client is created, naming the key.
    pub(crate) fn from_settings(c: &SecuritySettings) -> Result<Security> {
        let value = c.opt("security.protocol")?.unwrap_or_default();
        let protocol = SecurityProtocol::parse(&value).ok_or_else(|| {
            Error::config(
                "security.protocol",
                format!("unknown security protocol `{value}`"),
            )
        })?;
        let tls = if protocol.uses_tls() {
            Some(Tls::from_settings(c)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(sasl_credentials(c)?)
        } else {
            None
        };
        Ok(Security {
            protocol,
            tls,
            sasl,
            settings: c.set.clone(),
        })
    }

    // Only the tests ask: the connection layer goes by `tls()` and `sasl()`.
    #[cfg(test)]
    pub fn protocol(&self) -> SecurityProtocol {
        self.protocol
    }

    pub(crate) fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    pub(crate) fn sasl(&self) -> Option<&SaslCredentials> {
        self.sasl.as_ref()
    }
}

/// The SASL credentials of `c` (see [`sasl::credentials_from`]); librdkafka's plural
/// `sasl.mechanisms` stands in for `sasl.mechanism`.
fn sasl_credentials(c: &SecuritySettings) -> Result<SaslCredentials> {
    let get = |key: &str| -> Option<String> {
        let value = c.opt(key).ok().flatten();
        if key == "sasl.mechanism" {
            return value.or_else(|| c.opt("sasl.mechanisms").ok().flatten());
        }
        value
    };
    sasl::credentials_from(&get, c.oauthbearer_token_provider.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    // The tests go through real configs: their defaults and checks as keys are set.
    use crate::config::Config;
    use crate::sasl::SaslMechanism;

    fn security(pairs: &[(&str, &str)]) -> Result<Security> {
        let mut c = Config::new();
        for (k, v) in pairs {
            c.set(k, v)?;
        }
        Security::from_settings(&c.security_settings()?)
    }

    fn key_of(e: Error) -> String {
        match e {
            Error::Config { key, .. } => key,
            other => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn ssl_with_tls_left_out_names_the_key_and_feature() {
        for protocol in ["SSL", "sasl_ssl"] {
            let r = security(&[
                ("security.protocol", protocol),
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "alice"),
                ("sasl.password", "alice-pw-3"),
            ]);
            if cfg!(feature = "tls") {
                // The system's CAs may be missing here; the feature must not be the complaint.
                if let Err(e) = r {
                    assert!(!e.to_string().contains("`tls` feature"), "{e}");
                }
            } else {
                let e = r.expect_err("refused without TLS");
                let m = e.to_string();
                assert_eq!(key_of(e), "security.protocol");
                assert!(
                    m.contains(&format!("`{}` needs TLS", protocol.to_uppercase()))
                        && m.contains("lagless crate's `tls` feature"),
                    "{m}"
                );
            }
        }
        assert!(security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-pw-3")
        ])
        .is_ok());
    }

    #[test]
    fn the_protocol_decides_what_is_read() {
        let s = security(&[]).unwrap();
        assert_eq!(s.protocol(), SecurityProtocol::Plaintext);
        assert!(s.tls().is_none() && s.sasl().is_none());
        // ssl.* keys of a PLAINTEXT client are not read (a shared config may carry them).
        let s = security(&[("ssl.ca.location", "/nonexistent")]).unwrap();
        assert!(s.tls().is_none());
        let s = security(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-pw-3"),
        ])
        .unwrap();
        assert_eq!(s.protocol(), SecurityProtocol::SaslPlaintext);
        let creds = s.sasl().unwrap();
        assert_eq!(creds.mechanism, SaslMechanism::ScramSha256);
        assert_eq!(creds.username.as_deref(), Some("alice"));
        assert!(s.tls().is_none());
    }

    #[test]
    fn sasl_credentials_come_from_either_ecosystem_s_keys() {
        // librdkafka's plural name.
        let s = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "PLAIN"),
            ("sasl.username", "bob"),
            ("sasl.password", "bob-pw-3"),
        ])
        .unwrap();
        assert_eq!(s.sasl().unwrap().mechanism, SaslMechanism::Plain);
        // Java's JAAS line.
        let s = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="carol-pw-3";"#,
            ),
        ])
        .unwrap();
        let creds = s.sasl().unwrap();
        assert_eq!(creds.mechanism, SaslMechanism::Plain);
        assert_eq!(creds.username.as_deref(), Some("carol"));
        assert_eq!(creds.password.as_ref().unwrap().expose(), "carol-pw-3");
        let scram = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="d" password="d-pw-3";"#;
        let e = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.jaas.config", scram),
        ])
        .unwrap_err();
        assert_eq!(key_of(e), "sasl.mechanism");
        let s = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", scram),
        ])
        .unwrap();
        assert_eq!(s.sasl().unwrap().mechanism, SaslMechanism::ScramSha512);
    }

    #[test]
    // Uses SASL_SSL or an https token endpoint.
    #[cfg(feature = "tls")]
    fn oauthbearer_tokens_come_from_the_configured_source() {
        let s = security(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.config", "principal=alice"),
        ])
        .unwrap();
        assert_eq!(
            s.sasl().unwrap().oauthbearer.as_ref().unwrap().kind(),
            "unsecured"
        );
        let s = security(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example.com/token",
            ),
            ("sasl.oauthbearer.client.id", "id"),
            ("sasl.oauthbearer.client.secret", "oidc-pw-1"),
        ])
        .unwrap();
        assert_eq!(
            s.sasl().unwrap().oauthbearer.as_ref().unwrap().kind(),
            "oidc"
        );
        assert!(!format!("{s:?} {:?}", s.sasl()).contains("oidc-pw-1"));
        let e = security(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("token provider"), "{e}");
    }

    #[test]
    // Uses SASL_SSL or an https token endpoint.
    #[cfg(feature = "tls")]
    fn missing_sasl_settings_name_the_key() {
        let e = security(&[("security.protocol", "SASL_SSL")]).unwrap_err();
        assert_eq!(key_of(e), "sasl.mechanism");
        let e = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
        ])
        .unwrap_err();
        assert!(key_of(e).starts_with("sasl."));
        let e = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.password", "pw-no-user"),
        ])
        .unwrap_err();
        assert!(!e.to_string().contains("pw-no-user"), "{e}");
        assert_eq!(key_of(e), "sasl.username");
        let e = security(&[("sasl.mechanism", "GSSAPI")]).unwrap_err();
        assert_eq!(key_of(e), "sasl.mechanism");
    }

    #[test]
    fn debug_and_errors_never_show_secrets() {
        let s = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-pw-4"),
        ])
        .unwrap();
        let shown = format!("{s:?} {s:#?}");
        assert!(!shown.contains("alice-pw-4"), "{shown}");
        assert!(
            shown.contains("SaslPlaintext") && shown.contains("Plain"),
            "{shown}"
        );
        // Equal settings, equal security; another password, another.
        let again = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-pw-4"),
        ])
        .unwrap();
        assert_eq!(s, again);
        let other = security(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-pw-5"),
        ])
        .unwrap();
        assert_ne!(s, other);
        let mut c = Config::new();
        c.set("sasl.password", "alice-pw-4").unwrap();
        c.set("ssl.key.password", "key-pw-4").unwrap();
        c.set("sasl.jaas.config", "x required password=\"jaas-pw-4\";")
            .unwrap();
        let shown = format!("{c:?} {:?}", c.dump());
        for secret in ["alice-pw-4", "key-pw-4", "jaas-pw-4"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}

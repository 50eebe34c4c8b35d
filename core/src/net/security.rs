//! `security.protocol` and what it needs: the TLS setup and the SASL credentials every
//! connection of a client uses.
use std::fmt;

use super::tls::Tls;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::sasl::{jaas, SaslCredentials, SaslMechanism};

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
    /// The security settings of `c`. TLS files are read and SASL settings checked here, so a
    /// mistake fails when the client is created, naming the key.
    pub(crate) fn from_config(c: &Config) -> Result<Security> {
        let value = c.opt("security.protocol")?.unwrap_or_default();
        let protocol = SecurityProtocol::parse(&value).ok_or_else(|| {
            Error::config(
                "security.protocol",
                format!("unknown security protocol `{value}`"),
            )
        })?;
        let tls = if protocol.uses_tls() {
            Some(Tls::from_config(c)?)
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
            settings: c.set_with_prefixes(&["ssl.", "sasl."]),
        })
    }

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

/// The SASL credentials of `c`: `sasl.mechanism` (or librdkafka's `sasl.mechanisms`) with
/// `sasl.username`/`sasl.password`, or the Java client's `sasl.jaas.config`.
fn sasl_credentials(c: &Config) -> Result<SaslCredentials> {
    let jaas = c
        .opt("sasl.jaas.config")?
        .map(|text| jaas::parse(&text))
        .transpose()?;
    let named = match (c.opt("sasl.mechanism")?, c.opt("sasl.mechanisms")?) {
        (Some(m), _) => Some(("sasl.mechanism", m)),
        (None, Some(m)) => Some(("sasl.mechanisms", m)),
        (None, None) => None,
    };
    let mechanism = match (named, &jaas) {
        (Some((key, m)), _) => m.parse::<SaslMechanism>().map_err(|e| match e {
            Error::Config { message, .. } => Error::config(key, message),
            other => other,
        })?,
        // The login module says which mechanism, except for SCRAM's two.
        (None, Some(entry)) if entry.module == jaas::LoginModule::Plain => SaslMechanism::Plain,
        (None, Some(entry)) if entry.module == jaas::LoginModule::OAuthBearer => {
            SaslMechanism::OAuthBearer
        }
        _ => {
            return Err(Error::config(
                "sasl.mechanism",
                "SASL needs `sasl.mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
            ))
        }
    };
    if mechanism == SaslMechanism::OAuthBearer {
        return Err(Error::config(
            "sasl.mechanism",
            "OAUTHBEARER needs a token provider, which this build cannot take from the configuration yet",
        ));
    }
    let username = c
        .opt("sasl.username")?
        .or_else(|| jaas.as_ref().and_then(|j| j.get("username").map(str::to_string)));
    let password = c
        .opt("sasl.password")?
        .map(crate::secret::Secret::new)
        .or_else(|| jaas.as_ref().and_then(|j| j.secret("password")));
    match (username, password) {
        (Some(u), Some(p)) => SaslCredentials::password(mechanism, u, p),
        (None, _) => Err(Error::config(
            "sasl.username",
            format!("{mechanism} needs `sasl.username` and `sasl.password` (or `sasl.jaas.config`)"),
        )),
        (Some(_), None) => Err(Error::config(
            "sasl.password",
            format!("{mechanism} needs `sasl.password` (or `sasl.jaas.config`)"),
        )),
    }
}

//! Built-in unsecured JWS tokens (`alg: none`), as Java's `OAuthBearerUnsecuredLoginCallbackHandler`
//! and librdkafka's built-in OAUTHBEARER handler make them: for development and tests against a
//! broker with the default (unsecured) validator, never for production.
//!
//! Configured either librdkafka's way, `sasl.oauthbearer.config` =
//! `principal=alice [principalClaimName=sub] [scope=a,b] [scopeClaimName=scope]
//! [lifeSeconds=3600] [extension_<name>=<value>]...`, or Java's, an `OAuthBearerLoginModule` line
//! in `sasl.jaas.config` with `unsecuredLoginStringClaim_sub="alice"`,
//! `unsecuredLoginLifetimeSeconds`, `unsecuredLoginPrincipalClaimName`,
//! `unsecuredLoginScopeClaimName`, `unsecuredLogin{String,Number,List}Claim_<claim>` and
//! `unsecuredLoginExtension_<name>`.
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine;
use serde_json::{Map, Value};

use super::jaas::JaasEntry;
use super::oauthbearer::{
    check_extension, OAuthBearerToken, OAuthBearerTokenProvider, ProviderError,
};
use super::oidc::LATEST_EXPIRY_SECS;
use crate::error::{Error, Result};
use crate::secret::Secret;

const CONFIG_KEY: &str = "sasl.oauthbearer.config";
const JAAS_KEY: &str = "sasl.jaas.config";
/// Both clients' default token lifetime.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnsecuredJws {
    principal_claim: String,
    principal: String,
    scope_claim: String,
    scope: Vec<String>,
    lifetime: Duration,
    /// Further claims (Java's `unsecuredLogin*Claim_*`).
    claims: Map<String, Value>,
    extensions: BTreeMap<String, String>,
}

impl UnsecuredJws {
    /// From librdkafka's `sasl.oauthbearer.config`: space-separated `name=value` pairs.
    pub(crate) fn from_config(text: &str) -> Result<UnsecuredJws> {
        let err = |m: String| Error::config(CONFIG_KEY, m);
        let mut principal = None;
        let mut principal_claim = "sub".to_string();
        let mut scope_claim = "scope".to_string();
        let mut scope = Vec::new();
        let mut lifetime = DEFAULT_LIFETIME;
        let mut extensions = BTreeMap::new();
        for pair in text.split_whitespace() {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(err(format!("`{pair}` is not name=value")));
            };
            match name {
                "principal" => principal = Some(value.to_string()),
                "principalClaimName" => principal_claim = value.to_string(),
                "scopeClaimName" => scope_claim = value.to_string(),
                "scope" => {
                    scope = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                "lifeSeconds" => {
                    lifetime = seconds(value).map_err(|m| err(format!("lifeSeconds: {m}")))?
                }
                _ => match name.strip_prefix("extension_") {
                    Some(ext) => {
                        check_extension(ext, value).map_err(|e| err(reason(&e)))?;
                        extensions.insert(ext.to_string(), value.to_string());
                    }
                    None => {
                        return Err(err(format!(
                            "unknown name `{name}`; expected principal, principalClaimName, \
                             scope, scopeClaimName, lifeSeconds or extension_<name>"
                        )))
                    }
                },
            }
        }
        let principal = principal
            .filter(|p| !p.is_empty())
            .ok_or_else(|| err("`principal=<name>` is required".into()))?;
        Ok(UnsecuredJws {
            principal_claim,
            principal,
            scope_claim,
            scope,
            lifetime,
            claims: Map::new(),
            extensions,
        })
    }

    /// From an `OAuthBearerLoginModule` entry with `unsecuredLogin*` options.
    pub(crate) fn from_jaas(entry: &JaasEntry) -> Result<UnsecuredJws> {
        let err = |m: String| Error::config(JAAS_KEY, m);
        let principal_claim = entry
            .get("unsecuredLoginPrincipalClaimName")
            .unwrap_or("sub")
            .to_string();
        let scope_claim = entry
            .get("unsecuredLoginScopeClaimName")
            .unwrap_or("scope")
            .to_string();
        let lifetime = match entry.get("unsecuredLoginLifetimeSeconds") {
            Some(v) => {
                seconds(v).map_err(|m| err(format!("unsecuredLoginLifetimeSeconds: {m}")))?
            }
            None => DEFAULT_LIFETIME,
        };
        let mut claims = Map::new();
        for (name, v) in entry.with_prefix("unsecuredLoginStringClaim_") {
            claims.insert(name.to_string(), Value::String(v.to_string()));
        }
        for (name, v) in entry.with_prefix("unsecuredLoginNumberClaim_") {
            let n: serde_json::Number = v
                .parse()
                .map_err(|_| err(format!("unsecuredLoginNumberClaim_{name} is not a number")))?;
            claims.insert(name.to_string(), Value::Number(n));
        }
        // Java: the value's first character is the separator of the list that follows.
        for (name, v) in entry.with_prefix("unsecuredLoginListClaim_") {
            let mut chars = v.chars();
            let list = match chars.next() {
                Some(sep) => chars
                    .as_str()
                    .split(sep)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_string()))
                    .collect(),
                None => Vec::new(),
            };
            claims.insert(name.to_string(), Value::Array(list));
        }
        let principal = match claims.remove(&principal_claim) {
            Some(Value::String(p)) if !p.is_empty() => p,
            _ => {
                return Err(err(format!(
                    "OAuthBearerLoginModule needs unsecuredLoginStringClaim_{principal_claim}=\
                     \"<principal>\" (or sasl.oauthbearer.method=oidc with a token endpoint)"
                )))
            }
        };
        let scope = match claims.remove(&scope_claim) {
            Some(Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(Value::String(s)) => vec![s],
            _ => Vec::new(),
        };
        for reserved in ["iat", "exp"] {
            if claims.contains_key(reserved) {
                return Err(err(format!(
                    "the `{reserved}` claim is set from unsecuredLoginLifetimeSeconds, not \
                     given directly"
                )));
            }
        }
        let mut extensions = BTreeMap::new();
        for (name, v) in entry.with_prefix("unsecuredLoginExtension_") {
            check_extension(name, v).map_err(|e| err(reason(&e)))?;
            extensions.insert(name.to_string(), v.to_string());
        }
        Ok(UnsecuredJws {
            principal_claim,
            principal,
            scope_claim,
            scope,
            lifetime,
            claims,
            extensions,
        })
    }

    /// The token issued at `now`: `base64url(header).base64url(claims).` (an empty signature).
    pub(crate) fn token_at(&self, now: SystemTime) -> OAuthBearerToken {
        let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        // The lifetime is configured (up to u64::MAX seconds): the sum saturates at the latest
        // expiry a token may have instead of overflowing.
        let exp = iat
            .saturating_add(self.lifetime)
            .min(Duration::from_secs(LATEST_EXPIRY_SECS));
        let mut claims = self.claims.clone();
        claims.insert(
            self.principal_claim.clone(),
            Value::String(self.principal.clone()),
        );
        claims.insert("iat".into(), Value::from(iat.as_secs()));
        claims.insert("exp".into(), Value::from(exp.as_secs()));
        if !self.scope.is_empty() {
            claims.insert(
                self.scope_claim.clone(),
                Value::Array(self.scope.iter().cloned().map(Value::String).collect()),
            );
        }
        let header = BASE64URL.encode(br#"{"alg":"none"}"#);
        let payload = BASE64URL.encode(Value::Object(claims).to_string());
        OAuthBearerToken {
            value: Secret::new(format!("{header}.{payload}.")),
            // Whole seconds, as in the token: the broker checks `exp`, not a finer time.
            expires_at: UNIX_EPOCH + Duration::from_secs(exp.as_secs()),
            principal: self.principal.clone(),
            extensions: self.extensions.clone(),
        }
    }
}

impl OAuthBearerTokenProvider for UnsecuredJws {
    fn token(&self) -> std::result::Result<OAuthBearerToken, ProviderError> {
        Ok(self.token_at(SystemTime::now()))
    }
}

fn seconds(v: &str) -> std::result::Result<Duration, String> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
        _ => Err(format!("`{v}` is not a positive number of seconds")),
    }
}

/// An error's message without its `config `key`: ` prefix, to re-attach to another key.
fn reason(e: &Error) -> String {
    match e {
        Error::Config { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::jaas;

    fn decode(token: &OAuthBearerToken) -> (Value, Value, String) {
        let parts: Vec<&str> = token.value.expose().split('.').collect();
        assert_eq!(parts.len(), 3, "{}", token.value.expose());
        let json = |p: &str| serde_json::from_slice(&BASE64URL.decode(p).unwrap()).unwrap();
        (json(parts[0]), json(parts[1]), parts[2].to_string())
    }

    #[test]
    fn librdkafka_config_makes_an_unsigned_token() {
        let jws = UnsecuredJws::from_config(
            "principal=alice scope=read,write lifeSeconds=60 extension_traceId=abc",
        )
        .unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let t = jws.token_at(now);
        let (header, claims, signature) = decode(&t);
        assert_eq!(header, serde_json::json!({"alg": "none"}));
        assert_eq!(
            claims,
            serde_json::json!({"sub": "alice", "iat": 1_700_000_000u64, "exp": 1_700_000_060u64,
                               "scope": ["read", "write"]})
        );
        assert_eq!(signature, "");
        assert_eq!(t.expires_at, now + Duration::from_secs(60));
        assert_eq!(t.principal, "alice");
        assert_eq!(t.extensions.get("traceId").map(String::as_str), Some("abc"));
    }

    #[test]
    fn a_lifetime_past_any_clock_ends_at_the_latest_expiry() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let latest = UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS);
        let from_config =
            UnsecuredJws::from_config("principal=alice lifeSeconds=18446744073709551615").unwrap();
        let entry = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"bob\" \
             unsecuredLoginLifetimeSeconds=\"18446744073709551615\";",
        )
        .unwrap();
        for jws in [from_config, UnsecuredJws::from_jaas(&entry).unwrap()] {
            let t = std::panic::catch_unwind(|| jws.token_at(now)).expect("no panic");
            assert_eq!(t.expires_at, latest);
            assert_eq!(decode(&t).1["exp"], LATEST_EXPIRY_SECS);
        }
    }

    #[test]
    fn librdkafka_config_errors_name_the_problem() {
        for (text, expect) in [
            ("", "principal=<name>` is required"),
            ("scope=a", "principal=<name>` is required"),
            ("principal", "not name=value"),
            ("principal=a lifeSeconds=0", "lifeSeconds"),
            ("principal=a lifeSeconds=x", "lifeSeconds"),
            ("principal=a colour=blue", "unknown name `colour`"),
            ("principal=a extension_auth=x", "reserved"),
            ("principal=a extension_b4d=x", "letters only"),
        ] {
            let e = UnsecuredJws::from_config(text).unwrap_err();
            let m = e.to_string();
            assert!(
                m.contains(expect) && m.contains(CONFIG_KEY),
                "{text:?}: {m}"
            );
        }
    }

    #[test]
    fn java_jaas_options_make_the_same_kind_of_token() {
        let entry = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"bob\" unsecuredLoginLifetimeSeconds=\"120\" \
             unsecuredLoginNumberClaim_level=\"3\" unsecuredLoginListClaim_scope=\",a,b\" \
             unsecuredLoginStringClaim_iss=\"me\" unsecuredLoginExtension_pool=\"p1\";",
        )
        .unwrap();
        let jws = UnsecuredJws::from_jaas(&entry).unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let t = jws.token_at(now);
        let (_, claims, _) = decode(&t);
        assert_eq!(
            claims,
            serde_json::json!({"sub": "bob", "iat": 1000, "exp": 1120, "level": 3,
                               "scope": ["a", "b"], "iss": "me"})
        );
        assert_eq!(t.extensions.get("pool").map(String::as_str), Some("p1"));

        let entry = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        )
        .unwrap();
        let m = UnsecuredJws::from_jaas(&entry).unwrap_err().to_string();
        assert!(m.contains("unsecuredLoginStringClaim_sub"), "{m}");
        let entry = jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"a\" unsecuredLoginNumberClaim_exp=\"5\";",
        )
        .unwrap();
        let m = UnsecuredJws::from_jaas(&entry).unwrap_err().to_string();
        assert!(m.contains("`exp`"), "{m}");
    }
}

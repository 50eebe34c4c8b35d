//! Configuration: one table of keys ([`keys`]) from which everything else is derived.
//!
//! The table gives, for each key lagless honours, its Java client name, its default (as the
//! string a user would write), whether it belongs to consumers, producers or both, the form its
//! value must take, and a one-line doc. The C and Python layers accept exactly the keys of this
//! table, and the docs are generated from it, so a key cannot be documented but unknown, or known
//! but undocumented.
//!
//! A [`Config`] holds raw strings, checked one by one as they are set, so a typo fails at the line
//! that made it. [`ConsumerConfig::from_config`] and [`ProducerConfig::from_config`] turn a
//! `Config` into typed values and check the settings against each other.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Once};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sasl::OAuthBearerTokenProvider;
use crate::security::{Security, SecuritySettings};

mod keys;
mod typed;

use keys::*;
pub use keys::{key_info, keys, KeyInfo, Scope};
pub(crate) use typed::idempotence;
pub use typed::{
    AutoOffsetReset, CommonConfig, ConsumerConfig, GroupProtocolKind, IsolationLevel,
    ProducerConfig, MAX_IN_FLIGHT_IDEMPOTENT,
};

const HIDDEN: &str = "[hidden]";

/// Raw string settings, validated as they are set.
///
/// Keys and values are the Java client's. Each key is checked as it is set; the settings are
/// checked against each other when a consumer or producer (or a typed config) is made.
///
/// ```
/// use lagless::config::{ConsumerConfig, ProducerConfig};
/// use lagless::{Config, Error, ErrorKind};
///
/// let mut config = Config::from_pairs([
///     ("bootstrap.servers", "broker-1:9092,broker-2:9092"),
///     ("group.id", "billing"),
/// ])?;
/// config.set("max.poll.records", "100")?;
/// assert_eq!(config.get("max.poll.records")?.as_deref(), Some("100"));
/// assert_eq!(ConsumerConfig::from_config(&config)?.max_poll_records, 100);
///
/// // An unknown key is refused, naming the closest known one.
/// let e = config.set("max.pol.records", "100").unwrap_err();
/// assert_eq!(e.kind(), ErrorKind::Config);
/// assert!(e.to_string().contains("max.poll.records"), "{e}");
///
/// // A bad value is refused, naming the key.
/// match config.set("fetch.min.bytes", "lots") {
///     Err(Error::Config { key, .. }) => assert_eq!(key, "fetch.min.bytes"),
///     other => panic!("{other:?}"),
/// }
///
/// // Settings that contradict each other fail when the typed config is made.
/// config.set("heartbeat.interval.ms", "20000")?;
/// config.set("session.timeout.ms", "10000")?;
/// let e = ConsumerConfig::from_config(&config).unwrap_err();
/// assert!(matches!(&e, Error::Config { key, .. } if key == "heartbeat.interval.ms"), "{e}");
///
/// // A producer needs bootstrap.servers like a consumer, and nothing of a group.
/// let e = ProducerConfig::from_config(&Config::new()).unwrap_err();
/// assert!(matches!(&e, Error::Config { key, .. } if key == "bootstrap.servers"), "{e}");
/// # Ok::<(), lagless::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Config {
    values: BTreeMap<String, String>,
    /// The application's OAUTHBEARER token provider: code, not a string, so not a key.
    oauthbearer_token_provider: Option<Arc<dyn OAuthBearerTokenProvider>>,
}

// Written by hand, not derived, so a sensitive value never reaches a log through `{:?}`.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (k, v) in &self.values {
            let sensitive = key_info(k).is_some_and(|i| i.sensitive);
            map.entry(k, &if sensitive { HIDDEN } else { v.as_str() });
        }
        map.finish()
    }
}

/// Logs the deprecation of `retries` once per process: configs are often built in loops, and one
/// warning says all there is to say.
static RETRIES_DEPRECATION: Once = Once::new();

impl Config {
    /// An empty configuration: every key at its default. `bootstrap.servers` must be set before
    /// a consumer or producer can be made from it.
    pub fn new() -> Self {
        Self::default()
    }

    /// OAUTHBEARER tokens from the application (`sasl.mechanism=OAUTHBEARER`): called on a
    /// blocking thread whenever a connection authenticates and the token it gave last is due for
    /// refresh. It wins over every configured token source.
    pub fn set_oauthbearer_token_provider(&mut self, provider: Arc<dyn OAuthBearerTokenProvider>) {
        self.oauthbearer_token_provider = Some(provider);
    }

    pub(crate) fn oauthbearer_token_provider(&self) -> Option<Arc<dyn OAuthBearerTokenProvider>> {
        self.oauthbearer_token_provider.clone()
    }

    /// Sets a key, checking the key and the value. Surrounding whitespace is trimmed, as the Java
    /// client does. Setting a key again replaces its value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let info = lookup(key)?;
        let value = value.trim();
        info.kind
            .check(info.name, value)
            .map_err(|message| Error::config(info.name, message))?;
        if info.name == "retries" {
            RETRIES_DEPRECATION.call_once(|| {
                tracing::warn!(
                    "`retries` is deprecated and ignored: lagless retries until the operation's \
                     timeout (default.api.timeout.ms, task.timeout.ms, delivery.timeout.ms)"
                );
            });
        }
        self.values.insert(info.name.to_string(), value.to_string());
        Ok(())
    }

    /// A config from (key, value) pairs, failing at the first bad one.
    pub fn from_pairs<'a, I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Result<Self> {
        let mut c = Self::new();
        for (k, v) in pairs {
            c.set(k, v)?;
        }
        Ok(c)
    }

    /// The effective value of a key: the value set, else the default, else `None`.
    pub fn get(&self, key: &str) -> Result<Option<String>> {
        let info = lookup(key)?;
        Ok(self.effective(info).map(str::to_string))
    }

    /// Whether the key was set (rather than left at its default).
    pub fn is_set(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Every key with its effective value, in table order; sensitive values are masked as
    /// `[hidden]` and keys with neither a value nor a default show as the empty string.
    pub fn dump(&self) -> Vec<(String, String)> {
        self.dump_table(KEYS)
    }

    // Separate from `dump` so the masking can be tested with a table that has a sensitive key.
    fn dump_table(&self, table: &[KeyInfo]) -> Vec<(String, String)> {
        table
            .iter()
            .map(|info| {
                let value = match self.effective(info) {
                    Some(_) if info.sensitive => HIDDEN.to_string(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                (info.name.to_string(), value)
            })
            .collect()
    }

    fn effective<'s>(&'s self, info: &KeyInfo) -> Option<&'s str> {
        self.values
            .get(info.name)
            .map(String::as_str)
            .or(info.default)
    }

    /// The effective value of a key, checked again: a default the table got wrong fails here
    /// rather than misbehaving later.
    fn value(&self, name: &str) -> Result<Option<&str>> {
        let info = lookup(name)?;
        match self.effective(info) {
            Some(v) => {
                info.kind
                    .check(info.name, v)
                    .map_err(|m| Error::config(info.name, m))?;
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }

    fn required(&self, name: &str) -> Result<&str> {
        self.value(name)?
            .ok_or_else(|| Error::config(name, format!("`{name}` is required")))
    }

    fn int(&self, name: &str) -> Result<i64> {
        let v = self.required(name)?;
        // `value` checked it against the key's range already.
        v.parse()
            .map_err(|_| Error::config(name, format!("`{name}` is not an integer: `{v}`")))
    }

    fn int32(&self, name: &str) -> Result<i32> {
        i32::try_from(self.int(name)?)
            .map_err(|_| Error::config(name, format!("`{name}` does not fit in 32 bits")))
    }

    /// A non-negative count of things held in memory. A limit beyond the address space means "no
    /// limit", so saturating at `usize::MAX` keeps the meaning on 32-bit targets.
    fn size(&self, name: &str) -> Result<usize> {
        let n = self.int(name)?;
        if n < 0 {
            return Err(Error::config(
                name,
                format!("`{name}` must not be negative"),
            ));
        }
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn ms(&self, name: &str) -> Result<Duration> {
        let n = self.int(name)?;
        // A negative duration has no meaning as a Duration; the table only allows -1 for a key
        // lagless does not use.
        let n = u64::try_from(n)
            .map_err(|_| Error::config(name, format!("`{name}` must not be negative")))?;
        Ok(Duration::from_millis(n))
    }

    fn bool(&self, name: &str) -> Result<bool> {
        let v = self.required(name)?;
        parse_bool(v).ok_or_else(|| Error::config(name, format!("`{name}` is not a boolean")))
    }

    /// The value of a key, `None` when it is unset or empty (paths, PEM texts, passwords).
    pub(crate) fn opt(&self, name: &str) -> Result<Option<String>> {
        Ok(self
            .value(name)?
            .filter(|v| !v.is_empty())
            .map(str::to_string))
    }

    /// The keys set whose names start with one of `prefixes`, with their values.
    fn set_with_prefixes(&self, prefixes: &[&str]) -> Vec<(String, String)> {
        self.values
            .iter()
            .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// What the client's security is built from ([`Security::from_settings`]): every
    /// `security.protocol`, `ssl.*` and `sasl.*` key with its value as [`Config::opt`] reads it,
    /// the `ssl.*` and `sasl.*` keys set, and the OAUTHBEARER token provider.
    pub(crate) fn security_settings(&self) -> Result<SecuritySettings> {
        let mut values = BTreeMap::new();
        for info in KEYS.iter().filter(|i| {
            i.name == "security.protocol"
                || i.name.starts_with("ssl.")
                || i.name.starts_with("sasl.")
        }) {
            values.insert(info.name, self.opt(info.name)?);
        }
        Ok(SecuritySettings {
            values,
            set: self.set_with_prefixes(&["ssl.", "sasl."]),
            oauthbearer_token_provider: self.oauthbearer_token_provider(),
        })
    }

    fn string(&self, name: &str) -> Result<Option<String>> {
        Ok(self.value(name)?.map(str::to_string))
    }

    fn lower(&self, name: &str) -> Result<String> {
        Ok(self.required(name)?.to_ascii_lowercase())
    }

    /// Fails if a key of the other client's scope was set: it would be silently ignored, which
    /// usually means the config was meant for the other client.
    fn reject_scope(&self, foreign: Scope, what: &str) -> Result<()> {
        for name in self.values.keys() {
            if lookup(name)?.scope == foreign {
                return Err(Error::config(
                    name.as_str(),
                    format!("`{name}` is a {what} setting"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::keys::{Kind::*, Scope::*};
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        Config::from_pairs(pairs.iter().copied()).unwrap()
    }

    fn base() -> Config {
        config(&[("bootstrap.servers", "localhost:9092")])
    }

    fn config_err(e: Error) -> (String, String) {
        match e {
            Error::Config { key, message } => (key, message),
            other => panic!("not a config error: {other:?}"),
        }
    }

    fn set_err(key: &str, value: &str) -> (String, String) {
        config_err(Config::new().set(key, value).unwrap_err())
    }

    #[test]
    fn the_consumer_group_protocol_refuses_what_the_broker_decides() {
        let consumer = |extra: &[(&str, &str)]| {
            let mut pairs = vec![
                ("bootstrap.servers", "localhost:9092"),
                ("group.id", "g"),
                ("group.protocol", "consumer"),
            ];
            pairs.extend_from_slice(extra);
            ConsumerConfig::from_config(&config(&pairs))
        };
        let c = consumer(&[("group.remote.assignor", "range")]).unwrap();
        assert_eq!(c.group_protocol, GroupProtocolKind::Consumer);
        assert_eq!(c.group_remote_assignor.as_deref(), Some("range"));
        for key in ["session.timeout.ms", "heartbeat.interval.ms"] {
            let (k, m) = config_err(consumer(&[(key, "3000")]).unwrap_err());
            assert_eq!(k, key);
            assert!(
                m.contains("not supported with `group.protocol=consumer`"),
                "{m}"
            );
        }
        let (k, m) = config_err(
            consumer(&[("partition.assignment.strategy", "learner-sticky")]).unwrap_err(),
        );
        assert_eq!(k, "partition.assignment.strategy");
        assert!(
            m.contains("learner-sticky") && m.contains("group.remote.assignor"),
            "{m}"
        );
        // The classic protocol has no broker-side assignor to ask for.
        let (k, _) = config_err(
            ConsumerConfig::from_config(&config(&[
                ("bootstrap.servers", "localhost:9092"),
                ("group.id", "g"),
                ("group.remote.assignor", "range"),
            ]))
            .unwrap_err(),
        );
        assert_eq!(k, "group.remote.assignor");
        let (k, _) = set_err("group.protocol", "streams");
        assert_eq!(k, "group.protocol");
    }

    #[test]
    fn table_names_are_unique_and_defaults_pass_their_check() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                KEYS[i + 1..].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
            if let Some(d) = k.default {
                k.kind.check(k.name, d).unwrap();
            }
            assert!(!k.doc.is_empty() && !k.doc.contains('\n'), "{}", k.name);
        }
    }

    #[test]
    fn defaults_give_the_documented_consumer_config() {
        let c = ConsumerConfig::from_config(&base()).unwrap();
        assert_eq!(c.common.bootstrap_servers, vec!["localhost:9092"]);
        assert_eq!(c.common.client_id, "lagless");
        assert_eq!(c.common.client_rack, None);
        assert_eq!(c.common.request_timeout, Duration::from_secs(30));
        assert_eq!(c.common.default_api_timeout, Duration::from_secs(60));
        assert_eq!(c.common.retry_backoff, Duration::from_millis(100));
        assert_eq!(c.common.retry_backoff_max, Duration::from_millis(1000));
        assert_eq!(c.common.reconnect_backoff, Duration::from_millis(50));
        assert_eq!(c.common.reconnect_backoff_max, Duration::from_millis(1000));
        assert_eq!(
            c.common.socket_connection_setup_timeout,
            Duration::from_secs(10)
        );
        assert_eq!(c.common.metadata_max_age, Duration::from_secs(300));
        assert_eq!(c.common.task_timeout, Duration::from_secs(300));
        assert_eq!(c.group_id, None);
        assert_eq!(c.group_instance_id, None);
        assert_eq!(c.session_timeout, Duration::from_secs(10));
        assert_eq!(c.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(c.max_poll_interval, Duration::from_secs(300));
        assert_eq!(c.max_poll_records, 500);
        // No group.id, so auto-commit is off (as in Java) although its default is true.
        assert!(!c.enable_auto_commit);
        assert_eq!(c.auto_commit_interval, Duration::from_secs(5));
        assert_eq!(c.auto_offset_reset, AutoOffsetReset::Latest);
        assert_eq!(c.fetch_min_bytes, 1);
        assert_eq!(c.fetch_max_bytes, 52_428_800);
        assert_eq!(c.fetch_max_wait, Duration::from_millis(500));
        assert_eq!(c.max_partition_fetch_bytes, 1_048_576);
        assert_eq!(c.fetch_buffer_max_bytes, 67_108_864);
        assert!(c.check_crcs);
        assert_eq!(c.isolation_level, IsolationLevel::ReadUncommitted);
        assert_eq!(
            c.partition_assignment_strategy,
            vec!["cooperative-sticky", "range"]
        );
        assert!(!c.enable_parallel_rebalance);
        assert_eq!(c.parallel_rebalance_min_lag, 1000);
        assert!(c.exclude_internal_topics);
        assert!(c.leave_group_on_close);

        let with_group = config(&[("bootstrap.servers", "b:1"), ("group.id", "g")]);
        let c = ConsumerConfig::from_config(&with_group).unwrap();
        assert!(c.enable_auto_commit);
        assert_eq!(c.group_id.as_deref(), Some("g"));
    }

    #[test]
    fn defaults_give_the_documented_producer_config() {
        let p = ProducerConfig::from_config(&base()).unwrap();
        assert_eq!(p.acks, -1);
        assert_eq!(p.linger, Duration::from_millis(5));
        assert_eq!(p.batch_size, 16384);
        assert_eq!(p.compression_type, "none");
        assert_eq!(p.max_request_size, 1_048_576);
        assert_eq!(p.delivery_timeout, Duration::from_secs(120));
        assert_eq!(p.buffer_memory, 33_554_432);
        assert!(!p.partitioner_ignore_keys);
        assert_eq!(p.max_in_flight_requests_per_connection, 5);
        assert!(p.enable_idempotence);
    }

    /// `enable.idempotence` against `acks` and `max.in.flight.requests.per.connection`, as the
    /// Java producer (3.2+) decides: set to true, a conflict is an error naming the other key and
    /// its value; left unset, a conflict turns idempotence off.
    #[test]
    fn idempotence_follows_acks_and_max_in_flight_as_in_java() {
        // (enable.idempotence, acks, max.in.flight, idempotent, or the key of the error)
        type Row<'a> = (
            Option<&'a str>,
            &'a str,
            &'a str,
            std::result::Result<bool, &'a str>,
        );
        let table: &[Row] = &[
            (None, "all", "5", Ok(true)),
            (None, "-1", "1", Ok(true)),
            (None, "1", "5", Ok(false)),
            (None, "0", "5", Ok(false)),
            (None, "all", "6", Ok(false)),
            (Some("true"), "all", "5", Ok(true)),
            (Some("true"), "1", "5", Err("acks")),
            (Some("true"), "0", "1", Err("acks")),
            (
                Some("true"),
                "all",
                "6",
                Err("max.in.flight.requests.per.connection"),
            ),
            (Some("false"), "all", "5", Ok(false)),
            (Some("false"), "1", "100", Ok(false)),
        ];
        for (set, acks, in_flight, want) in table {
            let mut pairs = vec![
                ("bootstrap.servers", "b:1"),
                ("acks", *acks),
                ("max.in.flight.requests.per.connection", *in_flight),
            ];
            if let Some(v) = set {
                pairs.push(("enable.idempotence", *v));
            }
            let got = ProducerConfig::from_config(&config(&pairs));
            let case = format!("{set:?} acks={acks} in.flight={in_flight}");
            match (got, want) {
                (Ok(p), Ok(idempotent)) => assert_eq!(p.enable_idempotence, *idempotent, "{case}"),
                (Err(Error::Config { key, message }), Err(k)) => {
                    assert_eq!(key, *k, "{case}");
                    // The message names the key and the value that conflict.
                    let value = if key == "acks" {
                        if *acks == "0" {
                            "0"
                        } else {
                            "1"
                        }
                    } else {
                        in_flight
                    };
                    assert!(
                        message.contains(k) && message.contains(value),
                        "{case}: {message}"
                    );
                    assert!(message.contains("enable.idempotence"), "{case}: {message}");
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// `transactional.id` makes the producer idempotent; `enable.idempotence=false` beside it
    /// is an error naming both keys, and so is a setting idempotence can not work with.
    #[test]
    fn a_transactional_id_implies_idempotence() {
        // (enable.idempotence, acks, transactional id and timeout, or the key of the error)
        type Row<'a> = (
            Option<&'a str>,
            &'a str,
            std::result::Result<(Option<&'a str>, u64), &'a str>,
        );
        let table: &[Row] = &[
            (None, "all", Ok((Some("tx-1"), 60_000))),
            (Some("true"), "all", Ok((Some("tx-1"), 60_000))),
            (Some("false"), "all", Err("enable.idempotence")),
            // Unset, a conflicting acks would turn idempotence off; with a transactional id
            // it is an error instead, as in Java.
            (None, "1", Err("acks")),
        ];
        for (set, acks, want) in table {
            let mut pairs = vec![
                ("bootstrap.servers", "b:1"),
                ("acks", *acks),
                ("transactional.id", "tx-1"),
            ];
            if let Some(v) = set {
                pairs.push(("enable.idempotence", *v));
            }
            let case = format!("{set:?} acks={acks}");
            match (ProducerConfig::from_config(&config(&pairs)), want) {
                (Ok(p), Ok((id, timeout))) => {
                    assert!(p.enable_idempotence, "{case}");
                    assert_eq!(p.transactional_id.as_deref(), *id, "{case}");
                    assert_eq!(p.transaction_timeout, Duration::from_millis(*timeout));
                }
                (Err(Error::Config { key, message }), Err(k)) => {
                    assert_eq!(key, *k, "{case}");
                    assert!(message.contains("enable.idempotence"), "{case}: {message}");
                    if key == "enable.idempotence" {
                        assert!(message.contains("transactional.id"), "{case}: {message}");
                    }
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
        let p = ProducerConfig::from_config(&config(&[("bootstrap.servers", "b:1")])).unwrap();
        assert_eq!(p.transactional_id, None);
        let p = ProducerConfig::from_config(&config(&[
            ("bootstrap.servers", "b:1"),
            ("transaction.timeout.ms", "900"),
        ]))
        .unwrap();
        assert_eq!(p.transaction_timeout, Duration::from_millis(900));
    }

    #[test]
    fn every_key_the_sasl_module_reads_is_in_the_config_table() {
        for (name, sensitive) in crate::sasl::CONFIG_KEYS {
            let info = key_info(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(info.sensitive, *sensitive, "{name}");
        }
    }

    #[test]
    fn every_key_can_be_set_to_its_default() {
        let mut c = base();
        for k in keys() {
            if let Some(d) = k.default {
                c.set(k.name, d).unwrap();
            }
        }
        c.set("group.id", "g").unwrap();
        c.set("group.instance.id", "member-1").unwrap();
        // A consumer rejects producer keys that were set, so each side gets its own keys.
        let scoped = |keep: Scope| {
            let mut s = Config::new();
            for (k, v) in &c.values {
                if key_info(k).unwrap().scope != keep {
                    s.set(k, v).unwrap();
                }
            }
            s
        };
        ConsumerConfig::from_config(&scoped(Scope::Producer)).unwrap();
        let mut p = scoped(Scope::Consumer);
        p.set("retries", "3").unwrap();
        ProducerConfig::from_config(&p).unwrap();
    }

    #[test]
    fn unknown_key_names_the_closest_known_key() {
        let (key, message) = set_err("sesion.timeout.ms", "1");
        assert_eq!(key, "sesion.timeout.ms");
        assert_eq!(
            message,
            "unknown configuration key `sesion.timeout.ms`; did you mean `session.timeout.ms`?"
        );
        // A transposition is one edit.
        let (_, message) = set_err("gruop.id", "g");
        assert!(message.ends_with("did you mean `group.id`?"), "{message}");
        let (_, message) = set_err("completely.different", "x");
        assert_eq!(message, "unknown configuration key `completely.different`");
        let (key, _) = config_err(Config::new().get("no.such.key").unwrap_err());
        assert_eq!(key, "no.such.key");
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn bad_integers_name_the_key_and_the_range() {
        let (key, message) = set_err("max.poll.records", "abc");
        assert_eq!(key, "max.poll.records");
        assert_eq!(
            message,
            "`max.poll.records` must be an integer from 1 to 2147483647, got `abc`"
        );
        set_err("max.poll.records", "0");
        set_err("max.poll.records", "2147483648");
        set_err("fetch.min.bytes", "-1");
        set_err("fetch.max.bytes", "0");
        set_err("default.api.timeout.ms", "0");
        let (_, message) = set_err("session.timeout.ms", "1.5");
        assert!(message.contains("milliseconds"), "{message}");
        let mut c = Config::new();
        c.set("max.poll.records", " 42 ").unwrap();
        assert_eq!(c.get("max.poll.records").unwrap().as_deref(), Some("42"));
    }

    #[test]
    fn bad_booleans_and_enums_are_refused() {
        let (key, message) = set_err("check.crcs", "yes");
        assert_eq!(key, "check.crcs");
        assert_eq!(message, "`check.crcs` must be `true` or `false`, got `yes`");
        Config::new().set("check.crcs", "FALSE").unwrap();

        let (_, message) = set_err("auto.offset.reset", "smallest");
        assert_eq!(
            message,
            "`auto.offset.reset` must be one of `earliest`, `latest`, `none`, got `smallest`"
        );
        set_err("acks", "2");
        set_err("compression.type", "brotli");

        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("auto.offset.reset", "Earliest"),
        ]);
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(c.auto_offset_reset, AutoOffsetReset::Earliest);
    }

    #[test]
    fn unsupported_kafka_features_say_so() {
        Config::new().set("security.protocol", "plaintext").unwrap();
        let (_, m) = set_err("ssl.keystore.type", "JKS");
        assert!(
            m.contains("keytool -importkeystore") && m.contains("PKCS12"),
            "{m}"
        );
        let (key, m) = set_err("sasl.mechanism", "GSSAPI");
        assert_eq!(key, "sasl.mechanism");
        assert!(
            m.contains("not supported") && m.contains("SCRAM-SHA-512"),
            "{m}"
        );
        let (_, m) = set_err("allow.auto.create.topics", "true");
        assert!(m.contains("never creates topics"), "{m}");
        let (_, m) = set_err("enable.idempotence", "maybe");
        assert!(m.contains("`true` or `false`"), "{m}");

        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("isolation.level", "READ_COMMITTED"),
        ]);
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(c.isolation_level, IsolationLevel::ReadCommitted);
        let c = Config::from_pairs([
            ("bootstrap.servers", "b:9092"),
            ("enable.parallel.rebalance", "true"),
            ("parallel.rebalance.min.lag", "50"),
        ])
        .unwrap();
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert!(c.enable_parallel_rebalance);
        assert_eq!(c.parallel_rebalance_min_lag, 50);
        let e = Config::from_pairs([("parallel.rebalance.min.lag", "-1")]).unwrap_err();
        assert!(
            matches!(e, Error::Config { ref key, .. } if key == "parallel.rebalance.min.lag"),
            "{e}"
        );
    }

    #[test]
    fn bootstrap_servers_are_checked_entry_by_entry() {
        let (key, m) = set_err("bootstrap.servers", "a:9092,b");
        assert_eq!(key, "bootstrap.servers");
        assert!(m.contains("`b` has no port"), "{m}");
        assert!(set_err("bootstrap.servers", ":9092").1.contains("no host"));
        assert!(set_err("bootstrap.servers", "a:0")
            .1
            .contains("not 1 to 65535"));
        assert!(set_err("bootstrap.servers", "a:65536").1.contains("65536"));
        assert!(set_err("bootstrap.servers", "a:x").1.contains("`x`"));
        assert!(set_err("bootstrap.servers", " , ").1.contains("empty"));

        let c = config(&[("bootstrap.servers", " a:1 , [::1]:9092, ")]);
        let common = CommonConfig::from_config(&c).unwrap();
        assert_eq!(common.bootstrap_servers, vec!["a:1", "[::1]:9092"]);

        let (key, m) = config_err(ConsumerConfig::from_config(&Config::new()).unwrap_err());
        assert_eq!(key, "bootstrap.servers");
        assert_eq!(m, "`bootstrap.servers` is required");
    }

    #[test]
    fn assignors_are_normalised_and_checked() {
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            (
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor, range",
            ),
        ]);
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(c.partition_assignment_strategy, vec!["roundrobin", "range"]);

        let (key, m) = set_err("partition.assignment.strategy", "sticky");
        assert_eq!(key, "partition.assignment.strategy");
        assert!(m.contains("`sticky` is not a known assignor"), "{m}");
        assert!(set_err("partition.assignment.strategy", "")
            .1
            .contains("empty"));
        assert!(set_err(
            "partition.assignment.strategy",
            "range,org.apache.kafka.clients.consumer.RangeAssignor"
        )
        .1
        .contains("twice"));
    }

    /// The whole message of a bad assignor name: the key, the names known, the one refused.
    #[test]
    fn an_unknown_assignor_is_refused_with_the_names_known() {
        let (key, m) = set_err("partition.assignment.strategy", "range, sticky");
        assert_eq!(key, "partition.assignment.strategy");
        assert_eq!(
            m,
            "`partition.assignment.strategy` must be a comma-separated list of assignors from \
             `range`, `roundrobin`, `cooperative-sticky`, `learner-sticky`: `sticky` is not a \
             known assignor"
        );
        // Any case of a protocol name, the exact Java class name; not another case of the class.
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            (
                "partition.assignment.strategy",
                "Cooperative-Sticky,LEARNER-STICKY,org.apache.kafka.clients.consumer.RangeAssignor",
            ),
        ]);
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(
            c.partition_assignment_strategy,
            vec!["cooperative-sticky", "learner-sticky", "range"]
        );
        let (_, m) = set_err(
            "partition.assignment.strategy",
            "org.apache.kafka.clients.consumer.rangeassignor",
        );
        assert!(
            m.ends_with(
                "`org.apache.kafka.clients.consumer.rangeassignor` is not a known assignor"
            ),
            "{m}"
        );
    }

    /// The config's list of assignor names is the group layer's registry, name for name.
    #[test]
    fn the_known_assignors_are_the_ones_the_group_implements() {
        let implemented: Vec<(&str, Option<&str>)> = crate::group::assignor::ASSIGNORS
            .iter()
            .map(|a| (a.name, a.java_class))
            .collect();
        assert_eq!(keys::KNOWN_ASSIGNORS, implemented.as_slice());
        for (name, _) in keys::KNOWN_ASSIGNORS {
            assert!(
                crate::group::assignor::assignor_by_name(name).is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn heartbeat_must_be_below_session_timeout() {
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("session.timeout.ms", "3000"),
            ("heartbeat.interval.ms", "3000"),
        ]);
        let (key, m) = config_err(ConsumerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "heartbeat.interval.ms");
        assert!(
            m.contains("heartbeat.interval.ms") && m.contains("session.timeout.ms"),
            "{m}"
        );
    }

    #[test]
    fn consumer_cross_checks() {
        let c = config(&[("bootstrap.servers", "b:1"), ("group.instance.id", "i")]);
        let (key, _) = config_err(ConsumerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "group.instance.id");
        set_err("group.instance.id", "has space");
        let (key, m) = set_err("group.id", " ");
        assert_eq!(key, "group.id");
        assert_eq!(m, "`group.id` must be a non-empty string, got ``");

        let c = config(&[("bootstrap.servers", "b:1"), ("enable.auto.commit", "true")]);
        let (key, _) = config_err(ConsumerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "enable.auto.commit");

        // KIP-580: a maximum below the initial backoff is allowed (the backoff is constant).
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("retry.backoff.ms", "500"),
            ("retry.backoff.max.ms", "100"),
            ("client.rack", "eu-1a"),
        ]);
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(c.common.client_rack.as_deref(), Some("eu-1a"));
    }

    #[test]
    fn keys_of_the_other_client_are_refused() {
        let c = config(&[("bootstrap.servers", "b:1"), ("linger.ms", "10")]);
        let (key, m) = config_err(ConsumerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "linger.ms");
        assert_eq!(m, "`linger.ms` is a producer setting");

        let c = config(&[("bootstrap.servers", "b:1"), ("group.id", "g")]);
        let (key, m) = config_err(ProducerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "group.id");
        assert_eq!(m, "`group.id` is a consumer setting");
    }

    #[test]
    fn a_compression_type_of_a_codec_left_out_names_the_key_and_its_feature() {
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            let c = config(&[("bootstrap.servers", "b:1"), ("compression.type", codec)]);
            let built_in = crate::Compression::parse(codec).unwrap().is_enabled();
            match ProducerConfig::from_config(&c) {
                Ok(p) => {
                    assert!(built_in, "{codec} is left out but accepted");
                    assert_eq!(p.compression_type, codec);
                }
                Err(e) => {
                    assert!(!built_in, "{codec} is built in but refused: {e}");
                    let (key, message) = config_err(e);
                    assert_eq!(key, "compression.type");
                    assert!(
                        message.contains(&format!("lagless crate's `{codec}` feature")),
                        "{message}"
                    );
                }
            }
        }
    }

    #[test]
    fn producer_settings_and_delivery_timeout() {
        // Any codec this build has (cargo features), in upper case.
        let codec = ["zstd", "lz4", "snappy", "gzip"]
            .into_iter()
            .find(|c| crate::Compression::parse(c).unwrap().is_enabled())
            .unwrap_or("none");
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("acks", "1"),
            ("compression.type", &codec.to_uppercase()),
        ]);
        let p = ProducerConfig::from_config(&c).unwrap();
        assert_eq!(p.acks, 1);
        assert_eq!(p.compression_type, codec);
        let c = config(&[("bootstrap.servers", "b:1"), ("acks", "-1")]);
        assert_eq!(ProducerConfig::from_config(&c).unwrap().acks, -1);

        // An explicit delivery timeout below linger + request timeout is an error...
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("delivery.timeout.ms", "1000"),
        ]);
        let (key, _) = config_err(ProducerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "delivery.timeout.ms");
        // ...the default grows to fit.
        let c = config(&[("bootstrap.servers", "b:1"), ("linger.ms", "100000")]);
        let p = ProducerConfig::from_config(&c).unwrap();
        assert_eq!(p.delivery_timeout, Duration::from_millis(130_000));
    }

    #[test]
    fn retries_is_accepted_and_ignored() {
        let mut c = base();
        c.set("retries", "10").unwrap();
        c.set("retries", "0").unwrap();
        set_err("retries", "-1");
        assert_eq!(
            ConsumerConfig::from_config(&c).unwrap(),
            ConsumerConfig::from_config(&base()).unwrap()
        );
        assert_eq!(
            ProducerConfig::from_config(&c).unwrap(),
            ProducerConfig::from_config(&base()).unwrap()
        );
    }

    #[test]
    fn get_gives_the_set_value_else_the_default() {
        let mut c = Config::new();
        assert_eq!(
            c.get("session.timeout.ms").unwrap().as_deref(),
            Some("10000")
        );
        assert_eq!(c.get("group.id").unwrap(), None);
        c.set("session.timeout.ms", "20000").unwrap();
        assert_eq!(
            c.get("session.timeout.ms").unwrap().as_deref(),
            Some("20000")
        );
    }

    #[test]
    fn dump_lists_every_key_and_masks_sensitive_ones() {
        let c = config(&[("bootstrap.servers", "b:1"), ("group.id", "g")]);
        let dump = c.dump();
        assert_eq!(dump.len(), keys().len());
        let get = |k: &str| dump.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("bootstrap.servers"), "b:1");
        assert_eq!(get("group.id"), "g");
        assert_eq!(get("max.poll.records"), "500");
        assert_eq!(get("group.instance.id"), "");

        // Every key that can hold a password or a private key is sensitive, and only those.
        let sensitive: Vec<&str> = keys()
            .iter()
            .filter(|k| k.sensitive)
            .map(|k| k.name)
            .collect();
        assert_eq!(
            sensitive,
            [
                "ssl.key.pem",
                "ssl.key.password",
                "ssl.keystore.password",
                "ssl.keystore.key",
                "ssl.truststore.password",
                "sasl.password",
                "sasl.jaas.config",
                "sasl.oauthbearer.config",
                "sasl.oauthbearer.client.secret",
            ]
        );
        let table = [
            KeyInfo {
                sensitive: true,
                ..key("client.id", Some("lagless"), Common, Str, "secret")
            },
            key("group.id", None, Consumer, Str, "plain"),
        ];
        let dump = c.dump_table(&table);
        assert_eq!(
            dump,
            vec![
                ("client.id".to_string(), "[hidden]".to_string()),
                ("group.id".to_string(), "g".to_string()),
            ]
        );
    }
}

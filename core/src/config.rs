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
use crate::net::Security;
use crate::sasl::OAuthBearerTokenProvider;

/// Which clients a key applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Consumers and producers.
    Common,
    Consumer,
    Producer,
}

/// The form a key's value must take. Every value, defaults included, goes through the same check,
/// so a typed config never sees a string that did not pass it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Any string.
    Str,
    /// Any string but the empty one.
    NonEmpty,
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// An integer number of milliseconds in `min..=max`.
    Ms { min: i64, max: i64 },
    /// `true` or `false`, any case.
    Bool,
    /// One of the listed words, any case.
    OneOf(&'static [&'static str]),
    /// One of `known` (any case); only the `accepted` ones work in lagless, the others are
    /// refused with `why` rather than with "unknown value", because the user asked for a real
    /// Kafka feature that lagless lacks.
    Restricted {
        known: &'static [&'static str],
        accepted: &'static [&'static str],
        why: &'static str,
    },
    /// A comma-separated list of `host:port`.
    HostPorts,
    /// A comma-separated list of partition assignor names.
    Assignors,
    /// A static group member id (KIP-345): what the broker accepts.
    InstanceId,
}

/// One configuration key.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    /// The Java client's name for the key.
    pub name: &'static str,
    /// The value used when the key is not set, as a user would write it.
    pub default: Option<&'static str>,
    pub scope: Scope,
    /// One line for the docs.
    pub doc: &'static str,
    /// The value is a secret: [`Config::dump`] and `Debug` hide it.
    pub sensitive: bool,
    kind: Kind,
}

impl KeyInfo {
    /// The form a value must take, as a phrase ("an integer from 1 to 2147483647"), for error
    /// messages and docs.
    pub fn expected(&self) -> String {
        self.kind.describe()
    }

    /// Whether a consumer accepts the key.
    pub fn applies_to_consumer(&self) -> bool {
        self.scope != Scope::Producer
    }

    /// Whether a producer accepts the key.
    pub fn applies_to_producer(&self) -> bool {
        self.scope != Scope::Consumer
    }
}

const I32_MAX: i64 = i32::MAX as i64;

/// The assignors lagless implements, by the name it speaks on the wire (the protocol name in
/// JoinGroup), with the Java class name users copy from Java configs.
const ASSIGNORS: &[(&str, &str)] = &[
    ("range", "org.apache.kafka.clients.consumer.RangeAssignor"),
    (
        "roundrobin",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    ),
    (
        "cooperative-sticky",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    ),
    // Learner assignments; lagless only, so it has no Java class name.
    ("learner-sticky", "learner-sticky"),
];

// Built with a `const fn` so each table row stays one readable call.
const fn key(
    name: &'static str,
    default: Option<&'static str>,
    scope: Scope,
    kind: Kind,
    doc: &'static str,
) -> KeyInfo {
    KeyInfo {
        name,
        default,
        scope,
        doc,
        sensitive: false,
        kind,
    }
}

// The same for a key whose value is a secret (never shown).
const fn secret(
    name: &'static str,
    default: Option<&'static str>,
    scope: Scope,
    kind: Kind,
    doc: &'static str,
) -> KeyInfo {
    KeyInfo {
        sensitive: true,
        ..key(name, default, scope, kind, doc)
    }
}

use Kind::*;
use Scope::*;

/// The table. Order is the order of the docs and of [`Config::dump`]: common keys, then consumer,
/// then producer.
static KEYS: &[KeyInfo] = &[
    // Common.
    key(
        "bootstrap.servers",
        None,
        Common,
        HostPorts,
        "Brokers to ask for the cluster's metadata first, as host:port,host:port. Required.",
    ),
    key(
        "client.id",
        Some("lagless"),
        Common,
        Str,
        "Name sent with every request, for the brokers' logs and quotas.",
    ),
    key(
        "client.rack",
        Some(""),
        Common,
        Str,
        "Rack of this client, for fetching from the closest replica (KIP-392); empty for none.",
    ),
    key(
        "request.timeout.ms",
        Some("30000"),
        Common,
        Ms { min: 0, max: I32_MAX },
        "How long to wait for a broker's answer before the request fails and is retried.",
    ),
    key(
        "default.api.timeout.ms",
        Some("60000"),
        Common,
        Ms { min: 1, max: I32_MAX },
        "Timeout of blocking calls that take no timeout argument.",
    ),
    key(
        "retry.backoff.ms",
        Some("100"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "First wait before retrying a failed request; doubles up to retry.backoff.max.ms (KIP-580).",
    ),
    key(
        "retry.backoff.max.ms",
        Some("1000"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "Longest wait between retries; if not above retry.backoff.ms the wait is constant.",
    ),
    key(
        "reconnect.backoff.ms",
        Some("50"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "First wait before reconnecting to a broker; doubles up to reconnect.backoff.max.ms.",
    ),
    key(
        "reconnect.backoff.max.ms",
        Some("1000"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "Longest wait between reconnection attempts to one broker.",
    ),
    key(
        "socket.connection.setup.timeout.ms",
        Some("10000"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "How long a TCP connection may take to be established.",
    ),
    key(
        "metadata.max.age.ms",
        Some("300000"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "Refresh cluster metadata at least this often, even without errors.",
    ),
    key(
        "connections.max.idle.ms",
        Some("540000"),
        Common,
        Ms { min: -1, max: i64::MAX },
        "Accepted for compatibility with Java configs; lagless does not close idle connections.",
    ),
    key(
        "task.timeout.ms",
        Some("300000"),
        Common,
        Ms { min: 0, max: i64::MAX },
        "A partition that makes no progress this long is reported, the others go on (KIP-572); 0 reports at the first failure.",
    ),
    key(
        "retries",
        None,
        Common,
        Int { min: 0, max: I32_MAX },
        "Deprecated and ignored: lagless retries until the operation's timeout.",
    ),
    key(
        "security.protocol",
        Some("PLAINTEXT"),
        Common,
        OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
        "Protocol to talk to brokers: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over TLS).",
    ),
    key(
        "ssl.ca.location",
        None,
        Common,
        Str,
        "File (or directory) of PEM CA certificates that sign the brokers' certificates; without it (and ssl.ca.pem, ssl.truststore.*) the system's CAs are trusted.",
    ),
    key(
        "ssl.ca.pem",
        None,
        Common,
        Str,
        "PEM CA certificates, inline, as ssl.ca.location.",
    ),
    key(
        "ssl.certificate.location",
        None,
        Common,
        Str,
        "File of the client's PEM certificate (chain) for mutual TLS, with ssl.key.location.",
    ),
    key(
        "ssl.certificate.pem",
        None,
        Common,
        Str,
        "The client's PEM certificate (chain), inline, as ssl.certificate.location.",
    ),
    key(
        "ssl.key.location",
        None,
        Common,
        Str,
        "File of the client's PEM private key (PKCS#8, encrypted with ssl.key.password or not; PKCS#1; SEC1).",
    ),
    secret(
        "ssl.key.pem",
        None,
        Common,
        Str,
        "The client's PEM private key, inline, as ssl.key.location.",
    ),
    secret(
        "ssl.key.password",
        None,
        Common,
        Str,
        "Password of an encrypted PKCS#8 client key (ssl.key.location, ssl.key.pem, ssl.keystore.key).",
    ),
    key(
        "ssl.endpoint.identification.algorithm",
        Some("https"),
        Common,
        OneOf(&["https", "none", ""]),
        "https: a broker's certificate must carry the host lagless connects to; none (or empty) skips that check, not the others.",
    ),
    key(
        "ssl.keystore.location",
        None,
        Common,
        Str,
        "Client key and certificate store for mutual TLS: PKCS#12 (with ssl.keystore.password) or PEM (ssl.keystore.type).",
    ),
    secret(
        "ssl.keystore.password",
        None,
        Common,
        Str,
        "Password of the PKCS#12 store of ssl.keystore.location.",
    ),
    key(
        "ssl.keystore.type",
        None,
        Common,
        Restricted {
            known: &["PKCS12", "PEM", "JKS"],
            accepted: &["PKCS12", "PEM"],
            why: crate::net::tls::JKS_HINT,
        },
        "PKCS12 or PEM; unset, it is read from the file (JKS is refused with how to convert it).",
    ),
    secret(
        "ssl.keystore.key",
        None,
        Common,
        Str,
        "The client's PEM private key, inline (Java's name for ssl.key.pem).",
    ),
    key(
        "ssl.keystore.certificate.chain",
        None,
        Common,
        Str,
        "The client's PEM certificate chain, inline (Java's name for ssl.certificate.pem).",
    ),
    key(
        "ssl.truststore.type",
        None,
        Common,
        Restricted {
            known: &["PKCS12", "PEM", "JKS"],
            accepted: &["PKCS12", "PEM"],
            why: crate::net::tls::JKS_HINT,
        },
        "PEM or PKCS12; unset, it is read from the file (JKS is refused with how to convert it).",
    ),
    key(
        "ssl.truststore.location",
        None,
        Common,
        Str,
        "File of trusted CA certificates, PEM or PKCS#12 (Java's name for ssl.ca.location).",
    ),
    secret(
        "ssl.truststore.password",
        None,
        Common,
        Str,
        "Password of a PKCS#12 ssl.truststore.location.",
    ),
    key(
        "ssl.truststore.certificates",
        None,
        Common,
        Str,
        "PEM CA certificates, inline (Java's name for ssl.ca.pem).",
    ),
    key(
        "sasl.mechanism",
        None,
        Common,
        Restricted {
            known: &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"],
            accepted: &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
            why: "GSSAPI (Kerberos) is not supported; use SCRAM-SHA-512, PLAIN over SSL or OAUTHBEARER",
        },
        "SASL mechanism with SASL_PLAINTEXT and SASL_SSL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.",
    ),
    key(
        "sasl.mechanisms",
        None,
        Common,
        Restricted {
            known: &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"],
            accepted: &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
            why: "GSSAPI (Kerberos) is not supported; use SCRAM-SHA-512, PLAIN over SSL or OAUTHBEARER",
        },
        "librdkafka's name for sasl.mechanism.",
    ),
    key(
        "sasl.username",
        None,
        Common,
        Str,
        "User name for PLAIN and SCRAM.",
    ),
    secret(
        "sasl.password",
        None,
        Common,
        Str,
        "Password for PLAIN and SCRAM.",
    ),
    secret(
        "sasl.jaas.config",
        None,
        Common,
        Str,
        "Java's login module line (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule) with the credentials.",
    ),
    key(
        "sasl.oauthbearer.method",
        Some("default"),
        Common,
        OneOf(&["default", "oidc"]),
        "OAUTHBEARER tokens: default (the application's token provider, else unsecured tokens from sasl.oauthbearer.config) or oidc (client credentials from sasl.oauthbearer.token.endpoint.url; setting that URL alone means oidc too, as in the Java client).",
    ),
    secret(
        "sasl.oauthbearer.config",
        None,
        Common,
        Str,
        "Unsecured OAUTHBEARER tokens, for testing: `principal=<name> [scope=<s>] [lifeSeconds=<n>]`.",
    ),
    key(
        "sasl.oauthbearer.token.endpoint.url",
        None,
        Common,
        Str,
        "OIDC token endpoint for sasl.oauthbearer.method=oidc.",
    ),
    key(
        "sasl.oauthbearer.client.id",
        None,
        Common,
        Str,
        "OIDC client id for sasl.oauthbearer.method=oidc.",
    ),
    secret(
        "sasl.oauthbearer.client.secret",
        None,
        Common,
        Str,
        "OIDC client secret for sasl.oauthbearer.method=oidc.",
    ),
    key(
        "sasl.oauthbearer.scope",
        None,
        Common,
        Str,
        "Scope requested from the OIDC token endpoint.",
    ),
    key(
        "sasl.oauthbearer.extensions",
        None,
        Common,
        Str,
        "SASL extensions sent with OAUTHBEARER tokens (KIP-342), as key=value,key=value.",
    ),
    // Consumer.
    key(
        "group.id",
        None,
        Consumer,
        NonEmpty,
        "Consumer group to join; without it the consumer can only assign partitions itself and cannot commit.",
    ),
    key(
        "group.instance.id",
        None,
        Consumer,
        InstanceId,
        "Static member id (KIP-345): a restart within session.timeout.ms causes no rebalance.",
    ),
    key(
        "session.timeout.ms",
        Some("10000"),
        Consumer,
        Ms { min: 1, max: I32_MAX },
        "The group drops a member not heard from this long; heartbeats run in the background (KIP-62).",
    ),
    key(
        "heartbeat.interval.ms",
        Some("3000"),
        Consumer,
        Ms { min: 1, max: I32_MAX },
        "Time between heartbeats to the group coordinator; must be below session.timeout.ms.",
    ),
    key(
        "max.poll.interval.ms",
        Some("300000"),
        Consumer,
        Ms { min: 1, max: I32_MAX },
        "A member that does not poll this long leaves the group so its partitions move.",
    ),
    key(
        "max.poll.records",
        Some("500"),
        Consumer,
        Int { min: 1, max: I32_MAX },
        "Most records one poll returns.",
    ),
    key(
        "enable.auto.commit",
        Some("true"),
        Consumer,
        Bool,
        "Commit the positions of returned records in the background.",
    ),
    key(
        "auto.commit.interval.ms",
        Some("5000"),
        Consumer,
        Ms { min: 0, max: I32_MAX },
        "Time between automatic commits.",
    ),
    key(
        "auto.offset.reset",
        Some("latest"),
        Consumer,
        OneOf(&["earliest", "latest", "none"]),
        "Where to start without a valid committed offset: earliest, latest, or none (an error).",
    ),
    key(
        "fetch.min.bytes",
        Some("1"),
        Consumer,
        Int { min: 0, max: I32_MAX },
        "A broker holds a fetch until it has this many bytes or fetch.max.wait.ms passes.",
    ),
    key(
        "fetch.max.bytes",
        Some("52428800"),
        Consumer,
        Int { min: 1, max: I32_MAX },
        "Most bytes one fetch response may carry (one oversized batch still comes through).",
    ),
    key(
        "fetch.max.wait.ms",
        Some("500"),
        Consumer,
        Ms { min: 0, max: I32_MAX },
        "Longest a broker holds a fetch waiting for fetch.min.bytes.",
    ),
    key(
        "max.partition.fetch.bytes",
        Some("1048576"),
        Consumer,
        Int { min: 1, max: I32_MAX },
        "Most bytes per partition in one fetch response.",
    ),
    key(
        "fetch.buffer.max.bytes",
        Some("67108864"),
        Consumer,
        Int { min: 1, max: i64::MAX },
        "Most bytes of fetched, not yet returned records held in memory; prefetching pauses above it.",
    ),
    key(
        "check.crcs",
        Some("true"),
        Consumer,
        Bool,
        "Check the CRC32C of every record batch fetched.",
    ),
    key(
        "isolation.level",
        Some("read_uncommitted"),
        Consumer,
        OneOf(&["read_uncommitted", "read_committed"]),
        "read_uncommitted returns all records; read_committed is not supported yet.",
    ),
    key(
        "partition.assignment.strategy",
        Some("cooperative-sticky,range"),
        Consumer,
        Assignors,
        "Assignors this member offers, preferred first: cooperative-sticky, range, roundrobin (or their Java class names), and learner-sticky (lagless only: a partition moves to a new member once it has warmed up for it). The member rebalances cooperatively (KIP-429: partitions that stay are never revoked) only when every listed assignor is cooperative (cooperative-sticky, learner-sticky); otherwise eagerly (everything revoked before each rebalance), as the Java client. The default joins any group (range for members offering nothing else) and runs eager; list only cooperative-sticky once no member of the group offers range alone.",
    ),
    key(
        "enable.parallel.rebalance",
        Some("false"),
        Consumer,
        Bool,
        "KIP-333 recovery streams: after a takeover with a backlog, deliver fresh records at once while the backlog [committed, log end) drains in parallel.",
    ),
    key(
        "parallel.rebalance.min.lag",
        Some("1000"),
        Consumer,
        Int { min: 0, max: i64::MAX },
        "With enable.parallel.rebalance, the smallest backlog (log end minus committed offset, in records) that gets a recovery stream.",
    ),
    key(
        "learner.max.warmup.partitions",
        Some("0"),
        Consumer,
        Int { min: 0, max: i32::MAX as i64 },
        "learner-sticky: at most this many partitions warming up for this member at once (as KIP-441's max.warmup.replicas); the others stay with their owners and follow as earlier ones move. 0: no limit.",
    ),
    key(
        "exclude.internal.topics",
        Some("true"),
        Consumer,
        Bool,
        "Pattern subscriptions never match internal topics such as __consumer_offsets.",
    ),
    key(
        "allow.auto.create.topics",
        Some("false"),
        Consumer,
        Restricted {
            known: &["true", "false"],
            accepted: &["false"],
            why: "lagless never creates topics; only `false` is accepted",
        },
        "Accepted for compatibility; lagless never creates topics, so only false.",
    ),
    key(
        "internal.leave.group.on.close",
        Some("true"),
        Consumer,
        Bool,
        "Send LeaveGroup on close so the group rebalances at once rather than after session.timeout.ms.",
    ),
    key(
        "group.protocol",
        Some("classic"),
        Consumer,
        Restricted {
            known: &["classic", "consumer"],
            accepted: &["classic"],
            why: "only the classic group protocol is supported (not the KIP-848 `consumer` protocol)",
        },
        "Group membership protocol; only classic is supported.",
    ),
    // Producer.
    key(
        "acks",
        Some("all"),
        Producer,
        OneOf(&["all", "-1", "0", "1"]),
        "Replicas that must have a record before it counts as sent: all (-1), 1 (the leader) or 0 (none).",
    ),
    key(
        "linger.ms",
        Some("5"),
        Producer,
        Ms { min: 0, max: i64::MAX },
        "How long to wait for more records to fill a batch before sending it.",
    ),
    key(
        "batch.size",
        Some("16384"),
        Producer,
        Int { min: 0, max: I32_MAX },
        "Most bytes in one batch for one partition.",
    ),
    key(
        "compression.type",
        Some("none"),
        Producer,
        OneOf(&["none", "gzip", "snappy", "lz4", "zstd"]),
        "Codec for record batches: none, gzip, snappy, lz4 or zstd.",
    ),
    key(
        "max.request.size",
        Some("1048576"),
        Producer,
        Int { min: 1, max: I32_MAX },
        "Most bytes in one produce request, and so the largest record.",
    ),
    key(
        "delivery.timeout.ms",
        Some("120000"),
        Producer,
        Ms { min: 0, max: I32_MAX },
        "Time from send to success or failure, retries included; at least linger.ms + request.timeout.ms.",
    ),
    key(
        "buffer.memory",
        Some("33554432"),
        Producer,
        Int { min: 0, max: i64::MAX },
        "Most bytes of records waiting to be sent; send blocks above it.",
    ),
    key(
        "partitioner.ignore.keys",
        Some("false"),
        Producer,
        Bool,
        "Spread records over partitions without hashing their keys.",
    ),
    key(
        "max.in.flight.requests.per.connection",
        Some("5"),
        Producer,
        Int { min: 1, max: I32_MAX },
        "Most unanswered produce requests per broker connection.",
    ),
    key(
        "enable.idempotence",
        Some("false"),
        Producer,
        Restricted {
            known: &["true", "false"],
            accepted: &["false"],
            why: "idempotent production is not supported yet; only `false` is accepted",
        },
        "Idempotent production is not supported yet, so only false.",
    ),
];

/// Every key lagless accepts, common first, then consumer, then producer.
pub fn keys() -> &'static [KeyInfo] {
    KEYS
}

/// The table row of a key, if lagless knows it.
pub fn key_info(name: &str) -> Option<&'static KeyInfo> {
    KEYS.iter().find(|k| k.name == name)
}

impl Kind {
    fn describe(&self) -> String {
        match self {
            Str => "a string".to_string(),
            NonEmpty => "a non-empty string".to_string(),
            Int { min, max } => format!("an integer from {min} to {max}"),
            Ms { min, max } => format!("an integer number of milliseconds from {min} to {max}"),
            Bool => "`true` or `false`".to_string(),
            OneOf(words) => format!("one of {}", quoted(words)),
            Restricted { known, .. } => format!("one of {}", quoted(known)),
            HostPorts => "a comma-separated list of host:port".to_string(),
            Assignors => format!(
                "a comma-separated list of assignors from {}",
                quoted(&ASSIGNORS.iter().map(|(n, _)| *n).collect::<Vec<_>>())
            ),
            InstanceId => "1 to 249 characters from a-z, A-Z, 0-9, `.`, `_` and `-`".to_string(),
        }
    }

    /// Checks a (trimmed) value. The error is the whole message, naming `name`.
    fn check(&self, name: &str, value: &str) -> std::result::Result<(), String> {
        let bad = || format!("`{name}` must be {}, got `{value}`", self.describe());
        match self {
            Str => Ok(()),
            // An empty group.id is not "no group": the broker refuses it as INVALID_GROUP_ID,
            // a fatal error far from the line that caused it.
            NonEmpty if value.is_empty() => Err(bad()),
            NonEmpty => Ok(()),
            Int { min, max } | Ms { min, max } => match value.parse::<i64>() {
                Ok(n) if (*min..=*max).contains(&n) => Ok(()),
                _ => Err(bad()),
            },
            Bool => parse_bool(value).map(|_| ()).ok_or_else(bad),
            OneOf(words) => {
                if words.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                    Ok(())
                } else {
                    Err(bad())
                }
            }
            Restricted {
                known,
                accepted,
                why,
            } => {
                if accepted.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                    Ok(())
                } else if known.iter().any(|w| w.eq_ignore_ascii_case(value)) {
                    Err(format!("`{name}` = `{value}`: {why}"))
                } else {
                    Err(bad())
                }
            }
            HostPorts => parse_host_ports(value)
                .map(|_| ())
                .map_err(|why| format!("`{name}` must be {}: {why}", self.describe())),
            Assignors => parse_assignors(value)
                .map(|_| ())
                .map_err(|why| format!("`{name}` must be {}: {why}", self.describe())),
            InstanceId => {
                // The broker's rule for group.instance.id (the same as for topic names); checking
                // it here turns a JoinGroup failure at run time into an error at configuration.
                let legal = value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
                if !value.is_empty() && value.len() <= 249 && legal {
                    Ok(())
                } else {
                    Err(bad())
                }
            }
        }
    }
}

fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_bool(value: &str) -> Option<bool> {
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Splits a comma-separated list, trimming entries and skipping empty ones, as the Java client
/// does for `bootstrap.servers` (so a trailing comma is harmless).
fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn parse_host_ports(value: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for entry in split_list(value) {
        let Some((host, port)) = entry.rsplit_once(':') else {
            return Err(format!("`{entry}` has no port"));
        };
        // An IPv6 address is written in brackets so its colons are not taken for the port's.
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if bare.is_empty() {
            return Err(format!("`{entry}` has no host"));
        }
        if bare.chars().any(char::is_whitespace) {
            return Err(format!("`{entry}` has a space in its host"));
        }
        match port.parse::<u16>() {
            Ok(p) if p >= 1 => {}
            _ => return Err(format!("`{entry}` has port `{port}`, not 1 to 65535")),
        }
        out.push(entry.to_string());
    }
    if out.is_empty() {
        return Err("the list is empty".to_string());
    }
    Ok(out)
}

/// Assignor names, normalised to the protocol names lagless speaks ("range", ...).
fn parse_assignors(value: &str) -> std::result::Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for entry in split_list(value) {
        let name = ASSIGNORS
            .iter()
            .find(|(short, class)| short.eq_ignore_ascii_case(entry) || *class == entry)
            .map(|(short, _)| *short)
            .ok_or_else(|| format!("`{entry}` is not a known assignor"))?;
        // Two entries for one assignor would offer one protocol twice in JoinGroup.
        if out.iter().any(|n| n == name) {
            return Err(format!("`{name}` is listed twice"));
        }
        out.push(name.to_string());
    }
    if out.is_empty() {
        return Err("the list is empty".to_string());
    }
    Ok(out)
}

/// The optimal-string-alignment (restricted Damerau-Levenshtein) distance: a transposed pair of
/// letters, the most common typo, counts as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between the first i chars of a and the first j of b.
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The known key closest to an unknown one, if it is close enough to be a likely typo.
fn closest_key(name: &str) -> Option<&'static str> {
    let (best, distance) = KEYS
        .iter()
        .map(|k| (k.name, edit_distance(name, k.name)))
        .min_by_key(|(_, d)| *d)?;
    // Up to three edits, and fewer than half the name: beyond that the "suggestion" is noise.
    (distance <= 3 && distance * 2 < name.chars().count()).then_some(best)
}

fn unknown_key(name: &str) -> Error {
    let message = match closest_key(name) {
        Some(k) => format!("unknown configuration key `{name}`; did you mean `{k}`?"),
        None => format!("unknown configuration key `{name}`"),
    };
    Error::config(name, message)
}

fn lookup(name: &str) -> Result<&'static KeyInfo> {
    key_info(name).ok_or_else(|| unknown_key(name))
}

const HIDDEN: &str = "[hidden]";

/// Raw string settings, validated as they are set.
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
    pub(crate) fn set_with_prefixes(&self, prefixes: &[&str]) -> Vec<(String, String)> {
        self.values
            .iter()
            .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
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

/// Where a consumer starts when it has no valid committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
    /// Report [`Error::NoOffset`].
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadUncommitted,
    ReadCommitted,
}

/// Settings of both consumers and producers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonConfig {
    /// `host:port` entries, as written.
    pub bootstrap_servers: Vec<String>,
    pub client_id: String,
    /// `None` when `client.rack` is empty.
    pub client_rack: Option<String>,
    pub request_timeout: Duration,
    pub default_api_timeout: Duration,
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    pub reconnect_backoff: Duration,
    pub reconnect_backoff_max: Duration,
    pub socket_connection_setup_timeout: Duration,
    pub metadata_max_age: Duration,
    /// Zero: report a partition at its first failure.
    pub task_timeout: Duration,
    /// `security.protocol` with its TLS setup and SASL credentials.
    pub security: Security,
}

impl CommonConfig {
    /// The common settings of a config; requires `bootstrap.servers`.
    pub fn from_config(c: &Config) -> Result<Self> {
        let servers = c.required("bootstrap.servers")?;
        let bootstrap_servers =
            parse_host_ports(servers).map_err(|m| Error::config("bootstrap.servers", m))?;
        let client_rack = c.string("client.rack")?.filter(|r| !r.is_empty());
        Ok(CommonConfig {
            bootstrap_servers,
            client_id: c.string("client.id")?.unwrap_or_default(),
            client_rack,
            request_timeout: c.ms("request.timeout.ms")?,
            default_api_timeout: c.ms("default.api.timeout.ms")?,
            retry_backoff: c.ms("retry.backoff.ms")?,
            retry_backoff_max: c.ms("retry.backoff.max.ms")?,
            reconnect_backoff: c.ms("reconnect.backoff.ms")?,
            reconnect_backoff_max: c.ms("reconnect.backoff.max.ms")?,
            socket_connection_setup_timeout: c.ms("socket.connection.setup.timeout.ms")?,
            metadata_max_age: c.ms("metadata.max.age.ms")?,
            task_timeout: c.ms("task.timeout.ms")?,
            security: Security::from_config(c)?,
        })
    }
}

/// A consumer's typed settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub common: CommonConfig,
    pub group_id: Option<String>,
    pub group_instance_id: Option<String>,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub max_poll_interval: Duration,
    pub max_poll_records: usize,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub auto_offset_reset: AutoOffsetReset,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait: Duration,
    pub max_partition_fetch_bytes: i32,
    pub fetch_buffer_max_bytes: usize,
    pub check_crcs: bool,
    pub isolation_level: IsolationLevel,
    /// Protocol names (`range`, `roundrobin`, `cooperative-sticky`), preferred first.
    pub partition_assignment_strategy: Vec<String>,
    pub enable_parallel_rebalance: bool,
    pub parallel_rebalance_min_lag: i64,
    /// learner-sticky: most partitions warming up for this member at once (0: no limit).
    pub learner_max_warmup_partitions: u32,
    pub exclude_internal_topics: bool,
    pub leave_group_on_close: bool,
}

impl ConsumerConfig {
    /// The consumer settings of a config, checked against each other.
    pub fn from_config(c: &Config) -> Result<Self> {
        c.reject_scope(Scope::Producer, "producer")?;
        let common = CommonConfig::from_config(c)?;
        let group_id = c.string("group.id")?;
        let group_instance_id = c.string("group.instance.id")?;

        let auto_offset_reset = match c.lower("auto.offset.reset")?.as_str() {
            "earliest" => AutoOffsetReset::Earliest,
            "latest" => AutoOffsetReset::Latest,
            _ => AutoOffsetReset::None,
        };
        let isolation_level = match c.lower("isolation.level")?.as_str() {
            "read_committed" => IsolationLevel::ReadCommitted,
            _ => IsolationLevel::ReadUncommitted,
        };
        // Accepted by `set` because it is a valid Kafka value, refused here because lagless would
        // otherwise return aborted transactional records to a user who asked not to see them.
        if isolation_level == IsolationLevel::ReadCommitted {
            return Err(Error::config(
                "isolation.level",
                "read_committed is not supported yet",
            ));
        }
        let partition_assignment_strategy =
            parse_assignors(c.required("partition.assignment.strategy")?)
                .map_err(|m| Error::config("partition.assignment.strategy", m))?;

        let mut enable_auto_commit = c.bool("enable.auto.commit")?;
        // As the Java client: without a group there is nowhere to commit, so auto-commit is off
        // unless the user asked for it explicitly, which is a contradiction.
        if group_id.is_none() {
            if c.is_set("enable.auto.commit") && enable_auto_commit {
                return Err(Error::config(
                    "enable.auto.commit",
                    "`enable.auto.commit` cannot be true without `group.id`",
                ));
            }
            enable_auto_commit = false;
        }
        if group_instance_id.is_some() && group_id.is_none() {
            return Err(Error::config(
                "group.instance.id",
                "`group.instance.id` requires `group.id`",
            ));
        }

        let session_timeout = c.ms("session.timeout.ms")?;
        let heartbeat_interval = c.ms("heartbeat.interval.ms")?;
        // A member whose heartbeats are as far apart as the session timeout is dropped between
        // two of them.
        if heartbeat_interval >= session_timeout {
            return Err(Error::config(
                "heartbeat.interval.ms",
                format!(
                    "`heartbeat.interval.ms` ({}) must be lower than `session.timeout.ms` ({})",
                    heartbeat_interval.as_millis(),
                    session_timeout.as_millis()
                ),
            ));
        }

        Ok(ConsumerConfig {
            common,
            group_id,
            group_instance_id,
            session_timeout,
            heartbeat_interval,
            max_poll_interval: c.ms("max.poll.interval.ms")?,
            max_poll_records: c.size("max.poll.records")?,
            enable_auto_commit,
            auto_commit_interval: c.ms("auto.commit.interval.ms")?,
            auto_offset_reset,
            fetch_min_bytes: c.int32("fetch.min.bytes")?,
            fetch_max_bytes: c.int32("fetch.max.bytes")?,
            fetch_max_wait: c.ms("fetch.max.wait.ms")?,
            max_partition_fetch_bytes: c.int32("max.partition.fetch.bytes")?,
            fetch_buffer_max_bytes: c.size("fetch.buffer.max.bytes")?,
            check_crcs: c.bool("check.crcs")?,
            isolation_level,
            partition_assignment_strategy,
            enable_parallel_rebalance: c.bool("enable.parallel.rebalance")?,
            parallel_rebalance_min_lag: c.int("parallel.rebalance.min.lag")?,
            // The key's range is 0..=i32::MAX, so this never saturates.
            learner_max_warmup_partitions: c.int32("learner.max.warmup.partitions")?.max(0) as u32,
            exclude_internal_topics: c.bool("exclude.internal.topics")?,
            leave_group_on_close: c.bool("internal.leave.group.on.close")?,
        })
    }
}

/// A producer's typed settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    pub common: CommonConfig,
    /// -1 for all replicas.
    pub acks: i16,
    pub linger: Duration,
    pub batch_size: usize,
    /// One of `none`, `gzip`, `snappy`, `lz4`, `zstd`.
    pub compression_type: String,
    pub max_request_size: usize,
    pub delivery_timeout: Duration,
    pub buffer_memory: usize,
    pub partitioner_ignore_keys: bool,
    pub max_in_flight_requests_per_connection: usize,
}

impl ProducerConfig {
    /// The producer settings of a config, checked against each other.
    pub fn from_config(c: &Config) -> Result<Self> {
        c.reject_scope(Scope::Consumer, "consumer")?;
        let common = CommonConfig::from_config(c)?;
        let acks = match c.lower("acks")?.as_str() {
            "0" => 0,
            "1" => 1,
            _ => -1,
        };
        let linger = c.ms("linger.ms")?;
        let mut delivery_timeout = c.ms("delivery.timeout.ms")?;
        // As the Java client: a record must get at least one full attempt after lingering. If the
        // user chose a shorter delivery timeout that is an error; if the default is shorter (a
        // raised linger or request timeout), the default grows to fit.
        let minimum = linger.saturating_add(common.request_timeout);
        if delivery_timeout < minimum {
            if c.is_set("delivery.timeout.ms") {
                return Err(Error::config(
                    "delivery.timeout.ms",
                    format!(
                        "`delivery.timeout.ms` ({}) must be at least `linger.ms` + `request.timeout.ms` ({})",
                        delivery_timeout.as_millis(),
                        minimum.as_millis()
                    ),
                ));
            }
            delivery_timeout = minimum;
        }
        Ok(ProducerConfig {
            common,
            acks,
            linger,
            batch_size: c.size("batch.size")?,
            compression_type: c.lower("compression.type")?,
            max_request_size: c.size("max.request.size")?,
            delivery_timeout,
            buffer_memory: c.size("buffer.memory")?,
            partitioner_ignore_keys: c.bool("partitioner.ignore.keys")?,
            max_in_flight_requests_per_connection: c
                .size("max.in.flight.requests.per.connection")?,
        })
    }
}

#[cfg(test)]
mod tests {
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
        let (_, m) = set_err("group.protocol", "consumer");
        assert!(m.contains("only the classic group protocol"), "{m}");
        let (_, m) = set_err("enable.idempotence", "true");
        assert!(m.contains("not supported yet"), "{m}");

        // read_committed is a valid Kafka value, so `set` takes it; the consumer refuses it.
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("isolation.level", "read_committed"),
        ]);
        let (key, m) = config_err(ConsumerConfig::from_config(&c).unwrap_err());
        assert_eq!(key, "isolation.level");
        assert_eq!(m, "read_committed is not supported yet");
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
    fn producer_settings_and_delivery_timeout() {
        let c = config(&[
            ("bootstrap.servers", "b:1"),
            ("acks", "1"),
            ("compression.type", "ZSTD"),
        ]);
        let p = ProducerConfig::from_config(&c).unwrap();
        assert_eq!(p.acks, 1);
        assert_eq!(p.compression_type, "zstd");
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

//! The key table: for each key lagless honours, its Java client name, its default, its scope,
//! the form its value must take and a one-line doc, with the checks of those forms and the
//! "did you mean" of an unknown key.
use super::*;

/// Which clients a key applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Consumers and producers.
    Common,
    /// Consumers only; a producer refuses the key.
    Consumer,
    /// Producers only; a consumer refuses the key.
    Producer,
}

/// The form a key's value must take. Every value, defaults included, goes through the same check,
/// so a typed config never sees a string that did not pass it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// Any string.
    Str,
    /// Any string but the empty one.
    NonEmpty,
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// An integer number of milliseconds in `min..=max`.
    Ms { min: i64, max: i64 },
    /// `0` (off) or an integer number of milliseconds in `min..=max`: an interval where a tiny
    /// value would only burn the poll thread.
    OffOrMs { min: i64, max: i64 },
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
    /// Which clients accept the key.
    pub scope: Scope,
    /// One line for the docs.
    pub doc: &'static str,
    /// The value is a secret: [`Config::dump`] and `Debug` hide it.
    pub sensitive: bool,
    pub(super) kind: Kind,
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

pub(super) const I32_MAX: i64 = i32::MAX as i64;

// Built with a `const fn` so each table row stays one readable call.
pub(super) const fn key(
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
pub(super) const fn secret(
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

// Most TLS and SASL keys have one shape: no default, for consumers and producers alike, any
// string (files, PEM text, names); their checks come when the settings meet (`security`).
pub(super) const fn tls_sasl_key(name: &'static str, doc: &'static str) -> KeyInfo {
    key(name, None, Scope::Common, Kind::Str, doc)
}

// The same for one whose value is a secret (a password, a private key, a JAAS line).
pub(super) const fn tls_sasl_secret(name: &'static str, doc: &'static str) -> KeyInfo {
    secret(name, None, Scope::Common, Kind::Str, doc)
}

use Kind::*;
use Scope::*;

/// The table. Order is the order of the docs and of [`Config::dump`]: common keys, then consumer,
/// then producer.
pub(super) static KEYS: &[KeyInfo] = &[
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
    tls_sasl_key("ssl.ca.location", "File (or directory) of PEM CA certificates that sign the brokers' certificates; without it (and ssl.ca.pem, ssl.truststore.*) the system's CAs are trusted."),
    tls_sasl_key("ssl.ca.pem", "PEM CA certificates, inline, as ssl.ca.location."),
    tls_sasl_key("ssl.certificate.location", "File of the client's PEM certificate (chain) for mutual TLS, with ssl.key.location."),
    tls_sasl_key("ssl.certificate.pem", "The client's PEM certificate (chain), inline, as ssl.certificate.location."),
    tls_sasl_key("ssl.key.location", "File of the client's PEM private key (PKCS#8, encrypted with ssl.key.password or not; PKCS#1; SEC1)."),
    tls_sasl_secret("ssl.key.pem", "The client's PEM private key, inline, as ssl.key.location."),
    tls_sasl_secret("ssl.key.password", "Password of an encrypted PKCS#8 client key (ssl.key.location, ssl.key.pem, ssl.keystore.key)."),
    key(
        "ssl.endpoint.identification.algorithm",
        Some("https"),
        Common,
        OneOf(&["https", "none", ""]),
        "https: a broker's certificate must carry the host lagless connects to; none (or empty) skips that check, not the others.",
    ),
    tls_sasl_key("ssl.keystore.location", "Client key and certificate store for mutual TLS: PKCS#12 (with ssl.keystore.password) or PEM (ssl.keystore.type)."),
    tls_sasl_secret("ssl.keystore.password", "Password of the PKCS#12 store of ssl.keystore.location."),
    key(
        "ssl.keystore.type",
        None,
        Common,
        Restricted {
            known: &["PKCS12", "PEM", "JKS"],
            accepted: &["PKCS12", "PEM"],
            why: crate::security::JKS_HINT,
        },
        "PKCS12 or PEM; unset, it is read from the file (JKS is refused with how to convert it).",
    ),
    tls_sasl_secret("ssl.keystore.key", "The client's PEM private key, inline (Java's name for ssl.key.pem)."),
    tls_sasl_key("ssl.keystore.certificate.chain", "The client's PEM certificate chain, inline (Java's name for ssl.certificate.pem)."),
    key(
        "ssl.truststore.type",
        None,
        Common,
        Restricted {
            known: &["PKCS12", "PEM", "JKS"],
            accepted: &["PKCS12", "PEM"],
            why: crate::security::JKS_HINT,
        },
        "PEM or PKCS12; unset, it is read from the file (JKS is refused with how to convert it).",
    ),
    tls_sasl_key("ssl.truststore.location", "File of trusted CA certificates, PEM or PKCS#12 (Java's name for ssl.ca.location)."),
    tls_sasl_secret("ssl.truststore.password", "Password of a PKCS#12 ssl.truststore.location."),
    tls_sasl_key("ssl.truststore.certificates", "PEM CA certificates, inline (Java's name for ssl.ca.pem)."),
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
    tls_sasl_key("sasl.username", "User name for PLAIN and SCRAM."),
    tls_sasl_secret("sasl.password", "Password for PLAIN and SCRAM."),
    tls_sasl_secret("sasl.jaas.config", "Java's login module line (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule) with the credentials."),
    key(
        "sasl.oauthbearer.method",
        Some("default"),
        Common,
        OneOf(&["default", "oidc"]),
        "OAUTHBEARER tokens: default (the application's token provider, else unsecured tokens from sasl.oauthbearer.config) or oidc (client credentials from sasl.oauthbearer.token.endpoint.url; setting that URL alone means oidc too, as in the Java client).",
    ),
    tls_sasl_secret("sasl.oauthbearer.config", "Unsecured OAUTHBEARER tokens, for testing: `principal=<name> [scope=<s>] [lifeSeconds=<n>]`."),
    tls_sasl_key("sasl.oauthbearer.token.endpoint.url", "OIDC token endpoint for sasl.oauthbearer.method=oidc."),
    tls_sasl_key("sasl.oauthbearer.client.id", "OIDC client id for sasl.oauthbearer.method=oidc."),
    tls_sasl_secret("sasl.oauthbearer.client.secret", "OIDC client secret for sasl.oauthbearer.method=oidc."),
    tls_sasl_key("sasl.oauthbearer.scope", "Scope requested from the OIDC token endpoint."),
    tls_sasl_key("sasl.oauthbearer.extensions", "SASL extensions sent with OAUTHBEARER tokens (KIP-342), as key=value,key=value."),
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
        "Most bytes the fetch path holds in memory: fetched records waiting for poll() (with the answers and inflated batches they are slices of, until their last record is dropped), answers in flight, and buffers kept for reuse. Prefetching waits above it; a fetch still goes when poll() would otherwise wait for nothing (the broker returns at least one batch).",
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
        "read_uncommitted (the default, as the Java client's) returns every record, aborted transactions' too; read_committed returns only records below the last stable offset, leaving out those of aborted transactions, and end offsets (end_offsets, watermarks, seek_to_end, auto.offset.reset=latest) are last stable offsets. Transaction markers are never returned.",
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
        "parallel.rebalance.recovery.poll",
        Some("false"),
        Consumer,
        Bool,
        "With enable.parallel.rebalance, process the backlog on a thread of its own: poll() returns main-stream records only and the recovery stream's come from recovery_poll(), called from a second thread (the blocking consumer, the C ABI's lagless_consumer_recovery_poll, Python's Consumer.recovery_poll; the async consumers refuse it). A batch recovery_poll() returned counts as processed, for every commit, once the same thread calls recovery_poll() again; until then commits hold at the batch's first record, and a partition revoked meanwhile gives them to its next owner again.",
    ),
    key(
        "learner.max.warmup.partitions",
        Some("0"),
        Consumer,
        Int { min: 0, max: i32::MAX as i64 },
        "learner-sticky: at most this many partitions warming up for this member at once (as KIP-441's max.warmup.replicas); the others stay with their owners and follow as earlier ones move. 0: no limit.",
    ),
    key(
        "learner.readiness",
        Some("callback"),
        Consumer,
        OneOf(&["callback", "explicit"]),
        "learner-sticky: when a learned partition is ready to move here. callback: when on_partitions_learning returns without an error. explicit: only when the application calls learner_ready() for it, from any thread, so a warm-up may run on its own thread or task while poll() goes on serving the partitions owned.",
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
        OneOf(&["classic", "consumer"]),
        "Group membership protocol: classic (JoinGroup/SyncGroup, client-side assignors) or consumer (KIP-848: the coordinator assigns, rebalances are incremental per member, ConsumerGroupHeartbeat). With consumer, partition.assignment.strategy, session.timeout.ms and heartbeat.interval.ms are the broker's (group.consumer.*) and refused here, as the Java client refuses them.",
    ),
    key(
        "enable.metrics.push",
        Some("true"),
        Common,
        Bool,
        "KIP-714: push the client's metrics (a consumer's or a producer's) to a broker whose client-metrics subscription asks for them (GetTelemetrySubscriptions, PushTelemetry); false sends no telemetry request.",
    ),
    key(
        "statistics.interval.ms",
        Some("0"),
        Consumer,
        OffOrMs { min: 10, max: 86_400_000 },
        "How often the statistics callback receives the metrics snapshot (JSON in C and Python), from poll() on the polling thread; 0 turns statistics off (librdkafka's statistics.interval.ms).",
    ),
    key(
        "group.remote.assignor",
        None,
        Consumer,
        NonEmpty,
        "With group.protocol=consumer: the broker-side assignor to ask for (uniform or range on Kafka 4.x); unset lets the broker choose (group.consumer.assignors, uniform first).",
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
        "Most bytes in one batch for one partition; 0 disables batching (a batch per record).",
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
        Some("true"),
        Producer,
        Bool,
        "Write each record exactly once per partition, in order, whatever the retries (a producer id and per-partition sequence numbers the broker checks). Needs acks=all and max.in.flight.requests.per.connection <= 5; left unset, a config with other acks or more in flight turns it off, as the Java client does.",
    ),
    key(
        "transactional.id",
        None,
        Producer,
        NonEmpty,
        "Makes the producer transactional: init_transactions, begin/commit/abort_transaction, send_offsets_to_transaction. A later producer with the same id fences this one and aborts its open transaction. Implies enable.idempotence.",
    ),
    key(
        "transaction.timeout.ms",
        Some("60000"),
        Producer,
        Ms { min: 1, max: I32_MAX },
        "How long the transaction coordinator lets a transaction stay open before it aborts it (the broker caps it at transaction.max.timeout.ms).",
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
    pub(super) fn describe(&self) -> String {
        match self {
            Str => "a string".to_string(),
            NonEmpty => "a non-empty string".to_string(),
            Int { min, max } => format!("an integer from {min} to {max}"),
            Ms { min, max } => format!("an integer number of milliseconds from {min} to {max}"),
            OffOrMs { min, max } => {
                format!("0 (off) or an integer number of milliseconds from {min} to {max}")
            }
            Bool => "`true` or `false`".to_string(),
            OneOf(words) => format!("one of {}", quoted(words)),
            Restricted { known, .. } => format!("one of {}", quoted(known)),
            HostPorts => "a comma-separated list of host:port".to_string(),
            Assignors => format!(
                "a comma-separated list of assignors from {}",
                quoted(&KNOWN_ASSIGNORS.iter().map(|(n, _)| *n).collect::<Vec<_>>())
            ),
            InstanceId => "1 to 249 characters from a-z, A-Z, 0-9, `.`, `_` and `-`".to_string(),
        }
    }

    /// Checks a (trimmed) value. The error is the whole message, naming `name`.
    pub(super) fn check(&self, name: &str, value: &str) -> std::result::Result<(), String> {
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
            OffOrMs { min, max } => match value.parse::<i64>() {
                Ok(n) if n == 0 || (*min..=*max).contains(&n) => Ok(()),
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

pub(super) fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn parse_bool(value: &str) -> Option<bool> {
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
pub(super) fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

pub(super) fn parse_host_ports(value: &str) -> std::result::Result<Vec<String>, String> {
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

/// The assignors a consumer may name in `partition.assignment.strategy`: the protocol name
/// spoken in JoinGroup, and the Java class name users copy from Java configs (none for
/// learner-sticky, which is lagless only). Plain data, so that checking a config needs nothing
/// of the group layer, which implements each of them (`group::assignor::ASSIGNORS`; a test
/// keeps the two lists equal).
pub(crate) const KNOWN_ASSIGNORS: &[(&str, Option<&str>)] = &[
    (
        "range",
        Some("org.apache.kafka.clients.consumer.RangeAssignor"),
    ),
    (
        "roundrobin",
        Some("org.apache.kafka.clients.consumer.RoundRobinAssignor"),
    ),
    (
        "cooperative-sticky",
        Some("org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
    ),
    ("learner-sticky", None),
];

/// The protocol name a configured assignor name means: a protocol name in any case, or the
/// exact Java class name (so Java configurations can be reused as they are).
fn known_assignor(name: &str) -> Option<&'static str> {
    let name = name.trim();
    KNOWN_ASSIGNORS
        .iter()
        .find(|(n, java_class)| n.eq_ignore_ascii_case(name) || *java_class == Some(name))
        .map(|(n, _)| *n)
}

/// Assignor names, normalised to the protocol names lagless speaks ("range", ...).
pub(super) fn parse_assignors(value: &str) -> std::result::Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for entry in split_list(value) {
        let name =
            known_assignor(entry).ok_or_else(|| format!("`{entry}` is not a known assignor"))?;
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
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
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
pub(super) fn closest_key(name: &str) -> Option<&'static str> {
    let (best, distance) = KEYS
        .iter()
        .map(|k| (k.name, edit_distance(name, k.name)))
        .min_by_key(|(_, d)| *d)?;
    // Up to three edits, and fewer than half the name: beyond that the "suggestion" is noise.
    (distance <= 3 && distance * 2 < name.chars().count()).then_some(best)
}

pub(super) fn unknown_key(name: &str) -> Error {
    let message = match closest_key(name) {
        Some(k) => format!("unknown configuration key `{name}`; did you mean `{k}`?"),
        None => format!("unknown configuration key `{name}`"),
    };
    Error::config(name, message)
}

pub(super) fn lookup(name: &str) -> Result<&'static KeyInfo> {
    key_info(name).ok_or_else(|| unknown_key(name))
}

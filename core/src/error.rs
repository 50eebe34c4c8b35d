//! The one error type of lagless, and the table that says what a consumer does with each Kafka
//! error code (retry, refresh metadata, rediscover the coordinator, rejoin, or give up).
//!
//! Every error has a kind ([`ErrorKind`], from one table below: stable number, name, whether it
//! is retriable or fatal) that the C ABI (`LAGLESS_ERR_*`) and the Python exception classes map
//! once each, and the answers to "can I try again?" ([`Error::is_retriable`]) and "is this
//! client done?" ([`Error::is_fatal`]). Errors that come from a broker keep the broker's error
//! code.
use std::fmt;

/// Whether every error of a kind is retriable (or fatal), none is, or the broker's error code
/// decides (through [`kafka_error_action`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Yes,
    No,
    ByKafkaCode,
}

/// Builds [`ErrorKind`] and its lookups from the table of kinds, so that a kind is one line.
macro_rules! error_kinds {
    ($($(#[$doc:meta])* $kind:ident = $code:literal, $name:literal,
        retriable: $retriable:ident, fatal: $fatal:ident;)*) => {
        /// The kind of an [`Error`]. Its [`code`](ErrorKind::code) is a stable ABI: the C
        /// constants `LAGLESS_ERR_<name>` and the Python exception classes carry it, so a kind is
        /// never renumbered and a number never reused.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[$doc])* $kind = $code,)*
        }

        impl ErrorKind {
            /// Every kind, in the order of their codes; the C and Python layers test that they
            /// map each one.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind),*];

            /// The stable number of the kind, the same in Rust, C (`LAGLESS_ERR_*`) and Python
            /// (`LaglessError.code`).
            pub const fn code(self) -> i32 {
                self as i32
            }

            /// The upper-case name of the kind ("CONFIG", "KAFKA"): the C constant is
            /// `LAGLESS_ERR_` followed by it, and the Python class says it as `kind`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => $name,)*
                }
            }

            fn retriable(self) -> Verdict {
                match self {
                    $(ErrorKind::$kind => Verdict::$retriable,)*
                }
            }

            fn fatal(self) -> Verdict {
                match self {
                    $(ErrorKind::$kind => Verdict::$fatal,)*
                }
            }
        }
    };
}

error_kinds! {
    /// [`Error::Config`]
    Config = 1, "CONFIG", retriable: No, fatal: No;
    /// [`Error::InvalidArgument`]
    InvalidArgument = 2, "INVALID_ARGUMENT", retriable: No, fatal: No;
    /// [`Error::Kafka`]: the broker's error code decides what it is.
    Kafka = 3, "KAFKA", retriable: ByKafkaCode, fatal: ByKafkaCode;
    /// [`Error::Timeout`]
    Timeout = 4, "TIMEOUT", retriable: Yes, fatal: No;
    /// [`Error::Transport`]
    Transport = 5, "TRANSPORT", retriable: Yes, fatal: No;
    /// [`Error::Corrupt`]
    Corrupt = 6, "CORRUPT", retriable: No, fatal: No;
    /// [`Error::UnknownTopic`]
    UnknownTopic = 7, "UNKNOWN_TOPIC", retriable: No, fatal: No;
    /// [`Error::NoOffset`]
    NoOffset = 8, "NO_OFFSET", retriable: No, fatal: No;
    /// [`Error::PartitionStuck`]
    PartitionStuck = 9, "PARTITION_STUCK", retriable: Yes, fatal: No;
    /// [`Error::CommitFailed`]
    CommitFailed = 10, "COMMIT_FAILED", retriable: No, fatal: No;
    /// [`Error::Wakeup`]
    Wakeup = 11, "WAKEUP", retriable: Yes, fatal: No;
    /// [`Error::Closed`]
    Closed = 12, "CLOSED", retriable: No, fatal: Yes;
    /// [`Error::Callback`]
    Callback = 13, "CALLBACK", retriable: No, fatal: No;
    /// [`Error::IllegalState`]
    IllegalState = 14, "ILLEGAL_STATE", retriable: No, fatal: No;
    /// [`Error::Authentication`]
    Authentication = 15, "AUTHENTICATION", retriable: No, fatal: Yes;
    /// [`Error::Tls`]
    Tls = 16, "SSL", retriable: No, fatal: Yes;
    /// [`Error::LogTruncation`]
    LogTruncation = 17, "LOG_TRUNCATION", retriable: No, fatal: No;
    /// [`Error::TransactionAbortable`]
    TransactionAbortable = 18, "TRANSACTION_ABORTABLE", retriable: No, fatal: No;
}

impl ErrorKind {
    /// The kind with stable number `code`, if there is one.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.code() == code)
    }
}

/// A topic and partition an error belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's id within the topic.
    pub partition: i32,
}

/// Everything that can go wrong in lagless.
///
/// Match the variant for its fields, or ask [`Error::kind`] (the same kinds as the C and Python
/// errors), [`Error::is_retriable`] and [`Error::is_fatal`]:
///
/// ```
/// use lagless::error::{codes, kafka_error_name};
/// use lagless::{Config, Error, ErrorKind, Producer};
///
/// // Nothing to connect to: refused before anything is sent.
/// let e = Producer::from_config(&Config::new()).err().expect("refused");
/// assert_eq!(e.kind(), ErrorKind::Config);
/// assert!(!e.is_retriable() && !e.is_fatal());
/// match &e {
///     Error::Config { key, .. } => assert_eq!(key, "bootstrap.servers"),
///     other => panic!("{other:?}"),
/// }
///
/// // A broker's error code keeps its number; Kafka's table says what it means.
/// let e = Error::kafka(codes::NOT_COORDINATOR, "OffsetCommit");
/// assert_eq!((e.kind(), e.kafka_code()), (ErrorKind::Kafka, Some(16)));
/// assert_eq!(kafka_error_name(16), "NOT_COORDINATOR");
/// assert!(e.is_retriable() && !e.is_fatal());
///
/// // The kind's number and name are what C (LAGLESS_ERR_SSL) and Python see.
/// assert_eq!(ErrorKind::Tls.name(), "SSL");
/// assert_eq!(ErrorKind::from_code(ErrorKind::Tls.code()), Some(ErrorKind::Tls));
/// assert!(Error::Tls("handshake failed".into()).is_fatal());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration key is unknown or its value is bad. `key` names it. Not retriable: fix
    /// the configuration.
    Config {
        /// The configuration key at fault (`fetch.min.bytes`), or the unknown key as written.
        key: String,
        /// What is wrong with it, naming the key and the expected form.
        message: String,
    },
    /// An argument to an API call is bad (e.g. an empty topic name, a negative offset). Not
    /// retriable: the same call fails the same way.
    InvalidArgument(String),
    /// A broker answered with an error code. Whether it is retriable or fatal depends on the
    /// code ([`kafka_error_action`]): e.g. `NOT_COORDINATOR` is retriable,
    /// `GROUP_AUTHORIZATION_FAILED` fatal, `OFFSET_METADATA_TOO_LARGE` neither.
    Kafka {
        /// The broker's error code (`6` for `NOT_LEADER_OR_FOLLOWER`); [`kafka_error_name`]
        /// gives Kafka's name for it.
        code: i16,
        /// What lagless was doing when the broker answered ("OffsetCommit", "fetch"); may be
        /// empty.
        context: String,
        /// The partition the code was answered for, when it was a per-partition error.
        partition: Option<ErrorPartition>,
        /// The answer ended the client although the code alone is not fatal: the request that
        /// got it cannot go on from any error it does not expect (a KIP-848 heartbeat, as the
        /// Java client's heartbeat manager ends the member on those). [`Error::is_fatal`] says
        /// so; the code keeps its own meaning elsewhere (a commit's `GROUP_ID_NOT_FOUND` is not).
        fatal: bool,
    },
    /// A deadline passed before the operation completed (a call's `timeout`,
    /// `default.api.timeout.ms`, `delivery.timeout.ms`). Retriable.
    Timeout(String),
    /// No connection could be made, or a connection broke. Retriable.
    Transport(String),
    /// Malformed data: from the wire (a frame, a record batch) or from another group member.
    /// Not retriable.
    Corrupt(String),
    /// The topic does not exist in the cluster; the string is its name. Not retriable (lagless
    /// never creates topics).
    UnknownTopic(String),
    /// `auto.offset.reset=none` and the partition has no committed offset (or its offset is out
    /// of range). Not retriable: seek the partition to an offset.
    NoOffset(ErrorPartition),
    /// A partition made no progress for `task.timeout.ms` (KIP-572). The consumer keeps serving
    /// the other partitions. Retriable.
    PartitionStuck {
        /// The partition that made no progress.
        partition: ErrorPartition,
        /// The last error the partition met, or what it was waiting for ("no answer from the
        /// broker for 300000 ms"); starts with `recovery stream:` for a recovery stream.
        cause: String,
    },
    /// A commit could not complete because the group rebalanced or this member left it. Not
    /// retriable: the partitions may have moved; commit again after the rebalance (or in
    /// `on_partitions_revoked`).
    CommitFailed(String),
    /// `wakeup()` was called. Retriable: the next call works normally.
    Wakeup,
    /// The client was closed. Fatal.
    Closed,
    /// A callback of the application failed: a rebalance listener's (the assignment change
    /// completed anyway) or the statistics callback. Not retriable.
    Callback(String),
    /// The caller is not in a state that allows the call (e.g. `commit` without a group). Not
    /// retriable.
    IllegalState(String),
    /// SASL authentication failed: wrong credentials, a mechanism the broker refuses, a broker
    /// that could not prove it knows the password (SCRAM), or no token to offer (OAUTHBEARER).
    /// Fatal: trying again with the same credentials fails the same way.
    Authentication(String),
    /// TLS failed: the broker's certificate is untrusted, expired or made out for another host,
    /// the broker refused lagless's client certificate, or one side speaks TLS and the other
    /// does not (`security.protocol` mismatches the listener). Fatal, as authentication.
    Tls(String),
    /// KIP-320: the partition's log was truncated below the consumer's position (a leader
    /// elected uncleanly lost records the consumer had read), and `auto.offset.reset` is `none`.
    /// The partition stops until the application seeks it (to `divergent_offset` to read what the
    /// log now holds from there); the other partitions keep flowing. With `earliest` or
    /// `latest`, the consumer resets to `divergent_offset` by itself instead (as the Java
    /// client does). Not retriable.
    LogTruncation {
        /// The partition whose log was truncated.
        partition: ErrorPartition,
        /// The consumer's position: the offset of the next record it would have returned.
        position: i64,
        /// Where the leader's log diverges from what the consumer read: the end offset of the
        /// last leader epoch both share. Records from it to `position` were delivered but are
        /// no longer in the log (other records may now stand at those offsets).
        divergent_offset: i64,
        /// That leader epoch.
        divergent_epoch: i32,
    },
    /// A transactional producer's transaction can not commit: a record of it or a request for
    /// it failed (the cause says which). Call `abort_transaction()`, then begin the next
    /// transaction; until then every call but abort fails with this. Not retriable, not fatal.
    /// (A producer fenced by a newer one with the same `transactional.id` gets the fatal
    /// broker error `PRODUCER_FENCED` instead: [`Error::is_producer_fenced`].)
    TransactionAbortable(String),
}

/// The result of every fallible lagless call.
pub type Result<T> = std::result::Result<T, Error>;

/// What a client does when a broker returns an error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing went wrong.
    None,
    /// Back off and try the same request again.
    Retry,
    /// The client's view of the cluster is stale: refresh metadata, then retry.
    RefreshMetadata,
    /// The group coordinator moved or is not ready: find it again, then retry.
    RediscoverCoordinator,
    /// The member's generation is no longer valid: join the group again.
    Rejoin,
    /// The client cannot go on with this request; report it.
    Fail,
    /// The client cannot go on at all (fenced, not authorized, misconfigured).
    Fatal,
}

/// (code, name, action) for each Kafka error code a consumer can meet. Names are Kafka's own.
const KAFKA_ERRORS: &[(i16, &str, Action)] = &[
    (-1, "UNKNOWN_SERVER_ERROR", Action::Fail),
    (0, "NONE", Action::None),
    (1, "OFFSET_OUT_OF_RANGE", Action::Fail),
    (2, "CORRUPT_MESSAGE", Action::Retry),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", Action::RefreshMetadata),
    (4, "INVALID_FETCH_SIZE", Action::Fail),
    (5, "LEADER_NOT_AVAILABLE", Action::RefreshMetadata),
    (6, "NOT_LEADER_OR_FOLLOWER", Action::RefreshMetadata),
    (7, "REQUEST_TIMED_OUT", Action::Retry),
    (8, "BROKER_NOT_AVAILABLE", Action::RefreshMetadata),
    (9, "REPLICA_NOT_AVAILABLE", Action::RefreshMetadata),
    (10, "MESSAGE_TOO_LARGE", Action::Fail),
    (11, "STALE_CONTROLLER_EPOCH", Action::Fail),
    (12, "OFFSET_METADATA_TOO_LARGE", Action::Fail),
    (13, "NETWORK_EXCEPTION", Action::RefreshMetadata),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", Action::Retry),
    (
        15,
        "COORDINATOR_NOT_AVAILABLE",
        Action::RediscoverCoordinator,
    ),
    (16, "NOT_COORDINATOR", Action::RediscoverCoordinator),
    (17, "INVALID_TOPIC_EXCEPTION", Action::Fail),
    (18, "RECORD_LIST_TOO_LARGE", Action::Fail),
    (19, "NOT_ENOUGH_REPLICAS", Action::Retry),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", Action::Retry),
    (21, "INVALID_REQUIRED_ACKS", Action::Fail),
    (22, "ILLEGAL_GENERATION", Action::Rejoin),
    (23, "INCONSISTENT_GROUP_PROTOCOL", Action::Fatal),
    (24, "INVALID_GROUP_ID", Action::Fatal),
    (25, "UNKNOWN_MEMBER_ID", Action::Rejoin),
    (26, "INVALID_SESSION_TIMEOUT", Action::Fatal),
    (27, "REBALANCE_IN_PROGRESS", Action::Rejoin),
    (28, "INVALID_COMMIT_OFFSET_SIZE", Action::Fail),
    (29, "TOPIC_AUTHORIZATION_FAILED", Action::Fatal),
    (30, "GROUP_AUTHORIZATION_FAILED", Action::Fatal),
    (31, "CLUSTER_AUTHORIZATION_FAILED", Action::Fatal),
    (32, "INVALID_TIMESTAMP", Action::Fail),
    (33, "UNSUPPORTED_SASL_MECHANISM", Action::Fatal),
    (34, "ILLEGAL_SASL_STATE", Action::Fatal),
    (35, "UNSUPPORTED_VERSION", Action::Fatal),
    (36, "TOPIC_ALREADY_EXISTS", Action::Fail),
    (37, "INVALID_PARTITIONS", Action::Fail),
    (38, "INVALID_REPLICATION_FACTOR", Action::Fail),
    (39, "INVALID_REPLICA_ASSIGNMENT", Action::Fail),
    (40, "INVALID_CONFIG", Action::Fail),
    (41, "NOT_CONTROLLER", Action::RefreshMetadata),
    (42, "INVALID_REQUEST", Action::Fail),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", Action::Fail),
    (44, "POLICY_VIOLATION", Action::Fail),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", Action::Fail),
    (46, "DUPLICATE_SEQUENCE_NUMBER", Action::Fail),
    (47, "INVALID_PRODUCER_EPOCH", Action::Fail),
    (48, "INVALID_TXN_STATE", Action::Fatal),
    (49, "INVALID_PRODUCER_ID_MAPPING", Action::Fail),
    (50, "INVALID_TRANSACTION_TIMEOUT", Action::Fatal),
    (51, "CONCURRENT_TRANSACTIONS", Action::Retry),
    (52, "TRANSACTION_COORDINATOR_FENCED", Action::Fatal),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Action::Fatal),
    (54, "SECURITY_DISABLED", Action::Fatal),
    (55, "OPERATION_NOT_ATTEMPTED", Action::Fail),
    (56, "KAFKA_STORAGE_ERROR", Action::RefreshMetadata),
    (57, "LOG_DIR_NOT_FOUND", Action::Fail),
    (58, "SASL_AUTHENTICATION_FAILED", Action::Fatal),
    (59, "UNKNOWN_PRODUCER_ID", Action::Fail),
    (60, "REASSIGNMENT_IN_PROGRESS", Action::Fail),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", Action::Fatal),
    (62, "DELEGATION_TOKEN_NOT_FOUND", Action::Fatal),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", Action::Fatal),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", Action::Fatal),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", Action::Fatal),
    (66, "DELEGATION_TOKEN_EXPIRED", Action::Fatal),
    (67, "INVALID_PRINCIPAL_TYPE", Action::Fatal),
    (68, "NON_EMPTY_GROUP", Action::Fail),
    (69, "GROUP_ID_NOT_FOUND", Action::Fail),
    (70, "FETCH_SESSION_ID_NOT_FOUND", Action::Retry),
    (71, "INVALID_FETCH_SESSION_EPOCH", Action::Retry),
    (72, "LISTENER_NOT_FOUND", Action::RefreshMetadata),
    (73, "TOPIC_DELETION_DISABLED", Action::Fail),
    (74, "FENCED_LEADER_EPOCH", Action::RefreshMetadata),
    (75, "UNKNOWN_LEADER_EPOCH", Action::RefreshMetadata),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", Action::Fail),
    (77, "STALE_BROKER_EPOCH", Action::Fail),
    (78, "OFFSET_NOT_AVAILABLE", Action::Retry),
    (79, "MEMBER_ID_REQUIRED", Action::Rejoin),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", Action::Retry),
    (81, "GROUP_MAX_SIZE_REACHED", Action::Fatal),
    (82, "FENCED_INSTANCE_ID", Action::Fatal),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", Action::Retry),
    (84, "ELECTION_NOT_NEEDED", Action::Fail),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", Action::Fail),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", Action::Fail),
    (87, "INVALID_RECORD", Action::Fail),
    (88, "UNSTABLE_OFFSET_COMMIT", Action::Retry),
    (89, "THROTTLING_QUOTA_EXCEEDED", Action::Retry),
    (90, "PRODUCER_FENCED", Action::Fatal),
    (91, "RESOURCE_NOT_FOUND", Action::Fail),
    (92, "DUPLICATE_RESOURCE", Action::Fail),
    (93, "UNACCEPTABLE_CREDENTIAL", Action::Fatal),
    (94, "INCONSISTENT_VOTER_SET", Action::Fail),
    (95, "INVALID_UPDATE_VERSION", Action::Fail),
    (96, "FEATURE_UPDATE_FAILED", Action::Fail),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", Action::Fatal),
    (98, "SNAPSHOT_NOT_FOUND", Action::Fail),
    (99, "POSITION_OUT_OF_RANGE", Action::Fail),
    (100, "UNKNOWN_TOPIC_ID", Action::RefreshMetadata),
    (101, "DUPLICATE_BROKER_REGISTRATION", Action::Fail),
    (102, "BROKER_ID_NOT_REGISTERED", Action::Fail),
    (103, "INCONSISTENT_TOPIC_ID", Action::RefreshMetadata),
    (104, "INCONSISTENT_CLUSTER_ID", Action::Fatal),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", Action::Fail),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", Action::RefreshMetadata),
    (107, "INELIGIBLE_REPLICA", Action::Fail),
    (108, "NEW_LEADER_ELECTED", Action::RefreshMetadata),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", Action::Fail),
    (110, "FENCED_MEMBER_EPOCH", Action::Rejoin),
    (111, "UNRELEASED_INSTANCE_ID", Action::Fatal),
    (112, "UNSUPPORTED_ASSIGNOR", Action::Fatal),
    (113, "STALE_MEMBER_EPOCH", Action::Rejoin),
    (114, "MISMATCHED_ENDPOINT_TYPE", Action::Fail),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", Action::Fail),
    (116, "UNKNOWN_CONTROLLER_ID", Action::Fail),
    (117, "UNKNOWN_SUBSCRIPTION_ID", Action::Fail),
    (118, "TELEMETRY_TOO_LARGE", Action::Fail),
    (119, "INVALID_REGISTRATION", Action::Fail),
    (120, "TRANSACTION_ABORTABLE", Action::Fail),
    (121, "INVALID_RECORD_STATE", Action::Fail),
    (122, "SHARE_SESSION_NOT_FOUND", Action::Retry),
    (123, "INVALID_SHARE_SESSION_EPOCH", Action::Retry),
    (124, "FENCED_STATE_EPOCH", Action::Fail),
    (125, "INVALID_VOTER_KEY", Action::Fail),
    (126, "DUPLICATE_VOTER", Action::Fail),
    (127, "VOTER_NOT_FOUND", Action::Fail),
    (128, "INVALID_REGULAR_EXPRESSION", Action::Fatal),
];

/// Kafka error codes lagless refers to by name (Kafka's `Errors` enum, same names and numbers).
pub mod codes {
    /// No error.
    pub const NONE: i16 = 0;
    /// The offset asked for is outside the partition's log (below its start or past its end).
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// The broker does not host this topic-partition (or the topic does not exist).
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// The partition has no leader right now (e.g. during a leader election).
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    /// The broker is not the partition's leader (or a follower it may fetch from): stale metadata.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// The broker gave up on the request within its own timeout.
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// A commit's metadata string exceeds the broker's `offset.metadata.max.bytes`.
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    /// The group coordinator is still loading the group's offsets.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// The group coordinator is not available (the offsets topic is not ready).
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// The broker is not the group's coordinator: find it again.
    pub const NOT_COORDINATOR: i16 = 16;
    /// The member's generation is stale: the group rebalanced.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// The member offers no assignor (protocol) that the group's other members offer.
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    /// The coordinator does not know the member id (the member's session expired).
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// `session.timeout.ms` is outside the broker's `group.min.session.timeout.ms` to
    /// `group.max.session.timeout.ms`.
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    /// The group is rebalancing: the member must join again.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// The principal is not allowed to describe or read the topic.
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    /// The principal is not allowed to use the group.
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    /// The broker does not support the request's version.
    pub const UNSUPPORTED_VERSION: i16 = 35;
    /// CreateTopics: the topic exists already.
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    /// The request is malformed or not allowed in its context.
    pub const INVALID_REQUEST: i16 = 42;
    /// The coordinator has no group of that id (ConsumerGroupDescribe of a classic group; a
    /// ConsumerGroupHeartbeat the coordinator will not let convert a classic group).
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    /// Fetch (KIP-227): the broker does not know the fetch session (evicted, or restarted).
    pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
    /// Fetch (KIP-227): the request's session epoch is not the one the broker expects.
    pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
    /// The request's leader epoch is older than the broker's: stale metadata.
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    /// The request's leader epoch is newer than the broker's: the broker has not caught up yet.
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    /// JoinGroup (KIP-394): join again with the member id the broker assigned in this answer.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// Another member joined with the same `group.instance.id`; this one is fenced.
    pub const FENCED_INSTANCE_ID: i16 = 82;
    /// OffsetFetch: a transactional commit of the partition is pending.
    pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    /// The broker does not know the topic id: stale metadata.
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    /// KIP-848: the member's epoch is fenced (it fell behind the group): it rejoins with epoch 0.
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    /// KIP-848: a static member's `group.instance.id` is still held by a member that has not left.
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;
    /// KIP-848: the broker has no assignor of the name `group.remote.assignor` gave.
    pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
    /// KIP-848: an OffsetCommit's member epoch is older than the member's current one.
    pub const STALE_MEMBER_EPOCH: i16 = 113;
    /// KIP-848: the coordinator cannot compile the member's `SubscribedTopicRegex` (RE2/J).
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
    /// The broker's `CLUSTER_AUTHORIZATION_FAILED`.
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    /// The broker's `INVALID_PRODUCER_EPOCH`.
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    /// The broker's `INVALID_TXN_STATE`.
    pub const INVALID_TXN_STATE: i16 = 48;
    /// The broker's `INVALID_PRODUCER_ID_MAPPING`.
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    /// The broker's `INVALID_TRANSACTION_TIMEOUT`.
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    /// The broker's `CONCURRENT_TRANSACTIONS`.
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    /// The broker's `TRANSACTION_COORDINATOR_FENCED`.
    pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    /// The broker's `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`.
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    /// The broker's `OPERATION_NOT_ATTEMPTED`.
    pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
    /// The broker's `UNKNOWN_PRODUCER_ID`.
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    /// The broker's `PRODUCER_FENCED`.
    pub const PRODUCER_FENCED: i16 = 90;
    /// The broker's `TRANSACTION_ABORTABLE` (KIP-890).
    pub const TRANSACTION_ABORTABLE: i16 = 120;
}

/// Kafka's name for an error code, or "UNKNOWN" for a code this table does not know.
pub fn kafka_error_name(code: i16) -> &'static str {
    KAFKA_ERRORS
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, n, _)| *n)
        .unwrap_or("UNKNOWN")
}

/// What a consumer does with a broker error code. Codes newer than this table fail the request.
pub fn kafka_error_action(code: i16) -> Action {
    KAFKA_ERRORS
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, _, a)| *a)
        .unwrap_or(Action::Fail)
}

impl Error {
    /// The error for a broker error code, with what lagless was doing when it got it.
    pub fn kafka(code: i16, context: impl Into<String>) -> Error {
        Error::Kafka {
            code,
            context: context.into(),
            partition: None,
            fatal: false,
        }
    }

    /// The error for a broker error code that ends the client where it was answered, whatever
    /// the code's own verdict (see the `fatal` field of [`Error::Kafka`]).
    pub fn kafka_fatal(code: i16, context: impl Into<String>) -> Error {
        Error::Kafka {
            code,
            context: context.into(),
            partition: None,
            fatal: true,
        }
    }

    /// The same error for a broker error code, tied to a partition.
    pub fn kafka_partition(
        code: i16,
        context: impl Into<String>,
        topic: &str,
        partition: i32,
    ) -> Error {
        Error::Kafka {
            code,
            context: context.into(),
            partition: Some(ErrorPartition {
                topic: topic.to_string(),
                partition,
            }),
            fatal: false,
        }
    }

    /// An [`Error::Config`] for `key`.
    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Config {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The kind of the error; adding a variant to [`Error`] adds a line here and one to the
    /// table of kinds.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config { .. } => ErrorKind::Config,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Kafka { .. } => ErrorKind::Kafka,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::Transport(_) => ErrorKind::Transport,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::UnknownTopic(_) => ErrorKind::UnknownTopic,
            Error::NoOffset(_) => ErrorKind::NoOffset,
            Error::PartitionStuck { .. } => ErrorKind::PartitionStuck,
            Error::CommitFailed(_) => ErrorKind::CommitFailed,
            Error::Wakeup => ErrorKind::Wakeup,
            Error::Closed => ErrorKind::Closed,
            Error::Callback(_) => ErrorKind::Callback,
            Error::IllegalState(_) => ErrorKind::IllegalState,
            Error::Authentication(_) => ErrorKind::Authentication,
            Error::Tls(_) => ErrorKind::Tls,
            Error::LogTruncation { .. } => ErrorKind::LogTruncation,
            Error::TransactionAbortable(_) => ErrorKind::TransactionAbortable,
        }
    }

    /// A stable number for the kind of error, the same in Rust, C and Python
    /// ([`ErrorKind::code`]). Broker errors carry their Kafka code separately
    /// ([`Error::kafka_code`]).
    pub fn code(&self) -> i32 {
        self.kind().code()
    }

    /// A short upper-case name: the kind's ([`ErrorKind::name`]); for broker errors, Kafka's
    /// name of the code.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Kafka { code, .. } => kafka_error_name(*code),
            _ => self.kind().name(),
        }
    }

    /// The broker's error code, where the error came from a broker.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            Error::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The partition the error belongs to, where it belongs to one.
    pub fn partition(&self) -> Option<&ErrorPartition> {
        match self {
            Error::Kafka { partition, .. } => partition.as_ref(),
            Error::NoOffset(p) => Some(p),
            Error::PartitionStuck { partition, .. } => Some(partition),
            Error::LogTruncation { partition, .. } => Some(partition),
            _ => None,
        }
    }

    /// Whether the same call may succeed if tried again.
    pub fn is_retriable(&self) -> bool {
        !self.ended_here()
            && self.decide(self.kind().retriable(), |action| {
                matches!(
                    action,
                    Action::Retry
                        | Action::RefreshMetadata
                        | Action::RediscoverCoordinator
                        | Action::Rejoin
                )
            })
    }

    /// Whether a newer producer with the same `transactional.id` fenced this one (the broker's
    /// `PRODUCER_FENCED`). Fatal: close the producer; the newer one carries on.
    pub fn is_producer_fenced(&self) -> bool {
        self.kafka_code() == Some(codes::PRODUCER_FENCED)
    }

    /// Whether the client can no longer be used (it should be closed).
    pub fn is_fatal(&self) -> bool {
        self.ended_here() || self.decide(self.kind().fatal(), |action| action == Action::Fatal)
    }

    /// A broker answer that ended the client where it came, whatever its code's verdict.
    fn ended_here(&self) -> bool {
        matches!(self, Error::Kafka { fatal: true, .. })
    }

    fn decide(&self, verdict: Verdict, by_action: impl FnOnce(Action) -> bool) -> bool {
        match (verdict, self.kafka_code()) {
            (Verdict::Yes, _) => true,
            (Verdict::No, _) => false,
            (Verdict::ByKafkaCode, Some(code)) => by_action(kafka_error_action(code)),
            (Verdict::ByKafkaCode, None) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { key, message } => write!(f, "config `{key}`: {message}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Kafka {
                code,
                context,
                partition,
                ..
            } => {
                write!(f, "{} (Kafka error {code})", kafka_error_name(*code))?;
                if let Some(p) = partition {
                    write!(f, " on {}-{}", p.topic, p.partition)?;
                }
                if !context.is_empty() {
                    write!(f, ": {context}")?;
                }
                Ok(())
            }
            Error::Timeout(m) => write!(f, "timed out: {m}"),
            Error::Transport(m) => write!(f, "transport: {m}"),
            Error::Corrupt(m) => write!(f, "malformed data: {m}"),
            Error::UnknownTopic(t) => {
                write!(f, "unknown topic `{t}`: it does not exist in the cluster")
            }
            Error::NoOffset(p) => write!(
                f,
                "no valid offset for {}-{} and auto.offset.reset is none",
                p.topic, p.partition
            ),
            Error::PartitionStuck { partition, cause } => write!(
                f,
                "partition {}-{} made no progress within task.timeout.ms: {cause}",
                partition.topic, partition.partition
            ),
            Error::CommitFailed(m) => write!(f, "commit failed: {m}"),
            Error::Wakeup => write!(f, "woken up by wakeup()"),
            Error::Closed => write!(f, "the client is closed"),
            Error::Callback(m) => write!(f, "callback failed: {m}"),
            Error::IllegalState(m) => write!(f, "illegal state: {m}"),
            Error::Authentication(m) => write!(f, "authentication failed: {m}"),
            Error::Tls(m) => write!(f, "TLS: {m}"),
            Error::LogTruncation {
                partition,
                position,
                divergent_offset,
                divergent_epoch,
            } => write!(
                f,
                "log truncation on {}-{}: the position {position} is past offset \
                 {divergent_offset}, where the leader's log of leader epoch {divergent_epoch} \
                 ends; records from {divergent_offset} to {} are no longer in the log and \
                 auto.offset.reset is none: seek the partition to continue",
                partition.topic,
                partition.partition,
                position - 1
            ),
            Error::TransactionAbortable(m) => write!(
                f,
                "the transaction can not commit and must be aborted (abort_transaction): {m}"
            ),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_codes_are_unique_and_sorted() {
        for w in KAFKA_ERRORS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} then {}", w[0].0, w[1].0);
        }
    }

    #[test]
    fn group_errors_map_to_the_java_client_actions() {
        use codes::*;
        assert_eq!(kafka_error_action(REBALANCE_IN_PROGRESS), Action::Rejoin);
        assert_eq!(kafka_error_action(ILLEGAL_GENERATION), Action::Rejoin);
        assert_eq!(kafka_error_action(UNKNOWN_MEMBER_ID), Action::Rejoin);
        assert_eq!(
            kafka_error_action(NOT_COORDINATOR),
            Action::RediscoverCoordinator
        );
        assert_eq!(
            kafka_error_action(COORDINATOR_NOT_AVAILABLE),
            Action::RediscoverCoordinator
        );
        assert_eq!(
            kafka_error_action(COORDINATOR_LOAD_IN_PROGRESS),
            Action::Retry
        );
        for fatal in [
            FENCED_INSTANCE_ID,
            INVALID_SESSION_TIMEOUT,
            GROUP_AUTHORIZATION_FAILED,
            INCONSISTENT_GROUP_PROTOCOL,
        ] {
            assert_eq!(
                kafka_error_action(fatal),
                Action::Fatal,
                "{}",
                kafka_error_name(fatal)
            );
            assert!(Error::kafka(fatal, "").is_fatal());
        }
        assert_eq!(
            kafka_error_action(NOT_LEADER_OR_FOLLOWER),
            Action::RefreshMetadata
        );
        assert_eq!(
            kafka_error_action(FENCED_LEADER_EPOCH),
            Action::RefreshMetadata
        );
    }

    /// The numbers are an ABI (C constants, Python `code`): this list is written out so that a
    /// renumbered kind fails here, not in an application.
    #[test]
    fn kind_codes_and_names_are_the_stable_ones() {
        let stable: Vec<(i32, &str)> = ErrorKind::ALL
            .iter()
            .map(|k| (k.code(), k.name()))
            .collect();
        assert_eq!(
            stable[..17],
            [
                (1, "CONFIG"),
                (2, "INVALID_ARGUMENT"),
                (3, "KAFKA"),
                (4, "TIMEOUT"),
                (5, "TRANSPORT"),
                (6, "CORRUPT"),
                (7, "UNKNOWN_TOPIC"),
                (8, "NO_OFFSET"),
                (9, "PARTITION_STUCK"),
                (10, "COMMIT_FAILED"),
                (11, "WAKEUP"),
                (12, "CLOSED"),
                (13, "CALLBACK"),
                (14, "ILLEGAL_STATE"),
                (15, "AUTHENTICATION"),
                (16, "SSL"),
                (17, "LOG_TRUNCATION"),
            ]
        );
        for w in ErrorKind::ALL.windows(2) {
            assert!(w[0].code() < w[1].code(), "{:?} then {:?}", w[0], w[1]);
        }
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
        }
        assert_eq!(ErrorKind::from_code(0), None);
    }

    #[test]
    fn every_error_has_its_kinds_code_name_and_verdicts() {
        let p = ErrorPartition {
            topic: "t".into(),
            partition: 0,
        };
        let s = || "x".to_string();
        // (error, kind, retriable, fatal) as the Java client and librdkafka classify them.
        let cases = [
            (Error::config("k", "m"), ErrorKind::Config, false, false),
            (
                Error::InvalidArgument(s()),
                ErrorKind::InvalidArgument,
                false,
                false,
            ),
            (
                Error::kafka(codes::NOT_COORDINATOR, ""),
                ErrorKind::Kafka,
                true,
                false,
            ),
            (
                Error::kafka(codes::FENCED_INSTANCE_ID, ""),
                ErrorKind::Kafka,
                false,
                true,
            ),
            (
                Error::kafka(codes::OFFSET_METADATA_TOO_LARGE, ""),
                ErrorKind::Kafka,
                false,
                false,
            ),
            (Error::Timeout(s()), ErrorKind::Timeout, true, false),
            (Error::Transport(s()), ErrorKind::Transport, true, false),
            (Error::Corrupt(s()), ErrorKind::Corrupt, false, false),
            (
                Error::UnknownTopic(s()),
                ErrorKind::UnknownTopic,
                false,
                false,
            ),
            (
                Error::NoOffset(p.clone()),
                ErrorKind::NoOffset,
                false,
                false,
            ),
            (
                Error::LogTruncation {
                    partition: p.clone(),
                    position: 120,
                    divergent_offset: 100,
                    divergent_epoch: 3,
                },
                ErrorKind::LogTruncation,
                false,
                false,
            ),
            (
                Error::PartitionStuck {
                    partition: p,
                    cause: s(),
                },
                ErrorKind::PartitionStuck,
                true,
                false,
            ),
            (
                Error::TransactionAbortable(s()),
                ErrorKind::TransactionAbortable,
                false,
                false,
            ),
            (
                Error::CommitFailed(s()),
                ErrorKind::CommitFailed,
                false,
                false,
            ),
            (Error::Wakeup, ErrorKind::Wakeup, true, false),
            (Error::Closed, ErrorKind::Closed, false, true),
            (Error::Callback(s()), ErrorKind::Callback, false, false),
            (
                Error::IllegalState(s()),
                ErrorKind::IllegalState,
                false,
                false,
            ),
            (
                Error::Authentication(s()),
                ErrorKind::Authentication,
                false,
                true,
            ),
            (Error::Tls(s()), ErrorKind::Tls, false, true),
        ];
        for (e, kind, retriable, fatal) in &cases {
            assert_eq!(e.kind(), *kind, "{e}");
            assert_eq!(e.code(), kind.code(), "{e}");
            assert_eq!(
                (e.is_retriable(), e.is_fatal()),
                (*retriable, *fatal),
                "{e}"
            );
            if *kind != ErrorKind::Kafka {
                assert_eq!(e.name(), kind.name());
            }
        }
        let covered: Vec<ErrorKind> = cases.iter().map(|c| c.1).collect();
        for k in ErrorKind::ALL {
            assert!(covered.contains(k), "no error of kind {k:?} in this test");
        }
    }

    #[test]
    fn display_names_code_and_partition() {
        let e = Error::kafka_partition(codes::NOT_LEADER_OR_FOLLOWER, "fetch", "orders", 3);
        assert_eq!(
            e.to_string(),
            "NOT_LEADER_OR_FOLLOWER (Kafka error 6) on orders-3: fetch"
        );
        assert!(e.is_retriable());
        assert_eq!(kafka_error_name(9999), "UNKNOWN");
    }
}

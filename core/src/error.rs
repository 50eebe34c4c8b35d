//! The one error type of lagless, and the table that says what a consumer does with each Kafka
//! error code (retry, refresh metadata, rediscover the coordinator, rejoin, or give up).
//!
//! Every error has a stable numeric [`Error::code`] (the C ABI and Python expose it), a name, and
//! the answers to "can I try again?" ([`Error::is_retriable`]) and "is this client done?"
//! ([`Error::is_fatal`]). Errors that come from a broker keep the broker's error code.
use std::fmt;

/// A topic and partition an error belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorPartition {
    pub topic: String,
    pub partition: i32,
}

/// Everything that can go wrong in lagless.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration key is unknown or its value is bad. `key` names it.
    Config { key: String, message: String },
    /// An argument to an API call is bad (e.g. an empty topic name, a negative offset).
    InvalidArgument(String),
    /// A broker answered with an error code.
    Kafka {
        code: i16,
        context: String,
        partition: Option<ErrorPartition>,
    },
    /// A deadline passed before the operation completed.
    Timeout(String),
    /// No connection could be made, or a connection broke.
    Transport(String),
    /// Malformed data: from the wire (a frame, a record batch) or from another group member.
    Corrupt(String),
    /// The topic does not exist in the cluster.
    UnknownTopic(String),
    /// `auto.offset.reset=none` and the partition has no committed offset (or its offset is out
    /// of range).
    NoOffset(ErrorPartition),
    /// A partition made no progress for `task.timeout.ms` (KIP-572). The consumer keeps serving
    /// the other partitions.
    PartitionStuck {
        partition: ErrorPartition,
        cause: String,
    },
    /// A commit could not complete because the group rebalanced or this member left it.
    CommitFailed(String),
    /// `wakeup()` was called.
    Wakeup,
    /// The client was closed.
    Closed,
    /// A rebalance listener callback failed; the assignment change completed anyway.
    Callback(String),
    /// The caller is not in a state that allows the call (e.g. `commit` without a group).
    IllegalState(String),
    /// SASL authentication failed: wrong credentials, a mechanism the broker refuses, a broker
    /// that could not prove it knows the password (SCRAM), or no token to offer (OAUTHBEARER).
    /// Fatal: trying again with the same credentials fails the same way.
    Authentication(String),
    /// TLS failed: the broker's certificate is untrusted, expired or made out for another host,
    /// the broker refused lagless's client certificate, or one side speaks TLS and the other
    /// does not (`security.protocol` mismatches the listener). Fatal, as authentication.
    Tls(String),
}

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
    (48, "INVALID_TXN_STATE", Action::Fail),
    (49, "INVALID_PRODUCER_ID_MAPPING", Action::Fail),
    (50, "INVALID_TRANSACTION_TIMEOUT", Action::Fail),
    (51, "CONCURRENT_TRANSACTIONS", Action::Retry),
    (52, "TRANSACTION_COORDINATOR_FENCED", Action::Fail),
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
];

/// Kafka error codes lagless refers to by name.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
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
        }
    }

    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Config {
            key: key.into(),
            message: message.into(),
        }
    }

    /// A stable number for the kind of error, the same in Rust, C and Python. Broker errors carry
    /// their Kafka code separately ([`Error::kafka_code`]).
    pub fn code(&self) -> i32 {
        match self {
            Error::Config { .. } => 1,
            Error::InvalidArgument(_) => 2,
            Error::Kafka { .. } => 3,
            Error::Timeout(_) => 4,
            Error::Transport(_) => 5,
            Error::Corrupt(_) => 6,
            Error::UnknownTopic(_) => 7,
            Error::NoOffset(_) => 8,
            Error::PartitionStuck { .. } => 9,
            Error::CommitFailed(_) => 10,
            Error::Wakeup => 11,
            Error::Closed => 12,
            Error::Callback(_) => 13,
            Error::IllegalState(_) => 14,
            Error::Authentication(_) => 15,
            Error::Tls(_) => 16,
        }
    }

    /// A short upper-case name for the kind; for broker errors, Kafka's name of the code.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Config { .. } => "CONFIG",
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::Kafka { code, .. } => kafka_error_name(*code),
            Error::Timeout(_) => "TIMEOUT",
            Error::Transport(_) => "TRANSPORT",
            Error::Corrupt(_) => "CORRUPT",
            Error::UnknownTopic(_) => "UNKNOWN_TOPIC",
            Error::NoOffset(_) => "NO_OFFSET",
            Error::PartitionStuck { .. } => "PARTITION_STUCK",
            Error::CommitFailed(_) => "COMMIT_FAILED",
            Error::Wakeup => "WAKEUP",
            Error::Closed => "CLOSED",
            Error::Callback(_) => "CALLBACK",
            Error::IllegalState(_) => "ILLEGAL_STATE",
            Error::Authentication(_) => "AUTHENTICATION",
            Error::Tls(_) => "SSL",
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
            _ => None,
        }
    }

    /// Whether the same call may succeed if tried again.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => matches!(
                kafka_error_action(*code),
                Action::Retry
                    | Action::RefreshMetadata
                    | Action::RediscoverCoordinator
                    | Action::Rejoin
            ),
            Error::Timeout(_)
            | Error::Transport(_)
            | Error::PartitionStuck { .. }
            | Error::Wakeup => true,
            _ => false,
        }
    }

    /// Whether the client can no longer be used (it should be closed).
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => kafka_error_action(*code) == Action::Fatal,
            Error::Closed | Error::Authentication(_) | Error::Tls(_) => true,
            _ => false,
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
            Error::Callback(m) => write!(f, "rebalance callback failed: {m}"),
            Error::IllegalState(m) => write!(f, "illegal state: {m}"),
            Error::Authentication(m) => write!(f, "authentication failed: {m}"),
            Error::Tls(m) => write!(f, "TLS: {m}"),
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

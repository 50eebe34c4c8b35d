//! The typed configs: a [`Config`]'s raw strings turned into the values consumers and producers
//! use, checked against each other.
use super::*;

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
    /// `security.protocol` with its TLS setup and SASL credentials. Crate-private: it holds the
    /// connection layer's types (rustls configs, SASL mechanisms).
    pub(crate) security: Security,
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
    /// learner-sticky, `learner.readiness=explicit`: a learned partition is ready only when the
    /// application says so (`Consumer::learner_ready`), not when its callback returns.
    pub learner_explicit_readiness: bool,
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
            learner_explicit_readiness: c
                .string("learner.readiness")?
                .is_some_and(|v| v.eq_ignore_ascii_case("explicit")),
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

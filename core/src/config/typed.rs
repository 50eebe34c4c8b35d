//! The typed configs: a [`Config`]'s raw strings turned into the values consumers and producers
//! use, checked against each other.
use super::*;

/// Where a consumer starts when it has no valid committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    /// `earliest`: the partition's log start offset.
    Earliest,
    /// `latest` (the default): the partition's log end, so only records produced from now on.
    Latest,
    /// `none`: report [`Error::NoOffset`].
    None,
}

/// Which records a consumer reads (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// `read_uncommitted` (the default, as the Java client's): every record, transactional ones
    /// whether committed, aborted or still open.
    ReadUncommitted,
    /// `read_committed`: records below the last stable offset only, those of aborted
    /// transactions left out; end offsets are last stable offsets.
    ReadCommitted,
}

/// Settings of both consumers and producers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonConfig {
    /// `bootstrap.servers`: the `host:port` entries, as written (required, never empty).
    pub bootstrap_servers: Vec<String>,
    /// `client.id`: the name sent with every request (default `lagless`).
    pub client_id: String,
    /// `client.rack`, for fetching from the closest replica (KIP-392); `None` when empty (the
    /// default).
    pub client_rack: Option<String>,
    /// `request.timeout.ms`: how long to wait for a broker's answer (default 30 s).
    pub request_timeout: Duration,
    /// `default.api.timeout.ms`: the timeout of blocking calls given no timeout (default 60 s).
    pub default_api_timeout: Duration,
    /// `retry.backoff.ms`: the first wait before a retry, doubling from there (default 100 ms).
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`: the longest wait between retries (default 1 s).
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.ms`: the first wait before reconnecting to a broker (default 50 ms).
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`: the longest wait between reconnections to one broker
    /// (default 1 s).
    pub reconnect_backoff_max: Duration,
    /// `socket.connection.setup.timeout.ms`: how long a TCP connection may take to be
    /// established (default 10 s).
    pub socket_connection_setup_timeout: Duration,
    /// `metadata.max.age.ms`: cluster metadata is refreshed at least this often (default 5 min).
    pub metadata_max_age: Duration,
    /// `task.timeout.ms` (KIP-572): a partition that makes no progress this long is reported
    /// with [`Error::PartitionStuck`] (default 5 min). Zero: report a partition at its first
    /// failure.
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
            security: Security::from_settings(&c.security_settings()?)?,
        })
    }
}

/// A consumer's typed settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The settings consumers share with producers.
    pub common: CommonConfig,
    /// `group.id`: the consumer group to join; `None` (the default) for a consumer that only
    /// assigns partitions itself and cannot commit.
    pub group_id: Option<String>,
    /// `group.instance.id`: the static member id (KIP-345); `None` (the default) for a dynamic
    /// member. Requires `group.id`.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`: the group drops a member not heard from this long (default 10 s).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`: the time between heartbeats (default 3 s); must be below
    /// `session.timeout.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`: a member that does not poll this long leaves the group (KIP-62,
    /// default 5 min).
    pub max_poll_interval: Duration,
    /// `statistics.interval.ms`: how often `poll()` hands the metrics snapshot to the
    /// statistics callback ([`crate::Consumer::set_statistics_callback`]); zero (the default)
    /// for never.
    pub statistics_interval: Duration,
    /// `enable.metrics.push`: push the consumer's metrics to a broker that asks for them
    /// (KIP-714, the client telemetry task; default true).
    pub enable_metrics_push: bool,
    /// `max.poll.records`: the most records one poll returns (default 500).
    pub max_poll_records: usize,
    /// `enable.auto.commit`: commit the positions of returned records in the background
    /// (default true; always false without `group.id`).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`: the time between automatic commits (default 5 s).
    pub auto_commit_interval: Duration,
    /// `auto.offset.reset`: where to start without a valid committed offset (default `latest`).
    pub auto_offset_reset: AutoOffsetReset,
    /// `fetch.min.bytes`: a broker holds a fetch until it has this many bytes or
    /// `fetch.max.wait.ms` passes (default 1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes`: the most bytes one fetch response may carry; one oversized batch still
    /// comes through (default 50 MiB).
    pub fetch_max_bytes: i32,
    /// `fetch.max.wait.ms`: the longest a broker holds a fetch for `fetch.min.bytes` (default
    /// 500 ms).
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes`: the most bytes per partition in one fetch response (default
    /// 1 MiB).
    pub max_partition_fetch_bytes: i32,
    /// `fetch.buffer.max.bytes` (lagless only): the most bytes of fetched records not yet
    /// returned by poll held in memory; prefetching pauses above it (default 64 MiB).
    pub fetch_buffer_max_bytes: usize,
    /// `check.crcs`: check the CRC32C of every fetched record batch (default true).
    pub check_crcs: bool,
    /// `isolation.level`: which records are read (default `read_uncommitted`).
    pub isolation_level: IsolationLevel,
    /// `partition.assignment.strategy`: the assignors' protocol names (`range`, `roundrobin`,
    /// `cooperative-sticky`, `learner-sticky`), preferred first (default
    /// `cooperative-sticky,range`).
    pub partition_assignment_strategy: Vec<String>,
    /// `enable.parallel.rebalance` (KIP-333, lagless only): after a takeover with a backlog,
    /// deliver fresh records at once while a recovery stream drains the backlog (default false).
    pub enable_parallel_rebalance: bool,
    /// `parallel.rebalance.min.lag`: the smallest backlog, in records (log end minus committed
    /// offset), that gets a recovery stream (default 1000).
    pub parallel_rebalance_min_lag: i64,
    /// `parallel.rebalance.recovery.poll`: recovery records come from
    /// [`crate::Consumer::recovery_poll`] on a thread of their own, not from `poll()` (default
    /// false; needs `enable.parallel.rebalance`).
    pub recovery_poll: bool,
    /// `learner.max.warmup.partitions`, learner-sticky: most partitions warming up for this
    /// member at once (default 0: no limit).
    pub learner_max_warmup_partitions: u32,
    /// learner-sticky, `learner.readiness=explicit`: a learned partition is ready only when the
    /// application says so (`Consumer::learner_ready`), not when its callback returns.
    pub learner_explicit_readiness: bool,
    /// `exclude.internal.topics`: pattern subscriptions never match internal topics such as
    /// `__consumer_offsets` (default true).
    pub exclude_internal_topics: bool,
    /// `internal.leave.group.on.close`: send LeaveGroup on close so the group rebalances at once
    /// rather than after `session.timeout.ms` (default true).
    pub leave_group_on_close: bool,
    /// `group.protocol`: classic, or KIP-848's consumer protocol.
    pub group_protocol: GroupProtocolKind,
    /// `group.remote.assignor`: the broker-side assignor asked for (consumer protocol).
    pub group_remote_assignor: Option<String>,
}

/// `group.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProtocolKind {
    /// JoinGroup/SyncGroup with client-side assignors.
    Classic,
    /// KIP-848: ConsumerGroupHeartbeat, the coordinator assigns.
    Consumer,
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

        let group_protocol = match c.lower("group.protocol")?.as_str() {
            "consumer" => GroupProtocolKind::Consumer,
            _ => GroupProtocolKind::Classic,
        };
        if group_protocol == GroupProtocolKind::Consumer {
            // As the Java client (ConsumerConfig): under KIP-848 these belong to the broker
            // (group.consumer.*), and a value set here would silently not apply.
            for key in [
                "partition.assignment.strategy",
                "session.timeout.ms",
                "heartbeat.interval.ms",
            ] {
                if c.is_set(key) {
                    return Err(Error::config(
                        key,
                        format!(
                            "`{key}` is not supported with `group.protocol=consumer`: the broker \
                             decides it (its group.consumer.* settings){}",
                            if key == "partition.assignment.strategy" {
                                "; choose a broker-side assignor with `group.remote.assignor`. \
                                 Learner assignments (learner-sticky) need a client-side \
                                 assignor and so the classic protocol"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
            }
        } else if c.is_set("group.remote.assignor") {
            return Err(Error::config(
                "group.remote.assignor",
                "`group.remote.assignor` needs `group.protocol=consumer`; the classic protocol \
                 assigns with `partition.assignment.strategy`",
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

        let recovery_poll = c.bool("parallel.rebalance.recovery.poll")?;
        // Without recovery streams there is nothing for a recovery thread to take: a
        // recovery_poll() loop would wait forever, silently.
        if recovery_poll && !c.bool("enable.parallel.rebalance")? {
            return Err(Error::config(
                "parallel.rebalance.recovery.poll",
                "`parallel.rebalance.recovery.poll` requires `enable.parallel.rebalance=true`",
            ));
        }

        Ok(ConsumerConfig {
            common,
            group_id,
            group_instance_id,
            session_timeout,
            heartbeat_interval,
            max_poll_interval: c.ms("max.poll.interval.ms")?,
            statistics_interval: c.ms("statistics.interval.ms")?,
            enable_metrics_push: c.bool("enable.metrics.push")?,
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
            recovery_poll,
            // The key's range is 0..=i32::MAX, so this never saturates.
            learner_max_warmup_partitions: c.int32("learner.max.warmup.partitions")?.max(0) as u32,
            learner_explicit_readiness: c
                .string("learner.readiness")?
                .is_some_and(|v| v.eq_ignore_ascii_case("explicit")),
            exclude_internal_topics: c.bool("exclude.internal.topics")?,
            leave_group_on_close: c.bool("internal.leave.group.on.close")?,
            group_protocol,
            group_remote_assignor: c.string("group.remote.assignor")?,
        })
    }
}

/// A producer's typed settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// The settings producers share with consumers.
    pub common: CommonConfig,
    /// `enable.metrics.push`: push the producer's metrics to a broker that asks for them
    /// (KIP-714, the client telemetry task; default true).
    pub enable_metrics_push: bool,
    /// `acks`: the replicas that must have a record before it counts as sent: -1 for all (the
    /// default, `all`), 1 for the leader, 0 for none.
    pub acks: i16,
    /// `linger.ms`: how long to wait for more records to fill a batch (default 5 ms).
    pub linger: Duration,
    /// `batch.size`: the most bytes in one batch for one partition (default 16384); 0 disables
    /// batching (a batch per record), as in Java.
    pub batch_size: usize,
    /// `compression.type`: one of `none` (the default), `gzip`, `snappy`, `lz4`, `zstd`.
    pub compression_type: String,
    /// `max.request.size`: the most bytes in one produce request, and so the largest record
    /// (default 1 MiB).
    pub max_request_size: usize,
    /// `delivery.timeout.ms`: the time from send to success or failure, retries included
    /// (default 2 min); at least `linger.ms` + `request.timeout.ms`.
    pub delivery_timeout: Duration,
    /// `buffer.memory`: the most bytes of records waiting to be sent; send blocks above it
    /// (default 32 MiB).
    pub buffer_memory: usize,
    /// `partitioner.ignore.keys`: spread keyed records like unkeyed ones instead of hashing
    /// their keys (default false).
    pub partitioner_ignore_keys: bool,
    /// `max.in.flight.requests.per.connection`: the most unanswered produce requests per broker
    /// connection (default 5).
    pub max_in_flight_requests_per_connection: usize,
    /// `enable.idempotence`: a producer id and per-partition sequence numbers, so that retries
    /// write no duplicates and keep the order (default true, with `acks=all` and at most 5
    /// requests in flight; see [`ProducerConfig::from_config`]).
    pub enable_idempotence: bool,
    /// `transactional.id`: set, the producer is transactional (and idempotent); unset (the
    /// default), it is not.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the coordinator lets a transaction stay open before
    /// it aborts it (default 60 s, as in Java).
    pub transaction_timeout: Duration,
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
        let max_in_flight = c.size("max.in.flight.requests.per.connection")?;
        let transactional_id = c.string("transactional.id")?;
        let enable_idempotence = idempotence(
            transactional(
                transactional_id.is_some(),
                c.is_set("enable.idempotence")
                    .then(|| c.bool("enable.idempotence"))
                    .transpose()?,
            )?,
            acks,
            max_in_flight,
        )?;
        Ok(ProducerConfig {
            common,
            enable_metrics_push: c.bool("enable.metrics.push")?,
            acks,
            linger,
            batch_size: c.size("batch.size")?,
            compression_type: {
                // Checked here too, so that the config that names a codec this build leaves out
                // is the error, not the producer made from it.
                let codec = c.lower("compression.type")?;
                crate::protocol::records::Compression::from_config_value(&codec)?;
                codec
            },
            max_request_size: c.size("max.request.size")?,
            delivery_timeout,
            buffer_memory: c.size("buffer.memory")?,
            partitioner_ignore_keys: c.bool("partitioner.ignore.keys")?,
            max_in_flight_requests_per_connection: max_in_flight,
            enable_idempotence,
            transactional_id,
            transaction_timeout: c.ms("transaction.timeout.ms")?,
        })
    }
}

/// The `enable.idempotence` setting a producer goes by: a transactional producer is idempotent
/// (Java treats `transactional.id` as setting it to true), and setting it to false beside a
/// `transactional.id` is an error naming both keys.
pub(crate) fn transactional(transactional: bool, set: Option<bool>) -> Result<Option<bool>> {
    match (transactional, set) {
        (true, Some(false)) => Err(Error::config(
            "enable.idempotence",
            "`transactional.id` is set, which needs the idempotent producer: \
             `enable.idempotence` must not be false",
        )),
        (true, _) => Ok(Some(true)),
        (false, set) => Ok(set),
    }
}

/// The most produce requests in flight per connection an idempotent producer may have: the
/// broker keeps the last five batches of each producer and partition to recognise a retried one.
pub const MAX_IN_FLIGHT_IDEMPOTENT: usize = 5;

/// Whether the producer is idempotent, from `enable.idempotence` (`None`: not set), `acks` and
/// `max.in.flight.requests.per.connection`, as the Java producer decides it (Kafka 3.2+): set
/// to true, a conflicting setting is an error naming that setting; left unset, a conflicting
/// setting turns idempotence off.
pub(crate) fn idempotence(set: Option<bool>, acks: i16, max_in_flight: usize) -> Result<bool> {
    let conflict = if acks != -1 {
        Some(Error::config(
            "acks",
            format!(
                "`acks` must be all (-1) to use the idempotent producer (enable.idempotence=true), got {}",
                acks
            ),
        ))
    } else if max_in_flight > MAX_IN_FLIGHT_IDEMPOTENT {
        Some(Error::config(
            "max.in.flight.requests.per.connection",
            format!(
                "`max.in.flight.requests.per.connection` must be at most {MAX_IN_FLIGHT_IDEMPOTENT} to use the idempotent producer (enable.idempotence=true), got {max_in_flight}"
            ),
        ))
    } else {
        None
    };
    match (set, conflict) {
        (Some(false), _) => Ok(false),
        (Some(true), Some(e)) => Err(e),
        (None, Some(_)) => Ok(false),
        (_, None) => Ok(true),
    }
}

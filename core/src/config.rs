// TEMPORARY stub until the config table lands.
use std::time::Duration;
#[derive(Debug, Clone)]
pub struct CommonConfig {
    pub bootstrap_servers: Vec<String>,
    pub client_id: String,
    pub client_rack: Option<String>,
    pub request_timeout: Duration,
    pub default_api_timeout: Duration,
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    pub reconnect_backoff: Duration,
    pub reconnect_backoff_max: Duration,
    pub socket_connection_setup_timeout: Duration,
    pub metadata_max_age: Duration,
    pub task_timeout: Duration,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
    None,
}
#[derive(Debug, Clone)]
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
    pub partition_assignment_strategy: Vec<String>,
    pub enable_parallel_rebalance: bool,
    pub parallel_rebalance_min_lag: i64,
    pub exclude_internal_topics: bool,
    pub leave_group_on_close: bool,
}
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub common: CommonConfig,
    pub acks: i16,
    pub linger: Duration,
    pub batch_size: usize,
    pub compression_type: String,
    pub max_request_size: usize,
    pub delivery_timeout: Duration,
    pub buffer_memory: usize,
    pub partitioner_ignore_keys: bool,
    pub max_in_flight_requests_per_connection: usize,
}

//! A fake Kafka broker, in process, for tests that need a broker to misbehave in ways a real one
//! will not on demand.
//!
//! It serves one topic on one node (itself, the leader of every partition) and answers
//! ApiVersions, Metadata, ListOffsets and Fetch, decoding requests with kafka-protocol's broker
//! side decoders and encoding answers at the version the client asked for. Each partition has a
//! [`Behavior`]: a log of records that grows at a fixed rate, or a fetch error on every request.
//! For a consumer with a `group.id` and manual assignment it is also the group coordinator as
//! far as committed offsets go (FindCoordinator, OffsetFetch, OffsetCommit), and for a
//! subscribed consumer the coordinator of a one-member group (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup), whose Heartbeat answers can be set to an error. KIP-320: its records are of
//! leader epoch 0, the leader epoch its Metadata names can be moved on, and OffsetForLeaderEpoch
//! answers where epoch 0 ends (the log end, or what the test sets: a truncation a Fetch never
//! shows, since its Fetch answers never name a diverging epoch).
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicI16, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse, HeartbeatRequest, HeartbeatResponse, InitProducerIdRequest,
    InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProducerId, PushTelemetryRequest,
    PushTelemetryResponse, RequestHeader, ResponseHeader, SyncGroupRequest, SyncGroupResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use lagless::protocol::records::{BatchBuilder, Compression};
use lagless::protocol::wire::lagless_max_version;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What one partition does.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// A log of `total` records from offset 0, growing by `per_sec` records a second from the
    /// broker's start (all at once with `per_sec == 0`). Record `o` has key `k{o}`, value `v{o}`
    /// and timestamp [`BASE_TIMESTAMP`]` + o`.
    Records { total: i64, per_sec: u64 },
    /// Every fetch of the partition answers this error code (ListOffsets still works: the log is
    /// empty).
    FetchError(i16),
    /// Metadata says the partition has no leader (-1).
    NoLeader,
    /// A log of `initial` records from the start, growing by `per_sec` a second up to `total`,
    /// whose fetches at offsets below `fail_below` answer `code` for the first `fail_for` of the
    /// broker's life: a backlog a recovery stream cannot read for a while, above which the main
    /// stream reads normally.
    Backlog {
        initial: i64,
        per_sec: u64,
        total: i64,
        fail_below: i64,
        fail_for: Duration,
        code: i16,
    },
    /// `total` records, all there from the start, each fetch answer ending with the first half
    /// of the batch after its complete one, as a broker cuts the last batch at the size limit
    /// (KIP-74).
    TruncatedTail { total: i64 },
    /// `total` records, all there from the start, every batch with a wrong CRC field (the records
    /// themselves intact), as a damaged checksum would look.
    CorruptCrc { total: i64 },
}

pub const BASE_TIMESTAMP: i64 = 1_600_000_000_000;
const NODE_ID: i32 = 1;
/// Records per fetch answer per partition: small, so data keeps coming over many fetches.
const RECORDS_PER_FETCH: i64 = 200;

struct State {
    /// Advertise Fetch only up to this version (an old broker), instead of what lagless needs.
    fetch_max_version: Option<i16>,
    /// The highest ApiVersions version it knows (`None`: lagless' own); one below 3 answers a
    /// newer request as a broker before Kafka 2.4 does.
    api_versions_max: Option<i16>,
    topic: String,
    partitions: Vec<Behavior>,
    started: Instant,
    port: u16,
    fetches: Vec<AtomicUsize>,
    /// Committed offset and metadata per partition (any group).
    committed: std::sync::Mutex<Vec<Option<(i64, String)>>>,
    /// The error code every Heartbeat is answered with (0: none).
    heartbeat_error: AtomicI16,
    /// Heartbeats received, and of those, answered with an error.
    heartbeats: AtomicUsize,
    heartbeats_failed: AtomicUsize,
    /// The next this many OffsetCommits are answered with `commit_error` on every partition.
    commit_failures: AtomicUsize,
    commit_error: AtomicI16,
    /// The (partition, offset) of every OffsetCommit answered with `commit_error`.
    refused_commits: std::sync::Mutex<Vec<(i32, i64)>>,
    /// The API keys whose requests are read and never answered, connections staying open.
    stalled: std::sync::Mutex<Vec<ApiKey>>,
    /// KIP-320: the leader epoch Metadata names for every partition (records are of epoch 0).
    leader_epoch: AtomicI32,
    /// Whether ApiVersions lists OffsetForLeaderEpoch (false: a broker that cannot validate).
    offset_for_leader_epoch: AtomicBool,
    /// Where OffsetForLeaderEpoch says epoch 0 ends for every partition (`None`: its log end).
    epoch_end: std::sync::Mutex<Option<(i32, i64)>>,
    /// The next this many OffsetForLeaderEpoch partition answers are this error code.
    epoch_failures: AtomicUsize,
    epoch_error: AtomicI16,
    /// (partition, current_leader_epoch, leader_epoch) of every OffsetForLeaderEpoch partition.
    epoch_requests: std::sync::Mutex<Vec<(i32, i32, i32)>>,
    /// Metadata requests answered.
    metadata_requests: AtomicUsize,
    /// The error code InitProducerId is answered with (0: producer id 1000, epoch 0).
    init_producer_id_error: AtomicI16,
    /// InitProducerId requests answered.
    init_producer_id_requests: AtomicUsize,
    /// KIP-714: whether ApiVersions lists GetTelemetrySubscriptions and PushTelemetry.
    telemetry: AtomicBool,
    /// The error codes of the next PushTelemetry answers, in turn (then none).
    push_errors: std::sync::Mutex<std::collections::VecDeque<i16>>,
    /// Every telemetry request, in the order received.
    telemetry_requests: std::sync::Mutex<Vec<TelemetryRequest>>,
    /// The keys of requests the fake broker does not serve (the connection ends on each).
    unserved: std::sync::Mutex<Vec<i16>>,
}

/// KIP-714: the client instance id the fake broker gives.
pub const CLIENT_INSTANCE_ID: u128 = 0x714;
/// KIP-714: the push interval the fake broker's subscriptions name.
pub const PUSH_INTERVAL: Duration = Duration::from_millis(200);

/// A telemetry request the fake broker received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelemetryRequest {
    /// GetTelemetrySubscriptions with this client instance id.
    Subscribe(uuid::Uuid),
    /// PushTelemetry.
    Push {
        client_instance_id: uuid::Uuid,
        subscription_id: i32,
        terminating: bool,
        /// The payload's bytes as sent (compression type 0 is asked for, none accepted).
        compression_type: i8,
        metrics: Vec<u8>,
    },
}

impl State {
    /// How many records partition `p` has now.
    fn available(&self, p: usize) -> i64 {
        match self.partitions[p] {
            Behavior::TruncatedTail { total } | Behavior::CorruptCrc { total } => total,
            Behavior::Records { total, per_sec } => {
                if per_sec == 0 {
                    total
                } else {
                    let grown = self.started.elapsed().as_millis() as u64 * per_sec / 1000;
                    total.min(grown as i64)
                }
            }
            Behavior::Backlog {
                initial,
                per_sec,
                total,
                ..
            } => {
                let grown = self.started.elapsed().as_millis() as u64 * per_sec / 1000;
                total.min(initial + grown as i64)
            }
            _ => 0,
        }
    }
}

pub struct FakeBroker {
    pub addr: String,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeBroker {
    pub fn start(topic: &str, partitions: Vec<Behavior>) -> FakeBroker {
        FakeBroker::start_with_fetch_versions(topic, partitions, None)
    }

    /// A broker that advertises Fetch only up to `fetch_max_version` (one too old for lagless).
    pub fn start_with_fetch_versions(
        topic: &str,
        partitions: Vec<Behavior>,
        fetch_max_version: Option<i16>,
    ) -> FakeBroker {
        FakeBroker::start_inner(topic, partitions, fetch_max_version, None)
    }

    /// A broker from before Kafka 2.4 (KIP-511): it knows ApiVersions v0-v2 only, and answers a
    /// newer ApiVersions request with UNSUPPORTED_VERSION in the v0 layout.
    pub fn start_before_2_4(
        topic: &str,
        partitions: Vec<Behavior>,
        fetch_max_version: Option<i16>,
    ) -> FakeBroker {
        FakeBroker::start_inner(topic, partitions, fetch_max_version, Some(2))
    }

    fn start_inner(
        topic: &str,
        partitions: Vec<Behavior>,
        fetch_max_version: Option<i16>,
        api_versions_max: Option<i16>,
    ) -> FakeBroker {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fake-broker")
            .enable_all()
            .build()
            .unwrap();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            committed: std::sync::Mutex::new(vec![None; partitions.len()]),
            topic: topic.to_string(),
            fetches: partitions.iter().map(|_| AtomicUsize::new(0)).collect(),
            partitions,
            started: Instant::now(),
            fetch_max_version,
            api_versions_max,
            port,
            heartbeat_error: AtomicI16::new(0),
            heartbeats: AtomicUsize::new(0),
            heartbeats_failed: AtomicUsize::new(0),
            commit_failures: AtomicUsize::new(0),
            refused_commits: std::sync::Mutex::new(Vec::new()),
            commit_error: AtomicI16::new(0),
            stalled: std::sync::Mutex::new(Vec::new()),
            leader_epoch: AtomicI32::new(0),
            offset_for_leader_epoch: AtomicBool::new(true),
            epoch_end: std::sync::Mutex::new(None),
            epoch_failures: AtomicUsize::new(0),
            epoch_error: AtomicI16::new(0),
            epoch_requests: std::sync::Mutex::new(Vec::new()),
            metadata_requests: AtomicUsize::new(0),
            init_producer_id_error: AtomicI16::new(0),
            init_producer_id_requests: AtomicUsize::new(0),
            telemetry: AtomicBool::new(false),
            push_errors: std::sync::Mutex::new(Default::default()),
            telemetry_requests: std::sync::Mutex::new(Vec::new()),
            unserved: std::sync::Mutex::new(Vec::new()),
        });
        let st = state.clone();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(sock, st).await {
                        eprintln!("fake broker: connection ended: {e:#}");
                    }
                });
            }
        });
        FakeBroker {
            addr: format!("127.0.0.1:{port}"),
            state,
            runtime: Some(runtime),
        }
    }

    /// KIP-714: list the telemetry APIs and serve them: a subscription of the consumer's
    /// metrics every [`PUSH_INTERVAL`], delta temporality, no compression; pushes answered with
    /// `push_errors` in turn, then with no error.
    pub fn serve_telemetry(&self, push_errors: &[i16]) {
        self.state
            .push_errors
            .lock()
            .unwrap()
            .extend(push_errors.iter().copied());
        self.state.telemetry.store(true, Ordering::Relaxed);
    }

    /// KIP-714: every telemetry request so far.
    pub fn telemetry_requests(&self) -> Vec<TelemetryRequest> {
        self.state.telemetry_requests.lock().unwrap().clone()
    }

    /// The API keys of requests the fake broker does not serve, as they came.
    pub fn unserved(&self) -> Vec<i16> {
        self.state.unserved.lock().unwrap().clone()
    }

    /// Sets the committed offset (and metadata) of partition `p`, as OffsetFetch answers it.
    pub fn set_committed(&self, p: usize, offset: i64, metadata: &str) {
        self.state.committed.lock().unwrap()[p] = Some((offset, metadata.to_string()));
    }

    /// The committed offset and metadata of partition `p`.
    pub fn committed(&self, p: usize) -> Option<(i64, String)> {
        self.state.committed.lock().unwrap()[p].clone()
    }

    /// How many fetch requests asked for partition `p`.
    pub fn fetches_of(&self, p: usize) -> usize {
        self.state.fetches[p].load(Ordering::Relaxed)
    }

    /// Every Heartbeat from now on is answered with `code` (0: none).
    pub fn set_heartbeat_error(&self, code: i16) {
        self.state.heartbeat_error.store(code, Ordering::Relaxed);
    }

    /// The next `count` OffsetCommits are answered with `code` on every partition (nothing is
    /// committed).
    pub fn fail_commits(&self, code: i16, count: usize) {
        self.state.commit_error.store(code, Ordering::Relaxed);
        self.state.commit_failures.store(count, Ordering::Relaxed);
    }

    /// The offsets of partition `p` in the OffsetCommits answered with an error so far.
    pub fn refused_commits(&self, p: i32) -> Vec<i64> {
        let refused = self.state.refused_commits.lock().unwrap();
        refused
            .iter()
            .filter(|(rp, _)| *rp == p)
            .map(|(_, o)| *o)
            .collect()
    }

    /// From now on, requests of `api` are read and never answered, on connections that stay
    /// open (the others' requests are still answered on them): a broker that hangs in one code
    /// path.
    pub fn stall(&self, api: ApiKey) {
        self.state.stalled.lock().unwrap().push(api);
    }

    /// Heartbeats received so far.
    pub fn heartbeats(&self) -> usize {
        self.state.heartbeats.load(Ordering::Relaxed)
    }

    /// Heartbeats answered with the error of [`FakeBroker::set_heartbeat_error`] so far.
    pub fn heartbeats_failed(&self) -> usize {
        self.state.heartbeats_failed.load(Ordering::Relaxed)
    }

    /// KIP-320: Metadata names leader epoch `epoch` for every partition from now on (a new
    /// leader, as far as a client can tell).
    pub fn set_leader_epoch(&self, epoch: i32) {
        self.state.leader_epoch.store(epoch, Ordering::Relaxed);
    }

    /// OffsetForLeaderEpoch answers that the log of the last epoch at or below the one asked is
    /// `epoch`, ending at `end_offset`, for every partition (a truncated log, when below what a
    /// client read). Fetch answers go on as before.
    pub fn set_epoch_end(&self, epoch: i32, end_offset: i64) {
        *self.state.epoch_end.lock().unwrap() = Some((epoch, end_offset));
    }

    /// The next `count` partition answers of OffsetForLeaderEpoch are `code`.
    pub fn fail_epoch_requests(&self, code: i16, count: usize) {
        self.state.epoch_error.store(code, Ordering::Relaxed);
        self.state.epoch_failures.store(count, Ordering::Relaxed);
    }

    /// ApiVersions leaves OffsetForLeaderEpoch out from now on (for connections made after).
    pub fn without_offset_for_leader_epoch(&self) {
        self.state
            .offset_for_leader_epoch
            .store(false, Ordering::Relaxed);
    }

    /// (partition, current_leader_epoch, leader_epoch) of each partition OffsetForLeaderEpoch
    /// asked about so far.
    pub fn epoch_requests(&self) -> Vec<(i32, i32, i32)> {
        self.state.epoch_requests.lock().unwrap().clone()
    }

    /// Metadata requests answered so far.
    pub fn metadata_requests(&self) -> usize {
        self.state.metadata_requests.load(Ordering::Relaxed)
    }
}

impl FakeBroker {
    /// Answers InitProducerId with `code` from now on.
    pub fn set_init_producer_id_error(&self, code: i16) {
        self.state
            .init_producer_id_error
            .store(code, Ordering::Relaxed);
    }

    /// InitProducerId requests answered so far.
    pub fn init_producer_id_requests(&self) -> usize {
        self.state.init_producer_id_requests.load(Ordering::Relaxed)
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn serve(mut sock: TcpStream, st: Arc<State>) -> anyhow::Result<()> {
    sock.set_nodelay(true)?;
    loop {
        let mut len = [0u8; 4];
        if sock.read_exact(&mut len).await.is_err() {
            return Ok(()); // the client closed
        }
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        sock.read_exact(&mut frame).await?;
        anyhow::ensure!(frame.len() >= 4, "short request frame");
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]]))
            .map_err(|_| anyhow::anyhow!("unknown api key"))?;
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let mut buf = Bytes::from(frame);
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version))?;
        if st.stalled.lock().unwrap().contains(&api) {
            continue;
        }
        let mut body = BytesMut::new();
        match api {
            ApiKey::ApiVersions => {
                ApiVersionsRequest::decode(&mut buf, version)?;
                let mut answer = api_versions(
                    st.fetch_max_version,
                    st.api_versions_max,
                    st.offset_for_leader_epoch.load(Ordering::Relaxed),
                );
                if st.telemetry.load(Ordering::Relaxed) {
                    for key in [ApiKey::GetTelemetrySubscriptions, ApiKey::PushTelemetry] {
                        answer.api_keys.push(
                            ApiVersion::default()
                                .with_api_key(key as i16)
                                .with_min_version(0)
                                .with_max_version(0),
                        );
                    }
                }
                match st.api_versions_max {
                    Some(max) if version > max => answer
                        .with_error_code(lagless::error::codes::UNSUPPORTED_VERSION)
                        .encode(&mut body, 0)?,
                    _ => answer.encode(&mut body, version)?,
                }
            }
            ApiKey::Metadata => {
                let req = MetadataRequest::decode(&mut buf, version)?;
                metadata(&st, &req).encode(&mut body, version)?;
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut buf, version)?;
                list_offsets(&st, &req).encode(&mut body, version)?;
            }
            ApiKey::OffsetForLeaderEpoch => {
                let req = OffsetForLeaderEpochRequest::decode(&mut buf, version)?;
                offset_for_leader_epoch(&st, &req).encode(&mut body, version)?;
            }
            ApiKey::Fetch => {
                let req = FetchRequest::decode(&mut buf, version)?;
                fetch(&st, &req).await.encode(&mut body, version)?;
            }
            ApiKey::FindCoordinator => {
                let req = FindCoordinatorRequest::decode(&mut buf, version)?;
                find_coordinator(&st, &req, version).encode(&mut body, version)?;
            }
            ApiKey::OffsetFetch => {
                let req = OffsetFetchRequest::decode(&mut buf, version)?;
                offset_fetch(&st, &req).encode(&mut body, version)?;
            }
            ApiKey::OffsetCommit => {
                let req = OffsetCommitRequest::decode(&mut buf, version)?;
                offset_commit(&st, &req).encode(&mut body, version)?;
            }
            ApiKey::JoinGroup => {
                let req = JoinGroupRequest::decode(&mut buf, version)?;
                join_group(&req).encode(&mut body, version)?;
            }
            ApiKey::SyncGroup => {
                let req = SyncGroupRequest::decode(&mut buf, version)?;
                sync_group(&req).encode(&mut body, version)?;
            }
            ApiKey::Heartbeat => {
                HeartbeatRequest::decode(&mut buf, version)?;
                heartbeat(&st).encode(&mut body, version)?;
            }
            ApiKey::LeaveGroup => {
                LeaveGroupRequest::decode(&mut buf, version)?;
                LeaveGroupResponse::default().encode(&mut body, version)?;
            }
            ApiKey::InitProducerId => {
                InitProducerIdRequest::decode(&mut buf, version)?;
                st.init_producer_id_requests.fetch_add(1, Ordering::Relaxed);
                let code = st.init_producer_id_error.load(Ordering::Relaxed);
                let (id, epoch) = if code == 0 { (1000, 0) } else { (-1, -1) };
                InitProducerIdResponse::default()
                    .with_error_code(code)
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch)
                    .encode(&mut body, version)?;
            }
            ApiKey::GetTelemetrySubscriptions if st.telemetry.load(Ordering::Relaxed) => {
                let req = GetTelemetrySubscriptionsRequest::decode(&mut buf, version)?;
                let mut log = st.telemetry_requests.lock().unwrap();
                log.push(TelemetryRequest::Subscribe(req.client_instance_id));
                let subscriptions = log
                    .iter()
                    .filter(|r| matches!(r, TelemetryRequest::Subscribe(_)))
                    .count();
                GetTelemetrySubscriptionsResponse::default()
                    .with_client_instance_id(uuid::Uuid::from_u128(CLIENT_INSTANCE_ID))
                    .with_subscription_id(subscriptions as i32)
                    .with_push_interval_ms(PUSH_INTERVAL.as_millis() as i32)
                    .with_telemetry_max_bytes(1 << 20)
                    .with_delta_temporality(true)
                    .with_requested_metrics(vec![StrBytes::from_static_str(
                        "org.apache.kafka.consumer.",
                    )])
                    .encode(&mut body, version)?;
            }
            ApiKey::PushTelemetry if st.telemetry.load(Ordering::Relaxed) => {
                let req = PushTelemetryRequest::decode(&mut buf, version)?;
                st.telemetry_requests
                    .lock()
                    .unwrap()
                    .push(TelemetryRequest::Push {
                        client_instance_id: req.client_instance_id,
                        subscription_id: req.subscription_id,
                        terminating: req.terminating,
                        compression_type: req.compression_type,
                        metrics: req.metrics.to_vec(),
                    });
                let code = st.push_errors.lock().unwrap().pop_front().unwrap_or(0);
                PushTelemetryResponse::default()
                    .with_error_code(code)
                    .encode(&mut body, version)?;
            }
            other => {
                st.unserved.lock().unwrap().push(other as i16);
                anyhow::bail!("the fake broker does not serve {other:?}")
            }
        }
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, api.response_header_version(version))?;
        out.extend_from_slice(&body);
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        sock.write_all(&out).await?;
    }
}

/// The versions lagless needs, as far as it goes (a real 4.x broker offers more).
fn api_versions(
    fetch_max_version: Option<i16>,
    api_versions_max: Option<i16>,
    offset_for_leader_epoch: bool,
) -> ApiVersionsResponse {
    fn v<M: Message>(key: ApiKey) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(key as i16)
            .with_min_version(M::VERSIONS.min)
            .with_max_version(lagless_max_version(key))
    }
    let mut keys = vec![
        match api_versions_max {
            Some(max) => ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions as i16)
                .with_min_version(0)
                .with_max_version(max),
            None => v::<ApiVersionsRequest>(ApiKey::ApiVersions),
        },
        v::<MetadataRequest>(ApiKey::Metadata),
        v::<ListOffsetsRequest>(ApiKey::ListOffsets),
        v::<FindCoordinatorRequest>(ApiKey::FindCoordinator),
        v::<OffsetFetchRequest>(ApiKey::OffsetFetch),
        v::<OffsetCommitRequest>(ApiKey::OffsetCommit),
        v::<JoinGroupRequest>(ApiKey::JoinGroup),
        v::<SyncGroupRequest>(ApiKey::SyncGroup),
        v::<HeartbeatRequest>(ApiKey::Heartbeat),
        v::<LeaveGroupRequest>(ApiKey::LeaveGroup),
        v::<InitProducerIdRequest>(ApiKey::InitProducerId),
        match fetch_max_version {
            Some(max) => ApiVersion::default()
                .with_api_key(ApiKey::Fetch as i16)
                .with_min_version(0)
                .with_max_version(max),
            None => v::<FetchRequest>(ApiKey::Fetch),
        },
    ];
    if offset_for_leader_epoch {
        keys.push(v::<OffsetForLeaderEpochRequest>(
            ApiKey::OffsetForLeaderEpoch,
        ));
    }
    ApiVersionsResponse::default().with_api_keys(keys)
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn metadata(st: &State, req: &MetadataRequest) -> MetadataResponse {
    st.metadata_requests.fetch_add(1, Ordering::Relaxed);
    let leader_epoch = st.leader_epoch.load(Ordering::Relaxed);
    let names: Vec<String> = match &req.topics {
        None => vec![st.topic.clone()],
        Some(ts) => ts
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect(),
    };
    let topics = names
        .into_iter()
        .map(|name| {
            if name != st.topic {
                return MetadataResponseTopic::default()
                    .with_name(Some(topic_name(&name)))
                    .with_error_code(3); // UNKNOWN_TOPIC_OR_PARTITION
            }
            let partitions = st
                .partitions
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let leader = if matches!(b, Behavior::NoLeader) {
                        -1
                    } else {
                        NODE_ID
                    };
                    MetadataResponsePartition::default()
                        .with_partition_index(i as i32)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(leader_epoch)
                        .with_replica_nodes(vec![BrokerId(NODE_ID)])
                        .with_isr_nodes(vec![BrokerId(NODE_ID)])
                })
                .collect();
            MetadataResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_partitions(partitions)
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(NODE_ID))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(st.port as i32)])
        .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster")))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
}

fn list_offsets(st: &State, req: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_leader_epoch(0);
                    let i = p.partition_index as usize;
                    if t.name.0.as_str() != st.topic || i >= st.partitions.len() {
                        return r.with_error_code(3);
                    }
                    if matches!(st.partitions[i], Behavior::NoLeader) {
                        return r.with_error_code(6); // NOT_LEADER_OR_FOLLOWER
                    }
                    let end = st.available(i);
                    let (offset, ts) = match p.timestamp {
                        -2 => (0, -1),
                        -1 => (end, -1),
                        ts => {
                            // Record o has timestamp BASE + o.
                            let o = (ts - BASE_TIMESTAMP).max(0);
                            if o < end {
                                (o, BASE_TIMESTAMP + o)
                            } else {
                                (-1, -1)
                            }
                        }
                    };
                    r.with_offset(offset).with_timestamp(ts)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// The records of partition `p` from `from` to `to` (exclusive), as one batch.
fn batch(from: i64, to: i64) -> Bytes {
    let mut b = BatchBuilder::new(Compression::None);
    for o in from..to {
        b.push(
            BASE_TIMESTAMP + o,
            Some(format!("k{o}").as_bytes()),
            Some(format!("v{o}").as_bytes()),
            &[],
        );
    }
    let mut bytes = b.finish().unwrap().to_vec();
    // The builder writes base offset 0 and no leader epoch (a producer's batch); a broker's log
    // has real offsets, and its leader's epoch (0). Both are outside the CRC.
    bytes[..8].copy_from_slice(&from.to_be_bytes());
    bytes[12..16].copy_from_slice(&0i32.to_be_bytes());
    Bytes::from(bytes)
}

async fn fetch(st: &State, req: &FetchRequest) -> FetchResponse {
    let wait_until = Instant::now() + Duration::from_millis(req.max_wait_ms.clamp(0, 500) as u64);
    loop {
        let mut any_data = false;
        let responses: Vec<FetchableTopicResponse> = req
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|fp| {
                        let i = fp.partition as usize;
                        let pd = PartitionData::default()
                            .with_partition_index(fp.partition)
                            .with_log_start_offset(0);
                        if t.topic.0.as_str() != st.topic || i >= st.partitions.len() {
                            return pd.with_error_code(3).with_high_watermark(-1);
                        }
                        match st.partitions[i] {
                            Behavior::FetchError(code) => pd
                                .with_error_code(code)
                                .with_high_watermark(-1)
                                .with_records(Some(Bytes::new())),
                            Behavior::NoLeader => pd
                                .with_error_code(6)
                                .with_high_watermark(-1)
                                .with_records(Some(Bytes::new())),
                            Behavior::TruncatedTail { .. } => {
                                let end = st.available(i);
                                let pd = pd.with_high_watermark(end).with_last_stable_offset(end);
                                let from = fp.fetch_offset;
                                if from > end || from < 0 {
                                    return pd.with_error_code(1);
                                }
                                let to = end.min(from + RECORDS_PER_FETCH);
                                let mut records = BytesMut::new();
                                if to > from {
                                    any_data = true;
                                    records.extend_from_slice(&batch(from, to));
                                    let next_to = end.min(to + RECORDS_PER_FETCH);
                                    if next_to > to {
                                        let next = batch(to, next_to);
                                        records.extend_from_slice(&next[..next.len() / 2]);
                                    }
                                }
                                pd.with_records(Some(records.freeze()))
                            }
                            Behavior::Backlog {
                                fail_below,
                                fail_for,
                                code,
                                ..
                            } if fp.fetch_offset < fail_below
                                && st.started.elapsed() < fail_for =>
                            {
                                pd.with_error_code(code)
                                    .with_high_watermark(-1)
                                    .with_records(Some(Bytes::new()))
                            }
                            Behavior::CorruptCrc { .. } => {
                                let end = st.available(i);
                                let pd = pd.with_high_watermark(end).with_last_stable_offset(end);
                                if fp.fetch_offset > end || fp.fetch_offset < 0 {
                                    return pd.with_error_code(1);
                                }
                                let to = end.min(fp.fetch_offset + RECORDS_PER_FETCH);
                                if to <= fp.fetch_offset {
                                    return pd.with_records(Some(Bytes::new()));
                                }
                                any_data = true;
                                let mut bytes = batch(fp.fetch_offset, to).to_vec();
                                // The CRC follows base offset (8), length (4), leader epoch
                                // (4) and magic (1).
                                bytes[17] ^= 0xff;
                                pd.with_records(Some(Bytes::from(bytes)))
                            }
                            Behavior::Records { .. } | Behavior::Backlog { .. } => {
                                let end = st.available(i);
                                let pd = pd.with_high_watermark(end).with_last_stable_offset(end);
                                if fp.fetch_offset > end || fp.fetch_offset < 0 {
                                    return pd.with_error_code(1); // OFFSET_OUT_OF_RANGE
                                }
                                let to = end.min(fp.fetch_offset + RECORDS_PER_FETCH);
                                if to > fp.fetch_offset {
                                    any_data = true;
                                    pd.with_records(Some(batch(fp.fetch_offset, to)))
                                } else {
                                    pd.with_records(Some(Bytes::new()))
                                }
                            }
                        }
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(partitions)
            })
            .collect();
        // Like a broker: hold an empty answer up to max.wait (capped), in case data arrives.
        if any_data || Instant::now() >= wait_until {
            for t in &req.topics {
                for fp in &t.partitions {
                    if let Some(c) = st.fetches.get(fp.partition as usize) {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            return FetchResponse::default().with_responses(responses);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// This node coordinates every group.
fn find_coordinator(
    st: &State,
    req: &FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version < 4 {
        return FindCoordinatorResponse::default()
            .with_node_id(BrokerId(NODE_ID))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(st.port as i32);
    }
    let coordinators = req
        .coordinator_keys
        .iter()
        .map(|k| {
            Coordinator::default()
                .with_key(k.clone())
                .with_node_id(BrokerId(NODE_ID))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(st.port as i32)
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

fn offset_fetch(st: &State, req: &OffsetFetchRequest) -> OffsetFetchResponse {
    let committed = st.committed.lock().unwrap();
    let topics = req
        .topics
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let (offset, metadata) = committed
                        .get(p as usize)
                        .cloned()
                        .flatten()
                        .unwrap_or((-1, String::new()));
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(offset)
                        .with_metadata(Some(StrBytes::from_string(metadata)))
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

fn offset_commit(st: &State, req: &OffsetCommitRequest) -> OffsetCommitResponse {
    let failing = st
        .commit_failures
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        let code = st.commit_error.load(Ordering::Relaxed);
        st.refused_commits.lock().unwrap().extend(
            req.topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| (p.partition_index, p.committed_offset)),
        );
        let topics = req
            .topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        return OffsetCommitResponse::default().with_topics(topics);
    }
    let mut committed = st.committed.lock().unwrap();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index);
                    match committed.get_mut(p.partition_index as usize) {
                        Some(slot) if t.name.0.as_str() == st.topic => {
                            let metadata = p
                                .committed_metadata
                                .as_ref()
                                .map(|m| m.to_string())
                                .unwrap_or_default();
                            *slot = Some((p.committed_offset, metadata));
                            r
                        }
                        _ => r.with_error_code(3),
                    }
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// The member of a one-member group, always in generation 1.
const MEMBER_ID: &str = "fake-member-1";
const GENERATION: i32 = 1;

/// Every join makes the joining member the leader and only member of generation 1, with the
/// first assignor it offers.
fn join_group(req: &JoinGroupRequest) -> JoinGroupResponse {
    let Some(first) = req.protocols.first() else {
        return JoinGroupResponse::default().with_error_code(23); // INCONSISTENT_GROUP_PROTOCOL
    };
    JoinGroupResponse::default()
        .with_generation_id(GENERATION)
        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
        .with_protocol_name(Some(first.name.clone()))
        .with_leader(StrBytes::from_static_str(MEMBER_ID))
        .with_member_id(StrBytes::from_static_str(MEMBER_ID))
        .with_members(vec![JoinGroupResponseMember::default()
            .with_member_id(StrBytes::from_static_str(MEMBER_ID))
            .with_group_instance_id(req.group_instance_id.clone())
            .with_metadata(first.metadata.clone())])
}

/// The member gets what it, as the leader, assigned itself.
fn sync_group(req: &SyncGroupRequest) -> SyncGroupResponse {
    let assignment = req
        .assignments
        .iter()
        .find(|a| a.member_id.as_str() == req.member_id.as_str())
        .map(|a| a.assignment.clone())
        .unwrap_or_default();
    SyncGroupResponse::default()
        .with_protocol_type(req.protocol_type.clone())
        .with_protocol_name(req.protocol_name.clone())
        .with_assignment(assignment)
}

fn heartbeat(st: &State) -> HeartbeatResponse {
    st.heartbeats.fetch_add(1, Ordering::Relaxed);
    let code = st.heartbeat_error.load(Ordering::Relaxed);
    if code != 0 {
        st.heartbeats_failed.fetch_add(1, Ordering::Relaxed);
    }
    HeartbeatResponse::default().with_error_code(code)
}

/// KIP-320: where epoch 0 (every record's) ends: the log end, or what the test set. A
/// `current_leader_epoch` other than the Metadata's is fenced as a broker fences it.
fn offset_for_leader_epoch(
    st: &State,
    req: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let leader_epoch = st.leader_epoch.load(Ordering::Relaxed);
    let set = *st.epoch_end.lock().unwrap();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    st.epoch_requests.lock().unwrap().push((
                        p.partition,
                        p.current_leader_epoch,
                        p.leader_epoch,
                    ));
                    let r = EpochEndOffset::default().with_partition(p.partition);
                    let i = p.partition as usize;
                    if t.topic.0.as_str() != st.topic || i >= st.partitions.len() {
                        return r.with_error_code(3);
                    }
                    if st
                        .epoch_failures
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        return r.with_error_code(st.epoch_error.load(Ordering::Relaxed));
                    }
                    if p.current_leader_epoch >= 0 && p.current_leader_epoch < leader_epoch {
                        return r.with_error_code(74); // FENCED_LEADER_EPOCH
                    }
                    if p.current_leader_epoch > leader_epoch {
                        return r.with_error_code(75); // UNKNOWN_LEADER_EPOCH
                    }
                    let (epoch, end) = set.unwrap_or((0, st.available(i)));
                    r.with_leader_epoch(epoch).with_end_offset(end)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

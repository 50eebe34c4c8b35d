//! The client's view of the cluster: bootstrap, brokers, topic metadata with leaders and leader
//! epochs, connections per broker (reconnected with backoff), and coordinator lookup.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

mod health;

use health::{Health, Raised};

use crate::backoff::{retry_until, retry_until_if, Backoff, Deadline, Retry};
use crate::buffers::AnswerPool;
use crate::config::CommonConfig;
use crate::error::{codes, kafka_error_action, Action, Error, Result};
use crate::net::{broker_metrics, BrokerSnapshot, Connection, ConnectionStats, LaneStats};
use crate::protocol::msg::{
    create_topics_request::CreatableTopic, CreateTopicsRequest, FindCoordinatorRequest, StrBytes,
    TopicName,
};
use crate::sync::Unpoisoned;

/// The wait before reconnecting to a broker whose connection was lost: the reconnect backoff
/// (`reconnect.backoff.ms` doubling up to `reconnect.backoff.max.ms`), started afresh when the
/// lost connection had served a request (`served`), else grown by one more failure, as when
/// the connection could not be made at all.
fn reconnect_wait(retry: &mut Retry, served: bool) -> Duration {
    if served {
        retry.succeeded();
    }
    retry.failed()
}

/// How often at most a broker that cannot be reached is reported at WARN while the failures go on.
const CONNECT_WARNING_INTERVAL: Duration = Duration::from_secs(30);

/// What is said of one broker's failed connection attempts. A client pointed at nothing must say
/// so at the default level at once, as the Java client and librdkafka do; but it retries every
/// `reconnect.backoff.max.ms`, and a line per attempt would bury everything else. So: the first
/// failure of a run at WARN, then at most one WARN per [`CONNECT_WARNING_INTERVAL`] counting the
/// attempts since the last one (the others at DEBUG), and the connection that ends a warned run at
/// INFO with its count.
#[derive(Debug, Default)]
struct ConnectFailures {
    /// Failed attempts since the last connection that succeeded.
    in_row: u32,
    /// Failed attempts since the last warning.
    since_warned: u32,
    last_warned: Option<Instant>,
}

impl ConnectFailures {
    /// A failed attempt at `now`: `Some(attempts since the last warning, this one included)` if
    /// it is to be reported at WARN.
    fn failed(&mut self, now: Instant) -> Option<u32> {
        self.in_row += 1;
        self.since_warned += 1;
        let due = self
            .last_warned
            .is_none_or(|at| now.saturating_duration_since(at) >= CONNECT_WARNING_INTERVAL);
        if !due {
            return None;
        }
        self.last_warned = Some(now);
        Some(std::mem::take(&mut self.since_warned))
    }

    /// A connection made: `Some(failed attempts before it)` if the run was reported at WARN.
    fn connected(&mut self) -> Option<u32> {
        let warned = self.last_warned.take().is_some();
        let in_row = std::mem::take(&mut self.in_row);
        self.since_warned = 0;
        warned.then_some(in_row)
    }
}

/// A partition's place in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    /// -1 while the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub error_code: i16,
}

#[derive(Debug, Clone)]
pub struct TopicInfo {
    pub name: String,
    /// The topic's id (KIP-516; nil from a broker too old to say): KIP-848 assignments name
    /// topics by it.
    pub topic_id: uuid::Uuid,
    pub error_code: i16,
    pub is_internal: bool,
    pub partitions: Vec<PartitionInfo>,
}

/// One metadata snapshot.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub brokers: BTreeMap<i32, String>,
    pub topics: BTreeMap<String, TopicInfo>,
    pub fetched_at: Option<Instant>,
}

impl Metadata {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        self.topics
            .get(topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)
    }
}

struct Slot {
    addr: String,
    conn: Option<Arc<Connection>>,
    retry: Retry,
    next_attempt: Instant,
    failures: ConnectFailures,
    /// What this slot's connections did, also in [`Cluster::stats`] (read without the slot's
    /// lock, which a connection setup holds).
    stats: Arc<ConnectionStats>,
}

/// Which of the connections to a broker a request goes on. A broker answers the requests of one
/// connection in order, so a request that may wait (a Fetch at the log end waits up to
/// `fetch.max.wait.ms`) holds up everything behind it: group coordination and the recovery
/// streams' fetches get connections of their own, as the Java client gives the coordinator one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Metadata, the main streams' fetches, ListOffsets, produce.
    Default,
    /// The group coordinator's requests (heartbeat, commit, offset fetch, leave).
    Coordinator,
    /// JoinGroup and SyncGroup: the broker answers them only once the group's other members
    /// have rejoined (or its leader has assigned), so a heartbeat, commit or LeaveGroup behind
    /// one on the same connection would wait for the whole rebalance.
    Join,
    /// KIP-333 recovery streams' fetches.
    Recovery,
}

type SharedSlot = Arc<Mutex<Slot>>;

/// Shared by the consumer's and producer's tasks; cheap to clone behind an `Arc`.
pub struct Cluster {
    pub config: CommonConfig,
    metadata: RwLock<Arc<Metadata>>,
    /// broker id -> connection slot. Bootstrap servers use ids -1, -2, ...
    slots: StdMutex<HashMap<(i32, Lane), SharedSlot>>,
    /// The slots' counts, for [`Cluster::broker_metrics`].
    stats: StdMutex<HashMap<(i32, Lane), Arc<ConnectionStats>>>,
    /// Topics whose metadata the client keeps; `None` in the set means "all topics" (a pattern
    /// subscription).
    interest: StdMutex<(BTreeSet<String>, bool)>,
    refresh_lock: Mutex<()>,
    /// The latest metadata failure, so a caller that timed out waiting for another refresh can
    /// say why the cluster did not answer.
    last_refresh_error: StdMutex<Option<Error>>,
    /// The buffers every connection reads its answers into.
    answers: Arc<AnswerPool>,
    /// Whole-cluster conditions for the application's error callback (see `health`).
    health: Arc<HealthWatch>,
}

/// The cluster's [`Health`] and what it raised, shared with the connection setups' tasks.
#[derive(Debug, Default)]
pub(crate) struct HealthWatch {
    health: StdMutex<Health>,
    raised: Raised,
}

impl HealthWatch {
    fn attempted(
        &self,
        addr: &str,
        outcome: std::result::Result<(), &Error>,
        known: &BTreeSet<String>,
    ) {
        let raise = self
            .health
            .lock()
            .unpoisoned()
            .attempted(addr, outcome, known);
        for e in &raise {
            tracing::error!("{e}");
        }
        self.raised.push(raise);
    }
}

impl Cluster {
    pub fn new(config: CommonConfig) -> Arc<Cluster> {
        Cluster::with_answers(config, Arc::new(AnswerPool::new()))
    }

    /// A cluster whose connections read their answers into `answers` (a consumer's pool,
    /// counted against its `fetch.buffer.max.bytes`).
    pub fn with_answers(config: CommonConfig, answers: Arc<AnswerPool>) -> Arc<Cluster> {
        Arc::new(Cluster {
            config,
            metadata: RwLock::new(Arc::new(Metadata::default())),
            slots: StdMutex::new(HashMap::new()),
            stats: StdMutex::new(HashMap::new()),
            interest: StdMutex::new((BTreeSet::new(), false)),
            refresh_lock: Mutex::new(()),
            last_refresh_error: StdMutex::new(None),
            answers,
            health: Arc::default(),
        })
    }

    /// Raises a whole-cluster condition found outside the connection setup (the group
    /// coordinator silent for a session) for the application's error callback.
    pub(crate) fn raise(&self, e: Error) {
        tracing::error!("{e}");
        self.health.raised.push([e]);
    }

    /// The conditions raised since the last call, oldest first (see `health`), for the
    /// application's error callback.
    pub(crate) fn take_raised(&self) -> Vec<Error> {
        self.health.raised.take()
    }

    /// The addresses the client knows: its bootstrap servers and the brokers of the last
    /// metadata.
    fn known_addresses(&self) -> BTreeSet<String> {
        let mut known: BTreeSet<String> = self.config.bootstrap_servers.iter().cloned().collect();
        known.extend(self.metadata().brokers.values().cloned());
        known
    }

    pub fn backoff(&self) -> Backoff {
        Backoff::new(self.config.retry_backoff, self.config.retry_backoff_max)
    }

    /// The latest metadata snapshot.
    pub fn metadata(&self) -> Arc<Metadata> {
        self.metadata.read().unpoisoned().clone()
    }

    /// Adds topics whose metadata the client must keep.
    pub fn add_interest<'a>(&self, topics: impl IntoIterator<Item = &'a String>) {
        let mut i = self.interest.lock().unpoisoned();
        i.0.extend(topics.into_iter().cloned());
    }

    /// Replaces the topics of interest (a new subscription), or asks for all topics.
    pub fn set_interest(&self, topics: BTreeSet<String>, all: bool) {
        *self.interest.lock().unpoisoned() = (topics, all);
    }

    /// Whether a topic of interest has no usable answer in the latest metadata: the cluster
    /// does not have it (yet), or it is still being created. A subscribed topic created after
    /// `subscribe()` is then noticed by refreshing sooner than `metadata.max.age.ms`, as the
    /// Java client does for topics whose metadata came back with an error.
    pub fn interest_missing(&self) -> bool {
        let meta = self.metadata();
        let interest = self.interest.lock().unpoisoned();
        interest.0.iter().any(|t| {
            meta.topics
                .get(t)
                .is_none_or(|info| info.error_code != codes::NONE)
        })
    }

    fn slot(&self, id: i32, lane: Lane, addr: &str) -> Arc<Mutex<Slot>> {
        let mut slots = self.slots.lock().unpoisoned();
        let slot = slots.entry((id, lane)).or_insert_with(|| {
            let stats = Arc::new(ConnectionStats::default());
            self.stats
                .lock()
                .unpoisoned()
                .insert((id, lane), stats.clone());
            Arc::new(Mutex::new(Slot {
                stats,
                addr: addr.to_string(),
                conn: None,
                retry: Retry::new(Backoff::new(
                    self.config.reconnect_backoff,
                    self.config.reconnect_backoff_max,
                )),
                next_attempt: Instant::now(),
                failures: ConnectFailures::default(),
            }))
        });
        slot.clone()
    }

    /// A live connection of `slot` (to `addr`), connecting if there is none.
    ///
    /// The connection setup (TCP, TLS, ApiVersions, SASL) runs in a task of its own that holds
    /// the slot: a caller waits for it no longer than its own deadline, and a setup the caller
    /// gave up on goes on, bounded by `socket.connection.setup.timeout.ms` and
    /// `request.timeout.ms`, for the next caller to find done. Cutting the setup at each caller's
    /// deadline instead would let callers with short deadlines restart it forever; waiting for
    /// it would make a call overrun its deadline by up to `request.timeout.ms` (ApiVersions
    /// against a broker that accepts connections and never answers).
    async fn connect_slot(
        &self,
        slot: &Arc<Mutex<Slot>>,
        addr: &str,
        deadline: Deadline,
    ) -> Result<Arc<Connection>> {
        let too_long = || {
            Error::Timeout(format!(
                "connecting to broker {addr} did not complete within the deadline ({} ms); \
                 the attempt goes on in the background",
                deadline.timeout().as_millis()
            ))
        };
        // Another task may be connecting to this broker: wait for it no longer than this
        // caller's deadline.
        let Ok(mut s) =
            tokio::time::timeout_at(deadline.instant().into(), slot.clone().lock_owned()).await
        else {
            return Err(too_long());
        };
        // A broker that moved (restart on another address) starts afresh at its new address.
        if s.addr != addr {
            s.addr = addr.to_string();
            s.conn = None;
        }
        if let Some(c) = s.conn.take() {
            if c.is_alive() {
                s.conn = Some(c.clone());
                return Ok(c);
            }
            // Lost: the next attempt waits its backoff, as after a failed one.
            let wait = reconnect_wait(&mut s.retry, c.answered_after_setup());
            s.next_attempt = s.next_attempt.max(Instant::now() + wait);
        }
        // Reconnect backoff: wait out the rest of it, but never past the caller's deadline.
        let now = Instant::now();
        if s.next_attempt > now {
            if s.next_attempt >= deadline.instant() {
                return Err(Error::Transport(format!(
                    "broker {} is unreachable (waiting reconnect.backoff before the next attempt)",
                    s.addr
                )));
            }
            tokio::time::sleep_until(s.next_attempt.into()).await;
        }
        let security = self.config.security.clone();
        let client_id = self.config.client_id.clone();
        let setup_timeout = self.config.socket_connection_setup_timeout;
        let request_timeout = self.config.request_timeout;
        let answers = self.answers.clone();
        let health = self.health.clone();
        let known = self.known_addresses();
        let setup = tokio::spawn(async move {
            let addr = s.addr.clone();
            let stats = s.stats.clone();
            stats.setup_started();
            let connected = Connection::connect(
                &addr,
                &security,
                &client_id,
                setup_timeout,
                request_timeout,
                answers,
                stats.clone(),
            )
            .await
            .map(Arc::new);
            stats.setup_ended(connected.as_ref().ok());
            match connected {
                // The failures in a row are forgotten once a connection has served a request
                // (`reconnect_wait`), not here: a broker that accepts connections and cuts each
                // one right after the setup would otherwise be reconnected to at once, forever.
                Ok(c) => {
                    health.attempted(&addr, Ok(()), &known);
                    if let Some(failed) = s.failures.connected() {
                        tracing::info!(
                            broker = %addr,
                            "connected to broker {addr} after {failed} failed attempts"
                        );
                    }
                    s.conn = Some(c.clone());
                    Ok(c)
                }
                Err(e) => {
                    health.attempted(&addr, Err(&e), &known);
                    let now = Instant::now();
                    s.next_attempt = now + s.retry.failed();
                    match s.failures.failed(now) {
                        Some(1) => tracing::warn!("{e} (retrying with reconnect.backoff.ms)"),
                        Some(n) => tracing::warn!(
                            "{e} ({n} failed attempts since the last warning; still retrying)"
                        ),
                        None => tracing::debug!("{e} (retrying)"),
                    }
                    Err(e)
                }
            }
        });
        match tokio::time::timeout_at(deadline.instant().into(), setup).await {
            Ok(Ok(connected)) => connected,
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down (the client closes).
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(too_long()),
        }
    }

    /// A connection to broker `id`, known from metadata.
    pub async fn broker(&self, id: i32, deadline: Deadline) -> Result<Arc<Connection>> {
        self.broker_on(id, Lane::Default, deadline).await
    }

    /// A connection to broker `id` on `lane`.
    pub async fn broker_on(
        &self,
        id: i32,
        lane: Lane,
        deadline: Deadline,
    ) -> Result<Arc<Connection>> {
        let addr = self.metadata().brokers.get(&id).cloned().ok_or_else(|| {
            Error::Transport(format!("broker {id} is not in the cluster metadata"))
        })?;
        self.connect_at(id, lane, addr, deadline).await
    }

    /// A connection on `lane` to broker `id` at `addr` (the group coordinator's comes from
    /// FindCoordinator, which may name a broker the metadata does not list yet).
    pub async fn connect_at(
        &self,
        id: i32,
        lane: Lane,
        addr: String,
        deadline: Deadline,
    ) -> Result<Arc<Connection>> {
        let slot = self.slot(id, lane, &addr);
        self.connect_slot(&slot, &addr, deadline).await
    }

    /// A connection to any broker: known brokers first, then the bootstrap list. Any reachable
    /// bootstrap entry will do.
    pub async fn any_broker(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        let mut candidates: Vec<(i32, String)> = self
            .metadata()
            .brokers
            .iter()
            .map(|(i, a)| (*i, a.clone()))
            .collect();
        for (i, b) in self.config.bootstrap_servers.iter().enumerate() {
            candidates.push((-1 - i as i32, b.clone()));
        }
        // Prefer a connection that is already open.
        for (id, addr) in &candidates {
            let slot = self.slot(*id, Lane::Default, addr);
            // A slot that is locked is being connected (maybe in the background, for longer
            // than this caller may wait): not an open connection.
            let Ok(s) = slot.try_lock() else {
                continue;
            };
            if let Some(c) = &s.conn {
                if c.is_alive() {
                    return Ok(c.clone());
                }
            }
        }
        let mut errors = Vec::new();
        for (id, addr) in &candidates {
            if deadline.expired() {
                break;
            }
            match self
                .connect_slot(&self.slot(*id, Lane::Default, addr), addr, deadline)
                .await
            {
                Ok(c) => return Ok(c),
                // A failed authentication (or TLS check) fails the same way on every broker and
                // will not pass by retrying: report it as it is, not as "no broker reachable".
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(Error::Transport(format!(
            "no broker reachable (bootstrap.servers={}): {}",
            self.config.bootstrap_servers.join(","),
            if errors.is_empty() {
                "deadline passed".to_string()
            } else {
                errors.join("; ")
            }
        )))
    }

    /// Fetches metadata for the topics of interest (and `extra`), retrying with backoff until the
    /// deadline. Concurrent callers share one request.
    ///
    /// The refresh lock is held for one attempt at a time, never across a backoff sleep, and is
    /// waited for no longer than the caller's deadline: a background refresh that keeps failing
    /// (say, every broker down) must not make a caller with a short deadline wait for its own.
    pub async fn refresh(&self, extra: &[String], deadline: Deadline) -> Result<Arc<Metadata>> {
        let started = Instant::now();
        retry_until(self.backoff(), deadline, "metadata request", || async {
            let Ok(_guard) =
                tokio::time::timeout_at(deadline.instant().into(), self.refresh_lock.lock()).await
            else {
                return Err(self.refresh_timed_out());
            };
            // Someone else refreshed while we waited for the lock: that answer is fresh enough.
            let current = self.metadata();
            if current.fetched_at.is_some_and(|t| t >= started)
                && extra.iter().all(|x| current.topics.contains_key(x))
            {
                return Ok(current);
            }
            let (mut topics, all) = self.interest.lock().unpoisoned().clone();
            topics.extend(extra.iter().cloned());
            match self.fetch_metadata(&topics, all, deadline).await {
                Ok(m) => {
                    let m = Arc::new(m);
                    *self.metadata.write().unpoisoned() = m.clone();
                    *self.last_refresh_error.lock().unpoisoned() = None;
                    Ok(m)
                }
                Err(e) => {
                    *self.last_refresh_error.lock().unpoisoned() = Some(e.clone());
                    Err(e)
                }
            }
            // The refresh lock is released here, before retry_until's backoff sleep.
        })
        .await
    }

    /// The error for a refresh whose deadline passed while another one held the lock: the
    /// other one's latest failure is the most useful thing to say.
    fn refresh_timed_out(&self) -> Error {
        match self.last_refresh_error.lock().unpoisoned().clone() {
            Some(e) => e,
            None => Error::Timeout("metadata refresh did not finish before the deadline".into()),
        }
    }

    async fn fetch_metadata(
        &self,
        topics: &BTreeSet<String>,
        all: bool,
        deadline: Deadline,
    ) -> Result<Metadata> {
        let conn = self.any_broker(deadline).await?;
        let req = crate::protocol::metadata::metadata(topics, all);
        let timeout = self
            .config
            .request_timeout
            .min(deadline.remaining().max(Duration::from_millis(1)));
        let resp = conn.call_with_timeout(&req, timeout).await?;
        let mut m = Metadata {
            fetched_at: Some(Instant::now()),
            ..Default::default()
        };
        for b in &resp.brokers {
            m.brokers
                .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
        }
        for t in resp.topics {
            let Some(name) = t.name else { continue };
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            m.topics.insert(
                name.0.to_string(),
                TopicInfo {
                    name: name.0.to_string(),
                    topic_id: t.topic_id,
                    error_code: t.error_code,
                    is_internal: t.is_internal,
                    partitions,
                },
            );
        }
        Ok(m)
    }

    /// The partitions of `topic`, refreshing metadata when the topic is not known yet. A topic
    /// the cluster does not have is `Error::UnknownTopic`.
    pub async fn partitions(&self, topic: &str, deadline: Deadline) -> Result<Vec<PartitionInfo>> {
        let mut m = self.metadata();
        if !m.topics.contains_key(topic) {
            self.add_interest([&topic.to_string()]);
            m = self.refresh(&[topic.to_string()], deadline).await?;
        }
        match m.topics.get(topic) {
            Some(t) if t.error_code == codes::NONE => Ok(t.partitions.clone()),
            Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                Err(Error::UnknownTopic(topic.to_string()))
            }
            Some(t) => Err(Error::kafka(
                t.error_code,
                format!("metadata for topic `{topic}`"),
            )),
            None => Err(Error::UnknownTopic(topic.to_string())),
        }
    }

    /// Finds the group coordinator of `group_id` and connects to it.
    pub async fn find_coordinator(
        &self,
        group_id: &str,
        deadline: Deadline,
    ) -> Result<(i32, Arc<Connection>)> {
        // A coordinator that moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) is asked for again.
        let retriable = |e: &Error| {
            e.is_retriable()
                || e.kafka_code().map(kafka_error_action) == Some(Action::RediscoverCoordinator)
        };
        let what = format!("coordinator lookup of group `{group_id}`");
        retry_until_if(self.backoff(), deadline, &what, retriable, || async {
            let conn = self.any_broker(deadline).await?;
            let v = conn.version::<FindCoordinatorRequest>()?;
            let resp = conn
                .call_before(
                    &crate::protocol::group::find_coordinator(group_id, v),
                    deadline,
                )
                .await?;
            let (code, id, addr) = crate::protocol::group::coordinator_of(&resp, v)?;
            if code != codes::NONE {
                return Err(Error::kafka(
                    code,
                    format!("finding the coordinator of group `{group_id}`"),
                ));
            }
            let slot = self.slot(id, Lane::Coordinator, &addr);
            let c = self.connect_slot(&slot, &addr, deadline).await?;
            Ok((id, c))
        })
        .await
    }

    /// Finds the transaction coordinator of `transactional_id` and connects to it; retried
    /// as [`Cluster::find_coordinator`].
    pub async fn find_transaction_coordinator(
        &self,
        transactional_id: &str,
        deadline: Deadline,
    ) -> Result<(i32, Arc<Connection>)> {
        let retriable = |e: &Error| {
            e.is_retriable()
                || e.kafka_code().map(kafka_error_action) == Some(Action::RediscoverCoordinator)
        };
        let what = format!("transaction coordinator lookup of `{transactional_id}`");
        retry_until_if(self.backoff(), deadline, &what, retriable, || async {
            let conn = self.any_broker(deadline).await?;
            let v = conn.version::<FindCoordinatorRequest>()?;
            let resp = conn
                .call_before(
                    &crate::protocol::txn::find_coordinator(transactional_id, v),
                    deadline,
                )
                .await?;
            let (id, addr) = crate::protocol::txn::coordinator(&resp, v, transactional_id)?;
            let slot = self.slot(id, Lane::Coordinator, &addr);
            let c = self.connect_slot(&slot, &addr, deadline).await?;
            Ok((id, c))
        })
        .await
    }

    /// Creates a topic (an admin operation). Any broker will do: KRaft brokers forward the
    /// request to the controller. A topic that exists already is the broker's
    /// `TOPIC_ALREADY_EXISTS` error (`Error::kafka_code() == Some(codes::TOPIC_ALREADY_EXISTS)`).
    /// Transient errors are retried until `deadline`.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        deadline: Deadline,
    ) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "the topic name is empty".to_string(),
            ));
        }
        retry_until(self.backoff(), deadline, "CreateTopics", || async {
            let conn = self.any_broker(deadline).await?;
            let timeout = self
                .config
                .request_timeout
                .min(deadline.remaining().max(Duration::from_millis(1)));
            let req = CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.to_string())))
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication_factor)])
                .with_timeout_ms(timeout.as_millis().min(i32::MAX as u128) as i32);
            let resp = conn.call_with_timeout(&req, timeout).await?;
            let result = resp
                .topics
                .iter()
                .find(|t| t.name.0.as_str() == name)
                .ok_or_else(|| {
                    Error::Corrupt(format!("CreateTopics response does not mention `{name}`"))
                })?;
            if result.error_code != codes::NONE {
                let mut context = format!("creating topic `{name}`");
                if let Some(m) = &result.error_message {
                    context.push_str(": ");
                    context.push_str(m.as_str());
                }
                return Err(Error::kafka(result.error_code, context));
            }
            Ok(())
        })
        .await
    }

    /// Every broker's metrics at `now` (bootstrap servers first, then by node id), and the
    /// Fetch and OffsetCommit answer latencies of all of them.
    pub(crate) fn broker_metrics(&self, now: Instant) -> BrokerSnapshot {
        let stats: Vec<((i32, Lane), Arc<ConnectionStats>)> = self
            .stats
            .lock()
            .unpoisoned()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let mut by_broker: BTreeMap<i32, Vec<LaneStats>> = BTreeMap::new();
        for ((id, _lane), s) in stats {
            by_broker.entry(id).or_default().push(s.read(now));
        }
        let metadata = self.metadata();
        let mut snapshot = BrokerSnapshot::default();
        // Bootstrap servers (-1, -2, ...) in their configured order, then node ids.
        let mut ids: Vec<i32> = by_broker.keys().copied().collect();
        ids.sort_by_key(|id| (*id >= 0, id.abs()));
        for id in ids {
            let lanes = &by_broker[&id];
            for l in lanes {
                snapshot.fetch_latency.merge(&l.fetch_latency);
                snapshot.commit_latency.merge(&l.commit_latency);
                snapshot.produce_latency.merge(&l.produce_latency);
            }
            let (node_id, address) = if id >= 0 {
                (Some(id), metadata.brokers.get(&id).cloned())
            } else {
                let i = usize::try_from(-1 - id).unwrap_or(usize::MAX);
                (None, self.config.bootstrap_servers.get(i).cloned())
            };
            snapshot
                .brokers
                .push(broker_metrics(node_id, address.unwrap_or_default(), lanes));
        }
        snapshot
    }

    /// Drops the connection to broker `id` (after an error that says it is not what we think).
    pub fn disconnect(&self, id: i32, lane: Lane) {
        let slot = self.slots.lock().unpoisoned().get(&(id, lane)).cloned();
        if let Some(slot) = slot {
            if let Ok(mut s) = slot.try_lock() {
                if let Some(c) = s.conn.take() {
                    c.shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cluster_with(topics: &[(&str, i16)]) -> Arc<Cluster> {
        let config = Config::from_pairs([("bootstrap.servers", "127.0.0.1:9")]).unwrap();
        let cluster = Cluster::new(CommonConfig::from_config(&config).unwrap());
        let mut m = Metadata {
            fetched_at: Some(Instant::now()),
            ..Default::default()
        };
        for (name, error_code) in topics {
            m.topics.insert(
                name.to_string(),
                TopicInfo {
                    name: name.to_string(),
                    topic_id: uuid::Uuid::nil(),
                    error_code: *error_code,
                    is_internal: false,
                    partitions: Vec::new(),
                },
            );
        }
        *cluster.metadata.write().unwrap() = Arc::new(m);
        cluster
    }

    /// Lost connections one after another: (whether it had served a request, the base of the
    /// wait before the next attempt, in ms). Jitter puts each wait within 0.8..=1.2 x its base.
    #[test]
    fn a_lost_connection_waits_the_reconnect_backoff_grown_until_one_serves() {
        let ms = Duration::from_millis;
        let mut retry = Retry::new(Backoff::new(ms(100), ms(1000)));
        let table = [
            (false, 100),
            (false, 200),
            (false, 400),
            (false, 800),
            (false, 1000),
            (true, 100),
            (false, 200),
            (true, 100),
            (true, 100),
        ];
        for (i, (served, base)) in table.into_iter().enumerate() {
            let wait = reconnect_wait(&mut retry, served);
            let (low, high) = (ms(base).mul_f64(0.8), ms(base).mul_f64(1.2).min(ms(1000)));
            assert!(
                wait >= low && wait <= high,
                "loss {i} (served: {served}): waited {wait:?}, want {low:?}..={high:?}"
            );
        }
    }

    /// Attempts at (seconds from the start, failed?): which are warned of, with the count of
    /// attempts since the last warning, and which connection reports the run it ends.
    #[test]
    fn an_unreachable_broker_is_warned_of_at_once_then_at_most_every_thirty_seconds() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut f = ConnectFailures::default();
        assert_eq!(
            f.failed(at(0)),
            Some(1),
            "the first failure is warned of at once"
        );
        for s in 1..30 {
            assert_eq!(f.failed(at(s)), None, "second {s}: within the interval");
        }
        assert_eq!(
            f.failed(at(30)),
            Some(30),
            "thirty attempts since the first warning"
        );
        assert_eq!(f.failed(at(31)), None);
        assert_eq!(
            f.connected(),
            Some(32),
            "the run ends: 32 failed attempts before it"
        );
        assert_eq!(f.connected(), None, "nothing to report twice");
        // A new run after a connection is warned of at once again, its count from 1.
        assert_eq!(f.failed(at(32)), Some(1));
        assert_eq!(f.connected(), Some(1));
        // Connections that never failed report nothing.
        let mut quiet = ConnectFailures::default();
        assert_eq!(quiet.connected(), None);
    }

    fn names(topics: &[&str]) -> BTreeSet<String> {
        topics.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn a_topic_of_interest_without_a_usable_answer_is_missing() {
        let cluster = cluster_with(&[
            ("a", codes::NONE),
            ("later", codes::UNKNOWN_TOPIC_OR_PARTITION),
            ("new", codes::LEADER_NOT_AVAILABLE),
        ]);
        assert!(!cluster.interest_missing(), "no interest, nothing missing");
        cluster.set_interest(names(&["a"]), false);
        assert!(!cluster.interest_missing());
        for t in ["later", "new", "not-asked-yet"] {
            cluster.set_interest(names(&["a", t]), false);
            assert!(cluster.interest_missing(), "{t}");
        }
        // A pattern subscription asks for every topic: whatever exists is what it follows.
        cluster.set_interest(BTreeSet::new(), true);
        assert!(!cluster.interest_missing());
    }
}

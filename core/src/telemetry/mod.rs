//! KIP-714 client telemetry: a consumer or producer pushes its metrics to a broker that asks for
//! them, as the Java client, librdkafka (2.5+) and franz-go do ([`collect`] names a consumer's,
//! [`producer`] a producer's). On by default; `enable.metrics.push=false`
//! turns it off (no task, no request).
//!
//! One small task per consumer, on the consumer's runtime, talks to one broker (an open
//! connection if there is one, else the first reachable of the known brokers and the bootstrap
//! list, as `Cluster::any_broker` picks; Java's `ClientTelemetryReporter` takes the least
//! loaded node): GetTelemetrySubscriptions (API 71) first, with the zero client instance id,
//! then PushTelemetry (API 72) every `PushIntervalMs` with the metrics the subscription asks
//! for, OTLP-encoded ([`otlp`]) and compressed as the broker accepts, and a last push marked
//! `Terminating` when the consumer closes, bounded by the close's deadline.
//!
//! What to do next, given the state and an answer, is [`state`] (pure, tested with literal
//! inputs); which metrics, with which values and names, is [`collect`] (pure too); the task
//! here only carries them out. A broker that answers with an error retrying cannot mend, or
//! that lacks the APIs (a Kafka before 3.7, or one with no `ClientTelemetry` plugin, which then
//! does not advertise them), stops the pushes for this consumer, logged once. A request that
//! fails (the connection, a timeout, an answer that does not decode) fetches the subscription
//! again after the cluster's backoff (`retry.backoff.ms` doubling to `retry.backoff.max.ms`).
pub mod collect;
pub mod otlp;
pub mod producer;
pub mod state;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use rand::Rng;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::backoff::{Deadline, Retry};
use crate::cluster::Cluster;
use crate::error::{codes, Error, Result};
use crate::net::Connection;
use crate::protocol::msg::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use crate::protocol::records::compress_payload;
use crate::sync::Unpoisoned;
use collect::Ledger;
use state::{compression_id, Next, SubscriptionAnswer, Telemetry};

/// What one push carries of a client: its points and its resource attributes.
pub(crate) struct Collected {
    pub points: Vec<collect::Point>,
    pub resource: Vec<(&'static str, String)>,
}

/// Takes the client's metrics snapshot as a push carries it ([`collect`] for a consumer,
/// [`producer`] for a producer).
pub(crate) type Snapshot = Arc<dyn Fn() -> Collected + Send + Sync>;

/// The running task, as the consumer holds it.
pub(crate) struct Reporter {
    close: watch::Sender<bool>,
    /// Fired once the terminating push's values are taken (or there is none to send).
    collected: Mutex<Option<oneshot::Receiver<()>>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Reporter {
    /// Starts the task on `runtime`.
    pub(crate) fn spawn(
        runtime: &tokio::runtime::Handle,
        cluster: Arc<Cluster>,
        snapshot: Snapshot,
    ) -> Reporter {
        let (close, close_rx) = watch::channel(false);
        let (collected_tx, collected_rx) = oneshot::channel();
        let task = runtime.spawn(run(cluster, snapshot, close_rx, collected_tx));
        Reporter {
            close,
            collected: Mutex::new(Some(collected_rx)),
            task: Mutex::new(Some(task)),
        }
    }

    /// Tells the task the consumer closes: it sends its terminating push (when a subscription
    /// asks for metrics) and ends. Returns what fires once that push's values are taken.
    pub(crate) fn initiate_close(&self) -> Option<oneshot::Receiver<()>> {
        let _ = self.close.send(true);
        self.collected.lock().unpoisoned().take()
    }

    /// The task, for the one close that waits for it to end.
    pub(crate) fn take_task(&self) -> Option<JoinHandle<()>> {
        self.task.lock().unpoisoned().take()
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Why a request got no usable answer.
enum Failure {
    /// The broker does not speak the API: stop for good.
    Unsupported(String),
    /// Anything else: try again after a backoff.
    Failed(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e.kafka_code() {
            Some(codes::UNSUPPORTED_VERSION) => Failure::Unsupported(e.to_string()),
            _ => Failure::Failed(e),
        }
    }
}

async fn connection(cluster: &Cluster) -> std::result::Result<Arc<Connection>, Failure> {
    let deadline = Deadline::after(cluster.config.request_timeout);
    Ok(cluster.any_broker(deadline).await?)
}

async fn subscribe(
    cluster: &Cluster,
    client_instance_id: uuid::Uuid,
) -> std::result::Result<SubscriptionAnswer, Failure> {
    let conn = connection(cluster).await?;
    // Both APIs or none: a broker that cannot take the pushes is not asked for a subscription.
    conn.version::<PushTelemetryRequest>()?;
    let req =
        GetTelemetrySubscriptionsRequest::default().with_client_instance_id(client_instance_id);
    let a = conn.call(&req).await?;
    Ok(SubscriptionAnswer {
        error_code: a.error_code,
        client_instance_id: a.client_instance_id,
        subscription_id: a.subscription_id,
        accepted_compression_types: a.accepted_compression_types,
        push_interval_ms: a.push_interval_ms,
        telemetry_max_bytes: a.telemetry_max_bytes,
        delta_temporality: a.delta_temporality,
        requested_metrics: a
            .requested_metrics
            .into_iter()
            .map(|s| s.to_string())
            .collect(),
    })
}

async fn push(cluster: &Cluster, req: PushTelemetryRequest) -> std::result::Result<i16, Failure> {
    let conn = connection(cluster).await?;
    Ok(conn.call(&req).await?.error_code)
}

/// The PushTelemetry request of the metrics `snapshot` gives now, as the subscription asks.
fn push_request(
    t: &Telemetry,
    m: Collected,
    terminating: bool,
    ledger: &mut Ledger,
) -> Result<PushTelemetryRequest> {
    let s = t
        .subscription()
        .ok_or_else(|| Error::IllegalState("a push without a subscription".into()))?;
    let data = collect::encode(
        m.points,
        &m.resource,
        &s.selector,
        s.delta_temporality,
        unix_nanos(),
        ledger,
    )
    // Metrics were asked for but none of ours matches: an empty payload keeps the
    // subscription's pushes going, as the Java client's does.
    .unwrap_or_default();
    let raw = data.encode_to_vec();
    let compressed = compress_payload(s.compression, &raw).map_err(|e| {
        Error::Transport(format!(
            "client telemetry: compressing the metrics with {} failed: {e}",
            s.compression.name()
        ))
    })?;
    Ok(PushTelemetryRequest::default()
        .with_client_instance_id(s.client_instance_id)
        .with_subscription_id(s.subscription_id)
        .with_terminating(terminating)
        .with_compression_type(compression_id(s.compression))
        .with_metrics(compressed.into()))
}

/// Waits until `at`, or until the consumer closes (true).
async fn wait_until(at: Instant, close: &mut watch::Receiver<bool>) -> bool {
    if closed(close) {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(at.into()) => false,
        _ = close.changed() => true,
    }
}

/// Whether the consumer closes (or is gone: the sender dropped).
fn closed(close: &watch::Receiver<bool>) -> bool {
    *close.borrow() || close.has_changed().is_err()
}

async fn run(
    cluster: Arc<Cluster>,
    snapshot: Snapshot,
    mut close: watch::Receiver<bool>,
    collected: oneshot::Sender<()>,
) {
    let mut collected = Some(collected);
    let mut t = Telemetry::new(Instant::now());
    let mut ledger = Ledger::default();
    let mut retry = Retry::new(cluster.backoff());
    let mut closing = false;
    loop {
        if !closing && closed(&close) {
            closing = true;
            t.on_close(Instant::now());
        }
        match t.next() {
            Next::Stop { reason } => {
                if let Some(reason) = reason {
                    tracing::info!("client telemetry: no more pushes from this client: {reason}");
                }
                break;
            }
            Next::Subscribe { at } => {
                if wait_until(at, &mut close).await {
                    continue;
                }
                let request = subscribe(&cluster, t.client_instance_id());
                let answer = tokio::select! {
                    a = request => a,
                    _ = close.changed() => continue,
                };
                match answer {
                    Ok(a) => {
                        retry.succeeded();
                        let jitter = rand::thread_rng().gen_range(0.0..1.0);
                        t.on_subscription(&a, Instant::now(), jitter);
                        if let Some(s) = t.subscription() {
                            tracing::debug!(
                                "client telemetry: subscription {} of client instance {}, \
                                 pushes every {:?}",
                                s.subscription_id,
                                s.client_instance_id,
                                s.push_interval
                            );
                        }
                    }
                    Err(Failure::Unsupported(why)) => t.on_unsupported(why),
                    Err(Failure::Failed(e)) => {
                        let delay = retry.failed();
                        tracing::debug!(
                            "client telemetry: GetTelemetrySubscriptions failed, again in {delay:?}: {e}"
                        );
                        t.on_failure(Instant::now(), delay);
                    }
                }
            }
            Next::Push { at, terminating } => {
                if !terminating && wait_until(at, &mut close).await {
                    continue;
                }
                let m = snapshot();
                let req = push_request(&t, m, terminating, &mut ledger);
                if terminating {
                    // The last values are taken: the close may go on (leave the group).
                    if let Some(c) = collected.take() {
                        let _ = c.send(());
                    }
                }
                let result = match req {
                    Ok(req) if terminating => push(&cluster, req).await,
                    Ok(req) => tokio::select! {
                        r = push(&cluster, req) => r,
                        _ = close.changed() => continue,
                    },
                    Err(e) => Err(Failure::Failed(e)),
                };
                match result {
                    Ok(code) => {
                        retry.succeeded();
                        if code != codes::NONE {
                            tracing::debug!(
                                "client telemetry: PushTelemetry answered {}",
                                crate::error::kafka_error_name(code)
                            );
                        }
                        t.on_push(code, Instant::now());
                    }
                    Err(Failure::Unsupported(why)) => t.on_unsupported(why),
                    Err(Failure::Failed(e)) => {
                        let delay = retry.failed();
                        tracing::debug!(
                            "client telemetry: PushTelemetry failed, subscription again in {delay:?}: {e}"
                        );
                        t.on_failure(Instant::now(), delay);
                    }
                }
            }
        }
    }
    if let Some(c) = collected.take() {
        let _ = c.send(());
    }
}

/// How long a close waits for the terminating push: the close's own deadline, at most
/// `request.timeout.ms`.
pub(crate) fn close_wait(deadline: Deadline, request_timeout: Duration) -> Duration {
    deadline.remaining().min(request_timeout)
}

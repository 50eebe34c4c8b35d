//! Kafka's admin operations: [`AdminClient`] (topics, the cluster, consumer groups and their
//! offsets, configs), and blocking one-call helpers ([`create_topic`], [`create_partitions`]) for
//! tools and tests in every language that need a topic to exist.
mod client;
mod groups;
pub mod plan;
mod types;

pub use client::{AdminClient, ItemResults};
pub use groups::ResetPlan;
pub use types::*;

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::{retry_until, Deadline, Retry};
use crate::cluster::Cluster;
use crate::config::{CommonConfig, Config};
use crate::error::{codes, Error, Result};
use crate::protocol::msg::{
    create_partitions_request::CreatePartitionsTopic, CreatePartitionsRequest, StrBytes, TopicName,
};

/// How long [`create_topic`] waits for the broker, and then for the topic's leaders.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The client defaults of the Java client, for a one-off admin connection.
fn admin_config(bootstrap: &str) -> CommonConfig {
    CommonConfig {
        bootstrap_servers: bootstrap
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        client_id: "lagless-admin".to_string(),
        client_rack: None,
        request_timeout: Duration::from_secs(30),
        default_api_timeout: Duration::from_secs(60),
        retry_backoff: Duration::from_millis(100),
        retry_backoff_max: Duration::from_millis(1000),
        reconnect_backoff: Duration::from_millis(50),
        reconnect_backoff_max: Duration::from_millis(1000),
        socket_connection_setup_timeout: Duration::from_secs(10),
        metadata_max_age: Duration::from_secs(300),
        task_timeout: Duration::from_secs(300),
        security: Default::default(),
    }
}

/// Creates `name` with `partitions` partitions and replication factor `replication_factor`,
/// and waits (up to 30 s) until every partition has a leader, so that a producer or consumer
/// started next sees it. A topic that exists already is an error with
/// `kafka_code() == Some(TOPIC_ALREADY_EXISTS)` (36).
///
/// Blocking; runs on its own short-lived runtime. Do not call it from async code.
pub fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<()> {
    let config = admin_config(bootstrap);
    if config.bootstrap_servers.is_empty() {
        return Err(Error::InvalidArgument(
            "no bootstrap server address given".to_string(),
        ));
    }
    create_topic_on(config, name, partitions, replication_factor)
}

/// [`create_topic`] with a client configuration: `bootstrap.servers`, `security.protocol` and
/// the TLS and SASL keys (any consumer or producer key is accepted and ignored).
pub fn create_topic_with_config(
    config: &Config,
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<()> {
    let mut common = CommonConfig::from_config(config)?;
    if !config.is_set("client.id") {
        common.client_id = "lagless-admin".to_string();
    }
    create_topic_on(common, name, partitions, replication_factor)
}

fn create_topic_on(
    config: CommonConfig,
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<()> {
    run(config, |cluster, deadline| async move {
        cluster
            .create_topic(name, partitions, replication_factor, deadline)
            .await?;
        wait_for_leaders(&cluster, name, partitions, deadline).await
    })
}

/// Grows `name` to `partitions` partitions in all (Kafka's CreatePartitions; partitions are
/// only ever added), and waits (up to 30 s) until every partition has a leader. Asking for
/// fewer partitions than the topic has is the broker's `INVALID_PARTITIONS` error (37).
///
/// Blocking; runs on its own short-lived runtime. Do not call it from async code.
pub fn create_partitions(bootstrap: &str, name: &str, partitions: i32) -> Result<()> {
    let config = admin_config(bootstrap);
    if config.bootstrap_servers.is_empty() {
        return Err(Error::InvalidArgument(
            "no bootstrap server address given".to_string(),
        ));
    }
    if name.is_empty() {
        return Err(Error::InvalidArgument(
            "the topic name is empty".to_string(),
        ));
    }
    run(config, |cluster, deadline| async move {
        retry_until(cluster.backoff(), deadline, "CreatePartitions", || async {
            let conn = cluster.any_broker(deadline).await?;
            let timeout = deadline.remaining().max(Duration::from_millis(1));
            let req = CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.to_string())))
                    .with_count(partitions)
                    .with_assignments(None)])
                .with_timeout_ms(timeout.as_millis().min(i32::MAX as u128) as i32);
            let resp = conn.call_with_timeout(&req, timeout).await?;
            let result = resp
                .results
                .iter()
                .find(|t| t.name.0.as_str() == name)
                .ok_or_else(|| {
                    Error::Corrupt(format!(
                        "CreatePartitions response does not mention `{name}`"
                    ))
                })?;
            if result.error_code != codes::NONE {
                let mut context = format!("growing topic `{name}` to {partitions} partitions");
                if let Some(m) = &result.error_message {
                    context.push_str(": ");
                    context.push_str(m.as_str());
                }
                return Err(Error::kafka(result.error_code, context));
            }
            Ok(())
        })
        .await?;
        wait_for_leaders(&cluster, name, partitions, deadline).await
    })
}

/// Runs one admin operation on a short-lived runtime of its own, bounded by [`ADMIN_TIMEOUT`].
fn run<F, Fut>(config: CommonConfig, op: F) -> Result<()>
where
    F: FnOnce(Arc<Cluster>, Deadline) -> Fut + Send,
    Fut: std::future::Future<Output = Result<()>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::IllegalState(format!("cannot start a runtime: {e}")))?;
    let run = move || {
        let result = rt.block_on(op(Cluster::new(config), Deadline::after(ADMIN_TIMEOUT)));
        rt.shutdown_timeout(Duration::from_millis(100));
        result
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    // Called from async code: a runtime can be neither started nor dropped on a thread that is
    // already inside one, so this operation's runtime lives on a thread of its own.
    std::thread::scope(|s| {
        s.spawn(run)
            .join()
            .unwrap_or_else(|_| Err(Error::IllegalState("the admin operation panicked".into())))
    })
}

/// Waits until the metadata shows `name` with `partitions` partitions, each with a leader, so
/// that a producer or consumer started next sees them all.
async fn wait_for_leaders(
    cluster: &Cluster,
    name: &str,
    partitions: i32,
    deadline: Deadline,
) -> Result<()> {
    cluster.add_interest([&name.to_string()]);
    // Not `backoff::retry_until`: this polls for a state (every leader elected), not for an
    // operation to succeed. Nothing failed while the leaders are missing, the wait is capped so
    // a fresh topic is seen soon, and running out of time is a Timeout that names the topic.
    let mut retry = Retry::new(cluster.backoff());
    loop {
        let m = cluster.refresh(&[name.to_string()], deadline).await?;
        if let Some(t) = m.topics.get(name) {
            if t.error_code == codes::NONE
                && t.partitions.len() == partitions as usize
                && t.partitions.iter().all(|p| p.leader >= 0)
            {
                return Ok(());
            }
        }
        let wait = retry.failed().min(Duration::from_millis(200));
        if deadline.remaining() <= wait {
            return Err(deadline.error(&format!(
                "waiting for the {partitions} partition leaders of topic `{name}`"
            )));
        }
        tokio::time::sleep(wait).await;
    }
}

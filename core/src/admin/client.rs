//! [`AdminClient`]: topics, the cluster, offsets and configs. Blocking calls, each bounded by
//! its own timeout, carried out on the client's I/O runtime; group calls are in `groups.rs`.
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::admin::types::{
    AlterConfigOp, BrokerDescription, ClusterDescription, ConfigEntry, ConfigResource,
    ListedOffset, NewTopic, OffsetSpec, PartitionDescription, TopicDescription,
};
use crate::backoff::{retry_until, Deadline};
use crate::cluster::Cluster;
use crate::config::{CommonConfig, Config, IsolationLevel};
use crate::error::{codes, Error, Result};
use crate::protocol::msg::{
    create_partitions_request::CreatePartitionsTopic,
    create_topics_request::{CreatableTopic, CreatableTopicConfig},
    delete_topics_request::DeleteTopicState,
    describe_configs_request::DescribeConfigsResource,
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, StrBytes,
};
use crate::protocol::topic_name;
use crate::types::TopicPartition;

/// One item's result: its name (a topic, a group, a partition) and whether it succeeded.
pub type ItemResults<K, T = ()> = Vec<(K, Result<T>)>;

/// Kafka's admin operations, for tools and applications: built from a [`Config`] as the
/// consumer is (so `bootstrap.servers`, `security.protocol`, TLS and SASL apply; other consumer
/// and producer keys are accepted and ignored). Every call takes a timeout; calls about several
/// items (topics, groups, partitions) answer each item on its own, and fail as a whole only
/// when no broker could be asked in time.
///
/// The calls block; they may be made from async code too (they wait on the client's own
/// runtime, not the caller's).
pub struct AdminClient {
    pub(crate) cluster: Arc<Cluster>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl AdminClient {
    /// An admin client for `config` (`bootstrap.servers` is required). No connection is made
    /// until the first call.
    pub fn new(config: &Config) -> Result<AdminClient> {
        let mut common = CommonConfig::from_config(config)?;
        if !config.is_set("client.id") {
            common.client_id = "lagless-admin".to_string();
        }
        let runtime = crate::io_runtime("lagless-admin")?;
        // The cluster's connections spawn their setup on the runtime they are made on.
        let cluster = {
            let _guard = runtime.enter();
            Cluster::new(common)
        };
        Ok(AdminClient {
            cluster,
            runtime: Some(runtime),
        })
    }

    /// Runs `op` on the client's runtime and waits for it, whatever thread this is.
    pub(crate) fn block<T, F, Fut>(&self, timeout: Duration, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Cluster>, Deadline) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let runtime = self.runtime.as_ref().ok_or(Error::Closed)?;
        let fut = op(self.cluster.clone(), Deadline::after(timeout));
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(Error::IllegalState("the admin operation panicked".into())))
    }

    /// Creates `topics` (CreateTopics); each topic's result says whether it was created (a
    /// topic that exists already is `TOPIC_ALREADY_EXISTS`, 36). Does not wait for leaders.
    pub fn create_topics(
        &self,
        topics: &[NewTopic],
        timeout: Duration,
    ) -> Result<ItemResults<String>> {
        let topics = topics.to_vec();
        self.block(timeout, move |cluster, deadline| async move {
            let req = CreateTopicsRequest::default()
                .with_topics(
                    topics
                        .iter()
                        .map(|t| {
                            CreatableTopic::default()
                                .with_name(topic_name(&t.name))
                                .with_num_partitions(t.num_partitions)
                                .with_replication_factor(t.replication_factor)
                                .with_configs(
                                    t.configs
                                        .iter()
                                        .map(|(k, v)| {
                                            CreatableTopicConfig::default()
                                                .with_name(text(k))
                                                .with_value(Some(text(v)))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                )
                .with_timeout_ms(timeout_ms(deadline));
            let resp = call_any(&cluster, &req, deadline, "CreateTopics").await?;
            let answers = topic_answers(
                resp.topics
                    .into_iter()
                    .map(|t| (t.name.0.to_string(), t.error_code, t.error_message)),
                "creating topic",
            );
            Ok(in_order(
                topics.iter().map(|t| t.name.clone()),
                answers,
                "CreateTopics",
            ))
        })
    }

    /// Deletes `topics` by name (DeleteTopics).
    pub fn delete_topics(&self, topics: &[&str], timeout: Duration) -> Result<ItemResults<String>> {
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        self.block(timeout, move |cluster, deadline| async move {
            let req = DeleteTopicsRequest::default()
                .with_topics(
                    topics
                        .iter()
                        .map(|t| DeleteTopicState::default().with_name(Some(topic_name(t))))
                        .collect(),
                )
                .with_topic_names(topics.iter().map(|t| topic_name(t)).collect())
                .with_timeout_ms(timeout_ms(deadline));
            let resp = call_any(&cluster, &req, deadline, "DeleteTopics").await?;
            let answers = topic_answers(
                resp.responses
                    .into_iter()
                    .filter_map(|t| Some((t.name?.0.to_string(), t.error_code, t.error_message))),
                "deleting topic",
            );
            Ok(in_order(topics.iter().cloned(), answers, "DeleteTopics"))
        })
    }

    /// Grows each topic to the partition count given (CreatePartitions; partitions are only
    /// ever added: fewer than the topic has is `INVALID_PARTITIONS`, 37).
    pub fn create_partitions(
        &self,
        counts: &[(&str, i32)],
        timeout: Duration,
    ) -> Result<ItemResults<String>> {
        let counts: Vec<(String, i32)> = counts.iter().map(|(t, n)| (t.to_string(), *n)).collect();
        self.block(timeout, move |cluster, deadline| async move {
            let req = CreatePartitionsRequest::default()
                .with_topics(
                    counts
                        .iter()
                        .map(|(t, n)| {
                            CreatePartitionsTopic::default()
                                .with_name(topic_name(t))
                                .with_count(*n)
                                .with_assignments(None)
                        })
                        .collect(),
                )
                .with_timeout_ms(timeout_ms(deadline));
            let resp = call_any(&cluster, &req, deadline, "CreatePartitions").await?;
            let answers = topic_answers(
                resp.results
                    .into_iter()
                    .map(|t| (t.name.0.to_string(), t.error_code, t.error_message)),
                "adding partitions to topic",
            );
            Ok(in_order(
                counts.iter().map(|(t, _)| t.clone()),
                answers,
                "CreatePartitions",
            ))
        })
    }

    /// The cluster id, the controller and the brokers (DescribeCluster, or Metadata from a
    /// broker that does not have it).
    pub fn describe_cluster(&self, timeout: Duration) -> Result<ClusterDescription> {
        self.block(timeout, move |cluster, deadline| async move {
            let conn = retry_until(cluster.backoff(), deadline, "DescribeCluster", || {
                cluster.any_broker(deadline)
            })
            .await?;
            if conn.version::<DescribeClusterRequest>().is_ok() {
                let resp = call_any(
                    &cluster,
                    &DescribeClusterRequest::default(),
                    deadline,
                    "DescribeCluster",
                )
                .await?;
                item_error(
                    resp.error_code,
                    resp.error_message.as_deref(),
                    "describing the cluster".into(),
                )?;
                let mut brokers: Vec<BrokerDescription> = resp
                    .brokers
                    .into_iter()
                    .map(|b| BrokerDescription {
                        id: b.broker_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                        rack: b.rack.map(|r| r.to_string()),
                    })
                    .collect();
                brokers.sort_by_key(|b| b.id);
                return Ok(ClusterDescription {
                    cluster_id: resp.cluster_id.to_string(),
                    controller_id: resp.controller_id.0,
                    brokers,
                });
            }
            let resp = metadata(&cluster, None, deadline).await?;
            let mut brokers: Vec<BrokerDescription> = resp
                .brokers
                .into_iter()
                .map(|b| BrokerDescription {
                    id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.map(|r| r.to_string()),
                })
                .collect();
            brokers.sort_by_key(|b| b.id);
            Ok(ClusterDescription {
                cluster_id: resp.cluster_id.map(|c| c.to_string()).unwrap_or_default(),
                controller_id: resp.controller_id.0,
                brokers,
            })
        })
    }

    /// The names of the cluster's topics, sorted; internal topics only with `include_internal`.
    pub fn list_topics(&self, include_internal: bool, timeout: Duration) -> Result<Vec<String>> {
        self.block(timeout, move |cluster, deadline| async move {
            let resp = metadata(&cluster, None, deadline).await?;
            let mut names: Vec<String> = resp
                .topics
                .into_iter()
                .filter(|t| t.error_code == codes::NONE && (include_internal || !t.is_internal))
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect();
            names.sort();
            Ok(names)
        })
    }

    /// Describes `topics` (Metadata): partitions, leaders, replicas, in-sync replicas. A topic
    /// the cluster does not have is `Error::UnknownTopic`.
    pub fn describe_topics(
        &self,
        topics: &[&str],
        timeout: Duration,
    ) -> Result<ItemResults<String, TopicDescription>> {
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        self.block(timeout, move |cluster, deadline| async move {
            let resp = metadata(&cluster, Some(&topics), deadline).await?;
            let answers: BTreeMap<String, Result<TopicDescription>> = resp
                .topics
                .into_iter()
                .filter_map(|t| {
                    let name = t.name?.0.to_string();
                    let r = match t.error_code {
                        codes::NONE => {
                            let mut partitions: Vec<PartitionDescription> = t
                                .partitions
                                .into_iter()
                                .map(|p| PartitionDescription {
                                    partition: p.partition_index,
                                    leader: p.leader_id.0,
                                    leader_epoch: p.leader_epoch,
                                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                                    offline_replicas: p
                                        .offline_replicas
                                        .iter()
                                        .map(|b| b.0)
                                        .collect(),
                                })
                                .collect();
                            partitions.sort_by_key(|p| p.partition);
                            Ok(TopicDescription {
                                name: name.clone(),
                                topic_id: t.topic_id.to_string(),
                                is_internal: t.is_internal,
                                partitions,
                            })
                        }
                        codes::UNKNOWN_TOPIC_OR_PARTITION => Err(Error::UnknownTopic(name.clone())),
                        code => Err(Error::kafka(code, format!("describing topic `{name}`"))),
                    };
                    Some((name, r))
                })
                .collect();
            Ok(in_order(topics.iter().cloned(), answers, "Metadata"))
        })
    }

    /// ListOffsets for each partition: the log start, the log end, or the first offset at or
    /// after a timestamp, asked of each partition's leader.
    pub fn list_offsets(
        &self,
        wanted: &[(TopicPartition, OffsetSpec)],
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition, ListedOffset>> {
        let wanted: Vec<(TopicPartition, i64)> = wanted
            .iter()
            .map(|(tp, spec)| {
                let ts = match spec {
                    OffsetSpec::Earliest => crate::offsets::EARLIEST_TIMESTAMP,
                    OffsetSpec::Latest => crate::offsets::LATEST_TIMESTAMP,
                    OffsetSpec::Timestamp(t) => *t,
                };
                (tp.clone(), ts)
            })
            .collect();
        self.block(timeout, move |cluster, deadline| async move {
            let listed = crate::offsets::list_offsets(
                &cluster,
                &wanted,
                IsolationLevel::ReadUncommitted,
                deadline,
            )
            .await?;
            let answers: BTreeMap<TopicPartition, Result<ListedOffset>> = listed
                .into_iter()
                .map(|(tp, r)| {
                    (
                        tp,
                        r.map(|(offset, timestamp)| ListedOffset { offset, timestamp }),
                    )
                })
                .collect();
            Ok(in_order(
                wanted.iter().map(|(tp, _)| tp.clone()),
                answers,
                "ListOffsets",
            ))
        })
    }

    /// The configs of each resource (DescribeConfigs). Broker configs are asked of that broker.
    pub fn describe_configs(
        &self,
        resources: &[ConfigResource],
        timeout: Duration,
    ) -> Result<ItemResults<ConfigResource, Vec<ConfigEntry>>> {
        let resources = resources.to_vec();
        self.block(timeout, move |cluster, deadline| async move {
            let mut answers = BTreeMap::new();
            for r in &resources {
                let req = DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(r.type_code())
                        .with_resource_name(text(&r.name()))
                        .with_configuration_keys(None),
                ]);
                let resp = match r {
                    ConfigResource::Broker(id) => call_broker(&cluster, *id, &req, deadline).await,
                    ConfigResource::Topic(_) | ConfigResource::ClientMetrics(_) => {
                        call_any(&cluster, &req, deadline, "DescribeConfigs").await
                    }
                };
                let result = resp.and_then(|resp| {
                    let res = resp.results.into_iter().next().ok_or_else(|| {
                        Error::Corrupt("DescribeConfigs answered no resource".into())
                    })?;
                    item_error(
                        res.error_code,
                        res.error_message.as_deref(),
                        format!("describing the configs of {r:?}"),
                    )?;
                    Ok(res
                        .configs
                        .into_iter()
                        .map(|c| ConfigEntry {
                            name: c.name.to_string(),
                            value: c.value.map(|v| v.to_string()),
                            read_only: c.read_only,
                            // DescribeConfigs v1+: source 5 is DEFAULT_CONFIG.
                            is_default: c.config_source == 5,
                            is_sensitive: c.is_sensitive,
                        })
                        .collect::<Vec<_>>())
                });
                answers.insert(r.clone(), result);
            }
            Ok(in_order(
                resources.iter().cloned(),
                answers,
                "DescribeConfigs",
            ))
        })
    }

    /// Changes configs key by key (IncrementalAlterConfigs): keys not named keep their values.
    pub fn incremental_alter_configs(
        &self,
        changes: &[(ConfigResource, Vec<AlterConfigOp>)],
        timeout: Duration,
    ) -> Result<ItemResults<ConfigResource>> {
        let changes = changes.to_vec();
        self.block(timeout, move |cluster, deadline| async move {
            let mut answers = BTreeMap::new();
            for (r, ops) in &changes {
                let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
                    AlterConfigsResource::default()
                        .with_resource_type(r.type_code())
                        .with_resource_name(text(&r.name()))
                        .with_configs(
                            ops.iter()
                                .map(|op| {
                                    let (k, code, v) = op.wire();
                                    AlterableConfig::default()
                                        .with_name(text(k))
                                        .with_config_operation(code)
                                        .with_value(v.map(text))
                                })
                                .collect(),
                        ),
                ]);
                let resp = match r {
                    ConfigResource::Broker(id) => call_broker(&cluster, *id, &req, deadline).await,
                    ConfigResource::Topic(_) | ConfigResource::ClientMetrics(_) => {
                        call_any(&cluster, &req, deadline, "IncrementalAlterConfigs").await
                    }
                };
                let result = resp.and_then(|resp| {
                    let res = resp.responses.into_iter().next().ok_or_else(|| {
                        Error::Corrupt("IncrementalAlterConfigs answered no resource".into())
                    })?;
                    item_error(
                        res.error_code,
                        res.error_message.as_deref(),
                        format!("altering the configs of {r:?}"),
                    )
                });
                answers.insert(r.clone(), result);
            }
            Ok(in_order(
                changes.iter().map(|(r, _)| r.clone()),
                answers,
                "IncrementalAlterConfigs",
            ))
        })
    }
}

impl Drop for AdminClient {
    fn drop(&mut self) {
        // Not a blocking shutdown: the client may be dropped inside async code.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The broker-side timeout of a request: what is left of the deadline.
fn timeout_ms(deadline: Deadline) -> i32 {
    deadline.remaining().as_millis().clamp(1, i32::MAX as u128) as i32
}

/// An item's error code (and the broker's message) as a result.
pub(crate) fn item_error(code: i16, message: Option<&str>, mut context: String) -> Result<()> {
    if code == codes::NONE {
        return Ok(());
    }
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        context.push_str(": ");
        context.push_str(m);
    }
    Err(Error::kafka(code, context))
}

/// Each topic's answer by name: `Ok`, or the broker's error for `what` (e.g. "deleting topic")
/// with the topic named.
fn topic_answers<M: std::ops::Deref<Target = str>>(
    answers: impl IntoIterator<Item = (String, i16, Option<M>)>,
    what: &str,
) -> BTreeMap<String, Result<()>> {
    answers
        .into_iter()
        .map(|(name, code, message)| {
            let r = item_error(code, message.as_deref(), format!("{what} `{name}`"));
            (name, r)
        })
        .collect()
}

/// The answers in the order the items were asked for; an item the broker did not answer is a
/// `Corrupt` error of its own.
pub(crate) fn in_order<K: Ord + Clone + std::fmt::Debug, T>(
    asked: impl IntoIterator<Item = K>,
    mut answers: BTreeMap<K, Result<T>>,
    api: &str,
) -> Vec<(K, Result<T>)> {
    asked
        .into_iter()
        .map(|k| {
            let r = answers
                .remove(&k)
                .unwrap_or_else(|| Err(Error::Corrupt(format!("{api} did not answer for {k:?}"))));
            (k, r)
        })
        .collect()
}

/// Sends `req` to any broker, retrying transport failures until the deadline.
pub(crate) async fn call_any<R: crate::protocol::wire::Api>(
    cluster: &Cluster,
    req: &R,
    deadline: Deadline,
    what: &str,
) -> Result<R::Response> {
    retry_until(cluster.backoff(), deadline, what, || async {
        let conn = cluster.any_broker(deadline).await?;
        conn.call_before(req, deadline).await
    })
    .await
}

/// Sends `req` to broker `id` (known from the metadata, refreshed when it is not).
async fn call_broker<R: crate::protocol::wire::Api>(
    cluster: &Cluster,
    id: i32,
    req: &R,
    deadline: Deadline,
) -> Result<R::Response> {
    if !cluster.metadata().brokers.contains_key(&id) {
        cluster.refresh(&[], deadline).await?;
    }
    retry_until(
        cluster.backoff(),
        deadline,
        "a broker's request",
        || async {
            let conn = cluster.broker(id, deadline).await?;
            conn.call_before(req, deadline).await
        },
    )
    .await
}

/// A Metadata answer about `topics`, or every topic.
async fn metadata(
    cluster: &Cluster,
    topics: Option<&[String]>,
    deadline: Deadline,
) -> Result<crate::protocol::msg::MetadataResponse> {
    let req = match topics {
        Some(t) => crate::protocol::metadata::metadata(t, false),
        None => crate::protocol::metadata::metadata(&[], true),
    };
    call_any(cluster, &req, deadline, "Metadata").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_topic_answer_is_ok_or_its_error_named_and_unanswered_ones_are_corrupt() {
        let answers = topic_answers(
            [
                ("a".to_string(), codes::NONE, None::<&str>),
                ("b".to_string(), 36, Some("Topic 'b' already exists.")),
                ("c".to_string(), 41, Some("")),
            ],
            "creating topic",
        );
        let results = in_order(
            ["c", "b", "a", "d"].map(String::from),
            answers,
            "CreateTopics",
        );
        let shown: Vec<(String, String)> = results
            .iter()
            .map(|(k, r)| {
                (
                    k.clone(),
                    r.as_ref().map_or_else(|e| e.to_string(), |_| "ok".into()),
                )
            })
            .collect();
        assert_eq!(shown[0].0, "c");
        assert!(shown[0].1.contains("creating topic `c`"), "{shown:?}");
        assert!(
            !shown[0].1.contains(": :"),
            "an empty message adds nothing: {shown:?}"
        );
        assert!(
            shown[1]
                .1
                .contains("creating topic `b`: Topic 'b' already exists."),
            "{shown:?}"
        );
        assert_eq!(shown[2], ("a".to_string(), "ok".to_string()));
        assert!(
            shown[3].1.contains("CreateTopics did not answer for \"d\""),
            "{shown:?}"
        );
        assert!(matches!(results[3].1, Err(Error::Corrupt(_))));
    }
}

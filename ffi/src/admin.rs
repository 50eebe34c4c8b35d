//! The admin client in C: topics, the cluster, offsets, consumer groups and their committed
//! offsets, and the one-call topic creation for programs and tests that need nothing else.
//!
//! Every result is a JSON text the caller frees with `lagless_string_destroy`, as
//! `lagless_consumer_metrics_json` returns metrics: the answers are nested (topics with
//! partitions with replicas, groups with members with assignments), which a JSON text carries in
//! one string where structs would need a handle and accessors per level. Fields come in the
//! order the header documents. A call about several items answers with one object per item, in
//! the order asked, each with `"error"`: `null` on success, else `{"code", "name",
//! "kafka_code", "message"}` (as `lagless_error_*` would tell them); the call itself fails only
//! when it could not be made as a whole (bad arguments, no broker reached in time).
use std::collections::BTreeSet;
use std::ffi::c_char;
use std::time::Duration;

use lagless::admin::{AdminClient, AlterConfigOp, ConfigResource, GroupType, NewTopic, OffsetSpec};
use lagless::{Config, Error, TopicPartition};
use serde_json::{json, Map, Value};

use crate::boundary::{c_str, c_strs, write_out};
use crate::cast::{free_box, set_box, try_slice};
use crate::config::lagless_config;
use crate::error::{cstring_lossy, lagless_error};
use crate::tplist::lagless_tplist;

/// Creates topic `name` with `partitions` partitions and replication factor
/// `replication_factor` on the cluster at `bootstrap` ("host:port[,host:port...]"), and waits
/// (up to 30 s) until every partition has a leader. A topic that exists already gives
/// `LAGLESS_ERR_KAFKA` with `lagless_error_kafka_code` 36 (TOPIC_ALREADY_EXISTS). Blocking;
/// thread-safety: any thread.
#[no_mangle]
pub extern "C" fn lagless_admin_create_topic(
    bootstrap: *const c_char,
    name: *const c_char,
    partitions: i32,
    replication_factor: i16,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let bootstrap = try_str!(bootstrap);
        let name = try_str!(name);
        if name.is_empty() {
            return Err(Error::InvalidArgument("`name` is empty".into()));
        }
        if partitions < 1 || replication_factor < 1 {
            return Err(Error::InvalidArgument(format!(
                "partitions ({partitions}) and replication_factor ({replication_factor}) must be >= 1"
            )));
        }
        lagless::admin::create_topic(bootstrap, name, partitions, replication_factor)
    }
}

/// An admin client (`lagless_admin_new` / `lagless_admin_destroy`). Its calls block for at most
/// `timeout_ms` (negative: `default.api.timeout.ms`); any thread may make them, several at once.
///
/// Each call's answer is a JSON text in `*out_json`, which the caller frees with
/// `lagless_string_destroy`; its fields come in the order each function lists them. A call about
/// several items (topics, groups, partitions) answers with an array of one object per item, in
/// the order asked, each with `"error"`: `null` on success, else `{"code", "name",
/// "kafka_code", "message"}` (what `lagless_error_code`, `_name`, `_kafka_code` and `_message`
/// would say; `"kafka_code"` null for an error not from a broker). The call itself fails only
/// as a whole: a bad argument (checked before anything is sent: an empty or repeated name, a
/// count below 1) or no broker reached within the timeout.
pub struct lagless_admin {
    _private: [u8; 0],
}

castable! { lagless_admin: Box<CAdmin> }

/// What a `lagless_admin` points at.
pub(crate) struct CAdmin {
    inner: AdminClient,
    /// A call's timeout when it is given as negative: `default.api.timeout.ms`.
    default_timeout: Duration,
}

impl CAdmin {
    fn timeout(&self, ms: i32) -> Duration {
        crate::boundary::api_timeout(ms).unwrap_or(self.default_timeout)
    }
}

/// A topic for `lagless_admin_create_topics`: `num_partitions` and `replication_factor` -1 take
/// the broker's defaults; `config_names`/`config_values` hold `config_count` topic configs
/// (`cleanup.policy`, `retention.ms`, ...; both NULL when the count is 0). Read during the call.
#[repr(C)]
pub struct lagless_new_topic {
    pub name: *const c_char,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub config_names: *const *const c_char,
    pub config_values: *const *const c_char,
    pub config_count: usize,
}

castable! { lagless_new_topic: Ref<lagless_new_topic> }

/// A topic's partition count in all for `lagless_admin_create_partitions` (partitions are only
/// ever added). Read during the call.
#[repr(C)]
pub struct lagless_new_partitions {
    pub topic: *const c_char,
    pub total_count: i32,
}

castable! { lagless_new_partitions: Ref<lagless_new_partitions> }

/// `lagless_admin_list_offsets`: the log start offset of each partition.
pub const LAGLESS_OFFSET_SPEC_EARLIEST: i64 = -2;
/// `lagless_admin_list_offsets`: the log end offset (the high watermark) of each partition.
pub const LAGLESS_OFFSET_SPEC_LATEST: i64 = -1;

/// A config call about topics (Kafka's `ConfigResource.Type` TOPIC), named by topic name.
pub const LAGLESS_RESOURCE_TOPIC: i32 = 2;
/// A config call about brokers (Kafka's `ConfigResource.Type` BROKER), named by node id ("1").
pub const LAGLESS_RESOURCE_BROKER: i32 = 4;
/// A config call about a client-metrics subscription of KIP-714 (Kafka's `ConfigResource.Type`
/// CLIENT_METRICS), named by the subscription's name: `metrics`, `interval.ms`, `match`.
pub const LAGLESS_RESOURCE_CLIENT_METRICS: i32 = 16;

/// `lagless_alter_config_op`: set the key to the value.
pub const LAGLESS_ALTER_CONFIG_SET: i32 = 0;
/// `lagless_alter_config_op`: remove the key (back to its default); the value is ignored.
pub const LAGLESS_ALTER_CONFIG_DELETE: i32 = 1;
/// `lagless_alter_config_op`: add the value to a list key.
pub const LAGLESS_ALTER_CONFIG_APPEND: i32 = 2;
/// `lagless_alter_config_op`: remove the value from a list key.
pub const LAGLESS_ALTER_CONFIG_SUBTRACT: i32 = 3;

/// One change for `lagless_admin_incremental_alter_configs`: `op` is one of
/// `LAGLESS_ALTER_CONFIG_*`; `value` may be NULL for `LAGLESS_ALTER_CONFIG_DELETE`. Read during
/// the call.
#[repr(C)]
pub struct lagless_alter_config_op {
    pub name: *const c_char,
    pub value: *const c_char,
    pub op: i32,
}

castable! { lagless_alter_config_op: Ref<lagless_alter_config_op> }

/// An admin client for `config` (copied; it may be destroyed afterwards): `bootstrap.servers`
/// is required, `security.protocol`, TLS and SASL keys apply, other consumer and producer keys
/// are accepted and ignored. A bad setting gives `LAGLESS_ERR_CONFIG` naming the key. No
/// connection is made before the first call. On success `*out_admin` receives the new handle.
#[no_mangle]
pub extern "C" fn lagless_admin_new(
    config: *const lagless_config,
    out_admin: *mut *mut lagless_admin,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config: &Config = try_ref!(config);
        try_out!(out_admin);
        let default_timeout = config
            .get("default.api.timeout.ms")?
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(Duration::from_secs(60), Duration::from_millis);
        let inner = AdminClient::new(config)?;
        set_box(out_admin, CAdmin { inner, default_timeout });
        Ok(())
    }
}

/// Frees the admin client; a call still running on another thread must have returned first.
/// NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_admin_destroy(admin: *mut lagless_admin) {
    ffi_panic_boundary! { free_box(admin) }
}

/// Creates the `topic_count` topics of `topics` (CreateTopics), without waiting for their
/// leaders. `*out_json` receives `[{"topic", "error"}]`: a topic that exists already has the
/// error `LAGLESS_ERR_KAFKA` with `"kafka_code": 36`.
#[no_mangle]
pub extern "C" fn lagless_admin_create_topics(
    admin: *mut lagless_admin,
    topics: *const lagless_new_topic,
    topic_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let mut new = Vec::new();
        for (i, t) in try_slice(topics, topic_count, "topics")?.iter().enumerate() {
            let name = c_str(t.name, &format!("topics[{i}].name"))?;
            if (t.num_partitions < 1 && t.num_partitions != -1)
                || (t.replication_factor < 1 && t.replication_factor != -1)
            {
                return Err(Error::InvalidArgument(format!(
                    "topic `{name}`: num_partitions ({}) and replication_factor ({}) must be >= 1, \
                     or -1 for the broker's default",
                    t.num_partitions, t.replication_factor
                )));
            }
            let names = format!("topics[{i}].config_names");
            let keys = c_strs(t.config_names, t.config_count, &names)?;
            let values = format!("topics[{i}].config_values");
            let values = c_strs(t.config_values, t.config_count, &values)?;
            if keys.iter().any(|k| k.is_empty()) {
                return Err(Error::InvalidArgument(format!(
                    "topic `{name}`: a config name is empty"
                )));
            }
            new.push(NewTopic {
                configs: keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..NewTopic::new(name, t.num_partitions, t.replication_factor)
            });
        }
        distinct(new.iter().map(|t| t.name.as_str()), "topic")?;
        let results = h.inner.create_topics(&new, h.timeout(timeout_ms))?;
        give(out_json, named_outcomes("topic", results));
        Ok(())
    }
}

/// Deletes the `topic_count` topics named in `topics` (DeleteTopics). `*out_json` receives
/// `[{"topic", "error"}]`: a topic the cluster does not have has `"kafka_code": 3`.
#[no_mangle]
pub extern "C" fn lagless_admin_delete_topics(
    admin: *mut lagless_admin,
    topics: *const *const c_char,
    topic_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let names = c_strs(topics, topic_count, "topics")?;
        distinct(names.iter().copied(), "topic")?;
        let results = h.inner.delete_topics(&names, h.timeout(timeout_ms))?;
        give(out_json, named_outcomes("topic", results));
        Ok(())
    }
}

/// Grows each of the `count` topics of `partitions` to its `total_count` partitions
/// (CreatePartitions). `*out_json` receives `[{"topic", "error"}]`: asking for fewer partitions
/// than a topic has is its error `"kafka_code": 37` (INVALID_PARTITIONS).
#[no_mangle]
pub extern "C" fn lagless_admin_create_partitions(
    admin: *mut lagless_admin,
    partitions: *const lagless_new_partitions,
    count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let mut counts = Vec::new();
        for (i, p) in try_slice(partitions, count, "partitions")?.iter().enumerate() {
            let topic = c_str(p.topic, &format!("partitions[{i}].topic"))?;
            if p.total_count < 1 {
                return Err(Error::InvalidArgument(format!(
                    "topic `{topic}`: total_count must be >= 1, got {}",
                    p.total_count
                )));
            }
            counts.push((topic, p.total_count));
        }
        distinct(counts.iter().map(|(t, _)| *t), "topic")?;
        let results = h.inner.create_partitions(&counts, h.timeout(timeout_ms))?;
        give(out_json, named_outcomes("topic", results));
        Ok(())
    }
}

/// The cluster: `*out_json` receives `{"cluster_id", "controller_id", "brokers": [{"id",
/// "host", "port", "rack"}]}` (rack null when unset; controller -1 when the broker does not say).
#[no_mangle]
pub extern "C" fn lagless_admin_describe_cluster(
    admin: *mut lagless_admin,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let c = h.inner.describe_cluster(h.timeout(timeout_ms))?;
        let brokers: Vec<Value> = c
            .brokers
            .iter()
            .map(|b| json!({"id": b.id, "host": b.host, "port": b.port, "rack": b.rack}))
            .collect();
        give(
            out_json,
            json!({
                "cluster_id": c.cluster_id,
                "controller_id": c.controller_id,
                "brokers": brokers,
            }),
        );
        Ok(())
    }
}

/// The names of the cluster's topics, sorted, internal ones (`__consumer_offsets`) only with
/// `include_internal`: `*out_json` receives `["name", ...]`.
#[no_mangle]
pub extern "C" fn lagless_admin_list_topics(
    admin: *mut lagless_admin,
    include_internal: bool,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let names = h.inner.list_topics(include_internal, h.timeout(timeout_ms))?;
        give(out_json, json!(names));
        Ok(())
    }
}

/// Describes the `topic_count` topics named in `topics` (Metadata). `*out_json` receives
/// `[{"topic", "error", "topic_id", "is_internal", "partitions": [{"partition", "leader",
/// "leader_epoch", "replicas", "isr", "offline_replicas"}]}]`, partitions in order (leader -1
/// while a partition has none); a topic with an error has only `"topic"` and `"error"` (a topic
/// the cluster does not have: `LAGLESS_ERR_UNKNOWN_TOPIC`).
#[no_mangle]
pub extern "C" fn lagless_admin_describe_topics(
    admin: *mut lagless_admin,
    topics: *const *const c_char,
    topic_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let names = c_strs(topics, topic_count, "topics")?;
        distinct(names.iter().copied(), "topic")?;
        let results = h.inner.describe_topics(&names, h.timeout(timeout_ms))?;
        give(out_json, array(results.iter().map(|(name, r)| {
            let mut o = outcome("topic", json!(name), r);
            if let Ok(t) = r {
                let partitions: Vec<Value> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        json!({
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": p.replicas,
                            "isr": p.isr,
                            "offline_replicas": p.offline_replicas,
                        })
                    })
                    .collect();
                o.insert("topic_id".into(), json!(t.topic_id));
                o.insert("is_internal".into(), json!(t.is_internal));
                o.insert("partitions".into(), json!(partitions));
            }
            o
        })));
        Ok(())
    }
}

/// ListOffsets for each partition of `partitions` (their offsets are ignored): with `spec`
/// `LAGLESS_OFFSET_SPEC_EARLIEST` the log start, `LAGLESS_OFFSET_SPEC_LATEST` the log end, a
/// timestamp (>= 0, ms since the epoch) the first offset whose record is at or after it.
/// `*out_json` receives `[{"topic", "partition", "error", "offset", "timestamp"}]` (offset -1
/// when no record is that recent; timestamp -1 for the log start and end); a partition with an
/// error has no offset and timestamp.
#[no_mangle]
pub extern "C" fn lagless_admin_list_offsets(
    admin: *mut lagless_admin,
    partitions: *const lagless_tplist,
    spec: i64,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        let list = try_ref!(partitions);
        try_out!(out_json);
        let spec = match spec {
            LAGLESS_OFFSET_SPEC_EARLIEST => OffsetSpec::Earliest,
            LAGLESS_OFFSET_SPEC_LATEST => OffsetSpec::Latest,
            ts if ts >= 0 => OffsetSpec::Timestamp(ts),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "`spec` must be LAGLESS_OFFSET_SPEC_EARLIEST, LAGLESS_OFFSET_SPEC_LATEST or a \
                     timestamp >= 0, got {other}"
                )))
            }
        };
        let tps = partition_list(list, "partitions")?;
        let wanted: Vec<(TopicPartition, OffsetSpec)> =
            tps.into_iter().map(|tp| (tp, spec)).collect();
        let results = h.inner.list_offsets(&wanted, h.timeout(timeout_ms))?;
        give(out_json, array(results.iter().map(|(tp, r)| {
            let mut o = partition_obj(tp, r);
            if let Ok(l) = r {
                o.insert("offset".into(), json!(l.offset));
                o.insert("timestamp".into(), json!(l.timestamp));
            }
            o
        })));
        Ok(())
    }
}

/// Every consumer group of the cluster (ListGroups of every broker; groups of other kinds, such
/// as Connect's, left out), by id: `*out_json` receives `[{"group_id", "protocol_type",
/// "state", "group_type"}]` (protocol type "" for a group that only holds committed offsets).
#[no_mangle]
pub extern "C" fn lagless_admin_list_consumer_groups(
    admin: *mut lagless_admin,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let groups = h.inner.list_groups(h.timeout(timeout_ms))?;
        let groups: Vec<Value> = groups
            .iter()
            .filter(|g| g.protocol_type.is_empty() || g.protocol_type == "consumer")
            .map(|g| {
                json!({
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "state": g.state,
                    "group_type": g.group_type,
                })
            })
            .collect();
        give(out_json, json!(groups));
        Ok(())
    }
}

/// Describes the `group_count` groups named in `groups`. `*out_json` receives `[{"group_id",
/// "error", "group_type" ("classic" or "consumer"), "state", "protocol_type",
/// "partition_assignor", "members": [{"member_id", "group_instance_id", "client_id", "host",
/// "assignment": [{"topic", "partition"}]}]}]`; a group that does not exist is described with
/// state "Dead" and no members; a group with an error has only `"group_id"` and `"error"`.
#[no_mangle]
pub extern "C" fn lagless_admin_describe_consumer_groups(
    admin: *mut lagless_admin,
    groups: *const *const c_char,
    group_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let names = c_strs(groups, group_count, "groups")?;
        distinct(names.iter().copied(), "group")?;
        let results = h.inner.describe_groups(&names, h.timeout(timeout_ms))?;
        give(out_json, array(results.iter().map(|(group, r)| {
            let mut o = outcome("group_id", json!(group), r);
            let Ok(g) = r else { return o };
            let members: Vec<Value> = g
                .members
                .iter()
                .map(|m| {
                    let assignment: Vec<Value> = m
                        .assignment
                        .iter()
                        .map(|tp| json!({"topic": tp.topic, "partition": tp.partition}))
                        .collect();
                    json!({
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": assignment,
                    })
                })
                .collect();
            let group_type = match g.group_type {
                GroupType::Classic => "classic",
                GroupType::Consumer => "consumer",
            };
            o.insert("group_type".into(), json!(group_type));
            o.insert("state".into(), json!(g.state));
            o.insert("protocol_type".into(), json!(g.protocol_type));
            o.insert("partition_assignor".into(), json!(g.assignor));
            o.insert("members".into(), json!(members));
            o
        })));
        Ok(())
    }
}

/// The committed offsets of `group` (OffsetFetch): of the partitions of `partitions`, or of
/// every partition the group committed for when `partitions` is NULL. `*out_json` receives
/// `[{"topic", "partition", "error", "offset", "metadata"}]`, offset -1 where nothing is
/// committed; a partition with an error has no offset and metadata.
#[no_mangle]
pub extern "C" fn lagless_admin_list_consumer_group_offsets(
    admin: *mut lagless_admin,
    group: *const c_char,
    partitions: *const lagless_tplist,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        let group = group_id(group)?;
        try_out!(out_json);
        let tps = match crate::cast::try_from(partitions) {
            Some(list) => Some(partition_list(list, "partitions")?),
            None => None,
        };
        let results =
            h.inner
                .list_consumer_group_offsets(group, tps.as_deref(), h.timeout(timeout_ms))?;
        give(out_json, array(results.iter().map(|(tp, r)| {
            let mut o = partition_obj(tp, r);
            if let Ok(om) = r {
                o.insert("offset".into(), json!(om.as_ref().map_or(-1, |om| om.offset)));
                o.insert(
                    "metadata".into(),
                    json!(om.as_ref().map_or("", |om| om.metadata.as_str())),
                );
            }
            o
        })));
        Ok(())
    }
}

/// Commits the offsets of `offsets` (each entry's offset, >= 0, and metadata) for `group` from
/// outside it, as Kafka's Admin does: the coordinator accepts it only while the group has no
/// member (else each partition has an error). `*out_json` receives `[{"topic", "partition",
/// "error"}]`.
#[no_mangle]
pub extern "C" fn lagless_admin_alter_consumer_group_offsets(
    admin: *mut lagless_admin,
    group: *const c_char,
    offsets: *const lagless_tplist,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        let group = group_id(group)?;
        let list = try_ref!(offsets);
        try_out!(out_json);
        partition_list(list, "offsets")?;
        let offsets = list.offsets()?;
        let results = h.inner.alter_consumer_group_offsets(group, &offsets, h.timeout(timeout_ms))?;
        give(out_json, partition_outcomes(&results));
        Ok(())
    }
}

/// Deletes the committed offsets of `group` for the partitions of `partitions` (OffsetDelete);
/// refused (`"kafka_code": 86`, GROUP_SUBSCRIBED_TO_TOPIC) for a topic the group's members are
/// subscribed to. `*out_json` receives `[{"topic", "partition", "error"}]`.
#[no_mangle]
pub extern "C" fn lagless_admin_delete_consumer_group_offsets(
    admin: *mut lagless_admin,
    group: *const c_char,
    partitions: *const lagless_tplist,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        let group = group_id(group)?;
        let list = try_ref!(partitions);
        try_out!(out_json);
        let tps = partition_list(list, "partitions")?;
        let results = h.inner.delete_consumer_group_offsets(group, &tps, h.timeout(timeout_ms))?;
        give(out_json, partition_outcomes(&results));
        Ok(())
    }
}

/// The configs of the `name_count` resources named in `names`, all of `resource_type`
/// (`LAGLESS_RESOURCE_TOPIC`, `LAGLESS_RESOURCE_BROKER` or `LAGLESS_RESOURCE_CLIENT_METRICS`)
/// (DescribeConfigs). `*out_json`
/// receives `[{"resource_type", "name", "error", "configs": [{"name", "value", "read_only",
/// "is_default", "is_sensitive"}]}]` (value null when sensitive); a resource with an error has
/// no `"configs"`.
#[no_mangle]
pub extern "C" fn lagless_admin_describe_configs(
    admin: *mut lagless_admin,
    resource_type: i32,
    names: *const *const c_char,
    name_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        try_out!(out_json);
        let names = c_strs(names, name_count, "names")?;
        distinct(names.iter().copied(), "resource")?;
        let resources = names
            .iter()
            .map(|n| resource(resource_type, n))
            .collect::<Result<Vec<_>, Error>>()?;
        let results = h.inner.describe_configs(&resources, h.timeout(timeout_ms))?;
        give(out_json, array(results.iter().map(|(res, r)| {
            let mut o = resource_obj(res, r);
            if let Ok(entries) = r {
                let configs: Vec<Value> = entries
                    .iter()
                    .map(|e| {
                        json!({
                            "name": e.name,
                            "value": e.value,
                            "read_only": e.read_only,
                            "is_default": e.is_default,
                            "is_sensitive": e.is_sensitive,
                        })
                    })
                    .collect();
                o.insert("configs".into(), json!(configs));
            }
            o
        })));
        Ok(())
    }
}

/// Changes the configs of one resource, `name` of `resource_type`, key by key
/// (IncrementalAlterConfigs): the `op_count` changes of `ops`; keys not named keep their values.
/// `*out_json` receives `[{"resource_type", "name", "error"}]` (a key the broker does not know
/// is the error `"kafka_code": 40`, INVALID_CONFIG).
#[no_mangle]
pub extern "C" fn lagless_admin_incremental_alter_configs(
    admin: *mut lagless_admin,
    resource_type: i32,
    name: *const c_char,
    ops: *const lagless_alter_config_op,
    op_count: usize,
    timeout_ms: i32,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(admin);
        let name = try_str!(name);
        try_out!(out_json);
        let res = resource(resource_type, name)?;
        let mut changes = Vec::new();
        for (i, op) in try_slice(ops, op_count, "ops")?.iter().enumerate() {
            let key = c_str(op.name, &format!("ops[{i}].name"))?.to_string();
            if key.is_empty() {
                return Err(Error::InvalidArgument(format!("`ops[{i}].name` is empty")));
            }
            let value = || c_str(op.value, &format!("ops[{i}].value")).map(str::to_string);
            changes.push(match op.op {
                LAGLESS_ALTER_CONFIG_SET => AlterConfigOp::Set(key, value()?),
                LAGLESS_ALTER_CONFIG_DELETE => AlterConfigOp::Delete(key),
                LAGLESS_ALTER_CONFIG_APPEND => AlterConfigOp::Append(key, value()?),
                LAGLESS_ALTER_CONFIG_SUBTRACT => AlterConfigOp::Subtract(key, value()?),
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "`ops[{i}].op` must be one of LAGLESS_ALTER_CONFIG_*, got {other}"
                    )))
                }
            });
        }
        if changes.is_empty() {
            return Err(Error::InvalidArgument("no config change given".into()));
        }
        let results = h
            .inner
            .incremental_alter_configs(&[(res, changes)], h.timeout(timeout_ms))?;
        give(
            out_json,
            array(results.iter().map(|(res, r)| resource_obj(res, r))),
        );
        Ok(())
    }
}

fn resource(resource_type: i32, name: &str) -> Result<ConfigResource, Error> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("a resource name is empty".into()));
    }
    match resource_type {
        LAGLESS_RESOURCE_TOPIC => Ok(ConfigResource::Topic(name.to_string())),
        LAGLESS_RESOURCE_BROKER => name.parse().map(ConfigResource::Broker).map_err(|_| {
            Error::InvalidArgument(format!("a broker is named by its node id, got `{name}`"))
        }),
        LAGLESS_RESOURCE_CLIENT_METRICS => Ok(ConfigResource::ClientMetrics(name.to_string())),
        other => Err(Error::InvalidArgument(format!(
            "`resource_type` must be LAGLESS_RESOURCE_TOPIC, LAGLESS_RESOURCE_BROKER or \
             LAGLESS_RESOURCE_CLIENT_METRICS, got {other}"
        ))),
    }
}

/// `{"resource_type", "name", "error"}` of a resource's outcome `r`.
fn resource_obj<T>(res: &ConfigResource, r: &Result<T, Error>) -> Map<String, Value> {
    let (resource_type, name) = match res {
        ConfigResource::Topic(t) => (LAGLESS_RESOURCE_TOPIC, t.clone()),
        ConfigResource::Broker(id) => (LAGLESS_RESOURCE_BROKER, id.to_string()),
        ConfigResource::ClientMetrics(n) => (LAGLESS_RESOURCE_CLIENT_METRICS, n.clone()),
    };
    let mut o = Map::new();
    o.insert("resource_type".into(), json!(resource_type));
    o.insert("name".into(), json!(name));
    o.insert("error".into(), error_json(r));
    o
}

fn group_id<'a>(p: *const c_char) -> Result<&'a str, Error> {
    let group = c_str(p, "group")?;
    if group.is_empty() {
        return Err(Error::InvalidArgument("`group` is empty".into()));
    }
    Ok(group)
}

/// The partitions of a list: at least one, none twice (each has one answer).
fn partition_list(list: &crate::tplist::TpList, name: &str) -> Result<Vec<TopicPartition>, Error> {
    let tps = list.partitions();
    if tps.is_empty() {
        return Err(Error::InvalidArgument(format!("`{name}` is empty")));
    }
    let mut seen = BTreeSet::new();
    if let Some(tp) = tps.iter().find(|tp| !seen.insert(*tp)) {
        return Err(Error::InvalidArgument(format!("`{name}` holds {tp} twice")));
    }
    Ok(tps)
}

/// Refuses an empty name and a name given twice.
fn distinct<'a>(names: impl IntoIterator<Item = &'a str>, what: &str) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for n in names {
        if n.is_empty() {
            return Err(Error::InvalidArgument(format!("a {what} name is empty")));
        }
        if !seen.insert(n) {
            return Err(Error::InvalidArgument(format!(
                "{what} `{n}` is given twice"
            )));
        }
    }
    if seen.is_empty() {
        return Err(Error::InvalidArgument(format!("no {what} given")));
    }
    Ok(())
}

/// Hands `json` to the caller (checked with `try_out!`).
fn give(out: *mut *mut c_char, json: Value) {
    write_out(out, cstring_lossy(&json.to_string()).into_raw());
}

/// The objects of `items` as one JSON array.
fn array(items: impl IntoIterator<Item = Map<String, Value>>) -> Value {
    Value::Array(items.into_iter().map(Value::Object).collect())
}

fn named_outcomes(key: &str, results: lagless::admin::ItemResults<String>) -> Value {
    array(results.iter().map(|(n, r)| outcome(key, json!(n), r)))
}

fn partition_outcomes(results: &lagless::admin::ItemResults<TopicPartition>) -> Value {
    array(results.iter().map(|(tp, r)| partition_obj(tp, r)))
}

/// `{"topic", "partition", "error"}` of a partition's outcome `r`.
fn partition_obj<T>(tp: &TopicPartition, r: &Result<T, Error>) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("topic".into(), json!(tp.topic));
    o.insert("partition".into(), json!(tp.partition));
    o.insert("error".into(), error_json(r));
    o
}

/// `{key: name, "error"}` of an item's outcome `r`; the caller adds the item's data after it
/// (serde_json's `preserve_order` keeps the fields in the order inserted, the header's).
fn outcome<T>(key: &str, name: Value, r: &Result<T, Error>) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert(key.into(), name);
    o.insert("error".into(), error_json(r));
    o
}

/// `"error"`: null, or the error's code, name, Kafka code (null when not from a broker) and
/// message.
fn error_json<T>(r: &Result<T, Error>) -> Value {
    match r {
        Ok(_) => Value::Null,
        Err(e) => json!({
            "code": e.code(),
            "name": e.name(),
            "kafka_code": e.kafka_code(),
            "message": e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_fields_come_in_order_with_strings_escaped_and_errors_spelt_out() {
        let ok: Result<(), Error> = Ok(());
        let failed: Result<(), Error> = Err(Error::kafka(36, "creating topic `a`".to_string()));
        let items = array([
            outcome("topic", json!("a\"b\\c\n\u{1}"), &ok),
            outcome("topic", json!("a"), &failed),
        ])
        .to_string();
        let message = json!(failed.as_ref().unwrap_err().to_string());
        assert_eq!(
            items,
            format!(
                r#"[{{"topic":"a\"b\\c\n\u0001","error":null}},{{"topic":"a","error":{{"code":3,"name":"TOPIC_ALREADY_EXISTS","kafka_code":36,"message":{message}}}}}]"#
            )
        );
        assert_eq!(array(Vec::new()).to_string(), "[]");
        // Fields in the order written, not sorted.
        let tp = TopicPartition::new("t", 2);
        let mut o = partition_obj(&tp, &ok);
        o.insert("offset".into(), json!(-1));
        o.insert("metadata".into(), json!(""));
        assert_eq!(
            Value::Object(o).to_string(),
            r#"{"topic":"t","partition":2,"error":null,"offset":-1,"metadata":""}"#
        );
        let o = resource_obj(&ConfigResource::Broker(1), &ok);
        assert_eq!(
            Value::Object(o).to_string(),
            r#"{"resource_type":4,"name":"1","error":null}"#
        );
    }

    #[test]
    fn names_must_be_given_once_each_and_not_empty() {
        assert!(distinct(["a", "b"], "topic").is_ok());
        for (names, says) in [
            (vec!["a", "a"], "topic `a` is given twice"),
            (vec!["a", ""], "a topic name is empty"),
            (vec![], "no topic given"),
        ] {
            let e = distinct(names, "topic").unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
    }
}

//! `AdminClient`: the core's admin client behind a Python class, with confluent-kafka's method
//! names, and the small argument classes it takes (`NewTopic`, `NewPartitions`,
//! `ConfigResource`, `OffsetSpec`).
//!
//! The calls are synchronous (confluent-kafka returns futures): each blocks, with the GIL
//! released, for at most its `request_timeout`. A call about several items answers with a dict
//! from each item to its result: `None` (or the item's data) on success, else the exception
//! object of its error, not raised, as confluent-kafka's per-item futures would. A failure of
//! the whole call (no broker reached in time, the coordinator unknown) raises. Arguments are
//! checked before anything is sent: a bad one raises InvalidArgumentError naming it.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::admin::{
    AlterConfigOp, ConfigResource as CoreResource, GroupType, NewTopic as CoreNewTopic,
    OffsetSpec as CoreSpec,
};
use lagless::sync::Unpoisoned;
use lagless::{Error, OffsetAndMetadata, TopicPartition as CoreTp};
use pyo3::basic::CompareOp;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping};
use pyo3::PyClass;

use crate::errors::{exception, to_py, IntoPyResult};
use crate::types::{extract_tps, TopicPartition};
use crate::wait::duration;

/// A call's result for one item: `ok` of its value, or its error as an exception object.
fn item<T>(
    py: Python<'_>,
    r: lagless::Result<T>,
    ok: impl FnOnce(T) -> PyResult<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    match r {
        Ok(v) => ok(v),
        Err(e) => Ok(exception(py, &to_py(py, &e))),
    }
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    to_py(py, &Error::InvalidArgument(message))
}

fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "value".to_string())
}

/// The items of an iterable argument, each of pyclass `T` (a str or a single object is refused:
/// iterating it would not be what the caller meant).
fn objects<'py, T: PyClass>(
    arg: &Bound<'py, PyAny>,
    name: &str,
    class: &str,
) -> PyResult<Vec<Bound<'py, T>>> {
    if arg.is_instance_of::<pyo3::types::PyString>() || arg.cast::<T>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be a list of {class}, got a single {}",
            type_name(arg)
        )));
    }
    let mut out = Vec::new();
    for o in arg.try_iter()? {
        let o = o?;
        let t = o.cast_into::<T>().map_err(|e| {
            PyTypeError::new_err(format!(
                "`{name}` must be a list of {class}, got an item of type {}",
                type_name(e.into_inner().as_any())
            ))
        })?;
        out.push(t);
    }
    Ok(out)
}

/// Names (topics, groups) given as a list of str: none empty, none twice.
fn names(py: Python<'_>, arg: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if arg.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(format!(
            "the {what}s must be a list of str, got a single str"
        )));
    }
    let list: Vec<String> = arg.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "the {what}s must be a list of str, got {}",
            type_name(arg)
        ))
    })?;
    distinct(py, list.iter().map(|n| n.as_str()), what)?;
    Ok(list)
}

/// Refuses an empty name and a name given twice (each item has one result).
fn distinct<'a>(
    py: Python<'_>,
    items: impl IntoIterator<Item = &'a str>,
    what: &str,
) -> PyResult<()> {
    let mut seen = BTreeSet::new();
    for n in items {
        if n.is_empty() {
            return Err(invalid(py, format!("a {what} name is empty")));
        }
        if !seen.insert(n) {
            return Err(invalid(py, format!("{what} `{n}` is given twice")));
        }
    }
    Ok(())
}

/// Partitions given as TopicPartitions: topic not empty, partition >= 0, none twice.
fn partitions(
    py: Python<'_>,
    arg: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Vec<(CoreTp, i64, Option<String>)>> {
    if arg.cast::<TopicPartition>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be a list of TopicPartition, got a single TopicPartition"
        )));
    }
    let tps = extract_tps(arg)?;
    let mut seen = BTreeSet::new();
    for (tp, _, _) in &tps {
        check_partition(py, tp)?;
        if !seen.insert(tp.clone()) {
            return Err(invalid(py, format!("partition {tp} is given twice")));
        }
    }
    Ok(tps)
}

fn check_partition(py: Python<'_>, tp: &CoreTp) -> PyResult<()> {
    if tp.topic.is_empty() {
        return Err(invalid(py, "a topic name is empty".into()));
    }
    if tp.partition < 0 {
        return Err(invalid(
            py,
            format!(
                "partition {} of topic `{}` must be >= 0",
                tp.partition, tp.topic
            ),
        ));
    }
    Ok(())
}

fn tp_key(py: Python<'_>, tp: &CoreTp) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, TopicPartition::unset(tp))?
        .into_any()
        .unbind())
}

/// A topic to create, for `AdminClient.create_topics`.
#[pyclass(module = "lagless._lagless", name = "NewTopic", frozen)]
pub struct NewTopic {
    #[pyo3(get)]
    topic: String,
    #[pyo3(get)]
    num_partitions: i32,
    #[pyo3(get)]
    replication_factor: i32,
    config: BTreeMap<String, String>,
}

#[pymethods]
impl NewTopic {
    #[new]
    #[pyo3(signature = (topic, num_partitions=-1, replication_factor=-1, config=None))]
    fn py_new(
        topic: String,
        num_partitions: i32,
        replication_factor: i32,
        config: Option<BTreeMap<String, String>>,
    ) -> Self {
        NewTopic {
            topic,
            num_partitions,
            replication_factor,
            config: config.unwrap_or_default(),
        }
    }

    /// The topic's configs (a new dict).
    #[getter]
    fn config(&self) -> BTreeMap<String, String> {
        self.config.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "NewTopic(topic={:?}, num_partitions={}, replication_factor={})",
            self.topic, self.num_partitions, self.replication_factor
        )
    }
}

impl NewTopic {
    /// The core's NewTopic; -1 (the broker's default) or a count >= 1.
    fn core(&self, py: Python<'_>) -> PyResult<CoreNewTopic> {
        if self.num_partitions < 1 && self.num_partitions != -1 {
            return Err(invalid(
                py,
                format!(
                    "topic `{}`: num_partitions must be >= 1 (or -1 for the broker's default), got {}",
                    self.topic, self.num_partitions
                ),
            ));
        }
        let rf = i16::try_from(self.replication_factor)
            .ok()
            .filter(|&rf| rf >= 1 || rf == -1)
            .ok_or_else(|| {
                invalid(
                    py,
                    format!(
                        "topic `{}`: replication_factor must be >= 1 (or -1 for the broker's \
                         default), got {}",
                        self.topic, self.replication_factor
                    ),
                )
            })?;
        if self.config.keys().any(|k| k.is_empty()) {
            return Err(invalid(
                py,
                format!("topic `{}`: a config key is empty", self.topic),
            ));
        }
        Ok(CoreNewTopic {
            name: self.topic.clone(),
            num_partitions: self.num_partitions,
            replication_factor: rf,
            configs: self
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }
}

/// A topic's new partition count in all, for `AdminClient.create_partitions`.
#[pyclass(module = "lagless._lagless", name = "NewPartitions", frozen)]
pub struct NewPartitions {
    #[pyo3(get)]
    topic: String,
    #[pyo3(get)]
    new_total_count: i32,
}

#[pymethods]
impl NewPartitions {
    #[new]
    fn py_new(topic: String, new_total_count: i32) -> Self {
        NewPartitions {
            topic,
            new_total_count,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "NewPartitions(topic={:?}, new_total_count={})",
            self.topic, self.new_total_count
        )
    }
}

/// What a config call is about: a topic (`"topic"`), a broker (`"broker"`, named by its id) or a
/// KIP-714 client-metrics subscription (`"client_metrics"`, named by its name).
#[pyclass(module = "lagless._lagless", name = "ConfigResource", frozen)]
pub struct ConfigResource {
    inner: CoreResource,
}

#[pymethods]
impl ConfigResource {
    #[new]
    fn py_new(py: Python<'_>, restype: &str, name: &str) -> PyResult<Self> {
        let inner = match restype.to_ascii_lowercase().as_str() {
            "topic" if !name.is_empty() => CoreResource::Topic(name.to_string()),
            "topic" => return Err(invalid(py, "the topic name is empty".into())),
            "broker" => CoreResource::Broker(name.parse().map_err(|_| {
                invalid(
                    py,
                    format!("a broker is named by its node id, got {name:?}"),
                )
            })?),
            "client_metrics" if !name.is_empty() => CoreResource::ClientMetrics(name.to_string()),
            "client_metrics" => return Err(invalid(py, "the subscription name is empty".into())),
            other => {
                return Err(invalid(
                    py,
                    format!(
                        "restype must be \"topic\", \"broker\" or \"client_metrics\", got {other:?}"
                    ),
                ))
            }
        };
        Ok(ConfigResource { inner })
    }

    /// `"topic"` or `"broker"`.
    #[getter]
    fn restype(&self) -> &'static str {
        match self.inner {
            CoreResource::Topic(_) => "topic",
            CoreResource::Broker(_) => "broker",
            CoreResource::ClientMetrics(_) => "client_metrics",
        }
    }

    #[getter]
    fn name(&self) -> String {
        match &self.inner {
            CoreResource::Topic(t) | CoreResource::ClientMetrics(t) => t.clone(),
            CoreResource::Broker(id) => id.to_string(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "ConfigResource(restype={:?}, name={:?})",
            self.restype(),
            self.name()
        )
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<ConfigResource>() else {
            return Ok(py.NotImplemented());
        };
        let r = match op {
            CompareOp::Eq => self.inner == other.get().inner,
            CompareOp::Ne => self.inner != other.get().inner,
            _ => return Ok(py.NotImplemented()),
        };
        Ok(pyo3::types::PyBool::new(py, r)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.restype(), self.name()).hash(&mut h);
        h.finish()
    }
}

/// Which offset `AdminClient.list_offsets` looks up, as confluent-kafka's `OffsetSpec`.
#[pyclass(module = "lagless._lagless", name = "OffsetSpec", frozen)]
pub struct OffsetSpec {
    inner: CoreSpec,
}

#[pymethods]
impl OffsetSpec {
    /// The log start offset.
    #[staticmethod]
    fn earliest() -> Self {
        OffsetSpec {
            inner: CoreSpec::Earliest,
        }
    }

    /// The log end offset (the high watermark).
    #[staticmethod]
    fn latest() -> Self {
        OffsetSpec {
            inner: CoreSpec::Latest,
        }
    }

    /// The first offset whose record's timestamp (ms since the epoch) is at or after this.
    #[staticmethod]
    fn for_timestamp(py: Python<'_>, timestamp: i64) -> PyResult<Self> {
        if timestamp < 0 {
            return Err(invalid(
                py,
                format!("a timestamp must be >= 0 (ms since the epoch), got {timestamp}"),
            ));
        }
        Ok(OffsetSpec {
            inner: CoreSpec::Timestamp(timestamp),
        })
    }

    fn __repr__(&self) -> String {
        match self.inner {
            CoreSpec::Earliest => "OffsetSpec.earliest()".to_string(),
            CoreSpec::Latest => "OffsetSpec.latest()".to_string(),
            CoreSpec::Timestamp(t) => format!("OffsetSpec.for_timestamp({t})"),
        }
    }
}

/// Kafka's admin operations. See `lagless/_lagless.pyi`.
#[pyclass(module = "lagless._lagless", name = "AdminClient", frozen)]
pub struct AdminClient {
    /// `None` once closed. A call holds its own reference while it runs, so `close()` from
    /// another thread lets it finish.
    inner: Mutex<Option<Arc<lagless::admin::AdminClient>>>,
    /// A call's timeout when none is given: `default.api.timeout.ms`.
    default_timeout: Duration,
}

impl AdminClient {
    fn timeout(&self, request_timeout: Option<f64>) -> Duration {
        duration(request_timeout).unwrap_or(self.default_timeout)
    }

    /// The core client, or ClosedError after `close()`.
    fn client(&self, py: Python<'_>) -> PyResult<Arc<lagless::admin::AdminClient>> {
        self.inner
            .lock()
            .unpoisoned()
            .clone()
            .ok_or_else(|| to_py(py, &Error::Closed))
    }
}

#[pymethods]
impl AdminClient {
    #[new]
    fn py_new(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let c = crate::config::from_mapping(py, config)?;
        let default_timeout = c
            .get("default.api.timeout.ms")
            .py(py)?
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(Duration::from_secs(60), Duration::from_millis);
        let inner = py.detach(|| lagless::admin::AdminClient::new(&c)).py(py)?;
        Ok(AdminClient {
            inner: Mutex::new(Some(Arc::new(inner))),
            default_timeout,
        })
    }

    /// Stops the client's connections and threads; every later call raises ClosedError.
    /// Closing again does nothing. A call under way on another thread finishes first.
    fn close(&self, py: Python<'_>) {
        let client = self.inner.lock().unpoisoned().take();
        // Dropping the core client waits for its runtime's threads: without the GIL.
        py.detach(move || drop(client));
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        // Returns None: an exception raised in the `with` block propagates.
        self.close(py);
    }

    #[pyo3(signature = (new_topics, request_timeout=None))]
    fn create_topics<'py>(
        &self,
        py: Python<'py>,
        new_topics: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let topics = objects::<NewTopic>(new_topics, "new_topics", "NewTopic")?
            .iter()
            .map(|t| t.get().core(py))
            .collect::<PyResult<Vec<_>>>()?;
        distinct(py, topics.iter().map(|t| t.name.as_str()), "topic")?;
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.create_topics(&topics, timeout))
            .py(py)?;
        named_outcomes(py, results)
    }

    #[pyo3(signature = (topics, request_timeout=None))]
    fn delete_topics<'py>(
        &self,
        py: Python<'py>,
        topics: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let topics = names(py, topics, "topic")?;
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py.detach(|| client.delete_topics(&refs, timeout)).py(py)?;
        named_outcomes(py, results)
    }

    #[pyo3(signature = (new_partitions, request_timeout=None))]
    fn create_partitions<'py>(
        &self,
        py: Python<'py>,
        new_partitions: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let counts: Vec<(String, i32)> =
            objects::<NewPartitions>(new_partitions, "new_partitions", "NewPartitions")?
                .iter()
                .map(|p| (p.get().topic.clone(), p.get().new_total_count))
                .collect();
        distinct(py, counts.iter().map(|(t, _)| t.as_str()), "topic")?;
        if let Some((t, n)) = counts.iter().find(|(_, n)| *n < 1) {
            return Err(invalid(
                py,
                format!("topic `{t}`: new_total_count must be >= 1, got {n}"),
            ));
        }
        let refs: Vec<(&str, i32)> = counts.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.create_partitions(&refs, timeout))
            .py(py)?;
        named_outcomes(py, results)
    }

    #[pyo3(signature = (request_timeout=None))]
    fn describe_cluster<'py>(
        &self,
        py: Python<'py>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let c = py.detach(|| client.describe_cluster(timeout)).py(py)?;
        let d = PyDict::new(py);
        d.set_item("cluster_id", c.cluster_id)?;
        d.set_item("controller_id", c.controller_id)?;
        let brokers = PyList::empty(py);
        for b in c.brokers {
            let bd = PyDict::new(py);
            bd.set_item("id", b.id)?;
            bd.set_item("host", b.host)?;
            bd.set_item("port", b.port)?;
            bd.set_item("rack", b.rack)?;
            brokers.append(bd)?;
        }
        d.set_item("brokers", brokers)?;
        Ok(d)
    }

    /// confluent-kafka's `ClusterMetadata`: the brokers, and every topic (internal ones only
    /// with `include_internal`) with its partitions' leader, replicas and ISR. Three requests
    /// (DescribeCluster, then Metadata for the names, then for the topics) within
    /// `request_timeout` in all.
    #[pyo3(signature = (include_internal=false, request_timeout=None))]
    fn list_topics<'py>(
        &self,
        py: Python<'py>,
        include_internal: bool,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let deadline = Instant::now().checked_add(timeout);
        let left = || deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
        let (cluster, topics) = py
            .detach(|| -> lagless::Result<_> {
                let cluster = client.describe_cluster(left())?;
                let names = client.list_topics(include_internal, left())?;
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let topics = if refs.is_empty() {
                    Vec::new()
                } else {
                    client.describe_topics(&refs, left())?
                };
                Ok((cluster, topics))
            })
            .py(py)?;
        let m = py.import("lagless._admin")?;
        let brokers = PyDict::new(py);
        for b in cluster.brokers {
            let bm = m
                .getattr("BrokerMetadata")?
                .call1((b.id, b.host, b.port, b.rack))?;
            brokers.set_item(b.id, bm)?;
        }
        let out = PyDict::new(py);
        for (name, r) in topics {
            let (partitions, error) = match r {
                Ok(t) => {
                    let parts = PyDict::new(py);
                    for p in t.partitions {
                        // No leader (-1 on the wire) is None: not known, never a sentinel.
                        let pm = m.getattr("PartitionMetadata")?.call1((
                            p.partition,
                            (p.leader >= 0).then_some(p.leader),
                            p.replicas,
                            p.isr,
                            py.None(),
                        ))?;
                        parts.set_item(p.partition, pm)?;
                    }
                    (parts, py.None())
                }
                Err(e) => (PyDict::new(py), exception(py, &to_py(py, &e))),
            };
            let tm = m
                .getattr("TopicMetadata")?
                .call1((name.clone(), partitions, error))?;
            out.set_item(name, tm)?;
        }
        m.getattr("ClusterMetadata")?.call1((
            cluster.cluster_id,
            (cluster.controller_id >= 0).then_some(cluster.controller_id),
            brokers,
            out,
        ))
    }

    #[pyo3(signature = (topics, request_timeout=None))]
    fn describe_topics<'py>(
        &self,
        py: Python<'py>,
        topics: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let topics = names(py, topics, "topic")?;
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.describe_topics(&refs, timeout))
            .py(py)?;
        let out = PyDict::new(py);
        for (name, r) in results {
            let v = item(py, r, |t| {
                let d = PyDict::new(py);
                d.set_item("name", t.name)?;
                d.set_item("topic_id", t.topic_id)?;
                d.set_item("is_internal", t.is_internal)?;
                let parts = PyList::empty(py);
                for p in t.partitions {
                    let pd = PyDict::new(py);
                    pd.set_item("partition", p.partition)?;
                    pd.set_item("leader", p.leader)?;
                    pd.set_item("leader_epoch", p.leader_epoch)?;
                    pd.set_item("replicas", p.replicas)?;
                    pd.set_item("isr", p.isr)?;
                    pd.set_item("offline_replicas", p.offline_replicas)?;
                    parts.append(pd)?;
                }
                d.set_item("partitions", parts)?;
                Ok(d.into_any().unbind())
            })?;
            out.set_item(name, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (offsets, request_timeout=None))]
    fn list_offsets<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mapping = offsets.cast::<PyMapping>().map_err(|_| {
            PyTypeError::new_err(format!(
                "`offsets` must be a dict of TopicPartition to OffsetSpec, got {}",
                type_name(offsets)
            ))
        })?;
        let mut wanted = Vec::new();
        for pair in mapping.items()?.iter() {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract()?;
            let tp = k.cast::<TopicPartition>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "`offsets` keys must be TopicPartition, got {}",
                    type_name(&k)
                ))
            })?;
            let spec = v.cast::<OffsetSpec>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "`offsets` values must be OffsetSpec, got {}",
                    type_name(&v)
                ))
            })?;
            let tp = tp.borrow().core();
            check_partition(py, &tp)?;
            wanted.push((tp, spec.get().inner));
        }
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py.detach(|| client.list_offsets(&wanted, timeout)).py(py)?;
        let out = PyDict::new(py);
        for (tp, r) in results {
            let v = item(py, r, |o| {
                let d = PyDict::new(py);
                d.set_item("offset", o.offset)?;
                d.set_item("timestamp", o.timestamp)?;
                Ok(d.into_any().unbind())
            })?;
            out.set_item(tp_key(py, &tp)?, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (resources, request_timeout=None))]
    fn describe_configs<'py>(
        &self,
        py: Python<'py>,
        resources: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let resources: Vec<CoreResource> =
            objects::<ConfigResource>(resources, "resources", "ConfigResource")?
                .iter()
                .map(|r| r.get().inner.clone())
                .collect();
        if let Some(r) = twice(&resources) {
            return Err(invalid(py, format!("{r:?} is given twice")));
        }
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.describe_configs(&resources, timeout))
            .py(py)?;
        let out = PyDict::new(py);
        for (res, r) in results {
            let v = item(py, r, |entries| {
                let d = PyDict::new(py);
                for e in entries {
                    let ed = PyDict::new(py);
                    ed.set_item("value", e.value)?;
                    ed.set_item("read_only", e.read_only)?;
                    ed.set_item("is_default", e.is_default)?;
                    ed.set_item("is_sensitive", e.is_sensitive)?;
                    d.set_item(e.name, ed)?;
                }
                Ok(d.into_any().unbind())
            })?;
            out.set_item(Bound::new(py, ConfigResource { inner: res })?, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (changes, request_timeout=None))]
    fn incremental_alter_configs<'py>(
        &self,
        py: Python<'py>,
        changes: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let shape = "`changes` must be a dict of ConfigResource to a dict of config key to str \
                     (set), None (back to the default) or an (AlterConfigOpType, str) pair";
        let mapping = changes
            .cast::<PyMapping>()
            .map_err(|_| PyTypeError::new_err(format!("{shape}, got {}", type_name(changes))))?;
        let mut wanted = Vec::new();
        for pair in mapping.items()?.iter() {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract()?;
            let res = k.cast::<ConfigResource>().map_err(|_| {
                PyTypeError::new_err(format!("{shape}; a key is a {}", type_name(&k)))
            })?;
            let ops: BTreeMap<String, Bound<'_, PyAny>> = v.extract().map_err(|_| {
                PyTypeError::new_err(format!("{shape}; a value is a {}", type_name(&v)))
            })?;
            let res = res.get().inner.clone();
            if ops.is_empty() {
                return Err(invalid(py, format!("no config change given for {res:?}")));
            }
            if ops.keys().any(|k| k.is_empty()) {
                return Err(invalid(py, format!("a config key for {res:?} is empty")));
            }
            let ops = ops
                .into_iter()
                .map(|(k, v)| alter_op(py, k, &v, shape))
                .collect::<PyResult<Vec<_>>>()?;
            wanted.push((res, ops));
        }
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.incremental_alter_configs(&wanted, timeout))
            .py(py)?;
        let out = PyDict::new(py);
        for (res, r) in results {
            let v = item(py, r, |()| Ok(py.None()))?;
            out.set_item(Bound::new(py, ConfigResource { inner: res })?, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (request_timeout=None))]
    fn list_consumer_groups<'py>(
        &self,
        py: Python<'py>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let groups = py.detach(|| client.list_groups(timeout)).py(py)?;
        let out = PyList::empty(py);
        // Consumer groups only, as Kafka's Admin lists them: groups of other kinds (Connect
        // workers) declare their own protocol type; an empty one holds committed offsets only.
        for g in groups
            .into_iter()
            .filter(|g| g.protocol_type.is_empty() || g.protocol_type == "consumer")
        {
            let d = PyDict::new(py);
            d.set_item("group_id", g.group_id)?;
            d.set_item("protocol_type", g.protocol_type)?;
            d.set_item("state", g.state)?;
            d.set_item("group_type", g.group_type)?;
            out.append(d)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (group_ids, request_timeout=None))]
    fn describe_consumer_groups<'py>(
        &self,
        py: Python<'py>,
        group_ids: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let groups = names(py, group_ids, "group")?;
        let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.describe_groups(&refs, timeout))
            .py(py)?;
        let out = PyDict::new(py);
        for (group, r) in results {
            let v = item(py, r, |g| {
                let d = PyDict::new(py);
                d.set_item("group_id", g.group_id)?;
                d.set_item(
                    "group_type",
                    match g.group_type {
                        GroupType::Classic => "classic",
                        GroupType::Consumer => "consumer",
                    },
                )?;
                d.set_item("state", g.state)?;
                d.set_item("protocol_type", g.protocol_type)?;
                d.set_item("partition_assignor", g.assignor)?;
                let members = PyList::empty(py);
                for m in g.members {
                    let md = PyDict::new(py);
                    md.set_item("member_id", m.member_id)?;
                    md.set_item("group_instance_id", m.group_instance_id)?;
                    md.set_item("client_id", m.client_id)?;
                    md.set_item("host", m.client_host)?;
                    md.set_item(
                        "assignment",
                        crate::types::partition_list(py, &m.assignment)?,
                    )?;
                    members.append(md)?;
                }
                d.set_item("members", members)?;
                Ok(d.into_any().unbind())
            })?;
            out.set_item(group, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (group_id, partitions=None, request_timeout=None))]
    fn list_consumer_group_offsets<'py>(
        &self,
        py: Python<'py>,
        group_id: &str,
        partitions: Option<&Bound<'py, PyAny>>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        check_group(py, group_id)?;
        let partitions: Option<Vec<CoreTp>> = partitions
            .map(|p| {
                partitions_arg(py, p, "partitions").map(|v| v.into_iter().map(|t| t.0).collect())
            })
            .transpose()?;
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.list_consumer_group_offsets(group_id, partitions.as_deref(), timeout))
            .py(py)?;
        let out = PyDict::new(py);
        for (tp, r) in results {
            let v = item(py, r, |om| {
                let t = match om {
                    Some(om) => TopicPartition::committed(&tp, om),
                    None => TopicPartition::unset(&tp),
                };
                Ok(Bound::new(py, t)?.into_any().unbind())
            })?;
            out.set_item(tp_key(py, &tp)?, v)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (group_id, offsets, request_timeout=None))]
    fn alter_consumer_group_offsets<'py>(
        &self,
        py: Python<'py>,
        group_id: &str,
        offsets: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        check_group(py, group_id)?;
        let offsets = partitions_arg(py, offsets, "offsets")?
            .into_iter()
            .map(|(tp, offset, metadata)| {
                if offset < 0 {
                    return Err(invalid(
                        py,
                        format!("the offset of {tp} must be >= 0, got {offset}"),
                    ));
                }
                Ok((
                    tp,
                    OffsetAndMetadata {
                        offset,
                        metadata: metadata.unwrap_or_default(),
                    },
                ))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.alter_consumer_group_offsets(group_id, &offsets, timeout))
            .py(py)?;
        partition_outcomes(py, results)
    }

    #[pyo3(signature = (group_id, partitions, request_timeout=None))]
    fn delete_consumer_group_offsets<'py>(
        &self,
        py: Python<'py>,
        group_id: &str,
        partitions: &Bound<'py, PyAny>,
        request_timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        check_group(py, group_id)?;
        let partitions: Vec<CoreTp> = partitions_arg(py, partitions, "partitions")?
            .into_iter()
            .map(|t| t.0)
            .collect();
        let timeout = self.timeout(request_timeout);
        let client = self.client(py)?;
        let results = py
            .detach(|| client.delete_consumer_group_offsets(group_id, &partitions, timeout))
            .py(py)?;
        partition_outcomes(py, results)
    }
}

/// One change of `incremental_alter_configs`: a str sets `key`, None deletes it (back to the
/// default), an `(AlterConfigOpType, value)` pair does that operation (confluent-kafka's
/// `AlterConfigOpType`: SET 0, DELETE 1, APPEND 2, SUBTRACT 3, Kafka's own codes; APPEND and
/// SUBTRACT add or remove an item of a list-valued config).
fn alter_op(
    py: Python<'_>,
    key: String,
    v: &Bound<'_, PyAny>,
    shape: &str,
) -> PyResult<AlterConfigOp> {
    if v.is_none() {
        return Ok(AlterConfigOp::Delete(key));
    }
    if let Ok(value) = v.extract::<String>() {
        return Ok(AlterConfigOp::Set(key, value));
    }
    let (op, value): (Bound<'_, PyAny>, Option<String>) = v.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{shape}; the value of `{key}` is a {}",
            type_name(v)
        ))
    })?;
    let code: i64 = op.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{shape}; the operation of `{key}` is a {}",
            type_name(&op)
        ))
    })?;
    let needs_value = |value: Option<String>, name: &str| {
        value.ok_or_else(|| invalid(py, format!("{name} of `{key}` needs a value, got None")))
    };
    Ok(match code {
        0 => AlterConfigOp::Set(key.clone(), needs_value(value, "SET")?),
        1 => AlterConfigOp::Delete(key.clone()),
        2 => AlterConfigOp::Append(key.clone(), needs_value(value, "APPEND")?),
        3 => AlterConfigOp::Subtract(key.clone(), needs_value(value, "SUBTRACT")?),
        other => {
            return Err(invalid(
                py,
                format!("the operation of `{key}` must be an AlterConfigOpType, got {other}"),
            ))
        }
    })
}

fn partitions_arg(
    py: Python<'_>,
    arg: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Vec<(CoreTp, i64, Option<String>)>> {
    let v = partitions(py, arg, name)?;
    if v.is_empty() {
        return Err(invalid(py, format!("`{name}` is empty")));
    }
    Ok(v)
}

fn check_group(py: Python<'_>, group_id: &str) -> PyResult<()> {
    if group_id.is_empty() {
        return Err(invalid(py, "the group id is empty".into()));
    }
    Ok(())
}

/// The first item that is given twice.
fn twice<T: Ord>(items: &[T]) -> Option<&T> {
    let mut seen = BTreeSet::new();
    items.iter().find(|r| !seen.insert(*r))
}

/// {name: None or the exception} of a call with no data per item.
fn named_outcomes<'py>(
    py: Python<'py>,
    results: lagless::admin::ItemResults<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, r) in results {
        out.set_item(name, item(py, r, |()| Ok(py.None()))?)?;
    }
    Ok(out)
}

/// {TopicPartition: None or the exception} of a call with no data per partition.
fn partition_outcomes<'py>(
    py: Python<'py>,
    results: lagless::admin::ItemResults<CoreTp>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (tp, r) in results {
        out.set_item(tp_key(py, &tp)?, item(py, r, |()| Ok(py.None()))?)?;
    }
    Ok(out)
}

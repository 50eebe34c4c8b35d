//! `TopicPartition` and `Message`.
//!
//! A `Message` is built eagerly: `consume()` turns each record's key, value and header values
//! into `bytes` once, straight from the core's `Bytes` (one copy per payload, no intermediate
//! `Vec`), while it already holds the GIL. Eager rather than lazy because a record's `Bytes`
//! share the buffer of the whole fetch response: a lazily converted `Message` kept alive by the
//! application (a list of "bad" records, say) would pin that buffer, many times the record's
//! size. After conversion nothing of the core's buffers outlives `consume()`, the getters are
//! plain reads, and `Message` is immutable and safe to share between threads.
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use lagless::offsets::OffsetAndMetadata;
use lagless::{CommitResults, ConsumerRecord, TopicPartition as CoreTp};
use pyo3::basic::CompareOp;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::errors::{exception, to_py};

/// Offsets with a special meaning, as confluent-kafka names them.
pub const OFFSET_BEGINNING: i64 = -2;
pub const OFFSET_END: i64 = -1;
pub const OFFSET_INVALID: i64 = -1001;

/// A topic, a partition and, where it matters, an offset (the next offset to read: what
/// `committed()`, `position()` return and `commit()`, `seek()`, `assign()` take).
#[pyclass(module = "lagless._lagless", name = "TopicPartition")]
pub struct TopicPartition {
    #[pyo3(get, set)]
    pub topic: String,
    #[pyo3(get, set)]
    pub partition: i32,
    #[pyo3(get, set)]
    pub offset: i64,
    #[pyo3(get, set)]
    pub metadata: Option<String>,
    /// The error of this partition in a commit result, else None.
    #[pyo3(get, set)]
    pub error: Option<Py<PyAny>>,
}

#[pymethods]
impl TopicPartition {
    #[new]
    #[pyo3(signature = (topic, partition=-1, offset=OFFSET_INVALID, metadata=None))]
    fn py_new(topic: String, partition: i32, offset: i64, metadata: Option<String>) -> Self {
        TopicPartition {
            topic,
            partition,
            offset,
            metadata,
            error: None,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "TopicPartition(topic={:?}, partition={}, offset={})",
            self.topic, self.partition, self.offset
        )
    }

    /// Equality and order are by (topic, partition), as in confluent-kafka, so partitions can be
    /// dict keys and set members whatever their offset.
    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<TopicPartition>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.borrow();
        let a = (&self.topic, self.partition);
        let b = (&other.topic, other.partition);
        let r = match op {
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        };
        Ok(pyo3::types::PyBool::new(py, r)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        (&self.topic, self.partition).hash(&mut h);
        h.finish()
    }
}

impl TopicPartition {
    pub fn core(&self) -> CoreTp {
        CoreTp::new(self.topic.clone(), self.partition)
    }

    pub fn from_core(tp: &CoreTp, offset: i64) -> TopicPartition {
        TopicPartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
            offset,
            metadata: None,
            error: None,
        }
    }

    /// A partition without an offset (OFFSET_INVALID), as listeners and assignments give them.
    pub fn unset(tp: &CoreTp) -> TopicPartition {
        Self::from_core(tp, OFFSET_INVALID)
    }

    /// A partition with what a commit carries: the offset and its metadata.
    pub fn committed(tp: &CoreTp, om: OffsetAndMetadata) -> TopicPartition {
        TopicPartition {
            metadata: Some(om.metadata),
            ..Self::from_core(tp, om.offset)
        }
    }
}

/// A list (any iterable) of `TopicPartition`, their partitions only (offsets ignored).
pub fn extract_partitions(obj: &Bound<'_, PyAny>) -> PyResult<Vec<CoreTp>> {
    Ok(extract_tps(obj)?.into_iter().map(|t| t.0).collect())
}

/// A list (any iterable) of `TopicPartition` as (partition, offset, metadata).
pub fn extract_tps(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(CoreTp, i64, Option<String>)>> {
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        let tp = item.cast::<TopicPartition>().map_err(|_| {
            PyTypeError::new_err(format!(
                "expected a list of TopicPartition, got an item of type {}",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let tp = tp.borrow();
        out.push((tp.core(), tp.offset, tp.metadata.clone()));
    }
    Ok(out)
}

/// A list of `partitions` without offsets.
pub fn partition_list<'py>(py: Python<'py>, partitions: &[CoreTp]) -> PyResult<Bound<'py, PyList>> {
    tp_list(py, partitions.iter().map(TopicPartition::unset))
}

pub fn tp_list<'py>(
    py: Python<'py>,
    tps: impl IntoIterator<Item = TopicPartition>,
) -> PyResult<Bound<'py, PyList>> {
    let items = tps
        .into_iter()
        .map(|tp| Bound::new(py, tp))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// A record read from Kafka.
#[pyclass(module = "lagless._lagless", name = "Message", frozen)]
pub struct Message {
    #[pyo3(get)]
    topic: Py<PyString>,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    offset: i64,
    /// Milliseconds since the epoch (create time or log-append time, as the topic says).
    #[pyo3(get)]
    timestamp: i64,
    #[pyo3(get)]
    key: Option<Py<PyBytes>>,
    #[pyo3(get)]
    value: Option<Py<PyBytes>>,
    headers: Vec<(Py<PyString>, Option<Py<PyBytes>>)>,
    /// Whether the record came from a recovery stream (`enable.parallel.rebalance`).
    #[pyo3(get)]
    from_recovery: bool,
}

#[pymethods]
impl Message {
    /// The record's headers as a new list of (key, value) pairs.
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .headers
            .iter()
            .map(|(k, v)| {
                PyTuple::new(
                    py,
                    [
                        k.clone_ref(py).into_any(),
                        v.as_ref()
                            .map_or_else(|| py.None(), |v| v.clone_ref(py).into_any()),
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Message(topic={:?}, partition={}, offset={}, timestamp={}, key_len={}, value_len={})",
            self.topic.bind(py).to_string(),
            self.partition,
            self.offset,
            self.timestamp,
            self.key
                .as_ref()
                .map_or(-1, |k| k.bind(py).as_bytes().len() as i64),
            self.value
                .as_ref()
                .map_or(-1, |v| v.bind(py).as_bytes().len() as i64),
        )
    }
}

/// Builds `Message`s, reusing one Python string per topic.
#[derive(Default)]
pub struct MessageBuilder {
    topic: Option<(std::sync::Arc<str>, Py<PyString>)>,
}

impl MessageBuilder {
    /// The records as a list of `Message`s, in order.
    pub fn list<'py>(
        py: Python<'py>,
        records: Vec<ConsumerRecord>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut b = MessageBuilder::default();
        let msgs = records
            .into_iter()
            .map(|r| b.build(py, r))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, msgs)
    }

    pub fn build<'py>(
        &mut self,
        py: Python<'py>,
        r: ConsumerRecord,
    ) -> PyResult<Bound<'py, Message>> {
        let topic = match &self.topic {
            Some((t, s)) if std::sync::Arc::ptr_eq(t, &r.topic) || **t == *r.topic => {
                s.clone_ref(py)
            }
            _ => {
                let s = PyString::new(py, &r.topic).unbind();
                self.topic = Some((r.topic.clone(), s.clone_ref(py)));
                s
            }
        };
        let bytes = |b: &Option<bytes::Bytes>| b.as_ref().map(|b| PyBytes::new(py, b).unbind());
        let headers = r
            .headers
            .iter()
            .map(|h| (PyString::new(py, &h.key).unbind(), bytes(&h.value)))
            .collect();
        Bound::new(
            py,
            Message {
                topic,
                partition: r.partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: bytes(&r.key),
                value: bytes(&r.value),
                headers,
                from_recovery: r.from_recovery,
            },
        )
    }
}

impl Message {
    pub fn topic_str(&self, py: Python<'_>) -> String {
        self.topic.bind(py).to_string()
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    pub fn offset(&self) -> i64 {
        self.offset
    }
}

/// One TopicPartition per partition asked for, in the order asked, with the offset the core found
/// for it: the core answers in partition order, and Python callers zip the answer with what they
/// passed, as with `committed()` and `position()`.
pub fn in_given_order<'py>(
    py: Python<'py>,
    asked: &[CoreTp],
    found: impl IntoIterator<Item = (CoreTp, i64)>,
) -> PyResult<Bound<'py, PyList>> {
    let found: HashMap<CoreTp, i64> = found.into_iter().collect();
    tp_list(
        py,
        asked.iter().map(|tp| {
            TopicPartition::from_core(tp, found.get(tp).copied().unwrap_or(OFFSET_INVALID))
        }),
    )
}

/// A commit's per-partition results as TopicPartitions carrying what was committed (offset and
/// metadata: with a running KIP-333 recovery stream, the low-water mark and its token) and, for
/// a partition that failed, its error; with the first error.
pub fn commit_result_list(
    py: Python<'_>,
    results: CommitResults,
) -> (Vec<TopicPartition>, Option<PyErr>) {
    let mut first = None;
    let out = results
        .into_iter()
        .map(|(tp, om, r)| {
            let mut t = TopicPartition::committed(&tp, om);
            if let Err(e) = r {
                let err = to_py(py, &e);
                t.error = Some(exception(py, &err));
                first.get_or_insert(err);
            }
            t
        })
        .collect();
    (out, first)
}

/// (error or None, list of TopicPartition) for a commit callback.
pub fn commit_outcome<'py>(
    py: Python<'py>,
    res: lagless::Result<CommitResults>,
) -> PyResult<(Py<PyAny>, Bound<'py, PyList>)> {
    match res {
        Err(e) => Ok((exception(py, &to_py(py, &e)), PyList::empty(py))),
        Ok(results) => {
            let (out, first) = commit_result_list(py, results);
            let first = first.map_or_else(|| py.None(), |e| exception(py, &e));
            Ok((first, tp_list(py, out)?))
        }
    }
}

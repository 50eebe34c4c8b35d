//! `MessageBatch`: the records of one `consume_batch()` as columns, for Arrow and NumPy-style
//! consumers that want one object per batch instead of one `Message` per record.
//!
//! Every column lives in a Python `bytes` object, written once when the batch is built and never
//! changed. That one allocation is both views of the column:
//! - the buffer protocol: `memoryview(bytes).cast(fmt)` needs nothing of our own class. The
//!   extension is built for the stable ABI of Python 3.9, where a class of ours cannot fill a
//!   `Py_buffer` (its layout is only stable from 3.11), but `bytes` can;
//! - the Arrow C data interface: an `arrow_buffer::Buffer` over the same bytes, kept alive by a
//!   reference to the `bytes` object, exported with `arrow-data`'s `FFI_ArrowArray`. pyarrow and
//!   polars import it without copying: their buffer addresses are the `bytes`' storage;
//! - the Arrow C stream interface: `arrow-array`'s `FFI_ArrowArrayStream` over a reader of one
//!   `RecordBatch` whose columns are the same `ArrayData` (the Buffers cloned by reference
//!   count), for importers that take streams (DuckDB, `pyarrow.RecordBatchReader.from_stream`).
//!
//! Building copies each payload once, as `consume()` does into `bytes` per record: a record's
//! `Bytes` share the buffer of the whole fetch response, which the batch must not pin (see
//! `types.rs`). The columns start 64-byte aligned, as the Arrow format recommends.
use std::ffi::CStr;
use std::panic::AssertUnwindSafe;
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{make_array, RecordBatch, RecordBatchIterator};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_data::ArrayData;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use bytes::Bytes;
use lagless::ConsumerRecord;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyList, PyMemoryView, PyTuple};

/// Where the Arrow format recommends buffers to start.
const ALIGN: usize = 64;

const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
const ARRAY_CAPSULE: &CStr = c"arrow_array";
const STREAM_CAPSULE: &CStr = c"arrow_array_stream";

/// The owner of an Arrow buffer that points into a Python `bytes` object. Dropped by whoever
/// releases the exported array last, possibly without the GIL: pyo3 then defers the decref to
/// the next time a thread attaches, which is what it is for. The field is never read: holding it
/// (and dropping it last) is its whole job. `AssertUnwindSafe` because arrow-buffer asks owners
/// to be `RefUnwindSafe`, and nothing here is observed after a panic: the reference is only
/// ever dropped.
struct BytesOwner(#[allow(dead_code)] AssertUnwindSafe<Py<PyBytes>>);

/// One buffer of a column: `len` bytes at `start` in `bytes`, read through the buffer protocol as
/// items of `format` (a `struct` module code).
struct PyColumn {
    bytes: Py<PyBytes>,
    start: usize,
    len: usize,
    format: &'static str,
}

impl PyColumn {
    fn memoryview<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mv = PyMemoryView::from(self.bytes.bind(py).as_any())?;
        let slice =
            pyo3::types::PySlice::new(py, self.start as isize, (self.start + self.len) as isize, 1);
        mv.get_item(slice)?.call_method1("cast", (self.format,))
    }
}

/// Allocates `len` bytes in a new Python `bytes` object, 64-byte aligned, lets `fill` write them,
/// and returns the Python and the Arrow view of that memory.
fn column(
    py: Python<'_>,
    len: usize,
    format: &'static str,
    fill: impl FnOnce(&mut [u8]),
) -> PyResult<(PyColumn, Buffer)> {
    let mut start = 0;
    let obj = PyBytes::new_with(py, len + ALIGN - 1, |b| {
        start = (ALIGN - (b.as_ptr() as usize) % ALIGN) % ALIGN;
        fill(&mut b[start..start + len]);
        Ok(())
    })?;
    let base = obj.as_bytes().as_ptr();
    let ptr = NonNull::new(base.wrapping_add(start).cast_mut())
        .ok_or_else(|| PyValueError::new_err("bytes object without storage"))?;
    let owner = Arc::new(BytesOwner(AssertUnwindSafe(obj.clone().unbind())));
    // SAFETY: `ptr..ptr + len` lies inside the storage of the `bytes` object (allocated with
    // `len + ALIGN - 1` bytes and `start < ALIGN`), which `owner` keeps alive for as long as the
    // Buffer or any of its clones exist. A `bytes` object's storage never moves, and nothing
    // writes it after `new_with` returned, so the memory stays valid and unchanged.
    let buffer = unsafe { Buffer::from_custom_allocation(ptr, len, owner) };
    Ok((
        PyColumn {
            bytes: obj.unbind(),
            start,
            len,
            format,
        },
        buffer,
    ))
}

/// A fixed-width column of one value per record.
fn fixed<const W: usize>(
    py: Python<'_>,
    records: &[ConsumerRecord],
    format: &'static str,
    get: impl Fn(&ConsumerRecord) -> [u8; W],
) -> PyResult<(PyColumn, Buffer)> {
    column(py, records.len() * W, format, |b| {
        for (dst, r) in b.chunks_exact_mut(W).zip(records) {
            dst.copy_from_slice(&get(r));
        }
    })
}

/// A validity bitmap (least significant bit first, as Arrow): bit i set where `valid(record i)`.
fn bitmap(
    py: Python<'_>,
    records: &[ConsumerRecord],
    valid: impl Fn(&ConsumerRecord) -> bool,
) -> PyResult<(PyColumn, Buffer)> {
    column(py, records.len().div_ceil(8), "B", |b| {
        for (i, r) in records.iter().enumerate() {
            if valid(r) {
                b[i / 8] |= 1 << (i % 8);
            }
        }
    })
}

/// A nullable binary column (key or value): data, offsets and validity.
struct BinaryColumn {
    data: PyColumn,
    offsets: PyColumn,
    validity: PyColumn,
    arrow: ArrayData,
}

fn binary(
    py: Python<'_>,
    records: &[ConsumerRecord],
    get: impl Fn(&ConsumerRecord) -> Option<&Bytes>,
) -> PyResult<BinaryColumn> {
    let total: usize = records.iter().map(|r| get(r).map_or(0, |b| b.len())).sum();
    // Arrow's binary type has 32-bit offsets; a batch of more than 2 GiB of keys or values (a
    // large max.poll.records with large records) takes the 64-bit one.
    let large = i32::try_from(total).is_err();
    let (data_col, data) = column(py, total, "B", |b| {
        let mut at = 0;
        for r in records {
            if let Some(v) = get(r) {
                b[at..at + v.len()].copy_from_slice(v);
                at += v.len();
            }
        }
    })?;
    let mut end = 0usize;
    let (offsets_col, offsets) = if large {
        let mut ends = std::iter::once(0i64).chain(records.iter().map(|r| {
            end += get(r).map_or(0, |b| b.len());
            end as i64
        }));
        fixed_from(py, records.len() + 1, "q", || {
            ends.next().unwrap_or_default().to_ne_bytes()
        })?
    } else {
        let mut ends = std::iter::once(0i32).chain(records.iter().map(|r| {
            end += get(r).map_or(0, |b| b.len());
            end as i32
        }));
        fixed_from(py, records.len() + 1, "i", || {
            ends.next().unwrap_or_default().to_ne_bytes()
        })?
    };
    let (validity_col, validity) = bitmap(py, records, |r| get(r).is_some())?;
    let nulls = NullBuffer::new(BooleanBuffer::new(validity, 0, records.len()));
    let arrow = ArrayData::builder(if large {
        DataType::LargeBinary
    } else {
        DataType::Binary
    })
    .len(records.len())
    .nulls(Some(nulls))
    .add_buffer(offsets)
    .add_buffer(data)
    .build()
    .map_err(arrow_error)?;
    Ok(BinaryColumn {
        data: data_col,
        offsets: offsets_col,
        validity: validity_col,
        arrow,
    })
}

/// `n` fixed-width items taken from `next` in order.
fn fixed_from<const W: usize>(
    py: Python<'_>,
    n: usize,
    format: &'static str,
    mut next: impl FnMut() -> [u8; W],
) -> PyResult<(PyColumn, Buffer)> {
    column(py, n * W, format, |b| {
        for dst in b.chunks_exact_mut(W) {
            dst.copy_from_slice(&next());
        }
    })
}

fn arrow_error(e: arrow_schema::ArrowError) -> PyErr {
    PyValueError::new_err(format!("building the Arrow array: {e}"))
}

fn fields(key: &DataType, value: &DataType) -> Fields {
    Fields::from(vec![
        Field::new(
            "topic",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            false,
        ),
        Field::new("partition", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("key", key.clone(), true),
        Field::new("value", value.clone(), true),
        Field::new("from_recovery", DataType::Boolean, false),
    ])
}

/// The records of one `Consumer.consume_batch()` as columns. See `lagless/_lagless.pyi`.
#[pyclass(module = "lagless._lagless", name = "MessageBatch", frozen)]
pub struct MessageBatch {
    len: usize,
    topic_names: Vec<String>,
    topic_ids: PyColumn,
    partitions: PyColumn,
    offsets: PyColumn,
    timestamps: PyColumn,
    keys: BinaryColumn,
    values: BinaryColumn,
    from_recovery: PyColumn,
    /// The struct array of all columns, as exported.
    arrow: ArrayData,
}

impl MessageBatch {
    /// Builds the columns of `records` (the GIL held: the columns are Python objects).
    pub fn build(py: Python<'_>, records: &[ConsumerRecord]) -> PyResult<MessageBatch> {
        let n = records.len();
        // Topics dictionary-encoded: a batch rarely spans more than a few topics, and the
        // records of one fetch share one `Arc<str>` per topic, so the pointer test usually hits.
        let mut names: Vec<Arc<str>> = Vec::new();
        let mut last: Option<(Arc<str>, i32)> = None;
        let mut ids = records.iter().map(|r| {
            if let Some((t, id)) = &last {
                if Arc::ptr_eq(t, &r.topic) || **t == *r.topic {
                    return *id;
                }
            }
            let id = match names.iter().position(|t| **t == *r.topic) {
                Some(i) => i,
                None => {
                    names.push(r.topic.clone());
                    names.len() - 1
                }
            } as i32;
            last = Some((r.topic.clone(), id));
            id
        });
        let (topic_ids, topic_buf) =
            fixed_from(py, n, "i", || ids.next().unwrap_or_default().to_ne_bytes())?;
        drop(ids);
        let (partitions, partition_buf) = fixed(py, records, "i", |r| r.partition.to_ne_bytes())?;
        let (offsets, offset_buf) = fixed(py, records, "q", |r| r.offset.to_ne_bytes())?;
        let (timestamps, timestamp_buf) = fixed(py, records, "q", |r| r.timestamp.to_ne_bytes())?;
        let keys = binary(py, records, |r| r.key.as_ref())?;
        let values = binary(py, records, |r| r.value.as_ref())?;
        let (from_recovery, recovery_buf) = bitmap(py, records, |r| r.from_recovery)?;

        // The dictionary of topic names: small, so plain Rust buffers.
        let mut name_offsets = Vec::with_capacity(names.len() + 1);
        let mut name_data = Vec::new();
        name_offsets.push(0i32);
        for t in &names {
            name_data.extend_from_slice(t.as_bytes());
            let end = i32::try_from(name_data.len())
                .map_err(|_| PyValueError::new_err("topic names too long"))?;
            name_offsets.push(end);
        }
        let dictionary = ArrayData::builder(DataType::Utf8)
            .len(names.len())
            .add_buffer(Buffer::from_vec(name_offsets))
            .add_buffer(Buffer::from_vec(name_data))
            .build()
            .map_err(arrow_error)?;
        let dict_type = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let topic = ArrayData::builder(dict_type)
            .len(n)
            .add_buffer(topic_buf)
            .add_child_data(dictionary)
            .build()
            .map_err(arrow_error)?;
        let plain = |t: DataType, b: Buffer| {
            ArrayData::builder(t)
                .len(n)
                .add_buffer(b)
                .build()
                .map_err(arrow_error)
        };
        let children = vec![
            topic,
            plain(DataType::Int32, partition_buf)?,
            plain(DataType::Int64, offset_buf)?,
            plain(
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                timestamp_buf,
            )?,
            keys.arrow.clone(),
            values.arrow.clone(),
            plain(DataType::Boolean, recovery_buf)?,
        ];
        let arrow = ArrayData::builder(DataType::Struct(fields(
            keys.arrow.data_type(),
            values.arrow.data_type(),
        )))
        .len(n)
        .child_data(children)
        .build()
        .map_err(arrow_error)?;
        Ok(MessageBatch {
            len: n,
            topic_names: names.iter().map(|t| t.to_string()).collect(),
            topic_ids,
            partitions,
            offsets,
            timestamps,
            keys,
            values,
            from_recovery,
            arrow,
        })
    }

    fn schema_capsule<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.arrow.data_type()).map_err(arrow_error)?;
        // The capsule owns the schema; its destructor drops it, which calls the schema's release
        // callback unless the importer moved it out (the PyCapsule protocol's rule).
        PyCapsule::new_with_value(py, schema, SCHEMA_CAPSULE)
    }

    /// The batch as one `RecordBatch`: the struct's fields as the schema, its children as the
    /// columns. `make_array` wraps each child's `ArrayData` as it is, so the columns share the
    /// batch's Buffers (reference counts, no copy of the memory).
    fn record_batch(&self) -> PyResult<RecordBatch> {
        let DataType::Struct(fields) = self.arrow.data_type() else {
            return Err(PyValueError::new_err(
                "the batch's Arrow array is not a struct",
            ));
        };
        let columns = self
            .arrow
            .child_data()
            .iter()
            .cloned()
            .map(make_array)
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields.clone())), columns).map_err(arrow_error)
    }

    fn binary_item<'py>(
        py: Python<'py>,
        col: &BinaryColumn,
        i: usize,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let a = &col.arrow;
        if a.nulls().is_some_and(|n| n.is_null(i)) {
            return Ok(None);
        }
        let (start, end) = if matches!(a.data_type(), DataType::LargeBinary) {
            let o: &[i64] = a.buffers()[0].typed_data();
            (o[i] as usize, o[i + 1] as usize)
        } else {
            let o: &[i32] = a.buffers()[0].typed_data();
            (o[i] as usize, o[i + 1] as usize)
        };
        Ok(Some(PyBytes::new(
            py,
            &a.buffers()[1].as_slice()[start..end],
        )))
    }
}

#[pymethods]
impl MessageBatch {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!(
            "MessageBatch(len={}, topics={:?}, value_bytes={})",
            self.len, self.topic_names, self.values.data.len
        )
    }

    /// The topic names the `topic_ids` column indexes.
    #[getter]
    fn topic_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, &self.topic_names)
    }

    /// Each record's index into `topic_names` (int32, format 'i').
    #[getter]
    fn topic_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.topic_ids.memoryview(py)
    }

    /// Each record's partition (int32, format 'i').
    #[getter]
    fn partitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.partitions.memoryview(py)
    }

    /// Each record's offset (int64, format 'q').
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.offsets.memoryview(py)
    }

    /// Each record's timestamp in milliseconds since the epoch (int64, format 'q').
    #[getter]
    fn timestamps<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.timestamps.memoryview(py)
    }

    /// All keys one after the other (format 'B'); record i's is
    /// `key_data[key_offsets[i]:key_offsets[i + 1]]`.
    #[getter]
    fn key_data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys.data.memoryview(py)
    }

    /// len + 1 offsets into `key_data` (int32 'i', or int64 'q' past 2 GiB of keys).
    #[getter]
    fn key_offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys.offsets.memoryview(py)
    }

    /// Bit i (least significant first) set where record i has a key, clear for a null key.
    #[getter]
    fn key_validity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys.validity.memoryview(py)
    }

    /// All values one after the other (format 'B'), as `key_data`.
    #[getter]
    fn value_data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.values.data.memoryview(py)
    }

    /// len + 1 offsets into `value_data` (int32 'i', or int64 'q' past 2 GiB of values).
    #[getter]
    fn value_offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.values.offsets.memoryview(py)
    }

    /// Bit i set where record i has a value, clear for a null value (a tombstone).
    #[getter]
    fn value_validity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.values.validity.memoryview(py)
    }

    /// Bit i set where record i came from a recovery stream (`enable.parallel.rebalance`).
    #[getter(from_recovery)]
    fn recovery_bits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.from_recovery.memoryview(py)
    }

    /// Record i's key as bytes (a copy), None for a null key.
    fn key<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.check_index(i)?;
        Self::binary_item(py, &self.keys, i)
    }

    /// Record i's value as bytes (a copy), None for a null value.
    fn value<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.check_index(i)?;
        Self::binary_item(py, &self.values, i)
    }

    /// The Arrow schema of the struct array `__arrow_c_array__` exports.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        self.schema_capsule(py)
    }

    /// Arrow PyCapsule interface: (schema, array) capsules of a struct array with the columns
    /// topic (dictionary), partition, offset, timestamp, key, value, from_recovery. The array's
    /// buffers are the batch's own memory: importing it copies nothing. `requested_schema` is
    /// ignored (allowed by the protocol): the batch has one layout.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let schema = self.schema_capsule(py)?;
        // FFI_ArrowArray::new clones the Buffers (reference counts), not the memory.
        let array = PyCapsule::new_with_value(py, FFI_ArrowArray::new(&self.arrow), ARRAY_CAPSULE)?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    /// Arrow PyCapsule interface: an `arrow_array_stream` capsule of a stream that yields this
    /// batch as one record batch (the columns of `__arrow_c_array__`'s struct, same names and
    /// types), then ends. An empty batch yields one record batch of zero rows. The stream's
    /// arrays are the batch's own memory (no copy) and keep it alive after the batch is gone;
    /// each call makes a new stream. `requested_schema` is ignored, as in `__arrow_c_array__`.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batch = self.record_batch()?;
        let schema = batch.schema();
        let reader = RecordBatchIterator::new([Ok(batch)], schema);
        // The capsule owns the stream; its destructor drops it, which calls the stream's release
        // callback unless the importer moved the stream out (and so set `release` to null).
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM_CAPSULE)
    }
}

impl MessageBatch {
    fn check_index(&self, i: usize) -> PyResult<()> {
        if i >= self.len {
            return Err(PyIndexError::new_err(format!(
                "record {i} of a batch of {}",
                self.len
            )));
        }
        Ok(())
    }
}

//! The native module `lagless._lagless`: the core's consumer, producer and admin client as
//! Python classes. The Python package `lagless` re-exports it with the exception classes and
//! the `RebalanceListener` base class.
use pyo3::prelude::*;

mod admin;
mod batch;
mod config;
mod consumer;
mod errors;
mod listener;
mod log;
mod producer;
mod transaction;
mod types;
mod wait;

use errors::IntoPyResult;

/// Creates topic `name` with `partitions` partitions and replication factor `rf`, and waits
/// until every partition has a leader. An existing topic raises KafkaError with kafka_code 36.
/// The `lagless` command-line tool with `argv` (program name first); returns its exit status.
/// The GIL is released while it runs; a panic (there should be none) is exit status 1.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| {
        std::panic::catch_unwind(|| lagless_cli::run(argv.into_iter().map(Into::into))).unwrap_or(1)
    })
}

#[pyfunction]
#[pyo3(signature = (bootstrap, name, partitions=1, rf=1))]
fn create_topic(
    py: Python<'_>,
    bootstrap: String,
    name: String,
    partitions: i32,
    rf: i16,
) -> PyResult<()> {
    py.detach(|| lagless::admin::create_topic(&bootstrap, &name, partitions, rf))
        .py(py)
}

#[pymodule]
fn _lagless(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<admin::AdminClient>()?;
    m.add_class::<admin::NewTopic>()?;
    m.add_class::<admin::NewPartitions>()?;
    m.add_class::<admin::ConfigResource>()?;
    m.add_class::<admin::OffsetSpec>()?;
    m.add_class::<consumer::Consumer>()?;
    m.add_class::<producer::Producer>()?;
    m.add_class::<types::TopicPartition>()?;
    m.add_class::<types::Message>()?;
    m.add_class::<batch::MessageBatch>()?;
    m.add_class::<transaction::ConsumerGroupMetadata>()?;
    m.add_function(wrap_pyfunction!(create_topic, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(log::_set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_error_kinds, m)?)?;
    m.add("OFFSET_BEGINNING", types::OFFSET_BEGINNING)?;
    m.add("OFFSET_END", types::OFFSET_END)?;
    m.add("OFFSET_INVALID", types::OFFSET_INVALID)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

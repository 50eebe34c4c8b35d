// The crate's front page is its README, so that its example is compiled and run as a doctest.
#![doc = include_str!("../README.md")]
//!
//! ## Layout
//!
//! The crate speaks the Kafka wire protocol itself. `kafka-protocol` supplies the message schemas and
//! is reached only through the crate-private `protocol::{msg, wire}`; everything a user sees is
//! lagless' own types. The connections (`net`), their TLS setup and SASL credentials
//! (`security`, built from the config's settings), the cluster view (`cluster`), the consumer
//! group state machine and assignors (`group`), backoff and deadlines (`backoff`) and the
//! recovery token's bookkeeping (`recovery`) are crate-private too. The `unstable-fuzzing` feature makes
//! the wire-level readers and the recovery token public for the fuzz targets and the tests' fake
//! broker, with no stability promise. The cargo features are in the table above.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
#[cfg(feature = "aio")]
pub mod aio;
pub(crate) mod backoff;
// Also for lagless' own C layer (its batches' message arrays); not part of the API.
#[doc(hidden)]
pub mod buffers;
pub(crate) mod cluster;
pub mod config;
pub mod consumer;
mod engine;
pub mod error;
pub(crate) mod fetch;
pub(crate) mod group;
pub mod listener;
pub mod log;
pub mod metrics;
pub(crate) mod net;
pub mod offsets;
pub mod producer;
// Wire-level readers and writers: public only for the fuzz targets and the tests' fake broker.
#[cfg(feature = "unstable-fuzzing")]
pub mod protocol;
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod protocol;
// The recovery token's bookkeeping: public only for the fuzz targets and the integration tests.
#[cfg(feature = "unstable-fuzzing")]
pub mod recovery;
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod recovery;
pub mod sasl;
pub mod secret;
// `security.protocol`: the TLS setup and SASL credentials, built from the config's settings.
pub(crate) mod security;
// For lagless' own C and Python layers (the same lock rule everywhere); not part of the API.
#[doc(hidden)]
pub mod sync;
// KIP-714 client telemetry: public only for the integration tests, which decode what a push
// carried with its OTLP messages.
#[cfg(feature = "unstable-fuzzing")]
pub mod telemetry;
#[cfg(not(feature = "unstable-fuzzing"))]
pub(crate) mod telemetry;
pub mod types;

pub use config::Config;
pub use consumer::error_callback::ErrorCallback;
pub use consumer::statistics::{StatisticsCallback, StatisticsDue};
pub use consumer::{
    CommitCallback, CommitResults, Consumer, ConsumerRecord, GroupMetadata, RebalanceListener,
    Watermarks,
};
pub use error::{Error, ErrorKind, Result};
pub use listener::{RebalanceEvent, RebalanceEventListener};
pub use metrics::ConsumerMetrics;
pub use producer::{Producer, ProducerRecord, RecordMetadata};
pub use protocol::records::{Compression, Header};
pub use types::OffsetAndMetadata;
pub use types::TopicPartition;

// The runtime a client owns is the engine's; the producer reaches it by this path.
pub(crate) use engine::io_runtime;

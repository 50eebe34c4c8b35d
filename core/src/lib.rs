//! lagless: a Kafka consumer client.
//!
//! The crate speaks the Kafka wire protocol itself. `kafka-protocol` supplies the message schemas and
//! is reached only through [`protocol`]; everything a user sees is lagless' own types.
#![deny(unsafe_code)]

pub mod admin;
pub mod backoff;
pub mod cluster;
pub mod config;
pub mod consumer;
pub mod error;
pub(crate) mod fetch;
pub mod group;
pub mod log;
pub mod net;
pub mod offsets;
pub mod producer;
pub mod protocol;
pub mod recovery;
pub mod sasl;
pub mod secret;
pub mod subscription;

pub use config::Config;
pub use consumer::{Consumer, ConsumerRecord, Watermarks};
pub use error::{Error, Result};
pub use offsets::OffsetAndMetadata;
pub use producer::{Producer, ProducerRecord, RecordMetadata};
pub use protocol::records::{Compression, Header};
pub use subscription::{CommitCallback, CommitResults, GroupMetadata, RebalanceListener};

/// A topic and one of its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

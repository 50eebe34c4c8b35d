//! lagless: a Kafka consumer client.
//!
//! The crate speaks the Kafka wire protocol itself. `kafka-protocol` supplies the message schemas and
//! is touched only by [`protocol`]; everything a user sees is lagless' own types.
#![deny(unsafe_code)]

pub mod error;
pub use error::{Error, Result};
pub mod admin;
pub mod backoff;
pub mod cluster;
pub mod config;
pub mod net;
pub mod producer;
pub mod protocol;

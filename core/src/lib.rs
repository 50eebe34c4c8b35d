//! lagless: a Kafka consumer client.
//!
//! The crate speaks the Kafka wire protocol itself. `kafka-protocol` supplies the message schemas and
//! is touched only by [`protocol`]; everything a user sees is lagless' own types.
#![deny(unsafe_code)]

pub mod error;
pub mod protocol;
pub use error::{Error, Result};

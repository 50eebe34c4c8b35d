//! Adapters between lagless' own types and the wire formats. This is the only part of the crate
//! that uses `kafka-protocol`, so its frequent breaking releases stay contained here.
pub mod consumer_protocol;

//! Everything wire-level: framing, version negotiation, record batches, the embedded consumer
//! protocol. The `kafka-protocol` crate is reached only through here.
pub mod records;
pub mod wire;

/// The `kafka-protocol` message types the request builders use. One import point, so that the
/// crate's frequent breaking releases touch one place.
pub mod msg {
    pub use kafka_protocol::messages::*;
    pub use kafka_protocol::protocol::StrBytes;
}

//! Consumer groups over the classic protocol: membership (sans-IO), the driver with the
//! background heartbeat, and the assignors.
pub mod assignor;
pub(crate) mod coordinator;
pub mod member;
pub(crate) mod metadata_snapshot;

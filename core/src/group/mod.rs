//! Consumer groups over the classic protocol: membership (sans-IO), the driver with the
//! background heartbeat, the assignors, and the member's rebalance decisions.
pub mod assignor;
pub(crate) mod coordinator;
pub mod member;
pub(crate) mod metadata_snapshot;
pub mod rebalance;

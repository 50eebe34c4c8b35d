//! Consumer groups over the classic protocol: the membership (sans-IO, `member`), what `poll()`
//! does next (`step`) and when the heartbeat does what (`heartbeat`), both pure; the driver that
//! carries them out over the network (`coordinator`), the member's rebalance decisions
//! (`rebalance`) and the assignors.
pub mod assignor;
pub(crate) mod coordinator;
pub(crate) mod heartbeat;
pub mod member;
pub(crate) mod metadata_snapshot;
pub mod rebalance;
pub(crate) mod step;

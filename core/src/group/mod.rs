//! Consumer groups: the membership (sans-IO, `member`), what `poll()` does next (`step`) and
//! when the heartbeat does what (`heartbeat`), both pure; the driver that carries them out
//! (`coordinator`) through a group protocol (`group_protocol`, the seam; `classic`, its
//! JoinGroup/SyncGroup implementation); the member's rebalance decisions (`rebalance`) and the
//! assignors.
pub mod assignor;
pub(crate) mod classic;
pub(crate) mod consumer_group;
pub(crate) mod coordinator;
pub(crate) mod group_member;
pub(crate) mod group_protocol;
pub(crate) mod heartbeat;
pub mod member;
pub(crate) mod metadata_snapshot;
pub mod rebalance;
pub(crate) mod step;

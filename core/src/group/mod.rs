//! Consumer group membership: the partition assignors the group leader runs.
pub mod assignor;

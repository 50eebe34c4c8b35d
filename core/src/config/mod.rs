//! Configuration, split by responsibility (see the parts' first lines).
mod keys;

pub use keys::*;

//! The producer, split by responsibility (see the parts' first lines).
mod accumulator;

pub use accumulator::*;

//! Any bytes a broker (or an attacker between us and it) sends as a fetch's records field must
//! give batches or an error, never a panic, an abort or an unbounded allocation.
#![no_main]

use bytes::Bytes;
use lagless::protocol::records::decode_batches;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // With CRC checks on, nearly every mutation stops at the CRC; off, it reaches the parser.
    let _ = decode_batches(Bytes::copy_from_slice(data), true);
    let _ = decode_batches(Bytes::copy_from_slice(data), false);
});

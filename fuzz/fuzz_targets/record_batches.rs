//! Any bytes a broker (or an attacker between us and it) sends as a fetch's records field must
//! give batches or an error, never a panic, an abort or an unbounded allocation.
#![no_main]

use bytes::Bytes;
use lagless::protocol::records::decode_batches;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // With CRC checks on, nearly every mutation stops at the CRC; off, it reaches the parser.
    for check_crcs in [true, false] {
        if let Ok(decoded) = decode_batches(Bytes::copy_from_slice(data), check_crcs) {
            // Keys and values are spans until a record is handed out: slicing them must not
            // panic either.
            for batch in &decoded.batches {
                let _ = batch.records();
            }
        }
    }
});

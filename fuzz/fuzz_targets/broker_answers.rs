//! Any bytes a broker (or an attacker between us and it) sends as the answer to a request must
//! decode to the answer or to an error, never a panic, an abort or an allocation sized by a length
//! read off the wire. The first byte picks the answer type, the second its version (within what
//! lagless speaks); the rest is the frame after the size prefix (header included).
//! `LAGLESS_FUZZ_FAMILY=0..4` pins the answer type (Fetch, Metadata, JoinGroup, SyncGroup,
//! OffsetFetch) whatever the first byte says, so each family can be given its own time: left to
//! the first byte, the fuzzer spends most of it on the larger answers.
#![no_main]

use bytes::Bytes;
use lagless::protocol::msg::{
    FetchRequest, JoinGroupRequest, MetadataRequest, OffsetFetchRequest, SyncGroupRequest,
};
use lagless::protocol::wire::{client_versions, decode_response, Api};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// The family `LAGLESS_FUZZ_FAMILY` pins, read once.
fn pinned_family() -> Option<u8> {
    static FAMILY: OnceLock<Option<u8>> = OnceLock::new();
    *FAMILY.get_or_init(|| {
        std::env::var("LAGLESS_FUZZ_FAMILY")
            .ok()
            .and_then(|v| v.parse::<u8>().ok())
            .filter(|f| *f < 5)
    })
}

fn decode<R: Api>(pick: u8, frame: &[u8]) {
    let (lo, hi) = client_versions::<R>();
    let version = lo + (pick as i16) % (hi - lo + 1);
    let _ = decode_response::<R>(Bytes::copy_from_slice(frame), version);
}

fuzz_target!(|data: &[u8]| {
    let [api, version, frame @ ..] = data else {
        return;
    };
    match pinned_family().unwrap_or(api % 5) {
        0 => decode::<FetchRequest>(*version, frame),
        1 => decode::<MetadataRequest>(*version, frame),
        2 => decode::<JoinGroupRequest>(*version, frame),
        3 => decode::<SyncGroupRequest>(*version, frame),
        _ => decode::<OffsetFetchRequest>(*version, frame),
    }
});

//! Any bytes a broker (or an attacker between us and it) sends as the answer to a request must
//! decode to the answer or to an error, never a panic, an abort or an allocation sized by a length
//! read off the wire. The first byte picks the answer type, the second its version (within what
//! lagless speaks); the rest is the frame after the size prefix (header included).
#![no_main]

use bytes::Bytes;
use lagless::protocol::msg::{
    FetchRequest, JoinGroupRequest, MetadataRequest, OffsetFetchRequest, SyncGroupRequest,
};
use lagless::protocol::wire::{client_versions, decode_response, Api};
use libfuzzer_sys::fuzz_target;

fn decode<R: Api>(pick: u8, frame: &[u8]) {
    let (lo, hi) = client_versions::<R>();
    let version = lo + (pick as i16) % (hi - lo + 1);
    let _ = decode_response::<R>(Bytes::copy_from_slice(frame), version);
}

fuzz_target!(|data: &[u8]| {
    let [api, version, frame @ ..] = data else {
        return;
    };
    match api % 5 {
        0 => decode::<FetchRequest>(*version, frame),
        1 => decode::<MetadataRequest>(*version, frame),
        2 => decode::<JoinGroupRequest>(*version, frame),
        3 => decode::<SyncGroupRequest>(*version, frame),
        _ => decode::<OffsetFetchRequest>(*version, frame),
    }
});

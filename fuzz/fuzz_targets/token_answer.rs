//! An OAuth token endpoint's answer is whatever the server (or whoever answers in its place)
//! sends. Reading it must give a token or an error, never a panic; a token it gives must expire
//! after the request was sent (no later than the latest expiry lagless takes), at exactly the
//! lifetime an integer `expires_in` says; an error never shows the access token.
//!
//! The first five bytes are the clock (seconds since the epoch, up to past the year 9999), the
//! sixth picks how the rest, as UTF-8, makes the answer: the whole body; the raw JSON value of
//! `expires_in`; or the JSON claims of a JWT that is the token, with no `expires_in`.
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use lagless::sasl::{parse_token_answer, LATEST_EXPIRY_SECS};
use libfuzzer_sys::fuzz_target;

/// The token of the templated answers: an error must never show it.
const TOKEN: &str = "tok3n-SECRET";

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<6>() else {
        return;
    };
    let Ok(rest) = std::str::from_utf8(rest) else {
        return;
    };
    let [c0, c1, c2, c3, c4, mode] = *head;
    let now = UNIX_EPOCH + Duration::from_secs(u64::from_le_bytes([c0, c1, c2, c3, c4, 0, 0, 0]));
    let body = match mode % 3 {
        0 => rest.to_string(),
        1 => format!(r#"{{"access_token":"{TOKEN}","token_type":"Bearer","expires_in":{rest}}}"#),
        _ => format!(
            r#"{{"access_token":"{TOKEN}.{}.sig"}}"#,
            base64url(rest.as_bytes())
        ),
    };
    match parse_token_answer(&body, now, "client", &BTreeMap::new()) {
        Ok(token) => {
            assert!(
                token.expires_at > now,
                "a token expired when fetched: {body}"
            );
            assert!(
                token.expires_at <= UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS),
                "a token past the latest expiry: {body}"
            );
            if mode % 3 == 1 {
                if let Ok(secs) = rest.trim().parse::<u64>() {
                    assert_eq!(token.expires_at, now + Duration::from_secs(secs), "{body}");
                }
            }
        }
        Err(m) => {
            if mode % 3 != 0 {
                assert!(!m.contains("tok3n") && !m.contains("SECRET"), "{m}");
            }
        }
    }
});

/// Unpadded base64url (RFC 4648 section 5), as JWTs are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

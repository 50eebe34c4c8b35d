//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), client side, without channel binding
//! (`n,,`), as Kafka speaks them.
//!
//! Client first: `n,,n=<user>,r=<nonce>`; server first: `r=<nonce+server part>,s=<salt>,
//! i=<iterations>`; client final: `c=biws,r=<nonce>,p=<proof>`; server final: `v=<signature>`,
//! which is checked, so a server that does not know the password (a man in the middle) is
//! refused, or `e=<error>`. The password is used as its UTF-8 bytes without SASLprep, as the Java
//! client and broker do (they would disagree with a SASLprep'd password otherwise).
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{SaslExchange, SaslMechanism};
use crate::error::{Error, Result};
use crate::secret::Secret;

/// Kafka refuses SCRAM credentials with fewer iterations (`ScramMechanism.minIterations`); a
/// server asking for fewer is weakening the exchange.
const MIN_ITERATIONS: u32 = 4096;
/// Far above what any Kafka broker stores (16384), low enough that a hostile server cannot make
/// the client spin for minutes on PBKDF2.
const MAX_ITERATIONS: u32 = 100_000;
/// Random bytes in the client nonce (base64-encoded on the wire).
const NONCE_BYTES: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Hash::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's Hi(): PBKDF2 with HMAC of this hash, output one hash long.
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            Hash::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

enum State {
    Initial,
    /// Client first sent; waiting for server first.
    SentFirst,
    /// Client final sent; the server must answer with this signature.
    SentFinal {
        server_signature: Vec<u8>,
    },
    Done,
    /// An error was reported; the exchange is over.
    Failed,
}

pub(super) struct ScramExchange {
    mechanism: SaslMechanism,
    hash: Hash,
    password: Secret,
    client_nonce: String,
    client_first_bare: String,
    state: State,
}

impl ScramExchange {
    pub(super) fn new(mechanism: SaslMechanism, user: &str, password: &Secret) -> ScramExchange {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::Rng::fill(&mut rand::thread_rng(), &mut nonce[..]);
        ScramExchange::with_nonce(mechanism, user, password, &BASE64.encode(nonce))
    }

    /// With a given client nonce: for the RFC test vectors.
    fn with_nonce(
        mechanism: SaslMechanism,
        user: &str,
        password: &Secret,
        nonce: &str,
    ) -> ScramExchange {
        let hash = match mechanism {
            SaslMechanism::ScramSha512 => Hash::Sha512,
            _ => Hash::Sha256,
        };
        ScramExchange {
            mechanism,
            hash,
            password: password.clone(),
            client_nonce: nonce.to_string(),
            client_first_bare: format!("n={},r={nonce}", escape_saslname(user)),
            state: State::Initial,
        }
    }

    fn fail(&mut self, what: impl std::fmt::Display) -> Error {
        self.state = State::Failed;
        Error::Authentication(format!("{}: {what}", self.mechanism))
    }

    fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| self.fail("the server-first message is not UTF-8"))?;
        let first = parse_server_first(server_first).map_err(|m| self.fail(m))?;
        if !first.nonce.starts_with(&self.client_nonce) || first.nonce == self.client_nonce {
            return Err(self.fail(
                "the server's nonce does not extend the client's (a replayed or forged answer)",
            ));
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&first.iterations) {
            return Err(self.fail(format!(
                "the server asks for {} iterations; lagless accepts {MIN_ITERATIONS} to \
                 {MAX_ITERATIONS}",
                first.iterations
            )));
        }
        // `biws` is base64("n,,"): the GS2 header of the client first message.
        let without_proof = format!("c=biws,r={}", first.nonce);
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let h = self.hash;
        let salted = h.hi(
            self.password.expose().as_bytes(),
            &first.salt,
            first.iterations,
        );
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        let client_signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        let server_signature = h.hmac(&server_key, auth_message.as_bytes());
        self.state = State::SentFinal { server_signature };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    fn check_server_final(&mut self, server_final: &[u8], expected: &[u8]) -> Result<()> {
        let server_final = std::str::from_utf8(server_final)
            .map_err(|_| self.fail("the server-final message is not UTF-8"))?;
        // Extensions may follow the signature or the error.
        let first = server_final.split(',').next().unwrap_or_default();
        if let Some(e) = first.strip_prefix("e=") {
            return Err(self.fail(format!("the broker reports `{e}`")));
        }
        let Some(v) = first.strip_prefix("v=") else {
            return Err(self.fail("the server-final message has neither v= nor e="));
        };
        let signature = BASE64
            .decode(v)
            .map_err(|_| self.fail("the server signature is not valid base64"))?;
        if !constant_time_eq(&signature, expected) {
            return Err(self.fail(
                "server signature mismatch: the broker could not prove it knows the password",
            ));
        }
        self.state = State::Done;
        Ok(())
    }
}

impl SaslExchange for ScramExchange {
    fn next(&mut self, broker: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        match (std::mem::replace(&mut self.state, State::Failed), broker) {
            (State::Initial, None) => {
                self.state = State::SentFirst;
                Ok(Some(format!("n,,{}", self.client_first_bare).into_bytes()))
            }
            (State::SentFirst, Some(server_first)) => self.client_final(server_first).map(Some),
            (State::SentFinal { server_signature }, Some(server_final)) => self
                .check_server_final(server_final, &server_signature)
                .map(|()| None),
            _ => Err(self.fail("the exchange was driven out of order")),
        }
    }
}

struct ServerFirst {
    nonce: String,
    salt: Vec<u8>,
    iterations: u32,
}

/// `r=<nonce>,s=<salt>,i=<count>[,<extension>...]`; `m=` (a mandatory extension) is refused.
fn parse_server_first(m: &str) -> std::result::Result<ServerFirst, String> {
    if let Some(e) = m.strip_prefix("e=") {
        return Err(format!("the broker reports `{e}`"));
    }
    if m.starts_with("m=") {
        return Err("the server demands a SCRAM extension lagless does not know".into());
    }
    let mut parts = m.split(',');
    let mut field = |name: &str| {
        parts
            .next()
            .and_then(|p| p.strip_prefix(name))
            .ok_or_else(|| format!("the server-first message lacks `{name}` in its place"))
    };
    let nonce = field("r=")?;
    let salt = field("s=")?;
    let iterations = field("i=")?;
    // RFC 5802 `printable`: %x21-2B / %x2D-7E (no comma).
    if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err("the server nonce is empty or not printable".into());
    }
    let salt = BASE64
        .decode(salt)
        .map_err(|_| "the salt is not valid base64".to_string())?;
    if salt.is_empty() {
        return Err("the salt is empty".into());
    }
    let iterations = iterations
        .parse::<u32>()
        .map_err(|_| format!("the iteration count `{iterations}` is not a number"))?;
    Ok(ServerFirst {
        nonce: nonce.to_string(),
        salt,
        iterations,
    })
}

/// RFC 5802 saslname: `=` and `,` are written `=3D` and `=2C`.
fn escape_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Compares without stopping at the first difference, so the time taken does not tell an
/// attacker how much of a forged signature was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &[u8] =
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    fn rfc7677() -> ScramExchange {
        ScramExchange::with_nonce(
            SaslMechanism::ScramSha256,
            "user",
            &Secret::new("pencil"),
            NONCE,
        )
    }

    fn past_first(x: &mut ScramExchange) {
        assert_eq!(
            x.next(None).unwrap().unwrap(),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
    }

    #[test]
    fn rfc_7677_sha_256_test_vector() {
        let mut x = rfc7677();
        past_first(&mut x);
        let client_final = x.next(Some(SERVER_FIRST)).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let done = x
            .next(Some(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="))
            .unwrap();
        assert_eq!(done, None);
        assert!(x.next(Some(b"")).is_err(), "nothing follows the end");
    }

    /// Expected values computed independently with Python's hashlib/hmac:
    /// user `alice`, password `alice-secret`, client nonce `fyko+d2lbbFgONRv9qkxdawL`,
    /// server first `r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096`.
    #[test]
    fn sha_512_matches_an_independent_computation() {
        let mut x = ScramExchange::with_nonce(
            SaslMechanism::ScramSha512,
            "alice",
            &Secret::new("alice-secret"),
            "fyko+d2lbbFgONRv9qkxdawL",
        );
        x.next(None).unwrap();
        let f = x
            .next(Some(
                b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            ))
            .unwrap()
            .unwrap();
        assert_eq!(String::from_utf8(f).unwrap(), SHA512_CLIENT_FINAL);
        assert_eq!(x.next(Some(SHA512_SERVER_FINAL.as_bytes())).unwrap(), None);
    }

    const SHA512_CLIENT_FINAL: &str = "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,\
        p=0eJWNsjwKE57CnG3Y3F0j0R878IhiVME7lCPOAQCAaWPmyG5U0rYj97bR1fy0CO/tKkhVsbtMXYafNCsxUbPIA==";
    const SHA512_SERVER_FINAL: &str = "v=BV38XWrAjRQ3k7uQ8/+CMb9yC76900pt4gC/IVYbX3RKcVN9TN7A61yHv\
        v3wN6FAnv7HpM8fo4xeJ4MxWWKtTg==";

    #[test]
    fn a_wrong_server_signature_is_an_authentication_error() {
        let mut x = rfc7677();
        past_first(&mut x);
        x.next(Some(SERVER_FIRST)).unwrap();
        // The right signature with its first character changed.
        let e = x
            .next(Some(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="))
            .unwrap_err();
        assert_eq!(e.name(), "AUTHENTICATION");
        assert!(e.to_string().contains("server signature mismatch"), "{e}");
        assert!(e.to_string().contains("SCRAM-SHA-256"), "{e}");
    }

    #[test]
    fn server_errors_are_surfaced() {
        let mut x = rfc7677();
        past_first(&mut x);
        x.next(Some(SERVER_FIRST)).unwrap();
        let e = x.next(Some(b"e=invalid-proof")).unwrap_err();
        assert!(e.to_string().contains("invalid-proof"), "{e}");

        let mut x = rfc7677();
        past_first(&mut x);
        let e = x.next(Some(b"e=unknown-user")).unwrap_err();
        assert!(e.to_string().contains("unknown-user"), "{e}");
    }

    #[test]
    fn malformed_server_messages_are_errors_never_panics() {
        let bad_firsts: &[(&[u8], &str)] = &[
            (b"", "r="),
            (b"\xff\xfe", "UTF-8"),
            (b"r=rOprNGfwEbeRWgbNEkqO", "s="),
            (
                b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==",
                "i=",
            ),
            (b"s=W22Z,r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "r="),
            (b"r=other-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
            (
                b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "nonce",
            ),
            (b"r=rOprNGfwEbeRWgbNEkqOx,s=!!!,i=4096", "base64"),
            (b"r=rOprNGfwEbeRWgbNEkqOx,s=,i=4096", "salt"),
            (
                b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
                "4095",
            ),
            (
                b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4000000000",
                "iterations",
            ),
            (
                b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1",
                "number",
            ),
            (
                b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=",
                "number",
            ),
            (
                b"m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "extension",
            ),
        ];
        for (msg, expect) in bad_firsts {
            let mut x = rfc7677();
            past_first(&mut x);
            let e = x.next(Some(msg)).unwrap_err();
            assert_eq!(e.name(), "AUTHENTICATION");
            assert!(e.to_string().contains(expect), "{msg:?}: {e}");
            assert!(x.next(Some(SERVER_FIRST)).is_err(), "failed stays failed");
        }
        let bad_finals: &[&[u8]] = &[b"", b"\xff", b"x=1", b"v=", b"v=%%%", b"v=AAAA"];
        for msg in bad_finals {
            let mut x = rfc7677();
            past_first(&mut x);
            x.next(Some(SERVER_FIRST)).unwrap();
            assert!(x.next(Some(msg)).is_err(), "{msg:?}");
        }
        // A server answer before the client spoke.
        assert!(rfc7677().next(Some(SERVER_FIRST)).is_err());
    }

    #[test]
    fn user_names_are_escaped_and_errors_hold_no_password() {
        assert_eq!(escape_saslname("a=b,c"), "a=3Db=2Cc");
        let mut x = ScramExchange::with_nonce(
            SaslMechanism::ScramSha256,
            "a=b,c",
            &Secret::new("pw-secret"),
            "n0nce",
        );
        assert_eq!(x.next(None).unwrap().unwrap(), b"n,,n=a=3Db=2Cc,r=n0nce");
        let e = x.next(Some(b"r=n0nceXY,s=AAAA,i=1")).unwrap_err();
        assert!(!e.to_string().contains("pw-secret"), "{e}");
        assert!(!format!("{e:?}").contains("pw-secret"), "{e:?}");
    }

    #[test]
    fn random_nonces_differ_and_are_printable() {
        let p = Secret::new("x");
        let a = ScramExchange::new(SaslMechanism::ScramSha256, "u", &p).client_nonce;
        let b = ScramExchange::new(SaslMechanism::ScramSha256, "u", &p).client_nonce;
        assert_ne!(a, b);
        assert!(a.len() >= 32 && !a.contains(','), "{a}");
    }
}

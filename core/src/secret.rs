//! A string that must never reach a log line, an error message or `Debug` output: a password, a
//! private key's passphrase, an OAuth client secret or bearer token.
//!
//! [`Secret`] formats as `[redacted]` under both `{}` and `{:?}`, so a struct holding one can
//! derive `Debug` safely. The value is reachable only through [`Secret::expose`], which makes
//! every place that needs the clear text easy to find.
use std::fmt;

/// What a [`Secret`] shows instead of its value.
pub const REDACTED: &str = "[redacted]";

/// A secret string; see the module docs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value` so it is never shown.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The clear text, for the one place that must send or hash it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string (an unset password, say).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Drop for Secret {
    // Overwrites the bytes before the allocation is freed, so a freed password does not linger
    // in the heap for a core dump to show. `black_box` keeps the writes from being optimised
    // away as dead stores.
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.iter_mut().for_each(|b| *b = 0);
        std::hint::black_box(&bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("hunter2-password");
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{s:#?}"), REDACTED);

        #[derive(Debug)]
        #[allow(dead_code)]
        struct Holder {
            user: String,
            password: Secret,
        }
        let h = Holder {
            user: "alice".into(),
            password: Secret::new("hunter2-password"),
        };
        let shown = format!("{h:?} {h:#?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("alice") && shown.contains(REDACTED),
            "{shown}"
        );
    }

    #[test]
    fn expose_gives_the_clear_text() {
        let s: Secret = "p@ss".into();
        assert_eq!(s.expose(), "p@ss");
        assert_eq!(s.clone(), Secret::from(String::from("p@ss")));
        assert!(!s.is_empty());
        assert!(Secret::default().is_empty());
    }
}

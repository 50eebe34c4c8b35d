//! PLAIN (RFC 4616): one message, `authzid NUL authcid NUL passwd`, with an empty authzid (act
//! as the user who authenticates), as the Java client sends it.
use super::SaslExchange;
use crate::error::{Error, Result};
use crate::secret::Secret;

pub(super) struct PlainExchange {
    message: Option<Vec<u8>>,
    sent: bool,
}

impl PlainExchange {
    pub(super) fn new(user: &str, password: &Secret) -> PlainExchange {
        let mut message = Vec::with_capacity(user.len() + password.expose().len() + 2);
        message.push(0);
        message.extend_from_slice(user.as_bytes());
        message.push(0);
        message.extend_from_slice(password.expose().as_bytes());
        PlainExchange {
            message: Some(message),
            sent: false,
        }
    }
}

impl SaslExchange for PlainExchange {
    fn next(&mut self, broker: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        match (broker, self.sent) {
            (None, false) => {
                self.sent = true;
                Ok(self.message.take())
            }
            // The broker answers a good PLAIN message with empty auth_bytes (a bad one with an
            // error code, which the connection handles).
            (Some(_), true) => Ok(None),
            _ => Err(Error::Authentication(
                "PLAIN: the exchange was driven out of order".into(),
            )),
        }
    }
}

impl Drop for PlainExchange {
    fn drop(&mut self) {
        // The message holds the password in clear.
        if let Some(m) = self.message.as_mut() {
            m.iter_mut().for_each(|b| *b = 0);
            std::hint::black_box(m);
        }
    }
}

//! Stands in for `tls.rs` when the `tls` cargo feature is off: the same names, no rustls. A
//! `Tls` cannot exist, so a config asking for `SSL` or `SASL_SSL` is refused when the client is
//! created, naming `security.protocol` and the feature, and nothing past that can meet TLS.
use std::io;

use tokio::net::TcpStream;

use super::SecuritySettings;
use crate::error::{Error, Result};

/// No TLS setup can be made in this build: the type has no values.
#[derive(Clone)]
pub enum Tls {}

/// A TLS error of this build: there are none.
pub(crate) enum NoTlsError {}

impl Tls {
    /// Refuses: this build has no TLS.
    pub(crate) fn from_settings(c: &SecuritySettings) -> Result<Tls> {
        let protocol = c.opt("security.protocol")?.unwrap_or_default();
        Err(Error::config(
            "security.protocol",
            format!(
                "`{}` needs TLS, which this build of lagless leaves out: turn on the lagless \
                 crate's `tls` feature (on by default)",
                protocol.to_ascii_uppercase()
            ),
        ))
    }

    pub(crate) fn has_client_certificate(&self) -> bool {
        match *self {}
    }

    pub(crate) async fn handshake(&self, _addr: &str, _stream: TcpStream) -> Result<TcpStream> {
        match *self {}
    }
}

pub(crate) fn rustls_error(_e: &io::Error) -> Option<&NoTlsError> {
    None
}

pub(crate) fn describe(e: &NoTlsError, _client_certificate: bool) -> String {
    match *e {}
}

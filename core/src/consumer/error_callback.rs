//! The error callback (librdkafka's `error_cb`): conditions of the whole cluster that no single
//! call fails with, handed to the application on the thread inside `poll()`. What is raised and
//! when is decided in `cluster::health`; this file only hands it over.
use crate::consumer::Consumer;
use crate::error::Result;
// The callback's holder serves the producer too: it lives below both.
pub use crate::metrics::callbacks::ErrorCallback;
pub(crate) use crate::metrics::callbacks::ErrorCallbackSlot;

impl Consumer {
    /// Sets (or with `None` removes) the error callback. It hears of conditions of the whole
    /// cluster, each once as it begins (as librdkafka's `error_cb`):
    /// - every known broker failed its last connection attempt (`ErrorKind::Transport`, "all
    ///   brokers are down"; raised again after a connection succeeded in between);
    /// - a broker refused the client's credentials (`ErrorKind::Authentication`) or its TLS
    ///   handshake failed, an untrusted certificate among others (`ErrorKind::Tls`);
    /// - the group coordinator answered no heartbeat for `session.timeout.ms`
    ///   (`ErrorKind::Timeout`).
    ///
    /// The client goes on retrying meanwhile; the callback is for the application to know (and
    /// to give up, if it wants). It runs inside `poll()` on the polling thread, before that call
    /// takes records; a `poll()` waiting for records runs it within about 100 ms of the
    /// condition. Conditions raised while no callback is set are logged only. The callback must
    /// not call this consumer's `poll()`.
    pub fn set_error_callback(&self, callback: Option<ErrorCallback>) {
        self.error_callback.set(callback);
    }

    /// Hands what the cluster raised since the last call to the error callback (drops it when
    /// there is none). Reads one atomic flag when nothing was raised.
    pub(crate) fn emit_raised(&self) -> Result<()> {
        self.error_callback.emit(self.shared.cluster.take_raised())
    }
}

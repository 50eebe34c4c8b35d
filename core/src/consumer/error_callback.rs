//! The error callback (librdkafka's `error_cb`): conditions of the whole cluster that no single
//! call fails with, handed to the application on the thread inside `poll()`. What is raised and
//! when is decided in `cluster::health`; this file only hands it over.
use std::sync::Mutex;

use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::sync::Unpoisoned;

/// The error callback: given each whole-cluster condition as it begins, on the thread in
/// `poll()`, before that call takes records. An error it returns comes out of that `poll()`.
pub type ErrorCallback = Box<dyn FnMut(&Error) -> Result<()> + Send>;

/// The callback, and a count that `set` bumps so that a callback replaced while it ran is not
/// put back.
#[derive(Default)]
pub(crate) struct ErrorCallbackSlot {
    state: Mutex<(Option<ErrorCallback>, u64)>,
}

impl ErrorCallbackSlot {
    pub(crate) fn set(&self, callback: Option<ErrorCallback>) {
        let mut st = self.state.lock().unpoisoned();
        st.0 = callback;
        st.1 += 1;
    }

    /// Hands `raised` to the callback (drops it when there is none); stops at the first error
    /// the callback returns, which is the result.
    pub(crate) fn emit(&self, raised: Vec<Error>) -> Result<()> {
        if raised.is_empty() {
            return Ok(());
        }
        let (mut callback, version) = {
            let mut st = self.state.lock().unpoisoned();
            // Taken out so the callback runs with no lock held (it may set another callback).
            (st.0.take(), st.1)
        };
        let mut result = Ok(());
        if let Some(cb) = callback.as_mut() {
            for e in &raised {
                result = cb(e);
                if result.is_err() {
                    break;
                }
            }
        }
        let mut st = self.state.lock().unpoisoned();
        if st.1 == version {
            st.0 = callback;
        }
        result
    }
}

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

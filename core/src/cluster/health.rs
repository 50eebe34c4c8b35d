//! Conditions of the whole cluster that the application hears of through its error callback
//! (librdkafka's `error_cb`), as opposed to the errors of one call or one partition: every known
//! broker failing its connection attempts, a broker refusing the client's credentials or
//! certificate, the group coordinator silent for longer than `session.timeout.ms`.
//!
//! [`Health::attempted`] decides from each connection attempt's outcome what to raise, edge
//! triggered (a condition is raised when it begins, not at every retry while it lasts), and is
//! tested from literal inputs; the cluster only records the outcomes and queues what it says.
//! The queue is drained on the application's thread, inside `poll()`.
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::{Error, ErrorKind};
use crate::sync::Unpoisoned;

/// How many raised conditions wait for the callback at most: a client nobody polls keeps the
/// newest, so the next `poll()` still hears what is going on now.
const QUEUE_BOUND: usize = 64;

/// What the last connection attempt to one broker address did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Up,
    Down(ErrorKind),
}

/// The cluster's reachability as far as the error callback goes.
#[derive(Debug, Default)]
pub(crate) struct Health {
    by_addr: HashMap<String, Reach>,
    /// "All brokers down" was raised and no connection has succeeded since.
    all_down: bool,
}

impl Health {
    /// A connection attempt to `addr` ended with `outcome`; `known` are the addresses the
    /// client knows (bootstrap servers and the brokers of the last metadata). Returns what to
    /// raise:
    /// - a refused authentication or TLS handshake (an untrusted certificate), when the
    ///   address's last attempt did not already fail that way: wrong credentials are not cured
    ///   by retrying, and the application should hear of them once, at once;
    /// - "all brokers are down" when this failure leaves every known address failed, once until
    ///   a connection succeeds again. An address never tried yet does not count as down.
    pub fn attempted(
        &mut self,
        addr: &str,
        outcome: Result<(), &Error>,
        known: &BTreeSet<String>,
    ) -> Vec<Error> {
        let mut raise = Vec::new();
        let reach = match outcome {
            Ok(()) => Reach::Up,
            Err(e) => Reach::Down(e.kind()),
        };
        let before = self.by_addr.insert(addr.to_string(), reach);
        let Err(e) = outcome else {
            self.all_down = false;
            return raise;
        };
        if matches!(e.kind(), ErrorKind::Authentication | ErrorKind::Tls) && before != Some(reach) {
            raise.push(e.clone());
        }
        let all_down = !known.is_empty()
            && known
                .iter()
                .all(|a| matches!(self.by_addr.get(a), Some(Reach::Down(_))));
        if all_down && !self.all_down {
            raise.push(Error::Transport(format!(
                "all brokers are down: the last connection attempt to each of the {} known \
                 broker(s) failed; the last one: {e}",
                known.len()
            )));
        }
        self.all_down = all_down;
        raise
    }
}

/// The conditions raised and not yet handed to the application.
#[derive(Debug, Default)]
pub(crate) struct Raised {
    queue: Mutex<VecDeque<Error>>,
    /// Set while the queue holds something: `poll()` reads it without the lock.
    pending: AtomicBool,
}

impl Raised {
    pub fn push(&self, errors: impl IntoIterator<Item = Error>) {
        let mut q = self.queue.lock().unpoisoned();
        for e in errors {
            if q.len() == QUEUE_BOUND {
                q.pop_front();
            }
            q.push_back(e);
        }
        self.pending.store(!q.is_empty(), Ordering::Release);
    }

    /// Everything raised since the last call, oldest first.
    pub fn take(&self) -> Vec<Error> {
        if !self.pending.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut q = self.queue.lock().unpoisoned();
        self.pending.store(false, Ordering::Release);
        q.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(addrs: &[&str]) -> BTreeSet<String> {
        addrs.iter().map(|a| a.to_string()).collect()
    }

    fn refused(addr: &str) -> Error {
        Error::Transport(format!(
            "cannot connect to broker {addr}: Connection refused"
        ))
    }

    fn kinds(errors: &[Error]) -> Vec<ErrorKind> {
        errors.iter().map(Error::kind).collect()
    }

    #[test]
    fn all_brokers_down_is_raised_once_when_the_last_known_one_fails() {
        let mut h = Health::default();
        let k = known(&["a:1", "b:1"]);
        let e = refused("a:1");
        assert!(
            h.attempted("a:1", Err(&e), &k).is_empty(),
            "b:1 not tried yet"
        );
        assert!(h.attempted("a:1", Err(&e), &k).is_empty());
        let raised = h.attempted("b:1", Err(&refused("b:1")), &k);
        assert_eq!(kinds(&raised), [ErrorKind::Transport]);
        let text = raised[0].to_string();
        assert!(text.contains("all brokers are down"), "{text}");
        assert!(text.contains("2 known"), "{text}");
        assert!(text.contains("b:1: Connection refused"), "{text}");
        // While it lasts, retries raise nothing more.
        assert!(h.attempted("a:1", Err(&e), &k).is_empty());
        assert!(h.attempted("b:1", Err(&refused("b:1")), &k).is_empty());
        // A connection ends it; the next time every broker fails, it is raised again.
        assert!(h.attempted("a:1", Ok(()), &k).is_empty());
        assert!(h.attempted("a:1", Err(&e), &k).len() == 1);
    }

    #[test]
    fn a_single_bootstrap_server_that_cannot_be_reached_is_all_brokers_down() {
        let mut h = Health::default();
        let k = known(&["127.0.0.1:1"]);
        let raised = h.attempted("127.0.0.1:1", Err(&refused("127.0.0.1:1")), &k);
        assert_eq!(kinds(&raised), [ErrorKind::Transport]);
    }

    #[test]
    fn a_broker_learnt_from_metadata_counts_once_known() {
        let mut h = Health::default();
        let e = refused("a:1");
        assert_eq!(h.attempted("a:1", Err(&e), &known(&["a:1"])).len(), 1);
        assert!(h.attempted("a:1", Ok(()), &known(&["a:1"])).is_empty());
        // Metadata names broker c:1; a:1 fails again, but c:1 was never tried.
        assert!(h
            .attempted("a:1", Err(&e), &known(&["a:1", "c:1"]))
            .is_empty());
    }

    #[test]
    fn refused_credentials_are_raised_at_once_and_once_per_run() {
        let mut h = Health::default();
        let k = known(&["a:1", "b:1"]);
        let auth = Error::Authentication("SASL authentication failed for user 'alice'".into());
        assert_eq!(
            kinds(&h.attempted("a:1", Err(&auth), &k)),
            [ErrorKind::Authentication]
        );
        assert!(
            h.attempted("a:1", Err(&auth), &k).is_empty(),
            "the same failure again"
        );
        // The other broker refuses them too: that is news of its own, and every broker is
        // now down.
        assert_eq!(
            kinds(&h.attempted("b:1", Err(&auth), &k)),
            [ErrorKind::Authentication, ErrorKind::Transport]
        );
        let tls = Error::Tls("certificate verify failed: UnknownIssuer".into());
        assert_eq!(
            kinds(&h.attempted("a:1", Err(&tls), &k)),
            [ErrorKind::Tls],
            "another kind of refusal"
        );
        // Connection refused is not raised per broker, only as all brokers down.
        let mut h = Health::default();
        assert!(h.attempted("a:1", Err(&refused("a:1")), &k).is_empty());
    }

    #[test]
    fn the_queue_keeps_the_newest_and_empties_when_taken() {
        let r = Raised::default();
        assert!(r.take().is_empty());
        r.push((0..QUEUE_BOUND + 3).map(|i| Error::Transport(format!("e{i}"))));
        let taken = r.take();
        assert_eq!(taken.len(), QUEUE_BOUND);
        assert_eq!(
            taken[0].to_string(),
            Error::Transport("e3".into()).to_string()
        );
        assert!(r.take().is_empty());
    }
}

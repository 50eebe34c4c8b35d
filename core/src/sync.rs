//! The one rule for locks: a poisoned lock is used as it is.
//!
//! A lock is poisoned when a thread panicked while holding it. lagless' own code does not panic
//! under a lock, so poisoning can only come from a panic in application code that runs while a
//! lock is held (none does today) or from a bug; in both cases refusing every later call would
//! turn one failure into a dead client. The state under lagless' locks stays consistent between
//! statements, so the client carries on with it, as `parking_lot` locks would.
use std::sync::{LockResult, PoisonError};

/// `lock()`, `read()`, `write()` and `Condvar` waits without the poison check: see the module.
pub trait Unpoisoned<G> {
    /// The guard (or wait result), whether or not the lock was poisoned.
    fn unpoisoned(self) -> G;
}

impl<G> Unpoisoned<G> for LockResult<G> {
    fn unpoisoned(self) -> G {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_poisoned_lock_is_used_as_it_is() {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison the lock");
        })
        .join();
        assert!(m.is_poisoned());
        *m.lock().unpoisoned() += 1;
        assert_eq!(*m.lock().unpoisoned(), 2);
    }
}

//! Where a client's I/O tasks run, and how a blocking call waits for them.
//!
//! A consumer's engine runs either on a runtime the client owns (the blocking API) or on the
//! application's tokio runtime (the async API, [`crate::aio`]).
//!
//! tokio's `Runtime::block_on` panics when called from inside another runtime ("Cannot start a
//! runtime from within a runtime"), and a `Runtime` dropped there panics too. So a blocking call
//! enters the engine's runtime context (its I/O and timers register with that runtime, whose own
//! threads drive them) and parks the calling thread until the future is done; and a client
//! dropped inside a runtime lets its runtime wind down in the background. A blocking call made
//! from async code then blocks that worker thread for the call, as any blocking call does.
use std::future::Future;
use std::sync::{Arc, Condvar, LockResult, MutexGuard, WaitTimeoutResult};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use crate::error::{Error, Result};

/// The runtime a consumer's I/O tasks (fetch, heartbeat, joins, commits) run on.
pub(crate) enum Engine {
    /// A runtime of the client's own, shut down with the client.
    Owned(tokio::runtime::Runtime),
    /// The application's runtime (the async front); the client's tasks end when it closes.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    Shared(tokio::runtime::Handle),
}

impl Engine {
    /// The client's own runtime: two worker threads named `thread_name`.
    pub fn owned(thread_name: &str) -> Result<Engine> {
        io_runtime(thread_name).map(Engine::Owned)
    }

    /// The runtime the caller runs on. Outside a runtime this is an error naming what to do.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub fn current(what: &str) -> Result<Engine> {
        tokio::runtime::Handle::try_current()
            .map(Engine::Shared)
            .map_err(|_| {
                Error::IllegalState(format!(
                    "{what} must be created inside a tokio runtime (it runs its I/O on the \
                     application's runtime); use the blocking API outside one"
                ))
            })
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        match self {
            Engine::Owned(rt) => rt.handle(),
            Engine::Shared(h) => h,
        }
    }

    pub fn is_shared(&self) -> bool {
        matches!(self, Engine::Shared(_))
    }

    /// Runs `f` to completion on the calling thread, its I/O and timers on this engine.
    ///
    /// On a shared engine the async front never calls this: on a current-thread runtime nothing
    /// would drive the I/O while the one thread is parked here.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        let _context = self.handle().enter();
        park_on(f)
    }

    /// Stops an owned runtime: waiting up to `grace` for its tasks outside a runtime, at once
    /// (in the background) inside one, where waiting would block, and panic, the caller's
    /// runtime. A shared runtime is the application's: nothing to stop.
    pub fn shutdown(self, grace: Duration) {
        if let Engine::Owned(rt) = self {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(grace);
            }
        }
    }
}

/// Signals that records, errors or a group step are waiting: to threads blocked in `poll()` or
/// `position()` (a condition variable) and to tasks awaiting the async front's `recv()` (a
/// tokio `Notify`) alike.
pub(crate) struct Ready {
    threads: Condvar,
    tasks: tokio::sync::Notify,
}

impl Ready {
    pub fn new() -> Ready {
        Ready {
            threads: Condvar::new(),
            tasks: tokio::sync::Notify::new(),
        }
    }

    pub fn notify_all(&self) {
        self.threads.notify_all();
        self.tasks.notify_waiters();
    }

    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        self.threads.wait_timeout(guard, timeout)
    }

    /// A future that completes at the next `notify_all`; enable it before looking at the state
    /// it guards, so a notification between the look and the await is not missed.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.tasks.notified()
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` on this thread, parking between wake-ups. Unlike tokio's `block_on` it may nest (a
/// rebalance listener run by a blocking `poll()` calls `commit_sync()`), and it does not mark
/// the thread as a runtime thread.
fn park_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        // A wake-up meant for an outer park_on only makes this loop poll once more.
        std::thread::park();
    }
}

/// Starts the I/O runtime a consumer or producer owns: two worker threads named `thread_name`.
pub(crate) fn io_runtime(thread_name: &str) -> Result<tokio::runtime::Runtime> {
    io_runtime_started(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(thread_name)
            .enable_all()
            .build(),
    )
}

/// A runtime that cannot start (the OS refuses threads) is one error, whichever client asked:
/// nothing was sent to a broker, so it is not a transport failure, and retrying will not help.
fn io_runtime_started(
    built: std::io::Result<tokio::runtime::Runtime>,
) -> Result<tokio::runtime::Runtime> {
    built.map_err(|e| Error::IllegalState(format!("cannot start the I/O runtime: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_waits_nest_and_run_the_runtimes_timers() {
        let rt = Engine::owned("lagless-test").unwrap();
        let v = rt.block_on(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            // A nested blocking wait, as a listener calling commit_sync() inside poll() does.
            rt.block_on(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                7
            })
        });
        assert_eq!(v, 7);
        rt.shutdown(Duration::from_secs(1));
    }

    #[test]
    fn blocking_waits_and_shutdown_work_inside_a_current_thread_runtime() {
        let app = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        app.block_on(async {
            let rt = Engine::owned("lagless-test").unwrap();
            let v = rt.block_on(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                3
            });
            assert_eq!(v, 3);
            // Must not panic ("Cannot drop a runtime in a context where blocking is not
            // allowed").
            rt.shutdown(Duration::from_secs(1));
        });
    }

    #[test]
    fn a_shared_engine_needs_a_runtime() {
        let e = Engine::current("an async consumer").err().unwrap();
        assert!(e.to_string().contains("inside a tokio runtime"), "{e}");
    }

    #[test]
    fn a_runtime_that_cannot_start_is_illegal_state_for_consumer_and_producer() {
        let e = io_runtime_started(Err(std::io::Error::other(
            "Resource temporarily unavailable",
        )))
        .unwrap_err();
        assert!(matches!(e, Error::IllegalState(_)), "{e:?}");
        assert!(!e.is_retriable());
        assert_eq!(
            e.to_string(),
            "illegal state: cannot start the I/O runtime: Resource temporarily unavailable"
        );
        assert!(io_runtime("lagless-test").is_ok());
    }
}

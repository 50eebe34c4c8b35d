//! How a blocking call waits for the I/O runtime, whether or not the caller is itself inside a
//! tokio runtime.
//!
//! tokio's `Runtime::block_on` panics when called from inside another runtime ("Cannot start a
//! runtime from within a runtime"), and a `Runtime` dropped there panics too. So a blocking call
//! enters the client's runtime context (its I/O and timers register with that runtime, whose own
//! threads drive them) and parks the calling thread until the future is done; and a client
//! dropped inside a runtime lets its runtime wind down in the background. A blocking call made
//! from async code then blocks that worker thread for the call, as any blocking call does.
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

/// Runs `f` to completion on the calling thread, its I/O and timers on `rt`.
pub(crate) fn block_on<F: Future>(rt: &tokio::runtime::Runtime, f: F) -> F::Output {
    let _context = rt.enter();
    park_on(f)
}

/// Stops `rt`: waiting up to `grace` for its tasks outside a runtime, at once (in the
/// background) inside one, where waiting would block, and panic, the caller's runtime.
pub(crate) fn shutdown(rt: tokio::runtime::Runtime, grace: Duration) {
    if tokio::runtime::Handle::try_current().is_ok() {
        rt.shutdown_background();
    } else {
        rt.shutdown_timeout(grace);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_waits_nest_and_run_the_runtimes_timers() {
        let rt = crate::io_runtime("lagless-test").unwrap();
        let v = block_on(&rt, async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            // A nested blocking wait, as a listener calling commit_sync() inside poll() does.
            block_on(&rt, async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                7
            })
        });
        assert_eq!(v, 7);
        shutdown(rt, Duration::from_secs(1));
    }

    #[test]
    fn blocking_waits_and_shutdown_work_inside_a_current_thread_runtime() {
        let app = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        app.block_on(async {
            let rt = crate::io_runtime("lagless-test").unwrap();
            let v = block_on(&rt, async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                3
            });
            assert_eq!(v, 3);
            // Must not panic ("Cannot drop a runtime in a context where blocking is not
            // allowed").
            shutdown(rt, Duration::from_secs(1));
        });
    }
}

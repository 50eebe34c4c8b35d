//! The buffers a connection reads its large answers into, kept and reused from one answer to
//! the next.
//!
//! Why: a fetch answer is read into one buffer, and the records it carries keep that buffer
//! alive until the application has taken the last of them, on the application's thread. A fresh
//! allocation per answer (1-6 MiB with the default fetch sizes), freed on another thread, is
//! the pattern glibc's allocator handles worst: the first freed block raises its mmap threshold
//! to that size, later answers come from the heap arenas, and freed heap memory stays resident
//! in uneven steps. Peak RSS then varied by one or two answers from run to run. A buffer that
//! goes back to its connection instead is never freed while the connection lives, so the
//! process holds what the connection needed at its busiest and no more: each take reuses a
//! returned buffer if one is large enough, and a new buffer is made only when every kept one is
//! still held or too small.
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::sync::Unpoisoned;

/// Answers below this size (heartbeats, offsets, metadata) are ordinary allocations: the
/// allocator serves them well, and keeping them would only hold memory.
pub(super) const POOLED_FROM: usize = 64 * 1024;

/// Most returned buffers a connection keeps: a fast reader holds two or three answers at once
/// (one being read, one or two being taken); more are kept only if that many were held at once.
const KEEPS: usize = 4;

/// A connection's kept buffers.
#[derive(Clone, Default)]
pub(super) struct ReceivePool {
    kept: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl ReceivePool {
    /// An empty buffer with room for an answer of `len` bytes.
    pub(super) fn take(&self, len: usize) -> Vec<u8> {
        if len < POOLED_FROM {
            return Vec::with_capacity(len);
        }
        let mut kept = self.kept.lock().unpoisoned();
        let fits = kept
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match fits {
            Some(i) => kept.swap_remove(i),
            None => Vec::with_capacity(rounded(len)),
        }
    }

    /// The answer read into `buf`, as the frame the rest of the client slices. A pooled buffer
    /// goes back to this pool when the frame and every slice of it are dropped.
    pub(super) fn frame(&self, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < POOLED_FROM {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Pooled {
            buf,
            pool: Arc::downgrade(&self.kept),
        })
    }

    #[cfg(test)]
    fn kept_capacities(&self) -> Vec<usize> {
        let mut c: Vec<usize> = self
            .kept
            .lock()
            .unpoisoned()
            .iter()
            .map(Vec::capacity)
            .collect();
        c.sort_unstable();
        c
    }
}

/// Sizes in steps of an eighth of the largest power of two not above them (at least
/// [`POOLED_FROM`]), so that answers of nearly the same size fit each other's buffers; a buffer
/// is at most an eighth larger than the answer it was made for.
fn rounded(len: usize) -> usize {
    let power = 1usize << (usize::BITS - 1 - len.leading_zeros());
    let step = (power / 8).max(POOLED_FROM);
    len.div_ceil(step) * step
}

/// The owner of a frame's bytes, going back to its connection's pool when the frame is dropped.
struct Pooled {
    buf: Vec<u8>,
    /// Weak: a connection that is gone frees the buffer instead.
    pool: Weak<Mutex<Vec<Vec<u8>>>>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut kept = pool.lock().unpoisoned();
        if kept.len() < KEEPS {
            kept.push(buf);
        } else if let Some(smallest) = kept.iter_mut().min_by_key(|b| b.capacity()) {
            // Full: keep the larger buffers, which fit more answers; the smaller one is freed.
            if smallest.capacity() < buf.capacity() {
                *smallest = buf;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of `len` bytes read through the pool, filled with `byte`.
    fn answer(pool: &ReceivePool, len: usize, byte: u8) -> Bytes {
        let mut buf = pool.take(len);
        buf.resize(len, byte);
        pool.frame(buf)
    }

    #[test]
    fn a_buffer_comes_back_once_every_slice_of_its_answer_is_dropped() {
        let pool = ReceivePool::default();
        let first = answer(&pool, 1_000_000, 1);
        let at = first.as_ptr();
        let record = first.slice(10..20);
        drop(first);
        // A record of the answer still holds it: the next answer gets a buffer of its own.
        assert!(pool.kept_capacities().is_empty());
        let second = answer(&pool, 1_000_000, 2);
        assert_ne!(second.as_ptr(), at);
        assert_eq!(&record[..], &[1; 10]);
        drop(record);
        assert_eq!(pool.kept_capacities(), vec![rounded(1_000_000)]);
        // The returned buffer serves the next answer that fits, with that answer's bytes only.
        let third = answer(&pool, 900_000, 3);
        assert_eq!(third.as_ptr(), at);
        assert_eq!(third.len(), 900_000);
        assert!(third.iter().all(|&b| b == 3));
        assert!(pool.kept_capacities().is_empty());
        assert!(second.iter().all(|&b| b == 2));
    }

    #[test]
    fn the_smallest_kept_buffer_that_fits_is_taken_and_a_larger_answer_gets_a_new_one() {
        let pool = ReceivePool::default();
        let (small, large) = (answer(&pool, 200_000, 0), answer(&pool, 3_000_000, 0));
        let (small_at, large_at) = (small.as_ptr(), large.as_ptr());
        drop((small, large));
        let a = answer(&pool, 150_000, 0);
        assert_eq!(a.as_ptr(), small_at);
        let b = answer(&pool, 150_000, 0);
        assert_eq!(b.as_ptr(), large_at);
        drop((a, b));
        let c = answer(&pool, 5_000_000, 0);
        assert!(c.as_ptr() != small_at && c.as_ptr() != large_at);
        assert_eq!(pool.kept_capacities().len(), 2);
    }

    #[test]
    fn a_full_pool_keeps_its_largest_buffers() {
        let pool = ReceivePool::default();
        let sizes = [100_000, 400_000, 800_000, 1_600_000, 3_200_000];
        let held: Vec<Bytes> = sizes.iter().map(|&n| answer(&pool, n, 0)).collect();
        drop(held);
        let kept = pool.kept_capacities();
        assert_eq!(
            kept,
            sizes[1..].iter().map(|&n| rounded(n)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn small_answers_are_not_kept_and_a_closed_connection_frees_its_buffers() {
        let pool = ReceivePool::default();
        drop(answer(&pool, POOLED_FROM - 1, 0));
        assert!(pool.kept_capacities().is_empty());
        let late = answer(&pool, POOLED_FROM, 7);
        drop(pool);
        // The connection is gone; the last slice frees the buffer instead of returning it.
        assert!(late.iter().all(|&b| b == 7));
        drop(late);
    }

    #[test]
    fn sizes_round_up_by_at_most_an_eighth() {
        assert_eq!(rounded(POOLED_FROM), POOLED_FROM);
        assert_eq!(rounded(POOLED_FROM + 1), 2 * POOLED_FROM);
        assert_eq!(rounded(1 << 20), 1 << 20);
        assert_eq!(rounded((1 << 20) + 1), (1 << 20) + (1 << 17));
        for len in [70_000, 1_000_000, 1_048_577, 5_000_000, 50_000_000] {
            let r = rounded(len);
            assert!(r >= len && r - len <= len / 8 + POOLED_FROM, "{len} -> {r}");
        }
    }
}

//! The large buffers of the fetch path, kept and reused instead of freed: the buffer a fetch
//! answer is read into, the buffer a compressed batch is inflated into, and a batch's vector of
//! record spans.
//!
//! Why: each lives until the application has taken the last record it holds, and is freed on
//! the application's thread. Left to the allocator, how much of that memory stays resident and
//! how often it is faulted in anew depends on glibc's heuristics: blocks over its mmap threshold
//! (128 KiB at first) are mapped per allocation and faulted in 4 KiB at a time; freeing one raises
//! the threshold to its size, after which they come from the heap, where freed memory stays
//! resident in uneven steps or, past the trim threshold, goes back to the system to be faulted in
//! again. With a fresh allocation per answer, peak RSS on 1 KB records varied from 30 to 42 MiB
//! between runs of the same build, and a change of when answers were freed moved the CPU of
//! reading 100 B lz4 records by 10% in page faults. A buffer that goes back to its pool is never
//! freed while it is wanted again, so what lagless holds follows what it needed at its busiest,
//! whatever the allocator does: measured against fresh allocations (5M x 100 B and 2M x 1 KB,
//! every codec), peak RSS 21-47 MiB against 31-58, page faults a run 4-10k against 8-72k, CPU
//! the same or lower.
//!
//! A pool keeps returned buffers by capacity; a take gets the smallest kept one that is large
//! enough (and not more than [`TOO_LARGE`] times the need), else a new one, and then frees the
//! largest kept one too small for that need, so that needs of varying sizes do not leave a
//! buffer of every size kept beside the ones in use. Each pool keeps at
//! most [`KEEPS_BYTES`]; a buffer returned to a full pool is freed. Small buffers (below
//! [`POOLED_FROM`] bytes) are never kept. Every connection has its own pool for its answers
//! (freed with the connection and its last answer); inflated batches and span vectors have one
//! pool each for the process, as have the message arrays of the C layer's batches. A kept byte buffer keeps what it held: a decoder that writes into
//! a slice writes over it instead of zero-filling it first ([`Pool::take_overwritable`]).
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;

use crate::protocol::records::RecordSpans;
use crate::sync::Unpoisoned;

/// Buffers below this many bytes are ordinary allocations (heartbeat and offset answers). Low
/// enough to keep a batch's span vector and a small inflated batch too: left to the heap, whose
/// top glibc gives back past 128 KiB free, those were faulted in again and again (100 B snappy
/// records: 10-70k page faults a run with 64 KiB here, 7k with 16 KiB).
pub(crate) const POOLED_FROM: usize = 16 * 1024;

/// A kept buffer serves a need of at least 1/`TOO_LARGE` of its size, so that a rare large one
/// does not hold the memory of many small ones.
const TOO_LARGE: usize = 4;

/// What one pool keeps at most, in bytes: more than a consumer at full speed holds returned at
/// once (the default `fetch.buffer.max.bytes` is 64 MiB, of records mostly still held).
const KEEPS_BYTES: usize = 64 << 20;

/// The buffers compressed batches are inflated into, shared by every consumer of the process.
pub(crate) static INFLATED: LazyLock<Arc<Pool<u8>>> = LazyLock::new(|| Arc::new(Pool::new()));

/// The span vectors of decoded batches, shared by every consumer of the process.
pub(crate) static SPANS: Pool<RecordSpans> = Pool::new();

/// Kept buffers of `T`.
pub struct Pool<T> {
    kept: Mutex<Kept<T>>,
}

struct Kept<T> {
    /// Empty vectors by capacity.
    by_capacity: BTreeMap<usize, Vec<Vec<T>>>,
    bytes: usize,
}

impl<T> Kept<T> {
    /// Takes one kept vector of `capacity` (which must be kept).
    fn remove(&mut self, capacity: usize) -> Vec<T> {
        let same = self
            .by_capacity
            .get_mut(&capacity)
            .expect("a kept capacity");
        let v = same.pop().expect("no empty list is kept");
        if same.is_empty() {
            self.by_capacity.remove(&capacity);
        }
        self.bytes -= bytes_of::<T>(capacity);
        v
    }
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool::new()
    }
}

impl<T> Pool<T> {
    pub const fn new() -> Self {
        Pool {
            kept: Mutex::new(Kept {
                by_capacity: BTreeMap::new(),
                bytes: 0,
            }),
        }
    }

    /// An empty vector with room for at least `len` elements (it may grow past that like any
    /// `Vec`).
    pub fn take(&self, len: usize) -> Vec<T> {
        let mut v = self.take_kept(len).unwrap_or_else(|| fresh(len));
        v.clear();
        v
    }

    /// A kept vector with room for `len` elements, as its last use left it (bytes stay written;
    /// elements that need dropping were dropped when it was given back); `None` for a small
    /// `len` or when none fits.
    fn take_kept(&self, len: usize) -> Option<Vec<T>> {
        if bytes_of::<T>(len) < POOLED_FROM {
            return None;
        }
        let mut kept = self.kept.lock().unpoisoned();
        let fits = kept
            .by_capacity
            .range(len..=len.saturating_mul(TOO_LARGE))
            .next()
            .map(|(&capacity, _)| capacity);
        match fits {
            Some(capacity) => Some(kept.remove(capacity)),
            None => {
                // A miss makes a new buffer. The largest kept one too small for this need goes,
                // so that a miss replaces a buffer instead of adding one: what a pool holds, kept
                // and lent, stays near what was lent at once, where needs of varying sizes would
                // otherwise leave the smaller buffers kept beside the new ones.
                let smaller = kept
                    .by_capacity
                    .range(..len)
                    .next_back()
                    .map(|(&capacity, _)| capacity);
                let freed = smaller.map(|capacity| kept.remove(capacity));
                drop(kept);
                drop(freed);
                None
            }
        }
    }

    /// Gives `v` back: kept if it is large and the pool has room; freed otherwise.
    pub fn give(&self, mut v: Vec<T>) {
        let bytes = bytes_of::<T>(v.capacity());
        if !(POOLED_FROM..=KEEPS_BYTES).contains(&bytes) {
            return;
        }
        // Outside the lock: clearing drops the elements (a record's headers). Plain bytes stay
        // as they are, to be written over (see `Pool::take_overwritable`).
        if std::mem::needs_drop::<T>() {
            v.clear();
        }
        let mut kept = self.kept.lock().unpoisoned();
        if kept.bytes + bytes <= KEEPS_BYTES {
            kept.bytes += bytes;
            kept.by_capacity.entry(v.capacity()).or_default().push(v);
        }
    }

    /// Whether the vector at `at` is kept.
    #[cfg(test)]
    pub(crate) fn keeps(&self, at: *const T) -> bool {
        let kept = self.kept.lock().unpoisoned();
        kept.by_capacity
            .values()
            .flatten()
            .any(|v| v.as_ptr() == at)
    }

    #[cfg(test)]
    fn kept_capacities(&self) -> Vec<usize> {
        let kept = self.kept.lock().unpoisoned();
        let mut c = Vec::new();
        for (&capacity, same) in &kept.by_capacity {
            c.extend(std::iter::repeat_n(capacity, same.len()));
        }
        c
    }
}

impl Pool<u8> {
    /// A buffer with room for at least `capacity` bytes, to write over, for a decoder that
    /// writes into a slice: a kept one comes with what its last use wrote (its length says how
    /// far), so that only bytes it never held need zero-filling before the decoder writes. The
    /// caller grows it to what it needs and truncates it to what it wrote.
    #[cfg_attr(not(any(feature = "lz4", feature = "snappy")), allow(dead_code))]
    pub(crate) fn take_overwritable(&self, capacity: usize) -> Vec<u8> {
        self.take_kept(capacity).unwrap_or_else(|| fresh(capacity))
    }

    /// The bytes written into `buf` (a buffer of [`Pool::take`]), as `Bytes` for the rest of the
    /// client to slice. A large buffer goes back to `pool` when the `Bytes` and every slice of it
    /// are dropped.
    pub(crate) fn bytes(pool: &Arc<Pool<u8>>, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < POOLED_FROM {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Returning {
            buf,
            pool: pool.clone(),
        })
    }
}

/// A new vector for `len` elements: a large one rounded up (see [`rounded`]).
fn fresh<T>(len: usize) -> Vec<T> {
    if bytes_of::<T>(len) < POOLED_FROM {
        Vec::with_capacity(len)
    } else {
        Vec::with_capacity(rounded(len))
    }
}

fn bytes_of<T>(len: usize) -> usize {
    len.saturating_mul(std::mem::size_of::<T>())
}

/// Capacities in steps of an eighth of the largest power of two not above them (at least
/// [`POOLED_FROM`] bytes' worth), so that needs of nearly the same size fit each other's
/// buffers; a buffer is at most an eighth larger than the need it was made for.
fn rounded(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let power = 1usize << (usize::BITS - 1 - len.leading_zeros());
    let step = (power / 8).max(1);
    len.div_ceil(step).saturating_mul(step)
}

/// The owner of a `Bytes`' buffer, giving it back to its pool when the `Bytes` is dropped.
struct Returning {
    buf: Vec<u8>,
    pool: Arc<Pool<u8>>,
}

impl AsRef<[u8]> for Returning {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `len` bytes through the pool, each `byte`.
    fn filled(pool: &Arc<Pool<u8>>, len: usize, byte: u8) -> Bytes {
        let mut buf = pool.take(len);
        buf.resize(len, byte);
        Pool::bytes(pool, buf)
    }

    #[test]
    fn a_buffer_comes_back_once_every_slice_of_its_bytes_is_dropped() {
        let pool = Arc::new(Pool::new());
        let first = filled(&pool, 1_000_000, 1);
        let at = first.as_ptr();
        let record = first.slice(10..20);
        drop(first);
        // A record still holds the buffer: the next need gets a buffer of its own.
        assert!(pool.kept_capacities().is_empty());
        let second = filled(&pool, 1_000_000, 2);
        assert_ne!(second.as_ptr(), at);
        assert_eq!(&record[..], &[1; 10]);
        drop(record);
        assert_eq!(pool.kept_capacities(), vec![rounded(1_000_000)]);
        // The returned buffer serves the next need that fits, with that need's bytes only.
        let third = filled(&pool, 900_000, 3);
        assert_eq!(third.as_ptr(), at);
        assert_eq!(third.len(), 900_000);
        assert!(third.iter().all(|&b| b == 3));
        assert!(pool.kept_capacities().is_empty());
        assert!(second.iter().all(|&b| b == 2));
    }

    #[test]
    fn a_take_gets_the_smallest_kept_buffer_that_fits_and_not_a_far_larger_one() {
        let pool = Arc::new(Pool::new());
        let (small, large) = (filled(&pool, 200_000, 0), filled(&pool, 3_000_000, 0));
        let (small_at, large_at) = (small.as_ptr(), large.as_ptr());
        drop((small, large));
        let a = filled(&pool, 150_000, 0);
        assert_eq!(a.as_ptr(), small_at);
        // Only the 3 MB buffer is left: more than four times this need, so not taken.
        let b = filled(&pool, 150_000, 0);
        assert_ne!(b.as_ptr(), large_at);
        let c = filled(&pool, 2_000_000, 0);
        assert_eq!(c.as_ptr(), large_at);
        let d = filled(&pool, 5_000_000, 0);
        assert!(d.as_ptr() != small_at && d.as_ptr() != large_at);
    }

    /// Answers of 1, 2, 4 and 6 MiB (as many partitions as had a full answer) used to leave every
    /// size kept beside the new buffers: a C batch loop on 100 B records held 9 MiB more at its
    /// peak than with fresh allocations and spent 8-15% more CPU.
    #[test]
    fn a_miss_replaces_the_largest_kept_buffer_too_small_for_it() {
        let pool = Arc::new(Pool::new());
        let held: Vec<Bytes> = [1 << 20, 2 << 20, 100_000]
            .into_iter()
            .map(|len| filled(&pool, len, 0))
            .collect();
        drop(held);
        assert_eq!(pool.kept_capacities().len(), 3);
        let large = filled(&pool, 6 << 20, 0);
        assert_eq!(
            pool.kept_capacities(),
            vec![rounded(100_000), rounded(1 << 20)]
        );
        // A miss with nothing smaller kept adds a buffer and frees none.
        let small = filled(&pool, 20_000, 0);
        assert_eq!(
            pool.kept_capacities(),
            vec![rounded(100_000), rounded(1 << 20)]
        );
        drop((large, small));
        assert_eq!(pool.kept_capacities().len(), 4);
    }

    #[test]
    fn a_pool_keeps_at_most_its_budget_and_no_small_buffers() {
        let pool = Arc::new(Pool::new());
        drop(filled(&pool, POOLED_FROM - 1, 0));
        assert!(pool.kept_capacities().is_empty());
        // Untouched buffers: reserved address space, no memory.
        let held: Vec<Vec<u8>> = (0..20).map(|_| pool.take(5 << 20)).collect();
        for v in held {
            pool.give(v);
        }
        let kept = pool.kept_capacities();
        assert_eq!(kept.len(), KEEPS_BYTES / rounded(5 << 20));
        assert!(kept.iter().sum::<usize>() <= KEEPS_BYTES);
    }

    #[test]
    fn a_pool_outlives_its_owner_while_bytes_of_it_are_held() {
        let pool = Arc::new(Pool::new());
        let late = filled(&pool, POOLED_FROM, 7);
        drop(pool);
        // The connection is gone; the last slice gives the buffer back to a pool nobody takes
        // from any more, and both are freed with it.
        assert!(late.iter().all(|&b| b == 7));
        drop(late);
    }

    #[test]
    fn an_overwritable_buffer_keeps_what_its_last_use_wrote() {
        let pool = Arc::new(Pool::new());
        let mut buf = pool.take_overwritable(100_000);
        assert!(buf.is_empty() && buf.capacity() >= 100_000);
        buf.resize(100_000, 9);
        let at = buf.as_ptr();
        drop(Pool::bytes(&pool, buf));
        // The next use finds the bytes written before, to write over and truncate.
        let mut again = pool.take_overwritable(90_000);
        assert_eq!((again.as_ptr(), again.len()), (at, 100_000));
        assert!(again.iter().all(|&b| b == 9));
        again.truncate(50_000);
        drop(Pool::bytes(&pool, again));
        // `take` gets it empty.
        let empty = pool.take(90_000);
        assert_eq!((empty.as_ptr(), empty.len()), (at, 0));
    }

    #[test]
    fn typed_vectors_come_back_emptied() {
        let pool: Pool<u64> = Pool::new();
        let mut v = pool.take(20_000);
        assert!(v.capacity() >= 20_000);
        v.extend(0..20_000u64);
        let at = v.as_ptr();
        pool.give(v);
        let again = pool.take(19_000);
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
    }

    #[test]
    fn sizes_round_up_by_at_most_an_eighth() {
        assert_eq!(rounded(1 << 20), 1 << 20);
        assert_eq!(rounded((1 << 20) + 1), (1 << 20) + (1 << 17));
        for len in [1, 7, 70_000, 1_000_000, 1_048_577, 5_000_000, 50_000_000] {
            let r = rounded(len);
            assert!(r >= len && r - len <= len / 8, "{len} -> {r}");
        }
    }
}

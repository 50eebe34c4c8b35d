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
//! buffer of every size kept beside the ones in use. Each pool keeps at most [`KEEPS_BYTES`]; a
//! buffer returned to a full pool is freed. Small buffers (below [`POOLED_FROM`] bytes) are never
//! kept. A kept byte buffer keeps what it held: a decoder that writes into a slice writes over it
//! instead of zero-filling it first ([`Pool::take_overwritable`]).
//!
//! Each consumer has its own pools ([`FetchBuffers`]): one for the answers of every connection
//! of its cluster (an [`AnswerPool`]: large answers go into memory mappings of their own), one
//! for inflated batches and one for span vectors, all counted in one [`Ledger`]: the bytes of
//! every buffer they lent that is still alive (a record waiting for `poll()`, an answer being
//! decoded, a record handed out and not dropped yet) and of every buffer they keep. That count,
//! not an estimate per record, is what `fetch.buffer.max.bytes` bounds (see `fetch::budget`),
//! and kept buffers are freed when the budget needs their room ([`FetchBuffers::trim`]). A
//! producer's or an admin client's cluster has an uncounted answer pool; batches decoded outside
//! a consumer use the process' pools (the record decoder's `PROCESS_BATCH_POOLS`), as the message
//! arrays of the C layer's batches have one.
//!
//! Nothing here knows what a record is: the span vectors' element is a type parameter (`S`), the
//! record layer's `RecordSpans`.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use memmap2::MmapMut;
use tokio::sync::Notify;

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

/// The buffers compressed batches are inflated into when decoded outside a consumer (see
/// the record decoder's `PROCESS_BATCH_POOLS`).
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
pub(crate) static INFLATED: LazyLock<Arc<Pool<u8>>> = LazyLock::new(|| Arc::new(Pool::new()));

/// The bytes of the buffers of one consumer's pools: lent and still alive, and kept for reuse.
/// Updated from any thread (a record handed out is dropped on the application's), read by the
/// fetch task before each fetch.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Buffers lent by the pools and not given back: wrapped into `Bytes` ([`Pool::bytes`]) or
    /// held ([`Pool::hold`]). Counted from the wrapping (a buffer being filled is not yet), by
    /// its capacity.
    lent: AtomicUsize,
    /// Buffers the pools keep for reuse.
    kept: AtomicUsize,
    /// The fetch task waits for room: the next buffer given back wakes it.
    wants_room: AtomicBool,
    room: Notify,
}

impl Ledger {
    /// Bytes lent and kept.
    pub fn held(&self) -> usize {
        self.lent() + self.kept()
    }

    /// Bytes of buffers lent and still alive.
    pub fn lent(&self) -> usize {
        self.lent.load(Ordering::Acquire)
    }

    /// Bytes of buffers kept for reuse, which can be freed at once ([`FetchBuffers::trim`]).
    pub fn kept(&self) -> usize {
        self.kept.load(Ordering::Acquire)
    }

    /// Asks to be woken ([`Ledger::room_freed`]) when a lent buffer comes back.
    pub(crate) fn want_room(&self) {
        self.wants_room.store(true, Ordering::Release);
    }

    /// Completes once a lent buffer came back after [`Ledger::want_room`] (or at once when one
    /// did since the last wait).
    pub(crate) async fn room_freed(&self) {
        self.room.notified().await
    }

    fn lend(&self, bytes: usize) {
        self.lent.fetch_add(bytes, Ordering::AcqRel);
    }

    fn returned(&self, bytes: usize) {
        self.lent.fetch_sub(bytes, Ordering::AcqRel);
        if self.wants_room.load(Ordering::Acquire) && self.wants_room.swap(false, Ordering::AcqRel)
        {
            self.room.notify_one();
        }
    }
}

/// A consumer's pools, counted in one [`Ledger`]: the buffers its fetch answers are read into
/// (on every connection of its cluster), those compressed batches are inflated into, and the
/// span vectors of decoded batches, of `S` (the record layer's spans of one record).
pub struct FetchBuffers<S> {
    pub ledger: Arc<Ledger>,
    pub answers: Arc<AnswerPool>,
    pub batches: BatchPools<S>,
}

impl<S> FetchBuffers<S> {
    pub fn new() -> FetchBuffers<S> {
        let ledger = Arc::new(Ledger::default());
        FetchBuffers {
            answers: Arc::new(AnswerPool::counted(ledger.clone())),
            batches: BatchPools {
                inflated: Arc::new(Pool::counted(ledger.clone())),
                spans: Arc::new(Pool::counted(ledger.clone())),
            },
            ledger,
        }
    }

    /// Frees at least `bytes` of the buffers the pools keep (fewer when they keep fewer): span
    /// vectors and inflated batches first, answers last (the largest, and the ones the next
    /// answer reuses). Returns the bytes freed.
    pub fn trim(&self, bytes: usize) -> usize {
        let mut freed = self.batches.spans.trim(bytes);
        freed += self.batches.inflated.trim(bytes.saturating_sub(freed));
        freed + self.answers.trim(bytes.saturating_sub(freed))
    }
}

impl<S> Default for FetchBuffers<S> {
    fn default() -> Self {
        FetchBuffers::new()
    }
}

/// The pools a decoded batch takes its buffers from: its inflated records (a compressed batch)
/// and its span vector, of `S`.
pub struct BatchPools<S> {
    pub inflated: Arc<Pool<u8>>,
    pub spans: Arc<Pool<S>>,
}

// Not derived: a derived `Clone` would ask `S: Clone`, and only the `Arc`s are cloned.
impl<S> Clone for BatchPools<S> {
    fn clone(&self) -> Self {
        BatchPools {
            inflated: self.inflated.clone(),
            spans: self.spans.clone(),
        }
    }
}

/// Kept buffers of `T`.
pub struct Pool<T> {
    kept: Mutex<Kept<Vec<T>>>,
    /// Where a consumer's pool counts its buffers; `None` for the process' pools.
    ledger: Option<Arc<Ledger>>,
}

/// A buffer a pool keeps: what its capacity is, in bytes.
trait Buffer {
    fn capacity_bytes(&self) -> usize;
}

impl<T> Buffer for Vec<T> {
    fn capacity_bytes(&self) -> usize {
        bytes_of::<T>(self.capacity())
    }
}

impl Buffer for MmapMut {
    fn capacity_bytes(&self) -> usize {
        self.len()
    }
}

/// The buffers a pool keeps, and the policy of keeping them.
struct Kept<B> {
    /// Buffers by capacity in bytes.
    by_capacity: BTreeMap<usize, Vec<B>>,
    bytes: usize,
}

impl<B: Buffer> Kept<B> {
    const fn new() -> Self {
        Kept {
            by_capacity: BTreeMap::new(),
            bytes: 0,
        }
    }

    /// Takes one kept buffer of `capacity` bytes (which must be kept).
    fn remove(&mut self, capacity: usize, ledger: Option<&Ledger>) -> B {
        let same = self
            .by_capacity
            .get_mut(&capacity)
            .expect("a kept capacity");
        let b = same.pop().expect("no empty list is kept");
        if same.is_empty() {
            self.by_capacity.remove(&capacity);
        }
        self.bytes -= capacity;
        if let Some(l) = ledger {
            l.kept.fetch_sub(capacity, Ordering::AcqRel);
        }
        b
    }

    /// The smallest kept buffer of at least `need` bytes (and not more than [`TOO_LARGE`] times
    /// that), or else the buffer to free: the largest kept one too small for the need.
    fn take_fitting(&mut self, need: usize, ledger: Option<&Ledger>) -> Result<B, Option<B>> {
        let fits = self
            .by_capacity
            .range(need..=need.saturating_mul(TOO_LARGE))
            .next()
            .map(|(&capacity, _)| capacity);
        if let Some(capacity) = fits {
            return Ok(self.remove(capacity, ledger));
        }
        // A miss makes a new buffer. The largest kept one too small for this need goes, so that
        // a miss replaces a buffer instead of adding one: what a pool holds, kept and lent, stays
        // near what was lent at once, where needs of varying sizes would otherwise leave the
        // smaller buffers kept beside the new ones.
        let smaller = self
            .by_capacity
            .range(..need)
            .next_back()
            .map(|(&capacity, _)| capacity);
        Err(smaller.map(|capacity| self.remove(capacity, ledger)))
    }

    /// Keeps `b` if the pool has room; gives it back otherwise (to be freed).
    fn keep(&mut self, b: B, ledger: Option<&Ledger>) -> Option<B> {
        let bytes = b.capacity_bytes();
        if self.bytes + bytes > KEEPS_BYTES {
            return Some(b);
        }
        self.bytes += bytes;
        if let Some(l) = ledger {
            l.kept.fetch_add(bytes, Ordering::AcqRel);
        }
        self.by_capacity.entry(bytes).or_default().push(b);
        None
    }

    /// Takes kept buffers, smallest first, until they hold at least `bytes` or none is left.
    fn trim(&mut self, bytes: usize, ledger: Option<&Ledger>) -> (Vec<B>, usize) {
        let mut freed = Vec::new();
        let mut freed_bytes = 0;
        while freed_bytes < bytes {
            let Some(&capacity) = self.by_capacity.keys().next() else {
                break;
            };
            freed.push(self.remove(capacity, ledger));
            freed_bytes += capacity;
        }
        (freed, freed_bytes)
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
            kept: Mutex::new(Kept::new()),
            ledger: None,
        }
    }

    /// A pool that counts its buffers in `ledger`: those it keeps, and those it lends from when
    /// they are wrapped ([`Pool::bytes`], [`Pool::hold`]) until they come back, small ones too.
    pub fn counted(ledger: Arc<Ledger>) -> Self {
        Pool {
            ledger: Some(ledger),
            ..Pool::new()
        }
    }

    /// Wraps `v`, a vector of this pool, so that it is counted while alive and comes back to the
    /// pool when dropped.
    pub fn hold(pool: &Arc<Pool<T>>, v: Vec<T>) -> Held<T> {
        if let Some(l) = &pool.ledger {
            l.lend(v.capacity_bytes());
        }
        Held {
            v,
            pool: Some(pool.clone()),
        }
    }

    /// Frees kept buffers, smallest first, until at least `bytes` are freed or none is kept.
    /// Returns the bytes freed.
    pub fn trim(&self, bytes: usize) -> usize {
        let (freed, freed_bytes) = self
            .kept
            .lock()
            .unpoisoned()
            .trim(bytes, self.ledger.as_deref());
        drop(freed);
        freed_bytes
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
        let need = bytes_of::<T>(len);
        if need < POOLED_FROM {
            return None;
        }
        let taken = self
            .kept
            .lock()
            .unpoisoned()
            .take_fitting(need, self.ledger.as_deref());
        // A buffer freed on a miss is freed outside the lock.
        taken.ok()
    }

    /// Gives `v` back: kept if it is large and the pool has room; freed otherwise.
    pub fn give(&self, mut v: Vec<T>) {
        if !(POOLED_FROM..=KEEPS_BYTES).contains(&v.capacity_bytes()) {
            return;
        }
        // Outside the lock: clearing drops the elements (a record's headers). Plain bytes stay
        // as they are, to be written over (see `Pool::take_overwritable`).
        if std::mem::needs_drop::<T>() {
            v.clear();
        }
        let refused = self
            .kept
            .lock()
            .unpoisoned()
            .keep(v, self.ledger.as_deref());
        drop(refused);
    }

    /// Gives back a vector that was counted as lent ([`Pool::hold`], [`Pool::bytes`]).
    fn give_lent(&self, v: Vec<T>) {
        let bytes = v.capacity_bytes();
        // Kept first, then no longer lent: the ledger never shows the buffer gone while it is
        // still there.
        self.give(v);
        if let Some(l) = &self.ledger {
            l.returned(bytes);
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

    /// The capacities (in elements) of the vectors kept, smallest first.
    #[cfg(test)]
    fn kept_capacities(&self) -> Vec<usize> {
        let kept = self.kept.lock().unpoisoned();
        let mut c = Vec::new();
        for same in kept.by_capacity.values() {
            c.extend(same.iter().map(|v| v.capacity()));
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
        match &pool.ledger {
            None if buf.capacity() < POOLED_FROM => return Bytes::from(buf),
            None => {}
            Some(l) => l.lend(buf.capacity()),
        }
        Bytes::from_owner(Returning {
            buf,
            pool: pool.clone(),
        })
    }
}

/// The buffers a cluster's connections read their answers into. A large answer (a fetch's)
/// goes into an anonymous memory mapping of its own rather than the heap: freed, its memory goes
/// back to the system at once. From the heap it would not, for glibc's allocator (Linux' usual
/// one) raises the size from which it maps blocks to the largest block freed, so that the next
/// answers came from the heaps of whichever threads read them, where freed memory stays resident:
/// a Python process reading a backlog with `fetch.buffer.max.bytes=16777216` held 10-12 MiB more
/// at its peak than the buffers it had, and 0.2-1.8 MiB more with the mapping size fixed.
/// Kept and reused as a [`Pool`]'s buffers are.
pub struct AnswerPool {
    kept: Mutex<Kept<MmapMut>>,
    ledger: Option<Arc<Ledger>>,
}

/// What an answer is read into: a small one into a vector, a large one into a mapping.
pub(crate) enum AnswerBuffer {
    Heap(Vec<u8>),
    Mapped(MmapMut),
}

impl Default for AnswerPool {
    fn default() -> Self {
        AnswerPool::new()
    }
}

impl AnswerPool {
    pub fn new() -> AnswerPool {
        AnswerPool {
            kept: Mutex::new(Kept::new()),
            ledger: None,
        }
    }

    /// A pool that counts its buffers in `ledger`, from when an answer is read into one
    /// ([`AnswerPool::bytes`]) until it comes back, and while it keeps them.
    pub fn counted(ledger: Arc<Ledger>) -> AnswerPool {
        AnswerPool {
            ledger: Some(ledger),
            ..AnswerPool::new()
        }
    }

    /// A buffer for an answer of `len` bytes: a vector with room for it, or a mapping of at
    /// least `len` bytes (kept or new, its bytes to be written over). Fails when the system
    /// has no memory to map.
    pub(crate) fn take(&self, len: usize) -> std::io::Result<AnswerBuffer> {
        if len < POOLED_FROM {
            return Ok(AnswerBuffer::Heap(Vec::with_capacity(len)));
        }
        let taken = self
            .kept
            .lock()
            .unpoisoned()
            .take_fitting(len, self.ledger.as_deref());
        match taken {
            Ok(kept) => Ok(AnswerBuffer::Mapped(kept)),
            Err(freed) => {
                drop(freed);
                MmapMut::map_anon(rounded(len)).map(AnswerBuffer::Mapped)
            }
        }
    }

    /// The answer of `len` bytes read into `buf`, as `Bytes` for the rest of the client to
    /// slice; `buf` comes back to `pool` when the `Bytes` and every slice of it are dropped.
    pub(crate) fn bytes(pool: &Arc<AnswerPool>, buf: AnswerBuffer, len: usize) -> Bytes {
        if let Some(l) = &pool.ledger {
            l.lend(match &buf {
                AnswerBuffer::Heap(v) => v.capacity(),
                AnswerBuffer::Mapped(m) => m.len(),
            });
        }
        match buf {
            AnswerBuffer::Heap(v) if pool.ledger.is_none() => Bytes::from(v),
            buf => Bytes::from_owner(Answer {
                buf,
                len,
                pool: pool.clone(),
            }),
        }
    }

    /// Frees kept buffers, smallest first, until at least `bytes` are freed or none is kept.
    /// Returns the bytes freed.
    pub fn trim(&self, bytes: usize) -> usize {
        let (freed, freed_bytes) = self
            .kept
            .lock()
            .unpoisoned()
            .trim(bytes, self.ledger.as_deref());
        drop(freed);
        freed_bytes
    }

    /// Bytes of the buffers kept.
    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        self.kept.lock().unpoisoned().bytes
    }
}

/// The owner of an answer's buffer, giving it back to its pool when the `Bytes` is dropped.
struct Answer {
    buf: AnswerBuffer,
    len: usize,
    pool: Arc<AnswerPool>,
}

impl AsRef<[u8]> for Answer {
    fn as_ref(&self) -> &[u8] {
        match &self.buf {
            AnswerBuffer::Heap(v) => v,
            AnswerBuffer::Mapped(m) => &m[..self.len],
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let ledger = self.pool.ledger.as_deref();
        let bytes = match std::mem::replace(&mut self.buf, AnswerBuffer::Heap(Vec::new())) {
            AnswerBuffer::Heap(v) => v.capacity(),
            AnswerBuffer::Mapped(m) => {
                let bytes = m.len();
                let refused = self.pool.kept.lock().unpoisoned().keep(m, ledger);
                drop(refused);
                bytes
            }
        };
        if let Some(l) = ledger {
            l.returned(bytes);
        }
    }
}

/// A vector lent by a pool ([`Pool::hold`]), counted in its ledger until dropped, when it goes
/// back to the pool. One made `From` a plain vector belongs to no pool.
pub struct Held<T> {
    v: Vec<T>,
    pool: Option<Arc<Pool<T>>>,
}

impl<T> From<Vec<T>> for Held<T> {
    fn from(v: Vec<T>) -> Self {
        Held { v, pool: None }
    }
}

impl<T> FromIterator<T> for Held<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Held::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.v
    }
}

impl<T> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.v
    }
}

impl<T: Clone> Clone for Held<T> {
    fn clone(&self) -> Self {
        match &self.pool {
            Some(pool) => Pool::hold(pool, self.v.clone()),
            None => Held::from(self.v.clone()),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.v.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        self.v == other.v
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give_lent(std::mem::take(&mut self.v));
        }
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
        self.pool.give_lent(std::mem::take(&mut self.buf));
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

    /// A stand-in for the record layer's spans of one record: the pools only see its size.
    type Spans = [u64; 6];

    /// A consumer's pools count every buffer from when it holds an answer, a batch or its spans
    /// until it comes back, then as kept until trimmed; small answers count while alive too.
    #[test]
    fn a_consumers_ledger_counts_every_buffer_lent_and_kept() {
        let buffers = FetchBuffers::<Spans>::new();
        let ledger = &buffers.ledger;
        let read = |len: usize, byte: u8| {
            let mut buf = buffers.answers.take(len).unwrap();
            match &mut buf {
                AnswerBuffer::Mapped(m) => m[..len].fill(byte),
                AnswerBuffer::Heap(v) => v.resize(len, byte),
            }
            AnswerPool::bytes(&buffers.answers, buf, len)
        };
        let answer = read(1 << 20, 3);
        assert_eq!(answer.len(), 1 << 20);
        assert!(answer.iter().all(|&b| b == 3));
        assert_eq!((ledger.lent(), ledger.kept()), (1 << 20, 0));
        let small = read(1000, 4);
        assert_eq!(ledger.lent(), (1 << 20) + 1000);
        // A record of the answer keeps it lent.
        let record = answer.slice(10..20);
        drop(answer);
        drop(small);
        assert_eq!((ledger.lent(), ledger.kept()), (1 << 20, 0));
        drop(record);
        // Kept (the small one is freed), and reused by the next answer that fits.
        assert_eq!((ledger.lent(), ledger.kept()), (0, 1 << 20));
        assert_eq!(buffers.answers.kept_bytes(), 1 << 20);
        let again = read(900_000, 5);
        assert_eq!((ledger.lent(), ledger.kept()), (1 << 20, 0));
        assert!(again.iter().all(|&b| b == 5));
        drop(again);

        // Span vectors and inflated batches of the same consumer.
        let spans = Pool::hold(&buffers.batches.spans, buffers.batches.spans.take(1000));
        let spans_bytes = rounded(1000) * std::mem::size_of::<Spans>();
        let mut inflated = buffers.batches.inflated.take(100_000);
        inflated.resize(100_000, 0);
        let inflated = Pool::bytes(&buffers.batches.inflated, inflated);
        let inflated_bytes = rounded(100_000);
        assert_eq!(ledger.lent(), spans_bytes + inflated_bytes);
        drop((spans, inflated));
        assert_eq!(ledger.lent(), 0);
        assert_eq!(ledger.kept(), (1 << 20) + spans_bytes + inflated_bytes);
        assert_eq!(ledger.held(), ledger.kept());
        // Trimmed smallest first: spans, then inflated batches, then answers.
        assert_eq!(buffers.trim(1), spans_bytes);
        assert_eq!(buffers.trim(spans_bytes + 1), inflated_bytes);
        assert_eq!(ledger.kept(), 1 << 20);
        assert_eq!(buffers.trim(usize::MAX), 1 << 20);
        assert_eq!(ledger.held(), 0);
        assert_eq!(buffers.trim(1), 0);
    }

    /// The fetch task waiting for room hears of the next buffer that comes back.
    #[tokio::test]
    async fn a_buffer_coming_back_wakes_the_fetch_task_waiting_for_room() {
        let buffers = FetchBuffers::<Spans>::new();
        let spans = Pool::hold(&buffers.batches.spans, buffers.batches.spans.take(1000));
        buffers.ledger.want_room();
        let waiting = buffers.ledger.room_freed();
        drop(spans);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("woken");
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

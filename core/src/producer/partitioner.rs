//! Where a record goes: the Java client's murmur2 partitioner for keyed records and the sticky
//! partition (KIP-480) for unkeyed ones.
use super::*;

/// Java's `Utils.murmur2`, bit for bit: the hash the Java client partitions keys with.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java client's built-in partitioner gives a key:
/// `(murmur2(key) & 0x7fffffff) % num_partitions`.
///
/// ```
/// use lagless::producer::{murmur2, partition_for_key};
///
/// // The Java client's own murmur2 test vector.
/// assert_eq!(murmur2(b"foobar"), -790332482);
/// // Where a Java producer (and lagless) puts records keyed "foobar".
/// assert_eq!(partition_for_key(b"foobar", 6), 0);
/// assert_eq!(partition_for_key(b"foobar", 12), 6);
/// ```
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % num_partitions.max(1)
}

/// Where a record goes: a partition already chosen, or the sticky partition of its topic.
#[derive(Clone, Copy)]
pub(super) enum Target {
    Partition(i32),
    Sticky,
}

#[derive(Clone, Copy)]
pub(super) struct Sticky {
    pub(super) partition: i32,
    /// The batch the sticky partition's records went into; `None` until the first one.
    pub(super) batch: Option<u64>,
}

/// The sticky partition for an unkeyed record of `size` bytes, switching to another partition
/// (preferring ones with a leader) when the current one's batch is full or was sent. The flag
/// says a batch was closed by the switch.
pub(super) fn choose_sticky(
    tq: &mut TopicQueues,
    n: i32,
    partitions: &[PartitionInfo],
    size: usize,
    batch_size: usize,
) -> (i32, bool) {
    let mut closed = false;
    if let Some(s) = tq.sticky {
        if s.partition < n {
            let q = &mut tq.parts[s.partition as usize];
            match s.batch {
                None => return (s.partition, false),
                Some(id) => {
                    if let Some(b) = q.open.back_mut() {
                        if b.id == id && !b.full {
                            if b.builder.estimated_size() + size <= batch_size {
                                return (s.partition, false);
                            }
                            b.full = true;
                            closed = true;
                        }
                    }
                }
            }
        }
    }
    let prev = tq.sticky.map(|s| s.partition);
    let mut rng = rand::thread_rng();
    let available: Vec<i32> = partitions
        .iter()
        .filter(|i| i.leader >= 0 && i.partition < n && Some(i.partition) != prev)
        .map(|i| i.partition)
        .collect();
    let p = if !available.is_empty() {
        available[rng.gen_range(0..available.len())]
    } else if n > 1 {
        let mut p = rng.gen_range(0..n - 1);
        if Some(p) >= prev {
            p += 1;
        }
        p
    } else {
        0
    };
    tq.sticky = Some(Sticky {
        partition: p,
        batch: None,
    });
    (p, closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_java() {
        let cases: &[(&str, i32)] = &[
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (s, want) in cases {
            assert_eq!(murmur2(s.as_bytes()), *want, "murmur2({s:?})");
            let n = 7;
            assert_eq!(
                partition_for_key(s.as_bytes(), n),
                (want & 0x7fff_ffff) % n,
                "partition_for_key({s:?})"
            );
        }
        // Every tail length (len % 4 = 0..3) stays in range.
        for n in [1, 2, 3, 6, 100] {
            for k in ["", "a", "ab", "abc", "abcd"] {
                let p = partition_for_key(k.as_bytes(), n);
                assert!((0..n).contains(&p));
            }
        }
    }
}

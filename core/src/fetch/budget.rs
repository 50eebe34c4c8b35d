//! The memory budget of the fetch path, `fetch.buffer.max.bytes`: the decision whether a fetch may
//! be sent and how much it may ask for. Pure: the fetch task feeds it the consumer's
//! [`Ledger`](crate::buffers::Ledger) and its reservations and carries the decision out.
//!
//! What the budget covers is everything the consumer's pools hold ([`Budget::held`]): the
//! answers' buffers, which the records waiting for `poll()` are slices of (an answer's buffer
//! lives until the last of its records is dropped, whichever partition it belongs to), inflated
//! batches, span vectors, records handed out and still alive, and the buffers kept for reuse;
//! plus, for every fetch in flight, a reservation for what its answer may hold
//! ([`Budget::reserved`]). A fetch asks for at most what is left (its `max_bytes`), divided by
//! what an answer grew to once decoded lately ([`Expansion`]). Kept buffers are freed to make
//! room before a fetch is held back for them.
//!
//! The Java client's rule for progress holds too: a fetch is sent when the application would
//! otherwise wait for records that never come (nothing buffered for it, nothing in flight),
//! even when records it still holds fill the budget; the broker then returns at least one batch,
//! however large (KIP-74), and the budget is exceeded by that answer alone.

/// The limits of one consumer's fetches: `fetch.buffer.max.bytes`, `fetch.max.bytes`,
/// `max.partition.fetch.bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub buffer_max: usize,
    pub fetch_max: usize,
    pub partition_max: usize,
}

impl Limits {
    /// The most one fetch of `partitions` partitions asks for: `fetch.max.bytes`, what its
    /// partitions may bring, and half the budget, so that a second answer can come while the
    /// application takes the records of the first.
    pub(crate) fn cap(&self, partitions: usize) -> usize {
        self.fetch_max
            .min(partitions.saturating_mul(self.partition_max))
            .min(self.buffer_max / 2)
            .max(1)
    }

    /// The least a fetch asks for, unless the application waits for records (see [`decide`]):
    /// a quarter of a partition's share (of the half budget when that is smaller), so that a
    /// nearly full budget is not spent on answers of a few records each.
    pub(crate) fn floor(&self, cap: usize) -> usize {
        cap.min((self.partition_max.min(self.buffer_max / 2) / 4).max(1))
    }
}

/// What the fetch path holds and has reserved now, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Budget {
    /// Held by the consumer's pools: lent and alive, and kept.
    pub held: usize,
    /// Of `held`, the buffers kept for reuse: freed on demand.
    pub kept: usize,
    /// Reserved for the answers of the fetches in flight.
    pub reserved: usize,
}

impl Budget {
    /// What is left of `limit` once kept buffers are freed.
    fn room(&self, limit: usize) -> usize {
        limit.saturating_sub(
            self.held
                .saturating_sub(self.kept)
                .saturating_add(self.reserved),
        )
    }
}

/// How much memory an answer holds per byte of its records once decoded, in thousandths: its
/// records field, plus the batches inflated from it, plus the span vectors of its records. An
/// uncompressed answer of 1 KB records holds about 1.06 times its size; compressed ones several
/// times. The largest of the last [`Expansion::SAMPLES`] answers, and [`Expansion::UNKNOWN`]
/// before the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expansion {
    /// The last answers' expansions, at least [`Expansion::ONE`] each; 0: no answer yet.
    recent: [u32; Expansion::SAMPLES],
    next: usize,
}

impl Expansion {
    pub(crate) const SAMPLES: usize = 8;
    /// Before any answer is decoded: sixteen times, so that the first answer stays within the
    /// budget whatever it holds short of that. A zstd answer of 100 B text records holds about
    /// seven times its size (inflated records, and a 64-byte span per record); when the first
    /// answer was taken to hold four, a 64 MiB budget was 22 MiB over at its peak.
    pub(crate) const UNKNOWN: u32 = 16_000;
    const ONE: u32 = 1000;

    pub(crate) fn new() -> Expansion {
        Expansion {
            recent: [0; Expansion::SAMPLES],
            next: 0,
        }
    }

    /// Counts an answer whose records field of `records_bytes` held `decoded_bytes` in all
    /// once decoded (the field included). Answers without records say nothing.
    pub(crate) fn answered(&mut self, records_bytes: usize, decoded_bytes: usize) {
        if records_bytes == 0 {
            return;
        }
        let per_mille = (decoded_bytes as u128 * 1000 / records_bytes as u128)
            .clamp(Expansion::ONE as u128, u32::MAX as u128) as u32;
        self.recent[self.next] = per_mille;
        self.next = (self.next + 1) % Expansion::SAMPLES;
    }

    /// Thousandths of memory per byte an answer brings.
    pub(crate) fn per_mille(&self) -> u32 {
        match self.recent.iter().copied().max() {
            Some(0) | None => Expansion::UNKNOWN,
            Some(most) => most,
        }
    }

    /// The memory an answer of `bytes` holds at this expansion.
    fn memory(per_mille: u32, bytes: usize) -> usize {
        (bytes as u128 * per_mille as u128).div_ceil(1000) as usize
    }

    /// The answer size whose memory fits `room`.
    fn bytes_in(per_mille: u32, room: usize) -> usize {
        (room as u128 * 1000 / per_mille.max(1) as u128).min(usize::MAX as u128) as usize
    }
}

/// What the fetch task does about one fetch it could send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send it with this `max_bytes`, reserving `reserve` bytes until its answer is applied;
    /// first free `trim` bytes of kept buffers.
    Send {
        max_bytes: usize,
        reserve: usize,
        trim: usize,
    },
    /// Records of paused partitions hold the room: drop them (fetched again after `resume()`)
    /// and decide again.
    DropPaused,
    /// No room: wait until buffers come back.
    Wait,
}

/// Whether a fetch of `partitions` partitions may be sent now, and how much it may ask for.
/// `starving`: nothing is in flight and no record waits for the application, which would wait
/// for nothing; `paused_buffered`: paused partitions hold records.
pub(crate) fn decide(
    limits: Limits,
    budget: Budget,
    partitions: usize,
    expansion: u32,
    starving: bool,
    paused_buffered: bool,
) -> Decision {
    let cap = limits.cap(partitions);
    let floor = limits.floor(cap);
    let room = budget.room(limits.buffer_max);
    let fits = Expansion::bytes_in(expansion, room).min(cap);
    let send = |max_bytes: usize| {
        let reserve = Expansion::memory(expansion, max_bytes);
        // Kept buffers go only as far as the budget needs.
        let over = budget
            .held
            .saturating_add(budget.reserved)
            .saturating_add(reserve)
            .saturating_sub(limits.buffer_max);
        Decision::Send {
            max_bytes,
            reserve,
            trim: over.min(budget.kept),
        }
    };
    if fits >= floor {
        send(fits)
    } else if paused_buffered {
        Decision::DropPaused
    } else if starving {
        send(floor)
    } else {
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;
    const KIB: usize = 1 << 10;

    /// The defaults: a 64 MiB budget, fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB.
    const DEFAULTS: Limits = Limits {
        buffer_max: 64 * MIB,
        fetch_max: 50 * MIB,
        partition_max: MIB,
    };

    fn budget(held: usize, kept: usize, reserved: usize) -> Budget {
        Budget {
            held,
            kept,
            reserved,
        }
    }

    fn send(max_bytes: usize, reserve: usize, trim: usize) -> Decision {
        Decision::Send {
            max_bytes,
            reserve,
            trim,
        }
    }

    #[test]
    fn a_fetch_asks_for_at_most_half_the_budget_and_what_its_partitions_may_bring() {
        assert_eq!(DEFAULTS.cap(48), 32 * MIB);
        assert_eq!(DEFAULTS.cap(3), 3 * MIB);
        let small = Limits {
            buffer_max: 16 * MIB,
            ..DEFAULTS
        };
        assert_eq!(small.cap(48), 8 * MIB);
        // fetch.max.bytes below the rest.
        let narrow = Limits {
            fetch_max: 100 * KIB,
            ..DEFAULTS
        };
        assert_eq!(narrow.cap(48), 100 * KIB);
        assert_eq!(narrow.floor(narrow.cap(48)), 100 * KIB);
        // A budget of one byte still asks for one.
        let tiny = Limits {
            buffer_max: 1,
            ..DEFAULTS
        };
        assert_eq!((tiny.cap(48), tiny.floor(1)), (1, 1));
        // The floor: a quarter of a partition's share.
        assert_eq!(DEFAULTS.floor(32 * MIB), 256 * KIB);
        assert_eq!(small.floor(8 * MIB), 256 * KIB);
        let one_mib_budget = Limits {
            buffer_max: MIB,
            ..DEFAULTS
        };
        assert_eq!(one_mib_budget.cap(48), 512 * KIB);
        assert_eq!(one_mib_budget.floor(512 * KIB), 128 * KIB);
    }

    /// Literal states of a 64 MiB budget (defaults; expansion 1.0 unless said) and what a fetch
    /// of 48 partitions may do in each.
    #[test]
    fn a_fetch_takes_what_the_budget_has_left() {
        let one = 1000;
        #[rustfmt::skip]
        let cases: &[(&str, Budget, u32, bool, bool, Decision)] = &[
            ("empty: half the budget", budget(0, 0, 0), one, false, false,
                send(32 * MIB, 32 * MIB, 0)),
            ("one answer in flight: the other half", budget(0, 0, 32 * MIB), one, false, false,
                send(32 * MIB, 32 * MIB, 0)),
            ("records held: what is left", budget(40 * MIB, 0, 0), one, false, false,
                send(24 * MIB, 24 * MIB, 0)),
            ("held and in flight", budget(20 * MIB, 0, 30 * MIB), one, false, false,
                send(14 * MIB, 14 * MIB, 0)),
            ("answers that double once decoded ask for half", budget(0, 0, 0), 2000, false, false,
                send(32 * MIB, 64 * MIB, 0)),
            ("doubling, half the budget held", budget(32 * MIB, 0, 0), 2000, false, false,
                send(16 * MIB, 32 * MIB, 0)),
            ("before any answer: a sixteenth of the room", budget(0, 0, 0), Expansion::UNKNOWN,
                false, false, send(4 * MIB, 64 * MIB, 0)),
            ("kept buffers are room: freed as far as needed", budget(60 * MIB, 50 * MIB, 0), one,
                false, false, send(32 * MIB, 32 * MIB, 28 * MIB)),
            ("kept buffers not in the way stay", budget(20 * MIB, 10 * MIB, 0), one, false, false,
                send(32 * MIB, 32 * MIB, 0)),
            ("full: wait", budget(64 * MIB, 0, 0), one, false, false, Decision::Wait),
            ("less than the floor left: wait", budget(63 * MIB + 800 * KIB, 0, 0), one, false,
                false, Decision::Wait),
            ("the floor left: a small fetch", budget(63 * MIB + 768 * KIB, 0, 0), one, false,
                false, send(256 * KIB, 256 * KIB, 0)),
            ("full, with paused records: drop them", budget(64 * MIB, 0, 0), one, false, true,
                Decision::DropPaused),
            ("paused records are left alone while there is room", budget(40 * MIB, 0, 0), one,
                false, true, send(24 * MIB, 24 * MIB, 0)),
            ("full and the application waits: the floor, over the budget",
                budget(64 * MIB, 0, 0), one, true, false, send(256 * KIB, 256 * KIB, 0)),
            ("over the budget and waiting: every kept buffer goes", budget(70 * MIB, 4 * MIB, 0),
                one, true, false, send(256 * KIB, 256 * KIB, 4 * MIB)),
            ("the application waits but there is room: as usual", budget(0, 0, 0), one, true,
                false, send(32 * MIB, 32 * MIB, 0)),
        ];
        for (what, b, expansion, starving, paused, expected) in cases {
            assert_eq!(
                decide(DEFAULTS, *b, 48, *expansion, *starving, *paused),
                *expected,
                "{what}"
            );
        }
    }

    #[test]
    fn a_small_budget_sends_small_fetches_and_never_none_at_all() {
        let limits = Limits {
            buffer_max: 16 * MIB,
            ..DEFAULTS
        };
        assert_eq!(
            decide(limits, budget(0, 0, 0), 48, 1060, false, false),
            send(8 * MIB, (8 * MIB * 1060).div_ceil(1000), 0)
        );
        // One partition: what it may bring.
        assert_eq!(
            decide(limits, budget(0, 0, 0), 1, 1000, false, false),
            send(MIB, MIB, 0)
        );
        // A budget smaller than one record: only fetches the application waits for, each of
        // one byte (the broker returns one whole batch).
        let tiny = Limits {
            buffer_max: 1,
            ..DEFAULTS
        };
        assert_eq!(
            decide(tiny, budget(0, 0, 0), 48, 1000, false, false),
            send(1, 1, 0)
        );
        assert_eq!(
            decide(tiny, budget(5000, 0, 0), 48, 1000, false, false),
            Decision::Wait
        );
        assert_eq!(
            decide(tiny, budget(5000, 0, 0), 48, 1000, true, false),
            send(1, 1, 0)
        );
    }

    #[test]
    fn huge_limits_do_not_overflow() {
        let limits = Limits {
            buffer_max: usize::MAX,
            fetch_max: i32::MAX as usize,
            partition_max: i32::MAX as usize,
        };
        assert_eq!(
            decide(limits, budget(0, 0, 0), 1_000_000, u32::MAX, false, false),
            send(
                i32::MAX as usize,
                Expansion::memory(u32::MAX, i32::MAX as usize),
                0
            )
        );
        assert!(matches!(
            decide(
                limits,
                budget(usize::MAX, 0, usize::MAX),
                3,
                1000,
                false,
                false
            ),
            Decision::Wait
        ));
    }

    #[test]
    fn the_expansion_is_the_largest_of_the_last_answers() {
        let mut e = Expansion::new();
        assert_eq!(e.per_mille(), Expansion::UNKNOWN);
        // An answer without records says nothing.
        e.answered(0, 0);
        assert_eq!(e.per_mille(), Expansion::UNKNOWN);
        e.answered(1_000_000, 1_060_000);
        assert_eq!(e.per_mille(), 1060);
        e.answered(1_000_000, 3_500_000);
        e.answered(1_000_000, 1_100_000);
        assert_eq!(e.per_mille(), 3500);
        // Never below one: an answer holds at least itself.
        let mut low = Expansion::new();
        low.answered(1000, 10);
        assert_eq!(low.per_mille(), 1000);
        // The large one is forgotten after SAMPLES answers.
        for _ in 0..Expansion::SAMPLES - 1 {
            e.answered(1_000_000, 1_200_000);
        }
        assert_eq!(e.per_mille(), 1200);
    }
}

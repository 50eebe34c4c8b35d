//! Windowed statistics as the Java client keeps them (its `SampledStat`): a value is an average,
//! a maximum, a rate or a percentile over the last two samples of 30 s each
//! (`metrics.num.samples=2`, `metrics.sample.window.ms=30000`), so `fetch-latency-avg` or
//! `time-between-poll-max` says how things are now, not since the client started. Pure: every
//! call takes the time it is made at.
use std::time::{Duration, Instant};

/// The length of one sample (the Java client's `metrics.sample.window.ms` default).
pub const SAMPLE_WINDOW: Duration = Duration::from_secs(30);

/// How many samples a statistic keeps (the Java client's `metrics.num.samples` default).
const SAMPLES: usize = 2;

/// Histogram buckets per doubling of a value: a percentile is known to within 2^(1/4), 19%.
const BUCKETS_PER_DOUBLING: f64 = 4.0;

/// Buckets of microseconds from 1 µs to 2^28 µs (268 s); longer values go in the last.
const BUCKETS: usize = 112;

/// One sample: what was recorded from `start` for one window.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    start: Instant,
    window: Window,
}

/// What was recorded in the live samples of a statistic (or of several, merged).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    /// Values recorded.
    pub count: u64,
    /// Their sum.
    pub total: f64,
    /// The largest (0 when none).
    pub max: f64,
    /// Counts per bucket of [`bucket`], for a statistic kept with percentiles; empty otherwise.
    buckets: Vec<u64>,
}

impl Window {
    /// The average value, `None` when nothing was recorded (the Java client says NaN).
    pub fn avg(&self) -> Option<f64> {
        (self.count > 0).then(|| self.total / self.count as f64)
    }

    /// The largest value, `None` when nothing was recorded.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// The value below which `q` (0 to 1) of the recorded values fall: the upper bound of the
    /// bucket where the count passes `q` of all, never above the largest value. `None` when
    /// nothing was recorded or the statistic keeps no histogram.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        let recorded: u64 = self.buckets.iter().sum();
        if recorded == 0 {
            return None;
        }
        let wanted = ((q * recorded as f64).ceil() as u64).clamp(1, recorded);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= wanted {
                return Some(bucket_upper_bound(i).min(self.max));
            }
        }
        Some(self.max)
    }

    /// Adds `other`'s values (another connection's, say) to these.
    pub fn merge(&mut self, other: &Window) {
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
    }

    fn add(&mut self, value: f64) {
        self.count += 1;
        self.total += value;
        self.max = self.max.max(value);
        if !self.buckets.is_empty() {
            self.buckets[bucket(value)] += 1;
        }
    }
}

/// The bucket of a value in milliseconds: 4 a doubling of microseconds.
fn bucket(ms: f64) -> usize {
    let us = ms * 1000.0;
    if us.is_nan() || us < 1.0 {
        return 0;
    }
    ((us.log2() * BUCKETS_PER_DOUBLING) as usize).min(BUCKETS - 1)
}

/// The largest value in milliseconds that falls in bucket `i`.
fn bucket_upper_bound(i: usize) -> f64 {
    2f64.powf((i + 1) as f64 / BUCKETS_PER_DOUBLING) / 1000.0
}

/// A statistic over the last [`SAMPLES`] windows of [`SAMPLE_WINDOW`].
#[derive(Debug, Clone, PartialEq)]
pub struct Windowed {
    window: Duration,
    percentiles: bool,
    /// Oldest first; at most [`SAMPLES`].
    samples: Vec<Sample>,
}

impl Default for Windowed {
    fn default() -> Self {
        Windowed::new(SAMPLE_WINDOW, false)
    }
}

impl Windowed {
    /// A statistic with samples of `window`; `percentiles` keeps a histogram too.
    pub fn new(window: Duration, percentiles: bool) -> Windowed {
        Windowed {
            window,
            percentiles,
            samples: Vec::with_capacity(SAMPLES),
        }
    }

    /// A statistic of the default window that keeps a histogram for [`Window::percentile`].
    pub fn with_percentiles() -> Windowed {
        Windowed::new(SAMPLE_WINDOW, true)
    }

    /// Records `value` at `now`. A new sample starts when the current one is a window old; the
    /// oldest goes when there are more than [`SAMPLES`].
    pub fn record(&mut self, value: f64, now: Instant) {
        let current_is_full = self
            .samples
            .last()
            .is_none_or(|s| now.saturating_duration_since(s.start) >= self.window);
        if current_is_full {
            if self.samples.len() == SAMPLES {
                self.samples.remove(0);
            }
            let buckets = if self.percentiles {
                vec![0; BUCKETS]
            } else {
                Vec::new()
            };
            self.samples.push(Sample {
                start: now,
                window: Window {
                    buckets,
                    ..Window::default()
                },
            });
        }
        if let Some(s) = self.samples.last_mut() {
            s.window.add(value);
        }
    }

    /// What the samples still live at `now` hold: those that started less than
    /// [`SAMPLES`] windows ago (the Java client purges the others before it measures).
    pub fn live(&self, now: Instant) -> Window {
        let mut merged = Window::default();
        for s in self.live_samples(now) {
            merged.merge(&s.window);
        }
        merged
    }

    /// Values recorded per second, as the Java client's `Rate` measures it: the live samples'
    /// total over the time since the oldest of them started, which counts as at least
    /// [`SAMPLES`] - 1 whole windows (so a rate does not start out huge). 0 when nothing live.
    pub fn rate(&self, now: Instant) -> f64 {
        let mut live = self.live_samples(now).peekable();
        let Some(oldest) = live.peek().map(|s| s.start) else {
            return 0.0;
        };
        let total: f64 = live.map(|s| s.window.total).sum();
        let elapsed = now.saturating_duration_since(oldest);
        let min_full = self.window * (SAMPLES as u32 - 1);
        let full_windows = (elapsed.as_nanos() / self.window.as_nanos().max(1)) as u32;
        let elapsed = if full_windows < SAMPLES as u32 - 1 {
            elapsed + min_full.saturating_sub(self.window * full_windows)
        } else {
            elapsed
        };
        total / elapsed.as_secs_f64()
    }

    fn live_samples(&self, now: Instant) -> impl Iterator<Item = &Sample> {
        let horizon = self.window * SAMPLES as u32;
        self.samples
            .iter()
            .filter(move |s| now.saturating_duration_since(s.start) < horizon)
    }
}

/// The Java consumer's poll statistics (its `KafkaConsumerMetrics`): the time between the starts
/// of successive polls (`time-between-poll-avg`/`-max`), the share of that time the application
/// spent waiting inside poll (`poll-idle-ratio-avg`), and when the last poll started
/// (`last-poll-seconds-ago`); and its fetch manager's rates of the records and bytes handed out
/// (`records-consumed-rate`, `bytes-consumed-rate`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PollTimes {
    last_start: Option<Instant>,
    /// Time since the poll before the current one started (0 for the first).
    since_previous: Duration,
    between: Windowed,
    idle_ratio: Windowed,
    records: Windowed,
    bytes: Windowed,
}

/// [`PollTimes`] read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PollStats {
    /// Since the last poll started (`None` before the first).
    pub since_last_poll: Option<Duration>,
    /// Between the starts of successive polls, in the window.
    pub time_between_poll_avg: Option<Duration>,
    /// The longest of those.
    pub time_between_poll_max: Option<Duration>,
    /// The average of each poll's time inside poll over that time plus the time before it.
    pub poll_idle_ratio_avg: Option<f64>,
    /// Records returned by polls (and `recovery_poll()`) per second (`records-consumed-rate`).
    pub records_consumed_rate: f64,
    /// Key + value bytes of those records per second (`bytes-consumed-rate`).
    pub bytes_consumed_rate: f64,
}

impl PollTimes {
    /// A poll starts at `now`.
    pub fn started(&mut self, now: Instant) {
        self.since_previous = self
            .last_start
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.between.record(millis(self.since_previous), now);
        self.last_start = Some(now);
    }

    /// The poll started last ends at `now`, returning `records` records of `bytes` key + value
    /// bytes.
    pub fn ended(&mut self, now: Instant, records: usize, bytes: u64) {
        let Some(start) = self.last_start else {
            return;
        };
        self.consumed(now, records, bytes);
        let inside = millis(now.saturating_duration_since(start));
        let outside = millis(self.since_previous);
        // The Java client's ratio: poll time over poll time plus the time since the poll before.
        let whole = inside + outside;
        let ratio = if whole > 0.0 { inside / whole } else { 0.0 };
        self.idle_ratio.record(ratio, now);
    }

    /// `records` records of `bytes` key + value bytes were handed out at `now`: by a poll, or by
    /// a call that is not one for the poll's rhythm (`recovery_poll()`, on a thread of its own).
    pub fn consumed(&mut self, now: Instant, records: usize, bytes: u64) {
        if records > 0 {
            self.records.record(records as f64, now);
            self.bytes.record(bytes as f64, now);
        }
    }

    /// The statistics at `now`.
    pub fn stats(&self, now: Instant) -> PollStats {
        let between = self.between.live(now);
        PollStats {
            since_last_poll: self.last_start.map(|t| now.saturating_duration_since(t)),
            time_between_poll_avg: between.avg().map(from_millis),
            time_between_poll_max: between.max().map(from_millis),
            poll_idle_ratio_avg: self.idle_ratio.live(now).avg(),
            records_consumed_rate: self.records.rate(now),
            bytes_consumed_rate: self.bytes.rate(now),
        }
    }
}

/// A duration in milliseconds with their fraction, as the statistics record them and the
/// renderings write them (latencies under a millisecond are common on loopback): one division of
/// the nanoseconds, so that 2.25 ms is 2.25, not 2.2499999999999996.
pub fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1_000_000.0
}

/// Milliseconds back to a duration (never negative).
pub fn from_millis(ms: f64) -> Duration {
    Duration::from_secs_f64((ms / 1000.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn milliseconds_keep_their_fraction_without_rounding_noise() {
        assert_eq!(millis(Duration::from_micros(2_250)), 2.25);
        assert_eq!(millis(Duration::from_micros(501_500)), 501.5);
        assert_eq!(millis(Duration::from_nanos(1_500)), 0.0015);
        assert_eq!(millis(Duration::from_secs(300)), 300_000.0);
    }

    #[test]
    fn nothing_recorded_has_no_average_max_or_percentile_and_no_rate() {
        let t0 = Instant::now();
        let w = Windowed::with_percentiles();
        let live = w.live(t0);
        assert_eq!(
            (live.avg(), live.max(), live.percentile(0.5)),
            (None, None, None)
        );
        assert_eq!(w.rate(t0), 0.0);
    }

    #[test]
    fn average_and_max_cover_the_two_live_samples_and_drop_older_ones() {
        let t0 = Instant::now();
        let mut w = Windowed::default();
        w.record(10.0, at(t0, 0));
        w.record(30.0, at(t0, 29_000)); // same sample
        w.record(50.0, at(t0, 30_000)); // the second sample
        let live = w.live(at(t0, 31_000));
        assert_eq!(
            (live.count, live.avg(), live.max()),
            (3, Some(30.0), Some(50.0))
        );
        // The first sample is two windows old at 60 s: only 50 is left.
        let live = w.live(at(t0, 60_000));
        assert_eq!((live.count, live.max()), (1, Some(50.0)));
        // A third sample pushes the first out even while it would still be live.
        w.record(1.0, at(t0, 60_000));
        let live = w.live(at(t0, 60_000));
        assert_eq!((live.count, live.avg()), (2, Some(25.5)));
        // Nothing recorded for two windows: nothing live.
        assert_eq!(w.live(at(t0, 121_000)).count, 0);
    }

    #[test]
    fn a_rate_counts_at_least_one_whole_window_as_the_java_client_does() {
        let t0 = Instant::now();
        let mut w = Windowed::default();
        w.record(100.0, at(t0, 0));
        // 10 s into the first sample: 100 over 10 s + one whole window (30 s) = 2.5/s.
        assert_eq!(w.rate(at(t0, 10_000)), 2.5);
        w.record(200.0, at(t0, 40_000));
        // 300 over the 50 s since the oldest live sample started.
        assert_eq!(w.rate(at(t0, 50_000)), 6.0);
        // The first sample is gone at 60 s: 200 over the 20 s since 40 s + 30 s.
        assert_eq!(w.rate(at(t0, 60_000)), 4.0);
        assert_eq!(w.rate(at(t0, 200_000)), 0.0);
    }

    #[test]
    fn percentiles_come_from_quarter_doubling_buckets_and_never_pass_the_max() {
        let t0 = Instant::now();
        let mut w = Windowed::with_percentiles();
        for _ in 0..98 {
            w.record(2.0, t0);
        }
        w.record(500.0, t0);
        w.record(900.0, t0);
        let live = w.live(t0);
        // 2 ms = 2000 µs: log2 10.97 x 4 = bucket 43, whose upper bound is 2^11 µs = 2.048 ms.
        assert_eq!(live.percentile(0.5), Some(2.048));
        // The 99th of 100 values is 500 ms = 500,000 µs: log2 18.93 x 4 = bucket 75, whose
        // bound is 2^19 µs. The 100th, 900 ms, is in bucket 79, bound 2^20 µs: above the max,
        // so the max.
        assert_eq!(live.percentile(0.99), Some(524.288));
        assert_eq!(live.percentile(1.0), Some(900.0));
        assert_eq!(bucket(0.0), 0);
        assert_eq!(bucket(f64::NAN), 0);
        assert_eq!(bucket(1.0), 39); // 1000 µs: log2 9.97 x 4 = 39.9
    }

    #[test]
    fn merged_windows_add_counts_and_buckets() {
        let t0 = Instant::now();
        let (mut a, mut b) = (Windowed::with_percentiles(), Windowed::with_percentiles());
        a.record(1.0, t0);
        b.record(3.0, at(t0, 45_000));
        let mut merged = a.live(at(t0, 50_000));
        merged.merge(&b.live(at(t0, 50_000)));
        assert_eq!(
            (merged.count, merged.avg(), merged.max()),
            (2, Some(2.0), Some(3.0))
        );
        assert_eq!(
            merged.percentile(0.5),
            Some(bucket_upper_bound(bucket(1.0)))
        );
        // A window without a histogram merged into one with.
        let mut plain = Window::default();
        plain.merge(&merged);
        assert_eq!(plain.percentile(0.99), Some(3.0));
    }

    #[test]
    fn poll_times_follow_the_java_consumer() {
        let t0 = Instant::now();
        let mut p = PollTimes::default();
        assert_eq!(p.stats(t0).since_last_poll, None);
        // Poll 1: 0-100 ms, 10 records; poll 2 starts at 400 ms (400 after 1 started), ends at
        // 500 ms with nothing.
        p.started(t0);
        p.ended(at(t0, 100), 10, 1_000);
        p.started(at(t0, 400));
        p.ended(at(t0, 500), 0, 0);
        let s = p.stats(at(t0, 1_000));
        assert_eq!(s.since_last_poll, Some(Duration::from_millis(600)));
        // Between: 0 (the first has none before it) and 400.
        assert_eq!(s.time_between_poll_avg, Some(Duration::from_millis(200)));
        assert_eq!(s.time_between_poll_max, Some(Duration::from_millis(400)));
        // Ratios: 100 / (100 + 0) = 1 and 100 / (100 + 400) = 0.2.
        assert_eq!(s.poll_idle_ratio_avg, Some(0.6));
        // 10 records, recorded as poll 1 ended, over the 0.9 s since + a whole window.
        assert_eq!(s.records_consumed_rate, 10.0 / 30.9);
        // Their 1000 bytes likewise.
        assert_eq!(s.bytes_consumed_rate, 1_000.0 / 30.9);
    }

    #[test]
    fn records_handed_out_outside_a_poll_count_in_the_rates_not_in_the_rhythm() {
        let t0 = Instant::now();
        let mut p = PollTimes::default();
        p.started(t0);
        p.ended(at(t0, 100), 4, 400);
        // recovery_poll() on another thread: 6 records of 600 bytes, no poll started or ended.
        p.consumed(at(t0, 200), 6, 600);
        let s = p.stats(at(t0, 1_000));
        assert_eq!(s.records_consumed_rate, 10.0 / 30.9);
        assert_eq!(s.bytes_consumed_rate, 1_000.0 / 30.9);
        assert_eq!(s.since_last_poll, Some(Duration::from_millis(1_000)));
        assert_eq!(s.time_between_poll_max, Some(Duration::ZERO));
        assert_eq!(s.poll_idle_ratio_avg, Some(1.0));
    }

    #[test]
    fn an_end_without_a_start_records_nothing() {
        let t0 = Instant::now();
        let mut p = PollTimes::default();
        p.ended(t0, 5, 50);
        let s = p.stats(t0);
        assert_eq!(
            (
                s.poll_idle_ratio_avg,
                s.records_consumed_rate,
                s.bytes_consumed_rate
            ),
            (None, 0.0, 0.0)
        );
    }
}

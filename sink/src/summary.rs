//! Per-switch summaries of a dynamic query's samples (hop latency at the hops decoded to a
//! switch), kept as the codes the digests carry: a count per code when codes are narrow (12
//! bits or fewer: exact, and no decompression per sample), a KLL sketch of codes otherwise.
//! Values are decompressed only when read.

use std::time::{Duration, Instant};

use datasketches::common::SearchCriteria;
use datasketches::kll::KllSketch;
use telemetry::pint::compress::LogCompressor;

/// Widest codes counted one by one.
const COUNTED_CODES: u32 = 1 << 12;

/// KLL parameter for wide codes.
const SKETCH_K: u16 = 200;

/// Samples of one query at one switch.
#[derive(Debug, Clone)]
pub enum CodeSummary {
    /// Samples per code, and how many codes there are: empty until the first sample, so
    /// that the summaries of switches and plans no longer sampled (a plan reloaded away, a
    /// switch gone) hold no memory once their windows have passed.
    Counts(Vec<u64>, u32),
    /// A sketch of the codes, the sum of the values, and the compressor that gives them.
    Sketch(KllSketch<u32>, f64, LogCompressor),
}

impl CodeSummary {
    /// An empty summary for the codes of `c`.
    pub fn new(c: &LogCompressor) -> CodeSummary {
        let max_code = c.max_code();
        if max_code < COUNTED_CODES {
            CodeSummary::Counts(Vec::new(), max_code + 1)
        } else {
            CodeSummary::Sketch(
                KllSketch::new(SKETCH_K).expect("K in range"),
                0.0,
                c.clone(),
            )
        }
    }

    /// Adds a sample.
    #[inline]
    pub fn add(&mut self, code: u32) {
        match self {
            CodeSummary::Counts(v, codes) => {
                if v.is_empty() {
                    v.resize(*codes as usize, 0);
                }
                if let Some(n) = v.get_mut(code as usize) {
                    *n += 1;
                }
            }
            CodeSummary::Sketch(s, sum, c) => {
                s.update(code);
                *sum += c.decompress(code);
            }
        }
    }

    /// Adds another summary of the same query (same plan).
    pub fn merge(&mut self, other: &CodeSummary) {
        match (self, other) {
            (CodeSummary::Counts(a, _), CodeSummary::Counts(b, _)) => {
                if a.is_empty() {
                    a.clone_from(b);
                } else {
                    for (x, y) in a.iter_mut().zip(b) {
                        *x += y;
                    }
                }
            }
            (CodeSummary::Sketch(a, sa, _), CodeSummary::Sketch(b, sb, _)) => {
                let _ = a.merge(b);
                *sa += sb;
            }
            _ => {}
        }
    }

    /// Samples.
    pub fn count(&self) -> u64 {
        match self {
            CodeSummary::Counts(v, _) => v.iter().sum(),
            CodeSummary::Sketch(s, ..) => s.n(),
        }
    }

    /// Sum of the values.
    pub fn sum(&self, c: &LogCompressor) -> f64 {
        match self {
            CodeSummary::Counts(v, _) => v
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(code, n)| c.decompress(code as u32) * *n as f64)
                .sum(),
            CodeSummary::Sketch(_, sum, _) => *sum,
        }
    }

    /// The `q`-quantile (0 to 1) of the values.
    pub fn quantile(&self, q: f64, c: &LogCompressor) -> Option<f64> {
        let code = match self {
            CodeSummary::Counts(v, _) => {
                let total: u64 = v.iter().sum();
                if total == 0 {
                    return None;
                }
                // The smallest code whose cumulative count reaches q of the total.
                let want = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
                let mut seen = 0;
                v.iter().position(|n| {
                    seen += n;
                    seen >= want
                })? as u32
            }
            CodeSummary::Sketch(s, ..) => s
                .quantile(q.clamp(0.0, 1.0), SearchCriteria::Inclusive)
                .ok()??,
        };
        Some(c.decompress(code))
    }
}

/// How long samples count in a [`RecentSummary`]'s quantiles: from one to two of these.
pub const RECENT_WINDOW: Duration = Duration::from_secs(300);

/// A [`CodeSummary`] whose quantiles follow the recent samples (the last 5 to 10 minutes,
/// as Prometheus client summaries do) while its count and sum cover all of them (a
/// summary's `_count` and `_sum` are counters): a lifetime summary's quantiles stop moving
/// after hours of samples, however the latency changes.
#[derive(Clone)]
pub struct RecentSummary {
    current: CodeSummary,
    previous: CodeSummary,
    /// Count and sum of the samples rotated out.
    retired: (u64, f64),
    since: Instant,
    compressor: LogCompressor,
}

/// The samples, without the window's start time (two summaries of the same samples read
/// the same).
impl std::fmt::Debug for RecentSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentSummary")
            .field("current", &self.current)
            .field("previous", &self.previous)
            .field("retired", &self.retired)
            .finish_non_exhaustive()
    }
}

impl RecentSummary {
    /// An empty summary for the codes of `c`.
    pub fn new(c: &LogCompressor) -> RecentSummary {
        RecentSummary {
            current: CodeSummary::new(c),
            previous: CodeSummary::new(c),
            retired: (0, 0.0),
            since: Instant::now(),
            compressor: c.clone(),
        }
    }

    /// Adds a sample.
    #[inline]
    pub fn add(&mut self, code: u32) {
        self.current.add(code);
    }

    /// Starts a new window once the current one is [`RECENT_WINDOW`] old (at `now`): the
    /// samples of the one before leave the quantiles.
    pub fn rotate(&mut self, now: Instant) {
        if now.saturating_duration_since(self.since) < RECENT_WINDOW {
            return;
        }
        let fresh = CodeSummary::new(&self.compressor);
        let old = std::mem::replace(
            &mut self.previous,
            std::mem::replace(&mut self.current, fresh),
        );
        self.retired.0 += old.count();
        self.retired.1 += old.sum(&self.compressor);
        self.since = now;
    }

    /// Adds another summary of the same query (another decode thread's).
    pub fn merge(&mut self, other: &RecentSummary) {
        self.current.merge(&other.current);
        self.previous.merge(&other.previous);
        self.retired.0 += other.retired.0;
        self.retired.1 += other.retired.1;
    }

    /// Samples, all time.
    pub fn count(&self) -> u64 {
        self.retired.0 + self.previous.count() + self.current.count()
    }

    /// Sum of the values, all time.
    pub fn sum(&self, c: &LogCompressor) -> f64 {
        self.retired.1 + self.previous.sum(c) + self.current.sum(c)
    }

    /// The `q`-quantile (0 to 1) of the recent values.
    pub fn quantile(&self, q: f64, c: &LogCompressor) -> Option<f64> {
        let mut recent = self.previous.clone();
        recent.merge(&self.current);
        recent.quantile(q, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantiles follow the last windows' samples; count and sum keep every sample.
    #[test]
    fn recent_quantiles_follow_the_latency_and_counts_keep_everything() {
        let c = LogCompressor::with_epsilon(0.025, 8);
        let mut s = RecentSummary::new(&c);
        let t0 = Instant::now();
        let code = |v: u64| c.compress(v, 0);
        for _ in 0..1000 {
            s.add(code(1000));
        }
        let low = s.quantile(0.5, &c).unwrap();
        assert!((low - 1000.0).abs() < 50.0, "{low}");
        // Two windows later the latency is ten times higher: the median says so.
        s.rotate(t0 + RECENT_WINDOW);
        for _ in 0..10 {
            s.add(code(10_000));
        }
        s.rotate(t0 + 2 * RECENT_WINDOW);
        for _ in 0..10 {
            s.add(code(10_000));
        }
        let high = s.quantile(0.5, &c).unwrap();
        assert!((high - 10_000.0).abs() < 500.0, "{high}");
        assert_eq!(s.count(), 1020);
        let sum = s.sum(&c);
        assert!(
            (sum - 1000.0 * 1000.0 - 20.0 * 10_000.0).abs() < 0.05 * sum,
            "{sum}"
        );
        // Merged with another thread's, both count.
        let mut m = RecentSummary::new(&c);
        m.add(code(10_000));
        m.merge(&s);
        assert_eq!(m.count(), 1021);
    }

    /// A summary sampled no more (its plan reloaded away, its switch gone) gives back its
    /// counts once two windows have passed, and keeps its count and sum.
    #[test]
    fn an_idle_summary_holds_no_counts() {
        let c = LogCompressor::with_epsilon(0.025, 12);
        let empty =
            |s: &CodeSummary| matches!(s, CodeSummary::Counts(v, 4096) if v.capacity() == 0);
        let mut s = RecentSummary::new(&c);
        assert!(empty(&s.current) && empty(&s.previous));
        s.add(c.compress(1000, 0));
        assert!(!empty(&s.current));
        let t0 = Instant::now();
        s.rotate(t0 + RECENT_WINDOW);
        assert!(!empty(&s.previous) && empty(&s.current));
        s.rotate(t0 + 2 * RECENT_WINDOW);
        assert!(empty(&s.current) && empty(&s.previous));
        assert_eq!(s.count(), 1);
        assert_eq!(s.quantile(0.5, &c), None);
        // An empty summary merged into takes the other's counts.
        let mut m = CodeSummary::new(&c);
        let mut o = CodeSummary::new(&c);
        o.add(7);
        m.merge(&o);
        m.merge(&CodeSummary::new(&c));
        assert_eq!(m.count(), 1);
    }

    #[test]
    fn counted_and_sketched_codes_agree_with_the_truth() {
        let narrow = LogCompressor::with_epsilon(0.025, 8);
        let wide = LogCompressor::with_epsilon(0.001, 14);
        for c in [&narrow, &wide] {
            let mut s = CodeSummary::new(c);
            let mut t = CodeSummary::new(c);
            let mut codes = Vec::new();
            for i in 0..10_000u32 {
                let code = c.compress(u64::from(1000 + i % 1000), (i * 7919) & 0xffff);
                codes.push(code);
                if i % 2 == 0 {
                    s.add(code);
                } else {
                    t.add(code);
                }
            }
            s.merge(&t);
            assert_eq!(s.count(), 10_000);
            codes.sort_unstable();
            let median = c.decompress(codes[4999]);
            let got = s.quantile(0.5, c).unwrap();
            assert!((got - median).abs() / median < 0.01, "{got} vs {median}");
            let sum: f64 = codes.iter().map(|&x| c.decompress(x)).sum();
            assert!((s.sum(c) - sum).abs() / sum < 1e-9);
        }
        assert_eq!(CodeSummary::new(&narrow).quantile(0.5, &narrow), None);
    }
}

//! Per-switch summaries of a dynamic query's samples (hop latency at the hops decoded to a
//! switch), kept as the codes the digests carry: a count per code when codes are narrow (12
//! bits or fewer: exact, and no decompression per sample), a KLL sketch of codes otherwise.
//! Values are decompressed only when read.

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
    /// Samples per code.
    Counts(Vec<u64>),
    /// A sketch of the codes, the sum of the values, and the compressor that gives them.
    Sketch(KllSketch<u32>, f64, LogCompressor),
}

impl CodeSummary {
    /// An empty summary for the codes of `c`.
    pub fn new(c: &LogCompressor) -> CodeSummary {
        let max_code = c.max_code();
        if max_code < COUNTED_CODES {
            CodeSummary::Counts(vec![0; max_code as usize + 1])
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
            CodeSummary::Counts(v) => {
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
            (CodeSummary::Counts(a), CodeSummary::Counts(b)) => {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
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
            CodeSummary::Counts(v) => v.iter().sum(),
            CodeSummary::Sketch(s, ..) => s.n(),
        }
    }

    /// Sum of the values.
    pub fn sum(&self, c: &LogCompressor) -> f64 {
        match self {
            CodeSummary::Counts(v) => v
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
            CodeSummary::Counts(v) => {
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

#[cfg(test)]
mod tests {
    use super::*;

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

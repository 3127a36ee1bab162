//! The sink's recording module for one flow: per static query a path decoder, per dynamic
//! query one KLL quantile sketch per hop within the flow's space budget (Apache
//! DataSketches), and per per-packet query the latest and running values.

use datasketches::common::SearchCriteria;
use datasketches::kll::KllSketch;

use crate::pint::compress::LogCompressor;
use crate::pint::path_decoder::{PathDecoder, Space};
use crate::pint::plan::{Plan, QueryKind, Reading};

/// Bytes one retained sample takes in a sketch (a u32 code).
const BYTES_PER_ITEM: u32 = 4;

/// Quantile sketches of one dynamic query's samples, one per hop of a flow.
#[derive(Debug, Clone)]
pub struct HopSketches {
    compression: LogCompressor,
    sketches: Vec<KllSketch<u32>>,
}

/// Why an aggregation cannot be answered from sampled streams.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} cannot be approximated well from a uniformly sampled stream (each hop sees only a sample of the flow's packets); PINT does not answer it"
)]
pub struct NotApproximable(pub &'static str);

impl HopSketches {
    /// Sketches for a flow of `k` hops whose samples are codes of `compression`, within
    /// `space_budget` bytes split evenly over the hops.
    pub fn new(k: usize, compression: LogCompressor, space_budget: u32) -> HopSketches {
        let items = (space_budget / k.max(1) as u32 / BYTES_PER_ITEM).max(1);
        // A KLL sketch with parameter K keeps at most about 3K items.
        let kll_k = (items / 3).clamp(8, u32::from(u16::MAX)) as u16;
        HopSketches {
            compression,
            sketches: (0..k)
                .map(|_| KllSketch::new(kll_k).expect("K within the library's range"))
                .collect(),
        }
    }

    /// An unbounded recorder (large sketches), for comparisons.
    pub fn large(k: usize, compression: LogCompressor) -> HopSketches {
        HopSketches {
            compression,
            sketches: (0..k)
                .map(|_| KllSketch::new(u16::MAX).expect("max K"))
                .collect(),
        }
    }

    /// Adds a sample written by hop `hop` (1-based).
    pub fn add(&mut self, hop: usize, code: u32) {
        if let Some(s) = self.sketches.get_mut(hop.wrapping_sub(1)) {
            s.update(code);
        }
    }

    /// Samples recorded for hop `hop`.
    pub fn samples(&self, hop: usize) -> u64 {
        self.sketches
            .get(hop.wrapping_sub(1))
            .map_or(0, KllSketch::n)
    }

    /// The sketches' normalized single-sided rank error at 99% confidence (the library's
    /// published fit for KLL): a quantile answered is the true quantile of a rank within this
    /// much of the one asked.
    pub fn rank_error(&self) -> f64 {
        self.sketches
            .first()
            .map_or(0.0, KllSketch::normalized_rank_error)
    }

    /// Items the sketches keep in all (memory is about four bytes each).
    pub fn retained(&self) -> usize {
        self.sketches.iter().map(KllSketch::num_retained).sum()
    }

    /// The `q`-quantile (0 to 1) of hop `hop`'s values, decompressed.
    pub fn quantile(&self, hop: usize, q: f64) -> Option<f64> {
        let s = self.sketches.get(hop.wrapping_sub(1))?;
        let code = s
            .quantile(q.clamp(0.0, 1.0), SearchCriteria::Inclusive)
            .ok()??;
        Some(self.compression.decompress(code))
    }

    /// Values of hop `hop` seen in at least `min_share` of its samples, with their shares,
    /// most frequent first.
    pub fn frequent(&self, hop: usize, min_share: f64) -> Vec<(f64, f64)> {
        let Some(s) = self.sketches.get(hop.wrapping_sub(1)) else {
            return Vec::new();
        };
        if s.is_empty() {
            return Vec::new();
        }
        let (Some(&lo), Some(&hi)) = (s.min_item(), s.max_item()) else {
            return Vec::new();
        };
        let splits: Vec<u32> = (lo + 1..=hi).collect();
        let Ok(Some(pmf)) = s.pmf(&splits, SearchCriteria::Exclusive) else {
            return Vec::new();
        };
        let mut out: Vec<(f64, f64)> = pmf
            .iter()
            .enumerate()
            .filter(|(_, p)| **p >= min_share && **p > 0.0)
            .map(|(i, p)| (self.compression.decompress(lo + i as u32), *p))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    /// Distinct values and entropy are not answered: see [`NotApproximable`].
    pub fn distinct_values(&self, _hop: usize) -> Result<u64, NotApproximable> {
        Err(NotApproximable("the number of distinct values"))
    }

    /// See [`HopSketches::distinct_values`].
    pub fn entropy(&self, _hop: usize) -> Result<f64, NotApproximable> {
        Err(NotApproximable("the entropy of the value distribution"))
    }
}

/// Everything the sink keeps for one flow of `k` hops under a plan.
#[derive(Debug, Clone)]
pub struct FlowRecorder<'a> {
    plan: &'a Plan,
    k: usize,
    paths: Vec<Option<PathDecoder<'a>>>,
    sketches: Vec<Option<HopSketches>>,
    aggregates: Vec<Option<Aggregate>>,
    packets: u64,
}

/// Running statistics of a per-packet query over a flow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Aggregate {
    /// Packets that carried the query.
    pub count: u64,
    /// The latest value.
    pub last: f64,
    /// The mean value.
    pub mean: f64,
    /// The largest value.
    pub max: f64,
}

impl<'a> FlowRecorder<'a> {
    /// A recorder for a flow of `k` hops whose last hop is `sink_switch`; `space` is where
    /// path candidates come from.
    pub fn new(
        plan: &'a Plan,
        k: usize,
        space: Space<'a>,
        sink_switch: Option<u32>,
    ) -> FlowRecorder<'a> {
        let mut paths = Vec::new();
        let mut sketches = Vec::new();
        let mut aggregates = Vec::new();
        for q in &plan.queries {
            match &q.kind {
                QueryKind::StaticPerFlow { coding } => {
                    let mut d = PathDecoder::new(k, coding, space);
                    if let Some(s) = sink_switch {
                        d.pin(k, s);
                    }
                    paths.push(Some(d));
                    sketches.push(None);
                    aggregates.push(None);
                }
                QueryKind::DynamicPerFlow {
                    compression,
                    space_budget,
                    ..
                } => {
                    paths.push(None);
                    sketches.push(Some(HopSketches::new(
                        k,
                        compression.clone(),
                        *space_budget,
                    )));
                    aggregates.push(None);
                }
                QueryKind::PerPacket { .. } => {
                    paths.push(None);
                    sketches.push(None);
                    aggregates.push(Some(Aggregate::default()));
                }
            }
        }
        FlowRecorder {
            plan,
            k,
            paths,
            sketches,
            aggregates,
            packets: 0,
        }
    }

    /// Records one packet's digest.
    pub fn record(&mut self, pid: u32, digest: u64) {
        self.packets += 1;
        for (q, reading) in self.plan.decode(pid, self.k, digest) {
            match reading {
                Reading::Fields(f) => {
                    if let Some(Some(d)) = self.paths.get_mut(q) {
                        d.feed(pid, &f);
                    }
                }
                Reading::Sample { hop, code, .. } => {
                    if let Some(Some(s)) = self.sketches.get_mut(q) {
                        s.add(hop, code);
                    }
                }
                Reading::Aggregate(v) => {
                    if let Some(Some(a)) = self.aggregates.get_mut(q) {
                        a.count += 1;
                        a.last = v;
                        a.mean += (v - a.mean) / a.count as f64;
                        a.max = if a.count == 1 { v } else { a.max.max(v) };
                    }
                }
            }
        }
    }

    /// Packets recorded.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The path decoder of static query `q`.
    pub fn path(&self, q: usize) -> Option<&PathDecoder<'a>> {
        self.paths.get(q)?.as_ref()
    }

    /// The sketches of dynamic query `q`.
    pub fn sketches(&self, q: usize) -> Option<&HopSketches> {
        self.sketches.get(q)?.as_ref()
    }

    /// The running statistics of per-packet query `q`.
    pub fn aggregate(&self, q: usize) -> Option<&Aggregate> {
        self.aggregates.get(q)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash32;

    #[test]
    fn sketches_answer_quantiles_and_frequent_values_within_budget() {
        let c = LogCompressor::with_epsilon(0.022, 8);
        let mut small = HopSketches::new(4, c.clone(), 400);
        // Accuracy is checked on sketches of 300 items per hop (K = 100).
        let mut medium = HopSketches::new(4, c.clone(), 4 * 4 * 300);
        let mut exact = HopSketches::large(4, c.clone());
        for i in 0..50_000u32 {
            let hop = 1 + (i % 4) as usize;
            // Hop h: latency uniform in [1000 h, 2000 h] ns, codes with randomized rounding.
            let x = 1000.0
                * hop as f64
                * (1.0 + f64::from(hash32(1, &[u64::from(i)])) / 4_294_967_296.0);
            let code = c.compress(x.round() as u64, hash32(2, &[u64::from(i)]) >> 16);
            small.add(hop, code);
            medium.add(hop, code);
            exact.add(hop, code);
        }
        assert!(
            small.retained() <= 4 * 100,
            "within budget: {}",
            small.retained()
        );
        // KLL compacts with random coin flips (not seedable), so the bound is the library's
        // rank error, doubled (far beyond its 99% level), turned into value error for a
        // uniform [1000 h, 2000 h] (a rank error r moves the median by r x 1000 h, i.e. 2r/3 of
        // 1500 h), plus the compression's own error.
        let tolerance = 2.0 * medium.rank_error() * 2.0 / 3.0 + 0.03;
        assert!(
            tolerance < 0.07,
            "a bound that still means something: {tolerance}"
        );
        for hop in 1..=4 {
            let truth = 1500.0 * hop as f64;
            let m = medium.quantile(hop, 0.5).unwrap();
            assert!(
                (m - truth).abs() / truth < tolerance,
                "hop {hop}: median {m} vs {truth} (tolerance {tolerance})"
            );
            let e = exact.quantile(hop, 0.5).unwrap();
            assert!(
                (e - truth).abs() / truth < 0.03,
                "hop {hop}: median {e} vs {truth}"
            );
        }
        assert_eq!(small.samples(2), 12_500);
        assert!(small.distinct_values(1).is_err());
        assert!(
            small
                .entropy(1)
                .unwrap_err()
                .to_string()
                .contains("sampled stream")
        );
        // A constant value is frequent.
        let mut f = HopSketches::new(1, c.clone(), 1000);
        for i in 0..1000u32 {
            f.add(1, if i % 4 == 0 { 10 } else { 100 });
        }
        let top = f.frequent(1, 0.1);
        assert_eq!(top.len(), 2);
        assert!(
            (top[0].0 - c.decompress(100)).abs() < 1e-9 && (top[0].1 - 0.75).abs() < 0.05,
            "{top:?}"
        );
    }
}

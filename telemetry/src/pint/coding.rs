//! Distributed coding of static per-flow values (path tracing): the decisions every hop and
//! the sink derive from the global hashes, in one place so encoder and decoder cannot
//! disagree.
//!
//! Per packet and instance, a layer is chosen by `hash32(LAYER + n*S, [pid])`: the baseline
//! layer when it is below `tau`, otherwise one of the XOR layers (split evenly). On the
//! baseline layer hop `i` overwrites the field with `h(v, pid)` iff
//! `hash32(HOP + n*S, [pid, i]) < floor(2^32 / i)` (reservoir sampling: the survivor is
//! uniform over the hops). On XOR layer `l` hop `i` XORs `h(v, pid)` into the field iff
//! `hash32(XOR_HOP + l + n*S, [pid, i]) < floor(p_l * 2^32)`. `h(v, pid)` is the top `b`
//! bits of `hash32(VALUE + n*S, [v, pid])`, or `v` itself in raw mode (ideal experiments).
//! `S` is [`seeds::INSTANCE_STRIDE`].

use serde::{Deserialize, Serialize};

use crate::hash::{hash32, seeds, threshold};

/// Largest path length the coding handles (TTL-derived hop indices fit in a byte).
pub const MAX_HOPS: usize = 255;

/// A set of hop indices 1..=255, as a bitmap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct HopSet([u64; 4]);

impl HopSet {
    /// Adds hop `i` (1-based).
    #[inline]
    pub fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// Whether hop `i` is in the set.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }

    /// Number of hops in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The hops in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..4).flat_map(move |w| {
            let mut bits = self.0[w];
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + b)
            })
        })
    }
}

/// Which coding scheme a path query uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Baseline (reservoir sampling) only.
    Baseline,
    /// Baseline on a share `tau` of packets, XOR layers on the rest.
    Interleaved,
}

/// The layer a packet uses for one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Reservoir sampling: one hop's value survives.
    Baseline,
    /// XOR layer `l` (0-based): a random subset of hops XOR their values in.
    Xor(u8),
}

/// The parameters of a path-tracing (static per-flow) query's coding.
#[derive(Debug, Clone, PartialEq)]
pub struct PathCoding {
    /// Bits of one instance's field (`b`), 1 to 32.
    pub bits: u32,
    /// Independent instances, each with its own field and hashes.
    pub instances: u32,
    /// Values travel as they are (no hashing), for ideal experiments; needs `bits` = 32.
    pub raw_values: bool,
    /// Share of packets on the baseline layer, as an integer threshold over 2^32.
    tau: u64,
    /// Participation probability of each XOR layer, as thresholds over 2^32.
    xor: Vec<u64>,
    /// The probabilities as given (for reports).
    xor_p: Vec<f64>,
    tau_p: f64,
    /// Added to instance numbers in seeds, so that different queries hash independently.
    instance_base: u32,
}

impl PathCoding {
    /// A coding with explicit parameters: baseline share `tau` and XOR layer probabilities.
    pub fn new(bits: u32, instances: u32, tau: f64, xor: &[f64]) -> PathCoding {
        assert!((1..=32).contains(&bits), "bits must be 1 to 32");
        let tau = if xor.is_empty() { 1.0 } else { tau };
        PathCoding {
            bits,
            instances: instances.max(1),
            raw_values: false,
            tau: threshold(tau),
            xor: xor.iter().map(|p| threshold(*p)).collect(),
            xor_p: xor.to_vec(),
            tau_p: tau,
            instance_base: 0,
        }
    }

    /// The same coding with its seeds moved by `base` instances, so that it decides
    /// independently of codings with another base.
    pub fn with_instance_base(mut self, base: u32) -> PathCoding {
        self.instance_base = base;
        self
    }

    /// The paper's parameters for a path-length bound `d`: baseline only, or interleaved
    /// with `tau = 3/4` and XOR probability `1/ln d` (d <= 15) or `ln ln d / ln d` (d >= 16).
    pub fn for_diameter(scheme: Scheme, bits: u32, instances: u32, d: u32) -> PathCoding {
        match scheme {
            Scheme::Baseline => PathCoding::new(bits, instances, 1.0, &[]),
            Scheme::Interleaved => PathCoding::new(bits, instances, 0.75, &[xor_probability(d)]),
        }
    }

    /// Switches to raw values (the field carries the value itself; 32 bits).
    pub fn with_raw_values(mut self) -> PathCoding {
        self.bits = 32;
        self.raw_values = true;
        self
    }

    /// Baseline share.
    pub fn tau(&self) -> f64 {
        self.tau_p
    }

    /// XOR layer probabilities.
    pub fn xor_probabilities(&self) -> &[f64] {
        &self.xor_p
    }

    fn seed(&self, base: u64, instance: u32) -> u64 {
        let n = u64::from(instance) + u64::from(self.instance_base);
        base.wrapping_add(n.wrapping_mul(seeds::INSTANCE_STRIDE))
    }

    /// The layer of `pid` for `instance`.
    #[inline]
    pub fn layer(&self, instance: u32, pid: u32) -> Layer {
        let u = u64::from(hash32(self.seed(seeds::LAYER, instance), &[u64::from(pid)]));
        if u < self.tau || self.xor.is_empty() {
            return Layer::Baseline;
        }
        // Spread the rest evenly over the XOR layers.
        let rest = (1u64 << 32) - self.tau;
        let l =
            ((u - self.tau) * self.xor.len() as u64 / rest.max(1)).min(self.xor.len() as u64 - 1);
        Layer::Xor(l as u8)
    }

    /// Whether hop `i` (1-based) writes on the baseline layer: `g(pid, i) < 1/i`.
    #[inline]
    pub fn samples(&self, instance: u32, pid: u32, i: usize) -> bool {
        let g = hash32(self.seed(seeds::HOP, instance), &[u64::from(pid), i as u64]);
        u64::from(g) < (1u64 << 32) / i as u64
    }

    /// Whether hop `i` takes part in XOR layer `layer`.
    #[inline]
    pub fn xor_member(&self, instance: u32, layer: u8, pid: u32, i: usize) -> bool {
        let seed = self.seed(seeds::XOR_HOP.wrapping_add(u64::from(layer)), instance);
        u64::from(hash32(seed, &[u64::from(pid), i as u64])) < self.xor[usize::from(layer)]
    }

    /// `h(value, pid)`: what a hop writes for `value`.
    #[inline]
    pub fn value_hash(&self, instance: u32, value: u32, pid: u32) -> u64 {
        if self.raw_values {
            return u64::from(value);
        }
        let h = hash32(
            self.seed(seeds::VALUE, instance),
            &[u64::from(value), u64::from(pid)],
        );
        u64::from(h >> (32 - self.bits))
    }

    /// The hop whose value survives on the baseline layer of a `k`-hop path: the largest
    /// `i <= k` that samples (hop 1 always does).
    pub fn writer(&self, instance: u32, pid: u32, k: usize) -> usize {
        (2..=k)
            .rev()
            .find(|&i| self.samples(instance, pid, i))
            .unwrap_or(1)
    }

    /// The hops of a `k`-hop path that take part in XOR layer `layer`.
    pub fn xor_hops(&self, instance: u32, layer: u8, pid: u32, k: usize) -> HopSet {
        let mut s = HopSet::default();
        for i in 1..=k {
            if self.xor_member(instance, layer, pid, i) {
                s.insert(i);
            }
        }
        s
    }

    /// Encodes at hop `i`: updates one instance's field with this hop's `value`.
    #[inline]
    pub fn encode(&self, instance: u32, pid: u32, i: usize, value: u32, field: u64) -> u64 {
        match self.layer(instance, pid) {
            Layer::Baseline => {
                if self.samples(instance, pid, i) {
                    self.value_hash(instance, value, pid)
                } else {
                    field
                }
            }
            Layer::Xor(l) => {
                if self.xor_member(instance, l, pid, i) {
                    field ^ self.value_hash(instance, value, pid)
                } else {
                    field
                }
            }
        }
    }
}

/// The paper's XOR probability for a path-length bound `d`: `1 / ln d` for `d <= 15`,
/// `ln ln d / ln d` for larger `d` (natural logarithms; `d` below 3 is treated as 3).
pub fn xor_probability(d: u32) -> f64 {
    let d = f64::from(d.max(3));
    if d <= 15.0 {
        1.0 / d.ln()
    } else {
        d.ln().ln() / d.ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_sets() {
        let mut s = HopSet::default();
        for i in [1, 63, 64, 200, 255] {
            s.insert(i);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 63, 64, 200, 255]);
        assert_eq!(s.len(), 5);
        assert!(s.contains(64) && !s.contains(65));
    }

    #[test]
    fn baseline_survivor_is_uniform() {
        let c = PathCoding::for_diameter(Scheme::Baseline, 8, 1, 10);
        let k = 10;
        let mut counts = [0u32; 11];
        let n = 200_000u32;
        for pid in 0..n {
            // The survivor found by simulating the hops equals the sink's computation.
            let mut field = 0;
            for i in 1..=k {
                field = c.encode(0, pid, i, i as u32, field);
            }
            let w = c.writer(0, pid, k);
            assert_eq!(field, c.value_hash(0, w as u32, pid));
            counts[w] += 1;
        }
        let expect = f64::from(n) / k as f64;
        for (i, c) in counts.iter().enumerate().skip(1) {
            // Within 4 standard deviations of a binomial(n, 1/k).
            let sd = (expect * (1.0 - 1.0 / k as f64)).sqrt();
            assert!(
                (f64::from(*c) - expect).abs() < 4.0 * sd,
                "hop {i}: {c} vs {expect}"
            );
        }
    }

    #[test]
    fn xor_layer_matches_membership() {
        let c = PathCoding::for_diameter(Scheme::Interleaved, 8, 2, 25);
        let mut xor_packets = 0;
        for pid in 0..20_000u32 {
            for inst in 0..2 {
                if let Layer::Xor(l) = c.layer(inst, pid) {
                    xor_packets += 1;
                    let mut field = 0;
                    for i in 1..=25 {
                        field = c.encode(inst, pid, i, 1000 + i as u32, field);
                    }
                    let expect = c
                        .xor_hops(inst, l, pid, 25)
                        .iter()
                        .fold(0, |a, i| a ^ c.value_hash(inst, 1000 + i as u32, pid));
                    assert_eq!(field, expect);
                }
            }
        }
        // About a quarter of packet-instances are XOR packets.
        assert!((8_000..12_000).contains(&xor_packets), "{xor_packets}");
        assert!((xor_probability(25) - 0.3632).abs() < 1e-3);
        assert!((xor_probability(10) - 1.0 / 10f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn instances_are_independent() {
        let c = PathCoding::for_diameter(Scheme::Baseline, 8, 2, 10);
        let same = (0..10_000u32)
            .filter(|&p| c.writer(0, p, 10) == c.writer(1, p, 10))
            .count();
        // Independent uniform writers agree with probability 1/10.
        assert!((700..1300).contains(&same), "{same}");
    }
}

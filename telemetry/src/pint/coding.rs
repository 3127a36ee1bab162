//! Distributed coding of static per-flow values (path tracing): the decisions every hop and
//! the sink derive from the packet's tape (see [`crate::pint::tape`]), in one place so encoder
//! and decoder cannot disagree.
//!
//! Per packet and instance `n`, a layer is chosen by the instance's 16-bit packet slice `u`:
//! the baseline layer when `u < floor(tau * 2^16)`, otherwise one of the XOR layers (split
//! evenly). On the baseline layer hop `i` overwrites the field with `h(v, pid)` iff its 24-bit
//! hop slice `g` is below `floor(2^24 / i)` (reservoir sampling: the survivor is uniform over
//! the hops). On XOR layer `l` hop `i` XORs `h(v, pid)` into the field iff
//! `g < floor(p_l * 2^24)`. `h(v, pid)` is instance `n`'s `b` bits of the value word of `v`
//! (the top bits first: instance 0 takes bits 63..64-b), or `v` itself in raw mode (ideal
//! experiments).

use serde::{Deserialize, Serialize};

use crate::pint::tape::{
    self, COIN_BITS, HopTape, SAMPLE_BITS, SAMPLE_THRESHOLDS, Slice, SliceAllocator,
};

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
    /// Independent instances, each with its own field and decisions.
    pub instances: u32,
    /// Values travel as they are (no hashing), for ideal experiments; needs `bits` = 32.
    pub raw_values: bool,
    /// Share of packets on the baseline layer, as a threshold over 2^16.
    tau: u32,
    /// Participation probability of each XOR layer, as thresholds over 2^24.
    xor: Vec<u32>,
    /// The probabilities as given (for reports).
    xor_p: Vec<f64>,
    tau_p: f64,
    /// The query's salt for value hashing.
    salt: u64,
    /// Per instance: its packet slice (layer choice) and hop slice (sampling).
    layer_slices: Vec<Slice>,
    hop_slices: Vec<Slice>,
    /// Per instance: its value word and the shift of its `bits` in it.
    value_slots: Vec<(u32, u32)>,
}

/// Everything a switch needs to encode a one-instance coding with at most one XOR layer
/// without going through [`PathCoding`]'s methods (the switch's compiled plan uses it; the
/// result is the same as [`PathCoding::encode_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParts {
    /// The packet slice that chooses the layer.
    pub layer: Slice,
    /// The hop slice that decides whether a hop writes.
    pub sample: Slice,
    /// Baseline when the layer slice is below this (over 2^16).
    pub tau: u32,
    /// The XOR layer's threshold (over 2^24), if the coding has one.
    pub xor: Option<u32>,
    /// The value word the hash comes from.
    pub value_word: u32,
    /// The hash's shift in that word.
    pub value_shift: u32,
    /// The hash's mask.
    pub value_mask: u64,
}

/// Threshold over 2^bits of probability `p`, clamped to [0, 2^bits].
fn fixed_threshold(p: f64, bits: u32) -> u32 {
    let scale = f64::from(1u32 << bits);
    (p.clamp(0.0, 1.0) * scale).floor() as u32
}

impl PathCoding {
    /// A coding with explicit parameters: baseline share `tau` and XOR layer probabilities,
    /// with slices and salt of its own (as if it were a plan's only query, named `path`).
    pub fn new(bits: u32, instances: u32, tau: f64, xor: &[f64]) -> PathCoding {
        let mut p = SliceAllocator::packet();
        let mut h = SliceAllocator::hop();
        PathCoding::with_slices(bits, instances, tau, xor, "path", &mut p, &mut h)
    }

    /// A coding whose layer and sampling slices come from the given allocators and whose
    /// value hashes are salted by `name` (a plan compiles each query this way, so queries
    /// decide independently).
    pub fn with_slices(
        bits: u32,
        instances: u32,
        tau: f64,
        xor: &[f64],
        name: &str,
        packet: &mut SliceAllocator,
        hop: &mut SliceAllocator,
    ) -> PathCoding {
        assert!((1..=32).contains(&bits), "bits must be 1 to 32");
        let instances = instances.max(1);
        let tau = if xor.is_empty() { 1.0 } else { tau };
        PathCoding {
            bits,
            instances,
            raw_values: false,
            tau: fixed_threshold(tau, COIN_BITS),
            xor: xor
                .iter()
                .map(|p| fixed_threshold(*p, SAMPLE_BITS))
                .collect(),
            xor_p: xor.to_vec(),
            tau_p: tau,
            salt: tape::query_salt(name),
            layer_slices: (0..instances).map(|_| packet.take(COIN_BITS)).collect(),
            hop_slices: (0..instances).map(|_| hop.take(SAMPLE_BITS)).collect(),
            value_slots: (0..instances)
                .map(|n| {
                    let per = 64 / bits;
                    (n / per, 64 - (n % per + 1) * bits)
                })
                .collect(),
        }
    }

    /// The paper's parameters for a path-length bound `d`: baseline only, or interleaved
    /// with `tau = 3/4` and XOR probability `1/ln d` (d <= 15) or `ln ln d / ln d` (d >= 16).
    pub fn for_diameter(scheme: Scheme, bits: u32, instances: u32, d: u32) -> PathCoding {
        let (tau, xor) = scheme_parameters(scheme, d);
        PathCoding::new(bits, instances, tau, &xor)
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

    /// The query's salt for value keys.
    pub fn salt(&self) -> u64 {
        self.salt
    }

    /// The parts of a one-instance coding with at most one XOR layer and hashed values
    /// (None otherwise).
    pub fn parts(&self) -> Option<PathParts> {
        if self.instances != 1 || self.xor.len() > 1 || self.raw_values {
            return None;
        }
        let (value_word, value_shift) = self.value_slots[0];
        Some(PathParts {
            layer: self.layer_slices[0],
            sample: self.hop_slices[0],
            tau: if self.xor.is_empty() {
                1 << COIN_BITS
            } else {
                self.tau
            },
            xor: self.xor.first().copied(),
            value_word,
            value_shift,
            value_mask: (1u64 << self.bits) - 1,
        })
    }

    /// The layer of the packet with packet word `m` for `instance`.
    #[inline(always)]
    pub fn layer_of_word(&self, instance: u32, m: u64) -> Layer {
        let u = tape::packet_slice(m, self.layer_slices[instance as usize]);
        if u < self.tau || self.xor.is_empty() {
            return Layer::Baseline;
        }
        if self.xor.len() == 1 {
            return Layer::Xor(0);
        }
        // Spread the rest evenly over the XOR layers.
        let rest = (1u64 << COIN_BITS) - u64::from(self.tau);
        let l = (u64::from(u - self.tau) * self.xor.len() as u64 / rest.max(1))
            .min(self.xor.len() as u64 - 1);
        Layer::Xor(l as u8)
    }

    /// The layer of `pid` for `instance`.
    pub fn layer(&self, instance: u32, pid: u32) -> Layer {
        self.layer_of_word(instance, tape::packet_word(pid))
    }

    /// Whether hop `i` (1-based) writes on the baseline layer: `g(pid, i) < 1/i`.
    pub fn samples(&self, instance: u32, pid: u32, i: usize) -> bool {
        let g = tape::hop_slice(
            tape::packet_word(pid),
            i,
            self.hop_slices[instance as usize],
        );
        g < SAMPLE_THRESHOLDS[i & 255]
    }

    /// Whether hop `i` takes part in XOR layer `layer`.
    pub fn xor_member(&self, instance: u32, layer: u8, pid: u32, i: usize) -> bool {
        let g = tape::hop_slice(
            tape::packet_word(pid),
            i,
            self.hop_slices[instance as usize],
        );
        g < self.xor[usize::from(layer)]
    }

    /// `h(value, pid)` from the packet word and the value's key
    /// ([`tape::value_key`]`(self.salt(), value)`): instance `n` takes the `bits` bits at
    /// `64 - (n % per + 1) * bits` of value word `n / per`, `per = 64 / bits`.
    #[inline(always)]
    pub fn value_hash_with_key(&self, instance: u32, m: u64, vkey: u64) -> u64 {
        let (word, shift) = self.value_slots[instance as usize];
        let w = tape::value_word(m, vkey, word);
        (w >> shift) & ((1u64 << self.bits) - 1)
    }

    /// `h(value, pid)`: what a hop writes for `value`.
    pub fn value_hash(&self, instance: u32, value: u32, pid: u32) -> u64 {
        self.value_hasher(instance, pid)(value)
    }

    /// `h(value, pid)` for many values of one packet and instance: the packet word taken
    /// once (a decoder tries every candidate of a hop against one digest).
    #[inline]
    pub fn value_hasher(&self, instance: u32, pid: u32) -> impl Fn(u32) -> u64 + Copy + '_ {
        self.value_hasher_word(instance, tape::packet_word(pid))
    }

    /// [`PathCoding::value_hasher`] of the packet with packet word `m`.
    #[inline]
    pub fn value_hasher_word(&self, instance: u32, m: u64) -> impl Fn(u32) -> u64 + Copy + '_ {
        move |value| {
            if self.raw_values {
                u64::from(value)
            } else {
                self.value_hash_with_key(instance, m, tape::value_key(self.salt, value))
            }
        }
    }

    /// The hop whose value survives on the baseline layer of a `k`-hop path: the largest
    /// `i <= k` that samples (hop 1 always does).
    pub fn writer(&self, instance: u32, pid: u32, k: usize) -> usize {
        self.writer_word(instance, tape::packet_word(pid), k)
    }

    /// [`PathCoding::writer`] of the packet with packet word `m`.
    pub fn writer_word(&self, instance: u32, m: u64, k: usize) -> usize {
        tape::sample_writer(m, k, self.hop_slices[instance as usize])
    }

    /// The hops of a `k`-hop path that take part in XOR layer `layer`.
    pub fn xor_hops(&self, instance: u32, layer: u8, pid: u32, k: usize) -> HopSet {
        self.xor_hops_word(instance, layer, tape::packet_word(pid), k)
    }

    /// [`PathCoding::xor_hops`] of the packet with packet word `m`.
    pub fn xor_hops_word(&self, instance: u32, layer: u8, m: u64, k: usize) -> HopSet {
        let s = self.hop_slices[instance as usize];
        let t = self.xor[usize::from(layer)];
        let mut set = HopSet::default();
        for i in 1..=k.min(255) {
            if tape::hop_slice(m, i, s) < t {
                set.insert(i);
            }
        }
        set
    }

    /// Encodes at hop `i` from the packet word `m` and this hop's tape: updates one
    /// instance's field with the value hash `h` gives (called only when the hop writes).
    #[inline(always)]
    pub fn encode_with(
        &self,
        instance: u32,
        m: u64,
        tape: &HopTape,
        i: usize,
        field: u64,
        h: impl FnOnce() -> u64,
    ) -> u64 {
        let g = tape.slice(self.hop_slices[instance as usize]);
        // Without branches: which layer and whether this hop writes are coin flips per
        // packet, so the hash is computed either way and the result selected.
        let h = h();
        let (baseline, threshold) = match self.layer_of_word(instance, m) {
            Layer::Baseline => (true, SAMPLE_THRESHOLDS[i & 255]),
            Layer::Xor(l) => (false, self.xor[usize::from(l)]),
        };
        let writes = 0u64.wrapping_sub(u64::from(g < threshold));
        let replaced = (h & writes) | (field & !writes);
        let xored = field ^ (h & writes);
        if baseline { replaced } else { xored }
    }

    /// Encodes at hop `i`: updates one instance's field with this hop's `value`.
    pub fn encode(&self, instance: u32, pid: u32, i: usize, value: u32, field: u64) -> u64 {
        let m = tape::packet_word(pid);
        let t = HopTape::new(m, i, 1);
        self.encode_with(instance, m, &t, i, field, || {
            self.value_hash(instance, value, pid)
        })
    }
}

/// Baseline share and XOR layer probabilities of a scheme for path-length bound `d`.
pub fn scheme_parameters(scheme: Scheme, d: u32) -> (f64, Vec<f64>) {
    match scheme {
        Scheme::Baseline => (1.0, Vec::new()),
        Scheme::Interleaved => (0.75, vec![xor_probability(d)]),
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

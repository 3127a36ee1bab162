//! The project's one seeded hash family, used identically by every switch and the sink.
//!
//! Definition (so another implementation can reproduce it bit for bit):
//!
//! ```text
//! mix64(x):  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27; x *= 0x94d049bb133111eb; x ^= x >> 31
//! hash64(seed, w[0..n]):
//!     s = seed ^ 0x9e3779b97f4a7c15
//!     for each 64-bit word w:  s = mix64(s ^ w)
//!     return mix64(s ^ n)
//! hash32(seed, w) = high 32 bits of hash64(seed, w)
//! ```
//!
//! All arithmetic wraps modulo 2^64. Inputs are packed into 64-bit words by the callers with
//! documented layouts (for example [`flow_hash`]); no byte-order question arises because
//! words are integers, not memory.
//!
//! The per-packet hashes the data plane computes are cheaper members built on `mix64` (one
//! multiply to fold a word in, one `mix64` to finish), since a switch has about 20 ns for
//! all its telemetry per packet:
//!
//! ```text
//! key_hash(w0, w1)      = mix64(((w0 ^ FLOW_KEY) * 0x9e3779b97f4a7c15) ^ w1)
//! packet_id(F, w2)      = high 32 bits of mix64(F ^ ((w2 ^ PACKET_ID) * 0xd6e8feb86659fd93))
//! ecmp_hash(seed, F)    = high 32 bits of mix64(F ^ seed)
//! ```
//!
//! where `w0 = src << 32 | dst`, `w1 = protocol << 32 | src_port << 16 | dst_port` (a flow's
//! 5-tuple, host-order integers), `w2 = ident << 32 | tcp_seq` and `F = key_hash(w0, w1)`.
//! One `F` per packet serves ECMP, FlowRadar and the packet ID.

pub mod burst;

/// The seeds of the hash family's members. Each use has its own seed so that decisions are
/// independent; instance `n` of a query adds `n * INSTANCE_STRIDE` to its seeds.
pub mod seeds {
    /// The packet ID.
    pub const PACKET_ID: u64 = 0x5049_4e54_5049_4431;
    /// Choice of the query set of a packet (the execution plan).
    pub const PLAN: u64 = 0x5049_4e54_504c_414e;
    /// Choice of the coding layer (baseline or XOR) of a packet.
    pub const LAYER: u64 = 0x5049_4e54_4c41_5952;
    /// Per-hop sampling `g(pid, i)` of the baseline layer.
    pub const HOP: u64 = 0x5049_4e54_484f_5030;
    /// Per-hop participation `g'(pid, i)` of the XOR layers (plus the layer number).
    pub const XOR_HOP: u64 = 0x5049_4e54_584f_5230;
    /// Value hashing `h(value, pid)`.
    pub const VALUE: u64 = 0x5049_4e54_5641_4c30;
    /// Randomized rounding of compressed values.
    pub const ROUNDING: u64 = 0x5049_4e54_524e_4430;
    /// Added once per independent instance of a query.
    pub const INSTANCE_STRIDE: u64 = 0x9e37_79b9_7f4a_7c15;
    /// The flow-key hash `F`.
    pub const FLOW_KEY: u64 = 0x5049_4e54_464b_4559;
}

/// The flow-key hash `F` of a 5-tuple's two words (see the module documentation): what
/// FlowRadar, ECMP and the packet ID start from, computed once per packet.
#[inline(always)]
pub const fn key_hash(w0: u64, w1: u64) -> u64 {
    mix64(((w0 ^ seeds::FLOW_KEY).wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ w1)
}

/// The 32-bit packet ID from the flow-key hash `F` and the word `ident << 32 | tcp_seq`.
#[inline(always)]
pub const fn packet_id(f: u64, w2: u64) -> u32 {
    (mix64(f ^ (w2 ^ seeds::PACKET_ID).wrapping_mul(0xd6e8_feb8_6659_fd93)) >> 32) as u32
}

/// The ECMP hash of a flow with key hash `F` on a switch with ECMP seed `seed`.
#[inline(always)]
pub const fn ecmp_hash(seed: u64, f: u64) -> u32 {
    (mix64(f ^ seed) >> 32) as u32
}

/// The two words of a 5-tuple the hashes read: `src << 32 | dst` and
/// `protocol << 32 | src_port << 16 | dst_port`.
#[inline(always)]
pub const fn flow_words(src: u32, dst: u32, proto: u8, src_port: u16, dst_port: u16) -> [u64; 2] {
    [
        ((src as u64) << 32) | dst as u64,
        ((proto as u64) << 32) | ((src_port as u64) << 16) | dst_port as u64,
    ]
}

/// `x < p` for a probability `p` in [0, 1], compared as integers: `x < floor(p * 2^32)`,
/// so switch and sink agree bit for bit. `threshold(1.0)` accepts every `x`.
#[inline(always)]
pub fn below(x: u32, threshold: u64) -> bool {
    u64::from(x) < threshold
}

/// The integer threshold of probability `p` for [`below`]: `floor(p * 2^32)`, clamped.
pub fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        1 << 32
    } else if p <= 0.0 {
        0
    } else {
        (p * 4_294_967_296.0) as u64
    }
}

/// The splitmix64 finaliser: a bijective 64-bit mixer with full avalanche.
#[inline(always)]
pub const fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Seeded 64-bit hash of a sequence of 64-bit words (see the module documentation).
#[inline(always)]
pub fn hash64(seed: u64, words: &[u64]) -> u64 {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        s = mix64(s ^ w);
    }
    mix64(s ^ words.len() as u64)
}

/// Seeded 32-bit hash: the high half of [`hash64`].
#[inline(always)]
pub fn hash32(seed: u64, words: &[u64]) -> u32 {
    (hash64(seed, words) >> 32) as u32
}

/// The ECMP hash of an IPv4 5-tuple (it keeps every packet of a flow on one path):
/// [`ecmp_hash`] of the 5-tuple's [`key_hash`]. Fragments pass ports 0 so all fragments of a
/// datagram hash alike.
#[inline(always)]
pub fn flow_hash(seed: u64, src: u32, dst: u32, proto: u8, src_port: u16, dst_port: u16) -> u32 {
    let [w0, w1] = flow_words(src, dst, proto, src_port, dst_port);
    ecmp_hash(seed, key_hash(w0, w1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_reference_values() {
        // splitmix64's finaliser applied to the first state increments of its reference
        // generator (seed 0): the generator's published first output is 0xe220a8397b1dcdaf.
        assert_eq!(mix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn pinned_vectors() {
        // Literal values: a change to any member of the family fails here, because switch
        // and sink (and switches of different versions) must agree bit for bit.
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        assert_eq!(hash64(0, &[]), 0xe220_a839_7b1d_cdaf);
        assert_eq!(hash64(1, &[2]), 0x5c52_bd40_54e9_58c9);
        assert_eq!(hash32(7, &[1, 2, 3]), 0xc5e7_e34d);
        let [w0, w1] = flow_words(0x0a00_0001, 0x0a01_0001, 17, 1000, 2000);
        assert_eq!(w0, 0x0a00_0001_0a01_0001);
        assert_eq!(w1, 0x11_03e8_07d0);
        let f = key_hash(w0, w1);
        assert_eq!(f, 0xcd4e_6dd0_aad6_bcb1);
        assert_eq!(packet_id(f, (42 << 32) | 7), 0xd9ff_f1bc);
        assert_eq!(ecmp_hash(0x5049_4e54_4543_4d50, f), 0xd482_1f98);
        assert_eq!(
            flow_hash(
                0x5049_4e54_4543_4d50,
                0x0a00_0001,
                0x0a01_0001,
                17,
                1000,
                2000
            ),
            0xd482_1f98
        );
    }

    #[test]
    fn seeds_and_lengths_matter() {
        assert_ne!(hash64(1, &[5]), hash64(2, &[5]));
        assert_ne!(hash64(1, &[0]), hash64(1, &[0, 0]));
        assert_ne!(flow_hash(1, 1, 2, 6, 3, 4), flow_hash(1, 2, 1, 6, 4, 3));
    }
}

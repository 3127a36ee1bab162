//! Every per-packet hash a hop needs, for a whole burst at a time: the key hash `F`, the
//! packet ID, the packet word `M`, the hop's first tape word and the value word of one key
//! (`crate::pint::tape`). The data plane fills in each packet's words and hop index, calls
//! [`BurstHashes::compute`] once, and reads the results; the same functions the switch and
//! the sink use one packet at a time give the same values (a test checks every lane).
//!
//! On CPUs with AVX-512 (F and DQ) eight packets are hashed at once, since a burst's packets
//! are independent and 64-bit multiplies dominate the work; elsewhere a plain loop does the
//! same arithmetic.

use crate::hash::{key_hash, mix64, packet_id};
use crate::pint::tape::{self, HOP_KEYS};

/// Most packets in one burst.
pub const MAX: usize = 64;

/// One burst's hash inputs and outputs, a lane per packet (structure of arrays, so that
/// lanes load and store together).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct BurstHashes {
    /// In: `src << 32 | dst` (see [`crate::hash::flow_words`]).
    pub w0: [u64; MAX],
    /// In: `protocol << 32 | src_port << 16 | dst_port`.
    pub w1: [u64; MAX],
    /// In: `ident << 32 | tcp_seq`.
    pub w2: [u64; MAX],
    /// In: the hop index (1 to 255).
    pub hop: [u64; MAX],
    /// Out: the key hash `F` ([`crate::hash::key_hash`]).
    pub f: [u64; MAX],
    /// Out: the packet ID ([`crate::hash::packet_id`]) in the low 32 bits.
    pub pid: [u64; MAX],
    /// Out: the packet word `M` ([`tape::packet_word`]).
    pub m: [u64; MAX],
    /// Out: word 0 of the hop's tape ([`tape::hop_word`]).
    pub hop_word: [u64; MAX],
    /// Out: `mix64(M ^ key)` for the `key` given to [`BurstHashes::compute`] (a path query's
    /// value word).
    pub value_word: [u64; MAX],
    /// Whether AVX-512 is used.
    wide: bool,
}

impl Default for BurstHashes {
    fn default() -> Self {
        BurstHashes::new()
    }
}

impl BurstHashes {
    /// Empty lanes; AVX-512 is used when the CPU has it.
    pub fn new() -> BurstHashes {
        BurstHashes {
            w0: [0; MAX],
            w1: [0; MAX],
            w2: [0; MAX],
            hop: [0; MAX],
            f: [0; MAX],
            pid: [0; MAX],
            m: [0; MAX],
            hop_word: [0; MAX],
            value_word: [0; MAX],
            wide: wide_available(),
        }
    }

    /// The same, always with the plain loop (to compare the two).
    pub fn narrow() -> BurstHashes {
        BurstHashes {
            wide: false,
            ..BurstHashes::new()
        }
    }

    /// Whether this burst's hashes use AVX-512.
    pub fn is_wide(&self) -> bool {
        self.wide
    }

    /// Computes every output of the first `n` lanes (at most [`MAX`]) from their inputs,
    /// with `value_key` for the value words.
    #[inline]
    pub fn compute(&mut self, n: usize, value_key: u64) {
        let n = n.min(MAX);
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only when the CPU reports AVX-512 F and DQ.
            unsafe { wide::compute(self, n, value_key) };
            return;
        }
        self.compute_narrow(n, value_key);
    }

    fn compute_narrow(&mut self, n: usize, value_key: u64) {
        for i in 0..n {
            let f = key_hash(self.w0[i], self.w1[i]);
            let pid = packet_id(f, self.w2[i]);
            let m = tape::packet_word(pid);
            self.f[i] = f;
            self.pid[i] = u64::from(pid);
            self.m[i] = m;
            self.hop_word[i] = mix64(m ^ HOP_KEYS[(self.hop[i] & 255) as usize]);
            self.value_word[i] = mix64(m ^ value_key);
        }
    }
}

/// Whether this CPU hashes eight lanes at once.
fn wide_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod wide {
    use std::arch::x86_64::*;

    use super::{BurstHashes, MAX};
    use crate::hash::seeds;
    use crate::pint::tape;

    /// Eight lanes of [`crate::hash::mix64`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(crate) fn mix(x: __m512i) -> __m512i {
        let [x] = mix_all([x]);
        x
    }

    /// Eight lanes of [`crate::hash::mix64`] in each of `G` vectors, step by step across
    /// the vectors, so that their multiply chains run side by side.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn mix_all<const G: usize>(x: [__m512i; G]) -> [__m512i; G] {
        let c1 = _mm512_set1_epi64(0xbf58_476d_1ce4_e5b9_u64 as i64);
        let c2 = _mm512_set1_epi64(0x94d0_49bb_1331_11eb_u64 as i64);
        let x = x.map(|x| _mm512_xor_si512(x, _mm512_srli_epi64::<30>(x)));
        let x = x.map(|x| _mm512_mullo_epi64(x, c1));
        let x = x.map(|x| _mm512_xor_si512(x, _mm512_srli_epi64::<27>(x)));
        let x = x.map(|x| _mm512_mullo_epi64(x, c2));
        x.map(|x| _mm512_xor_si512(x, _mm512_srli_epi64::<31>(x)))
    }

    /// [`BurstHashes::compute`] eight lanes at a time (whole groups of eight: the lanes past
    /// `n` are computed from whatever they hold and never read), up to four groups side by
    /// side: each lane's hashes are one long chain of multiplies, and a burst has only a
    /// few groups, so the chains of a burst's groups are interleaved rather than left to
    /// the CPU to overlap.
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn compute(h: &mut BurstHashes, n: usize, value_key: u64) {
        let mut i = 0;
        while i < n && i + 8 <= MAX {
            let groups = (n - i).div_ceil(8).min((MAX - i) / 8);
            i += 8 * match groups {
                1 => compute_groups::<1>(h, i, value_key),
                2 => compute_groups::<2>(h, i, value_key),
                3 => compute_groups::<3>(h, i, value_key),
                _ => compute_groups::<4>(h, i, value_key),
            };
        }
    }

    /// The `G` groups of eight lanes from lane `i` (`i + 8G` at most [`MAX`]); returns `G`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn compute_groups<const G: usize>(h: &mut BurstHashes, i: usize, value_key: u64) -> usize {
        let set = |v: u64| _mm512_set1_epi64(v as i64);
        let (flow_key, golden) = (set(seeds::FLOW_KEY), set(0x9e37_79b9_7f4a_7c15));
        let (pid_seed, pid_mul) = (set(seeds::PACKET_ID), set(0xd6e8_feb8_6659_fd93));
        let (word_seed, hop_tape) = (set(tape::seeds::PACKET_WORD), set(tape::seeds::HOP_TAPE));
        let (low, key) = (set(0xffff_ffff), set(value_key));
        let hop_mask = set(255);
        let load = |a: &[u64; MAX]| -> [__m512i; G] {
            core::array::from_fn(|g| {
                let at = i + 8 * g;
                let a: &[u64; 8] = a[at..at + 8].try_into().expect("8 lanes");
                // SAFETY: `a` is 8 readable u64s; the load is unaligned.
                unsafe { _mm512_loadu_si512(a.as_ptr().cast()) }
            })
        };
        let (w0, w1, w2, hop) = (load(&h.w0), load(&h.w1), load(&h.w2), load(&h.hop));
        let xor = |a: [__m512i; G], b: [__m512i; G]| -> [__m512i; G] {
            core::array::from_fn(|g| _mm512_xor_si512(a[g], b[g]))
        };
        let f = mix_all(xor(
            w0.map(|w| _mm512_mullo_epi64(_mm512_xor_si512(w, flow_key), golden)),
            w1,
        ));
        let pid = mix_all(xor(
            f,
            w2.map(|w| _mm512_mullo_epi64(_mm512_xor_si512(w, pid_seed), pid_mul)),
        ))
        .map(|x| _mm512_srli_epi64::<32>(x));
        let m = mix_all(pid.map(|p| _mm512_xor_si512(_mm512_and_si512(p, low), word_seed)));
        let hop_key =
            mix_all(hop.map(|x| _mm512_xor_si512(hop_tape, _mm512_and_si512(x, hop_mask))));
        let hop_word = mix_all(xor(m, hop_key));
        let value_word = mix_all(m.map(|x| _mm512_xor_si512(x, key)));
        let store = |a: &mut [u64; MAX], v: [__m512i; G]| {
            for (g, v) in v.into_iter().enumerate() {
                let at = i + 8 * g;
                let a: &mut [u64; 8] = (&mut a[at..at + 8]).try_into().expect("8 lanes");
                // SAFETY: `a` is 8 writable u64s; the store is unaligned.
                unsafe { _mm512_storeu_si512(a.as_mut_ptr().cast(), v) }
            }
        };
        store(&mut h.f, f);
        store(&mut h.pid, pid);
        store(&mut h.m, m);
        store(&mut h.hop_word, hop_word);
        store(&mut h.value_word, value_word);
        G
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim_rng::SimRng;

    fn filled(h: &mut BurstHashes, rng: &mut SimRng) {
        for i in 0..MAX {
            h.w0[i] = rng.next_u64();
            h.w1[i] = rng.next_u64() & 0xff_ffff_ffff;
            h.w2[i] = rng.next_u64();
            h.hop[i] = 1 + rng.next_u64() % 255;
        }
    }

    /// Every lane equals the one-packet functions, wide or not, for every burst length.
    #[test]
    fn lanes_equal_the_per_packet_hashes() {
        let mut rng = SimRng::new(3);
        for wide in [false, true] {
            let mut h = if wide {
                BurstHashes::new()
            } else {
                BurstHashes::narrow()
            };
            for n in [1usize, 7, 8, 9, 17, 24, 31, 32, 40, 64] {
                filled(&mut h, &mut rng);
                let key = rng.next_u64();
                h.compute(n, key);
                for i in 0..n {
                    let f = key_hash(h.w0[i], h.w1[i]);
                    let pid = packet_id(f, h.w2[i]);
                    let m = tape::packet_word(pid);
                    assert_eq!(h.f[i], f, "lane {i} of {n}, wide {}", h.is_wide());
                    assert_eq!(h.pid[i], u64::from(pid));
                    assert_eq!(h.m[i], m);
                    assert_eq!(h.hop_word[i], tape::hop_word(m, h.hop[i] as usize, 0));
                    assert_eq!(h.value_word[i], mix64(m ^ key));
                }
            }
        }
    }
}

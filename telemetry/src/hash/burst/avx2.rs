//! [`super::BurstHashes::compute`] four lanes at a time with AVX2, for CPUs without AVX-512
//! (AMD before Zen 4, Intel client parts). AVX2 has no 64-bit multiply, so each multiply
//! by a constant is made of two 32-bit ones (`vpmuludq` for the low product, `vpmulld` for
//! both cross terms); that is still several times cheaper per lane than the plain loop,
//! whose multiplies and shifts run one packet at a time.

use std::arch::x86_64::*;

use super::{BurstHashes, MAX};
use crate::hash::seeds;
use crate::pint::tape;

/// A 64-bit constant ready for [`mul`]: itself in every 64-bit lane (`vpmuludq` reads the
/// low half), and with its halves swapped (`lo << 32 | hi`) in every 64-bit lane.
#[derive(Clone, Copy)]
pub(crate) struct Multiplier {
    lo: __m256i,
    swapped: __m256i,
}

impl Multiplier {
    /// `c` in every lane.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn new(c: u64) -> Multiplier {
        Multiplier {
            lo: _mm256_set1_epi64x(c as i64),
            swapped: _mm256_set1_epi64x(c.rotate_left(32) as i64),
        }
    }
}

/// Each lane of `a` times the constant `c`, modulo 2^64: `lo(a) lo(c) + (lo(a) hi(c) +
/// hi(a) lo(c)) 2^32` (the `hi hi` term falls off the top). The cross terms are needed only
/// modulo 2^32, so one 32-bit multiply (`vpmulld`) of `a` by `c` with its halves swapped
/// gives both, one in each half of the lane.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn mul(a: __m256i, c: Multiplier) -> __m256i {
    let low = _mm256_mul_epu32(a, c.lo);
    // Per lane: [lo(a) hi(c), hi(a) lo(c)] (low half first), each modulo 2^32.
    let cross = _mm256_mullo_epi32(a, c.swapped);
    // Their sum in the high half: the low half's term shifted up, plus the high half's.
    let high = _mm256_add_epi32(
        _mm256_slli_epi64::<32>(cross),
        _mm256_and_si256(cross, _mm256_set1_epi64x(0xffff_ffff_0000_0000_u64 as i64)),
    );
    _mm256_add_epi64(low, high)
}

/// Four lanes of [`crate::hash::mix64`].
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn mix(x: __m256i) -> __m256i {
    let [x] = mix_all([x]);
    x
}

/// Four lanes of [`crate::hash::mix64`] in each of `G` vectors, step by step across the
/// vectors, so that their multiply chains run side by side.
#[inline]
#[target_feature(enable = "avx2")]
fn mix_all<const G: usize>(x: [__m256i; G]) -> [__m256i; G] {
    let c1 = Multiplier::new(0xbf58_476d_1ce4_e5b9);
    let c2 = Multiplier::new(0x94d0_49bb_1331_11eb);
    let x = x.map(|x| _mm256_xor_si256(x, _mm256_srli_epi64::<30>(x)));
    let x = x.map(|x| mul(x, c1));
    let x = x.map(|x| _mm256_xor_si256(x, _mm256_srli_epi64::<27>(x)));
    let x = x.map(|x| mul(x, c2));
    x.map(|x| _mm256_xor_si256(x, _mm256_srli_epi64::<31>(x)))
}

/// [`BurstHashes::compute`] four lanes at a time (whole groups of four: the lanes past `n`
/// are computed from whatever they hold and never read), up to four groups side by side so
/// that their multiply chains overlap (measured: two side by side left the hash stage 10%
/// slower on a Zen 3 core). The hop keys are read from their table ([`tape::HOP_KEYS`]),
/// which is cheaper here than mixing them: a multiply costs six instructions.
#[target_feature(enable = "avx2")]
pub(super) fn compute(h: &mut BurstHashes, n: usize, value_key: u64) {
    let mut i = 0;
    while i < n && i + 4 <= MAX {
        let groups = (n - i).div_ceil(4).min((MAX - i) / 4);
        i += 4 * match groups {
            1 => compute_groups::<1>(h, i, value_key),
            2 => compute_groups::<2>(h, i, value_key),
            3 => compute_groups::<3>(h, i, value_key),
            _ => compute_groups::<4>(h, i, value_key),
        };
    }
}

/// The `G` groups of four lanes from lane `i` (`i + 4G` at most [`MAX`]); returns `G`.
#[inline]
#[target_feature(enable = "avx2")]
fn compute_groups<const G: usize>(h: &mut BurstHashes, i: usize, value_key: u64) -> usize {
    let set = |v: u64| _mm256_set1_epi64x(v as i64);
    let (flow_key, golden) = (set(seeds::FLOW_KEY), Multiplier::new(0x9e37_79b9_7f4a_7c15));
    let (pid_seed, pid_mul) = (
        set(seeds::PACKET_ID),
        Multiplier::new(0xd6e8_feb8_6659_fd93),
    );
    let word_seed = set(tape::seeds::PACKET_WORD);
    let (low, key) = (set(0xffff_ffff), set(value_key));
    let hop_mask = set(255);
    let load = |a: &[u64; MAX]| -> [__m256i; G] {
        core::array::from_fn(|g| {
            let at = i + 4 * g;
            let a: &[u64; 4] = a[at..at + 4].try_into().expect("4 lanes");
            // SAFETY: `a` is 4 readable u64s; the load is unaligned.
            unsafe { _mm256_loadu_si256(a.as_ptr().cast()) }
        })
    };
    let (w0, w1, w2, hop) = (load(&h.w0), load(&h.w1), load(&h.w2), load(&h.hop));
    let xor = |a: [__m256i; G], b: [__m256i; G]| -> [__m256i; G] {
        core::array::from_fn(|g| _mm256_xor_si256(a[g], b[g]))
    };
    let f = mix_all(xor(
        w0.map(|w| mul(_mm256_xor_si256(w, flow_key), golden)),
        w1,
    ));
    let pid = mix_all(xor(
        f,
        w2.map(|w| mul(_mm256_xor_si256(w, pid_seed), pid_mul)),
    ))
    .map(|x| _mm256_srli_epi64::<32>(x));
    let m = mix_all(pid.map(|p| _mm256_xor_si256(_mm256_and_si256(p, low), word_seed)));
    // SAFETY: every index is below 256, the table's length.
    let hop_key = hop.map(|x| unsafe {
        _mm256_i64gather_epi64::<8>(
            tape::HOP_KEYS.as_ptr().cast(),
            _mm256_and_si256(x, hop_mask),
        )
    });
    let hop_word = mix_all(xor(m, hop_key));
    let value_word = mix_all(m.map(|x| _mm256_xor_si256(x, key)));
    let store = |a: &mut [u64; MAX], v: [__m256i; G]| {
        for (g, v) in v.into_iter().enumerate() {
            let at = i + 4 * g;
            let a: &mut [u64; 4] = (&mut a[at..at + 4]).try_into().expect("4 lanes");
            // SAFETY: `a` is 4 writable u64s; the store is unaligned.
            unsafe { _mm256_storeu_si256(a.as_mut_ptr().cast(), v) }
        }
    };
    store(&mut h.f, f);
    store(&mut h.pid, pid);
    store(&mut h.m, m);
    store(&mut h.hop_word, hop_word);
    store(&mut h.value_word, value_word);
    G
}

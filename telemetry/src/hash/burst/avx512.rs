//! [`super::BurstHashes::compute`] eight lanes at a time with AVX-512 (F and DQ), whose
//! 64-bit multiply (`vpmullq`) does each lane's multiplies in one instruction.

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
    let hop_key = mix_all(hop.map(|x| _mm512_xor_si512(hop_tape, _mm512_and_si512(x, hop_mask))));
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

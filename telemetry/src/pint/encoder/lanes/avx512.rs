//! [`super::FastProgram::draw_lanes`] and [`super::FastProgram::encode_lanes`] eight lanes
//! at a time with AVX-512: the set's constants picked per lane from eight-entry tables
//! (`vpermq`), every comparison a mask.

use std::arch::x86_64::*;

use super::{DrawLanes, MAX, MAX_FAST_SETS, PreparedValues};
use crate::hash::burst::BurstHashes;
use crate::hash::burst::avx512::mix;
use crate::pint::encoder::fast::FastProgram;
use crate::pint::tape::{SAMPLE_THRESHOLDS, seeds};

#[inline]
#[target_feature(enable = "avx512f")]
fn load(a: &[u64; MAX_FAST_SETS]) -> __m512i {
    // SAFETY: `a` is 8 readable u64s; the load is unaligned.
    unsafe { _mm512_loadu_si512(a.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lane_load(a: &[u64; MAX], i: usize) -> __m512i {
    let a: &[u64; 8] = a[i..i + 8].try_into().expect("8 lanes");
    // SAFETY: `a` is 8 readable u64s; the load is unaligned.
    unsafe { _mm512_loadu_si512(a.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lane_store(a: &mut [u64; MAX], i: usize, k: __mmask8, v: __m512i) {
    let a: &mut [u64; 8] = (&mut a[i..i + 8]).try_into().expect("8 lanes");
    // SAFETY: `a` is 8 writable u64s; only the lanes of `k` are written.
    unsafe { _mm512_mask_storeu_epi64(a.as_mut_ptr().cast(), k, v) }
}

/// [`FastProgram::draw_lanes`], eight lanes at a time; with `APPLY`,
/// [`FastProgram::encode_lanes`] (only the digests are stored). The hop's first tape
/// word and the value word of `key` come from `h` rather than being hashed again.
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) fn draw<const APPLY: bool>(
    p: &FastProgram,
    h: &BurstHashes,
    key: u64,
    mask: u64,
    prepared: &PreparedValues,
    out: &mut DrawLanes,
) {
    let t = p.tables();
    let (lo, up_below) = (
        load(&prepared.0.map(|x| u64::from(x.lo))),
        load(&prepared.0.map(|x| u64::from(x.up_below))),
    );
    let (v_shift, v_mask, v_max) = (load(&t.v_shift), load(&t.v_mask), load(&t.v_max));
    let (v_is_sample, v_is_max) = (load(&t.v_is_sample), load(&t.v_is_max));
    let (v_is_min, v_is_sum) = (load(&t.v_is_min), load(&t.v_is_sum));
    let coin_mask = _mm512_set1_epi64(0xffff);
    let set = |v: u64| _mm512_set1_epi64(v as i64);
    let (one, ones, low8) = (set(1), set(u64::MAX), set(255));
    let (hop_tape, stride, value_key) = (set(seeds::HOP_TAPE), set(seeds::STRIDE), set(key));
    let ends: [__m512i; MAX_FAST_SETS - 1] = core::array::from_fn(|j| set(t.ends[j]));
    let (p_shift, p_mask, p_key) = (load(&t.p_shift), load(&t.p_mask), load(&t.p_key));
    let (p_value_shift, p_value_mask) = (load(&t.p_value_shift), load(&t.p_value_mask));
    let (layer_shift, layer_mask) = (load(&t.layer_shift), load(&t.layer_mask));
    let (tau, xor) = (load(&t.tau), load(&t.xor));
    let slices = t.slices.map(|s| s.map(|x| load(&x)));
    for g in 0..MAX / 8 {
        let k = (mask >> (8 * g)) as u8;
        if k == 0 {
            continue;
        }
        let i = 8 * g;
        let (m, hop) = (
            lane_load(&h.m, i),
            _mm512_and_si512(lane_load(&h.hop, i), low8),
        );
        let digest = lane_load(&out.digest, i);
        // The set: how many ends the choice is at or past.
        let choice = _mm512_srli_epi64::<32>(m);
        let mut s = _mm512_setzero_si512();
        // Only the real ends: the padding (2^64 - 1) is past every choice.
        for &e in &ends[..t.real_ends] {
            s = _mm512_mask_add_epi64(s, _mm512_cmple_epu64_mask(e, choice), s, one);
        }
        let pick = |table: __m512i| _mm512_permutexvar_epi64(s, table);
        // The hop's tape words and the sampling threshold of its index.
        let w0 = lane_load(&h.hop_word, i);
        let w1 = if t.second_word {
            let hop_key = mix(_mm512_xor_si512(hop_tape, hop));
            mix(_mm512_xor_si512(_mm512_xor_si512(m, hop_key), stride))
        } else {
            _mm512_setzero_si512()
        };
        // SAFETY: every index is below 256, the table's length.
        let threshold = _mm512_cvtepu32_epi64(unsafe {
            _mm512_i64gather_epi32::<4>(hop, SAMPLE_THRESHOLDS.as_ptr().cast())
        });
        let slice = |which: usize| {
            let [word, shift, width_mask] = slices[which];
            let from = _mm512_mask_blend_epi64(_mm512_cmpeq_epu64_mask(pick(word), one), w0, w1);
            _mm512_and_si512(_mm512_srlv_epi64(from, pick(shift)), pick(width_mask))
        };
        // The path query: replace (baseline) or XOR in the hash when this hop writes. Its
        // value word is the one hashed with the burst unless the set's key is another.
        let path_key = pick(p_key);
        let hashed = _mm512_cmpeq_epu64_mask(path_key, value_key) | !k;
        let value_word = lane_load(&h.value_word, i);
        let value_word = if hashed == u8::MAX {
            value_word
        } else {
            let own = mix(_mm512_xor_si512(m, path_key));
            _mm512_mask_blend_epi64(hashed, own, value_word)
        };
        let hash = _mm512_and_si512(
            _mm512_srlv_epi64(value_word, pick(p_value_shift)),
            pick(p_value_mask),
        );
        let layer = _mm512_and_si512(_mm512_srlv_epi64(m, pick(layer_shift)), pick(layer_mask));
        let baseline = _mm512_cmplt_epu64_mask(layer, pick(tau));
        let limit = _mm512_mask_blend_epi64(baseline, pick(xor), threshold);
        let writes = _mm512_cmplt_epu64_mask(slice(0), limit);
        let (shift, fmask) = (pick(p_shift), pick(p_mask));
        let field = _mm512_and_si512(_mm512_srlv_epi64(digest, shift), fmask);
        let replaced = _mm512_mask_blend_epi64(writes, field, hash);
        let xored = _mm512_xor_si512(field, _mm512_maskz_mov_epi64(writes, hash));
        let new = _mm512_mask_blend_epi64(baseline, xored, replaced);
        let digest = _mm512_or_si512(
            _mm512_andnot_si512(_mm512_sllv_epi64(fmask, shift), digest),
            _mm512_sllv_epi64(_mm512_and_si512(new, fmask), shift),
        );
        let value_writes = _mm512_cmplt_epu64_mask(slice(2), threshold);
        if APPLY {
            // The value: its code rounded by the coin, merged into its field.
            let (shift, fmask, max) = (pick(v_shift), pick(v_mask), pick(v_max));
            let field = _mm512_and_si512(_mm512_srlv_epi64(digest, shift), fmask);
            let down = pick(lo);
            let coin = _mm512_and_si512(slice(1), coin_mask);
            let up = _mm512_cmplt_epu64_mask(coin, pick(up_below));
            let code = _mm512_mask_add_epi64(down, up, down, one);
            let is_min = _mm512_test_epi64_mask(pick(v_is_min), ones);
            let merged = _mm512_mask_blend_epi64(is_min, code, _mm512_sub_epi64(max, code));
            let sampled = _mm512_mask_blend_epi64(value_writes, field, merged);
            let most = _mm512_max_epu64(field, merged);
            let sum = _mm512_min_epu64(_mm512_add_epi64(field, merged), max);
            let new = _mm512_or_si512(
                _mm512_and_si512(sampled, pick(v_is_sample)),
                _mm512_or_si512(
                    _mm512_and_si512(most, pick(v_is_max)),
                    _mm512_and_si512(sum, pick(v_is_sum)),
                ),
            );
            let digest = _mm512_or_si512(
                _mm512_andnot_si512(_mm512_sllv_epi64(fmask, shift), digest),
                _mm512_sllv_epi64(_mm512_and_si512(new, fmask), shift),
            );
            lane_store(&mut out.digest, i, k, digest);
            continue;
        }
        lane_store(&mut out.digest, i, k, digest);
        lane_store(&mut out.set, i, k, s);
        lane_store(&mut out.coin, i, k, slice(1));
        lane_store(
            &mut out.value_writes,
            i,
            k,
            _mm512_maskz_mov_epi64(value_writes, ones),
        );
    }
}

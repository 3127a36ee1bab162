//! [`super::FastProgram::draw_lanes`] and [`super::FastProgram::encode_lanes`] four lanes at
//! a time with AVX2, for plans of at most four query sets (the paper's has two). AVX2 has
//! no mask registers and no unsigned 64-bit compares: masks are all-ones lanes, and an
//! unsigned compare is a signed one with the sign bits flipped. A set's constant is picked
//! per lane by a blend (two sets) or a dword permute of the first four table entries.

use std::arch::x86_64::*;

use super::{DrawLanes, MAX, MAX_FAST_SETS, PreparedValues};
use crate::hash::burst::BurstHashes;
use crate::hash::burst::avx2::mix;
use crate::pint::encoder::fast::FastProgram;
use crate::pint::tape::{SAMPLE_THRESHOLDS, seeds};

/// Most sets a plan may have for these lanes (the first four table entries fill a vector).
pub(super) const MAX_SETS: usize = 4;

/// One per-set table, ready to be picked from: its first two entries in every lane, and its
/// first four entries in order.
#[derive(Clone, Copy)]
struct Table {
    first: __m256i,
    second: __m256i,
    four: __m256i,
}

impl Table {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(a: &[u64; MAX_FAST_SETS]) -> Table {
        let four: &[u64; 4] = a[..4].try_into().expect("4 entries");
        Table {
            first: _mm256_set1_epi64x(a[0] as i64),
            second: _mm256_set1_epi64x(a[1] as i64),
            // SAFETY: `four` is 4 readable u64s; the load is unaligned.
            four: unsafe { _mm256_loadu_si256(four.as_ptr().cast()) },
        }
    }
}

/// Which set each lane's packet is in, in the forms [`Sel::pick`] uses.
#[derive(Clone, Copy)]
struct Sel {
    /// All ones where the set is 1 (plans of two sets).
    second: __m256i,
    /// Dword indices `2s, 2s + 1` per lane (plans of three or four).
    dwords: __m256i,
}

impl Sel {
    /// Each lane's entry of `t` for a plan of `SETS` sets.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn pick<const SETS: usize>(self, t: &Table) -> __m256i {
        match SETS {
            1 => t.first,
            2 => _mm256_blendv_epi8(t.first, t.second, self.second),
            _ => _mm256_permutevar8x32_epi32(t.four, self.dwords),
        }
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn lane_load(a: &[u64; MAX], i: usize) -> __m256i {
    let a: &[u64; 4] = a[i..i + 4].try_into().expect("4 lanes");
    // SAFETY: `a` is 4 readable u64s; the load is unaligned.
    unsafe { _mm256_loadu_si256(a.as_ptr().cast()) }
}

/// Stores the lanes of `v` whose `k` lane is all ones.
#[inline]
#[target_feature(enable = "avx2")]
fn lane_store(a: &mut [u64; MAX], i: usize, k: __m256i, v: __m256i) {
    let a: &mut [u64; 4] = (&mut a[i..i + 4]).try_into().expect("4 lanes");
    // SAFETY: `a` is 4 writable u64s; only the lanes whose sign bit is set in `k` are
    // written.
    unsafe { _mm256_maskstore_epi64(a.as_mut_ptr().cast(), k, v) }
}

/// All ones in the lanes where `a < b`, unsigned.
#[inline]
#[target_feature(enable = "avx2")]
fn lt(a: __m256i, b: __m256i) -> __m256i {
    let sign = _mm256_set1_epi64x(i64::MIN);
    _mm256_cmpgt_epi64(_mm256_xor_si256(b, sign), _mm256_xor_si256(a, sign))
}

/// `if mask { yes } else { no }` per lane (`mask` lanes all ones or all zeros).
#[inline]
#[target_feature(enable = "avx2")]
fn select(mask: __m256i, yes: __m256i, no: __m256i) -> __m256i {
    _mm256_blendv_epi8(no, yes, mask)
}

/// `field` with the bits of `mask << shift` replaced by `(new & mask) << shift`.
#[inline]
#[target_feature(enable = "avx2")]
fn merge_field(word: __m256i, new: __m256i, shift: __m256i, mask: __m256i) -> __m256i {
    _mm256_or_si256(
        _mm256_andnot_si256(_mm256_sllv_epi64(mask, shift), word),
        _mm256_sllv_epi64(_mm256_and_si256(new, mask), shift),
    )
}

/// [`FastProgram::draw_lanes`] four lanes at a time, for a plan of at most [`MAX_SETS`]
/// sets; with `APPLY`, [`FastProgram::encode_lanes`] (only the digests are stored). The
/// hop's first tape word and the value word of `key` come from `h`.
#[target_feature(enable = "avx2")]
pub(super) fn draw<const APPLY: bool>(
    p: &FastProgram,
    h: &BurstHashes,
    key: u64,
    mask: u64,
    prepared: &PreparedValues,
    out: &mut DrawLanes,
) {
    match p.tables().real_ends {
        0 => draw_sets::<APPLY, 1>(p, h, key, mask, prepared, out),
        1 => draw_sets::<APPLY, 2>(p, h, key, mask, prepared, out),
        _ => draw_sets::<APPLY, 4>(p, h, key, mask, prepared, out),
    }
}

/// [`draw`] for a plan of `SETS` sets (1, 2, or 4 for three or four).
#[inline]
#[target_feature(enable = "avx2")]
fn draw_sets<const APPLY: bool, const SETS: usize>(
    p: &FastProgram,
    h: &BurstHashes,
    key: u64,
    mask: u64,
    prepared: &PreparedValues,
    out: &mut DrawLanes,
) {
    let t = p.tables();
    debug_assert!(t.real_ends < MAX_SETS && (SETS > 2 || t.real_ends < SETS));
    let tab = |a: &[u64; MAX_FAST_SETS]| Table::new(a);
    let (lo, up_below) = (
        tab(&prepared.0.map(|x| u64::from(x.lo))),
        tab(&prepared.0.map(|x| u64::from(x.up_below))),
    );
    let (v_shift, v_mask, v_max) = (tab(&t.v_shift), tab(&t.v_mask), tab(&t.v_max));
    let (v_is_sample, v_is_max) = (tab(&t.v_is_sample), tab(&t.v_is_max));
    let (v_is_min, v_is_sum) = (tab(&t.v_is_min), tab(&t.v_is_sum));
    let set = |v: u64| _mm256_set1_epi64x(v as i64);
    let (one, ones, low8, coin_mask) = (set(1), set(u64::MAX), set(255), set(0xffff));
    let (hop_tape, stride, value_key) = (set(seeds::HOP_TAPE), set(seeds::STRIDE), set(key));
    let ends: [__m256i; MAX_SETS - 1] = core::array::from_fn(|j| set(t.ends[j]));
    let (p_shift, p_mask, p_key) = (tab(&t.p_shift), tab(&t.p_mask), tab(&t.p_key));
    let (p_value_shift, p_value_mask) = (tab(&t.p_value_shift), tab(&t.p_value_mask));
    let (layer_shift, layer_mask) = (tab(&t.layer_shift), tab(&t.layer_mask));
    let (tau, xor) = (tab(&t.tau), tab(&t.xor));
    let slices = t.slices.map(|s| s.map(|x| tab(&x)));
    let bits = _mm256_set_epi64x(8, 4, 2, 1);
    let dword_odd = _mm256_set_epi32(1, 0, 1, 0, 1, 0, 1, 0);
    for g in 0..MAX / 4 {
        let k = (mask >> (4 * g)) & 15;
        if k == 0 {
            continue;
        }
        let i = 4 * g;
        let kv = _mm256_cmpeq_epi64(_mm256_and_si256(set(k), bits), bits);
        let (m, hop) = (
            lane_load(&h.m, i),
            _mm256_and_si256(lane_load(&h.hop, i), low8),
        );
        let digest = lane_load(&out.digest, i);
        // The set: how many ends the choice is at or past (only the real ends).
        let choice = _mm256_srli_epi64::<32>(m);
        let mut s = _mm256_setzero_si256();
        for &e in &ends[..t.real_ends] {
            s = _mm256_sub_epi64(s, _mm256_andnot_si256(lt(choice, e), ones));
        }
        let s2 = _mm256_slli_epi64::<1>(s);
        let sel = Sel {
            second: _mm256_cmpeq_epi64(s, one),
            dwords: _mm256_add_epi32(_mm256_or_si256(s2, _mm256_slli_epi64::<32>(s2)), dword_odd),
        };
        let pick = |table: &Table| sel.pick::<SETS>(table);
        // The hop's tape words and the sampling threshold of its index.
        let w0 = lane_load(&h.hop_word, i);
        let w1 = if t.second_word {
            let hop_key = mix(_mm256_xor_si256(hop_tape, hop));
            mix(_mm256_xor_si256(_mm256_xor_si256(m, hop_key), stride))
        } else {
            _mm256_setzero_si256()
        };
        // SAFETY: every index is below 256, the table's length.
        let threshold = _mm256_cvtepu32_epi64(unsafe {
            _mm256_i64gather_epi32::<4>(SAMPLE_THRESHOLDS.as_ptr().cast(), hop)
        });
        let slice = |which: usize| {
            let [word, shift, width_mask] = &slices[which];
            let from = select(_mm256_cmpeq_epi64(pick(word), one), w1, w0);
            _mm256_and_si256(_mm256_srlv_epi64(from, pick(shift)), pick(width_mask))
        };
        // The path query: replace (baseline) or XOR in the hash when this hop writes. Its
        // value word is the one hashed with the burst unless the set's key is another.
        let path_key = pick(&p_key);
        let hashed =
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(path_key, value_key))) as u64;
        let value_word = lane_load(&h.value_word, i);
        let value_word = if (hashed | !k) & 15 == 15 {
            value_word
        } else {
            let own = mix(_mm256_xor_si256(m, path_key));
            select(_mm256_cmpeq_epi64(path_key, value_key), value_word, own)
        };
        let hash = _mm256_and_si256(
            _mm256_srlv_epi64(value_word, pick(&p_value_shift)),
            pick(&p_value_mask),
        );
        let layer = _mm256_and_si256(_mm256_srlv_epi64(m, pick(&layer_shift)), pick(&layer_mask));
        let baseline = lt(layer, pick(&tau));
        let limit = select(baseline, threshold, pick(&xor));
        let writes = lt(slice(0), limit);
        let (shift, fmask) = (pick(&p_shift), pick(&p_mask));
        let field = _mm256_and_si256(_mm256_srlv_epi64(digest, shift), fmask);
        let replaced = select(writes, hash, field);
        let xored = _mm256_xor_si256(field, _mm256_and_si256(writes, hash));
        let new = select(baseline, replaced, xored);
        let digest = merge_field(digest, new, shift, fmask);
        let value_writes = lt(slice(2), threshold);
        if APPLY {
            // The value: its code rounded by the coin, merged into its field.
            let (shift, fmask, max) = (pick(&v_shift), pick(&v_mask), pick(&v_max));
            let field = _mm256_and_si256(_mm256_srlv_epi64(digest, shift), fmask);
            let down = pick(&lo);
            let coin = _mm256_and_si256(slice(1), coin_mask);
            let up = lt(coin, pick(&up_below));
            let code = _mm256_sub_epi64(down, up);
            let merged = select(pick(&v_is_min), _mm256_sub_epi64(max, code), code);
            let sampled = select(value_writes, merged, field);
            let most = select(lt(field, merged), merged, field);
            let total = _mm256_add_epi64(field, merged);
            let sum = select(lt(total, max), total, max);
            let new = _mm256_or_si256(
                _mm256_and_si256(sampled, pick(&v_is_sample)),
                _mm256_or_si256(
                    _mm256_and_si256(most, pick(&v_is_max)),
                    _mm256_and_si256(sum, pick(&v_is_sum)),
                ),
            );
            lane_store(
                &mut out.digest,
                i,
                kv,
                merge_field(digest, new, shift, fmask),
            );
            continue;
        }
        lane_store(&mut out.digest, i, kv, digest);
        lane_store(&mut out.set, i, kv, s);
        lane_store(&mut out.coin, i, kv, slice(1));
        lane_store(&mut out.value_writes, i, kv, value_writes);
    }
}

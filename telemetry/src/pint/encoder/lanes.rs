//! A burst's draws a lane per packet ([`DrawLanes`]), from its hashes
//! ([`crate::hash::burst::BurstHashes`]): the straight-line form's draw for eight packets at
//! once on CPUs with AVX-512, since everything in it is arithmetic on the packet's words
//! (the set's constants are picked per lane from eight-entry tables), and one packet at a
//! time elsewhere. Both give exactly [`super::SwitchPlan::draw`]'s results (a test compares
//! every lane).

use crate::hash::burst::{BurstHashes, MAX};

use super::fast::{FastProgram, MAX_FAST_SETS, PreparedValues};

/// One burst's draws, a lane per packet.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct DrawLanes {
    /// In: each packet's digest as it arrived; out: with the path query encoded.
    pub digest: [u64; MAX],
    /// Out: the query set.
    pub set: [u64; MAX],
    /// Out: the value's 16-bit rounding coin.
    pub coin: [u64; MAX],
    /// Out: all ones when a sampled value replaces its field at this hop.
    pub value_writes: [u64; MAX],
}

impl Default for DrawLanes {
    fn default() -> Self {
        DrawLanes {
            digest: [0; MAX],
            set: [0; MAX],
            coin: [0; MAX],
            value_writes: [0; MAX],
        }
    }
}

/// The straight-line form's constants as eight-entry tables, one entry per query set (sets
/// past the last repeat it), for picking per lane.
#[derive(Debug, Clone, Default)]
pub(super) struct SetTables {
    /// Set end thresholds, padded with `u64::MAX`.
    pub ends: [u64; MAX_FAST_SETS],
    /// How many of `ends` are not padding (one less than the sets), at most
    /// `MAX_FAST_SETS - 1`.
    pub real_ends: usize,
    pub p_shift: [u64; MAX_FAST_SETS],
    pub p_mask: [u64; MAX_FAST_SETS],
    pub p_key: [u64; MAX_FAST_SETS],
    pub p_value_shift: [u64; MAX_FAST_SETS],
    pub p_value_mask: [u64; MAX_FAST_SETS],
    pub layer_shift: [u64; MAX_FAST_SETS],
    pub layer_mask: [u64; MAX_FAST_SETS],
    pub tau: [u64; MAX_FAST_SETS],
    pub xor: [u64; MAX_FAST_SETS],
    /// Per slice (path sample, value coin, value sample): the hop word (0 or 1), shift and
    /// mask.
    pub slices: [[[u64; MAX_FAST_SETS]; 3]; 3],
    /// Whether any set reads hop word 1.
    pub second_word: bool,
    /// The value's field (shift and mask), its largest code, and its merge as all-ones
    /// masks (sample, max or min, min, sum), for applying eight lanes at once.
    pub v_shift: [u64; MAX_FAST_SETS],
    pub v_mask: [u64; MAX_FAST_SETS],
    pub v_max: [u64; MAX_FAST_SETS],
    pub v_is_sample: [u64; MAX_FAST_SETS],
    pub v_is_max: [u64; MAX_FAST_SETS],
    pub v_is_min: [u64; MAX_FAST_SETS],
    pub v_is_sum: [u64; MAX_FAST_SETS],
    /// Whether some set's value is compressed packet by packet (then lanes are not
    /// applied at once).
    pub per_packet: bool,
}

impl FastProgram {
    /// Draws the lanes of `mask` (bit `i`: lane `i`) of a burst whose `hashes` are computed
    /// with value key `key`; other lanes are left as they are.
    pub fn draw_lanes(&self, hashes: &BurstHashes, key: u64, mask: u64, out: &mut DrawLanes) {
        #[cfg(target_arch = "x86_64")]
        if hashes.is_wide() {
            // SAFETY: `is_wide` holds only when the CPU reports AVX-512 F and DQ.
            unsafe {
                wide::draw::<false>(self, hashes, key, mask, &PreparedValues::default(), out)
            };
            return;
        }
        self.draw_lanes_narrow(hashes, key, mask, out);
    }

    /// Draws the lanes of `mask` and applies each with the same `prepared` values (a burst
    /// leaving by one port): each lane's digest after this hop, exactly [`FastProgram::draw`]
    /// then [`FastProgram::apply`], left in `out.digest` (the draws' other lanes are not
    /// kept). False, changing nothing, when a set's value is compressed packet by packet
    /// (the queue occupancy: each packet needs its own).
    pub fn encode_lanes(
        &self,
        hashes: &BurstHashes,
        key: u64,
        mask: u64,
        prepared: &PreparedValues,
        out: &mut DrawLanes,
    ) -> bool {
        if self.tables().per_packet {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        if hashes.is_wide() {
            // SAFETY: `is_wide` holds only when the CPU reports AVX-512 F and DQ.
            unsafe { wide::draw::<true>(self, hashes, key, mask, prepared, out) };
            return true;
        }
        let mut bits = mask;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize & (MAX - 1);
            bits &= bits - 1;
            self.draw_lane(hashes, key, i, out);
            out.digest[i] = self.apply_drawn(
                out.digest[i],
                out.set[i] as usize,
                out.coin[i] as u32,
                out.value_writes[i] != 0,
                prepared,
                0,
            );
        }
        true
    }

    /// [`FastProgram::draw_lanes`] one lane at a time.
    pub fn draw_lanes_narrow(
        &self,
        hashes: &BurstHashes,
        key: u64,
        mask: u64,
        out: &mut DrawLanes,
    ) {
        let mut bits = mask;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.draw_lane(hashes, key, i, out);
        }
    }

    /// Draws lane `i` alone.
    #[inline]
    pub fn draw_lane(&self, hashes: &BurstHashes, key: u64, i: usize, out: &mut DrawLanes) {
        let i = i & (MAX - 1);
        let m = hashes.m[i];
        let value_word = if key == self.value_key() {
            hashes.value_word[i]
        } else {
            crate::hash::mix64(m ^ self.value_key())
        };
        let mut digest = out.digest[i];
        let d = self.draw_hashed(
            m,
            hashes.hop[i] as usize,
            hashes.hop_word[i],
            value_word,
            &mut digest,
        );
        out.digest[i] = digest;
        out.set[i] = u64::from(d.set());
        out.coin[i] = u64::from(d.coin());
        out.value_writes[i] = 0u64.wrapping_sub(u64::from(d.value_writes()));
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::{DrawLanes, MAX, MAX_FAST_SETS, PreparedValues};
    use crate::hash::burst::BurstHashes;
    use crate::hash::burst::wide::mix;
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
                let from =
                    _mm512_mask_blend_epi64(_mm512_cmpeq_epu64_mask(pick(word), one), w0, w1);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pint::encoder::SwitchPlan;
    use crate::sim_rng::SimRng;

    /// Lanes encoded whole (wide where the CPU allows, and one at a time) equal the draw then
    /// the apply of each lane, for random packets, hops, masks and prepared values; plans
    /// with a value compressed packet by packet decline and change nothing.
    #[test]
    fn encoded_lanes_equal_draw_then_apply() {
        use crate::pint::encoder::BurstValues;
        let mut rng = SimRng::new(23);
        for text in crate::pint::encoder::tests::STRAIGHT {
            let plan = SwitchPlan::compile(text, 9).unwrap();
            let fast = plan.fast.as_ref().expect("straight-line");
            let per_packet = text.contains("queue_occupancy");
            for _ in 0..300 {
                let (mut h, mut hn) = (BurstHashes::new(), BurstHashes::narrow());
                for i in 0..MAX {
                    h.w0[i] = rng.next_u64();
                    h.w1[i] = rng.next_u64() & 0xff_ffff_ffff;
                    h.w2[i] = rng.next_u64();
                    h.hop[i] = 1 + rng.next_u64() % 40;
                }
                (hn.w0, hn.w1, hn.w2, hn.hop) = (h.w0, h.w1, h.w2, h.hop);
                let key = fast.value_key();
                h.compute(MAX, key);
                hn.compute(MAX, key);
                let mut prepared = PreparedValues::default();
                let r = rng.next_u64();
                plan.prepare(
                    &BurstValues {
                        switch_id: 9,
                        ingress_port: 1,
                        egress_port: 2,
                        hop_latency_ns: r >> (20 + r % 40),
                        utilization: 1 + (r >> 50),
                    },
                    &mut prepared,
                );
                let mut lanes = DrawLanes::default();
                for d in lanes.digest.iter_mut() {
                    *d = rng.next_u64() >> (64 - 8 * plan.digest_bytes());
                }
                let mask = rng.next_u64() | 1;
                let mut expected = lanes.clone();
                fast.draw_lanes_narrow(&hn, key, mask, &mut expected);
                for i in (0..MAX).filter(|i| mask >> i & 1 == 1) {
                    expected.digest[i] =
                        plan.apply_lane(&expected, i, h.m[i], &prepared, 0, || unreachable!());
                }
                // Also with hashes made with another plan's key.
                let (mut h_other, mut hn_other) = (h.clone(), hn.clone());
                h_other.compute(MAX, key ^ 1);
                hn_other.compute(MAX, key ^ 1);
                for (hashes, key) in [
                    (&h, key),
                    (&hn, key),
                    (&h_other, key ^ 1),
                    (&hn_other, key ^ 1),
                ] {
                    let mut got = lanes.clone();
                    let done = plan.encode_lanes(hashes, key, mask, &prepared, &mut got);
                    assert_eq!(done, !per_packet, "{text}");
                    if done {
                        assert_eq!(got.digest, expected.digest, "wide {}", hashes.is_wide());
                    } else {
                        assert_eq!(got.digest, lanes.digest, "declined: unchanged");
                    }
                }
            }
        }
    }

    /// Every lane of a wide draw equals the one-packet draw, for random packets, hops and
    /// masks.
    #[test]
    fn lanes_equal_one_packet_draws() {
        let mut rng = SimRng::new(17);
        for text in crate::pint::encoder::tests::STRAIGHT {
            let plan = SwitchPlan::compile(text, 7).unwrap();
            let fast = plan
                .fast
                .as_ref()
                .unwrap_or_else(|| panic!("not straight-line: {:?}", plan.plan.sets));
            for _ in 0..300 {
                let mut h = BurstHashes::new();
                for i in 0..MAX {
                    h.w0[i] = rng.next_u64();
                    h.w1[i] = rng.next_u64() & 0xff_ffff_ffff;
                    h.w2[i] = rng.next_u64();
                    h.hop[i] = 1 + rng.next_u64() % 40;
                }
                h.compute(MAX, fast.value_key());
                let mut lanes = DrawLanes::default();
                for d in lanes.digest.iter_mut() {
                    *d = rng.next_u64() >> (64 - 8 * plan.digest_bytes());
                }
                let before = lanes.clone();
                let mut narrow = lanes.clone();
                let mask = rng.next_u64() | (1 << 63);
                let key = fast.value_key();
                fast.draw_lanes(&h, key, mask, &mut lanes);
                fast.draw_lanes_narrow(&h, key, mask, &mut narrow);
                // Hashes made with another plan's key: the same draws.
                let mut other = before.clone();
                fast.draw_lanes_narrow(&h, key ^ 1, mask, &mut other);
                assert_eq!(other.digest, narrow.digest);
                let mut h_other = h.clone();
                h_other.compute(MAX, key ^ 1);
                let mut other = before.clone();
                fast.draw_lanes(&h_other, key ^ 1, mask, &mut other);
                assert_eq!(other.digest, narrow.digest, "wide, another key");
                assert_eq!(other.set, narrow.set);
                assert_eq!(other.coin, narrow.coin);
                assert_eq!(other.value_writes, narrow.value_writes);
                assert_eq!(lanes.digest, narrow.digest);
                assert_eq!(lanes.set, narrow.set);
                assert_eq!(lanes.coin, narrow.coin);
                assert_eq!(lanes.value_writes, narrow.value_writes);
                // And the one-packet draw from the packet ID alone.
                for i in (0..MAX).filter(|i| mask >> i & 1 == 1) {
                    let mut digest = before.digest[i];
                    let d = plan.draw(h.pid[i] as u32, h.hop[i] as usize, &mut digest);
                    assert_eq!(lanes.digest[i], digest, "lane {i}");
                    assert_eq!(lanes.set[i], u64::from(d.set()));
                    assert_eq!(lanes.coin[i], u64::from(d.coin()));
                    assert_eq!(lanes.value_writes[i] != 0, d.value_writes());
                }
                for i in (0..MAX).filter(|i| mask >> i & 1 == 0) {
                    assert_eq!(
                        lanes.digest[i], before.digest[i],
                        "lanes outside the mask stay"
                    );
                    assert_eq!(lanes.set[i], 0);
                }
            }
        }
    }
}

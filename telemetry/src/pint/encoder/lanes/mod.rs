//! A burst's draws a lane per packet ([`DrawLanes`]), from its hashes
//! ([`crate::hash::burst::BurstHashes`]): the straight-line form's draw for several packets
//! at once, since everything in it is arithmetic on the packet's words (the set's constants
//! are picked per lane from per-set tables): eight with AVX-512, four with AVX2 (plans of
//! up to four sets), one at a time elsewhere, at the width the hashes were computed with.
//! Every width gives exactly [`super::SwitchPlan::draw`]'s results (a test compares every
//! lane).

use crate::hash::burst::{BurstHashes, MAX, Width};

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
    /// masks (sample, max or min, min, sum), for applying a vector of lanes at once.
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
        // The draw alone applies no values: none are prepared.
        #[cfg(target_arch = "x86_64")]
        let none = || PreparedValues::default();
        match self.lane_width(hashes) {
            // SAFETY: the hashes' width is AVX-512 only when the CPU reports AVX-512 F and DQ.
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => unsafe {
                avx512::draw::<false>(self, hashes, key, mask, &none(), out)
            },
            // SAFETY: the hashes' width is AVX2 only when the CPU reports AVX2.
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => unsafe { avx2::draw::<false>(self, hashes, key, mask, &none(), out) },
            _ => self.draw_lanes_narrow(hashes, key, mask, out),
        }
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
        match self.lane_width(hashes) {
            // SAFETY: the hashes' width is AVX-512 only when the CPU reports AVX-512 F and DQ.
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => {
                unsafe { avx512::draw::<true>(self, hashes, key, mask, prepared, out) };
                return true;
            }
            // SAFETY: the hashes' width is AVX2 only when the CPU reports AVX2.
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => {
                unsafe { avx2::draw::<true>(self, hashes, key, mask, prepared, out) };
                return true;
            }
            _ => {}
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

    /// The width this plan's lanes are drawn at with `hashes`: theirs, but one at a time
    /// for AVX2 when the plan has more sets than four lanes can pick from.
    #[inline]
    fn lane_width(&self, hashes: &BurstHashes) -> Width {
        match hashes.width() {
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 if self.tables().real_ends >= avx2::MAX_SETS => Width::Plain,
            w => w,
        }
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
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pint::encoder::SwitchPlan;
    use crate::sim_rng::SimRng;

    /// Lanes encoded whole (at every width this CPU has) equal the draw then the apply of
    /// each lane, for random packets, hops, masks and prepared values; plans with a value
    /// compressed packet by packet decline and change nothing.
    #[test]
    fn encoded_lanes_equal_draw_then_apply() {
        use crate::pint::encoder::BurstValues;
        let mut rng = SimRng::new(23);
        for (text, width) in plans_and_widths() {
            let plan = SwitchPlan::compile(text, 9).unwrap();
            let fast = plan.fast.as_ref().expect("straight-line");
            let per_packet = text.contains("queue_occupancy");
            for _ in 0..300 {
                let mut h = BurstHashes::with_width(width).expect("available");
                let mut hn = BurstHashes::narrow();
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
                        assert_eq!(got.digest, expected.digest, "{:?}", hashes.width());
                    } else {
                        assert_eq!(got.digest, lanes.digest, "declined: unchanged");
                    }
                }
            }
        }
    }

    /// Every straight-line test plan with every width this CPU has.
    fn plans_and_widths() -> impl Iterator<Item = (&'static str, Width)> {
        let widths: Vec<Width> = Width::ALL.into_iter().filter(|w| w.available()).collect();
        for w in Width::ALL.iter().filter(|w| !w.available()) {
            eprintln!("{w:?}: not on this CPU, not tested");
        }
        crate::pint::encoder::tests::STRAIGHT
            .into_iter()
            .flat_map(move |text| widths.clone().into_iter().map(move |w| (text, w)))
    }

    /// Every lane of a draw at every width equals the one-packet draw, for random packets,
    /// hops and masks.
    #[test]
    fn lanes_equal_one_packet_draws() {
        let mut rng = SimRng::new(17);
        for (text, width) in plans_and_widths() {
            let plan = SwitchPlan::compile(text, 7).unwrap();
            let fast = plan
                .fast
                .as_ref()
                .unwrap_or_else(|| panic!("not straight-line: {:?}", plan.plan.sets));
            for _ in 0..300 {
                let mut h = BurstHashes::with_width(width).expect("available");
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
                assert_eq!(other.digest, narrow.digest, "{width:?}, another key");
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

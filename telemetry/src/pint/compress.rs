//! Value compression with randomized rounding, so that decompressed values are unbiased,
//! in integer arithmetic only (a switch compresses one value per query per packet).
//!
//! Multiplicative (for max, min, product and latencies): an integer value `x >= 1` becomes
//! `lo = floor(log_base x)`, plus one with probability `(x - base^lo) / (base^(lo+1) -
//! base^lo)`, where `base = (1 + eps)^2`; decoding gives `base^code`, whose expectation is
//! `x`. The floor comes from a table of `ceil(base^c)` (exact for integers: `base^c <= x`
//! exactly when `ceil(base^c) <= x`), found from the position of `x`'s leading one and its
//! next five bits; the rounding compares a 16-bit coin with the fraction in 16.16 fixed
//! point. Linear (for sums): `x / unit`, rounded the same way, by one multiplication with
//! `2^32 / unit`. Codes saturate at the largest code, never wrap.

use std::sync::Arc;

/// Widest multiplicative code (its tables hold one entry per code).
pub const MAX_LOG_BITS: u32 = 16;

/// Mantissa bits that index the start table.
const INDEX_BITS: u32 = 5;

/// Multiplicative compression to `bits`-bit codes.
#[derive(Debug, Clone)]
pub struct LogCompressor {
    base: f64,
    ln_base: f64,
    max_code: u32,
    tables: Arc<LogTables>,
}

struct LogTables {
    /// `ceil(base^c)` for c in 0..=max_code + 1, saturating at u64::MAX.
    bounds: Vec<u64>,
    /// `base^c` in 48.16 fixed point (u128), for the rounding fraction.
    fixed: Vec<u128>,
    /// For each bucket `k * 32 + top five mantissa bits` of `x`, the largest code whose
    /// bound is at most the bucket's smallest value; one more entry at the end.
    start: Vec<u32>,
    /// `base^c` for c in 0..=max_code: what each code stands for (the sink decompresses
    /// every sample; `powi` per sample showed in its profile).
    values: Vec<f64>,
}

impl std::fmt::Debug for LogTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tables follow from the base and the width; printing them says nothing more.
        write!(f, "LogTables({} codes)", self.bounds.len() - 1)
    }
}

impl PartialEq for LogCompressor {
    fn eq(&self, o: &Self) -> bool {
        self.base == o.base && self.max_code == o.max_code
    }
}

impl LogCompressor {
    /// Codes of `bits` bits (1 to 16) with relative error parameter `eps` (base
    /// `(1 + eps)^2`).
    pub fn with_epsilon(eps: f64, bits: u32) -> LogCompressor {
        assert!(eps > 0.0 && (1..=MAX_LOG_BITS).contains(&bits));
        let base = (1.0 + eps) * (1.0 + eps);
        let max_code = ((1u64 << bits) - 1) as u32;
        LogCompressor {
            base,
            ln_base: base.ln(),
            max_code,
            tables: Arc::new(LogTables::build(base, max_code)),
        }
    }

    /// Codes of `bits` bits whose largest code decodes to `max_value` (the smallest base that
    /// covers values 1 to `max_value`).
    pub fn for_range(max_value: f64, bits: u32) -> LogCompressor {
        let max_code = ((1u64 << bits) - 1) as f64;
        let base = max_value.max(2.0).powf(1.0 / max_code);
        LogCompressor::with_epsilon(base.sqrt() - 1.0, bits)
    }

    /// The `eps` of this compressor.
    pub fn epsilon(&self) -> f64 {
        self.base.sqrt() - 1.0
    }

    /// The largest code.
    pub fn max_code(&self) -> u32 {
        self.max_code
    }

    /// `floor(log_base x)` for `x >= 1`, saturating at the largest code.
    #[inline(always)]
    fn floor_code(&self, x: u64) -> u32 {
        let t = &*self.tables;
        let k = 63 - x.leading_zeros();
        let frac = if k >= INDEX_BITS {
            (x >> (k - INDEX_BITS)) as u32
        } else {
            (x << (INDEX_BITS - k)) as u32
        } & ((1 << INDEX_BITS) - 1);
        let idx = ((k << INDEX_BITS) | frac) as usize;
        // The answer lies between this bucket's start and the next one's.
        let (mut lo, mut hi) = (t.start[idx], t.start[idx + 1]);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if t.bounds[mid as usize] <= x {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Compresses `x` (0 and 1 give code 0) with a 16-bit random `coin`.
    #[inline(always)]
    pub fn compress(&self, x: u64, coin: u32) -> u32 {
        if x <= 1 {
            return 0;
        }
        let t = &*self.tables;
        if x >= t.bounds[self.max_code as usize] {
            return self.max_code;
        }
        let lo = self.floor_code(x);
        let (b_lo, b_hi) = (t.fixed[lo as usize], t.fixed[lo as usize + 1]);
        // Round up iff coin < 2^16 * (x - b_lo) / (b_hi - b_lo), all in 16.16 fixed point.
        let num = (u128::from(x) << 16).saturating_sub(b_lo) << 16;
        let up = u128::from(coin & 0xffff) * (b_hi - b_lo) < num;
        lo + u32::from(up)
    }

    /// Everything about compressing `x` that does not depend on the coin: a switch compresses
    /// the same hop latency or link utilisation for every packet of a burst, so it prepares
    /// the value once and pays one compare per packet ([`Prepared::code`] gives exactly
    /// [`LogCompressor::compress`]'s code).
    #[inline]
    pub fn prepare(&self, x: u64) -> Prepared {
        if x <= 1 {
            return Prepared { lo: 0, up_below: 0 };
        }
        let t = &*self.tables;
        if x >= t.bounds[self.max_code as usize] {
            return Prepared {
                lo: self.max_code,
                up_below: 0,
            };
        }
        let lo = self.floor_code(x);
        let (b_lo, b_hi) = (t.fixed[lo as usize], t.fixed[lo as usize + 1]);
        let num = (u128::from(x) << 16).saturating_sub(b_lo) << 16;
        let step = b_hi - b_lo;
        // coin * step < num exactly when coin < ceil(num / step).
        let up_below = if step == 0 {
            if num > 0 { 1 << 16 } else { 0 }
        } else if let (Ok(n), Ok(d)) = (u64::try_from(num), u64::try_from(step)) {
            // The common case (values below 2^32): a 64-bit division, several times
            // cheaper than a 128-bit one.
            n.div_ceil(d).min(1 << 16) as u32
        } else {
            num.div_ceil(step).min(1 << 16) as u32
        };
        Prepared { lo, up_below }
    }

    /// The value a code stands for.
    #[inline]
    pub fn decompress(&self, code: u32) -> f64 {
        self.tables.values[code.min(self.max_code) as usize]
    }

    /// The value a sum of codes stands for (a product of values).
    pub fn decompress_sum(&self, code_sum: u64) -> f64 {
        (code_sum as f64 * self.ln_base).exp()
    }
}

impl LogTables {
    fn build(base: f64, max_code: u32) -> LogTables {
        let n = max_code as usize + 2;
        let mut bounds = Vec::with_capacity(n);
        let mut fixed = Vec::with_capacity(n);
        for c in 0..n {
            let v = base.powi(c as i32);
            bounds.push(if v >= 1.8e19 {
                u64::MAX
            } else {
                v.ceil() as u64
            });
            fixed.push(if v >= 2.0e33 {
                u128::MAX >> 20
            } else {
                (v * 65536.0).round() as u128
            });
        }
        // The largest code whose bound is at most `y`.
        let code_at = |y: u64| -> u32 { (bounds.partition_point(|&b| b <= y) as u32).max(1) - 1 };
        let buckets = 64usize << INDEX_BITS;
        let mut start = Vec::with_capacity(buckets + 1);
        for idx in 0..buckets {
            let k = (idx >> INDEX_BITS) as u32;
            let frac = (idx & ((1 << INDEX_BITS) - 1)) as u64;
            // The bucket's smallest value (buckets below 2^5 hold fractional edges: the
            // smallest integer in them).
            let lowest = if k >= INDEX_BITS {
                (1u64 << k) | (frac << (k - INDEX_BITS))
            } else {
                ((1u64 << INDEX_BITS) | frac).div_ceil(1 << (INDEX_BITS - k))
            };
            start.push(code_at(lowest).min(max_code));
        }
        start.push(max_code);
        // Each bucket's range ends where the next bucket's starts (monotone by construction).
        for i in (0..buckets).rev() {
            start[i] = start[i].min(start[i + 1]);
        }
        LogTables {
            bounds,
            fixed,
            start,
            values: (0..=max_code).map(|c| base.powi(c as i32)).collect(),
        }
    }
}

/// A value prepared for compression ([`LogCompressor::prepare`]): its code is `lo`, plus one
/// when the 16-bit coin is below `up_below`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prepared {
    /// The code when rounding down.
    pub lo: u32,
    /// Coins below this round up (0 to 2^16).
    pub up_below: u32,
}

impl Prepared {
    /// The code for a 16-bit random `coin`.
    #[inline(always)]
    pub fn code(&self, coin: u32) -> u32 {
        self.lo + u32::from(coin & 0xffff < self.up_below)
    }
}

/// The smallest step of a linear code.
pub const MIN_UNIT: f64 = 1.0 / 1_073_741_824.0;

/// The largest step of a linear code (2^32).
pub const MAX_UNIT: f64 = 4_294_967_296.0;

/// Linear compression to `bits`-bit codes in steps of `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearCompressor {
    /// `2^32 / unit`, rounded.
    inv_unit: u64,
    /// The step the codes are in: `2^32 / inv_unit`, `unit` as the rounding leaves it.
    step: f64,
    max_code: u32,
}

impl LinearCompressor {
    /// Codes of `bits` bits (1 to 32), each step worth `unit` ([`MIN_UNIT`] to
    /// [`MAX_UNIT`]).
    pub fn new(unit: f64, bits: u32) -> LinearCompressor {
        assert!((MIN_UNIT..=MAX_UNIT).contains(&unit) && (1..=32).contains(&bits));
        let inv_unit = (MAX_UNIT / unit).round().max(1.0) as u64;
        LinearCompressor {
            inv_unit,
            step: MAX_UNIT / inv_unit as f64,
            max_code: ((1u64 << bits) - 1) as u32,
        }
    }

    /// The largest code.
    pub fn max_code(&self) -> u32 {
        self.max_code
    }

    /// Compresses `x` with a 16-bit random `coin`.
    #[inline]
    pub fn compress(&self, x: u64, coin: u32) -> u32 {
        let q = u128::from(x) * u128::from(self.inv_unit);
        let lo = q >> 32;
        if lo >= u128::from(self.max_code) {
            return self.max_code;
        }
        let frac = ((q >> 16) & 0xffff) as u32;
        lo as u32 + u32::from(coin & 0xffff < frac)
    }

    /// The value a code (or a sum of codes) stands for: in the step the switch coded in.
    #[inline]
    pub fn decompress(&self, code: u64) -> f64 {
        code as f64 * self.step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash32;

    fn coin(i: u32) -> u32 {
        hash32(42, &[u64::from(i)]) >> 16
    }

    fn mean_decoded(c: &LogCompressor, x: u64, n: u32) -> f64 {
        (0..n)
            .map(|i| c.decompress(c.compress(x, coin(i))))
            .sum::<f64>()
            / f64::from(n)
    }

    #[test]
    fn a_code_stands_for_base_to_its_power() {
        for (eps, bits) in [(0.025, 8), (0.001, 12), (0.5, 4)] {
            let c = LogCompressor::with_epsilon(eps, bits);
            let base = (1.0 + eps) * (1.0 + eps);
            for code in 0..=c.max_code() {
                assert_eq!(c.decompress(code), base.powi(code as i32), "{eps} {code}");
            }
            // Codes above the largest stand for the largest.
            assert_eq!(c.decompress(c.max_code() + 7), c.decompress(c.max_code()));
        }
    }

    #[test]
    fn log_rounding_is_unbiased() {
        let c = LogCompressor::with_epsilon(0.025, 8);
        for x in [2u64, 7, 123, 5000, 29_999] {
            let m = mean_decoded(&c, x, 100_000);
            assert!((m - x as f64).abs() / (x as f64) < 0.002, "x {x}: mean {m}");
        }
        let coarse = LogCompressor::with_epsilon(0.42, 4);
        for x in [3u64, 17, 200] {
            let m = mean_decoded(&coarse, x, 200_000);
            assert!((m - x as f64).abs() / (x as f64) < 0.01, "x {x}: mean {m}");
        }
    }

    #[test]
    fn floor_code_matches_a_linear_search() {
        for (eps, bits) in [(0.025, 8), (0.42, 4), (0.001, 12), (0.022, 8), (3.0, 2)] {
            let c = LogCompressor::with_epsilon(eps, bits);
            let bounds = &c.tables.bounds;
            let naive = |x: u64| {
                (0..=c.max_code)
                    .rev()
                    .find(|&k| bounds[k as usize] <= x)
                    .unwrap()
            };
            let mut x = 1u64;
            while x < bounds[c.max_code as usize] {
                assert_eq!(c.floor_code(x), naive(x), "eps {eps} bits {bits} x {x}");
                x = if x < 5000 { x + 1 } else { x + x / 997 + 1 };
            }
        }
    }

    #[test]
    fn prepared_values_give_the_same_codes() {
        for (eps, bits) in [(0.025, 8), (0.42, 4), (0.001, 12), (3.0, 2), (1e-6, 8)] {
            let c = LogCompressor::with_epsilon(eps, bits);
            let mut x = 0u64;
            while x < 1 << 40 {
                let p = c.prepare(x);
                for coin in (0..=0xffffu32).step_by(97).chain([0, 1, 0xfffe, 0xffff]) {
                    assert_eq!(
                        p.code(coin),
                        c.compress(x, coin),
                        "eps {eps} x {x} coin {coin}"
                    );
                }
                // The coins that round up are exactly those below the threshold.
                if p.up_below > 0 && p.up_below < 1 << 16 {
                    assert_eq!(c.compress(x, p.up_below - 1), p.lo + 1);
                    assert_eq!(c.compress(x, p.up_below), p.lo);
                }
                x = if x < 3000 { x + 1 } else { x + x / 101 + 1 };
            }
        }
    }

    #[test]
    fn codes_bracket_the_value() {
        // The code is floor or ceil of log_base(x), never further.
        let c = LogCompressor::with_epsilon(0.022, 8);
        for i in 0..20_000u64 {
            let x = 1 + i * 3;
            let exact = (x as f64).ln() / c.ln_base;
            for r in [0, 0x8000, 0xffff] {
                let code = f64::from(c.compress(x, r));
                assert!(
                    code >= exact.floor().min(255.0) - 1e-9
                        && code <= exact.ceil().min(255.0) + 1e-9,
                    "{x}: {code} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn codes_saturate_and_bound_error() {
        let c = LogCompressor::with_epsilon(0.025, 8);
        assert_eq!(c.compress(u64::MAX, 0), 255);
        assert_eq!(c.compress(0, 0), 0);
        assert_eq!(c.compress(1, 0xffff), 0);
        for x in [2u64, 50, 1000] {
            for r in [0, 0xffff] {
                let d = c.decompress(c.compress(x, r));
                let x = x as f64;
                assert!(
                    d / x <= 1.050_625 + 1e-9 && x / d <= 1.050_625 + 1e-9,
                    "{x} -> {d}"
                );
            }
        }
        let r = LogCompressor::for_range(1e6, 8);
        assert!((r.decompress(255) - 1e6).abs() / 1e6 < 1e-9);
        assert!((LogCompressor::with_epsilon(0.025, 8).epsilon() - 0.025).abs() < 1e-12);
        let wide = LogCompressor::for_range(1e12, 16);
        assert_eq!(wide.compress(2_000_000_000_000, 0), 65_535);
        let code = wide.compress(1_000_000, 0);
        assert!((wide.decompress(code) / 1e6 - 1.0).abs() < 1e-3, "{code}");
    }

    #[test]
    fn linear_rounding_is_unbiased_and_saturates() {
        let c = LinearCompressor::new(10.0, 8);
        for x in [3u64, 47, 1234] {
            let n = 100_000u32;
            let m: f64 = (0..n)
                .map(|i| c.decompress(u64::from(c.compress(x, coin(i)))))
                .sum::<f64>()
                / f64::from(n);
            assert!((m - x as f64).abs() < 0.1, "x {x}: mean {m}");
        }
        assert_eq!(c.compress(1_000_000_000, 0), 255);
        assert_eq!(c.compress(0, 0), 0);
        assert_eq!(LinearCompressor::new(0.5, 16).compress(10, 0xffff), 20);
        // Units whose inverse rounds far from 2^32 / unit decode in the step coded in: the
        // mean of many packets' values is the value itself.
        for unit in [1e8, 1e9, 3e9, 4_294_967_296.0] {
            let c = LinearCompressor::new(unit, 16);
            let x = 123_456_789_012u64;
            let mean = (0..4096u32)
                .map(|i| c.decompress(u64::from(c.compress(x, coin(i)))))
                .sum::<f64>()
                / 4096.0;
            assert!(
                (mean / x as f64 - 1.0).abs() < 0.02,
                "unit {unit}: {mean} for {x}"
            );
        }
    }
}

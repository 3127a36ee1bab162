//! Value compression with randomized rounding, so that decompressed values are unbiased.
//!
//! Multiplicative (for max, min, product and latencies): a value `x >= 1` becomes
//! `log_base(x)` rounded up with probability `(x - base^lo) / (base^hi - base^lo)` and down
//! otherwise, where `base = (1 + eps)^2`; decoding gives `base^code`, whose expectation is
//! `x`. Linear (for sums): `x / unit` rounded the same way. Codes saturate at the largest
//! code, never wrap. The random input is a 32-bit hash (compared as an integer).

/// Multiplicative compression to `bits`-bit codes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogCompressor {
    base: f64,
    ln_base: f64,
    log2_base: f64,
    max_code: u32,
}

/// A rough log2 (error below 0.01) from the float's exponent and a quadratic in its
/// mantissa: a starting guess that [`LogCompressor::compress`] corrects exactly.
#[inline(always)]
fn rough_log2(x: f64) -> f64 {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000) - 1.0;
    exponent as f64 + m * (1.346_57 - 0.346_57 * m)
}

impl LogCompressor {
    /// Codes of `bits` bits with relative error parameter `eps` (base `(1 + eps)^2`).
    pub fn with_epsilon(eps: f64, bits: u32) -> LogCompressor {
        assert!(eps > 0.0 && (1..=32).contains(&bits));
        let base = (1.0 + eps) * (1.0 + eps);
        LogCompressor {
            base,
            ln_base: base.ln(),
            log2_base: base.log2(),
            max_code: ((1u64 << bits) - 1) as u32,
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

    /// Compresses `x` (values below 1 count as 1) with random input `r`.
    #[inline]
    pub fn compress(&self, x: f64, r: u32) -> u32 {
        if x.is_nan() || x <= 1.0 {
            return 0;
        }
        // A guess of floor(log_base x) from a cheap log2, corrected against exact powers so
        // that base^lo <= x < base^(lo + 1).
        let guess = (rough_log2(x) / self.log2_base).floor().max(0.0);
        if guess >= f64::from(self.max_code) + 1.0 {
            return self.max_code;
        }
        let mut lo = guess as i32;
        let mut lo_v = self.base.powi(lo);
        while lo > 0 && x < lo_v {
            lo -= 1;
            lo_v /= self.base;
        }
        while x >= lo_v * self.base {
            lo += 1;
            lo_v *= self.base;
        }
        if lo as u32 >= self.max_code {
            return self.max_code;
        }
        let p = (x - lo_v) / (lo_v * self.base - lo_v);
        let up = f64::from(r) < p * 4_294_967_296.0;
        lo as u32 + u32::from(up)
    }

    /// The value a code stands for.
    #[inline]
    pub fn decompress(&self, code: u32) -> f64 {
        self.base.powi(code.min(self.max_code) as i32)
    }

    /// The value a sum of codes stands for (a product of values).
    pub fn decompress_sum(&self, code_sum: u64) -> f64 {
        (code_sum as f64 * self.ln_base).exp()
    }
}

/// Linear compression to `bits`-bit codes in steps of `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearCompressor {
    unit: f64,
    max_code: u32,
}

impl LinearCompressor {
    /// Codes of `bits` bits, each step worth `unit`.
    pub fn new(unit: f64, bits: u32) -> LinearCompressor {
        assert!(unit > 0.0 && (1..=32).contains(&bits));
        LinearCompressor {
            unit,
            max_code: ((1u64 << bits) - 1) as u32,
        }
    }

    /// The largest code.
    pub fn max_code(&self) -> u32 {
        self.max_code
    }

    /// Compresses `x` (negative values count as 0) with random input `r`.
    #[inline]
    pub fn compress(&self, x: f64, r: u32) -> u32 {
        if x.is_nan() || x <= 0.0 {
            return 0;
        }
        let l = x / self.unit;
        let lo = l.floor();
        if lo >= f64::from(self.max_code) {
            return self.max_code;
        }
        let up = f64::from(r) < (l - lo) * 4_294_967_296.0;
        (lo as u32 + u32::from(up)).min(self.max_code)
    }

    /// The value a code (or a sum of codes) stands for.
    #[inline]
    pub fn decompress(&self, code: u64) -> f64 {
        code as f64 * self.unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash32;

    fn mean_decoded(c: &LogCompressor, x: f64, n: u32) -> f64 {
        (0..n)
            .map(|i| c.decompress(c.compress(x, hash32(42, &[u64::from(i)]))))
            .sum::<f64>()
            / f64::from(n)
    }

    #[test]
    fn log_rounding_is_unbiased() {
        // Fixed seeds; the mean of n decoded samples is within a few standard errors of x.
        let c = LogCompressor::with_epsilon(0.025, 8);
        for x in [1.3, 7.77, 123.4, 5000.0, 29_999.0] {
            let m = mean_decoded(&c, x, 100_000);
            assert!((m - x).abs() / x < 0.002, "x {x}: mean {m}");
        }
        let coarse = LogCompressor::with_epsilon(0.42, 4);
        for x in [3.0, 17.0, 200.0] {
            let m = mean_decoded(&coarse, x, 200_000);
            assert!((m - x).abs() / x < 0.01, "x {x}: mean {m}");
        }
    }

    #[test]
    fn rough_log2_is_close() {
        for x in [1.0, 1.5, 2.0, 3.7, 1000.0, 123_456.0, 1e12] {
            assert!((rough_log2(x) - f64::log2(x)).abs() < 0.01, "{x}");
        }
    }

    #[test]
    fn codes_bracket_the_value() {
        // The code is floor or ceil of log_base(x), never further.
        let c = LogCompressor::with_epsilon(0.022, 8);
        for i in 0..20_000u32 {
            let x = 1.0 + f64::from(i) * 3.3;
            let exact = x.ln() / c.ln_base;
            for r in [0, u32::MAX / 2, u32::MAX] {
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
        assert_eq!(c.compress(1e300, 0), 255);
        assert_eq!(c.compress(0.0, 0), 0);
        assert_eq!(c.compress(f64::NAN, 0), 0);
        for x in [2.0, 50.0, 1000.0] {
            for r in [0, u32::MAX] {
                let d = c.decompress(c.compress(x, r));
                assert!(
                    d / x <= 1.050_625 + 1e-9 && x / d <= 1.050_625 + 1e-9,
                    "{x} -> {d}"
                );
            }
        }
        let r = LogCompressor::for_range(1e6, 8);
        assert!((r.decompress(255) - 1e6).abs() / 1e6 < 1e-9);
        assert!((LogCompressor::with_epsilon(0.025, 8).epsilon() - 0.025).abs() < 1e-12);
    }

    #[test]
    fn linear_rounding_is_unbiased_and_saturates() {
        let c = LinearCompressor::new(10.0, 8);
        for x in [3.0, 47.5, 1234.0] {
            let n = 100_000u32;
            let m: f64 = (0..n)
                .map(|i| c.decompress(u64::from(c.compress(x, hash32(7, &[u64::from(i)])))))
                .sum::<f64>()
                / f64::from(n);
            assert!((m - x).abs() < 0.1, "x {x}: mean {m}");
        }
        assert_eq!(c.compress(1e9, 0), 255);
        assert_eq!(c.compress(-5.0, 0), 0);
    }
}

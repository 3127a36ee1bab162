//! A counting-table cell's check: the sum over the cell's packets of their flows'
//! fingerprints, modulo a prime.
//!
//! The check tells a cell whose packets are one known flow's alone from one that also holds
//! packets of a flow the filter hid (a false positive on its first packet left its key out).
//! A cell of flow `a` with `d` packets of a hidden flow `b` mixed in reads as `a`'s own with
//! `d` more packets only when `d * (fp_b - fp_a)` is 0 modulo the check's modulus. Modulo a
//! prime that takes equal fingerprints (1 in 65,520) or `d` a multiple of the prime; modulo
//! 2^16 (a wrapping sum) any `d` with a factor 2^j left only `16 - j` bits to tell them
//! apart (a hidden flow of 4096 packets passed one time in 16).

/// The check's modulus: the largest prime below 2^16, so a check fits the cell's 16 bits.
pub const MODULUS: u16 = 65_521;

/// The fingerprint a flow gets from its 16 hash bits: 1 ..= MODULUS - 1 (never 0, which would
/// make the flow's packets invisible to the check), spread evenly over that range.
#[inline(always)]
pub fn fingerprint(bits: u16) -> u16 {
    (1 + ((u32::from(bits) * u32::from(MODULUS - 1)) >> 16)) as u16
}

/// What `packets` packets (a count, or a difference of counts) of a flow with fingerprint
/// `fp` add to a check.
#[inline(always)]
pub fn times(fp: u16, packets: i64) -> u16 {
    let p = packets.rem_euclid(i64::from(MODULUS)) as u64;
    (p * u64::from(fp) % u64::from(MODULUS)) as u16
}

/// The sum of two checks.
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    let m = u32::from(MODULUS);
    (if s >= m { s - m } else { s }) as u16
}

/// `a` less `b`, as checks.
#[inline(always)]
pub fn sub(a: u16, b: u16) -> u16 {
    let m = u32::from(MODULUS);
    let d = u32::from(a) + m - u32::from(b);
    (if d >= m { d - m } else { d }) as u16
}

/// Whether a cell whose packets and check are these holds the packets of the flow of
/// fingerprint `fp` and nothing else.
#[inline(always)]
pub fn fits(check: u16, packets: i64, fp: u16) -> bool {
    check == times(fp, packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modulus_is_prime() {
        let m = u32::from(MODULUS);
        assert!((2..=255u32).all(|d| m % d != 0));
        assert!((MODULUS..=u16::MAX).skip(1).all(|n| {
            let n = u32::from(n);
            (2..=255u32).any(|d| n % d == 0)
        }));
    }

    #[test]
    fn fingerprints_are_never_zero_and_cover_the_range() {
        assert_eq!(fingerprint(0), 1);
        assert_eq!(fingerprint(u16::MAX), MODULUS - 1);
        assert!((0..=u16::MAX).all(|b| (1..MODULUS).contains(&fingerprint(b))));
        let distinct: std::collections::HashSet<u16> = (0..=u16::MAX).map(fingerprint).collect();
        assert_eq!(distinct.len(), usize::from(MODULUS - 1));
    }

    #[test]
    fn sums_and_differences_are_those_modulo_the_prime() {
        let m = i64::from(MODULUS);
        for (a, b) in [
            (0, 0),
            (1, MODULUS - 1),
            (MODULUS - 1, MODULUS - 1),
            (40_000, 30_000),
        ] {
            assert_eq!(i64::from(add(a, b)), (i64::from(a) + i64::from(b)) % m);
            assert_eq!(
                i64::from(sub(a, b)),
                (i64::from(a) - i64::from(b)).rem_euclid(m)
            );
            assert_eq!(add(sub(a, b), b), a);
        }
        assert_eq!(times(7, -1), MODULUS - 7);
        assert_eq!(add(times(7, 5), times(7, -5)), 0);
        assert_eq!(times(3, i64::from(MODULUS)), 0);
    }

    /// Packets of another flow mixed into a flow's cell never pass for the flow's own, for
    /// any count below the modulus, even a power of two (a wrapping 16-bit sum took 4096
    /// packets of a fingerprint 16 apart as the flow's own).
    #[test]
    fn another_flows_packets_never_pass_for_a_flows_own() {
        let counts = (0..16).map(|j| 1i64 << j).chain([3, 1000, 4095, 65_520]);
        for d in counts {
            for bits in (0..=u16::MAX).step_by(97) {
                let (fa, fb) = (fingerprint(bits), fingerprint(bits.wrapping_add(1040)));
                assert_ne!(fa, fb);
                for own in [1i64, 2, 4096] {
                    let mixed = add(times(fa, own), times(fb, d));
                    assert!(!fits(mixed, own + d, fa), "d {d} fa {fa} fb {fb}");
                }
            }
        }
    }
}

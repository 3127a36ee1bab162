//! The lowest mode of a window's delays: a Gaussian kernel density estimate with Silverman's
//! bandwidth, `h = 0.79 IQR n^(-1/5)`, walked from the smallest delay upward to its first
//! local maximum (the mode's peak: the window's baseline) and on to the next local minimum
//! (the mode's end). The grid is half a bandwidth apart, so no mode falls between two
//! points, and each point sums only the samples within three bandwidths, the kernel read
//! from a table: the cost is linear in the window's samples (once they are sorted).

/// Kernel evaluations cut off at this many bandwidths (the Gaussian is below 1.2% of its
/// peak there: no effect on where modes are).
const REACH: f64 = 3.0;
/// Steps per bandwidth of the kernel's table.
const TABLE_STEPS: f64 = 1024.0;

/// `exp(-z^2 / 2)` for z from 0 to [`REACH`] in steps of 1/[`TABLE_STEPS`]: the kernel read
/// from a table (an `exp` per sample and grid point was most of detection's time).
fn kernel_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=(REACH * TABLE_STEPS) as usize + 1)
            .map(|i| {
                let z = i as f64 / TABLE_STEPS;
                (-z * z / 2.0).exp() as f32
            })
            .collect()
    })
}

/// The lowest mode of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LowestMode {
    /// Where the density peaks, ms (the baseline).
    pub peak_ms: f64,
    /// Where the mode ends (the first local minimum above the peak), ms.
    pub end_ms: f64,
    /// Share of the samples at or below the mode's end.
    pub mass: f64,
    /// Delay range of those samples, ms.
    pub width_ms: f64,
}

/// Silverman's bandwidth for `n` samples with inter-quartile range `iqr`.
pub fn bandwidth(iqr: f64, n: usize) -> f64 {
    0.79 * iqr * (n as f64).powf(-0.2)
}

/// The lowest mode of `sorted` (ascending delays, ms); None when the bandwidth is zero (an
/// inter-quartile range of zero: the window is skipped for delay).
pub fn lowest_mode(sorted: &[f64]) -> Option<LowestMode> {
    let n = sorted.len();
    if n < 4 {
        return None;
    }
    let q1 = sorted[n / 4];
    let q3 = sorted[(3 * n) / 4];
    let h = bandwidth(q3 - q1, n);
    if h <= 0.0 || !h.is_finite() {
        return None;
    }
    let (lo_d, hi_d) = (sorted[0], sorted[n - 1]);
    let step = h / 2.0;
    if lo_d + step == lo_d || hi_d + step == hi_d {
        // Delays so large that a step of the walk is below their resolution (the walk
        // would never move): the window is skipped for delay.
        return None;
    }
    let reach = REACH * h;
    let table = kernel_table();
    let scale = TABLE_STEPS / h;
    // Samples within reach of x: sorted[a..b].
    let (mut a, mut b) = (0usize, 0usize);
    let mut density = |x: f64| -> f64 {
        while a < n && sorted[a] < x - reach {
            a += 1;
        }
        while b < n && sorted[b] <= x + reach {
            b += 1;
        }
        sorted[a..b]
            .iter()
            .map(|&d| {
                let i = ((x - d).abs() * scale) as usize;
                f64::from(table.get(i).copied().unwrap_or(0.0))
            })
            .sum()
    };
    // Left of the smallest delay the density only rises, and right of the largest it only
    // falls: the walk starts one step left of the smallest (on the same grid as from three
    // bandwidths left), and once past the largest the answer is known.
    let mut x = lo_d - step;
    let mut prev = density(x);
    let mut rising = false;
    let mut peak: Option<f64> = None;
    let end = loop {
        x += step;
        if x - step >= hi_d {
            // Falling from here on: the peak, if not found yet, is the previous point.
            if peak.is_none() {
                peak = Some(x - step);
            }
            break hi_d;
        }
        let f = density(x);
        match peak {
            None => {
                if f > prev {
                    rising = true;
                } else if rising && f < prev {
                    peak = Some(x - step);
                }
            }
            Some(_) => {
                // Past the peak, no sample within reach: the density is at its floor until
                // the next samples, and no sample lies between here and there, so the mode
                // ends here (walking the gap, on a grid of a tiny bandwidth, could take
                // billions of steps).
                if f > prev || f == 0.0 {
                    break if f == 0.0 { x } else { x - step };
                }
            }
        }
        prev = f;
    };
    let peak = peak.unwrap_or(end);
    let inside = sorted.partition_point(|&d| d <= end).max(1);
    Some(LowestMode {
        peak_ms: peak,
        end_ms: end,
        mass: inside as f64 / n as f64,
        width_ms: sorted[inside - 1] - lo_d,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<f64>) -> Vec<f64> {
        v.sort_by(f64::total_cmp);
        v
    }

    #[test]
    fn one_mode_holds_everything() {
        // 50 delays around 10 ms, 0.2 ms of noise.
        let v = sorted(
            (0..50)
                .map(|i| 10.0 + 0.2 * ((i * 37 % 50) as f64 / 50.0))
                .collect(),
        );
        let m = lowest_mode(&v).unwrap();
        assert!((m.peak_ms - 10.1).abs() < 0.1, "{m:?}");
        assert_eq!(m.mass, 1.0);
        assert!(m.width_ms < 0.25);
    }

    #[test]
    fn two_modes_the_lower_is_found() {
        // 20 samples near 10 ms, 30 near 40 ms.
        let mut v: Vec<f64> = (0..20).map(|i| 10.0 + 0.05 * f64::from(i % 5)).collect();
        v.extend((0..30).map(|i| 40.0 + 0.5 * f64::from(i % 7)));
        let m = lowest_mode(&sorted(v)).unwrap();
        assert!((m.peak_ms - 10.1).abs() < 0.5, "{m:?}");
        assert!((m.mass - 0.4).abs() < 1e-9, "{m:?}");
        assert!(m.width_ms < 0.3);
        assert!(m.end_ms > 10.2 && m.end_ms < 40.0);
    }

    /// Delays a picosecond apart (a bandwidth of about 10^-8 ms) and one 100 s later: the
    /// mode ends where the density falls to nothing, not after walking the gap on that
    /// grid (10^13 steps: the sink stalled).
    #[test]
    fn a_tiny_bandwidth_does_not_walk_a_wide_gap() {
        let mut v: Vec<f64> = (0..100).map(|i| 10.0 + f64::from(i) * 1e-9).collect();
        v.push(100_000.0);
        let m = lowest_mode(&v).unwrap();
        assert!((m.mass - 100.0 / 101.0).abs() < 1e-9, "{m:?}");
        assert!(m.width_ms < 1e-6, "{m:?}");
        assert!(m.end_ms < 100_000.0, "{m:?}");
    }

    #[test]
    fn no_spread_no_estimate() {
        assert!(lowest_mode(&[5.0; 20]).is_none());
        assert!(lowest_mode(&[1.0, 2.0]).is_none());
    }
}

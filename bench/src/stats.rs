//! Small statistics helpers for benchmark samples.

/// Median of the samples (0 when empty).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Mean of the samples (0 when empty).
pub fn mean(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        0.0
    } else {
        samples.iter().sum::<f64>() / samples.len() as f64
    }
}

/// The `q`-quantile (0 to 1) by the nearest-rank method (0 when empty).
pub fn percentile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// The samples after dropping the first `warmup` (all of them if too few remain).
pub fn steady(samples: &[f64], warmup: usize) -> &[f64] {
    if samples.len() > warmup {
        &samples[warmup..]
    } else {
        samples
    }
}

/// A forwarder's per-second rates past its start: its leading zeros left out (not
/// forwarding yet, or a first statistics block with no block before it to rate against,
/// as testpmd prints), or its first second when it has none (a second it started in).
/// Empty when nothing is left: no steady rate to report.
pub fn forwarding(samples: &[f64]) -> &[f64] {
    match samples.iter().position(|&r| r > 0.0) {
        Some(0) => &samples[1..],
        Some(started) => &samples[started..],
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(steady(&[1.0, 2.0, 3.0], 1), &[2.0, 3.0]);
        assert_eq!(steady(&[1.0], 1), &[1.0]);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn forwarding_rates_leave_out_the_start() {
        assert_eq!(forwarding(&[0.0, 0.0, 9.0, 10.0]), &[9.0, 10.0]);
        assert_eq!(forwarding(&[5.0, 9.0]), &[9.0]);
        assert_eq!(forwarding(&[0.0, 5.0]), &[5.0]);
        assert!(forwarding(&[5.0]).is_empty());
        assert!(forwarding(&[0.0, 0.0]).is_empty());
        assert!(forwarding(&[]).is_empty());
    }
}

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

/// The samples after dropping the first `warmup` (all of them if too few remain).
pub fn steady(samples: &[f64], warmup: usize) -> &[f64] {
    if samples.len() > warmup {
        &samples[warmup..]
    } else {
        samples
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
    }
}

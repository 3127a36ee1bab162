//! Small value types of the configuration: IPv4 prefixes, capacities, port roles, idle mode.

use serde::{Deserialize, Serialize};

pub use pipeline::PortRole;
pub use telemetry::wire::prefix::Ipv4Prefix;

/// What a worker does when its queues are empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleMode {
    /// Spin on the queues (lowest latency, one full core per worker).
    #[default]
    Poll,
    /// Sleep briefly after a run of empty polls (for labs where switches share cores).
    Sleep,
}

/// The highest line rate taken: 1 Pbit/s.
pub const MAX_CAPACITY_BPS: u64 = 1_000_000_000_000_000;

/// A capacity in bit/s written as an integer or a string with a K/M/G/T suffix (powers
/// of 1000), e.g. `"10G"` or `"2.5G"`.
pub fn parse_capacity(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("bps")
        .or_else(|| t.strip_suffix("bit/s"))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1e3,
                'M' => 1e6,
                'G' => 1e9,
                'T' => 1e12,
                _ => {
                    return Err(format!(
                        "`{s}` has an unknown unit `{c}` (use K, M, G or T)"
                    ));
                }
            };
            (&t[..i], m)
        }
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a capacity (e.g. 10G, 100M, 25000000000)"))?;
    let bits = v * mult;
    if !(1.0..=MAX_CAPACITY_BPS as f64).contains(&bits) {
        return Err(format!("`{s}` is out of range (1 bit/s to 1 Pbit/s)"));
    }
    Ok(bits.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities() {
        assert_eq!(parse_capacity("10G"), Ok(10_000_000_000));
        assert_eq!(parse_capacity("2.5G"), Ok(2_500_000_000));
        assert_eq!(parse_capacity("100M"), Ok(100_000_000));
        assert_eq!(parse_capacity("25000"), Ok(25_000));
        assert_eq!(parse_capacity("40Gbps"), Ok(40_000_000_000));
        assert!(parse_capacity("10X").is_err());
        assert!(parse_capacity("fast").is_err());
        assert!(parse_capacity("0").is_err());
    }
}

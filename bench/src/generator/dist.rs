//! The distributions a traffic spec draws from: flow popularity, flow sizes (the published
//! web-search and Hadoop CDFs the PINT and HPCC evaluations use), and packet sizes.

use std::fmt;
use std::str::FromStr;

use telemetry::sim_rng::SimRng;

/// Flow sizes in bytes against cumulative percent: web search in a Microsoft data center
/// (Alizadeh et al., DCTCP, SIGCOMM 2010), as used by the HPCC and PINT evaluations.
const WEB_SEARCH: &[(f64, f64)] = &[
    (0.0, 0.0),
    (10_000.0, 15.0),
    (20_000.0, 20.0),
    (30_000.0, 30.0),
    (50_000.0, 40.0),
    (80_000.0, 53.0),
    (200_000.0, 60.0),
    (1_000_000.0, 70.0),
    (2_000_000.0, 80.0),
    (5_000_000.0, 90.0),
    (10_000_000.0, 97.0),
    (30_000_000.0, 100.0),
];

/// Flow sizes in bytes against cumulative percent: Hadoop at Facebook (Roy et al., SIGCOMM
/// 2015), as used by the HPCC and PINT evaluations.
const HADOOP: &[(f64, f64)] = &[
    (0.0, 0.0),
    (100.0, 1.0),
    (200.0, 2.0),
    (300.0, 5.0),
    (350.0, 15.0),
    (400.0, 20.0),
    (500.0, 30.0),
    (600.0, 40.0),
    (700.0, 50.0),
    (1_000.0, 60.0),
    (2_000.0, 67.0),
    (7_000.0, 70.0),
    (30_000.0, 72.0),
    (50_000.0, 82.0),
    (80_000.0, 87.0),
    (120_000.0, 90.0),
    (300_000.0, 95.0),
    (1_000_000.0, 97.5),
    (2_000_000.0, 99.0),
    (10_000_000.0, 100.0),
];

/// How many bytes a flow carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowSizes {
    /// Every flow this many bytes.
    Fixed(u64),
    /// The web-search distribution.
    WebSearch,
    /// The Hadoop distribution.
    Hadoop,
}

impl FlowSizes {
    fn cdf(self) -> Option<&'static [(f64, f64)]> {
        match self {
            FlowSizes::Fixed(_) => None,
            FlowSizes::WebSearch => Some(WEB_SEARCH),
            FlowSizes::Hadoop => Some(HADOOP),
        }
    }

    /// A flow size (at least one byte): inverse of the CDF, linear between its points.
    pub fn sample(self, rng: &mut SimRng) -> u64 {
        self.quantile(rng.unit())
    }

    /// The flow size at `q` (0 to 1) of the distribution (at least one byte).
    pub fn quantile(self, q: f64) -> u64 {
        let Some(cdf) = self.cdf() else {
            let FlowSizes::Fixed(b) = self else {
                unreachable!()
            };
            return b.max(1);
        };
        let u = 100.0 * q;
        let i = cdf.partition_point(|&(_, p)| p < u).clamp(1, cdf.len() - 1);
        let ((x0, p0), (x1, p1)) = (cdf[i - 1], cdf[i]);
        let x = if p1 > p0 {
            x0 + (x1 - x0) * (u - p0) / (p1 - p0)
        } else {
            x1
        };
        (x.round() as u64).max(1)
    }

    /// Mean flow size in bytes (of the piecewise-linear CDF).
    pub fn mean(self) -> f64 {
        match self.cdf() {
            None => match self {
                FlowSizes::Fixed(b) => b.max(1) as f64,
                _ => unreachable!(),
            },
            Some(cdf) => cdf
                .windows(2)
                .map(|w| (w[1].1 - w[0].1) / 100.0 * (w[0].0 + w[1].0) / 2.0)
                .sum(),
        }
    }
}

impl FromStr for FlowSizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "web-search" | "websearch" => Ok(FlowSizes::WebSearch),
            "hadoop" => Ok(FlowSizes::Hadoop),
            _ => s
                .strip_prefix("fixed:")
                .and_then(|b| b.parse::<u64>().ok())
                .filter(|&b| b > 0)
                .map(FlowSizes::Fixed)
                .ok_or_else(|| {
                    format!("flow sizes `{s}`: expected web-search, hadoop or fixed:BYTES (> 0)")
                }),
        }
    }
}

impl fmt::Display for FlowSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowSizes::Fixed(b) => write!(f, "fixed:{b}"),
            FlowSizes::WebSearch => f.write_str("web-search"),
            FlowSizes::Hadoop => f.write_str("hadoop"),
        }
    }
}

/// Which flow of the pool a new flow (or, without flow sizes, a packet) belongs to.
#[derive(Debug, Clone, PartialEq)]
pub enum Popularity {
    /// Every flow equally likely.
    Uniform,
    /// Flow `i` (from 0) with probability proportional to `1 / (i + 1)^s`.
    Zipf(f64),
}

impl FromStr for Popularity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "uniform" {
            return Ok(Popularity::Uniform);
        }
        s.strip_prefix("zipf:")
            .and_then(|x| x.parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(Popularity::Zipf)
            .ok_or_else(|| format!("popularity `{s}`: expected uniform or zipf:S (S > 0)"))
    }
}

/// Draws flow indices by popularity.
#[derive(Debug, Clone)]
pub struct FlowPicker {
    flows: u32,
    /// Cumulative weights for Zipf (empty for uniform).
    cumulative: Vec<f64>,
}

impl FlowPicker {
    /// A picker over `flows` flows.
    pub fn new(flows: u32, popularity: &Popularity) -> FlowPicker {
        let cumulative = match popularity {
            Popularity::Uniform => Vec::new(),
            Popularity::Zipf(s) => {
                let mut acc = 0.0;
                (0..flows)
                    .map(|i| {
                        acc += 1.0 / f64::from(i + 1).powf(*s);
                        acc
                    })
                    .collect()
            }
        };
        FlowPicker {
            flows: flows.max(1),
            cumulative,
        }
    }

    /// A flow index.
    pub fn pick(&self, rng: &mut SimRng) -> u32 {
        match self.cumulative.last() {
            None => rng.below(u64::from(self.flows)) as u32,
            Some(&total) => {
                let u = rng.unit() * total;
                (self.cumulative.partition_point(|&c| c <= u) as u32).min(self.flows - 1)
            }
        }
    }
}

/// Frame sizes (Ethernet frame without FCS, so 60 is the minimum, 64 on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketSizes {
    /// Every frame this size.
    Fixed(u16),
    /// Simple IMIX: 7 : 4 : 1 frames of 60, 590 and 1514 bytes (64, 594, 1518 on the wire).
    Imix,
}

impl PacketSizes {
    /// Smallest frame a packet may be.
    pub const MIN: u16 = 60;
    /// Largest frame (1500-byte IP MTU).
    pub const MAX: u16 = 1514;

    /// A frame size.
    pub fn sample(self, rng: &mut SimRng) -> u16 {
        match self {
            PacketSizes::Fixed(n) => n,
            PacketSizes::Imix => match rng.below(12) {
                0..=6 => 60,
                7..=10 => 590,
                _ => 1514,
            },
        }
    }

    /// The largest frame.
    pub fn max(self) -> u16 {
        match self {
            PacketSizes::Fixed(n) => n,
            PacketSizes::Imix => 1514,
        }
    }

    /// Mean frame size.
    pub fn mean(self) -> f64 {
        self.mean_of(f64::from)
    }

    /// Mean payload bytes a frame carries after `header` bytes of headers (at least one, as
    /// a flow's packets carry).
    pub fn mean_payload(self, header: f64) -> f64 {
        self.mean_of(|n| (f64::from(n) - header).max(1.0))
    }

    /// The mean of `f` over the sizes, weighted as they are drawn.
    fn mean_of(self, f: impl Fn(u16) -> f64) -> f64 {
        match self {
            PacketSizes::Fixed(n) => f(n),
            PacketSizes::Imix => (7.0 * f(60) + 4.0 * f(590) + f(1514)) / 12.0,
        }
    }
}

impl FromStr for PacketSizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "imix" {
            return Ok(PacketSizes::Imix);
        }
        s.parse::<u16>()
            .ok()
            .filter(|n| (PacketSizes::MIN..=PacketSizes::MAX).contains(n))
            .map(PacketSizes::Fixed)
            .ok_or_else(|| {
                format!(
                    "packet size `{s}`: expected imix or a frame size from {} to {} bytes (no FCS)",
                    PacketSizes::MIN,
                    PacketSizes::MAX
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_sizes_follow_their_cdf() {
        let mut rng = SimRng::new(1);
        let n = 200_000;
        let small = (0..n)
            .filter(|_| FlowSizes::Hadoop.sample(&mut rng) <= 700)
            .count() as f64
            / f64::from(n);
        assert!(
            (small - 0.50).abs() < 0.01,
            "Hadoop P(size <= 700) = {small}"
        );
        let big = (0..n)
            .filter(|_| FlowSizes::WebSearch.sample(&mut rng) > 1_000_000)
            .count() as f64
            / f64::from(n);
        assert!(
            (big - 0.30).abs() < 0.01,
            "web search P(size > 1 MB) = {big}"
        );
        let mean: f64 = (0..n)
            .map(|_| FlowSizes::WebSearch.sample(&mut rng) as f64)
            .sum::<f64>()
            / f64::from(n);
        let want = FlowSizes::WebSearch.mean();
        assert!((mean / want - 1.0).abs() < 0.03, "mean {mean} vs {want}");
    }

    #[test]
    fn zipf_favours_the_first_flows() {
        let p = FlowPicker::new(1000, &Popularity::Zipf(1.0));
        let mut rng = SimRng::new(2);
        let n = 100_000;
        let first = (0..n).filter(|_| p.pick(&mut rng) == 0).count() as f64 / f64::from(n);
        // 1 / H(1000) = 0.1336
        assert!((first - 0.1336).abs() < 0.006, "{first}");
        let u = FlowPicker::new(10, &Popularity::Uniform);
        assert!((0..1000).all(|_| u.pick(&mut rng) < 10));
    }

    #[test]
    fn parsing_says_what_is_wrong() {
        assert_eq!(
            "fixed:1500".parse::<FlowSizes>(),
            Ok(FlowSizes::Fixed(1500))
        );
        assert!(
            "fixed:0"
                .parse::<FlowSizes>()
                .unwrap_err()
                .contains("fixed:BYTES")
        );
        assert_eq!("zipf:1.2".parse::<Popularity>(), Ok(Popularity::Zipf(1.2)));
        assert!("zipf:-1".parse::<Popularity>().is_err());
        assert_eq!("imix".parse::<PacketSizes>(), Ok(PacketSizes::Imix));
        assert!(
            "59".parse::<PacketSizes>()
                .unwrap_err()
                .contains("60 to 1514")
        );
    }
}

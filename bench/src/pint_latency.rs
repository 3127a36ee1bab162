//! `pint-bench pint-latency`: how well PINT's dynamic per-flow aggregation estimates per-hop
//! latency quantiles. Each packet carries one hop's latency (reservoir sampling), compressed
//! to `b` bits with randomized rounding; the sink keeps either every sample or a KLL sketch
//! per hop in a budget of `sketch_items` items per hop, sized as the sink sizes them (to
//! hold up to [`SIZED_FOR_SAMPLES`] samples: a small budget gets the smallest KLL parameter). The error of the median and the 99th percentile,
//! relative to the exact quantiles of all latencies the hop saw for the flow, is averaged over
//! hops and runs, for growing packet counts.

use serde::Serialize;
use telemetry::hash::hash32;
use telemetry::pint::coding::PathCoding;
use telemetry::pint::compress::LogCompressor;
use telemetry::pint::recording::{HopSketches, SIZED_FOR_SAMPLES};
use telemetry::sim_rng::SimRng;

use crate::stats::percentile;

/// Options.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    /// Hops on the path.
    pub hops: usize,
    /// Runs per point.
    pub runs: u32,
    /// Packet counts.
    pub packets: Vec<u64>,
    /// Items per hop the sketches keep (about).
    pub sketch_items: u32,
    /// Seed.
    pub seed: u64,
}

/// Errors at one packet count for one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorPoint {
    /// Mean relative error of the median.
    pub median: f64,
    /// Mean relative error of the 99th percentile.
    pub p99: f64,
}

/// One row: a packet count and the errors of each configuration.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// Packets of the flow.
    pub packets: u64,
    /// b = 4, every sample kept.
    pub b4: ErrorPoint,
    /// b = 4, KLL sketches.
    pub b4_sketch: ErrorPoint,
    /// b = 8, every sample kept.
    pub b8: ErrorPoint,
    /// b = 8, KLL sketches.
    pub b8_sketch: ErrorPoint,
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyResult {
    /// Hops.
    pub hops: usize,
    /// Runs per point.
    pub runs: u32,
    /// Sketch items per hop.
    pub sketch_items: u32,
    /// The KLL parameter the sketches get from that budget (both compressions' codes take
    /// one byte).
    pub kll_k: u16,
    /// eps of the 4-bit and 8-bit compression.
    pub eps: (f64, f64),
    /// The latency model.
    pub model: String,
    /// Rows.
    pub rows: Vec<LatencyRow>,
}

/// Hop `h`'s latency model: lognormal with median `1000 h` ns and sigma 0.5.
fn latency(h: usize, rng: &mut SimRng) -> f64 {
    1000.0 * h as f64 * (0.5 * rng.normal()).exp()
}

fn one(
    opts: &LatencyOptions,
    c: &LogCompressor,
    sketch: bool,
    z: u64,
    rng: &mut SimRng,
) -> ErrorPoint {
    let k = opts.hops;
    let sampling = PathCoding::new(32, 1, 1.0, &[]);
    let (mut med, mut p99) = (0.0, 0.0);
    for _ in 0..opts.runs {
        let mut truth: Vec<Vec<f64>> = vec![Vec::with_capacity(z as usize); k];
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); k];
        let mut sk = sketches(opts, c);
        for _ in 0..z {
            let pid = rng.next_u32();
            let lat: Vec<f64> = (1..=k).map(|h| latency(h, rng)).collect();
            for (t, &l) in truth.iter_mut().zip(&lat) {
                t.push(l);
            }
            let w = sampling.writer(0, pid, k);
            let code = c.compress(
                lat[w - 1].round() as u64,
                hash32(7, &[u64::from(pid)]) >> 16,
            );
            if sketch {
                sk.add(w, code);
            } else {
                samples[w - 1].push(c.decompress(code));
            }
        }
        for h in 1..=k {
            let (tm, tp) = (
                percentile(&truth[h - 1], 0.5),
                percentile(&truth[h - 1], 0.99),
            );
            let (em, ep) = if sketch {
                (sk.quantile(h, 0.5), sk.quantile(h, 0.99))
            } else if samples[h - 1].is_empty() {
                (None, None)
            } else {
                (
                    Some(percentile(&samples[h - 1], 0.5)),
                    Some(percentile(&samples[h - 1], 0.99)),
                )
            };
            // No sample for the hop counts as a 100% error.
            med += em.map_or(1.0, |e| ((e - tm) / tm).abs());
            p99 += ep.map_or(1.0, |e| ((e - tp) / tp).abs());
        }
    }
    let n = f64::from(opts.runs) * k as f64;
    ErrorPoint {
        median: med / n,
        p99: p99 / n,
    }
}

/// The sketches of one flow: `sketch_items` per hop, at the bytes one of this compression's
/// codes takes.
fn sketches(opts: &LatencyOptions, c: &LogCompressor) -> HopSketches {
    let item_bytes = HopSketches::new(1, c.clone(), 0).item_bytes();
    let k = opts.hops;
    HopSketches::new(k, c.clone(), opts.sketch_items * item_bytes * k as u32)
}

/// Runs the experiment.
pub fn run(opts: &LatencyOptions) -> LatencyResult {
    let c4 = LogCompressor::with_epsilon(0.42, 4);
    let c8 = LogCompressor::with_epsilon(0.022, 8);
    let mut rng = SimRng::new(opts.seed);
    let rows = opts
        .packets
        .iter()
        .map(|&z| LatencyRow {
            packets: z,
            b4: one(opts, &c4, false, z, &mut rng),
            b4_sketch: one(opts, &c4, true, z, &mut rng),
            b8: one(opts, &c8, false, z, &mut rng),
            b8_sketch: one(opts, &c8, true, z, &mut rng),
        })
        .collect();
    LatencyResult {
        hops: opts.hops,
        runs: opts.runs,
        sketch_items: opts.sketch_items,
        kll_k: sketches(opts, &c8).kll_k(),
        eps: (c4.epsilon(), c8.epsilon()),
        model: "hop h: lognormal latency, median 1000*h ns, sigma 0.5".into(),
        rows,
    }
}

/// Prints the table.
pub fn print_table(r: &LatencyResult) {
    println!(
        "per-hop latency quantiles, {} hops, {} runs per point; {}; b=4 eps {:.3}, b=8 eps {:.3}; sketches in {} items per hop, sized for up to {} samples: KLL k = {}",
        r.hops, r.runs, r.model, r.eps.0, r.eps.1, r.sketch_items, SIZED_FOR_SAMPLES, r.kll_k
    );
    println!("relative error (mean over hops and runs): median / p99");
    println!(
        "{:>8} | {:>15} | {:>15} | {:>15} | {:>15}",
        "packets", "b=4", "b=4 + KLL", "b=8", "b=8 + KLL"
    );
    let cell = |e: &ErrorPoint| format!("{:6.1}% / {:5.1}%", 100.0 * e.median, 100.0 * e.p99);
    for row in &r.rows {
        println!(
            "{:>8} | {} | {} | {} | {}",
            row.packets,
            cell(&row.b4),
            cell(&row.b4_sketch),
            cell(&row.b8),
            cell(&row.b8_sketch)
        );
    }
}

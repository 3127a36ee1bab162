//! `pint-bench pint-hpcc`: the error and bias of PINT's utilization encoding. One egress port
//! of a 100 Gbit/s link carries Poisson traffic at a given load through a FIFO queue; HPCC's
//! estimator runs on every transmitted packet, with the bytes queued behind the packet when
//! it starts to leave (packets that arrived while it waited), and the value PINT carries
//! (`max(1, ceil(512 U))`, `b` bits, randomized multiplicative rounding) is decoded and
//! compared with the exact estimate `U` itself (so the error includes the 1/512 quantisation).
//! A second experiment takes the per-packet maximum over the hops of a path with different
//! loads.

use serde::Serialize;
use telemetry::hash::hash32;
use telemetry::pint::compress::LogCompressor;
use telemetry::pint::hpcc::HpccEstimator;
use telemetry::pint::plan::{HopInput, UTILIZATION_SCALE};
use telemetry::sim_rng::SimRng;

use crate::stats::percentile;

/// Options.
#[derive(Debug, Clone)]
pub struct HpccOptions {
    /// Link capacity, bit/s.
    pub capacity_bps: u64,
    /// Base RTT (HPCC's T), ns.
    pub rtt_ns: f64,
    /// Offered loads.
    pub loads: Vec<f64>,
    /// Packets per load.
    pub packets: u64,
    /// Code widths.
    pub bits: Vec<u32>,
    /// Hops for the path-maximum experiment.
    pub hops: usize,
    /// Seed.
    pub seed: u64,
}

/// Error statistics of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct HpccRow {
    /// Offered load (or the largest load on the path).
    pub load: f64,
    /// Code width.
    pub bits: u32,
    /// eps of the compression.
    pub eps: f64,
    /// Share of packets that left with bytes queued behind them (one port).
    pub queued_share: f64,
    /// Mean bytes queued behind a departing packet (one port).
    pub mean_queue_bytes: f64,
    /// Mean of the exact estimate.
    pub true_mean: f64,
    /// Mean of the decoded values.
    pub decoded_mean: f64,
    /// decoded_mean / true_mean - 1.
    pub bias: f64,
    /// Mean relative error per packet.
    pub mean_rel_error: f64,
    /// 99th percentile of the relative error per packet.
    pub p99_rel_error: f64,
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct HpccResult {
    /// One port, per load and width.
    pub single: Vec<HpccRow>,
    /// Maximum over a path's hops, per width.
    pub path_max: Vec<HpccRow>,
    /// Hops of the path experiment.
    pub hops: usize,
}

/// One port's packets in the order they leave: HPCC's exact estimate at each departure,
/// and the bytes that were queued behind the packet then.
struct PortTrace {
    utilization: Vec<f64>,
    queued: Vec<f64>,
}

/// Utilization estimates of one port over `n` packets at `load` (Poisson arrivals, packet
/// sizes uniform in 64..1500 bytes, FIFO queue). A packet starts to leave when the link is
/// free and it has arrived; the queue behind it is every later packet that has arrived by
/// then.
fn port_trace(opts: &HpccOptions, load: f64, n: u64, rng: &mut SimRng) -> PortTrace {
    let bytes_per_ns = opts.capacity_bps as f64 / 8e9;
    let mean_size = (64.0 + 1500.0) / 2.0;
    let mean_gap = mean_size / (bytes_per_ns * load);
    let n = n as usize;
    let mut arrival = Vec::with_capacity(n);
    let mut size = Vec::with_capacity(n);
    let mut now = 0.0f64;
    for _ in 0..n {
        now += rng.exponential(mean_gap);
        arrival.push(now);
        size.push(64.0 + rng.below(1437) as f64);
    }
    // Bytes of packets 0..i, for the queue behind a packet in one subtraction.
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for s in &size {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + s);
    }
    let mut est = HpccEstimator::new(opts.capacity_bps, opts.rtt_ns);
    let mut free_at = 0.0f64;
    let mut arrived = 0usize; // packets that have arrived by the current departure
    let mut out = PortTrace {
        utilization: Vec::with_capacity(n),
        queued: Vec::with_capacity(n),
    };
    for i in 0..n {
        let start = free_at.max(arrival[i]);
        free_at = start + size[i] / bytes_per_ns;
        while arrived < n && arrival[arrived] <= start {
            arrived += 1;
        }
        let queued = if arrived > i + 1 {
            prefix[arrived] - prefix[i + 1]
        } else {
            0.0
        };
        out.queued.push(queued);
        out.utilization
            .push(est.on_transmit(start as u64, queued, size[i] as u32));
    }
    out
}

fn stats(load: f64, bits: u32, c: &LogCompressor, truth: &[f64], decoded: &[f64]) -> HpccRow {
    let tm = truth.iter().sum::<f64>() / truth.len() as f64;
    let dm = decoded.iter().sum::<f64>() / decoded.len() as f64;
    let rel: Vec<f64> = truth
        .iter()
        .zip(decoded)
        .map(|(t, d)| ((d - t) / t.max(1.0 / UTILIZATION_SCALE)).abs())
        .collect();
    HpccRow {
        load,
        bits,
        eps: c.epsilon(),
        queued_share: 0.0,
        mean_queue_bytes: 0.0,
        true_mean: tm,
        decoded_mean: dm,
        bias: dm / tm - 1.0,
        mean_rel_error: rel.iter().sum::<f64>() / rel.len() as f64,
        p99_rel_error: percentile(&rel, 0.99),
    }
}

fn compressor(bits: u32) -> LogCompressor {
    // 8 bits: the paper's eps = 0.025; other widths cover utilization up to 4.
    if bits == 8 {
        LogCompressor::with_epsilon(0.025, 8)
    } else {
        LogCompressor::for_range(4.0 * UTILIZATION_SCALE, bits)
    }
}

fn code(c: &LogCompressor, u: f64, r: u32) -> u32 {
    c.compress(HopInput::utilization_value(u), r >> 16)
}

/// Runs the experiment.
pub fn run(opts: &HpccOptions) -> HpccResult {
    let mut rng = SimRng::new(opts.seed);
    let mut single = Vec::new();
    for &load in &opts.loads {
        let trace = port_trace(opts, load, opts.packets, &mut rng);
        let truth = &trace.utilization;
        let queued = trace.queued.iter().filter(|q| **q > 0.0).count() as f64 / truth.len() as f64;
        let mean_queue = trace.queued.iter().sum::<f64>() / truth.len() as f64;
        for &bits in &opts.bits {
            let c = compressor(bits);
            let decoded: Vec<f64> = truth
                .iter()
                .enumerate()
                .map(|(i, &u)| {
                    c.decompress(code(&c, u, hash32(3, &[i as u64]))) / UTILIZATION_SCALE
                })
                .collect();
            let mut row = stats(load, bits, &c, truth, &decoded);
            row.queued_share = queued;
            row.mean_queue_bytes = mean_queue;
            single.push(row);
        }
    }
    // Path maximum: hop loads spread from 0.3 to the top load.
    let mut path_max = Vec::new();
    let top = opts.loads.iter().copied().fold(0.0, f64::max);
    let loads: Vec<f64> = (0..opts.hops)
        .map(|h| 0.3 + (top - 0.3) * h as f64 / (opts.hops.max(2) - 1) as f64)
        .collect();
    let traces: Vec<Vec<f64>> = loads
        .iter()
        .map(|&l| port_trace(opts, l, opts.packets, &mut rng).utilization)
        .collect();
    let truth: Vec<f64> = (0..opts.packets as usize)
        .map(|i| traces.iter().map(|t| t[i]).fold(0.0, f64::max))
        .collect();
    for &bits in &opts.bits {
        let c = compressor(bits);
        let decoded: Vec<f64> = (0..opts.packets as usize)
            .map(|i| {
                let m = traces
                    .iter()
                    .enumerate()
                    .map(|(h, t)| code(&c, t[i], hash32(5, &[i as u64, h as u64])))
                    .max()
                    .unwrap_or(0);
                c.decompress(m) / UTILIZATION_SCALE
            })
            .collect();
        path_max.push(stats(top, bits, &c, &truth, &decoded));
    }
    HpccResult {
        single,
        path_max,
        hops: opts.hops,
    }
}

/// Prints the tables.
pub fn print_table(r: &HpccResult) {
    let header = || {
        println!(
            "{:>6} {:>5} {:>7} {:>10} {:>10} {:>8} {:>10} {:>10}",
            "load", "bits", "eps", "true U", "decoded U", "bias", "mean err", "p99 err"
        )
    };
    let line = |x: &HpccRow| {
        println!(
            "{:>6.2} {:>5} {:>7.4} {:>10.4} {:>10.4} {:>7.2}% {:>9.2}% {:>9.2}%",
            x.load,
            x.bits,
            x.eps,
            x.true_mean,
            x.decoded_mean,
            100.0 * x.bias,
            100.0 * x.mean_rel_error,
            100.0 * x.p99_rel_error
        )
    };
    println!("HPCC utilization on one port (100 Gbit/s, Poisson arrivals, 64-1500 B packets):");
    header();
    r.single.iter().for_each(line);
    let mut seen = Vec::new();
    for x in &r.single {
        if !seen.contains(&x.load.to_bits()) {
            seen.push(x.load.to_bits());
            println!(
                "load {:.2}: {:.1}% of packets left with a queue behind them, {:.0} bytes on average",
                x.load,
                100.0 * x.queued_share,
                x.mean_queue_bytes
            );
        }
    }
    println!(
        "per-packet maximum over {} hops (loads from 0.3 to the top load):",
        r.hops
    );
    header();
    r.path_max.iter().for_each(line);
}

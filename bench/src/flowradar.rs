//! `pint-bench flowradar`: FlowRadar on a K = 8 fat tree (80 switches, 128 hosts, ECMP).
//! Memory is provisioned for a number of flows per switch; traffic is scaled to a load (flows
//! per switch over provisioned flows), with optional loss on chosen links. For each load it
//! reports the share of (switch, flow) pairs decoded by SingleDecode and by network-wide
//! decoding, whether every switch decoded completely, and the decode times. `--sweep` instead
//! measures how often one flowset decodes completely against cells per flow.

use std::time::Instant;

use serde::Serialize;
use telemetry::flowradar::SingleDecoder;
use telemetry::flowradar::analysis::link_losses;
use telemetry::flowradar::flowset::{FlowSet, FlowSetConfig};
use telemetry::flowradar::key::FlowKey;
use telemetry::flowradar::network::network_decode;
use telemetry::flowradar::sim::{SimConfig, simulate};
use telemetry::sim_rng::SimRng;

/// Options of the network experiment.
#[derive(Debug, Clone)]
pub struct FlowRadarOptions {
    /// Fat-tree arity.
    pub k: u32,
    /// Flows per switch the memory is sized for.
    pub provisioned: u32,
    /// Cells per provisioned flow.
    pub cells_per_flow: f64,
    /// Sub-tables.
    pub hashes: u8,
    /// Loads to run (average flows per switch / provisioned).
    pub loads: Vec<f64>,
    /// Drop rate on the lossy links.
    pub loss_rate: f64,
    /// Lossy links as node pairs.
    pub lossy_links: Vec<(u32, u32)>,
    /// Seed.
    pub seed: u64,
}

/// One load's results.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    /// Load.
    pub load: f64,
    /// Flows in the epoch.
    pub flows: u32,
    /// Mean and largest flows per switch.
    pub flows_per_switch: (f64, usize),
    /// Share of (switch, flow) pairs SingleDecode found.
    pub single_share: f64,
    /// Share network-wide decoding found.
    pub network_share: f64,
    /// Switches SingleDecode decoded completely.
    pub single_complete: usize,
    /// Switches whose flows network-wide decoding recovered completely.
    pub network_keys_complete: usize,
    /// Switches whose flows and counters network-wide decoding recovered completely.
    pub network_complete: usize,
    /// Switches.
    pub switches: usize,
    /// SingleDecode time for all switches, ms.
    pub single_ms: f64,
    /// FlowDecode time, ms.
    pub flow_decode_ms: f64,
    /// CounterDecode time, ms.
    pub counter_decode_ms: f64,
    /// Packets lost in the network (truth) and found by the per-link analysis.
    pub lost: (u64, u64),
    /// Filter false positives undone during FlowDecode.
    pub undone: usize,
    /// (switch, flow) pairs reported wrongly: a flow that did not pass the switch, or
    /// counters that differ from what the switch counted. Should always be zero.
    pub wrong: usize,
    /// (switch, flow) pairs that passed but network-wide decoding did not list (expected
    /// where a switch is not complete).
    pub missing: usize,
    /// Of those, pairs at switches that said all their keys were known. Should always be
    /// zero.
    pub missing_at_complete: usize,
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct FlowRadarResult {
    /// Switches.
    pub switches: usize,
    /// Provisioned flows per switch.
    pub provisioned: u32,
    /// Cells per provisioned flow.
    pub cells_per_flow: f64,
    /// Memory per switch, bytes (filter and table).
    pub memory_per_switch: usize,
    /// Rows.
    pub rows: Vec<LoadRow>,
    /// Largest load at which SingleDecode decoded every switch completely.
    pub single_max_load: Option<f64>,
    /// Largest load at which network-wide decoding recovered every switch's flows.
    pub network_keys_max_load: Option<f64>,
    /// Largest load at which network-wide decoding recovered every switch's flows and counters.
    pub network_max_load: Option<f64>,
}

/// Runs the network experiment.
pub fn run(opts: &FlowRadarOptions) -> FlowRadarResult {
    let mut rows = Vec::new();
    let mut memory = 0;
    // Average path length in switches for uniform host pairs in a fat tree: about 4.6.
    let switches = (5 * opts.k * opts.k / 4) as f64;
    for &load in &opts.loads {
        let flows = (load * f64::from(opts.provisioned) * switches / 4.6).round() as u32;
        let cfg = SimConfig {
            k: opts.k,
            flows,
            provisioned_flows: Some(opts.provisioned),
            cells_per_flow: opts.cells_per_flow,
            hashes: opts.hashes,
            filter_bits_per_flow: telemetry::flowradar::flowset::DEFAULT_FILTER_BITS,
            max_packets: 20,
            lossy_links: opts
                .lossy_links
                .iter()
                .map(|l| (*l, opts.loss_rate))
                .collect(),
            seed: opts.seed ^ (load * 1000.0) as u64,
        };
        let epoch = simulate(&cfg);
        memory = epoch.flowsets[0].memory_bytes();
        let per = epoch.flows_per_switch();
        let total: usize = per.iter().sum();
        let refs: Vec<&FlowSet> = epoch.flowsets.iter().collect();
        let r = network_decode(&refs);
        let single_pairs = r.single_pairs();
        let losses = link_losses(&r, &epoch.paths);
        let wrong = r
            .switches
            .iter()
            .zip(&epoch.truth)
            .map(|(sw, truth)| {
                sw.flows
                    .iter()
                    .filter(|f| match truth.get(&f.key) {
                        None => true,
                        Some(&(p, b)) => {
                            f.packets.is_some_and(|x| x != p) || f.bytes.is_some_and(|x| x != b)
                        }
                    })
                    .count()
            })
            .sum();
        let (mut missing, mut missing_at_complete) = (0, 0);
        for (sw, truth) in r.switches.iter().zip(&epoch.truth) {
            let listed = sw
                .flows
                .iter()
                .filter(|f| truth.contains_key(&f.key))
                .count();
            let m = truth.len() - listed;
            missing += m;
            if sw.keys_complete {
                missing_at_complete += m;
            }
        }
        rows.push(LoadRow {
            load,
            flows,
            flows_per_switch: (
                total as f64 / per.len() as f64,
                per.iter().copied().max().unwrap_or(0),
            ),
            single_share: single_pairs as f64 / total.max(1) as f64,
            network_share: r.network_pairs() as f64 / total.max(1) as f64,
            single_complete: r.single.iter().filter(|s| s.complete).count(),
            network_keys_complete: r.switches.iter().filter(|s| s.keys_complete).count(),
            network_complete: r
                .switches
                .iter()
                .filter(|s| s.keys_complete && s.counters_complete)
                .count(),
            switches: per.len(),
            single_ms: r.single_time.as_secs_f64() * 1e3,
            flow_decode_ms: r.flow_decode_time.as_secs_f64() * 1e3,
            counter_decode_ms: r.counter_decode_time.as_secs_f64() * 1e3,
            lost: (
                epoch.lost.values().sum(),
                losses.iter().map(|l| l.packets_lost).sum(),
            ),
            undone: r.undone_removals,
            wrong,
            missing,
            missing_at_complete,
        });
    }
    let max_load = |f: &dyn Fn(&LoadRow) -> bool| {
        rows.iter()
            .filter(|r| f(r))
            .map(|r| r.load)
            .fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.max(l))))
    };
    FlowRadarResult {
        switches: switches as usize,
        provisioned: opts.provisioned,
        cells_per_flow: opts.cells_per_flow,
        memory_per_switch: memory,
        single_max_load: max_load(&|r: &LoadRow| r.single_complete == r.switches),
        network_keys_max_load: max_load(&|r: &LoadRow| r.network_keys_complete == r.switches),
        network_max_load: max_load(&|r: &LoadRow| r.network_complete == r.switches),
        rows,
    }
}

/// Prints the network experiment.
pub fn print_table(r: &FlowRadarResult) {
    println!(
        "FlowRadar, fat tree of {} switches; memory per switch for {} flows at {} cells per flow: {:.2} MB",
        r.switches,
        r.provisioned,
        r.cells_per_flow,
        r.memory_per_switch as f64 / 1e6
    );
    println!(
        "{:>5} {:>9} {:>13} | {:>8} {:>8} | {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>13} {:>6} {:>5} {:>8}",
        "load",
        "flows",
        "per switch",
        "single",
        "network",
        "single ok",
        "net ok",
        "single ms",
        "flow ms",
        "count ms",
        "lost/found",
        "undone",
        "wrong",
        "missing"
    );
    for x in &r.rows {
        println!(
            "{:>5.2} {:>9} {:>7.0}/{:<5} | {:>7.2}% {:>7.2}% | {:>5}/{:<3} {:>5}/{:<3} {:>5}/{:<3} | {:>9.1} {:>9.1} {:>9.1} | {:>6}/{:<6} {:>6} {:>5} {:>8}",
            x.load,
            x.flows,
            x.flows_per_switch.0,
            x.flows_per_switch.1,
            100.0 * x.single_share,
            100.0 * x.network_share,
            x.single_complete,
            x.switches,
            x.network_keys_complete,
            x.switches,
            x.network_complete,
            x.switches,
            x.single_ms,
            x.flow_decode_ms,
            x.counter_decode_ms,
            x.lost.0,
            x.lost.1,
            x.undone,
            x.wrong,
            if x.missing_at_complete > 0 {
                format!("{}!{}", x.missing, x.missing_at_complete)
            } else {
                x.missing.to_string()
            }
        );
    }
    let gain = |n: Option<f64>| match (r.single_max_load, n) {
        (Some(s), Some(n)) => format!(
            "{n:.2} ({:+.1}% flows with the same memory)",
            100.0 * (n / s - 1.0)
        ),
        (_, Some(n)) => format!("{n:.2}"),
        _ => "none of those run".into(),
    };
    println!(
        "every switch decodes completely: SingleDecode up to load {}; network-wide, flows up to load {}; flows and counters up to load {}",
        r.single_max_load
            .map_or("none of those run".into(), |l| format!("{l:.2}")),
        gain(r.network_keys_max_load),
        gain(r.network_max_load)
    );
}

/// Options of the decode-success sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Flows in the flowset.
    pub flows: u32,
    /// Sub-tables.
    pub hashes: u8,
    /// Cells-per-flow values.
    pub cells_per_flow: Vec<f64>,
    /// Seeds per value.
    pub seeds: u32,
}

/// One point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// Cells per flow.
    pub cells_per_flow: f64,
    /// Share of seeds that decoded completely.
    pub success: f64,
    /// Mean share of flows decoded.
    pub decoded_share: f64,
    /// Mean SingleDecode time, ms.
    pub decode_ms: f64,
}

/// A flow with random addresses and source port to port 443 over `protocol`, drawn from
/// `rng` (the benchmarks' synthetic flows).
pub fn random_key(rng: &mut SimRng, protocol: u8) -> FlowKey {
    FlowKey {
        src: rng.next_u32(),
        dst: rng.next_u32(),
        src_port: rng.next_u32() as u16,
        dst_port: 443,
        protocol,
    }
}

/// Runs the sweep: one flowset of `flows` flows per seed, decoded alone.
pub fn sweep(opts: &SweepOptions) -> Vec<SweepRow> {
    // One decoder for every flowset, as a collector keeps it: buffers are reused.
    let mut decoder = SingleDecoder::default();
    opts.cells_per_flow
        .iter()
        .map(|&cpf| {
            let (mut ok, mut share, mut ms) = (0, 0.0, 0.0);
            for seed in 0..opts.seeds {
                let mut fs = FlowSet::new(&FlowSetConfig {
                    expected_flows: opts.flows,
                    cells_per_flow: cpf,
                    hashes: opts.hashes,
                    filter_bits_per_flow: telemetry::flowradar::flowset::DEFAULT_FILTER_BITS,
                    seed: u64::from(seed) * 7919 + 1,
                });
                let mut rng = SimRng::new(u64::from(seed));
                for _ in 0..opts.flows {
                    fs.update(&random_key(&mut rng, 6), 100);
                }
                let t = Instant::now();
                let r = decoder.decode(&fs);
                ms += t.elapsed().as_secs_f64() * 1e3;
                ok += u32::from(r.complete);
                share += r.flows.len() as f64 / fs.flows().max(1) as f64;
            }
            let n = f64::from(opts.seeds);
            SweepRow {
                cells_per_flow: cpf,
                success: f64::from(ok) / n,
                decoded_share: share / n,
                decode_ms: ms / n,
            }
        })
        .collect()
}

/// Prints the sweep.
pub fn print_sweep(opts: &SweepOptions, rows: &[SweepRow]) {
    println!(
        "SingleDecode of one flowset of {} flows, k = {}, {} seeds per point",
        opts.flows, opts.hashes, opts.seeds
    );
    println!(
        "{:>14} {:>16} {:>16} {:>12}",
        "cells/flow", "complete decode", "flows decoded", "decode ms"
    );
    for r in rows {
        println!(
            "{:>14.3} {:>15.1}% {:>15.2}% {:>12.2}",
            r.cells_per_flow,
            100.0 * r.success,
            100.0 * r.decoded_share,
            r.decode_ms
        );
    }
}

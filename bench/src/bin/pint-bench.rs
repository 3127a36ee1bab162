//! `pint-bench`: benchmarks and reproductions of the PINT switch.

use std::process::ExitCode;

/// The allocator `pint-sink` runs with, so that the sink benchmark measures what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bench::forward::{self, ForwardOptions};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "pint-bench",
    version,
    allow_negative_numbers = true,
    about = "Benchmarks and paper reproductions for the PINT switch"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Forwarding rate of pint-switch against dpdk-testpmd on the same devices, one core each.
    #[command(allow_negative_numbers = true)]
    Forward {
        /// Seconds each forwarder runs, 3 or more (the first second is warm-up and not
        /// counted).
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Flows in the generated capture.
        #[arg(long, default_value_t = 10_000)]
        flows: u32,
        /// testpmd forwarding mode used as the reference.
        #[arg(long, default_value = "5tswap")]
        reference: String,
        /// Rounds (switch, then reference, alternating); the best of each is reported.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Use hugepages (they must be set up) for both forwarders.
        #[arg(long)]
        hugepages: bool,
        /// The switch's telemetry variants, each run beside the same reference.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "off,transit,edge-ingress,edge-egress"
        )]
        variants: Vec<forward::Variant>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Every variant side by side: dpdk-testpmd (io, 5tswap) and pint-switch on a replayed
    /// capture; dpdk-testpmd txonly and pint-gen into net_null and over memif into a testpmd
    /// sink; pint-gen sending and receiving through dpdk-testpmd 5tswap and pint-switch over
    /// memif (loop).
    /// Each with its ratio to its topology's reference, measured in the same run.
    #[command(allow_negative_numbers = true)]
    Throughput {
        /// Seconds each variant runs per round, 3 or more (the first second is warm-up).
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Flows in the traffic.
        #[arg(long, default_value_t = 10_000)]
        flows: u32,
        /// Rounds (all variants in turn); the best round of each is reported.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Use hugepages (they must be set up) in the capture topology.
        #[arg(long)]
        hugepages: bool,
        /// Topologies to run: capture (a replayed capture through the forwarders), null (the
        /// generators into a port that takes everything), memif (the generators into a
        /// sink), loop (pint-gen through the devices under test and back).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "capture,null,memif,loop"
        )]
        topologies: Vec<bench::throughput::Topology>,
        /// In the loop topology, also search each device's zero-loss rate (RFC 2544 style),
        /// with trials of this many seconds (given alone: 1 s).
        #[arg(long, num_args = 0..=1, default_missing_value = "1")]
        zero_loss: Option<f64>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// PINT path tracing: packets needed to decode a path, per path length.
    #[command(allow_negative_numbers = true)]
    PintPath {
        /// `line:N` (one path, end to end, of N switches), `fattree:K`, or a topology file
        /// (Topology Zoo GraphML or GML, TOML adjacency).
        #[arg(long, default_value = "line:25")]
        topology: String,
        /// baseline, interleaved, ppm, ams2-m5 or ams2-m6.
        #[arg(long, default_value = "interleaved")]
        scheme: bench::pint_path::PathScheme,
        /// Bits per instance (PINT).
        #[arg(long, default_value_t = 8)]
        bits: u32,
        /// Independent instances (PINT), e.g. 2 for 2 x (b = 8).
        #[arg(long, default_value_t = 1)]
        instances: u32,
        /// Path-length bound d for the XOR probability (default: line length; 5 for fat trees; 10 otherwise).
        #[arg(long)]
        d: Option<u32>,
        /// Decode without the topology, with ideal full-width values (the coding scheme alone).
        #[arg(long)]
        no_topology: bool,
        /// The sink also knows the first hop.
        #[arg(long)]
        first_hop_known: bool,
        /// Runs per path.
        #[arg(long, default_value_t = 1000)]
        runs: u32,
        /// Paths per path length, 1 or more.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        paths: u32,
        /// Only these path lengths (comma-separated).
        #[arg(long, value_delimiter = ',')]
        lengths: Vec<usize>,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Give up on a run after this many packets.
        #[arg(long, default_value_t = 100_000)]
        max_packets: u64,
        /// Paths flows take: shortest paths, or random simple paths of each length that are
        /// not shortest (walk).
        #[arg(long, value_enum, default_value = "shortest")]
        routes: bench::pint_path::Routes,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// PINT per-hop latency quantiles: error vs packets, b = 4 and 8, with and without sketches.
    #[command(allow_negative_numbers = true)]
    PintLatency {
        /// Hops on the path.
        #[arg(long, default_value_t = 5)]
        hops: usize,
        /// Runs per point.
        #[arg(long, default_value_t = 50)]
        runs: u32,
        /// Packet counts (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "10,20,50,100,200,500,1000,2000,5000,10000"
        )]
        packets: Vec<u64>,
        /// Items per hop the KLL sketches keep (about).
        #[arg(long, default_value_t = 100)]
        sketch_items: u32,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// PINT HPCC utilization encoding: error and bias.
    #[command(allow_negative_numbers = true)]
    PintHpcc {
        /// Offered loads (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0.2,0.4,0.6,0.8,0.9,0.95"
        )]
        loads: Vec<f64>,
        /// Packets per load.
        #[arg(long, default_value_t = 200_000)]
        packets: u64,
        /// Code widths (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "4,6,8")]
        bits: Vec<u32>,
        /// Hops of the path-maximum experiment.
        #[arg(long, default_value_t = 5)]
        hops: usize,
        /// HPCC base RTT T, ns.
        #[arg(long, default_value_t = 13_000.0)]
        rtt_ns: f64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// FlowRadar on a fat tree (K = 8 unless --k): SingleDecode against network-wide
    /// decoding, per load.
    #[command(allow_negative_numbers = true)]
    Flowradar {
        /// Fat-tree arity.
        #[arg(long, default_value_t = 8)]
        k: u32,
        /// Flows per switch the memory is sized for.
        #[arg(long, default_value_t = 10_000)]
        flows_per_switch: u32,
        /// Counting-table cells per provisioned flow.
        #[arg(long, default_value_t = 1.3)]
        cells_per_flow: f64,
        /// Sub-tables (hash functions).
        #[arg(long, default_value_t = 3)]
        hashes: u8,
        /// Loads: average flows per switch over provisioned flows (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0.8,0.9,1.0,1.05,1.1,1.2,1.3,1.4,1.5,1.6"
        )]
        loads: Vec<f64>,
        /// Share of packets dropped on the lossy links, 0 to 1.
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// Lossy links as FROM-TO node numbers (comma-separated), e.g. 16-0.
        #[arg(long, value_delimiter = ',')]
        lossy_links: Vec<String>,
        /// Instead: decode success of one flowset of --flows-per-switch flows and --hashes
        /// sub-tables against cells per flow (1.16 to 1.35), over --seeds seeds.
        #[arg(
            long,
            conflicts_with_all = ["k", "cells_per_flow", "loads", "loss", "lossy_links", "seed"]
        )]
        sweep: bool,
        /// Seeds per point of the sweep.
        #[arg(long, default_value_t = 20, requires = "sweep")]
        seeds: u32,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The sink: ingest rate (recorded exports replayed over loopback TCP into 1 and 2 decode
    /// threads), FlowRadar decoding per epoch, memory per tracked flow, a decode thread's
    /// sweep.
    #[command(allow_negative_numbers = true)]
    Sink {
        /// Flows in the recorded traffic (K = 4 fat tree, the paper's plan).
        #[arg(long, default_value_t = 2000)]
        flows: u32,
        /// Packets per flow.
        #[arg(long, default_value_t = 50)]
        packets: u32,
        /// Replays per run.
        #[arg(long, default_value_t = 20)]
        rounds: u32,
        /// Decode threads to run with (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        threads: Vec<usize>,
        /// Flows per flowset for the FlowRadar part (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
        flowset_flows: Vec<u32>,
        /// Flows in one decode thread's table for the sweep part (0: left out).
        #[arg(long, default_value_t = 200_000)]
        sweep_flows: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Detection (Pythia) on probe streams: samples per second per core.
    #[command(allow_negative_numbers = true)]
    Detect {
        /// Streams watched at once.
        #[arg(long, default_value_t = 1000)]
        streams: u32,
        /// Seconds of each stream (10 samples a second).
        #[arg(long, default_value_t = 600)]
        seconds: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Runs the switch (the same code as pint-switch); the benchmarks start it this way.
    #[command(hide = true)]
    Switch(bench::switch_cmd::SwitchArgs),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pint-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a result as JSON or with its table printer.
fn emit<T: serde::Serialize>(json: bool, result: &T, table: impl FnOnce(&T)) -> anyhow::Result<()> {
    // Only the result is left to print: a reader that stops early (`| head`) ends the program
    // as it ends any Unix filter, not with a panic at the next line printed.
    // SAFETY: setting a signal's action to its default has no precondition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    if json {
        println!("{}", serde_json::to_string_pretty(result)?);
    } else {
        table(result);
    }
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Forward {
            seconds,
            flows,
            reference,
            rounds,
            hugepages,
            variants,
            json,
        } => {
            if seconds < 3 {
                anyhow::bail!(
                    "--seconds must be at least 3 (the first second is warm-up, and the switch's \
                     last interval is cut by its stop)"
                );
            }
            let r = forward::run(&ForwardOptions {
                seconds,
                flows,
                reference_mode: reference,
                rounds,
                hugepages,
                variants,
            })?;
            emit(json, &r, forward::print_table)?;
        }
        Cmd::Throughput {
            seconds,
            flows,
            rounds,
            hugepages,
            topologies,
            zero_loss,
            json,
        } => {
            if seconds < 3 {
                anyhow::bail!("--seconds must be at least 3 (the first second is warm-up)");
            }
            if let Some(t) = zero_loss
                && !(t.is_finite() && t > 0.0)
            {
                anyhow::bail!("--zero-loss {t}: trial seconds must be above 0");
            }
            let r = bench::throughput::run(&bench::throughput::ThroughputOptions {
                seconds,
                flows,
                rounds,
                hugepages,
                topologies,
                zero_loss,
            })?;
            emit(json, &r, bench::throughput::print_table)?;
        }
        Cmd::PintPath {
            topology,
            scheme,
            bits,
            instances,
            d,
            no_topology,
            first_hop_known,
            runs,
            paths,
            lengths,
            seed,
            max_packets,
            routes,
            json,
        } => {
            // The coding takes 1 to 32 bits; each instance takes its own share of every
            // packet and its own decoder.
            if !(1..=32).contains(&bits) {
                anyhow::bail!("--bits {bits}: must be 1 to 32");
            }
            if !(1..=64).contains(&instances) {
                anyhow::bail!("--instances {instances}: must be 1 to 64");
            }
            if d == Some(0) {
                anyhow::bail!("--d 0: a path-length bound is at least 1");
            }
            if runs == 0 || max_packets == 0 {
                anyhow::bail!("--runs and --max-packets must be positive");
            }
            let opts = bench::pint_path::PathOptions {
                topology,
                scheme,
                bits,
                instances,
                d,
                no_topology,
                first_hop_known,
                runs,
                paths_per_length: paths,
                lengths,
                seed,
                max_packets,
                routes,
            };
            let r = bench::pint_path::run(&opts)?;
            emit(json, &r, bench::pint_path::print_table)?;
        }
        Cmd::PintLatency {
            hops,
            runs,
            packets,
            sketch_items,
            seed,
            json,
        } => {
            if hops == 0 || hops > 64 || runs == 0 || packets.is_empty() || sketch_items < 8 {
                anyhow::bail!(
                    "--hops must be 1 to 64, --runs and --packets non-empty, --sketch-items at least 8"
                );
            }
            // Each count's samples are held at once, per hop.
            if let Some(p) = packets.iter().find(|&&p| !(1..=100_000_000).contains(&p)) {
                anyhow::bail!("--packets {p}: each count must be 1 to 100000000");
            }
            let r = bench::pint_latency::run(&bench::pint_latency::LatencyOptions {
                hops,
                runs,
                packets,
                sketch_items,
                seed,
            });
            emit(json, &r, bench::pint_latency::print_table)?;
        }
        Cmd::PintHpcc {
            loads,
            packets,
            bits,
            hops,
            rtt_ns,
            seed,
            json,
        } => {
            if loads.iter().any(|l| !(*l > 0.0 && *l < 1.0))
                || packets == 0
                || bits.iter().any(|b| !(2..=16).contains(b))
                || !(1..=64).contains(&hops)
            {
                anyhow::bail!(
                    "--loads must be in (0, 1), --bits 2 to 16, --packets positive, --hops 1 to 64"
                );
            }
            if !(rtt_ns.is_finite() && rtt_ns >= 1.0) {
                anyhow::bail!("--rtt-ns {rtt_ns}: must be 1 or more (nanoseconds)");
            }
            let r = bench::pint_hpcc::run(&bench::pint_hpcc::HpccOptions {
                capacity_bps: 100_000_000_000,
                rtt_ns,
                loads,
                packets,
                bits,
                hops,
                seed,
            });
            emit(json, &r, bench::pint_hpcc::print_table)?;
        }
        Cmd::Flowradar {
            k,
            flows_per_switch,
            cells_per_flow,
            hashes,
            loads,
            loss,
            lossy_links,
            sweep,
            seeds,
            seed,
            json,
        } => {
            // The bounds keep every flowset within memory: a fat tree of K = 64 has 5120
            // switches, and 10 cells per flow is far past where decoding always succeeds.
            let cells_ok = cells_per_flow > 0.5 && cells_per_flow <= 10.0;
            if !(1..=8).contains(&hashes)
                || !cells_ok
                || !(1..=1_000_000).contains(&flows_per_switch)
                || !(2..=64).contains(&k)
                || k % 2 == 1
            {
                anyhow::bail!(
                    "--hashes must be 1 to 8, --cells-per-flow above 0.5 and at most 10, --flows-per-switch 1 to 1000000, --k even, 2 to 64"
                );
            }
            if let Some(l) = loads.iter().find(|l| !(**l > 0.0 && **l <= 10.0)) {
                anyhow::bail!("--loads {l}: each must be above 0 and at most 10");
            }
            if !(0.0..=1.0).contains(&loss) {
                anyhow::bail!("--loss {loss}: must be from 0 to 1");
            }
            if !lossy_links.is_empty() && loss == 0.0 {
                anyhow::bail!("--lossy-links: with --loss above 0 (at 0 they drop nothing)");
            }
            if sweep && seeds == 0 {
                anyhow::bail!("--seeds must be positive");
            }
            if sweep {
                let opts = bench::flowradar::SweepOptions {
                    flows: flows_per_switch,
                    hashes,
                    cells_per_flow: (0..=12)
                        .map(|i| 1.16 + 0.01 * f64::from(i))
                        .chain([1.3, 1.35])
                        .collect(),
                    seeds,
                };
                let rows = bench::flowradar::sweep(&opts);
                emit(json, &rows, |rows| {
                    bench::flowradar::print_sweep(&opts, rows)
                })?;
                return Ok(());
            }
            let tree = telemetry::topology::Topology::fat_tree(k);
            let mut links = Vec::new();
            for l in &lossy_links {
                let link = l
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
                    .ok_or_else(|| {
                        anyhow::anyhow!("--lossy-links: `{l}` is not FROM-TO (node numbers)")
                    })?;
                // A pair that is no link of the tree would be taken and never used.
                if link.0 as usize >= tree.len() || !tree.neighbours(link.0).contains(&link.1) {
                    anyhow::bail!(
                        "--lossy-links: {l} is no link of the K = {k} fat tree (nodes 0 to {})",
                        tree.len() - 1
                    );
                }
                links.push(link);
            }
            let r = bench::flowradar::run(&bench::flowradar::FlowRadarOptions {
                k,
                provisioned: flows_per_switch,
                cells_per_flow,
                hashes,
                loads,
                loss_rate: loss,
                lossy_links: links,
                seed,
            });
            emit(json, &r, bench::flowradar::print_table)?;
        }
        Cmd::Detect {
            streams,
            seconds,
            json,
        } => {
            if streams == 0 || seconds == 0 {
                anyhow::bail!("--streams and --seconds must be positive");
            }
            let r = bench::detect_bench::run(&bench::detect_bench::DetectBenchOptions {
                streams,
                seconds,
            });
            emit(json, &r, bench::detect_bench::print_table)?;
        }
        Cmd::Sink {
            flows,
            packets,
            rounds,
            threads,
            flowset_flows,
            sweep_flows,
            json,
        } => {
            if flows == 0 || packets == 0 || rounds == 0 || threads.contains(&0) {
                anyhow::bail!("--flows, --packets, --rounds and --threads must be positive");
            }
            let r = bench::sink_bench::run_bench(&bench::sink_bench::SinkBenchOptions {
                flows,
                packets,
                rounds,
                threads,
                flowset_flows,
                sweep_flows,
            })?;
            emit(json, &r, bench::sink_bench::print_table)?;
        }
        Cmd::Switch(a) => bench::switch_cmd::run(a)?,
    }
    Ok(())
}

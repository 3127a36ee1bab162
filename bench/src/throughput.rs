//! `pint-bench throughput`: every variant side by side in one run, each against the
//! reference of its topology measured in the same run, in alternating rounds (the best round
//! of each is reported: these machines are shared and noisy).
//!
//! Topologies:
//! - capture: a capture of 64-byte UDP packets (10K flows) replayed forever by `net_pcap`
//!   into a pure sink (`net_null`, `no-rx=1`): the forwarder is CPU-bound. Variants:
//!   `dpdk-testpmd` io and 5tswap (the reference: it touches L2-L4 headers as a switch
//!   does), and `pint-switch` forwarding.
//! - memif: a generator sending 64-byte packets over memif into a `dpdk-testpmd
//!   --forward-mode=rxonly` sink, which measures the rate. Variants: `dpdk-testpmd
//!   --forward-mode=txonly` (the reference) and `pint-gen --rate max`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::forward::{bench_capture, capture_reference, lcores, run_switch, switch_config};
use crate::stats::{median, steady};
use crate::testpmd::{TestpmdResult, TestpmdRun};

/// Options.
#[derive(Debug, Clone)]
pub struct ThroughputOptions {
    /// Seconds each variant runs per round.
    pub seconds: u64,
    /// Flows in the traffic.
    pub flows: u32,
    /// Rounds.
    pub rounds: u32,
    /// Hugepages for the capture topology.
    pub hugepages: bool,
    /// Leave out the memif topology.
    pub no_memif: bool,
}

/// One variant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// What ran.
    pub name: String,
    /// Topology: capture or memif.
    pub topology: &'static str,
    /// Best round, Mpps.
    pub mpps: f64,
    /// Every round, Mpps.
    pub rounds: Vec<f64>,
    /// The reference of its topology.
    pub reference: String,
    /// mpps / the reference's mpps.
    pub ratio: f64,
    /// TSC cycles per packet (pint-switch only).
    pub cycles_per_packet: Option<f64>,
    /// Packets dropped (pint-switch only; 0 expected).
    pub drops: Option<u64>,
}

/// The result (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputResult {
    /// Seconds per variant per round.
    pub seconds: u64,
    /// Flows.
    pub flows: u32,
    /// Frame size without FCS.
    pub frame_bytes: usize,
    /// The variants.
    pub variants: Vec<Variant>,
}

const REF_CAPTURE: &str = "dpdk-testpmd 5tswap";
const REF_MEMIF: &str = "dpdk-testpmd txonly";

/// The rate a receiver saw while the sender ran: per-second rates above zero, the first and
/// last (partial seconds) left out, median.
fn sink_rate(r: &TestpmdResult) -> f64 {
    let busy: Vec<f64> = r.rx_mpps.iter().copied().filter(|&v| v > 0.01).collect();
    if busy.len() <= 2 {
        return busy.iter().copied().fold(0.0, f64::max);
    }
    median(&busy[1..busy.len() - 1])
}

/// Runs a sender against a testpmd rxonly memif sink; returns the sink's rate.
fn memif_round(
    dir: &std::path::Path,
    seconds: u64,
    sender: impl FnOnce(&str) -> anyhow::Result<()>,
    tag: &'static str,
) -> anyhow::Result<f64> {
    let (main, worker) = lcores();
    let sock = dir.join(format!("{tag}.sock"));
    let _ = std::fs::remove_file(&sock);
    let dev = |role: &str| {
        format!(
            "net_memif0,role={role},socket={},socket-abstract=no",
            sock.display()
        )
    };
    let sink = TestpmdRun {
        mode: "rxonly".into(),
        vdevs: vec![dev("server")],
        lcores: (main, worker),
        mbufs: 16384,
        seconds: seconds + 4,
        hugepages: false,
        name: "sink",
    };
    let sink = std::thread::spawn(move || sink.run());
    let t0 = Instant::now();
    while !sock.exists() {
        if t0.elapsed() > Duration::from_secs(30) {
            anyhow::bail!("the testpmd sink did not create {}", sock.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the sink's port time to start before the client connects.
    std::thread::sleep(Duration::from_millis(500));
    sender(&dev("client"))?;
    let r = sink.join().expect("sink thread")?;
    Ok(sink_rate(&r))
}

fn pint_gen_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating pint-bench")?;
    let generator = exe.with_file_name("pint-gen");
    if !generator.exists() {
        anyhow::bail!(
            "{} not found: build it with `cargo build --release -p bench`",
            generator.display()
        );
    }
    Ok(generator)
}

/// Runs every variant for `opts.rounds` rounds.
pub fn run(opts: &ThroughputOptions) -> anyhow::Result<ThroughputResult> {
    crate::testpmd::binary()?;
    let generator = if opts.no_memif {
        None
    } else {
        Some(pint_gen_binary()?)
    };
    let (scratch, capture, frame_bytes) = bench_capture("throughput", opts.flows)?;
    let (main, worker) = lcores();
    let mut rates: Vec<(String, &'static str, Vec<f64>)> = Vec::new();
    let mut record = |name: &str, topo: &'static str, v: f64| {
        eprintln!("  {name}: {v:.2} Mpps");
        match rates.iter_mut().find(|r| r.0 == name) {
            Some(r) => r.2.push(v),
            None => rates.push((name.to_owned(), topo, vec![v])),
        }
    };
    let mut switch_cpp = 0.0f64;
    let mut switch_drops = 0u64;
    let mut best_switch = 0.0f64;
    for round in 1..=opts.rounds.max(1) {
        eprintln!("round {round}:");
        for mode in ["io", "5tswap"] {
            let r = capture_reference(&capture, mode, opts.seconds, opts.hugepages).run()?;
            record(
                &format!("dpdk-testpmd {mode}"),
                "capture",
                median(steady(&r.rx_mpps, 1)),
            );
        }
        let s = run_switch(
            &scratch.0,
            &switch_config(&capture, worker, main, opts.hugepages),
            opts.seconds,
        )?;
        let sw = median(steady(
            &s.intervals.iter().map(|i| i.rx_mpps).collect::<Vec<_>>(),
            1,
        ));
        switch_drops += s.drops.values().sum::<u64>();
        if sw > best_switch {
            best_switch = sw;
            switch_cpp = median(steady(
                &s.intervals
                    .iter()
                    .map(|i| i.cycles_per_packet)
                    .collect::<Vec<_>>(),
                1,
            ));
        }
        record("pint-switch (forwarding)", "capture", sw);
        if let Some(generator) = &generator {
            let secs = opts.seconds;
            let v = memif_round(
                &scratch.0,
                secs,
                |dev| {
                    TestpmdRun {
                        mode: "txonly".into(),
                        vdevs: vec![dev.to_owned()],
                        // The sink polls on the worker core; the sender forwards on the main.
                        lcores: (worker, main),
                        mbufs: 16384,
                        seconds: secs,
                        hugepages: false,
                        name: "txonly",
                    }
                    .run()
                    .map(|_| ())
                },
                "txonly",
            )?;
            record(REF_MEMIF, "memif", v);
            let v = memif_round(
                &scratch.0,
                secs,
                |dev| {
                    let out = Command::new(generator)
                        .args(["--port", dev, "--rate", "max", "--flows"])
                        .arg(opts.flows.to_string())
                        .args(["--duration", &(secs + 1).to_string(), "--", "-l"])
                        .arg(main.to_string())
                        .args(["--no-huge", "-m", "512", "--no-shconf", "--no-pci"])
                        .args(["--no-telemetry", "--log-level", "error", "--file-prefix"])
                        .arg(format!("pint-bench-gen-{}", std::process::id()))
                        .output()
                        .context("starting pint-gen")?;
                    if !out.status.success() {
                        anyhow::bail!("pint-gen failed: {}", String::from_utf8_lossy(&out.stderr));
                    }
                    Ok(())
                },
                "gen",
            )?;
            record("pint-gen --rate max", "memif", v);
        }
    }
    let best = |name: &str| {
        rates
            .iter()
            .find(|r| r.0 == name)
            .map_or(0.0, |r| r.2.iter().copied().fold(0.0, f64::max))
    };
    let variants = rates
        .iter()
        .map(|(name, topo, rounds)| {
            let reference = if *topo == "capture" {
                REF_CAPTURE
            } else {
                REF_MEMIF
            };
            let mpps = rounds.iter().copied().fold(0.0, f64::max);
            let r = best(reference);
            let is_switch = name.starts_with("pint-switch");
            Variant {
                name: name.clone(),
                topology: topo,
                mpps,
                rounds: rounds.clone(),
                reference: reference.into(),
                ratio: if r > 0.0 { mpps / r } else { 0.0 },
                cycles_per_packet: is_switch.then_some(switch_cpp),
                drops: is_switch.then_some(switch_drops),
            }
        })
        .collect();
    Ok(ThroughputResult {
        seconds: opts.seconds,
        flows: opts.flows,
        frame_bytes,
        variants,
    })
}

/// Prints the table.
pub fn print_table(r: &ThroughputResult) {
    println!(
        "throughput, {}-byte frames (64 on the wire), {} flows, {} s per variant per round (best round)",
        r.frame_bytes, r.flows, r.seconds
    );
    println!(
        "{:<26} {:<8} {:>8} {:>22} {:>7} {:>8} {:>6}  rounds",
        "variant", "topology", "Mpps", "reference", "ratio", "cyc/pkt", "drops"
    );
    for v in &r.variants {
        println!(
            "{:<26} {:<8} {:>8.2} {:>22} {:>7.3} {:>8} {:>6}  {}",
            v.name,
            v.topology,
            v.mpps,
            v.reference,
            v.ratio,
            v.cycles_per_packet
                .map_or("-".into(), |c| format!("{c:.0}")),
            v.drops.map_or("-".into(), |d| d.to_string()),
            v.rounds
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

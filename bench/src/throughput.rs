//! `pint-bench throughput`: every variant side by side in one run, each against the
//! reference of its topology measured in the same run, in alternating rounds (the best round
//! of each is reported: these machines are shared and noisy).
//!
//! Topologies:
//! - capture: a capture of 64-byte UDP packets (10K flows) replayed forever by `net_pcap`
//!   into a pure sink (`net_null`, `no-rx=1`): the forwarder is CPU-bound. Variants:
//!   `dpdk-testpmd` io and 5tswap (the reference: it touches L2-L4 headers as a switch
//!   does), and `pint-switch` forwarding.
//! - null: a generator sending 64-byte packets into a `net_null` port, which takes them
//!   all: the sender's own cost per packet, no other core involved. Variants:
//!   `dpdk-testpmd --forward-mode=txonly` (the reference) and `pint-gen --rate max`, each
//!   reporting its own transmit rate.
//! - memif: a generator sending 64-byte packets over memif into a `dpdk-testpmd
//!   --forward-mode=rxonly` sink, which measures the rate. Variants: `dpdk-testpmd
//!   --forward-mode=txonly` (the reference) and `pint-gen --rate max`.
//! - loop: `pint-gen` and the device under test as two processes over one memif, the
//!   generator sending as fast as it can and receiving what comes back (rate, loss).
//!   Variants: `dpdk-testpmd` 5tswap (the reference) and `pint-switch` routing the traffic
//!   back out of the port it came in on. With `--zero-loss`, each also gets an RFC 2544
//!   style search for the highest rate it returns without loss.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::forward::{
    SWITCH_MAC, bench_capture, capture_reference, lcores, run_switch, switch_config,
};
use crate::stats::{median, steady};
use crate::testpmd::TestpmdRun;

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
    /// The topologies to run.
    pub topologies: Vec<Topology>,
    /// Search for each loop variant's zero-loss rate, with trials of this many seconds.
    pub zero_loss: Option<f64>,
}

/// A topology of devices (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// A replayed capture into a pure sink.
    Capture,
    /// A generator into a `net_null` port: its own cost, CPU-bound.
    Null,
    /// A generator into a testpmd sink over memif.
    Memif,
    /// pint-gen through the device under test and back over one memif.
    Loop,
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
    /// Loop topology: packets sent and not received back, all rounds.
    pub lost: Option<u64>,
    /// Loop topology with `--zero-loss`: the highest rate returned without loss, Mpps.
    pub zero_loss_mpps: Option<f64>,
    /// The zero-loss rate was as fast as the generator sends (the device may go faster).
    pub zero_loss_sender_limited: Option<bool>,
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
const REF_NULL: &str = "dpdk-testpmd txonly";
const REF_LOOP: &str = "dpdk-testpmd 5tswap";
const SWITCH: &str = "pint-switch (forwarding)";

/// The generator's MAC in the loop topology (the switch's next hop back to it).
const GEN_MAC: &str = "02:00:00:00:aa:01";

/// The rate while traffic flowed, from per-second rates: those above zero, the first and
/// last (partial seconds) left out, median.
fn busy_rate(per_second: &[f64]) -> f64 {
    let busy: Vec<f64> = per_second.iter().copied().filter(|&v| v > 0.01).collect();
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
    let dev = |role: &str| memif_dev(role, &sock);
    let sink = TestpmdRun {
        mode: "rxonly".into(),
        vdevs: vec![dev("server")],
        lcores: (main, worker),
        mbufs: 16384,
        seconds: seconds + 4,
        hugepages: false,
        name: "sink",
        extra: Vec::new(),
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
    Ok(busy_rate(&r.rx_mpps))
}

fn pint_gen_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating pint-bench")?;
    let generator = exe.with_file_name("pint-gen");
    if !generator.exists() {
        anyhow::bail!(
            "{} not found: pint-bench runs the pint-gen installed beside it (in a checkout: cargo build --release -p bench)",
            generator.display()
        );
    }
    Ok(generator)
}

/// The switch routing everything back out of the memif it came in on (the loop topology).
fn loop_switch_config(sock: &std::path::Path, worker: u32, main: u32) -> String {
    format!(
        r#"switch_id = 1
[eal]
main_lcore = {main}
hugepages = false
[stats]
interval_ms = 1000
[[ports]]
name = "gen"
device = "net_memif0,role=server,socket={sock},socket-abstract=no"
role = "edge"
mac = "{SWITCH_MAC}"
[[workers]]
lcore = {worker}
rx = ["gen"]
[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{{ port = "gen", mac = "{GEN_MAC}" }}]
"#,
        sock = sock.display()
    )
}

/// A memif device's arguments: `role` (server or client) on the socket file `sock`.
fn memif_dev(role: &str, sock: &std::path::Path) -> String {
    format!(
        "net_memif0,role={role},socket={},socket-abstract=no",
        sock.display()
    )
}

/// A device under test in the loop topology, started as the memif server at `sock`.
enum Dut {
    Testpmd(crate::testpmd::Running),
    Switch(crate::forward::RunningSwitch),
}

impl Dut {
    fn start(name: &str, dir: &std::path::Path, sock: &std::path::Path) -> anyhow::Result<Dut> {
        let (main, worker) = lcores();
        let _ = std::fs::remove_file(sock);
        let dev = memif_dev("server", sock);
        let dut = if name == REF_LOOP {
            Dut::Testpmd(
                TestpmdRun {
                    mode: "5tswap".into(),
                    vdevs: vec![dev],
                    lcores: (main, worker),
                    mbufs: 16384,
                    seconds: 0,
                    hugepages: false,
                    name: "loop",
                    extra: vec!["--port-topology=loop".into()],
                }
                .spawn()
                .inspect(|t| {
                    t.wait_started(Duration::from_secs(60));
                })?,
            )
        } else {
            let mut s = crate::forward::spawn_switch(dir, &loop_switch_config(sock, worker, main))?;
            s.wait_ready(Duration::from_secs(60))?;
            Dut::Switch(s)
        };
        let t0 = Instant::now();
        while !sock.exists() {
            if t0.elapsed() > Duration::from_secs(30) {
                dut.stop()?;
                anyhow::bail!("{name} did not create {}", sock.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Give the server's port time to start before the client connects.
        std::thread::sleep(Duration::from_millis(500));
        Ok(dut)
    }

    /// Stops it; the switch's cycles per packet, if it is the switch.
    fn stop(self) -> anyhow::Result<Option<f64>> {
        match self {
            Dut::Testpmd(t) => t.finish().map(|_| None),
            Dut::Switch(s) => {
                let sum = s.finish()?;
                let cpp: Vec<f64> = sum
                    .intervals
                    .iter()
                    .filter(|i| i.rx_mpps > 0.01)
                    .map(|i| i.cycles_per_packet)
                    .collect();
                Ok(Some(median(&cpp)))
            }
        }
    }
}

/// Runs pint-gen on the port `dev` with `args` (and --json; `until_peer_leaves`: it sends
/// until its peer leaves, and says it was cut short); once it has printed its report
/// (and lingers, not polling, until its peer leaves), runs `peer_done` (which stops the
/// peer), then waits for pint-gen to exit. DPDK 22.11's memif driver unmaps a departed
/// peer's rings under a thread still polling them, so the side that is not polling must be
/// the one the other leaves.
fn run_gen(
    generator: &std::path::Path,
    dev: &str,
    lcore: u32,
    args: &[String],
    until_peer_leaves: bool,
    peer_done: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<serde_json::Value> {
    use std::io::Read;
    let mut child = Command::new(generator)
        .args(["--port", dev, "--json"])
        .args(args)
        .args(["--", "-l"])
        .arg(lcore.to_string())
        .args(["--no-huge", "-m", "512", "--no-shconf", "--no-pci"])
        .args(["--no-telemetry", "--log-level", "error", "--file-prefix"])
        .arg(format!("pint-bench-gen-{}", std::process::id()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting pint-gen")?;
    let mut err = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let report = crate::sender::read_json_report(std::io::BufReader::new(
        child.stdout.take().expect("piped"),
    ));
    let stopped = peer_done();
    let status = child.wait()?;
    let errors = errors.join().unwrap_or_default();
    stopped?;
    let report: serde_json::Value = serde_json::from_str(&report)
        .with_context(|| format!("reading pint-gen's JSON ({status}): {errors}"))?;
    // Sending until the peer leaves ends with pint-gen saying so (it exits 1: cut short).
    let expected_end = until_peer_leaves && report["sent"]["cut_short"].is_string();
    if !(status.success() || expected_end) {
        anyhow::bail!("pint-gen failed ({status}): {errors}");
    }
    Ok(report)
}

/// pint-gen's arguments to send as fast as it can over `flows` flows for `seconds`, then
/// wait up to `linger` seconds for its peer to leave.
fn max_rate_args(flows: u32, seconds: u64, linger: u32) -> Vec<String> {
    [
        "--rate",
        "max",
        "--flows",
        &flows.to_string(),
        "--duration",
        &seconds.to_string(),
        "--linger",
        &linger.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Every variant's figures as they come in.
#[derive(Default)]
struct Tally {
    /// (name, topology, per-round Mpps), in first-seen order.
    rates: Vec<(String, &'static str, Vec<f64>)>,
    /// Loop topology: lost packets per variant.
    lost: std::collections::BTreeMap<String, u64>,
    /// Loop topology: (zero-loss Mpps, sender-limited) per variant.
    zero_loss: std::collections::BTreeMap<String, (f64, bool)>,
}

impl Tally {
    fn record(&mut self, name: &str, topo: &'static str, v: f64) {
        eprintln!("  {name} ({topo}): {v:.2} Mpps");
        match self.rates.iter_mut().find(|r| r.0 == name && r.1 == topo) {
            Some(r) => r.2.push(v),
            None => self.rates.push((name.to_owned(), topo, vec![v])),
        }
    }

    fn best(&self, name: &str, topo: &str) -> f64 {
        self.rates
            .iter()
            .find(|r| r.0 == name && r.1 == topo)
            .map_or(0.0, |r| r.2.iter().copied().fold(0.0, f64::max))
    }
}

/// Runs every variant for `opts.rounds` rounds.
pub fn run(opts: &ThroughputOptions) -> anyhow::Result<ThroughputResult> {
    crate::testpmd::binary()?;
    let has = |t: Topology| opts.topologies.contains(&t);
    let generator = if has(Topology::Null) || has(Topology::Memif) || has(Topology::Loop) {
        Some(pint_gen_binary()?)
    } else {
        None
    };
    let (scratch, capture, frame_bytes) = bench_capture("throughput", opts.flows)?;
    let (main, worker) = lcores();
    let mut tally = Tally::default();
    let mut switch_cpp = 0.0f64;
    let mut loop_cpp = 0.0f64;
    let mut switch_drops = 0u64;
    let mut best_switch = 0.0f64;
    let loop_sock = scratch.path("loop.sock");
    let loop_variants = [REF_LOOP, SWITCH];
    for round in 1..=opts.rounds.max(1) {
        eprintln!("round {round}:");
        if has(Topology::Capture) {
            for mode in ["io", "5tswap"] {
                let r = capture_reference(&capture, mode, opts.seconds, opts.hugepages).run()?;
                let rate = crate::forward::reference_rate(mode, &r.rx_mpps)?;
                tally.record(&format!("dpdk-testpmd {mode}"), "capture", rate);
            }
            let s = run_switch(
                scratch.dir(),
                &switch_config(&capture, worker, main, opts.hugepages),
                opts.seconds,
            )?;
            let sw = crate::forward::check_run(crate::forward::Variant::Off, &s)?;
            if sw > best_switch {
                best_switch = sw;
                switch_drops = s.dropped();
                switch_cpp = median(steady(
                    &s.intervals
                        .iter()
                        .map(|i| i.cycles_per_packet)
                        .collect::<Vec<_>>(),
                    1,
                ));
            }
            tally.record(SWITCH, "capture", sw);
        }
        let Some(generator) = &generator else {
            continue;
        };
        if has(Topology::Null) {
            let r = TestpmdRun {
                mode: "txonly".into(),
                vdevs: vec!["net_null0".into()],
                lcores: (main, worker),
                mbufs: 16384,
                seconds: opts.seconds,
                hugepages: false,
                name: "null",
                extra: Vec::new(),
            }
            .run()?;
            tally.record(REF_NULL, "null", busy_rate(&r.tx_mpps));
            let args = max_rate_args(opts.flows, opts.seconds, 0);
            let r = run_gen(generator, "net_null0", worker, &args, false, || Ok(()))?;
            let mpps = r["sent"]["pps"].as_f64().unwrap_or(0.0) / 1e6;
            tally.record("pint-gen --rate max", "null", mpps);
        }
        if has(Topology::Memif) {
            let secs = opts.seconds;
            let v = memif_round(
                scratch.dir(),
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
                        extra: Vec::new(),
                    }
                    .run()
                    .map(|_| ())
                },
                "txonly",
            )?;
            tally.record(REF_MEMIF, "memif", v);
            let v = memif_round(
                scratch.dir(),
                secs,
                |dev| {
                    // Until the sink leaves.
                    let args = max_rate_args(opts.flows, secs + 1, 30);
                    run_gen(generator, dev, main, &args, true, || Ok(())).map(|_| ())
                },
                "gen",
            )?;
            tally.record("pint-gen --rate max", "memif", v);
        }
        if has(Topology::Loop) {
            for name in loop_variants {
                let dut = Dut::start(name, scratch.dir(), &loop_sock)?;
                let mut gen_args = vec!["--mode".to_string(), "both".into()];
                gen_args.extend(max_rate_args(opts.flows, opts.seconds, 60));
                let mut cpp = None;
                let r = run_gen(
                    generator,
                    &memif_dev("client", &loop_sock),
                    main,
                    &gen_args,
                    false,
                    || {
                        cpp = dut.stop()?;
                        Ok(())
                    },
                )?;
                let mpps = r["received"]["pps"].as_f64().unwrap_or(0.0) / 1e6;
                *tally.lost.entry(name.to_owned()).or_default() += r["lost"].as_u64().unwrap_or(0);
                if let Some(c) = cpp
                    && mpps >= tally.best(name, "loop")
                {
                    loop_cpp = c;
                }
                tally.record(name, "loop", mpps);
            }
        }
    }
    if let (Some(generator), Some(trial)) = (&generator, opts.zero_loss)
        && has(Topology::Loop)
    {
        eprintln!("zero-loss search:");
        for name in loop_variants {
            let dut = Dut::start(name, scratch.dir(), &loop_sock)?;
            let gen_args: Vec<String> = vec![
                "--zero-loss".into(),
                "--flows".into(),
                opts.flows.to_string(),
                "--trial-seconds".into(),
                trial.to_string(),
                "--precision".into(),
                "0.02".into(),
                "--max-trials".into(),
                "12".into(),
                "--linger".into(),
                "60".into(),
            ];
            let r = run_gen(
                generator,
                &memif_dev("client", &loop_sock),
                main,
                &gen_args,
                false,
                || dut.stop().map(|_| ()),
            )?;
            let mpps = r["zero_loss_pps"].as_f64().unwrap_or(0.0) / 1e6;
            let limited = r["sender_limited"].as_bool().unwrap_or(false);
            eprintln!("  {name}: {mpps:.3} Mpps without loss");
            tally.zero_loss.insert(name.to_owned(), (mpps, limited));
        }
    }
    let variants = tally
        .rates
        .iter()
        .map(|(name, topo, rounds)| {
            let reference = match *topo {
                "capture" => REF_CAPTURE,
                "null" => REF_NULL,
                "memif" => REF_MEMIF,
                _ => REF_LOOP,
            };
            let mpps = rounds.iter().copied().fold(0.0, f64::max);
            let r = tally.best(reference, topo);
            let is_switch = name == SWITCH;
            let in_loop = *topo == "loop";
            let zl = tally.zero_loss.get(name).filter(|_| in_loop);
            Variant {
                name: name.clone(),
                topology: topo,
                mpps,
                rounds: rounds.clone(),
                reference: reference.into(),
                ratio: if r > 0.0 { mpps / r } else { 0.0 },
                cycles_per_packet: is_switch.then_some(if in_loop { loop_cpp } else { switch_cpp }),
                drops: (is_switch && !in_loop).then_some(switch_drops),
                lost: in_loop.then(|| tally.lost.get(name).copied().unwrap_or(0)),
                zero_loss_mpps: zl.map(|z| z.0),
                zero_loss_sender_limited: zl.map(|z| z.1),
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
        "{:<26} {:<8} {:>8} {:>20} {:>7} {:>8} {:>6} {:>8} {:>10}  rounds",
        "variant",
        "topology",
        "Mpps",
        "reference",
        "ratio",
        "cyc/pkt",
        "drops",
        "lost",
        "zero-loss"
    );
    let dash = || "-".to_string();
    for v in &r.variants {
        println!(
            "{:<26} {:<8} {:>8.2} {:>20} {:>7.3} {:>8} {:>6} {:>8} {:>10}  {}",
            v.name,
            v.topology,
            v.mpps,
            v.reference,
            v.ratio,
            v.cycles_per_packet.map_or_else(dash, |c| format!("{c:.0}")),
            v.drops.map_or_else(dash, |d| d.to_string()),
            v.lost.map_or_else(dash, |d| d.to_string()),
            v.zero_loss_mpps.map_or_else(dash, |z| format!(
                "{z:.2}{}",
                if v.zero_loss_sender_limited == Some(true) {
                    "+"
                } else {
                    ""
                }
            )),
            v.rounds
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if r.variants.iter().any(|v| v.zero_loss_mpps.is_some()) {
        println!(
            "zero-loss: the highest rate returned without loss (RFC 2544 style search); + : as fast as the generator sends"
        );
    }
}

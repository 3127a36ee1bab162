//! `pint-bench forward`: the switch's forwarding rate against `dpdk-testpmd` on the same
//! devices in the same run. A capture of 64-byte UDP packets (10K flows, made here) is
//! replayed forever by `net_pcap` (`infinite_rx=1`) into a pure sink (`net_null`, `no-rx=1`);
//! one forwarding core each.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use control::summary::Summary;
use serde::Serialize;
use telemetry::wire::MacAddr;

use crate::stats::{median, steady};
use crate::testpmd::TestpmdRun;

/// The switch port's MAC; the capture is addressed to it.
pub(crate) const SWITCH_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

/// Options of the forwarding benchmark.
#[derive(Debug, Clone)]
pub struct ForwardOptions {
    /// Seconds each forwarder runs.
    pub seconds: u64,
    /// Flows in the capture.
    pub flows: u32,
    /// testpmd forwarding mode of the reference.
    pub reference_mode: String,
    /// Rounds (switch then reference, repeated); the best round of each is reported.
    pub rounds: u32,
    /// Use hugepages for both.
    pub hugepages: bool,
}

/// The benchmark's result (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct ForwardResult {
    /// The switch's rate, Mpps (median of its per-second rates after the first second).
    pub switch_mpps: f64,
    /// The reference's rate, Mpps, measured the same way in the same run.
    pub reference_mpps: f64,
    /// switch_mpps / reference_mpps.
    pub ratio: f64,
    /// The switch's TSC cycles per packet (rx, pipeline, tx) in polls that received packets.
    pub cycles_per_packet: f64,
    /// The reference's forwarding mode.
    pub reference_mode: String,
    /// Seconds each ran per round.
    pub seconds: u64,
    /// Flows in the capture.
    pub flows: u32,
    /// Frame size without FCS (64 bytes on the wire).
    pub frame_bytes: usize,
    /// Packets the switch dropped (should be 0: every packet is routable).
    pub switch_drops: u64,
    /// Per-round rates: (switch, reference).
    pub rounds: Vec<(f64, f64)>,
}

pub(crate) fn lcores() -> (u32, u32) {
    let cpus = dataplane::resources::available_cpus();
    let main = cpus.first().copied().unwrap_or(0);
    let worker = cpus.last().copied().unwrap_or(0);
    (main, worker)
}

pub(crate) fn switch_config(capture: &Path, worker: u32, main: u32, hugepages: bool) -> String {
    format!(
        r#"switch_id = 1
[eal]
main_lcore = {main}
hugepages = {hugepages}
[stats]
interval_ms = 1000
[[ports]]
name = "in"
device = "net_pcap0,rx_pcap={cap},infinite_rx=1"
role = "edge"
mac = "{SWITCH_MAC}"
[[ports]]
name = "out"
device = "net_null0,no-rx=1"
role = "fabric"
mac = "02:00:00:00:01:00"
[[workers]]
lcore = {worker}
rx = ["in"]
[[routes]]
prefix = "10.1.0.0/16"
next_hops = [{{ port = "out", mac = "02:00:00:00:02:00" }}]
"#,
        cap = capture.display()
    )
}

/// A scratch directory (removed on drop) holding the benchmark's capture of `flows` 64-byte
/// UDP flows: (directory, capture path, frame bytes).
pub(crate) fn bench_capture(tag: &str, flows: u32) -> anyhow::Result<(Scratch, PathBuf, usize)> {
    let scratch =
        Scratch(std::env::temp_dir().join(format!("pint-bench-{tag}-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)?;
    let capture = scratch.0.join("udp64.pcap");
    let frames = dataplane::capture::bench_udp(flows, SWITCH_MAC);
    let frame_bytes = frames.first().map_or(0, Vec::len);
    dataplane::capture::write_pcap(&capture, frames.iter().map(Vec::as_slice))?;
    Ok((scratch, capture, frame_bytes))
}

/// testpmd forwarding in `mode` from the replayed capture into the sink, on the same cores
/// as the switch.
pub(crate) fn capture_reference(
    capture: &Path,
    mode: &str,
    seconds: u64,
    hugepages: bool,
) -> TestpmdRun {
    let (main, worker) = lcores();
    TestpmdRun {
        mode: mode.to_owned(),
        vdevs: vec![
            format!("net_pcap0,rx_pcap={},infinite_rx=1", capture.display()),
            "net_null0,no-rx=1".into(),
        ],
        lcores: (main, worker),
        mbufs: 32767,
        seconds,
        hugepages,
        name: "fwd",
        extra: Vec::new(),
    }
}

/// Runs the switch as a child process (this executable's hidden `switch` subcommand, which
/// is the same code as `pint-switch`) and reads its JSON summary.
pub(crate) fn run_switch(dir: &Path, config: &str, seconds: u64) -> anyhow::Result<Summary> {
    let cfg = dir.join("switch.toml");
    std::fs::write(&cfg, config)?;
    let summary = dir.join("summary.json");
    let exe = std::env::current_exe().context("locating pint-bench")?;
    let out = Command::new(exe)
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", &seconds.to_string(), "--summary-json"])
        .arg(&summary)
        .output()
        .context("starting the switch")?;
    if !out.status.success() {
        anyhow::bail!(
            "the switch failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(&summary).context("reading the switch's summary")?;
    parse_summary(&text)
}

/// The switch forwarding in its own process until [`RunningSwitch::finish`].
pub(crate) struct RunningSwitch {
    child: std::process::Child,
    summary: PathBuf,
    log: PathBuf,
}

/// Starts the switch on `config` (written into `dir`, with its log and summary).
pub(crate) fn spawn_switch(dir: &Path, config: &str) -> anyhow::Result<RunningSwitch> {
    let cfg = dir.join("switch.toml");
    std::fs::write(&cfg, config)?;
    let summary = dir.join("summary.json");
    let _ = std::fs::remove_file(&summary);
    let log = dir.join("switch.log");
    let out = std::fs::File::create(&log)?;
    let exe = std::env::current_exe().context("locating pint-bench")?;
    let child = Command::new(exe)
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", "86400", "--summary-json"])
        .arg(&summary)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("starting the switch")?;
    Ok(RunningSwitch {
        child,
        summary,
        log,
    })
}

impl RunningSwitch {
    /// Waits until the switch has started its ports (it prints its routes then).
    pub(crate) fn wait_ready(&mut self, limit: std::time::Duration) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.lines().any(|l| l.starts_with("routes:")) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("the switch stopped ({status}):\n{log}");
            }
            if start.elapsed() > limit {
                anyhow::bail!("the switch did not start in {limit:?}:\n{log}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops the switch (SIGINT) and reads its summary.
    pub(crate) fn finish(mut self) -> anyhow::Result<Summary> {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if start.elapsed() > std::time::Duration::from_secs(20) {
                let _ = self.child.kill();
                break self.child.wait()?;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if !status.success() {
            anyhow::bail!("the switch failed ({status}):\n{log}");
        }
        let text = std::fs::read_to_string(&self.summary)
            .with_context(|| format!("reading the switch's summary; its log:\n{log}"))?;
        parse_summary(&text)
    }
}

fn parse_summary(text: &str) -> anyhow::Result<Summary> {
    Summary::from_json(text).context("the switch's summary is not valid")
}

/// A scratch directory removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the benchmark.
pub fn run(opts: &ForwardOptions) -> anyhow::Result<ForwardResult> {
    crate::testpmd::binary()?;
    let (scratch, capture, frame_bytes) = bench_capture("forward", opts.flows)?;
    let (main, worker) = lcores();

    let mut rounds = Vec::new();
    let mut best_cpp = 0.0;
    let mut switch_drops = 0;
    for round in 0..opts.rounds.max(1) {
        eprintln!(
            "round {}: pint-switch forwarding for {} s ...",
            round + 1,
            opts.seconds
        );
        let s = run_switch(
            &scratch.0,
            &switch_config(&capture, worker, main, opts.hugepages),
            opts.seconds,
        )?;
        let rates: Vec<f64> = s.intervals.iter().map(|i| i.rx_mpps).collect();
        let sw = median(steady(&rates, 1));
        switch_drops += s.dropped();
        eprintln!(
            "round {}: dpdk-testpmd --forward-mode={} for {} s ...",
            round + 1,
            opts.reference_mode,
            opts.seconds
        );
        let r = capture_reference(&capture, &opts.reference_mode, opts.seconds, opts.hugepages)
            .run()?;
        let rf = median(steady(&r.rx_mpps, 1));
        eprintln!(
            "round {}: switch {sw:.2} Mpps, reference {rf:.2} Mpps",
            round + 1
        );
        if rounds.iter().all(|(b, _): &(f64, f64)| sw > *b) {
            best_cpp = median(steady(
                &s.intervals
                    .iter()
                    .map(|i| i.cycles_per_packet)
                    .collect::<Vec<_>>(),
                1,
            ));
        }
        rounds.push((sw, rf));
    }
    let switch_mpps = rounds.iter().map(|r| r.0).fold(0.0, f64::max);
    let reference_mpps = rounds.iter().map(|r| r.1).fold(0.0, f64::max);
    Ok(ForwardResult {
        switch_mpps,
        reference_mpps,
        ratio: if reference_mpps > 0.0 {
            switch_mpps / reference_mpps
        } else {
            0.0
        },
        cycles_per_packet: best_cpp,
        reference_mode: opts.reference_mode.clone(),
        seconds: opts.seconds,
        flows: opts.flows,
        frame_bytes,
        switch_drops,
        rounds,
    })
}

/// Prints the result as a small table.
pub fn print_table(r: &ForwardResult) {
    println!(
        "forwarding, one core, {}-byte frames ({} on the wire), {} flows, {} s per run",
        r.frame_bytes,
        r.frame_bytes + 4,
        r.flows,
        r.seconds
    );
    println!("{:<34} {:>10} {:>16}", "forwarder", "Mpps", "cycles/packet");
    println!(
        "{:<34} {:>10.2} {:>16.1}",
        "pint-switch (L3 forwarding)", r.switch_mpps, r.cycles_per_packet
    );
    println!(
        "{:<34} {:>10.2} {:>16}",
        format!("dpdk-testpmd --forward-mode={}", r.reference_mode),
        r.reference_mpps,
        "-"
    );
    println!("ratio (switch / reference): {:.3}", r.ratio);
    if r.switch_drops > 0 {
        println!("warning: the switch dropped {} packets", r.switch_drops);
    }
}

//! `pint-bench forward`: the switch's forwarding rate against `dpdk-testpmd` on the same
//! devices in the same run. A capture of 64-byte UDP packets (10K flows, made here) is
//! replayed forever by `net_pcap` (`infinite_rx=1`) into a pure sink (`net_null`, `no-rx=1`);
//! one forwarding core each.
//!
//! The switch runs in several telemetry variants, each beside the same reference: telemetry
//! off; a transit hop (fabric to fabric, every packet carrying a shim of the paper's plan,
//! FlowRadar counting); an edge ingress (edge to fabric: the shim inserted); an edge egress
//! (fabric to edge: the shim stripped, a digest recorded and exported to a sink stand-in on
//! loopback, which also gives the bytes per digest on the wire).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use control::summary::Summary;
use serde::Serialize;
use telemetry::wire::MacAddr;

use crate::scratch::Scratch;
use crate::stats::{forwarding, median};
use crate::testpmd::TestpmdRun;

/// The switch port's MAC; the capture is addressed to it.
pub(crate) const SWITCH_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

/// What the switch does to the benchmark's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Telemetry off: plain L3 forwarding.
    Off,
    /// Fabric in, fabric out, every packet with a shim: encode in place, count in FlowRadar.
    Transit,
    /// Edge in, fabric out: insert the shim, encode, count.
    EdgeIngress,
    /// Fabric in, edge out: encode, record the digest, strip the shim, count; digests
    /// exported to a listening sink stand-in.
    EdgeEgress,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 4] = [
        Variant::Off,
        Variant::Transit,
        Variant::EdgeIngress,
        Variant::EdgeEgress,
    ];

    fn label(self) -> &'static str {
        match self {
            Variant::Off => "pint-switch, telemetry off",
            Variant::Transit => "pint-switch, transit hop",
            Variant::EdgeIngress => "pint-switch, edge ingress",
            Variant::EdgeEgress => "pint-switch, edge egress + export",
        }
    }
}

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
    /// The switch's variants.
    pub variants: Vec<Variant>,
}

/// One variant's result.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// The variant.
    pub variant: Variant,
    /// Its rate, Mpps (best round).
    pub switch_mpps: f64,
    /// switch_mpps / reference_mpps.
    pub ratio: f64,
    /// TSC cycles per packet in its best round.
    pub cycles_per_packet: f64,
    /// Packets it dropped in its best round (should be 0; a run that drops more than 1% is
    /// refused).
    pub switch_drops: u64,
    /// Digests recorded per second (edge egress), the mean over the whole run (warm-up
    /// second included).
    pub digests_per_second: f64,
    /// Digest records dropped at the ring in its best round (the control thread fell
    /// behind).
    pub digests_dropped: u64,
    /// Digests the sink stand-in received per second (edge egress), the mean over the whole
    /// run.
    pub exported_digests_per_second: f64,
    /// Bytes per digest on the wire, frame headers and flow tables included (edge egress).
    pub bytes_per_digest: f64,
    /// Per-round rates.
    pub rounds: Vec<f64>,
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
    /// Packets the switch dropped in the variants' best rounds (should be 0: every packet is
    /// routable).
    pub switch_drops: u64,
    /// Per-round rates: (first variant, reference).
    pub rounds: Vec<(f64, f64)>,
    /// Every variant.
    pub variants: Vec<VariantResult>,
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

/// The switch's configuration for `variant`: the plain capture, or the shimmed one for the
/// variants whose packets arrive from the fabric; `sink` for the edge egress.
pub(crate) fn variant_config(
    variant: Variant,
    plain: &Path,
    shimmed: &Path,
    worker: u32,
    main: u32,
    hugepages: bool,
    sink: Option<std::net::SocketAddr>,
) -> String {
    let (capture, in_role, out_role) = match variant {
        Variant::Off | Variant::EdgeIngress => (plain, "edge", "fabric"),
        Variant::Transit => (shimmed, "fabric", "fabric"),
        Variant::EdgeEgress => (shimmed, "fabric", "edge"),
    };
    let base = switch_config(capture, worker, main, hugepages)
        .replace("role = \"edge\"", "role = \"IN\"")
        .replace("role = \"fabric\"", "role = \"OUT\"")
        .replace("role = \"IN\"", &format!("role = \"{in_role}\""))
        .replace("role = \"OUT\"", &format!("role = \"{out_role}\""));
    if variant == Variant::Off {
        return base;
    }
    let sink = sink.map_or(String::new(), |a| format!("sink = \"{a}\"\n"));
    format!("{base}\n[telemetry]\n{sink}[telemetry.flowradar]\nexpected_flows = 10000\n")
}

/// The benchmark's capture as a second hop receives it: TTL 63 and the paper plan's shim.
pub(crate) fn shimmed_capture(dir: &Path, flows: u32) -> anyhow::Result<PathBuf> {
    let plan =
        telemetry::pint::encoder::SwitchPlan::compile(control::config::telemetry::PAPER_QUERIES, 1)
            .map_err(|e| anyhow::anyhow!("the paper plan: {e}"))?;
    let frames: Vec<Vec<u8>> = (0..flows)
        .map(|i| {
            let mut p = dataplane::capture::PacketSpec::udp(
                std::net::Ipv4Addr::from(0x0a00_0000 | (i & 0xffff)),
                std::net::Ipv4Addr::from(0x0a01_0000 | (i.wrapping_mul(2_654_435_761) >> 16)),
                1024 + (i % 50_000) as u16,
                4791,
            );
            p.dst_mac = SWITCH_MAC;
            p.ident = i as u16;
            p.ttl = 63;
            dataplane::capture::with_shim(
                &p.build(),
                telemetry::wire::shim::DEFAULT_ETHERTYPE,
                plan.tag(),
                plan.digest_bytes(),
                u64::from(i) & 0xffff,
            )
        })
        .collect();
    let path = dir.join("udp64-shim.pcap");
    dataplane::capture::write_pcap(&path, frames.iter().map(Vec::as_slice))?;
    Ok(path)
}

/// A scratch directory (removed on drop) holding the benchmark's capture of `flows` 64-byte
/// UDP flows: (directory, capture path, frame bytes).
pub(crate) fn bench_capture(tag: &str, flows: u32) -> anyhow::Result<(Scratch, PathBuf, usize)> {
    let scratch = Scratch::new(&format!("bench-{tag}"))?;
    let capture = scratch.path("udp64.pcap");
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
    // A switch built with the `stage-timing` feature reports its stages: pass it on.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if line.starts_with("worker stage cycles") {
            eprintln!("  {line}");
        }
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

fn steady_median(s: &Summary, f: impl Fn(&control::summary::Interval) -> f64) -> f64 {
    median(steady_rates(&s.intervals.iter().map(f).collect::<Vec<_>>()))
}

/// Packets of a run that may go otherwise than the variant asks (1 in 100: none should)
/// before the run is refused as not measuring the variant.
const STRAY_SHARE: u64 = 100;

/// Whether a switch run measured what `variant` says: it received packets, forwarded them
/// (drops are a set-up fault here, and a switch that drops is cheaper), did its role's
/// telemetry work on about every one (a shim the switch does not know, say, is forwarded
/// without encoding, which is cheaper too), and has a steady rate, which it returns (Mpps
/// received).
pub fn check_run(variant: Variant, s: &Summary) -> anyhow::Result<f64> {
    use pipeline::TelemetryEvent as E;
    let rx = s.rx_packets;
    if rx == 0 {
        anyhow::bail!("{}: the switch received nothing", variant.label());
    }
    let dropped = s.dropped() + s.tx_full_drops;
    if dropped > rx / STRAY_SHARE {
        anyhow::bail!(
            "{}: the switch dropped {dropped} of {rx} packets ({:?}, {} at full tx queues)",
            variant.label(),
            s.drops
                .nonzero()
                .map(|(r, n)| format!("{} {n}", r.name()))
                .collect::<Vec<_>>(),
            s.tx_full_drops
        );
    }
    let ev = &s.telemetry.events;
    let role = match variant {
        Variant::Off => None,
        Variant::Transit => Some(E::TransitEncoded),
        Variant::EdgeIngress => Some(E::ShimInserted),
        Variant::EdgeEgress => Some(E::ShimStripped),
    };
    if let Some(e) = role
        && ev.get(e) < rx - rx / STRAY_SHARE
    {
        anyhow::bail!(
            "{}: {} of {rx} packets counted {}; the others went without its telemetry ({:?})",
            variant.label(),
            ev.get(e),
            e.name(),
            ev.nonzero()
                .map(|(e, n)| format!("{} {n}", e.name()))
                .collect::<Vec<_>>()
        );
    }
    let rate = steady_median(s, |i| i.rx_mpps);
    if rate <= 0.0 {
        anyhow::bail!(
            "{}: no steady rate in {} statistics intervals",
            variant.label(),
            s.intervals.len()
        );
    }
    Ok(rate)
}

/// The median of a testpmd run's per-second rates once forwarding (an error when it has
/// none: a ratio to 0 is no figure).
pub(crate) fn reference_rate(mode: &str, rx_mpps: &[f64]) -> anyhow::Result<f64> {
    let rate = median(forwarding(rx_mpps));
    if rate <= 0.0 {
        anyhow::bail!(
            "dpdk-testpmd --forward-mode={mode} gave no steady rate ({rx_mpps:?} Mpps a second)"
        );
    }
    Ok(rate)
}

/// The switch's per-interval rates past its first interval (its warm-up).
fn steady_rates(rates: &[f64]) -> &[f64] {
    if rates.len() > 1 { &rates[1..] } else { &[] }
}

/// Runs the benchmark.
pub fn run(opts: &ForwardOptions) -> anyhow::Result<ForwardResult> {
    crate::testpmd::binary()?;
    let (scratch, capture, frame_bytes) = bench_capture("forward", opts.flows)?;
    let shimmed = shimmed_capture(scratch.dir(), opts.flows)?;
    let (main, worker) = lcores();
    let variants = if opts.variants.is_empty() {
        vec![Variant::Off]
    } else {
        opts.variants.clone()
    };
    let mut results: Vec<VariantResult> = variants
        .iter()
        .map(|&variant| VariantResult {
            variant,
            switch_mpps: 0.0,
            ratio: 0.0,
            cycles_per_packet: 0.0,
            switch_drops: 0,
            digests_per_second: 0.0,
            digests_dropped: 0,
            exported_digests_per_second: 0.0,
            bytes_per_digest: 0.0,
            rounds: Vec::new(),
        })
        .collect();
    let mut rounds = Vec::new();
    for round in 0..opts.rounds.max(1) {
        let mut first = 0.0;
        for (i, r) in results.iter_mut().enumerate() {
            eprintln!(
                "round {}: {} for {} s ...",
                round + 1,
                r.variant.label(),
                opts.seconds
            );
            let sink = (r.variant == Variant::EdgeEgress)
                .then(|| crate::collector::Collector::start(false))
                .transpose()?;
            let s = run_switch(
                scratch.dir(),
                &variant_config(
                    r.variant,
                    &capture,
                    &shimmed,
                    worker,
                    main,
                    opts.hugepages,
                    sink.as_ref().map(|c| c.addr()),
                ),
                opts.seconds,
            )?;
            let got = sink.map(|c| c.stop());
            let sw = check_run(r.variant, &s)?;
            let ev = &s.telemetry.events;
            if sw > r.switch_mpps {
                r.switch_mpps = sw;
                r.switch_drops = s.dropped();
                r.digests_dropped = ev.get(pipeline::TelemetryEvent::DigestDropped);
                r.cycles_per_packet = steady_median(&s, |i| i.cycles_per_packet);
                r.digests_per_second =
                    ev.get(pipeline::TelemetryEvent::DigestRecorded) as f64 / s.seconds;
                if let Some(c) = &got {
                    r.exported_digests_per_second = c.digest_count as f64 / s.seconds;
                    r.bytes_per_digest = if c.digest_count > 0 {
                        c.digest_bytes as f64 / c.digest_count as f64
                    } else {
                        0.0
                    };
                }
            }
            r.rounds.push(sw);
            if i == 0 {
                first = sw;
            }
        }
        eprintln!(
            "round {}: dpdk-testpmd --forward-mode={} for {} s ...",
            round + 1,
            opts.reference_mode,
            opts.seconds
        );
        let rr = capture_reference(&capture, &opts.reference_mode, opts.seconds, opts.hugepages)
            .run()?;
        let rf = reference_rate(&opts.reference_mode, &rr.rx_mpps)?;
        eprintln!(
            "round {}: {} Mpps, reference {rf:.2} Mpps",
            round + 1,
            results
                .iter()
                .map(|r| format!("{:.2}", r.rounds.last().copied().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(" / ")
        );
        rounds.push((first, rf));
    }
    let reference_mpps = rounds.iter().map(|r| r.1).fold(0.0, f64::max);
    for r in &mut results {
        r.ratio = if reference_mpps > 0.0 {
            r.switch_mpps / reference_mpps
        } else {
            0.0
        };
    }
    let head = &results[0];
    Ok(ForwardResult {
        switch_mpps: head.switch_mpps,
        reference_mpps,
        ratio: head.ratio,
        cycles_per_packet: head.cycles_per_packet,
        reference_mode: opts.reference_mode.clone(),
        seconds: opts.seconds,
        flows: opts.flows,
        frame_bytes,
        switch_drops: results.iter().map(|r| r.switch_drops).sum(),
        rounds,
        variants: results,
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
    println!(
        "{:<36} {:>8} {:>7} {:>14} {:>14}",
        "forwarder", "Mpps", "ratio", "cycles/packet", "bytes/digest"
    );
    for v in &r.variants {
        println!(
            "{:<36} {:>8.2} {:>7.3} {:>14.1} {:>14}",
            v.variant.label(),
            v.switch_mpps,
            v.ratio,
            v.cycles_per_packet,
            if v.bytes_per_digest > 0.0 {
                format!("{:.2}", v.bytes_per_digest)
            } else {
                "-".into()
            }
        );
    }
    println!(
        "{:<36} {:>8.2} {:>7.3} {:>14} {:>14}",
        format!("dpdk-testpmd --forward-mode={}", r.reference_mode),
        r.reference_mpps,
        1.0,
        "-",
        "-"
    );
    for v in r.variants.iter().filter(|v| v.digests_per_second > 0.0) {
        println!(
            "{}: {:.2} M digests/s recorded, {:.2} M/s received by the sink (means over the whole run, its first second too; the Mpps above is the median second's), {} dropped at the ring",
            v.variant.label(),
            v.digests_per_second / 1e6,
            v.exported_digests_per_second / 1e6,
            v.digests_dropped
        );
    }
    if r.switch_drops > 0 {
        println!("warning: the switch dropped {} packets", r.switch_drops);
    }
}

#[cfg(test)]
mod tests {
    use control::summary::Interval;
    use pipeline::{DropReason, LocalCounters, TelemetryEvent};

    use super::*;

    /// A run of 1000 packets with steady intervals, `role` counted on `done` of them and
    /// `dropped` dropped as unroutable.
    fn run(role: Option<TelemetryEvent>, done: u64, dropped: u64) -> Summary {
        let mut s = Summary::from_totals(1, 4.0, &LocalCounters::default());
        s.rx_packets = 1000;
        s.drops.0[DropReason::NoRoute as usize] = dropped;
        if let Some(e) = role {
            s.telemetry.events.0[e as usize] = done;
        }
        s.intervals = (1..4)
            .map(|t| Interval {
                t: f64::from(t),
                rx_mpps: 10.0,
                tx_mpps: 10.0,
                cycles_per_packet: 100.0,
            })
            .collect();
        s
    }

    /// A run that dropped, skipped its role's telemetry or had no steady rate is refused
    /// rather than reported (each was cheaper than the variant it stood for).
    #[test]
    fn runs_that_do_not_measure_their_variant_are_refused() {
        let transit = Some(TelemetryEvent::TransitEncoded);
        assert!(check_run(Variant::Transit, &run(transit, 1000, 0)).is_ok());
        assert!(check_run(Variant::Off, &run(None, 0, 0)).is_ok());
        let err = check_run(Variant::Transit, &run(transit, 1000, 500)).unwrap_err();
        assert!(err.to_string().contains("dropped 500"), "{err}");
        let mut unknown = run(transit, 0, 0);
        unknown.telemetry.events.0[TelemetryEvent::UnknownPlan as usize] = 1000;
        let err = check_run(Variant::Transit, &unknown).unwrap_err();
        assert!(err.to_string().contains("unknown_plan"), "{err}");
        let egress = run(Some(TelemetryEvent::ShimStripped), 900, 0);
        assert!(check_run(Variant::EdgeEgress, &egress).is_err());
        let mut one_interval = run(None, 0, 0);
        one_interval.intervals.truncate(1);
        assert!(check_run(Variant::Off, &one_interval).is_err());
        let mut nothing = run(None, 0, 0);
        nothing.rx_packets = 0;
        assert!(check_run(Variant::Off, &nothing).is_err());
    }
}

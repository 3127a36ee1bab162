//! `pint-gen`: the traffic generator for testing the PINT switch. It sends its traffic on a
//! DPDK port (`--port`, e.g. a memif to the switch) and/or receives there (rates, probe loss,
//! reordering, latency), or writes the same traffic to a capture (`--write-pcap`) with
//! nanosecond timestamps from the traffic model's clock, without DPDK.

use std::collections::HashSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use pcap_file::TsResolution;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use serde::Serialize;

use bench::generator::frame::PacketFields;
use bench::generator::{
    FlowSizes, PacketSizes, Popularity, Rate, Traffic, TrafficSpec, emit_frame,
};
use telemetry::wire::MacAddr;
use telemetry::wire::prefix::Ipv4Prefix;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "pint-gen",
    version,
    allow_negative_numbers = true,
    about = "Traffic generator for the PINT switch",
    group(clap::ArgGroup::new("output").required(true).args(["write_pcap", "port"]))
)]
struct Cli {
    /// Distinct flows (5-tuples) in the pool, 1 to 4194304 (what a receiver tracks).
    #[arg(long, default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(bench::generator::tag::MAX_TRACKED_FLOWS)))]
    flows: u32,
    /// Flow popularity: uniform or zipf:S.
    #[arg(long, default_value = "uniform")]
    popularity: Popularity,
    /// Flow sizes: web-search, hadoop or fixed:BYTES. With them, flows arrive as a Poisson
    /// process at --load; without, every packet picks a flow.
    #[arg(long)]
    flow_sizes: Option<FlowSizes>,
    /// Offered load as a share of --link-rate (with --flow-sizes), in the flows' payload
    /// bytes; refused when their packets' headers and the wire's overhead would take the link
    /// past its rate (small --packet-size).
    #[arg(long, default_value_t = 0.5)]
    load: f64,
    /// Link rate, bits per second (suffixes K, M, G).
    #[arg(long, default_value = "10G", value_parser = parse_si)]
    link_rate: f64,
    /// Frame size without FCS (60 to 1514), or imix [default: 60; 1514 with --flow-sizes].
    #[arg(long)]
    packet_size: Option<PacketSizes>,
    /// Rate without --flow-sizes: max, or a number with pps or bps (e.g. 1Mpps, 5Gbps).
    /// Probes are counted in it (they take data packets' places).
    #[arg(long, default_value = "max", value_parser = parse_rate)]
    rate: Rate,
    /// Stop after this many packets, 1 or more (sending needs this or --duration).
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after this many seconds of traffic (the model's clock: a sender that cannot keep
    /// the pace asked for takes longer, and says so); sending needs this or --count.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Share of flows that are TCP (the rest UDP).
    #[arg(long, default_value_t = 0.0)]
    tcp_share: f64,
    /// IPv4 TTL, 1 to 255.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    ttl: u8,
    /// Probe streams (UDP, sequence number and send time in the payload).
    #[arg(long, default_value_t = 0)]
    probes: u32,
    /// Probes per second per stream (0.000001 or more).
    #[arg(long, default_value_t = 10.0)]
    probe_hz: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Source network of flows (default 10.0.0.0/16), and of probes when --dst-net is given
    /// (without it probes go from 10.2.0.0/16 to 10.3.0.0/16). Flows and probes take the
    /// networks' host addresses, never a network's own or its broadcast address.
    #[arg(long)]
    src_net: Option<Ipv4Prefix>,
    /// Destination network (repeat for several: flow i goes to the i-th mod n); default
    /// 10.1.0.0/16 (probes 10.3.0.0/16).
    #[arg(long)]
    dst_net: Vec<Ipv4Prefix>,
    /// On a port: sleep this many microseconds after a loop that neither sent nor received
    /// (0: spin, the lowest latency; a lab's generators sleep to share cores), 0 to 1000000.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    idle_sleep_us: u64,
    /// On a port: once the link is up, start sending at this Unix time (seconds), so that
    /// several generators start together.
    #[arg(long)]
    start_at: Option<f64>,
    /// Destination MAC of every frame.
    #[arg(long, default_value = "02:00:00:00:00:01")]
    dst_mac: MacAddr,
    /// Write the traffic to this capture (no DPDK); or --port.
    #[arg(long, conflicts_with = "port")]
    write_pcap: Option<PathBuf>,
    /// Send/receive on this DPDK device: a virtual device's arguments (e.g.
    /// net_memif0,role=client,socket=/tmp/pint.sock,socket-abstract=no) or a PCI address.
    #[arg(long)]
    port: Option<String>,
    /// On the port: send, receive, or both.
    #[arg(long, value_enum, default_value = "send")]
    mode: Mode,
    /// Receiving: stop once nothing arrived for this many seconds (after sending is done);
    /// a search trial waits for at most 0.25 s of quiet.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    until_idle: f64,
    /// Source MAC of every frame.
    #[arg(long, default_value = "02:00:00:00:aa:01")]
    src_mac: MacAddr,
    /// EAL arguments (after `--`); default: core 0, and no hugepages for a virtual device,
    /// or hugepages and only this device for a NIC (PCI address).
    #[arg(last = true)]
    eal: Vec<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Receiving: write every frame that arrives to this capture.
    #[arg(long, requires = "port")]
    capture: Option<PathBuf>,
    /// After sending or receiving and printing the summary, keep the port open until the
    /// peer leaves, at most this many seconds (so that it drains what was sent; a device
    /// under test or a receiver closes first).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    linger: f64,
    /// When the port's link goes down mid-run (its peer restarted), wait at most this many
    /// seconds for it to come back and go on (a memif client connects again by itself);
    /// the run's clock stands still meanwhile. A receiver waits no longer than its quiet
    /// time (--until-idle) left. 0: a sender stops there, cut short, and a receiver's
    /// memif client port stays down.
    #[arg(
        long,
        default_value_t = 0.0,
        conflicts_with = "zero_loss",
        value_name = "SECONDS"
    )]
    reconnect: f64,
    /// Search for the highest rate a device under test sends back without loss (RFC 2544
    /// style, on --port, sending and receiving): trials of --trial-seconds, the first at
    /// --rate (max: as fast as the port takes packets), then halving the bracket.
    #[arg(long, requires = "port", conflicts_with_all = ["count", "duration", "flow_sizes"])]
    zero_loss: bool,
    /// Seconds per search trial.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    trial_seconds: f64,
    /// Search: stop when the bracket is narrower than this share of its upper end.
    #[arg(long, default_value_t = 0.01)]
    precision: f64,
    /// Search: share of packets a trial may lose and still pass.
    #[arg(long, default_value_t = 0.0)]
    loss_tolerance: f64,
    /// Search: most trials.
    #[arg(long, default_value_t = 20)]
    max_trials: u32,
}

/// What to do on the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Send,
    Receive,
    Both,
}

fn parse_si(s: &str) -> Result<f64, String> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v * mult)
        .ok_or_else(|| format!("`{s}`: expected a positive number with an optional K, M or G"))
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    if s == "max" {
        return Ok(Rate::Max);
    }
    if let Some(n) = s.strip_suffix("pps") {
        return parse_si(n).map(Rate::Pps);
    }
    if let Some(n) = s.strip_suffix("bps") {
        return parse_si(n).map(Rate::Bps);
    }
    Err(format!(
        "rate `{s}`: expected max, or a number with pps or bps (e.g. 1Mpps, 5Gbps)"
    ))
}

/// What was generated.
#[derive(Debug, Serialize)]
struct Summary {
    packets: u64,
    /// Frame bytes (without FCS).
    bytes: u64,
    /// Data flows (pool 5-tuples) that sent at least one packet.
    flows_used: usize,
    /// Probe streams that sent at least one probe.
    probe_streams_used: usize,
    /// Probes among the packets.
    probes: u64,
    /// Model time from the first packet to the last, seconds.
    seconds: f64,
    /// Packets per second: the gaps between them over that time.
    pps: f64,
    /// Bits per second on the wire (frames plus 24 bytes each) at that rate.
    wire_bps: f64,
    capture: PathBuf,
}

fn main() {
    if let Err(e) = run() {
        bench::say_err!("pint-gen: {e:#}");
        std::process::exit(1);
    }
}

/// Options that only a run on a port takes (`--write-pcap` writes a capture without one).
const PORT_ONLY: [&str; 12] = [
    "capture",
    "mode",
    "until_idle",
    "linger",
    "reconnect",
    "start_at",
    "idle_sleep_us",
    "zero_loss",
    "trial_seconds",
    "precision",
    "loss_tolerance",
    "max_trials",
];

/// Refuses options given (`given(id)`) that this run would ignore, naming them.
fn refuse_ignored_flags(cli: &Cli, given: impl Fn(&str) -> bool) -> anyhow::Result<()> {
    let flag = |id: &str| format!("--{}", id.replace('_', "-"));
    // `--mode send` is what a capture holds: harmless with it.
    if cli.write_pcap.is_some()
        && let Some(id) = PORT_ONLY
            .iter()
            .find(|&&id| given(id) && !(id == "mode" && cli.mode == Mode::Send))
    {
        bail!(
            "{}: only with --port (--write-pcap writes a capture, with no port)",
            flag(id)
        );
    }
    if cli.mode == Mode::Receive
        && cli.port.is_some()
        && let Some(id) = ["count", "duration"].into_iter().find(|id| given(id))
    {
        bail!(
            "{}: a receiver takes what arrives until --until-idle ({} is for sending)",
            flag(id),
            flag(id)
        );
    }
    if cli.zero_loss
        && let Some(id) = ["capture", "start_at"].into_iter().find(|id| given(id))
    {
        bail!(
            "{}: not with --zero-loss (its trials send and receive on their own)",
            flag(id)
        );
    }
    // Flows of --flow-sizes arrive at --load; without them --rate sets the pace.
    if cli.flow_sizes.is_some() && given("rate") {
        bail!("--rate: not with --flow-sizes (its flows arrive at --load of --link-rate)");
    }
    if cli.flow_sizes.is_none() && given("load") {
        bail!("--load: only with --flow-sizes (without them, --rate sets the pace)");
    }
    if cli.probes == 0 && given("probe_hz") {
        bail!("--probe-hz: only with --probes N (probe streams)");
    }
    if !cli.zero_loss
        && let Some(id) = ["trial_seconds", "precision", "loss_tolerance", "max_trials"]
            .into_iter()
            .find(|id| given(id))
    {
        bail!("{}: only with --zero-loss", flag(id));
    }
    Ok(())
}

fn run() -> anyhow::Result<()> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    refuse_ignored_flags(&cli, |id| {
        matches.value_source(id) == Some(ValueSource::CommandLine)
    })?;
    if cli.src_mac.0[0] & 1 != 0 {
        bail!(
            "--src-mac {}: a group (multicast) address is no frame's source",
            cli.src_mac
        );
    }
    let unbounded = cli.count.is_none() && cli.duration.is_none();
    if unbounded && !cli.zero_loss && (cli.mode != Mode::Receive || cli.write_pcap.is_some()) {
        bail!("say how much: --count PACKETS or --duration SECONDS");
    }
    if let Some(d) = cli.duration
        && !(d.is_finite() && d > 0.0)
    {
        bail!("--duration {d}: must be above 0");
    }
    let spec = TrafficSpec {
        flows: cli.flows,
        popularity: cli.popularity.clone(),
        flow_sizes: cli.flow_sizes,
        load: cli.load,
        link_bps: cli.link_rate,
        // Flows of --flow-sizes are cut into full frames unless told otherwise: in 60-byte
        // frames their headers alone would take the link past its rate at the default load.
        packet_sizes: cli.packet_size.unwrap_or(if cli.flow_sizes.is_some() {
            PacketSizes::Fixed(1514)
        } else {
            PacketSizes::Fixed(60)
        }),
        rate: cli.rate,
        tcp_share: cli.tcp_share,
        ttl: cli.ttl,
        probe_streams: cli.probes,
        probe_hz: cli.probe_hz,
        seed: cli.seed,
        src_net: cli
            .src_net
            .map_or(TrafficSpec::default().src_net, |p| (p.addr, p.len)),
        dst_nets: cli.dst_net.iter().map(|p| (p.addr, p.len)).collect(),
    };
    let mut traffic = Traffic::new(spec).map_err(anyhow::Error::msg)?;
    let Some(pcap) = cli.write_pcap.clone() else {
        return on_port(&cli, traffic);
    };
    let tuples = traffic.tuples().to_vec();
    let spec_flows = traffic.spec().flows;
    let file = File::create(&pcap).with_context(|| format!("cannot create {}", pcap.display()))?;
    let header = PcapHeader {
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let fail = |e| dataplane::capture::pcap_error(&pcap, e);
    let mut w = PcapWriter::with_header(BufWriter::new(file), header).map_err(fail)?;
    let limit_ns = cli.duration.map(|d| (d * 1e9) as u64);
    let mut buf = [0u8; 2048];
    let src_mac = cli.src_mac;
    let (mut packets, mut bytes, mut probes, mut last_ns) = (0u64, 0u64, 0u64, 0u64);
    let mut first_ns = None;
    let mut used: HashSet<u32> = HashSet::new();
    loop {
        if cli.count.is_some_and(|c| packets >= c) {
            break;
        }
        let p = traffic.next_packet();
        if limit_ns.is_some_and(|l| p.time_ns >= l) {
            break;
        }
        probes += u64::from(p.probe.is_some());
        let payload = p.payload(p.time_ns);
        let fields = PacketFields {
            dst_mac: cli.dst_mac,
            src_mac,
            frame_len: usize::from(p.frame_len),
            ttl: cli.ttl,
            ident: packets as u16,
            tcp_seq: p.tcp_seq,
            payload: payload.as_slice(),
        };
        let n = emit_frame(&mut buf, &tuples[p.tuple as usize], &fields)
            .context("frame does not fit its headers")?;
        w.write_packet(&PcapPacket::new(
            Duration::from_nanos(p.time_ns),
            n as u32,
            &buf[..n],
        ))
        .map_err(fail)?;
        used.insert(p.tuple);
        packets += 1;
        bytes += n as u64;
        first_ns.get_or_insert(p.time_ns);
        last_ns = p.time_ns;
    }
    // Flushed here, so that a full disk is an error, not a capture cut short.
    dataplane::capture::flush(&pcap, w.into_writer())?;
    let seconds = (last_ns - first_ns.unwrap_or(last_ns)) as f64 / 1e9;
    let pps = bench::sender::per_second(packets, seconds);
    let s = Summary {
        packets,
        bytes,
        flows_used: used.iter().filter(|&&t| t < spec_flows).count(),
        probe_streams_used: used.iter().filter(|&&t| t >= spec_flows).count(),
        probes,
        seconds,
        pps,
        wire_bps: pps * 8.0 * (bytes + 24 * packets) as f64 / packets.max(1) as f64,
        capture: pcap,
    };
    if cli.json {
        bench::say!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        bench::say!(
            "pint-gen: {} packets ({} bytes, {} flows, {} probes of {} streams) over {:.6} s of traffic: {}, {} on the wire -> {}",
            s.packets,
            s.bytes,
            s.flows_used,
            s.probes,
            s.probe_streams_used,
            s.seconds,
            scaled(s.pps, "pps"),
            scaled(s.wire_bps, "bit/s"),
            s.capture.display()
        );
    }
    Ok(())
}

/// EAL arguments when none are given: one core; a virtual device without hugepages or the
/// PCI bus, a PCI device (a NIC) allowed alone, with hugepages (they must be set up).
fn default_eal(devargs: &str) -> Vec<String> {
    let name = dataplane::dpdk::port::device_name(devargs);
    let mut eal: Vec<String> = vec!["-l".into(), "0".into()];
    if control::config::is_pci_address(&name) {
        eal.extend(["-a".into(), name, "--in-memory".into()]);
    } else {
        eal.extend(
            ["--no-huge", "-m", "512", "--no-shconf", "--no-pci"]
                .iter()
                .map(|s| s.to_string()),
        );
    }
    eal.extend([
        "--no-telemetry".into(),
        "--log-level".into(),
        "warning".into(),
        "--file-prefix".into(),
        format!("pint-gen-{}", std::process::id()),
    ]);
    eal
}

/// The most seconds a time flag takes (about 115 days): more is a mistake, and would
/// overflow the clocks it is added to.
const MAX_FLAG_SECONDS: f64 = 1e7;

/// A flag's time in seconds, checked: 0 up to [`MAX_FLAG_SECONDS`].
fn seconds_flag(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !(0.0..=MAX_FLAG_SECONDS).contains(&v) {
        bail!("{flag} {v}: must be from 0 to {MAX_FLAG_SECONDS} seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

/// `--start-at`'s Unix time, checked: after 1970 and within a day from now (a time in
/// milliseconds, or a typo, would wait for ages).
fn start_time(t: f64) -> anyhow::Result<std::time::SystemTime> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    if !(t >= now - 86_400.0 && t <= now + 86_400.0) {
        bail!(
            "--start-at {t}: must be a Unix time in seconds within a day of now ({now:.0}); a time past starts at once"
        );
    }
    Ok(std::time::UNIX_EPOCH + Duration::from_secs_f64(t))
}

/// Sends and/or receives on a DPDK port.
fn on_port(cli: &Cli, traffic: Traffic) -> anyhow::Result<()> {
    let devargs = cli.port.clone().expect("--port or --write-pcap");
    let eal = if cli.eal.is_empty() {
        default_eal(&devargs)
    } else {
        cli.eal.clone()
    };
    let linger = seconds_flag("--linger", cli.linger)?;
    let reconnect = seconds_flag("--reconnect", cli.reconnect)?;
    let until_idle = seconds_flag("--until-idle", cli.until_idle)?;
    let start_at = cli.start_at.map(start_time).transpose()?;
    if cli.until_idle == 0.0 && (cli.mode != Mode::Send || cli.zero_loss) {
        // 0 would stop receiving at the first moment between two bursts.
        bail!("--until-idle 0: receiving needs a quiet time above 0 seconds to stop on");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A hang-up (its terminal closed, a `pkill -HUP` meant for others) stops it as cleanly:
    // its summary printed and its port closed in order, not dropped under its peer.
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let opts = bench::sender::PortRun {
        send: cli.mode != Mode::Receive,
        receive: cli.mode != Mode::Send,
        count: cli.count,
        duration: cli.duration,
        until_idle,
        macs: (cli.dst_mac, cli.src_mac),
        ttl: cli.ttl,
        progress: !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        linger,
        capture: cli.capture.clone(),
        idle_sleep: (cli.idle_sleep_us > 0).then(|| Duration::from_micros(cli.idle_sleep_us)),
        start_at,
        reconnect: (!reconnect.is_zero()).then_some(reconnect),
    };
    if cli.zero_loss {
        return zero_loss(cli, &eal, &devargs, traffic, &opts, &stop);
    }
    // The summary is printed before the port lingers (see `--linger`).
    let r = bench::sender::run(&eal, &devargs, traffic, &opts, &stop, |r| {
        print_run(cli.json, r)
    })?;
    // A run that could not send what it was asked to is no success, whatever it printed.
    if let Some(why) = r.sent.as_ref().and_then(|s| s.cut_short.as_ref()) {
        bail!(
            "sending stopped after {} packets, short of what was asked: {why}",
            r.sent.as_ref().map_or(0, |s| s.packets)
        );
    }
    Ok(())
}

fn print_run(json: bool, r: &bench::sender::PortReportOut) -> anyhow::Result<()> {
    // Said on stderr, JSON or not: the run took longer than asked, at a lower rate.
    if let Some(s) = r.sent.as_ref().filter(|s| s.fell_behind()) {
        bench::say_err!(
            "pint-gen: warning: sending fell {:.2} s behind the pace asked for (sent at {} over {:.3} s): this core or port sends no faster; a lower --rate, or a core of its own (EAL -l)",
            s.behind_s.unwrap_or(0.0),
            scaled(s.pps, "pps"),
            s.seconds
        );
    }
    if json {
        bench::say!("{}", serde_json::to_string_pretty(r)?);
    } else {
        if let Some(s) = &r.sent {
            bench::say!(
                "pint-gen: sent {} packets ({} bytes, {} probes) in {:.3} s: {}{}",
                s.packets,
                s.bytes,
                s.probes,
                s.seconds,
                scaled(s.pps, "pps"),
                match (&s.cut_short, s.interrupted) {
                    (Some(w), _) => format!(" (stopped early: {w})"),
                    (None, true) => " (stopped early by a signal)".to_owned(),
                    (None, false) => String::new(),
                }
            );
        }
        if let Some(x) = &r.received {
            bench::say!(
                "pint-gen: received {} packets ({} bytes) over {:.3} s: {}{}",
                x.packets,
                x.bytes,
                x.seconds,
                scaled(x.pps, "pps"),
                if x.interrupted {
                    " (stopped early by a signal)"
                } else {
                    ""
                }
            );
            if x.other > 0 {
                bench::say!(
                    "pint-gen: and {} other frames (not IPv4 UDP or TCP), not counted",
                    x.other
                );
            }
            if let Some(p) = &x.probes {
                let lat = p.latency_ns.map_or("-".into(), |l| {
                    format!(
                        "min {:.1} / median {:.1} / p99 {:.1} us",
                        l[0] as f64 / 1e3,
                        l[1] as f64 / 1e3,
                        l[2] as f64 / 1e3
                    )
                });
                let other = if p.other_clock > 0 {
                    format!(
                        " ({} probes left out: timed by another clock, e.g. a replayed capture)",
                        p.other_clock
                    )
                } else {
                    String::new()
                };
                bench::say!(
                    "pint-gen: probes received {}, lost {}, reordered {}, duplicated {}, not of a tracked stream {}; one-way latency {lat}{other}",
                    p.received,
                    p.lost,
                    p.reordered,
                    p.duplicates,
                    p.foreign
                );
            }
            if let Some(f) = &x.flows {
                print_flows(f);
            }
        }
        if let Some(lost) = r.lost {
            // Lost only where what it sends comes back to it (a loop through a device);
            // across a network its hosts receive one another's traffic.
            bench::say!(
                "pint-gen: sent less received: {lost} (lost, where the traffic comes back to this port)"
            );
        }
        // A last outage that did not come back is the sender's `stopped early` reason.
        if r.outages.count > 0 {
            bench::say!(
                "pint-gen: link outages waited through: {} ({:.3} s down in all, not in the times and rates above)",
                r.outages.count,
                r.outages.seconds
            );
        }
    }
    std::io::Write::flush(&mut std::io::stdout())?;
    Ok(())
}

/// A rate in `unit` with the prefix that shows it: `1.234 Mpps`, `56.000 kbit/s`, `300.0 pps`
/// (a lab's hundreds of packets a second read `0.000 Mpps`).
fn scaled(value: f64, unit: &str) -> String {
    for (factor, prefix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if value >= factor {
            return format!("{:.3} {prefix}{unit}", value / factor);
        }
    }
    format!("{value:.1} {unit}")
}

fn print_flows(f: &bench::generator::FlowLossReport) {
    bench::say!(
        "pint-gen: flows {}: tagged packets {}, lost {} (from sequence gaps), late {}, duplicated {}{}, flows with loss {}{}",
        f.flows,
        f.tagged,
        f.lost,
        f.late,
        f.duplicates,
        if f.too_old > 0 {
            format!(
                ", more than 64 behind {} (late or duplicated: counted in lost)",
                f.too_old
            )
        } else {
            String::new()
        },
        f.flows_with_loss,
        if f.worst.is_empty() {
            String::new()
        } else {
            format!(
                "; most lost: {}",
                f.worst
                    .iter()
                    .map(|w| format!(
                        "flow {} from {} lost {} of {}",
                        w.flow,
                        w.sender,
                        w.lost,
                        w.lost + w.received
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
}

/// The zero-loss rate search.
fn zero_loss(
    cli: &Cli,
    eal: &[String],
    devargs: &str,
    traffic: Traffic,
    opts: &bench::sender::PortRun,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<()> {
    if !(cli.trial_seconds.is_finite() && cli.trial_seconds > 0.0) {
        bail!("--trial-seconds {}: must be above 0", cli.trial_seconds);
    }
    if !(cli.precision > 0.0 && cli.precision < 1.0) {
        bail!("--precision {}: must be above 0 and below 1", cli.precision);
    }
    if !(0.0..1.0).contains(&cli.loss_tolerance) {
        bail!(
            "--loss-tolerance {}: must be from 0 to below 1",
            cli.loss_tolerance
        );
    }
    if cli.max_trials == 0 {
        bail!("--max-trials: must be at least 1");
    }
    let search = bench::sender::SearchOptions {
        trial_seconds: cli.trial_seconds,
        precision: cli.precision,
        loss_tolerance: cli.loss_tolerance,
        max_trials: cli.max_trials,
        drain: Duration::from_secs_f64(cli.until_idle.min(0.25)),
    };
    let opts = bench::sender::PortRun {
        send: true,
        receive: true,
        ..opts.clone()
    };
    bench::sender::search_zero_loss(eal, devargs, traffic, &opts, &search, stop, |r| {
        print_search(cli.json, r)
    })?;
    Ok(())
}

fn print_search(json: bool, r: &bench::sender::SearchReport) -> anyhow::Result<()> {
    if json {
        bench::say!("{}", serde_json::to_string_pretty(r)?);
        std::io::Write::flush(&mut std::io::stdout())?;
        return Ok(());
    }
    bench::say!(
        "{:>6} {:>12} {:>12} {:>12} {:>12} {:>10}  result",
        "trial",
        "offered Mpps",
        "sent Mpps",
        "sent",
        "received",
        "lost"
    );
    for (i, t) in r.trials.iter().enumerate() {
        bench::say!(
            "{:>6} {:>12} {:>12.3} {:>12} {:>12} {:>10}  {}",
            i + 1,
            t.offered_pps
                .map_or("max".into(), |p| format!("{:.3}", p / 1e6)),
            t.sent_pps / 1e6,
            t.sent,
            t.received,
            t.lost,
            if t.passed { "pass" } else { "fail" }
        );
    }
    bench::say!(
        "pint-gen: zero-loss rate {:.3} Mpps ({:.3} Gbit/s on the wire, {:.0}-byte frames on average){}",
        r.zero_loss_pps / 1e6,
        r.zero_loss_wire_bps / 1e9,
        r.mean_frame_bytes,
        if r.sender_limited {
            ": every packet came back at the sender's top rate (the device may go faster)"
        } else {
            ""
        }
    );
    if let Some([lo, hi]) = r.unsettled_pps {
        bench::say!(
            "pint-gen: the search stopped before its bracket was within --precision (at --max-trials, or a signal): the zero-loss rate is between {:.3} and {:.3} Mpps",
            lo / 1e6,
            hi / 1e6
        );
    }
    if let Some(f) = &r.received.flows {
        print_flows(f);
    }
    std::io::Write::flush(&mut std::io::stdout())?;
    Ok(())
}

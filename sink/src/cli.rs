//! The `pint-sink` command line: the server's flags and `pint-sink detect`, as a library
//! function so that the binary and the lab launcher run the same thing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::{DEFAULT_HTTP, DEFAULT_LISTEN};
use crate::{Sink, SinkConfig};
use anyhow::Context;
use clap::{Parser, Subcommand};

/// The PINT sink: decodes digests and flowsets from many switches into per-flow paths,
/// latency quantiles, counters and per-link loss.
#[derive(Debug, Parser)]
#[command(
    name = "pint-sink",
    version,
    args_conflicts_with_subcommands = true,
    allow_negative_numbers = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    run: Args,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Detects delay, loss and reordering problems in a measurement file; one JSON object
    /// per event per line on stdout, a summary on stderr.
    #[command(allow_negative_numbers = true)]
    Detect {
        /// The measurements.
        #[arg(long)]
        input: PathBuf,
        /// `csv` (header seq,send_time,delay_ms; send_time in seconds), `owamp` (owstats -v -U text), `ping`
        /// (ping -D output), or `auto`: told apart by the file's first lines.
        #[arg(long, default_value = "auto")]
        format: String,
        /// low, medium, high, or a number (1 = medium; larger is more sensitive).
        #[arg(long, default_value = "medium")]
        sensitivity: String,
        /// Window length, s (default: 5, longer for sparse series so that a window holds
        /// about 20 samples: 20 s for one probe a second).
        #[arg(long)]
        window: Option<f64>,
    },
}

#[derive(Debug, clap::Args)]
struct Args {
    /// Where switches connect (TCP).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// The HTTP API and /metrics.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: SocketAddr,
    /// No HTTP API.
    #[arg(long, conflicts_with = "http")]
    no_http: bool,
    /// Topology for path candidates: GraphML or GML (switch ID = node number + 1) or TOML
    /// adjacency (`links = [[1, 2], ...]` by switch ID). Without it: the switches heard from.
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Decode threads (default: the machine's cores).
    #[arg(long)]
    decode_threads: Option<usize>,
    /// Most flows tracked at once.
    #[arg(long, default_value_t = 1_000_000)]
    max_flows: usize,
    /// Seconds without news after which a flow is exported and forgotten.
    #[arg(long, default_value_t = 30.0)]
    idle_timeout: f64,
    /// Seconds between exports of a long flow's counters.
    #[arg(long, default_value_t = 60.0)]
    active_timeout: f64,
    /// How long an epoch waits for every switch's flowsets, ms.
    #[arg(long, default_value_t = 100)]
    epoch_grace_ms: u64,
    /// IPFIX collector (UDP HOST:PORT; a name is looked up once, at start).
    #[arg(long, value_parser = host_port)]
    ipfix: Option<SocketAddr>,
    /// Most IPFIX messages a second (0: unpaced).
    #[arg(long, default_value_t = sink_default_rate())]
    ipfix_rate: u32,
    /// Largest IPFIX message, bytes (the path's MTU less IP and UDP headers; 512 to 65507).
    #[arg(long, default_value_t = crate::ipfix::MAX_MESSAGE)]
    ipfix_message_bytes: usize,
    /// Seconds between IPFIX template resends.
    #[arg(long, default_value_t = 30.0)]
    template_interval: f64,
    /// Write per-flow records as JSON lines to this file (`-`: standard output).
    #[arg(long)]
    json_lines: Option<PathBuf>,
    /// Largest flowset a switch may declare, MiB.
    #[arg(long, default_value_t = 256)]
    max_flowset_mb: usize,
    /// Most switch connections open at once (each has a thread); beyond it new ones are
    /// closed at once and counted.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Most switch IDs kept (each its counters and plan in force, for the sink's life): a
    /// hello with another ID beyond them is refused.
    #[arg(long, default_value_t = crate::registry::DEFAULT_MAX_SWITCHES)]
    max_switches: usize,
    /// Most memory the flowsets waiting for their epoch may take together, MiB (beyond it
    /// new ones are dropped and counted).
    #[arg(long, default_value_t = 1024)]
    flowset_memory_mb: usize,
    /// Digest batches queued per decode thread before new ones are dropped (1 to 65536).
    #[arg(long, default_value_t = 1024)]
    queue_batches: usize,
    /// Online detection: low, medium, high, or a number (1 = medium).
    #[arg(long, default_value = "medium")]
    sensitivity: String,
    /// Write detected events as JSON lines to this file (`-`: standard output).
    #[arg(long)]
    event_lines: Option<PathBuf>,
}

const fn sink_default_rate() -> u32 {
    crate::ipfix::DEFAULT_RATE
}

/// HOST:PORT, HOST an address or a name (a collector's service name), looked up now.
fn host_port(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("`{s}` is not HOST:PORT with a HOST that resolves: {e}"))?
        .collect();
    // IPv4 first: `localhost` often resolves to ::1 first, where a collector bound to
    // 0.0.0.0 does not listen.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("`{s}`: the name has no address"))
}

fn secs(flag: &str, v: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| anyhow::anyhow!("--{flag}: `{v}` is not a duration"))
}

/// `pint-sink detect`.
fn detect(
    input: &std::path::Path,
    format: &str,
    sensitivity: &str,
    window: Option<f64>,
) -> anyhow::Result<()> {
    use crate::detect::{Params, Sensitivity, detect, input};
    use std::io::Write;
    let format = input::Format::parse(format).map_err(|e| anyhow::anyhow!("--format: {e}"))?;
    let s = Sensitivity::parse(sensitivity).map_err(|e| anyhow::anyhow!("--sensitivity: {e}"))?;
    if let Some(w) = window
        && !(w.is_finite() && (0.1..=3600.0).contains(&w))
    {
        anyhow::bail!("--window: `{w}` must be 0.1 to 3600 s");
    }
    let text =
        std::fs::read_to_string(input).with_context(|| format!("--input {}", input.display()))?;
    let format = format.unwrap_or_else(|| input::Format::guess(&text));
    let all = input::read_series(&text, format)
        .with_context(|| format!("{} (read as {})", input.display(), format.describe()))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for series in &all {
        let base = Params::with_sensitivity(s);
        let spacing = crate::detect::median_spacing_s(&series.samples);
        let window_s = window.unwrap_or_else(|| crate::detect::window_for(spacing, &base));
        let params = Params {
            window_s,
            merge_gap_s: base.merge_gap_s.max(window_s),
            ..base
        };
        let report = detect(&series.samples, &params);
        for e in &report.events {
            match &series.name {
                // Several series: each event says whose it is.
                Some(name) if all.len() > 1 => {
                    let mut v = serde_json::to_value(e)?;
                    v["series"] = serde_json::Value::String(name.clone());
                    serde_json::to_writer(&mut out, &v)?;
                }
                _ => serde_json::to_writer(&mut out, e)?,
            }
            out.write_all(b"\n")?;
        }
        out.flush()?;
        let of = match &series.name {
            Some(name) if all.len() > 1 => format!(" ({name})"),
            _ => String::new(),
        };
        eprintln!(
            "pint-sink detect: {}{of}, {} samples, {} lost, {} of {window_s} s, {}",
            format.describe(),
            report.samples,
            report.lost,
            plural(report.windows, "window"),
            plural(report.events.len() as u64, "event")
        );
        for w in crate::detect::series_warnings(&series.samples, spacing, window_s) {
            eprintln!("pint-sink detect: warning{of}: {w}");
        }
    }
    Ok(())
}

/// Runs `pint-sink` with these arguments (the first is the program name): the server until
/// SIGINT or SIGTERM, or `detect`.
pub fn main_with<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    if let Some(Cmd::Detect {
        input,
        format,
        sensitivity,
        window,
    }) = &cli.command
    {
        return detect(input, format, sensitivity, *window);
    }
    // First, so that a signal while the sink starts is acted on (a SIGHUP's default would
    // end it; the files it opens below are new anyway).
    let stop = Arc::new(AtomicBool::new(false));
    telemetry::signals::stop_on(
        &[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM],
        Arc::clone(&stop),
    )
    .context("installing signal handlers")?;
    signal_hook::flag::register(
        signal_hook::consts::SIGHUP,
        Arc::new(AtomicBool::new(false)),
    )
    .context("installing signal handlers")?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a terminal: a log file (pint-lab's sink.log) gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let open_files = crate::limits::raise_open_files();
    let config = config_of(cli.run)?;
    match open_files {
        Err(e) => tracing::warn!("cannot raise the limit on open files: {e}"),
        Ok(n) => {
            if let Some(w) = crate::limits::too_few_files(n, &config) {
                tracing::warn!("{w}");
            }
        }
    }
    if let Some(w) = crate::limits::address_space()
        .and_then(|limit| crate::limits::too_little_address_space(limit, &config))
    {
        tracing::warn!("{w}");
    }
    // A hang-up opens the JSON-lines files again (log rotation); it does not stop the sink.
    let reopen = config.reopen.clone();
    // SAFETY: the handler does one atomic add, which is async-signal-safe.
    unsafe {
        signal_hook::low_level::register(signal_hook::consts::SIGHUP, move || reopen.request())
    }
    .context("installing signal handlers")?;
    let (json_on, ipfix_on) = (config.json_lines.is_some(), config.ipfix.is_some());
    let lines_to_stdout = [&config.json_lines, &config.event_lines]
        .into_iter()
        .flatten()
        .any(|p| crate::lines::is_stdout(p));
    let sink = Sink::start(config)?;
    // The address line is for scripts (and tests) that start the sink on port 0; a reader
    // gone is no reason to stop (a panic aborts). It goes to stderr where stdout carries
    // JSON lines, so that every line there is one.
    {
        use std::io::Write as _;
        let line = format!(
            "pint-sink listening on {} (http {})",
            sink.listen_addr(),
            sink.http_addr()
                .map_or_else(|| "off".to_owned(), |a| a.to_string())
        );
        if lines_to_stdout {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            let _ = writeln!(std::io::stdout(), "{line}");
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::info!("stopping");
    let shared = Arc::clone(sink.shared());
    sink.stop();
    let flows: u64 = shared
        .shards
        .iter()
        .map(|s| s.table.lock().map_or(0, |t| t.stats.flows_created))
        .sum();
    let (epochs, _) = shared.epochs.counters.finished();
    let x = &shared.exports;
    let lost = |n: u64, what: &str| {
        if n > 0 {
            format!(" ({} lost: {what})", plural(n, "line"))
        } else {
            String::new()
        }
    };
    // Only the outputs asked for; epochs not decoded whole said (their counts were lost).
    let mut outputs = Vec::new();
    if json_on {
        outputs.push(format!(
            "{} exported as JSON lines{}",
            plural(x.json_records.load(Ordering::Relaxed), "flow record"),
            lost(x.json_errors.load(Ordering::Relaxed), "not written"),
        ));
    }
    if ipfix_on {
        outputs.push(format!(
            "{} over IPFIX",
            plural(x.ipfix_records.load(Ordering::Relaxed), "flow record")
        ));
    }
    let incomplete = shared.epochs.counters.incomplete.load(Ordering::Relaxed);
    tracing::info!(
        "stopped: {} known, {}, {} finished{}, {} found{}{}{}",
        plural(shared.registry.ids().len() as u64, "switch"),
        plural(flows, "flow"),
        plural(epochs, "epoch"),
        if incomplete > 0 {
            format!(" ({incomplete} not complete: a switch missing, or counts not decoded whole)")
        } else {
            String::new()
        },
        plural(shared.events.total(), "event"),
        lost(
            shared.events.line_counts.lost.load(Ordering::Relaxed),
            "not written to --event-lines"
        ),
        if outputs.is_empty() { "" } else { "; " },
        outputs.join(", "),
    );
    Ok(())
}

/// `n` and `noun`, plural but for one.
fn plural(n: impl Into<u64>, noun: &str) -> String {
    let n: u64 = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with("tch") || noun.ends_with("sh") || noun.ends_with('s') {
        // switches, batches; but epochs
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

/// Checks a server command line (the flags, without the program name) as `pint-sink`
/// reads it, without starting anything: for a launcher (pint-lab) that refuses a bad one
/// before it starts its processes. The error is the sink's own, on one line.
pub fn check_server_flags<I, T>(flags: I) -> Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = std::iter::once(std::ffi::OsString::from("pint-sink"))
        .chain(flags.into_iter().map(Into::into));
    let cli = Cli::try_parse_from(args).map_err(|e| {
        let said = e.to_string();
        let first = said.lines().next().unwrap_or_default();
        first.strip_prefix("error: ").unwrap_or(first).to_owned()
    })?;
    if cli.command.is_some() {
        return Err("a subcommand is not a server flag".into());
    }
    let config = config_of(cli.run).map_err(|e| e.to_string())?;
    config.validate().map_err(|e| e.to_string())
}

/// The server's configuration from its flags.
fn config_of(a: Args) -> anyhow::Result<SinkConfig> {
    let defaults = SinkConfig::default();
    Ok(SinkConfig {
        listen: a.listen,
        http: (!a.no_http).then_some(a.http),
        topology: a.topology,
        decode_threads: a.decode_threads.unwrap_or(defaults.decode_threads),
        max_flows: a.max_flows,
        idle_timeout: secs("idle-timeout", a.idle_timeout)?,
        epoch_grace: Duration::from_millis(a.epoch_grace_ms),
        ipfix: a.ipfix,
        active_timeout: secs("active-timeout", a.active_timeout)?,
        template_interval: secs("template-interval", a.template_interval)?,
        ipfix_rate: a.ipfix_rate,
        ipfix_message_bytes: a.ipfix_message_bytes,
        json_lines: a.json_lines,
        max_flowset_bytes: a.max_flowset_mb.saturating_mul(1 << 20),
        max_connections: a.max_connections,
        max_switches: a.max_switches,
        flowset_memory_bytes: a.flowset_memory_mb.saturating_mul(1 << 20),
        queue_batches: a.queue_batches,
        sensitivity: crate::detect::Sensitivity::parse(&a.sensitivity)
            .map_err(|e| anyhow::anyhow!("--sensitivity: {e}"))?,
        event_lines: a.event_lines,
        reopen: crate::lines::Reopen::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nouns_take_their_plurals() {
        assert_eq!(plural(2u64, "switch"), "2 switches");
        assert_eq!(plural(2863u64, "epoch"), "2863 epochs");
        assert_eq!(plural(1u64, "epoch"), "1 epoch");
        assert_eq!(plural(0u64, "flow record"), "0 flow records");
    }

    #[test]
    fn a_collector_is_an_address_or_a_name() {
        assert_eq!(
            host_port("127.0.0.1:4739"),
            Ok("127.0.0.1:4739".parse().unwrap())
        );
        let by_name = host_port("localhost:4739").unwrap();
        assert_eq!(by_name, "127.0.0.1:4739".parse().unwrap());
        for bad in ["localhost", "127.0.0.1", "no such host.invalid:1"] {
            assert!(host_port(bad).is_err(), "{bad}");
        }
    }

    /// A negative number is a bad value of its flag (it was taken for an unknown flag, and
    /// the message did not name the one given).
    #[test]
    fn a_negative_number_is_a_bad_value_of_its_flag() {
        let e = Cli::try_parse_from(["pint-sink", "--max-flows", "-5"]).unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("invalid value '-5' for '--max-flows"),
            "{said}"
        );
        // In the detect subcommand too (a setting its parent does not hand down): taken as
        // the flag's value, which the run then refuses with its reason.
        let detect = ["pint-sink", "detect", "--input", "m.csv", "--window", "-5"];
        let parsed = Cli::try_parse_from(detect);
        assert!(parsed.is_ok(), "{}", parsed.unwrap_err());
    }
}

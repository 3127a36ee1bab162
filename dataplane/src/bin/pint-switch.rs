//! `pint-switch`: the PINT software switch.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use control::Config;
use dataplane::demo::Demo;
use dataplane::switch::{self, RunOptions};

/// A DPDK software switch: IPv4 forwarding (LPM, ECMP) with in-band telemetry.
#[derive(Parser, Debug)]
#[command(name = "pint-switch", version, allow_negative_numbers = true)]
struct Cli {
    /// The switch's configuration file (TOML; keys in docs/config.md); or --demo.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Validate the configuration, print it with every default resolved, and exit.
    #[arg(long)]
    check_config: bool,
    /// Run the embedded demo: a generated capture through virtual devices, no NIC or
    /// hugepages needed (5 seconds unless --duration says otherwise).
    #[arg(long, conflicts_with = "config")]
    demo: bool,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Stop once no packet has arrived for this many milliseconds, 1 or more (for finite
    /// captures).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    until_idle: Option<u64>,
    /// Write the final summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    /// Print the built-in query file (the paper's plan, which a switch runs when its config
    /// names none) and exit: a start for one of your own.
    #[arg(long, conflicts_with_all = ["config", "demo"])]
    print_queries: bool,
    /// Begin every line of output with the time (UTC, RFC 3339), for output kept in a file.
    #[arg(long)]
    timestamps: bool,
    /// EAL arguments, after `--`; they replace the configured or generated ones.
    #[arg(last = true, value_name = "EAL_ARGS")]
    eal: Vec<String>,
}

fn seconds(s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| anyhow::anyhow!("--duration {s} is not a positive number of seconds"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            control::say_err!("pint-switch: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// What the routes file held, as a comment for `--check-config` (the config names only the
/// file): enough to see that a whole table was read.
fn routes_comment(config: &Config) -> String {
    let Some(path) = &config.routes_file else {
        return String::new();
    };
    let groups: std::collections::HashSet<*const control::config::NextHopConfig> = config
        .routes
        .iter()
        .map(|r| std::sync::Arc::as_ptr(&r.next_hops).cast())
        .collect();
    format!(
        "\n# {}: {} routes read; {} routes in all, sharing {} next-hop groups\n",
        path.display(),
        config.file_routes,
        config.routes.len(),
        groups.len()
    )
}

/// The query plan a start would install, as comments for `--check-config` (the config
/// names only its file): its version, bits per packet and query sets.
fn plan_comment(config: &Config) -> String {
    if !config.telemetry.enabled {
        return String::new();
    }
    match config.telemetry.load_queries() {
        Ok((_, plan)) => {
            let lines: Vec<String> = plan.describe().lines().map(|l| format!("# {l}")).collect();
            format!(
                "\n# The query plan a start installs ({}):\n{}\n",
                config
                    .telemetry
                    .queries
                    .as_ref()
                    .map_or("the built-in paper plan".to_owned(), |q| q
                        .display()
                        .to_string()),
                lines.join("\n")
            )
        }
        // The config's own check compiled it: only a file changed since can fail here.
        Err(e) => format!("\n# The query file does not compile now: {e}\n"),
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.print_queries {
        control::say_inline!("{}", control::config::telemetry::PAPER_QUERIES);
        return Ok(());
    }
    control::output::stamp_lines(cli.timestamps && !cli.check_config);
    if cli.config.is_none() && !cli.demo {
        anyhow::bail!(
            "give --config FILE (a switch's configuration: docs/config.md), or --demo to try the switch with no NIC and no configuration"
        );
    }
    // Checked before the demo prepares its capture.
    let duration = match (cli.duration, cli.demo) {
        (Some(s), _) => Some(seconds(s)?),
        (None, true) => Some(Duration::from_secs(5)),
        (None, false) => None,
    };
    // First, so that a signal while it starts (a reload meant for the switches running,
    // a stop) is acted on rather than ending it with the demo's capture left behind.
    let signals = (!cli.check_config)
        .then(switch::SwitchSignals::install)
        .transpose()?;
    let mut demo = None;
    let config = if cli.demo {
        let d = Demo::prepare()?;
        // On stderr: with --check-config, stdout is the configuration alone.
        if cli.check_config {
            control::say_err!(
                "demo: the configuration of the demo; its capture, {}, is made for each run and removed when it ends: give `rx_pcap` a capture of your own to run it as a config",
                d.capture().display()
            );
        } else {
            control::say_err!(
                "demo: {} packets of mixed traffic in {} replayed for {} s",
                d.packets,
                d.capture().display(),
                cli.duration.unwrap_or(5.0)
            );
        }
        let c = d.config.clone();
        demo = Some(d);
        c
    } else {
        let path = cli
            .config
            .as_ref()
            .expect("--config without --demo, checked above");
        Config::from_file(path)?
    };
    if cli.check_config {
        // What a start checks before DPDK (capture files, lcores on this machine, mbufs
        // for the captures) fails here as it would there; what depends on who runs it
        // (privileges, free hugepages) is a warning.
        let worked_out =
            dataplane::resources::preflight(&config, dataplane::resources::Preflighting::Check)?;
        dataplane::resources::outputs_apart(
            &config,
            cli.config.as_deref(),
            cli.summary_json.as_deref(),
        )?;
        let printed = config.try_to_toml().map_err(|e| {
            anyhow::anyhow!(
                "the configuration is valid but cannot be printed as TOML: {e} (TOML holds UTF-8 text alone: a path that is not UTF-8 cannot be printed; the switch runs with it)"
            )
        })?;
        control::say_inline!(
            "{}{}{}{}",
            printed,
            routes_comment(&config),
            worked_out.worked_out(&config),
            plan_comment(&config)
        );
        return Ok(());
    }
    let opts = RunOptions {
        duration,
        until_idle: cli.until_idle.map(Duration::from_millis),
        summary_json: cli.summary_json,
        config_file: cli.config,
        eal_args: (!cli.eal.is_empty()).then_some(cli.eal),
        signals,
    };
    switch::run(config, &opts)?;
    drop(demo);
    Ok(())
}

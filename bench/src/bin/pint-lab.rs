//! `pint-lab`: runs a lab (`configs/labs/*.toml`): several pint-switch processes linked
//! over memif, pint-gen traffic between their hosts, impairments on chosen links, pint-sink
//! decoding it all; prints a status line while it runs and a report at the end.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use bench::lab::{Lab, Programs, RunOptions};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "pint-lab",
    version,
    allow_negative_numbers = true,
    about = "Runs a lab network of PINT switches, traffic and the sink"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Runs a lab and writes its report.
    #[command(allow_negative_numbers = true)]
    Run {
        /// The lab file (e.g. configs/labs/leaf-spine.toml).
        lab: PathBuf,
        /// The run directory (default: target/pint-lab/NAME-UNIXTIME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds of traffic (overrides the lab's duration_s).
        #[arg(long)]
        duration: Option<f64>,
        /// No status line.
        #[arg(long)]
        quiet: bool,
        /// Flows shown in the report.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Exit with status 1 when a check fails.
        #[arg(long)]
        strict: bool,
        /// Keep the lab up this many seconds after the traffic (the sink's live page); Ctrl-C
        /// ends the wait and the lab reports as usual.
        #[arg(long, default_value_t = 0.0)]
        hold: f64,
    },
    /// Writes a lab's switch configurations and topology to a directory, starts nothing.
    #[command(allow_negative_numbers = true)]
    Configs {
        /// The lab file.
        lab: PathBuf,
        /// Where to write them.
        #[arg(long)]
        out: PathBuf,
    },
    /// Runs a switch (pint-switch's code), when pint-switch is not beside pint-lab.
    #[command(hide = true)]
    Switch(bench::switch_cmd::SwitchArgs),
    /// Runs the sink (pint-sink's code), when pint-sink is not beside pint-lab.
    #[command(hide = true)]
    Sink {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The longest `--hold`.
const MAX_HOLD_S: f64 = 7.0 * 86_400.0;
fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pint-lab: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Run {
            lab,
            out,
            duration,
            quiet,
            top,
            strict,
            hold,
        } => {
            let mut lab = Lab::from_file(&lab)?;
            if let Some(d) = duration {
                let most = bench::lab::spec::MAX_DURATION_S;
                anyhow::ensure!(
                    d.is_finite() && (1.0..=most).contains(&d),
                    "--duration {d}: 1 to {most} s (keep the lab up longer with --hold)"
                );
                lab.duration_s = d;
            }
            let dir = out.unwrap_or_else(|| {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                PathBuf::from("target/pint-lab").join(format!("{}-{t}", lab.name))
            });
            // Three descriptors per process the lab runs: a large one passes 1024.
            if let Err(e) = sink::limits::raise_open_files() {
                eprintln!("pint-lab: warning: cannot raise the limit on open files: {e}");
            }
            let stop = Arc::new(AtomicBool::new(false));
            // The lab's processes are in groups of their own (a Ctrl-C or a closed terminal
            // reaches the lab, which stops them in order).
            // A second Ctrl-C while the lab stops exits at once (its processes go with it:
            // each dies with its parent); a hang-up only stops.
            telemetry::signals::stop_on(
                &[
                    signal_hook::consts::SIGINT,
                    signal_hook::consts::SIGTERM,
                    signal_hook::consts::SIGHUP,
                ],
                Arc::clone(&stop),
            )
            .context("installing signal handlers")?;
            anyhow::ensure!(
                hold.is_finite() && (0.0..=MAX_HOLD_S).contains(&hold),
                "--hold {hold}: 0 to {MAX_HOLD_S} seconds (a week)"
            );
            let opts = RunOptions {
                dir,
                status: !quiet,
                top,
                hold: Duration::from_secs_f64(hold),
            };
            let report = bench::lab::run::run(&lab, &Programs::beside_me()?, &opts, &stop)?;
            let written = report.write(&report.dir);
            bench::say_inline!("{}", report.text());
            written.context("the report above is on screen only")?;
            Ok(if strict && !report.all_ok() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::Configs { lab, out } => {
            let lab = Lab::from_file(&lab)?;
            if let Some(note) = lab.left_out_note() {
                eprintln!("pint-lab: {note}");
            }
            for w in lab.warnings() {
                eprintln!("pint-lab: warning: {w}");
            }
            // A run directory, which `run --out` then takes.
            let dir = bench::lab::run::make_run_dir(&out, lab.topology.len() as u32)?;
            let at = bench::lab::plan::Endpoints {
                dir,
                sink_listen: sink::config::DEFAULT_LISTEN.parse()?,
                sink_http: sink::config::DEFAULT_HTTP.parse()?,
                main_lcore: 0,
                worker_lcores: vec![1],
            };
            let plan = bench::lab::plan::LabPlan::new(&lab, &at)?;
            plan.write()?;
            bench::lab::plan::LabPlan::write_topology(&lab, &at.dir)?;
            for s in &plan.switches {
                println!("{}", s.config.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Switch(a) => {
            bench::switch_cmd::run(a)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Sink { args } => {
            sink::cli::main_with(std::iter::once("pint-sink".to_owned()).chain(args))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

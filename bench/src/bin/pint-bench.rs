//! `pint-bench`: benchmarks and reproductions of the PINT switch.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bench::forward::{self, ForwardOptions};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Benchmarks and paper reproductions for the PINT switch"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Forwarding rate of pint-switch against dpdk-testpmd on the same devices, one core each.
    Forward {
        /// Seconds each forwarder runs (the first second is warm-up and not counted).
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
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Runs the switch (the same code as pint-switch); the benchmarks start it this way.
    #[command(hide = true)]
    Switch {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        duration: f64,
        #[arg(long)]
        summary_json: PathBuf,
    },
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

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Forward {
            seconds,
            flows,
            reference,
            rounds,
            hugepages,
            json,
        } => {
            if seconds < 2 {
                anyhow::bail!("--seconds must be at least 2 (the first second is warm-up)");
            }
            let r = forward::run(&ForwardOptions {
                seconds,
                flows,
                reference_mode: reference,
                rounds,
                hugepages,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                forward::print_table(&r);
            }
        }
        Cmd::Switch {
            config,
            duration,
            summary_json,
        } => {
            let config = control::Config::from_file(&config)?;
            let opts = dataplane::switch::RunOptions {
                duration: Some(Duration::from_secs_f64(duration)),
                summary_json: Some(summary_json),
                ..Default::default()
            };
            dataplane::switch::run(&config, &opts)?;
        }
    }
    Ok(())
}

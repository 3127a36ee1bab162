//! The hidden `switch` subcommand of `pint-bench` and `pint-lab`: pint-switch's own code
//! (`dataplane::switch::run`) behind a few flags, for the harnesses that start switches and
//! cannot rely on the `pint-switch` binary being built beside them.

use std::path::PathBuf;
use std::time::Duration;

/// The flags.
#[derive(Debug, clap::Args)]
pub struct SwitchArgs {
    /// The configuration file.
    #[arg(long)]
    pub config: PathBuf,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: f64,
    /// Write the summary here.
    #[arg(long)]
    pub summary_json: PathBuf,
    /// Stop once nothing arrived for this many milliseconds (1 or more).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub until_idle: Option<u64>,
}

/// Runs the switch until the duration passes, it goes idle, or SIGINT.
pub fn run(a: SwitchArgs) -> anyhow::Result<()> {
    // First, as pint-switch does: a signal while the route table is built is acted on.
    let signals = dataplane::switch::SwitchSignals::install()?;
    let config = control::Config::from_file(&a.config)?;
    let opts = dataplane::switch::RunOptions {
        duration: Some(
            Duration::try_from_secs_f64(a.duration)
                .map_err(|_| anyhow::anyhow!("--duration {}: not a duration", a.duration))?,
        ),
        summary_json: Some(a.summary_json),
        config_file: Some(a.config),
        until_idle: a.until_idle.map(Duration::from_millis),
        signals: Some(signals),
        ..Default::default()
    };
    dataplane::switch::run(config, &opts).map(drop)
}

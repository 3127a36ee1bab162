//! The embedded demo: a generated capture of mixed traffic replayed through the switch on
//! virtual devices (no NIC, no hugepages), with its counters and rate printed.

use std::path::PathBuf;

use control::Config;
use telemetry::wire::MacAddr;

use crate::capture;
use crate::resources::available_cpus;

/// The demo's configuration template; `@CAPTURE@`, `@WORKER@` are filled in at run time.
pub const TEMPLATE: &str = include_str!("../../configs/demo.toml");

/// Flows in the demo capture.
pub const FLOWS: u32 = 10_000;

/// A prepared demo: the capture on disk and the configuration that uses it.
pub struct Demo {
    /// Directory holding the capture (removed on drop).
    pub dir: PathBuf,
    /// The configuration.
    pub config: Config,
    /// Packets in the capture.
    pub packets: u64,
}

impl Demo {
    /// Writes the capture into a fresh temporary directory and builds the configuration,
    /// with the worker on the highest available CPU.
    pub fn prepare() -> anyhow::Result<Demo> {
        let dir = crate::temp_dir::private_temp_dir("pint-demo")
            .map_err(|e| anyhow::anyhow!("the demo's capture: {e}"))?;
        // The capture's path goes into a device argument string, where a comma ends it.
        if dir.to_string_lossy().contains([',', '=']) {
            let _ = std::fs::remove_dir(&dir);
            anyhow::bail!(
                "the demo's capture: its directory {} (TMPDIR) holds a `,` or `=`, which DPDK's device arguments cannot carry: set TMPDIR to another directory",
                dir.display()
            );
        }
        let cap = dir.join("demo.pcap");
        let frames = capture::demo_mix(FLOWS, MacAddr([0x02, 0, 0, 0, 0, 0x01]));
        let packets = match capture::write_pcap(&cap, frames.iter().map(Vec::as_slice)) {
            Ok(n) => n,
            Err(e) => {
                // Nothing half-written left behind.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e.context("the demo's capture (TMPDIR)"));
            }
        };
        let worker = available_cpus().into_iter().max().unwrap_or(0);
        let text = TEMPLATE
            .replace("@CAPTURE@", &cap.display().to_string())
            .replace("@WORKER@", &worker.to_string());
        let config =
            Config::from_toml(&text).map_err(|e| anyhow::anyhow!("embedded demo config: {e}"))?;
        Ok(Demo {
            dir,
            config,
            packets,
        })
    }

    /// Path of the capture.
    pub fn capture(&self) -> PathBuf {
        self.dir.join("demo.pcap")
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

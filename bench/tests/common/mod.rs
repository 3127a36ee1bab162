//! Helpers shared by the benchmark crate's integration tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Runs `tshark -r pcap` with checksum validation on and `args` (times in UTC), and returns
/// its standard output; fails the test if tshark fails.
pub fn tshark(pcap: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .env("TZ", "UTC")
        .arg("-r")
        .arg(pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args(args)
        .output()
        .expect("tshark runs (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

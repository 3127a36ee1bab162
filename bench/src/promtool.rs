//! Checking a metrics exposition with Prometheus's own `promtool check metrics` (Debian's
//! `prometheus` package, installed by `scripts/setup.sh`).

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `promtool check metrics` on `body`; the error holds promtool's complaints.
pub fn check_metrics(body: &str) -> Result<(), String> {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool does not run ({e}); scripts/setup.sh installs it"))?;
    p.stdin
        .take()
        .expect("piped")
        .write_all(body.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = p.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

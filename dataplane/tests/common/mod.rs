//! Helpers for tests that run the real `pint-switch` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("pint-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The CPU for a worker (the highest available) so tests run on any machine.
pub fn worker_lcore() -> u32 {
    dataplane::resources::available_cpus()
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// Runs pint-switch with `args`, killing it after `limit` (a hang fails the test).
pub fn run_switch(args: &[&str], limit: Duration) -> Output {
    run_switch_watching(args, limit, || {})
}

/// [`run_switch`], calling `watch` every 20 ms while the switch runs.
pub fn run_switch_watching(args: &[&str], limit: Duration, mut watch: impl FnMut()) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_pint-switch"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pint-switch");
    let pid = child.id();
    let start = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output().expect("wait"));
    while !waiter.is_finished() {
        if start.elapsed() > limit {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let out = waiter.join().unwrap();
            panic!(
                "pint-switch {args:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        watch();
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap()
}

/// Runs pint-switch with `args` and `--summary-json` into `dir`, expecting success; returns
/// its output and the summary it wrote.
pub fn run_for_summary(dir: &Scratch, args: &[&str]) -> (String, control::summary::Summary) {
    let path = dir.path("summary.json");
    let mut all = args.to_vec();
    all.extend(["--summary-json", path.to_str().unwrap()]);
    let out = run_switch(&all, Duration::from_secs(60));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let s = std::fs::read_to_string(&path).unwrap();
    (t, control::summary::Summary::from_json(&s).unwrap())
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn write(path: &Path, s: &str) {
    std::fs::write(path, s).unwrap();
}

/// A switch replaying `capture` from memory (`infinite_rx`) on an edge port `in` and
/// routing 10.1.0.0/16 out of port `out` (`out_device`, with the extra keys `out_keys`),
/// with `extra_top` at the top level and its worker on `lcore`.
pub fn capture_config(
    capture: &Path,
    extra_top: &str,
    out_device: &str,
    out_keys: &str,
    lcore: u32,
) -> String {
    let in_device = format!("net_pcap0,rx_pcap={},infinite_rx=1", capture.display());
    switch_config((&in_device, ""), extra_top, (out_device, out_keys), lcore)
}

/// A switch with an edge port `in` (device and extra keys) routing 10.1.0.0/16 out of a
/// fabric port `out` (device and extra keys), with `extra_top` at the top level, stats
/// every 200 ms and its worker on `lcore`.
pub fn switch_config(
    (in_device, in_keys): (&str, &str),
    extra_top: &str,
    (out_device, out_keys): (&str, &str),
    lcore: u32,
) -> String {
    format!(
        r#"switch_id = 4
{extra_top}
[stats]
interval_ms = 200
[[ports]]
name = "in"
device = "{in_device}"
role = "edge"
mac = "02:00:00:00:00:01"
{in_keys}
[[ports]]
name = "out"
device = "{out_device}"
role = "fabric"
mac = "02:00:00:00:01:00"
{out_keys}
[[workers]]
lcore = {lcore}
rx = ["in"]
[[routes]]
prefix = "10.1.0.0/16"
next_hops = [{{ port = "out", mac = "02:00:00:00:02:00" }}]
"#
    )
}

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
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap()
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

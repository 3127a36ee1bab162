//! Runs `dpdk-testpmd` as the reference forwarder on the same virtual devices and reads its
//! per-second rates.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

/// A testpmd run: forwarding mode, devices, cores.
#[derive(Debug, Clone)]
pub struct TestpmdRun {
    /// `--forward-mode` (io, 5tswap, macswap, txonly, ...).
    pub mode: String,
    /// `--vdev` arguments, in port order.
    pub vdevs: Vec<String>,
    /// The main lcore and the forwarding lcore.
    pub lcores: (u32, u32),
    /// Mbufs in testpmd's pool.
    pub mbufs: u32,
    /// How long to forward.
    pub seconds: u64,
    /// Use hugepages instead of `--no-huge`.
    pub hugepages: bool,
    /// Distinguishes testpmds running at the same time (their EAL file prefixes).
    pub name: &'static str,
    /// Further testpmd arguments (e.g. `--port-topology=loop`).
    pub extra: Vec<String>,
}

/// coreutils' stdbuf, to make testpmd's output line-buffered.
const STDBUF: &str = "/usr/bin/stdbuf";

/// Seconds to wait for testpmd to start forwarding before timing its run anyway.
const START_TIMEOUT_S: u64 = 60;

/// A testpmd that is forwarding; [`Running::finish`] stops it and reads its rates.
pub struct Running {
    child: std::process::Child,
    /// Its EAL file prefix.
    prefix: String,
    reader: std::thread::JoinHandle<String>,
    /// Says when testpmd has started forwarding.
    started: std::sync::mpsc::Receiver<()>,
}

/// What testpmd measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestpmdResult {
    /// Per-second rx rates of the receiving port, in Mpps, in order.
    pub rx_mpps: Vec<f64>,
    /// Per-second tx rates of the sending port, in Mpps, in order.
    pub tx_mpps: Vec<f64>,
}

/// The path of dpdk-testpmd (the first in `PATH`, else where Debian and a source install
/// put it), or an error that says how to install it.
pub fn binary() -> anyhow::Result<String> {
    binary_in(std::env::var_os("PATH"))
}

/// [`binary`], with `path` for the `PATH` variable.
fn binary_in(path: Option<std::ffi::OsString>) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let in_path = path
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let candidates = in_path.into_iter().map(|d| d.join("dpdk-testpmd")).chain(
        ["/usr/bin/dpdk-testpmd", "/usr/local/bin/dpdk-testpmd"].map(std::path::PathBuf::from),
    );
    for p in candidates {
        if std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0) {
            return Ok(p.display().to_string());
        }
    }
    anyhow::bail!(
        "dpdk-testpmd not found: install it with `apt-get install -y dpdk-dev` (or run scripts/setup.sh)"
    )
}

impl TestpmdRun {
    /// Runs testpmd for `seconds`, stops it with SIGINT, and parses its rates.
    pub fn run(&self) -> anyhow::Result<TestpmdResult> {
        let running = self.spawn()?;
        // Its start-up (memory set-up) takes seconds on a busy machine: time the run from
        // when it starts forwarding.
        running.wait_started(Duration::from_secs(START_TIMEOUT_S));
        std::thread::sleep(Duration::from_secs(self.seconds + 1));
        running.finish()
    }

    /// Starts testpmd (it forwards until [`Running::finish`]).
    pub fn spawn(&self) -> anyhow::Result<Running> {
        let prefix = format!("pint-ref-{}-{}", self.name, std::process::id());
        let mut args: Vec<String> = vec![
            "-l".into(),
            format!("{},{}", self.lcores.0, self.lcores.1),
            "--main-lcore".into(),
            self.lcores.0.to_string(),
            "--file-prefix".into(),
            prefix.clone(),
            "--no-pci".into(),
            "--no-telemetry".into(),
        ];
        if self.hugepages {
            args.extend(["--in-memory".into(), "--socket-mem".into(), "1024".into()]);
        } else {
            args.extend([
                "--no-shconf".into(),
                "--no-huge".into(),
                "-m".into(),
                "1024".into(),
            ]);
        }
        for v in &self.vdevs {
            args.extend(["--vdev".into(), v.clone()]);
        }
        args.extend([
            "--".into(),
            format!("--forward-mode={}", self.mode),
            format!("--total-num-mbufs={}", self.mbufs),
            "--stats-period".into(),
            "1".into(),
            "--nb-cores=1".into(),
            "--no-lsc-interrupt".into(),
            "--burst=32".into(),
        ]);
        args.extend(self.extra.iter().cloned());
        // Line-buffered output (`stdbuf -oL`, where there is one), so that the line saying
        // forwarding has started arrives when it is printed.
        let mut cmd = if std::path::Path::new(STDBUF).exists() {
            let mut c = Command::new(STDBUF);
            c.arg("-oL").arg(binary()?);
            c
        } else {
            Command::new(binary()?)
        };
        let mut child = cmd
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting dpdk-testpmd")?;
        let stdout = child.stdout.take().expect("piped");
        let (started_tx, started) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut s = String::new();
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("start packet forwarding") {
                    let _ = started_tx.send(());
                }
                s.push_str(&line);
                s.push('\n');
            }
            s
        });
        Ok(Running {
            child,
            prefix,
            reader,
            started,
        })
    }
}

impl Running {
    /// Waits until testpmd has started forwarding, at most `limit`; whether it has.
    pub fn wait_started(&self, limit: Duration) -> bool {
        self.started.recv_timeout(limit).is_ok()
    }

    /// Stops testpmd with SIGINT and parses its rates.
    pub fn finish(mut self) -> anyhow::Result<TestpmdResult> {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = wait_timeout(&mut self.child, Duration::from_secs(20))?;
        // EAL makes a runtime directory even with nothing to put in it, and leaves it.
        let _ = std::fs::remove_dir(eal_runtime_dir(&self.prefix));
        let out = self.reader.join().unwrap_or_default();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let result = parse_rates(&out);
        if result.rx_mpps.is_empty() {
            anyhow::bail!(
                "dpdk-testpmd printed no rates ({}); its output ends with:\n{}\n{}",
                status.map_or_else(|| "its exit status unknown".to_owned(), |s| s.to_string()),
                tail(&out, 15),
                tail(&err, 15)
            );
        }
        Ok(result)
    }
}

/// The directory DPDK's EAL makes for a process of file prefix `prefix`: under `/var/run`
/// as root, else under `$XDG_RUNTIME_DIR` or `/tmp`.
pub fn eal_runtime_dir(prefix: &str) -> std::path::PathBuf {
    // SAFETY: getuid has no preconditions.
    let base = if unsafe { libc::getuid() } == 0 {
        "/var/run".into()
    } else {
        std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/tmp".into())
    };
    std::path::Path::new(&base).join("dpdk").join(prefix)
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn wait_timeout(
    child: &mut std::process::Child,
    limit: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads testpmd's periodic port statistics: for each stats block, the largest Rx-pps and
/// Tx-pps over the ports (the receiving and the sending port).
pub fn parse_rates(out: &str) -> TestpmdResult {
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    let (mut block_rx, mut block_tx, mut in_block) = (0f64, 0f64, false);
    let flush = |rx: &mut Vec<f64>, tx: &mut Vec<f64>, brx: f64, btx: f64| {
        rx.push(brx / 1e6);
        tx.push(btx / 1e6);
    };
    for line in out.lines() {
        let l = line.trim();
        if l.contains("NIC statistics for port 0") {
            if in_block {
                flush(&mut rx, &mut tx, block_rx, block_tx);
            }
            in_block = true;
            block_rx = 0.0;
            block_tx = 0.0;
        }
        let value = |key: &str| -> Option<f64> {
            l.strip_prefix(key)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        if let Some(v) = value("Rx-pps:") {
            block_rx = block_rx.max(v);
        }
        if let Some(v) = value("Tx-pps:") {
            block_tx = block_tx.max(v);
        }
    }
    if in_block {
        flush(&mut rx, &mut tx, block_rx, block_tx);
    }
    TestpmdResult {
        rx_mpps: rx,
        tx_mpps: tx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dpdk-testpmd first in `PATH` is the one run; a file there that cannot be run is
    /// passed over.
    #[test]
    fn testpmd_is_found_in_the_path_first() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::scratch::Scratch::new("testpmd-path").unwrap();
        let (off, on) = (dir.path("off"), dir.path("on"));
        for (d, mode) in [(&off, 0o644), (&on, 0o755)] {
            std::fs::create_dir(d).unwrap();
            let p = d.join("dpdk-testpmd");
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let path = std::env::join_paths([&off, &on]).unwrap();
        assert_eq!(
            binary_in(Some(path)).unwrap(),
            on.join("dpdk-testpmd").display().to_string()
        );
    }

    #[test]
    fn parses_stats_blocks() {
        let out = "
  ######################## NIC statistics for port 0  ########################
  RX-packets: 65858784   RX-missed: 0          RX-bytes:  3951527040
  Throughput (since last show)
  Rx-pps:     16412748          Rx-bps:   7878119096
  Tx-pps:            0          Tx-bps:            0
  ######################## NIC statistics for port 1  ########################
  Rx-pps:            0          Rx-bps:            0
  Tx-pps:     16412782          Tx-bps:            0
  ######################## NIC statistics for port 0  ########################
  Rx-pps:     16528535          Rx-bps:   7933697088
  Tx-pps:            0          Tx-bps:            0
  ######################## NIC statistics for port 1  ########################
  Rx-pps:            0          Rx-bps:            0
  Tx-pps:     16528542          Tx-bps:            0
";
        let r = parse_rates(out);
        assert_eq!(r.rx_mpps.len(), 2);
        assert!((r.rx_mpps[1] - 16.528535).abs() < 1e-9);
        assert!((r.tx_mpps[0] - 16.412782).abs() < 1e-9);
    }
}

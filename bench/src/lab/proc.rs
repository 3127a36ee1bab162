//! The lab's child processes: started with their output going to a log file in the run
//! directory and to a ring of last lines (shown when one dies), watched for lines that say
//! they are ready, stopped by signal in a chosen order, never left behind.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines kept of a process's output for when it dies.
const TAIL_LINES: usize = 30;

/// A program and the arguments that come before the caller's.
#[derive(Debug, Clone)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// Leading arguments (a subcommand).
    pub lead: Vec<String>,
}

impl Program {
    /// `name` next to the running executable, or else the running executable with
    /// `fallback` as its first argument (a hidden subcommand that runs the same code).
    pub fn beside_me(name: &str, fallback: Option<&str>) -> anyhow::Result<Program> {
        let me = std::env::current_exe()?;
        let beside = me.with_file_name(name);
        if beside.is_file() {
            return Ok(Program {
                path: beside,
                lead: Vec::new(),
            });
        }
        match fallback {
            Some(sub) => Ok(Program {
                path: me,
                lead: vec![sub.to_owned()],
            }),
            None => anyhow::bail!(
                "{} not found: pint-lab runs the pint-gen installed beside it (in a checkout: cargo build --release -p bench)",
                beside.display()
            ),
        }
    }
}

/// Whether `line` starts a backtrace: anyhow's after an error, the standard library's after
/// a panic.
fn is_backtrace_header(line: &str) -> bool {
    matches!(line.trim_end(), "Stack backtrace:" | "stack backtrace:")
}

/// What a process printed so far.
#[derive(Debug)]
struct Output {
    tail: VecDeque<String>,
    /// Its stdout, while [`Output::keep_stdout`] (the log has all of it).
    stdout: String,
    /// Whether stdout is kept in memory: a switch prints statistics every second, for as
    /// long as a lab is held (up to a week), and only its first lines are read here.
    keep_stdout: bool,
    /// Texts watched for in its output (either stream), each with whether a line held it.
    marks: Vec<(String, bool)>,
}

/// A running child.
pub struct Proc {
    /// Its name in messages (`switch leaf1`).
    pub name: String,
    /// Whether it said it was ready (set by the caller that waited for it).
    pub ready: bool,
    child: Child,
    out: Arc<Mutex<Output>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    status: Option<ExitStatus>,
    /// DPDK's runtime directory of the process, removed (when empty) once it has ended: a
    /// process killed cannot remove its own.
    runtime_dir: Option<PathBuf>,
}

impl Proc {
    /// Starts `program args`, its output appended to `log`.
    pub fn start(
        name: &str,
        program: &Program,
        args: &[String],
        log: &Path,
    ) -> anyhow::Result<Proc> {
        Proc::start_logged(name, program, args, log, false)
    }

    /// [`Proc::start`], every line of its log begun with the time it was read (UTC, RFC
    /// 3339, milliseconds; as `pint-switch --timestamps` would, and for DPDK's own lines
    /// too) when `stamped`: for a program whose log holds no times of its own. Only the
    /// log is stamped; the lines watched for and shown are as printed.
    pub fn start_logged(
        name: &str,
        program: &Program,
        args: &[String],
        log: &Path,
        stamped: bool,
    ) -> anyhow::Result<Proc> {
        // The log first: a child once started is never left without its `Proc`.
        let file = Arc::new(Mutex::new(std::fs::File::create(log)?));
        let mut cmd = Command::new(&program.path);
        cmd.args(&program.lead)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own: a Ctrl-C at the terminal reaches the lab alone, which
            // then stops its processes in their order (each link's memif server first).
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // Should the lab die without stopping it, it is told to stop.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            anyhow::anyhow!("cannot start {name} ({}): {e}", program.path.display())
        })?;
        let out = Arc::new(Mutex::new(Output {
            tail: VecDeque::new(),
            stdout: String::new(),
            keep_stdout: true,
            marks: Vec::new(),
        }));
        let mut readers = Vec::new();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        for (stream, is_stdout) in [
            (Box::new(stdout) as Box<dyn std::io::Read + Send>, true),
            (Box::new(stderr), false),
        ] {
            let (file, out) = (Arc::clone(&file), Arc::clone(&out));
            readers.push(std::thread::spawn(move || {
                let mut in_backtrace = false;
                for line in BufReader::new(stream).split(b'\n').map_while(Result::ok) {
                    let line = String::from_utf8_lossy(&line).into_owned();
                    {
                        let mut file = file.lock().expect("log lock");
                        let _ = if stamped {
                            writeln!(file, "{} {line}", control::output::time_now())
                        } else {
                            writeln!(file, "{line}")
                        };
                    }
                    let mut o = out.lock().expect("output lock");
                    for (text, hit) in o.marks.iter_mut() {
                        *hit |= line.contains(text.as_str());
                    }
                    if is_stdout && o.keep_stdout {
                        o.stdout.push_str(&line);
                        o.stdout.push('\n');
                    }
                    // A backtrace (RUST_BACKTRACE set) stays in the log: in the last lines
                    // it would push out the error it follows.
                    if in_backtrace && line.starts_with(char::is_whitespace) {
                        continue;
                    }
                    in_backtrace = is_backtrace_header(&line);
                    let line = if in_backtrace {
                        format!("{line} (in the log)")
                    } else {
                        line
                    };
                    // DPDK's memif client retries print the same line many times.
                    if o.tail.back() != Some(&line) {
                        if o.tail.len() == TAIL_LINES {
                            o.tail.pop_front();
                        }
                        o.tail.push_back(line);
                    }
                }
            }));
        }
        Ok(Proc {
            name: name.to_owned(),
            ready: false,
            child,
            out,
            readers,
            status: None,
            runtime_dir: None,
        })
    }

    /// Its process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it printed on stdout so far (until [`Proc::forget_stdout`]).
    pub fn stdout(&self) -> String {
        self.out.lock().expect("output lock").stdout.clone()
    }

    /// Whether its stdout so far holds `text`.
    pub fn stdout_contains(&self, text: &str) -> bool {
        self.out.lock().expect("output lock").stdout.contains(text)
    }

    /// Keeps its stdout from now on only in its log and its last lines: for a process
    /// whose output is read only until it is ready.
    pub fn forget_stdout(&self) {
        let mut o = self.out.lock().expect("output lock");
        o.keep_stdout = false;
        o.stdout = String::new();
    }

    /// Watches its output, from now on, for a line that holds `text` ([`Proc::said`]).
    pub fn watch(&self, text: &str) {
        let mut o = self.out.lock().expect("output lock");
        o.marks.push((text.to_owned(), false));
    }

    /// Whether a line it printed since [`Proc::watch`] held `text`.
    pub fn said(&self, text: &str) -> bool {
        let o = self.out.lock().expect("output lock");
        o.marks.iter().any(|(t, hit)| t == text && *hit)
    }

    /// Its last lines of output.
    pub fn tail(&self) -> String {
        let o = self.out.lock().expect("output lock");
        o.tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Waits until its stdout has a line for which `ready` says yes (returns it), or it
    /// exits, or `timeout` passes, or `stop` is set (Ctrl-C: `Stopped::Interrupted`).
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        stop: &AtomicBool,
        ready: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let t0 = Instant::now();
        loop {
            if let Some(line) = self.stdout().lines().find(|l| ready(l)) {
                return Ok(line.to_owned());
            }
            if stop.load(Ordering::Relaxed) {
                return Err(super::run::Stopped::Interrupted.into());
            }
            if let Some(st) = self.exited() {
                // Everything it printed before it exited, for the message.
                self.join_readers();
                anyhow::bail!(
                    "{} exited ({st}) before it was ready:\n{}",
                    self.name,
                    self.tail()
                );
            }
            if t0.elapsed() > timeout {
                anyhow::bail!(
                    "{} not ready after {:.0} s:\n{}",
                    self.name,
                    timeout.as_secs_f64(),
                    self.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Says where DPDK keeps the process's runtime files (`/var/run/dpdk/PREFIX`): removed
    /// once it has ended, if empty.
    pub fn set_runtime_dir(&mut self, dir: PathBuf) {
        self.runtime_dir = Some(dir);
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
            if self.status.is_some() {
                self.ended();
            }
        }
        self.status
    }

    /// What is left to do once it has ended.
    fn ended(&mut self) {
        if let Some(d) = self.runtime_dir.take() {
            let _ = std::fs::remove_dir(d);
        }
    }

    /// Sends `sig`.
    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            // SAFETY: signalling our own child, which has not been reaped.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }

    /// Waits at most `timeout` for it to exit; then kills it. Returns how it ended.
    pub fn finish(&mut self, timeout: Duration) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.exited() {
                self.join_readers();
                return st;
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                let st = self.child.wait().expect("wait for a killed child");
                self.status = Some(st);
                self.ended();
                self.join_readers();
                return st;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks it to stop (SIGINT) and waits at most `timeout` (then kills it).
    pub fn stop(&mut self, timeout: Duration) -> ExitStatus {
        self.signal(libc::SIGINT);
        self.finish(timeout)
    }

    /// Waits until everything it printed is read (after it exited).
    pub(crate) fn join_readers(&mut self) {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    /// [`Proc::join_readers`] for at most `limit`: a process of its own that kept the pipes
    /// open would hold them for good. Readers still going are left to finish on their own.
    pub(crate) fn join_readers_within(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        // The finished ones are done (all they read is in); the others stay.
        self.readers.retain(|r| !r.is_finished());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.ended();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c`, to run a script as a process.
    fn shell() -> Program {
        Program {
            path: "/bin/sh".into(),
            lead: vec!["-c".into()],
        }
    }

    #[test]
    fn a_wait_ends_at_ctrl_c() {
        let dir = crate::scratch::Scratch::new("proc-interrupt").unwrap();
        let sh = shell();
        let mut p =
            Proc::start("sink", &sh, &["exec sleep 300".into()], &dir.path("p.log")).unwrap();
        let stop = AtomicBool::new(true);
        let err = p
            .wait_for(Duration::from_secs(120), &stop, |l| l == "ready")
            .unwrap_err();
        assert!(
            matches!(
                err.downcast_ref::<super::super::run::Stopped>(),
                Some(super::super::run::Stopped::Interrupted)
            ),
            "{err}"
        );
        p.stop(Duration::from_secs(5));
    }

    #[test]
    fn a_dying_process_shows_its_error_not_its_backtrace() {
        let dir = crate::scratch::Scratch::new("proc-backtrace").unwrap();
        let log = dir.path("p.log");
        let sh = shell();
        let script = "echo 'Error: --topology: bad' >&2; echo 'Stack backtrace:' >&2; \
                      for i in $(seq 0 40); do echo \"  $i: frame\" >&2; \
                      echo '             at src/x.rs:1:1' >&2; done; exit 1";
        let mut p = Proc::start("sink", &sh, &[script.into()], &log).unwrap();
        let err = p
            .wait_for(Duration::from_secs(20), &AtomicBool::new(false), |l| {
                l == "ready"
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("sink exited"), "{err}");
        assert!(err.contains("Error: --topology: bad"), "{err}");
        assert!(err.contains("Stack backtrace: (in the log)"), "{err}");
        assert!(!err.contains("frame"), "{err}");
        // The log keeps all of it.
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.contains("  40: frame"));
    }

    #[test]
    fn a_stamped_log_begins_each_line_with_the_time() {
        let dir = crate::scratch::Scratch::new("proc-stamped").unwrap();
        let log = dir.path("p.log");
        let sh = shell();
        let go = dir.path("go");
        let script = format!(
            "echo ready; echo 'to stderr' >&2; while [ ! -e {} ]; do sleep 0.01; done; echo last",
            go.display()
        );
        let mut p = Proc::start_logged("switch", &sh, &[script], &log, true).unwrap();
        // What is watched for is the line as printed, without the time.
        p.wait_for(Duration::from_secs(20), &AtomicBool::new(false), |l| {
            l == "ready"
        })
        .unwrap();
        std::fs::write(&go, "").unwrap();
        assert!(p.finish(Duration::from_secs(20)).success());
        let logged = std::fs::read_to_string(&log).unwrap();
        let mut lines = 0;
        for line in logged.lines() {
            // 2026-12-07T13:27:18.681Z
            let (t, text) = line.split_once(' ').unwrap();
            let b = t.as_bytes();
            assert!(
                b.len() == 24 && b[10] == b'T' && b[19] == b'.' && t.ends_with('Z'),
                "{line}"
            );
            assert!(["ready", "to stderr", "last"].contains(&text), "{line}");
            lines += 1;
        }
        assert_eq!(lines, 3, "{logged}");
    }

    #[test]
    fn a_process_ready_keeps_its_output_in_its_log_only() {
        let dir = crate::scratch::Scratch::new("proc-forget").unwrap();
        let log = dir.path("p.log");
        let sh = shell();
        // Ready, then statistics until told to go on, then a last line.
        let go = dir.path("go");
        let script = format!(
            "echo ready; while [ ! -e {} ]; do echo 'stats: rx 1 tx 1'; sleep 0.01; done; echo last",
            go.display()
        );
        let mut p = Proc::start("switch", &sh, &[script], &log).unwrap();
        p.wait_for(Duration::from_secs(20), &AtomicBool::new(false), |l| {
            l == "ready"
        })
        .unwrap();
        p.forget_stdout();
        std::thread::sleep(Duration::from_millis(200));
        std::fs::write(&go, "").unwrap();
        let t0 = Instant::now();
        while p.exited().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(20), "the script ends");
            std::thread::sleep(Duration::from_millis(10));
        }
        p.join_readers();
        assert_eq!(p.stdout(), "", "nothing kept after it was ready");
        assert!(!p.stdout_contains("stats"));
        assert!(p.tail().ends_with("last"), "{}", p.tail());
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.starts_with("ready\nstats: rx 1 tx 1\n"), "{logged}");
        assert!(logged.ends_with("last\n"), "{logged}");
    }
}

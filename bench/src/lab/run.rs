//! Runs a lab: the sink first (on free loopback ports), then every switch, then the
//! generators (all starting to send at one moment, once every one is connected); a status
//! line while the traffic runs; then the teardown in the order memif needs (switches in
//! node order: on every link the server, the lower node, leaves before its client; the
//! generators, memif clients of their switches, after them), and the sink last. Any process
//! that dies early stops the lab with its last output.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use control::summary::Summary;

use super::http::get_json;
use super::plan::{Endpoints, GENERATOR_LINGER_S, LabPlan, sink_args};
use super::proc::{Proc, Program};
use super::report::{Collected, LabReport};
use super::spec::Lab;

/// How to run a lab.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The run directory (created).
    pub dir: PathBuf,
    /// Print a status line while it runs.
    pub status: bool,
    /// Flows shown in the report.
    pub top: usize,
    /// Keep the lab up this long after the traffic (to look at the live page).
    pub hold: Duration,
}

/// The programs a lab starts.
#[derive(Debug, Clone)]
pub struct Programs {
    /// pint-switch (or this program's `switch` subcommand).
    pub switch: Program,
    /// pint-sink (or this program's `sink` subcommand).
    pub sink: Program,
    /// pint-gen.
    pub generator: Program,
}

impl Programs {
    /// The programs next to the running one.
    pub fn beside_me() -> anyhow::Result<Programs> {
        Ok(Programs {
            switch: Program::beside_me("pint-switch", Some("switch"))?,
            sink: Program::beside_me("pint-sink", Some("sink"))?,
            generator: Program::beside_me("pint-gen", None)?,
        })
    }
}

/// Why a lab stopped early.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// Ctrl-C.
    #[error("interrupted")]
    Interrupted,
    /// A process died.
    #[error("{name} died ({status}){also}; its last output:\n{tail}")]
    Died {
        /// Which.
        name: String,
        /// How.
        status: String,
        /// What it said last.
        tail: String,
        /// The others found dead at the same look (one may have died of another's death:
        /// a memif peer gone), as `; also ended: a (status), b (status)`, or empty.
        also: String,
    },
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CPUs this process may run on.
fn cpus() -> Vec<u32> {
    let mut v: Vec<u32> = core_ids();
    v.sort_unstable();
    v
}

fn core_ids() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// Runs `lab`: starts everything, waits for the traffic, stops everything, and returns the
/// report, for the caller to write to the run directory ([`LabReport::write`]) and show.
/// `stop` (Ctrl-C) ends it early, cleanly.
pub fn run(
    lab: &Lab,
    programs: &Programs,
    opts: &RunOptions,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<LabReport> {
    let dir = make_run_dir(&opts.dir, lab.topology.len() as u32)?;
    let cpus = cpus();
    let Some((&main_lcore, rest)) = cpus.split_first().filter(|(_, r)| !r.is_empty()) else {
        anyhow::bail!("a lab needs at least two CPUs (a switch's control thread and its worker)");
    };
    let worker_lcores = rest.to_vec();
    let mut procs = Procs::default();
    let outcome = run_inner(
        lab,
        programs,
        opts,
        stop,
        &dir,
        main_lcore,
        worker_lcores,
        &mut procs,
    );
    // Whatever happened, nothing is left behind: every process stopped, and the memif
    // sockets of servers that could not remove their own (one killed) removed.
    procs.teardown();
    remove_sockets(&dir);
    let collected = outcome?;
    // Written by the caller, which shows it whether or not it could be written.
    LabReport::build(lab, collected, opts.top)
}

/// Removes the lab's memif sockets left in `dir` (their servers are gone), and only the
/// lab's: a run directory such as /tmp holds other programs' sockets.
fn remove_sockets(dir: &std::path::Path) {
    let _ = remove_matching(dir, is_lab_socket);
}

/// Whether `name` is one of a lab's memif socket files (`link-A-B.sock`, `hosts-N.sock`).
fn is_lab_socket(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(stem) = name.strip_suffix(".sock") else {
        return false;
    };
    if let Some(n) = stem.strip_prefix("hosts-") {
        return digits(n);
    }
    stem.strip_prefix("link-")
        .and_then(|ab| ab.split_once('-'))
        .is_some_and(|(a, b)| digits(a) && digits(b))
}

/// Whether `name` is a file an earlier run of a lab left that this run would otherwise
/// read or show as its own: a switch's summary (written only when it exits: a switch
/// killed at its stop would lend this run the earlier one's counts), the report, the
/// sink's appended lines, a memif socket of a server that was killed; and the configs and
/// logs of switches and generators this run may not have (an earlier lab's larger
/// topology), which would pass for this run's.
fn is_previous_output(name: &str) -> bool {
    let of = |prefix: &str, ext: &[&str]| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.rsplit_once('.'))
            .is_some_and(|(stem, e)| !stem.is_empty() && ext.contains(&e))
    };
    matches!(
        name,
        "report.json"
            | "report.html"
            | "events.jsonl"
            | "flows.jsonl"
            | "sink.log"
            | "topology.toml"
    ) || of("switch-", &["json", "toml", "log"])
        || of("gen-", &["log"])
        || is_lab_socket(name)
}

/// The file that marks a directory as a lab's run directory: only such a directory has an
/// earlier run's files removed.
const RUN_DIR_MARK: &str = ".pint-lab-run";

/// Makes `dir` (created when missing) the run directory of a lab of `nodes` switches and
/// returns its canonical path; a directory its sockets could not be made in is refused
/// before it is made (as written; through links, once made, and then removed again when
/// this call made it).
pub fn make_run_dir(dir: &std::path::Path, nodes: u32) -> anyhow::Result<PathBuf> {
    let existed = dir.exists();
    if !existed {
        crate::lab::plan::check_socket_paths(&std::path::absolute(dir)?, nodes)?;
    }
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating the run directory {}: choose another with --out",
            dir.display()
        )
    })?;
    let checked = dir
        .canonicalize()
        .map_err(anyhow::Error::from)
        .and_then(|c| {
            crate::lab::plan::check_socket_paths(&c, nodes)?;
            Ok(c)
        });
    let canonical = match checked {
        Ok(c) => c,
        Err(e) => {
            if !existed {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e);
        }
    };
    prepare_run_dir(&canonical)?;
    Ok(canonical)
}

/// Makes `dir` this run's: a new or empty directory is marked as a run directory; one
/// marked before has the earlier run's files removed (the sink appends its lines; a switch
/// writes its summary only when it exits, so one killed at its stop would lend this run the
/// earlier one's); any other is refused, so that nothing of another program's is removed
/// or mistaken for the lab's.
pub fn prepare_run_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    let mark = dir.join(RUN_DIR_MARK);
    if mark.exists() {
        if let Err((path, e)) = remove_matching(dir, is_previous_output) {
            anyhow::bail!(
                "cannot remove {} from an earlier run: {e} (give --out another directory)",
                path.display()
            );
        }
        if let Some(left) = std::fs::read_dir(dir)?
            .flatten()
            .find(|e| e.file_name().to_str().is_some_and(is_previous_output))
        {
            anyhow::bail!(
                "cannot remove {} from an earlier run",
                left.path().display()
            );
        }
    } else if std::fs::read_dir(dir)?.next().is_some() {
        anyhow::bail!(
            "{} holds files and is not a lab's run directory (it has no {RUN_DIR_MARK}): give \
             --out a new or empty directory",
            dir.display()
        );
    }
    std::fs::write(
        &mark,
        "a pint-lab run directory: its files are replaced by the next run\n",
    )
    .with_context(|| format!("writing {}", mark.display()))
}

/// Removes the files in `dir` whose names `select` picks; the first that could not be
/// removed, and why (one gone already is no failure).
fn remove_matching(
    dir: &std::path::Path,
    select: fn(&str) -> bool,
) -> Result<(), (PathBuf, std::io::Error)> {
    let mut first = Ok(());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(select)
                && let Err(err) = std::fs::remove_file(e.path())
                && err.kind() != std::io::ErrorKind::NotFound
                && first.is_ok()
            {
                first = Err((e.path(), err));
            }
        }
    }
    first
}

/// What a switch says once it holds (SIGUSR1).
const HOLDING: &str = "holding (SIGUSR1)";
/// How long the stop waits for every switch to hold.
const HOLD_WAIT: Duration = Duration::from_secs(15);

/// The lab's processes, in the order they stop.
#[derive(Default)]
struct Procs {
    sink: Option<Proc>,
    switches: Vec<(u32, Proc, PathBuf)>,
    generators: Vec<(u32, Proc)>,
}

impl Procs {
    /// Stops the switches: first every one holds (SIGUSR1: every port closed to its workers,
    /// so that no worker is inside a call on a memif port when its peer leaves, which DPDK's
    /// memif driver does not survive), then each stops, in node order (each link's memif
    /// server first). Returns the switches' summaries.
    fn stop_switches(&mut self) -> Vec<(u32, Option<Summary>, String)> {
        self.hold_switches();
        let mut out = Vec::new();
        for (n, p, summary) in self.switches.iter_mut() {
            let st = p.stop(Duration::from_secs(30));
            let s = std::fs::read_to_string(&*summary)
                .ok()
                .and_then(|t| Summary::from_json(&t).ok());
            out.push((*n, s, format!("{st}")));
        }
        out
    }

    fn stop_generators(&mut self) {
        for (_, g) in self.generators.iter_mut() {
            // A generator lingers until its switch closes the link; then it exits.
            if g.finish(Duration::from_secs(10)).code().is_none() {
                g.signal(libc::SIGTERM);
            }
        }
    }

    /// Has every switch that is up hold (SIGUSR1) and waits, at most [`HOLD_WAIT`] in all,
    /// until each says so; says which did not. (One still starting may not handle the
    /// signal yet, and has no worker to catch.)
    fn hold_switches(&mut self) {
        for (_, p, _) in self.switches.iter().filter(|(_, p, _)| p.ready) {
            p.signal(libc::SIGUSR1);
        }
        let t0 = Instant::now();
        for (_, p, _) in self.switches.iter_mut().filter(|(_, p, _)| p.ready) {
            // A switch says so within a second or two (its control thread's ticks).
            while t0.elapsed() < HOLD_WAIT && p.exited().is_none() && !p.said(HOLDING) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if p.exited().is_none() && !p.said(HOLDING) {
                eprintln!(
                    "pint-lab: {} did not hold within {} s; stopping it anyway",
                    p.name,
                    HOLD_WAIT.as_secs()
                );
            }
        }
    }

    fn teardown(&mut self) {
        self.hold_switches();
        for (_, p, _) in self.switches.iter_mut() {
            p.stop(Duration::from_secs(30));
        }
        for (_, g) in self.generators.iter_mut() {
            g.stop(Duration::from_secs(10));
        }
        if let Some(s) = &mut self.sink {
            s.stop(Duration::from_secs(30));
        }
    }

    /// The processes that exited when they should not have: the first found (sink, then
    /// switches, then generators) with its output, the others named.
    fn casualty(&mut self, reports_due: bool) -> Option<Stopped> {
        let mut dead: Vec<(&mut Proc, ExitStatus)> = Vec::new();
        let procs = self
            .sink
            .iter_mut()
            .chain(self.switches.iter_mut().map(|(_, p, _)| p));
        for p in procs {
            if let Some(st) = p.exited() {
                dead.push((p, st));
            }
        }
        for (_, g) in self.generators.iter_mut() {
            // A generator may end once it has reported.
            let reported = reports_due && g.stdout_contains("\n}");
            if !reported && let Some(st) = g.exited() {
                dead.push((g, st));
            }
        }
        let mut dead = dead.into_iter();
        let (first, status) = dead.next()?;
        // All it printed before it died, for the message.
        first.join_readers_within(Duration::from_secs(2));
        let others: Vec<String> = dead.map(|(p, st)| format!("{} ({st})", p.name)).collect();
        Some(Stopped::Died {
            name: first.name.clone(),
            status: status.to_string(),
            tail: first.tail(),
            also: if others.is_empty() {
                String::new()
            } else {
                format!("; also ended: {}", others.join(", "))
            },
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn run_inner(
    lab: &Lab,
    programs: &Programs,
    opts: &RunOptions,
    stop: &Arc<AtomicBool>,
    dir: &std::path::Path,
    main_lcore: u32,
    worker_lcores: Vec<u32>,
    procs: &mut Procs,
) -> anyhow::Result<Collected> {
    let t0 = Instant::now();
    // 1. The sink, on ports the system picks; it says which.
    LabPlan::write_topology(lab, dir)?;
    let probe = Endpoints {
        dir: dir.to_owned(),
        sink_listen: "127.0.0.1:0".parse().expect("address"),
        sink_http: "127.0.0.1:0".parse().expect("address"),
        main_lcore,
        worker_lcores,
    };
    // What the plan refuses (a run directory whose socket paths would be too long) is
    // refused before anything starts.
    LabPlan::new(lab, &probe)?;
    let sink_args = sink_args(lab, &probe);
    let mut sink = Proc::start(
        "pint-sink",
        &programs.sink,
        &sink_args,
        &dir.join("sink.log"),
    )?;
    let line = sink.wait_for(Duration::from_secs(60), stop, |l| {
        l.starts_with("pint-sink listening on")
    })?;
    // From here on its output is read in its log (and its last lines, should it die).
    sink.forget_stdout();
    procs.sink = Some(sink);
    let (listen, http) = parse_sink_line(&line)
        .ok_or_else(|| anyhow::anyhow!("cannot read the sink's addresses from `{line}`"))?;
    let at = Endpoints {
        sink_listen: listen,
        sink_http: http,
        ..probe
    };
    let plan = LabPlan::new(lab, &at)?;
    plan.write()?;
    for s in &plan.switches {
        control::Config::from_file(&s.config).map_err(|e| match e {
            // The others name the file already.
            control::config::ConfigError::Key { .. } => {
                anyhow::anyhow!("{}: {e}", s.config.display())
            }
            e => anyhow::anyhow!("{e}"),
        })?;
    }
    crate::say!(
        "pint-lab: {} ({} switches, {} links, {} hosts, {} ms epochs); run directory {}",
        lab.name,
        lab.topology.len(),
        lab.topology.edges(),
        lab.hosts.len(),
        lab.epoch_ms,
        dir.display()
    );
    if let Some(note) = lab.left_out_note() {
        crate::say!("pint-lab: {note}");
    }
    for w in lab.warnings() {
        crate::say!("pint-lab: warning: {w}");
    }
    crate::say!("pint-lab: sink http://{http}/ (API /api/..., Prometheus /metrics)");

    // 2. The switches.
    for s in &plan.switches {
        let summary = dir.join(format!("switch-{}.json", s.file_name));
        let args = vec![
            "--config".into(),
            s.config.display().to_string(),
            "--summary-json".into(),
            summary.display().to_string(),
            // A bound in case the lab is gone: traffic, the hold, and room to stop.
            "--duration".into(),
            format!("{}", lab.duration_s + opts.hold.as_secs_f64() + 600.0),
        ];
        let mut p = Proc::start_logged(
            &format!("switch {}", s.name),
            &programs.switch,
            &args,
            &dir.join(format!("switch-{}.log", s.file_name)),
            true,
        )?;
        // The file prefix the switch gives EAL (docs/config.md): a switch that dies leaves
        // its runtime directory, which the lab then removes.
        let prefix = format!("pint-switch-{}-{}", lab.switch_id(s.node), p.pid());
        p.set_runtime_dir(crate::testpmd::eal_runtime_dir(&prefix));
        p.watch(HOLDING);
        procs.switches.push((s.node, p, summary));
        // Every switch is a memif client only of lower-numbered ones: each waits for the one
        // before, so that its ports connect at once.
        let (_, p, _) = procs.switches.last_mut().expect("just pushed");
        p.wait_for(Duration::from_secs(60), stop, |l| l.starts_with("routes:"))?;
        p.ready = true;
        // Its statistics every second stay in its log, not in memory, however long the
        // lab is held.
        p.forget_stdout();
        check_stop(stop, procs, false)?;
    }
    // 3. The generators, all sending from one moment on.
    let start_at = unix_s() + 3.0 + 0.2 * plan.generators.len() as f64;
    for g in &plan.generators {
        let mut args = g.args.clone();
        // A generator keeps its link until its switch stops, through the hold too.
        if let Some(i) = args.iter().position(|a| a == "--linger") {
            args[i + 1] = format!("{}", GENERATOR_LINGER_S + opts.hold.as_secs_f64());
        }
        let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
        args.splice(at..at, ["--start-at".to_owned(), format!("{start_at:.3}")]);
        let p = Proc::start(
            &format!("pint-gen {}", lab.name(g.node)),
            &programs.generator,
            &args,
            &dir.join(format!("gen-{}.log", lab.safe_name(g.node))),
        )?;
        procs.generators.push((g.node, p));
        check_stop(stop, procs, false)?;
    }
    crate::say!(
        "pint-lab: {} generators send for {} s from {}",
        plan.generators.len(),
        lab.duration_s,
        fmt_unix(start_at)
    );

    // 4. The traffic runs; a status line every second.
    let mut status = Status::new(opts.status);
    let mut deadline = start_at + lab.duration_s + 60.0;
    let mut told_to_stop = false;
    let mut cut_short_at = None;
    let mut interrupted = false;
    loop {
        let has_reported = |g: &Proc| g.stdout_contains("\n}");
        if stop.load(Ordering::Relaxed) && !interrupted {
            // Ctrl-C (or SIGTERM, SIGHUP) during the traffic: the generators stop and report
            // what they sent, and the lab stops and reports as at the end, the run marked
            // cut short when its time had not run out.
            interrupted = true;
            let at = (unix_s() - start_at).max(0.0);
            if at < lab.duration_s {
                crate::say!(
                    "pint-lab: interrupted {at:.1} s into the traffic: stopping it; the report counts what was sent (a second Ctrl-C exits at once)"
                );
                cut_short_at = Some(at);
            }
            for (_, g) in procs.generators.iter().filter(|(_, g)| !has_reported(g)) {
                g.signal(libc::SIGINT);
            }
            if !told_to_stop {
                told_to_stop = true;
                deadline = unix_s() + 15.0;
            }
        }
        if let Some(d) = procs.casualty(interrupted || unix_s() > start_at + lab.duration_s) {
            return Err(d.into());
        }
        if procs.generators.iter().all(|(_, g)| has_reported(g)) {
            break;
        }
        if unix_s() > deadline {
            anyhow::ensure!(
                !told_to_stop,
                "the generators did not report within 15 s of being told to stop"
            );
            // Still sending a minute after the traffic's end: the machine does not reach
            // the lab's rate. Stopped, they report what they sent, and the lab reports.
            let late: Vec<String> = procs
                .generators
                .iter()
                .filter(|(_, g)| !has_reported(g))
                .map(|(_, g)| g.name.clone())
                .collect();
            crate::say!(
                "pint-lab: {} still sending 60 s after the traffic's end (this machine does not reach traffic.rate_pps {}): stopped; the report counts what they sent",
                late.join(", "),
                lab.traffic.rate_pps
            );
            for (_, g) in procs.generators.iter().filter(|(_, g)| !has_reported(g)) {
                g.signal(libc::SIGINT);
            }
            told_to_stop = true;
            deadline = unix_s() + 15.0;
        }
        status.tick(http, unix_s() - start_at, lab);
        std::thread::sleep(Duration::from_millis(200));
    }
    status.finish();
    // The last epochs reach the sink and are decoded. Long epochs make a long wait: said,
    // and a Ctrl-C (or SIGTERM) ends it (the report then misses what had not arrived).
    let settle = Duration::from_millis(lab.epoch_ms.max(10) * 5 + 500);
    if settle >= Duration::from_secs(3) {
        crate::say!(
            "pint-lab: traffic done; waiting {:.1} s for the last epochs ({} ms each) to reach the sink (Ctrl-C ends the wait)",
            settle.as_secs_f64(),
            lab.epoch_ms
        );
    }
    let until = Instant::now() + settle;
    // A Ctrl-C that stopped the traffic does not cut this wait short (a second one exits).
    while interrupted || !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    if !opts.hold.is_zero() {
        crate::say!(
            "pint-lab: traffic done; the lab stays up {:.0} s more (live page http://{http}/)",
            opts.hold.as_secs_f64()
        );
        // Ctrl-C ends the wait; the lab then stops and reports as usual.
        let until = Instant::now() + opts.hold;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            if let Some(d) = procs.casualty(true) {
                return Err(d.into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    // 5. Teardown: switches, generators; the sink's view; the sink.
    let summaries = procs.stop_switches();
    procs.stop_generators();
    let generators = procs
        .generators
        .iter()
        .map(|(n, g)| {
            (
                *n,
                crate::sender::read_json_report(std::io::Cursor::new(g.stdout())),
            )
        })
        .collect();
    // The sink may still be decoding what the switches sent last (a lab on few cores falls
    // behind): its view is read once it has applied everything it received.
    // A Ctrl-C that ended the hold does not cut this wait short (a second one exits).
    let interrupt = (!stop.load(Ordering::Relaxed)).then_some(&**stop);
    if let Err(left) = wait_for_sink(http, SINK_SETTLE, interrupt) {
        if interrupt.is_some_and(|s| s.load(Ordering::Relaxed)) {
            crate::say_err!(
                "pint-lab: warning: interrupted before the sink had caught up ({left}): the report misses that work"
            );
        } else {
            crate::say_err!(
                "pint-lab: warning: the sink had not caught up {} s after the switches stopped ({left}): the report misses that work",
                SINK_SETTLE.as_secs()
            );
        }
    }
    let view = super::report::SinkView::read(http, opts.top)?;
    if let Some(s) = &mut procs.sink {
        s.stop(Duration::from_secs(30));
    }
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    let mut collected = Collected {
        dir: dir.to_owned(),
        plan,
        start_unix: start_at,
        cut_short_at,
        wall_seconds: t0.elapsed().as_secs_f64(),
        summaries,
        generators,
        view,
        events,
        events_file_short: None,
    };
    collected.events_from_api_if_short();
    Ok(collected)
}

/// How long the lab waits for the sink to apply what it received, after the switches stop.
const SINK_SETTLE: Duration = Duration::from_secs(120);

/// Waits until the sink has no switch connected and nothing left to apply
/// (`/api/health`'s `backlog`, docs/api.md), up to `limit` or until `interrupt` is set
/// (Ctrl-C: the report is then made of what the sink has); otherwise says what is left.
fn wait_for_sink(
    http: std::net::SocketAddr,
    limit: Duration,
    interrupt: Option<&AtomicBool>,
) -> Result<(), String> {
    let until = Instant::now() + limit;
    let mut left = String::from("no answer from its API");
    while Instant::now() < until && !interrupt.is_some_and(|s| s.load(Ordering::Relaxed)) {
        if let Ok(h) = get_json(http, "/api/health") {
            let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
            let (connected, flowsets, messages) = (
                n(&h["switches_connected"]),
                n(&h["backlog"]["flowsets"]),
                n(&h["backlog"]["decode_messages"]),
            );
            if (connected, flowsets, messages) == (0, 0, 0) {
                return Ok(());
            }
            left = format!(
                "{connected} switches connected, {flowsets} flowsets and {messages} decode messages to apply"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(left)
}

fn check_stop(stop: &AtomicBool, procs: &mut Procs, reports_due: bool) -> anyhow::Result<()> {
    if stop.load(Ordering::Relaxed) {
        return Err(Stopped::Interrupted.into());
    }
    if let Some(d) = procs.casualty(reports_due) {
        return Err(d.into());
    }
    Ok(())
}

/// `pint-sink listening on A (http B)` -> (A, B).
fn parse_sink_line(line: &str) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
    let rest = line.strip_prefix("pint-sink listening on ")?;
    let (listen, http) = rest.split_once(" (http ")?;
    Some((
        listen.parse().ok()?,
        http.trim_end_matches(')').parse().ok()?,
    ))
}

fn fmt_unix(t: f64) -> String {
    format!("Unix time {t:.1}")
}

type Reading = (f64, Vec<(u32, u64)>, u64);

/// The live status line: rates per switch (from the counters each switch sends the sink),
/// digests per second and flows at the sink, events so far.
struct Status {
    on: bool,
    terminal: bool,
    last: Option<Instant>,
    /// The previous reading: time, packets received per switch ID, digests.
    prev: Option<Reading>,
}

impl Status {
    fn new(on: bool) -> Status {
        Status {
            on,
            terminal: std::io::stdout().is_terminal(),
            last: None,
            prev: None,
        }
    }

    fn tick(&mut self, http: std::net::SocketAddr, t: f64, lab: &Lab) {
        let every = if self.terminal { 1.0 } else { 5.0 };
        if !self.on || self.last.is_some_and(|l| l.elapsed().as_secs_f64() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let (Ok(sw), Ok(health)) = (
            get_json(http, "/api/switches"),
            get_json(http, "/api/health"),
        ) else {
            return;
        };
        let empty = Vec::new();
        let switches = sw.as_array().unwrap_or(&empty);
        let rx: Vec<(u32, u64)> = switches
            .iter()
            .map(|s| {
                let id = s["id"].as_u64().unwrap_or(0) as u32;
                let rx = s["stats"]
                    .as_array()
                    .and_then(|st| {
                        st.iter()
                            .find(|p| p[0] == "rx_packets")
                            .and_then(|p| p[1].as_u64())
                    })
                    .unwrap_or(0);
                (id, rx)
            })
            .collect();
        let digests: u64 = switches.iter().filter_map(|s| s["digests"].as_u64()).sum();
        let now = t;
        let mut line = format!(
            "t={:>5.1}s  switches {}/{}  flows {}  ",
            t.max(0.0),
            switches.iter().filter(|s| s["connected"] == true).count(),
            lab.topology.len(),
            health["flows"].as_u64().unwrap_or(0),
        );
        if let Some((pt, prx, pd)) = &self.prev {
            let dt = (now - pt).max(1e-3);
            line.push_str(&format!(
                "digests {:.0}/s  events {}  kpps:",
                digests.saturating_sub(*pd) as f64 / dt,
                health["events"].as_u64().unwrap_or(0)
            ));
            for (id, r) in &rx {
                let before = prx.iter().find(|(i, _)| i == id).map_or(0, |p| p.1);
                let name = lab.node_of_id(*id).map_or("?", |n| lab.name(n));
                line.push_str(&format!(
                    " {name} {:.1}",
                    r.saturating_sub(before) as f64 / dt / 1e3
                ));
            }
        }
        self.prev = Some((now, rx, digests));
        if self.terminal {
            crate::say_inline!("\r\x1b[2K{line}");
        } else {
            crate::say!("{line}");
        }
    }

    fn finish(&self) {
        if self.on && self.terminal && self.last.is_some() {
            crate::say!();
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every process found dead is named, the first with its output: one that died of
    /// another's death is not the only one told.
    #[test]
    fn every_process_found_dead_is_named() {
        let dir = crate::scratch::Scratch::new("lab-casualty").unwrap();
        let sh = super::Program {
            path: "/bin/sh".into(),
            lead: vec!["-c".into()],
        };
        let start = |name: &str, script: &str| {
            super::Proc::start(
                name,
                &sh,
                &[script.into()],
                &dir.path(&format!("{name}.log")),
            )
            .unwrap()
        };
        let mut procs = super::Procs::default();
        for (n, script) in [
            (1, "exec sleep 300"),
            (2, "echo gone; exit 3"),
            (3, "exit 4"),
        ] {
            let p = start(&format!("switch s{n}"), script);
            procs.switches.push((n, p, dir.path("s.json")));
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let died = loop {
            let both = procs
                .switches
                .iter_mut()
                .skip(1)
                .all(|(_, p, _)| p.exited().is_some());
            if both || std::time::Instant::now() > until {
                break procs.casualty(false).map(|d| d.to_string());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        procs.teardown();
        let died = died.expect("two died");
        assert!(died.starts_with("switch s2 died"), "{died}");
        assert!(
            died.contains("also ended: switch s3 (exit status: 4)"),
            "{died}"
        );
        assert!(!died.contains("s1"), "{died}");
        assert!(died.contains("gone"), "{died}");
    }

    #[test]
    fn the_sink_line_gives_both_addresses() {
        let (a, b) =
            super::parse_sink_line("pint-sink listening on 127.0.0.1:4000 (http 127.0.0.1:4001)")
                .unwrap();
        assert_eq!((a.port(), b.port()), (4000, 4001));
        assert!(super::parse_sink_line("pint-sink listening on x").is_none());
    }

    /// A lab removes its own sockets and earlier outputs from a run directory of its own,
    /// never other files, and takes no directory of another program's (a run in /tmp
    /// removed every socket there, other programs' too).
    #[test]
    fn only_the_labs_own_files_are_removed() {
        let dir = std::env::temp_dir().join(format!("pint-lab-clean-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ours = [
            "link-0-12.sock",
            "hosts-3.sock",
            "switch-s2.json",
            "switch-s2.toml",
            "switch-s2.log",
            "gen-s1.log",
            "sink.log",
            "topology.toml",
            "report.html",
            "events.jsonl",
        ];
        let theirs = [
            "docker.sock",
            "link-a-b.sock",
            "hosts-.sock",
            "switch-.toml",
            "switch-s2.txt",
            "gen-s1.toml",
            "notes.json",
        ];
        for f in ours.iter().chain(&theirs) {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        // Not marked as a run directory: refused, and nothing removed.
        let err = super::prepare_run_dir(&dir).unwrap_err();
        assert!(
            err.to_string().contains("not a lab's run directory"),
            "{err}"
        );
        assert!(ours.iter().all(|f| dir.join(f).exists()));
        // Marked: the earlier run's files go, and only they.
        std::fs::write(dir.join(super::RUN_DIR_MARK), "").unwrap();
        super::prepare_run_dir(&dir).unwrap();
        for f in ours {
            assert!(!dir.join(f).exists(), "{f} left");
        }
        for f in theirs {
            assert!(dir.join(f).exists(), "{f} removed");
        }
        // A new directory is marked.
        let new = dir.join("new");
        std::fs::create_dir(&new).unwrap();
        super::prepare_run_dir(&new).unwrap();
        assert!(new.join(super::RUN_DIR_MARK).exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}

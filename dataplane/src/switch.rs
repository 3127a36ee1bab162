//! Runs a switch from its configuration: EAL, pool, ports, workers, the control loop that
//! prints statistics, and an orderly shutdown (workers stop, final statistics, ports
//! closed, EAL cleaned up unless a memif server port was opened: see
//! `Eal::keep_memory_at_exit`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use control::Config;
use control::inband::TelemetryStart;
use control::metrics::{PortMetrics, SwitchMetrics};
use control::runtime::{ControlLoop, RunLimits, total};
use control::summary::{PortSummary, Summary, TelemetrySummary};
use pipeline::impair::Impairer;
use pipeline::inband::Inband;
use pipeline::{Forwarder, Pipeline, SharedCounters};

use crate::dpdk::port::{is_memif_client, is_memif_server, programs_mac};
use crate::dpdk::{Eal, Mbuf, Mempool, Port, PortSetup};
use crate::gate::PortGate;
use crate::reconnect::Reconnector;
use crate::resources;
use crate::worker::Worker;

/// How long to run and where to report.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop once no packet has arrived for this long (for finite captures).
    pub until_idle: Option<Duration>,
    /// Write the final summary as JSON here.
    pub summary_json: Option<PathBuf>,
    /// The configuration file the switch was read from, which no output may overwrite.
    pub config_file: Option<PathBuf>,
    /// EAL arguments that replace the configured or generated ones.
    pub eal_args: Option<Vec<String>>,
    /// The signals' flags, installed by the caller as early as it could (None: installed
    /// at the run's start).
    pub signals: Option<SwitchSignals>,
}

/// The flags the switch's signals set: stop (SIGINT, SIGTERM; a second one exits at
/// once), reload the queries (SIGHUP), hold (SIGUSR1: every port closed to the workers
/// until the stop, so that memif peers can leave in any order; see docs/config.md).
/// Installed before anything slow: until then SIGHUP, SIGTERM and SIGUSR1 end the process
/// (a `pkill -HUP pint-switch` meant for the running switches would kill one starting).
#[derive(Debug, Clone)]
pub struct SwitchSignals {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
}

impl SwitchSignals {
    /// Installs the handlers.
    #[cold]
    pub fn install() -> anyhow::Result<SwitchSignals> {
        let stop = Arc::new(AtomicBool::new(false));
        telemetry::signals::stop_on(
            &[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM],
            Arc::clone(&stop),
        )
        .context("installing signal handlers")?;
        let reload = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
            .context("installing signal handlers")?;
        let hold = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&hold))
            .context("installing signal handlers")?;
        Ok(SwitchSignals { stop, reload, hold })
    }
}

/// Runs the switch until a signal, the duration, or idleness stops it.
pub fn run(mut config: Config, opts: &RunOptions) -> anyhow::Result<Summary> {
    let config = &mut config;
    let resources::Preflight {
        main_lcore,
        mbufs,
        room,
        memory_mb,
    } = resources::preflight(
        config,
        resources::Preflighting::Start {
            own_eal_args: opts.eal_args.is_some(),
        },
    )?;
    // The routes go into the forwarder, and neither the config's copy nor the tables' stay
    // for the run (a full table's would take hundreds of megabytes).
    let tables = config.take_tables();
    let fwd = Forwarder::new(&tables).context("building the route table")?;
    let pipeline::Tables {
        ports: port_specs,
        routes,
        ..
    } = tables;
    drop(routes);
    return_freed_memory();
    let config = &*config;
    let eal_args = opts
        .eal_args
        .clone()
        .or_else(|| config.eal.args.clone())
        .unwrap_or_else(|| resources::eal_args(config, main_lcore, memory_mb, std::process::id()));

    if let Some(p) = &opts.summary_json {
        crate::device_checks::writable_file(p)
            .map_err(|e| anyhow::anyhow!("--summary-json: {} {e}", p.display()))?;
    }
    resources::outputs_apart(
        config,
        opts.config_file.as_deref(),
        opts.summary_json.as_deref(),
    )?;

    let installed = match &opts.signals {
        Some(s) => s.clone(),
        None => SwitchSignals::install()?,
    };

    let eal = Eal::init(&eal_args)?;
    let signals = Signals {
        stop: &installed.stop,
        reload: &installed.reload,
        hold: &installed.hold,
    };
    let built = Built {
        fwd: Arc::new(fwd),
        port_specs,
    };
    let summary = run_with_eal(&eal, config, built, opts, mbufs, room, signals);
    drop(eal);
    summary
}

/// What the signals set ([`SwitchSignals`]), borrowed for the run.
struct Signals<'a> {
    stop: &'a AtomicBool,
    reload: &'a AtomicBool,
    hold: &'a AtomicBool,
}

/// What is built from the config before DPDK starts: the forwarder (the route table) and
/// the ports as the workers' telemetry sees them.
struct Built {
    fwd: Arc<Forwarder>,
    port_specs: Vec<pipeline::PortSpec>,
}

fn run_with_eal(
    eal: &Eal,
    config: &Config,
    built: Built,
    opts: &RunOptions,
    mbufs: u32,
    room: u16,
    signals: Signals<'_>,
) -> anyhow::Result<Summary> {
    let Signals { stop, reload, hold } = signals;
    control::say!(
        "pint-switch {}: switch {}, {}",
        env!("CARGO_PKG_VERSION"),
        config.switch_id,
        Eal::version()
    );
    // The endpoint first: an address in use fails the start before any port is set up
    // (a pcap port's output file is created when it starts).
    let mut metrics = match config.metrics.listen {
        Some(addr) => {
            let m = SwitchMetrics::install(addr, config, eal.tsc_hz())?;
            control::say!("metrics: http://{addr}/metrics");
            Some(m)
        }
        None => None,
    };
    let port_metrics = metrics.as_ref().map(|_| PortMetrics::new(config));
    let socket = eal.socket_id() as i32;
    let pool = Mempool::new(
        eal,
        "pint_pkts",
        mbufs,
        config.dataplane.mbuf_cache,
        room,
        socket,
    )?;
    control::say!("mbuf pool: {mbufs} mbufs of {room} bytes");

    let nworkers = config.workers.len() as u16;
    let gate = PortGate::new(config.workers.len());
    let mut reconnectors = Vec::new();
    let mut ports = Vec::with_capacity(config.ports.len());
    let mut drivers = Vec::with_capacity(config.ports.len());
    for (i, pc) in config.ports.iter().enumerate() {
        let key = || format!("config key `ports[{i}].device` (port `{}`)", pc.name);
        if let Some(said) = crate::dpdk::port::remove_stale_memif_socket(&pc.device) {
            control::say!("port {}: {said}", pc.name);
        }
        let mut port = Port::probe(eal, &pc.name, &pc.device).with_context(key)?;
        let setup = PortSetup {
            rx_queues: pc.rx_queues,
            tx_queues: nworkers,
            rx_descriptors: pc.rx_descriptors,
            tx_descriptors: pc.tx_descriptors,
            mtu: pc.mtu,
            mac: pc.mac.0,
            promiscuous: pc.promiscuous,
        };
        let report = port.configure(&setup, &pool).with_context(key)?;
        let memif_client = is_memif_client(&pc.device);
        match port.start() {
            // A memif client waits for its server, however they were started.
            Err(_) if memif_client => {
                let now = std::time::Instant::now();
                let (r, line) = Reconnector::waiting(i, &pc.name, &pc.device, &gate, now);
                control::say!("{line}");
                reconnectors.push(r);
            }
            Err(e) => return Err(e).with_context(key),
            Ok(()) if memif_client => {
                reconnectors.push(Reconnector::new(i, &pc.name, &pc.device));
            }
            Ok(()) => {}
        }
        let link = port.link();
        // A host's interface that keeps its own address (a tap's: the host's) says which.
        let device_mac = match port.mac() {
            Some(m) if !programs_mac(&report.driver, pc.promiscuous) && m != pc.mac.0 => {
                format!(" (device {})", telemetry::wire::MacAddr(m))
            }
            _ => String::new(),
        };
        control::say!(
            "port {:<8} id {} {:<12} {}{device_mac} {:?} mtu {} rxq {} txq {} desc {}/{} link {}{}",
            pc.name,
            port.id(),
            report.driver,
            pc.mac,
            pc.role,
            pc.mtu,
            pc.rx_queues,
            nworkers,
            report.descriptors.0,
            report.descriptors.1,
            if link.up {
                format!("up {} Mbit/s", link.speed_mbps)
            } else if link.known {
                "down".into()
            } else {
                "unknown (the driver cannot say)".into()
            },
            if report.unsupported.is_empty() {
                String::new()
            } else {
                format!(" (device cannot: {})", report.unsupported.join(", "))
            }
        );
        drivers.push(report.driver);
        ports.push(port);
    }
    // Ports whose link is down from the start (a memif server without its client): a
    // burst there is given up when its first tx call takes nothing, from the first.
    let first_links: Vec<_> = ports.iter().map(Port::link).collect();
    gate.set_down(down_bits(first_links.iter().map(|l| l.down())));
    let Built { fwd, port_specs } = built;
    control::say!(
        "routes: {} ({} KiB table); workers: {}; telemetry lanes: {}",
        fwd.fib().routes(),
        fwd.fib().memory_bytes() / 1024,
        config.workers.len(),
        telemetry::hash::burst::Width::best().name()
    );

    let mut workers = Vec::with_capacity(config.workers.len());
    for (w, wc) in config.workers.iter().enumerate() {
        let mut rx = Vec::with_capacity(wc.rx.len());
        for q in &wc.rx {
            rx.push((q.port_index, ports[q.port_index].rx_queue(q.queue)?));
        }
        let mut tx = Vec::with_capacity(ports.len());
        for p in &ports {
            tx.push(p.tx_queue(w as u16)?);
        }
        let tsc_hz = eal.tsc_hz();
        let impair: Vec<Option<Impairer<Mbuf>>> = config
            .ports
            .iter()
            .enumerate()
            .map(|(p, pc)| {
                pc.impair.as_ref().map(|i| {
                    let seed = telemetry::hash::mix64(
                        (u64::from(config.switch_id) << 32) | ((p as u64) << 16) | w as u64,
                    );
                    let mut spec = i.spec(tsc_hz, seed);
                    spec.seed = spec.seed.wrapping_add(w as u64);
                    Impairer::new(spec)
                })
            })
            .collect();
        let impaired = impair
            .iter()
            .enumerate()
            .filter(|(_, i)| i.is_some())
            .fold(0u32, |m, (p, _)| m | 1 << p);
        workers.push(Worker {
            rx,
            tx,
            idle: config.dataplane.idle,
            idle_sleep: Duration::from_micros(config.dataplane.idle_sleep_us),
            idle_sleep_max: Duration::from_micros(config.dataplane.idle_sleep_max_us),
            impair,
            impaired,
        });
    }
    let shared: Vec<SharedCounters> = (0..workers.len())
        .map(|_| SharedCounters::default())
        .collect();
    let workers_stop = AtomicBool::new(false);
    let (mut inband, mut telemetry) = match TelemetryStart::prepare(config)? {
        Some(t) => (t.workers.into_iter().map(Some).collect(), Some(t.control)),
        None => ((0..workers.len()).map(|_| None).collect::<Vec<_>>(), None),
    };

    let mut port_totals = vec![control::summary::PortTotals::default(); ports.len()];
    let outcome = std::thread::scope(|s| -> anyhow::Result<control::runtime::LoopOutcome> {
        // However this closure ends (a worker that could not start, a panic), the workers
        // are told to stop: the scope waits for them.
        let _stop_workers = StopOnDrop(&workers_stop);
        let mut handles = Vec::new();
        for (w, (((worker, wc), counters), setup)) in workers
            .into_iter()
            .zip(&config.workers)
            .zip(&shared)
            .zip(inband.iter_mut().map(Option::take))
            .enumerate()
        {
            let (fwd, stop, port_specs, gate) = (&fwd, &workers_stop, &port_specs, &gate);
            let prefetch = config.dataplane.prefetch;
            let lcore = wc.lcore;
            let h = std::thread::Builder::new()
                .name(format!("worker-{lcore}"))
                .spawn_scoped(s, move || -> anyhow::Result<()> {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id: lcore as usize })
                    {
                        anyhow::bail!(
                            "worker on lcore {lcore}: cannot pin the thread to CPU {lcore}"
                        );
                    }
                    let _reg = eal.register_thread()?;
                    let mut pipeline = Pipeline::new(Arc::clone(fwd), prefetch);
                    if let Some(setup) = setup {
                        pipeline = pipeline.with_inband(Inband::new(port_specs, setup));
                    }
                    worker.run(&mut pipeline, counters, stop, gate.slot(w));
                    pipeline.finish();
                    Ok(())
                })
                .context("spawning a worker thread")?;
            handles.push(h);
        }
        let limits = RunLimits {
            duration: opts.duration,
            until_idle: opts.until_idle,
        };
        let mut links: Vec<bool> = first_links.iter().map(|l| l.up).collect();
        // Held (SIGUSR1): the gate's generation that closed every port, and whether the
        // workers' passing it was said.
        let mut held: Option<(u64, bool)> = None;
        let mut read_ports = || {
            for (t, p) in port_totals.iter_mut().zip(&ports) {
                if let Some(now) = p.stats() {
                    t.observe(now);
                }
            }
            // One reading per port for the line, the metrics and the workers.
            let now: Vec<_> = ports.iter().map(Port::link).collect();
            gate.set_down(down_bits(now.iter().map(|l| l.down())));
            for ((was, link), pc) in links.iter_mut().zip(&now).zip(&config.ports) {
                let up = link.up;
                if up != *was {
                    *was = up;
                    control::say!("{}", link_change(&pc.name, &pc.device, up, held.is_some()));
                }
            }
            if hold.load(Ordering::Relaxed) && held.is_none() {
                let generation = (0..ports.len()).map(|p| gate.close(p)).max().unwrap_or(0);
                held = Some((generation, false));
                // Workers pass within a loop (a nap, when idle): said now rather than at
                // the next tick, as a rule.
                let t0 = std::time::Instant::now();
                while !gate.passed(generation) && t0.elapsed() < Duration::from_millis(50) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            match &mut held {
                Some((generation, said)) => {
                    if !*said && gate.passed(*generation) {
                        *said = true;
                        control::say!(
                            "holding (SIGUSR1): every port closed to the workers, nothing forwarded; stop with SIGTERM or SIGINT"
                        );
                    }
                }
                None => {
                    for r in &mut reconnectors {
                        let now = std::time::Instant::now();
                        if let Some(line) = r.tick(now, &ports[r.port()], &gate) {
                            control::say!("{line}");
                        }
                    }
                }
            }
            if let Some(m) = &port_metrics {
                let totals: Vec<_> = port_totals.iter().map(|t| t.total()).collect();
                m.update(&totals);
                m.set_links(&links);
            }
        };
        let result = ControlLoop {
            config,
            limits,
            shared: &shared,
            stop,
            reload,
            telemetry: telemetry.as_mut(),
            metrics: metrics.as_mut(),
            each_second: Some(&mut read_ports),
        }
        .run(|| !handles.iter().any(|h| h.is_finished()));
        workers_stop.store(true, Ordering::SeqCst);
        for h in handles {
            match h.join() {
                Ok(r) => r?,
                Err(_) => anyhow::bail!("a worker thread panicked"),
            }
        }
        Ok(result)
    })?;

    let t = total(&shared);
    // The metrics end with the workers' last bursts and drained delay lines: the control
    // loop's last publication came before the workers stopped. (The telemetry's last
    // export, below, is in the summary, not the metrics.)
    if let Some(m) = metrics.as_mut() {
        control::runtime::publish_metrics(m, &shared, telemetry.as_ref());
    }
    let mut port_summaries = Vec::with_capacity(ports.len());
    for (i, (p, driver)) in ports.iter_mut().zip(drivers).enumerate() {
        // Read before stopping: some drivers (memif) clear their counters on stop, and
        // when their peer leaves (the readings during the run keep what they had).
        if let Some(now) = p.stats() {
            port_totals[i].observe(now);
        }
        let stats = port_totals[i].total();
        p.stop();
        port_summaries.push(PortSummary {
            name: p.name().to_owned(),
            driver,
            stats,
            forwarded_packets: t.ports[i].tx_packets,
            forwarded_bytes: t.ports[i].tx_bytes,
            tx_full_drops: t.ports[i].tx_full_drops,
            impair_lost: t.ports[i].impair_lost,
            impair_overflow: t.ports[i].impair_overflow,
        });
    }
    if let Some(m) = &port_metrics {
        let totals: Vec<_> = port_totals.iter().map(|t| t.total()).collect();
        m.update(&totals);
    }
    let mut summary = Summary::from_totals(config.switch_id, outcome.seconds, &t);
    if let Some(tc) = telemetry {
        // The last digests and flowsets go out before the summary.
        summary.telemetry = TelemetrySummary {
            events: t.telemetry,
            ..tc.finish(Duration::from_secs(2), &t)
        };
    }
    summary.intervals = outcome.intervals;
    summary.ports = port_summaries;
    summary.workers = shared
        .iter()
        .zip(&config.workers)
        .map(|(s, wc)| control::summary::WorkerSummary::of(wc.lcore, &s.read()))
        .collect();
    summary.worker_rx_packets = summary.workers.iter().map(|w| w.rx_packets).collect();
    summary.print();
    if let Some(path) = &opts.summary_json {
        std::fs::write(path, summary.to_json())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(ports);
    drop(pool);
    Ok(summary)
}

/// Sets its flag when dropped: the workers' stop, however the code that started them ends.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The ports whose link is down, as the gate's bits, from whether each port's is, in order.
fn down_bits(down: impl Iterator<Item = bool>) -> u32 {
    down.enumerate()
        .filter(|&(_, down)| down)
        .fold(0, |bits, (p, _)| bits | 1 << p)
}

/// The line that says port `name` (device `device`) went up or down; for a memif port whose
/// peer left, what comes next (nothing while the switch holds).
fn link_change(name: &str, device: &str, up: bool, held: bool) -> String {
    if up {
        return format!("port {name}: link up");
    }
    let next = if held {
        " (holding: the port stays closed until the stop)"
    } else if is_memif_client(device) {
        " (its memif server left: the port connects again once the server is back)"
    } else if is_memif_server(device) {
        " (its memif client left; a client that comes back connects again)"
    } else {
        ""
    };
    format!("port {name}: link down{next}")
}

/// Hands the memory that reading the configuration and building the route table freed back
/// to the system when there is much of it: glibc keeps a freed heap's pages (a large
/// table's TOML takes gigabytes while it is read) unless asked, and the switch would hold
/// them while it runs. A small config leaves little, and its memory stays as it was
/// (docs/benchmarks.md). Under another global allocator (pint-bench's mimalloc) glibc's
/// heap is nearly empty and nothing is done.
#[cold]
fn return_freed_memory() {
    /// Free bytes in the allocator's heaps above which they are handed back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    const WORTH_RETURNING: usize = 64 << 20;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads the allocator's statistics; malloc_trim only returns
    // free pages of its own heaps.
    unsafe {
        if libc::mallinfo2().fordblks > WORTH_RETURNING {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{down_bits, link_change};
    use crate::device_checks::writable_file as check_writable;

    /// A `--summary-json` path the summary could not be written to fails the start, not
    /// the end of the run (a directory passed, and failed hours later); nothing is made.
    #[test]
    fn a_summary_path_that_cannot_be_written_is_refused_at_the_start() {
        let dir = std::env::temp_dir().join(format!("pint-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = check_writable(&dir).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        let link = dir.join("to-dir");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(check_writable(&link).is_err(), "a link to a directory");
        assert!(check_writable(&dir.join("nowhere/s.json")).is_err());
        let new = dir.join("s.json");
        check_writable(&new).unwrap();
        assert!(!new.exists(), "nothing made");
        std::fs::write(&new, "{}").unwrap();
        check_writable(&new).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn down_bits_are_the_ports_whose_link_is_down() {
        assert_eq!(down_bits([false, true, false, true].into_iter()), 0b1010);
        assert_eq!(down_bits([false; 32].into_iter()), 0);
        assert_eq!(down_bits([true; 32].into_iter()), u32::MAX);
    }

    /// A memif client whose server left is told it must be restarted; a server that it
    /// may be connected again.
    #[test]
    fn a_link_going_down_says_what_comes_next() {
        let client = "net_memif1,role=client,socket=/run/l.sock,socket-abstract=no";
        let server = "net_memif0,role=server,socket=/run/l.sock,socket-abstract=no";
        assert!(
            link_change("fab0", client, false, false).contains("connects again once the server")
        );
        assert!(link_change("fab1", server, false, false).contains("connects again"));
        assert_eq!(
            link_change("eth0", "0000:3b:00.0", false, false),
            "port eth0: link down"
        );
        assert_eq!(
            link_change("fab0", client, true, false),
            "port fab0: link up"
        );
        assert!(link_change("fab0", client, false, true).contains("holding"));
    }
}

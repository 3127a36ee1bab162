//! Runs a switch from its configuration: EAL, pool, ports, workers, the control loop that
//! prints statistics, and an orderly shutdown (workers stop, final statistics, ports
//! closed, EAL cleaned up).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use control::Config;
use serde::Serialize;

use crate::dpdk::{Eal, Mempool, Port, PortSetup, PortStats};
use crate::pipeline::{DropReason, Forwarder, LocalCounters, SharedCounters};
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
    /// EAL arguments that replace the configured or generated ones.
    pub eal_args: Option<Vec<String>>,
}

/// One statistics interval.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Seconds since forwarding started, at the end of the interval.
    pub t: f64,
    /// Received packets per second, in millions.
    pub rx_mpps: f64,
    /// Sent packets per second, in millions.
    pub tx_mpps: f64,
    /// TSC cycles per received packet in this interval.
    pub cycles_per_packet: f64,
}

/// One port's final statistics.
#[derive(Debug, Clone, Serialize)]
pub struct PortSummary {
    /// Port name.
    pub name: String,
    /// DPDK driver.
    pub driver: String,
    /// Driver counters.
    pub stats: PortStats,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The switch id.
    pub switch_id: u32,
    /// Seconds from start of forwarding to stop.
    pub seconds: f64,
    /// Packets received by workers.
    pub rx_packets: u64,
    /// Bytes received by workers.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Pipeline drops by reason (every reason listed).
    pub drops: std::collections::BTreeMap<&'static str, u64>,
    /// Packets dropped because a tx queue stayed full.
    pub tx_full_drops: u64,
    /// Tx retries.
    pub tx_retries: u64,
    /// Average received Mpps over the run.
    pub rx_mpps: f64,
    /// TSC cycles per packet in polls that received packets (rx, pipeline and tx).
    pub cycles_per_packet: f64,
    /// The statistics intervals.
    pub intervals: Vec<Interval>,
    /// Per-port driver statistics.
    pub ports: Vec<PortSummary>,
    /// Per-worker received packets.
    pub worker_rx_packets: Vec<u64>,
}

fn drop_map(c: &LocalCounters) -> std::collections::BTreeMap<&'static str, u64> {
    DropReason::ALL
        .iter()
        .map(|r| (r.name(), c.drops[*r as usize]))
        .collect()
}

fn total(shared: &[SharedCounters]) -> LocalCounters {
    let mut t = LocalCounters::default();
    for s in shared {
        t.add(&s.read());
    }
    t
}

fn drops_line(c: &LocalCounters) -> String {
    let parts: Vec<String> = DropReason::ALL
        .iter()
        .filter(|r| c.drops[**r as usize] > 0)
        .map(|r| format!("{}={}", r.name(), c.drops[*r as usize]))
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        format!("{} ({})", c.dropped(), parts.join(" "))
    }
}

/// Runs the switch until a signal, the duration, or idleness stops it.
pub fn run(config: &Config, opts: &RunOptions) -> anyhow::Result<Summary> {
    let cpus = resources::available_cpus();
    let main_lcore = resources::check_lcores(config, &cpus)?;
    let held = resources::check_captures(config)?;
    let auto_mbufs = resources::auto_mbufs(config, held);
    let mbufs = config.dataplane.mbufs.unwrap_or(auto_mbufs);
    let minimum = resources::minimum_mbufs(config, held);
    if u64::from(mbufs) < minimum {
        anyhow::bail!(
            "config key `dataplane.mbufs`: {mbufs} mbufs are too few: infinite_rx captures keep {held} packets in memory and the workers need {} more to run (at least {minimum}; {auto_mbufs} recommended; leave the key out to size it automatically)",
            minimum - held
        );
    }
    let room = resources::data_room(config);
    let memory_mb = config
        .eal
        .memory_mb
        .unwrap_or_else(|| resources::auto_memory_mb(mbufs, room));
    let eal_args = opts
        .eal_args
        .clone()
        .or_else(|| config.eal.args.clone())
        .unwrap_or_else(|| resources::eal_args(config, main_lcore, memory_mb, std::process::id()));

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping exits at once.
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&stop))
            .context("installing signal handlers")?;
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }

    let eal = Eal::init(&eal_args)?;
    let summary = run_with_eal(&eal, config, opts, mbufs, room, &stop);
    drop(eal);
    summary
}

fn run_with_eal(
    eal: &Eal,
    config: &Config,
    opts: &RunOptions,
    mbufs: u32,
    room: u16,
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    println!(
        "pint-switch {}: switch {}, {}",
        env!("CARGO_PKG_VERSION"),
        config.switch_id,
        Eal::version()
    );
    let socket = eal.socket_id() as i32;
    let pool = Mempool::new(
        eal,
        "pint_pkts",
        mbufs,
        config.dataplane.mbuf_cache,
        room,
        socket,
    )?;
    println!("mbuf pool: {mbufs} mbufs of {room} bytes");

    let nworkers = config.workers.len() as u16;
    let mut ports = Vec::with_capacity(config.ports.len());
    let mut drivers = Vec::with_capacity(config.ports.len());
    for (i, pc) in config.ports.iter().enumerate() {
        let key = || format!("config key `ports[{i}].device` (port `{}`)", pc.name);
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
        port.start().with_context(key)?;
        let link = port.link();
        println!(
            "port {:<8} id {} {:<12} {} {:?} mtu {} rxq {} txq {} desc {}/{} link {}{}",
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
            } else {
                "down".into()
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
    let fwd = Forwarder::from_config(config).context("building the route table")?;
    println!(
        "routes: {} ({} KiB table); workers: {}",
        fwd.fib().routes(),
        fwd.fib().memory_bytes() / 1024,
        config.workers.len()
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
        workers.push(Worker {
            rx,
            tx,
            idle: config.dataplane.idle,
            idle_sleep: Duration::from_micros(config.dataplane.idle_sleep_us),
            prefetch: config.dataplane.prefetch,
        });
    }
    let shared: Vec<SharedCounters> = (0..workers.len())
        .map(|_| SharedCounters::default())
        .collect();
    let workers_stop = AtomicBool::new(false);

    let (intervals, seconds) = std::thread::scope(|s| -> anyhow::Result<(Vec<Interval>, f64)> {
        let mut handles = Vec::new();
        for ((worker, wc), counters) in workers.into_iter().zip(&config.workers).zip(&shared) {
            let (fwd, stop) = (&fwd, &workers_stop);
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
                    worker.run(fwd, counters, stop);
                    Ok(())
                })
                .context("spawning a worker thread")?;
            handles.push(h);
        }
        let result = control_loop(config, opts, &shared, stop, &handles);
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
    let mut port_summaries = Vec::with_capacity(ports.len());
    for (p, driver) in ports.iter_mut().zip(drivers) {
        p.stop();
        port_summaries.push(PortSummary {
            name: p.name().to_owned(),
            driver,
            stats: p.stats(),
        });
    }
    let summary = Summary {
        switch_id: config.switch_id,
        seconds,
        rx_packets: t.rx_packets,
        rx_bytes: t.rx_bytes,
        tx_packets: t.tx_packets,
        tx_bytes: t.tx_bytes,
        drops: drop_map(&t),
        tx_full_drops: t.tx_full_drops,
        tx_retries: t.tx_retries,
        rx_mpps: if seconds > 0.0 {
            t.rx_packets as f64 / seconds / 1e6
        } else {
            0.0
        },
        cycles_per_packet: if t.rx_packets > 0 {
            t.busy_cycles as f64 / t.rx_packets as f64
        } else {
            0.0
        },
        intervals,
        ports: port_summaries,
        worker_rx_packets: shared.iter().map(|s| s.read().rx_packets).collect(),
    };
    print_summary(&summary);
    if let Some(path) = &opts.summary_json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(ports);
    drop(pool);
    Ok(summary)
}

/// Watches the stop conditions and prints a statistics line per interval.
fn control_loop<T>(
    config: &Config,
    opts: &RunOptions,
    shared: &[SharedCounters],
    stop: &AtomicBool,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
) -> (Vec<Interval>, f64) {
    let start = Instant::now();
    let interval =
        (config.stats.interval_ms > 0).then(|| Duration::from_millis(config.stats.interval_ms));
    let mut next_stats = start + interval.unwrap_or(Duration::from_secs(3600));
    let mut prev = LocalCounters::default();
    let mut prev_t = start;
    let mut last_rx = 0u64;
    let mut last_rx_change = start;
    let mut intervals = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            println!("stopping on signal");
            break;
        }
        if handles.iter().any(|h| h.is_finished()) {
            println!("a worker stopped; stopping");
            break;
        }
        if opts.duration.is_some_and(|d| now - start >= d) {
            break;
        }
        if let Some(idle) = opts.until_idle {
            let rx = total(shared).rx_packets;
            if rx != last_rx {
                last_rx = rx;
                last_rx_change = now;
            } else if now - last_rx_change >= idle {
                println!("no packet for {} ms; stopping", idle.as_millis());
                break;
            }
        }
        if interval.is_some() && now >= next_stats {
            let t = total(shared);
            let dt = (now - prev_t).as_secs_f64();
            let rx = (t.rx_packets - prev.rx_packets) as f64;
            let tx = (t.tx_packets - prev.tx_packets) as f64;
            let cpp = if rx > 0.0 {
                (t.busy_cycles - prev.busy_cycles) as f64 / rx
            } else {
                0.0
            };
            let iv = Interval {
                t: (now - start).as_secs_f64(),
                rx_mpps: rx / dt / 1e6,
                tx_mpps: tx / dt / 1e6,
                cycles_per_packet: cpp,
            };
            println!(
                "[{:7.1}s] rx {:8.3} Mpps {:7.3} Gbit/s | tx {:8.3} Mpps | {:6.1} cycles/pkt | drops {}",
                iv.t,
                iv.rx_mpps,
                (t.rx_bytes - prev.rx_bytes) as f64 * 8.0 / dt / 1e9,
                iv.tx_mpps,
                cpp,
                drops_line(&t)
            );
            intervals.push(iv);
            prev = t;
            prev_t = now;
            next_stats += interval.unwrap_or_default();
        }
    }
    (intervals, start.elapsed().as_secs_f64())
}

fn print_summary(s: &Summary) {
    println!("== summary: {:.2} s ==", s.seconds);
    println!(
        "rx {} packets ({} bytes), tx {} packets ({} bytes), average {:.3} Mpps, {:.1} cycles/packet",
        s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.rx_mpps, s.cycles_per_packet
    );
    let dropped: u64 = s.drops.values().sum();
    println!(
        "dropped {dropped}: {}",
        s.drops
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "tx queue full: {} dropped, {} retries",
        s.tx_full_drops, s.tx_retries
    );
    for p in &s.ports {
        let st = &p.stats;
        println!(
            "port {:<8} ({}) rx {} tx {} missed {} rx_errors {} tx_errors {} rx_nombuf {}",
            p.name,
            p.driver,
            st.rx_packets,
            st.tx_packets,
            st.rx_missed,
            st.rx_errors,
            st.tx_errors,
            st.rx_nombuf
        );
    }
}

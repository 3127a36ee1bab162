//! The switch's control thread: it watches the stop conditions, prints a statistics line per
//! interval, and (with telemetry on) runs the epoch, digest and export work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pipeline::{LocalCounters, SharedCounters};

use crate::Config;
use crate::summary::Interval;

/// When a run stops on its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunLimits {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop once no packet has arrived for this long (for finite captures).
    pub until_idle: Option<Duration>,
}

/// The workers' counters summed.
pub fn total(shared: &[SharedCounters]) -> LocalCounters {
    let mut t = LocalCounters::default();
    for s in shared {
        t.add(&s.read());
    }
    t
}

fn drops_line(c: &LocalCounters) -> String {
    let parts: Vec<String> = c.drops.nonzero().map(|(r, n)| format!("{r}={n}")).collect();
    if parts.is_empty() {
        "0".into()
    } else {
        format!("{} ({})", c.dropped(), parts.join(" "))
    }
}

/// What the control loop saw.
#[derive(Debug, Clone, Default)]
pub struct LoopOutcome {
    /// The statistics intervals.
    pub intervals: Vec<Interval>,
    /// Seconds from start to stop.
    pub seconds: f64,
}

/// Runs until `stop` is set, a worker stops (`workers_running` turns false), the duration
/// passes, or the switch has been idle for the configured time.
pub fn control_loop(
    config: &Config,
    limits: RunLimits,
    shared: &[SharedCounters],
    stop: &AtomicBool,
    workers_running: impl Fn() -> bool,
) -> LoopOutcome {
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
        if !workers_running() {
            println!("a worker stopped; stopping");
            break;
        }
        if limits.duration.is_some_and(|d| now - start >= d) {
            break;
        }
        if let Some(idle) = limits.until_idle {
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
    LoopOutcome {
        intervals,
        seconds: start.elapsed().as_secs_f64(),
    }
}

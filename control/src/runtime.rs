//! The switch's control thread: it watches the stop conditions, prints a statistics line per
//! interval, keeps the metrics current, reloads the query file on SIGHUP, and (with telemetry
//! on) runs the epoch, digest and export work on its own deadlines.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pipeline::{LocalCounters, SharedCounters, TelemetryEvent};

use crate::Config;
use crate::inband::TelemetryControl;
use crate::metrics::{ControlCounts, SwitchMetrics};
use crate::summary::Interval;

/// The longest tick of an idle switch's control loop with telemetry on: a worker's digest
/// ring (64 Ki records by default) holds this long at 16 M digests per second, so traffic
/// that starts during such a tick loses none.
const IDLE_TICK_MAX: Duration = Duration::from_millis(4);

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

/// Statistics intervals a run keeps for its summary (the last ones: an hour of 1 s
/// intervals), however long it runs.
pub const MAX_INTERVALS: usize = 3600;

/// What the control loop saw.
#[derive(Debug, Clone, Default)]
pub struct LoopOutcome {
    /// The statistics intervals (the last [`MAX_INTERVALS`]).
    pub intervals: Vec<Interval>,
    /// Seconds from start to stop.
    pub seconds: f64,
}

/// What the control thread works with.
pub struct ControlLoop<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// When to stop on its own.
    pub limits: RunLimits,
    /// The workers' counters.
    pub shared: &'a [SharedCounters],
    /// Set by SIGINT/SIGTERM.
    pub stop: &'a AtomicBool,
    /// Set by SIGHUP: reload the query file.
    pub reload: &'a AtomicBool,
    /// The telemetry work, when on.
    pub telemetry: Option<&'a mut TelemetryControl>,
    /// The Prometheus endpoint, when on.
    pub metrics: Option<&'a mut SwitchMetrics>,
    /// Work done about once a second (the switch reads its ports' driver counters, so that
    /// a driver that resets them loses at most a second of counts).
    pub each_second: Option<&'a mut dyn FnMut()>,
}

/// The counters a switch reports to its sink: the workers' and the export's (what was sent
/// to the sink and dropped on the way, as the summary counts them).
pub(crate) fn stats_counters(t: &LocalCounters, export: &ControlCounts) -> Vec<(String, u64)> {
    let e = export;
    let mut v = vec![
        ("rx_packets".to_owned(), t.rx_packets),
        ("rx_bytes".to_owned(), t.rx_bytes),
        ("tx_packets".to_owned(), t.tx_packets),
        ("tx_bytes".to_owned(), t.tx_bytes),
        ("tx_full_drops".to_owned(), t.tx_full_drops),
        ("digests_exported".to_owned(), e.digests_sent()),
        ("digests_dropped".to_owned(), e.digests_dropped),
        ("flowsets_exported".to_owned(), e.flowsets_sent()),
        (
            telemetry::protocol::FLOWSETS_DROPPED.to_owned(),
            e.flowsets_dropped,
        ),
        (
            telemetry::protocol::PROBES_DROPPED.to_owned(),
            e.probes_dropped,
        ),
    ];
    v.extend(t.drops.nonzero().map(|(r, n)| (format!("drop_{r}"), n)));
    v.extend(t.telemetry.nonzero().map(|(e, n)| (e.name().to_owned(), n)));
    v
}

impl ControlLoop<'_> {
    /// Runs until `stop` is set, a worker stops (`workers_running` turns false), the duration
    /// passes, or the switch has been idle for the configured time.
    pub fn run(mut self, workers_running: impl Fn() -> bool) -> LoopOutcome {
        let start = Instant::now();
        let interval = (self.config.stats.interval_ms > 0)
            .then(|| Duration::from_millis(self.config.stats.interval_ms));
        let metrics_every = interval
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        let base_tick = if self.telemetry.is_some() {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(5)
        };
        // An idle switch's ticks lengthen up to half an epoch (at most IDLE_TICK_MAX), so that
        // many idle switches on few cores cost little; any packet or digest brings the base
        // tick back.
        let idle_tick_max = match &self.telemetry {
            Some(t) => (t.epoch() / 2).clamp(base_tick, IDLE_TICK_MAX),
            None => base_tick,
        };
        let mut tick = base_tick;
        let mut seen = (0u64, 0u64);
        let mut next_stats = start + interval.unwrap_or(Duration::from_secs(3600));
        let mut next_metrics = start;
        let mut prev = LocalCounters::default();
        let mut prev_t = start;
        let mut last_rx = 0u64;
        let mut last_rx_change = start;
        let mut intervals = std::collections::VecDeque::new();
        let mut deadline = start;
        if let Some(t) = &self.telemetry {
            crate::say!(
                "telemetry: plan {:08x}, {} ms epochs, sink {}",
                t.plan().version(),
                t.epoch().as_millis(),
                self.config.telemetry.sink.as_deref().unwrap_or("none")
            );
            for line in t.plan().plan.describe().lines() {
                crate::say!("{line}");
            }
        }
        loop {
            deadline += tick;
            let now = Instant::now();
            if deadline > now {
                std::thread::sleep(deadline - now);
            }
            let now = Instant::now();
            let late = now.saturating_duration_since(deadline);
            if late > tick * 10 {
                // Far behind (the machine was busy): start counting from now.
                deadline = now;
            }
            if self.stop.load(Ordering::Relaxed) {
                crate::say!("stopping on signal");
                break;
            }
            if !workers_running() {
                crate::say!("a worker stopped; stopping");
                break;
            }
            if self.limits.duration.is_some_and(|d| now - start >= d) {
                break;
            }
            // Packets received so far (for the idle tick and --until-idle).
            let rx: u64 = self.shared.iter().map(|s| s.read().rx_packets).sum();
            if let Some(t) = self.telemetry.as_deref_mut() {
                t.poll(now, late);
                let activity = (rx, t.counts.digests_drained);
                tick = if activity == seen {
                    (tick * 2).min(idle_tick_max)
                } else {
                    base_tick
                };
                seen = activity;
                if self.reload.swap(false, Ordering::Relaxed) {
                    match t.reload(self.config) {
                        Ok(line) => crate::say!("{line}"),
                        Err(e) => crate::say!("plan reload rejected, nothing changed: {e}"),
                    }
                }
            } else if self.reload.swap(false, Ordering::Relaxed) {
                crate::say!("plan reload: telemetry is off; nothing to reload");
            }
            if let Some(idle) = self.limits.until_idle {
                if rx != last_rx {
                    last_rx = rx;
                    last_rx_change = now;
                } else if now - last_rx_change >= idle {
                    crate::say!("no packet for {} ms; stopping", idle.as_millis());
                    break;
                }
            }
            if now >= next_metrics {
                next_metrics = now + metrics_every;
                if let Some(f) = self.each_second.as_deref_mut() {
                    f();
                }
                self.publish();
                // Without stats intervals the sink still hears the counters once a second.
                if interval.is_none()
                    && let Some(tc) = &self.telemetry
                {
                    tc.send_stats(stats_counters(&total(self.shared), &tc.counts));
                }
            }
            if interval.is_some() && now >= next_stats {
                let t = total(self.shared);
                let dt = (now - prev_t).as_secs_f64();
                let rx = t.rx_packets.saturating_sub(prev.rx_packets) as f64;
                let tx = t.tx_packets.saturating_sub(prev.tx_packets) as f64;
                let cpp = if rx > 0.0 {
                    t.busy_cycles.saturating_sub(prev.busy_cycles) as f64 / rx
                } else {
                    0.0
                };
                let iv = Interval {
                    t: (now - start).as_secs_f64(),
                    rx_mpps: rx / dt / 1e6,
                    tx_mpps: tx / dt / 1e6,
                    cycles_per_packet: cpp,
                };
                let tel = match &self.telemetry {
                    Some(tc) => {
                        let ev = |e: TelemetryEvent| t.telemetry.get(e) - prev.telemetry.get(e);
                        format!(
                            " | digests {:.0}/s, epochs {}, sink {}",
                            ev(TelemetryEvent::DigestRecorded) as f64 / dt,
                            ev(TelemetryEvent::EpochClosed),
                            if tc.counts.sink_connected {
                                "up"
                            } else if self.config.telemetry.sink.is_some() {
                                "down"
                            } else {
                                "none"
                            }
                        )
                    }
                    None => String::new(),
                };
                // No packets, no cost per packet: a dash, not 0.0.
                let cpp_words = if rx > 0.0 {
                    format!("{cpp:6.1}")
                } else {
                    format!("{:>6}", "-")
                };
                crate::say!(
                    "[{:7.1}s] rx {:8.3} Mpps {:7.3} Gbit/s | tx {:8.3} Mpps | {cpp_words} cycles/pkt | drops so far {}{tel}",
                    iv.t,
                    iv.rx_mpps,
                    (t.rx_bytes - prev.rx_bytes) as f64 * 8.0 / dt / 1e9,
                    iv.tx_mpps,
                    drops_line(&t)
                );
                if let Some(tc) = &self.telemetry {
                    tc.send_stats(stats_counters(&t, &tc.counts));
                }
                if intervals.len() >= MAX_INTERVALS {
                    intervals.pop_front();
                }
                intervals.push_back(iv);
                prev = t;
                prev_t = now;
                // After a stall, the next interval is a whole one from now (catching up made
                // intervals of a few ms, their rates measured over nothing).
                next_stats += interval.unwrap_or_default();
                if next_stats <= now {
                    next_stats = now + interval.unwrap_or_default();
                }
            }
        }
        self.publish();
        LoopOutcome {
            intervals: intervals.into(),
            seconds: start.elapsed().as_secs_f64(),
        }
    }

    fn publish(&mut self) {
        if let Some(m) = self.metrics.as_deref_mut() {
            publish_metrics(m, self.shared, self.telemetry.as_deref());
        }
    }
}

/// Sets the switch's metrics from the workers' counters and the telemetry's (the control
/// loop's, and the switch's once its workers have stopped).
pub fn publish_metrics(
    m: &mut SwitchMetrics,
    shared: &[SharedCounters],
    telemetry: Option<&TelemetryControl>,
) {
    let per_worker: Vec<LocalCounters> = shared.iter().map(SharedCounters::read).collect();
    let (counts, plan) = match telemetry {
        Some(t) => (t.counts, Some(t.plan().version())),
        None => (ControlCounts::default(), None),
    };
    m.update(&per_worker, &counts, plan);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sink reads the drops of flowsets and probe records from the stats by name: a
    /// flowset dropped is short counts, a probe record dropped a probe that arrived.
    #[test]
    fn the_stats_say_what_the_export_dropped() {
        let export = ControlCounts {
            flowsets_dropped: 2,
            probes_dropped: 7,
            ..ControlCounts::default()
        };
        let stats = stats_counters(&LocalCounters::default(), &export);
        let get = |name: &str| stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(get(telemetry::protocol::FLOWSETS_DROPPED), Some(2));
        assert_eq!(get(telemetry::protocol::PROBES_DROPPED), Some(7));
    }
}

//! What a switch run did: the final statistics `pint-switch` prints and writes as JSON
//! (`--summary-json`). The same types read the JSON back (benchmarks and tests do), so
//! writer and reader cannot drift apart.

use serde::{Deserialize, Serialize};

use pipeline::{DropCounts, LocalCounters, TelemetryCounts};

/// One statistics interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A port's driver counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStats {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets the device dropped because no rx descriptor was free (the switch fell behind).
    pub rx_missed: u64,
    /// Erroneous received packets.
    pub rx_errors: u64,
    /// Failed transmissions.
    pub tx_errors: u64,
    /// Rx failures because the mbuf pool was empty.
    pub rx_nombuf: u64,
    /// Packets received per rx queue (the first 16 queues; drivers that do not count per
    /// queue report zeros).
    pub queue_rx_packets: Vec<u64>,
    /// Packets sent per tx queue (as above).
    pub queue_tx_packets: Vec<u64>,
}

impl PortStats {
    /// Field by field, `self` plus `other` (per-queue counts queue by queue).
    fn plus(&self, other: &PortStats) -> PortStats {
        let queues = |a: &[u64], b: &[u64]| -> Vec<u64> {
            (0..a.len().max(b.len()))
                .map(|i| a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0))
                .collect()
        };
        PortStats {
            rx_packets: self.rx_packets + other.rx_packets,
            rx_bytes: self.rx_bytes + other.rx_bytes,
            tx_packets: self.tx_packets + other.tx_packets,
            tx_bytes: self.tx_bytes + other.tx_bytes,
            rx_missed: self.rx_missed + other.rx_missed,
            rx_errors: self.rx_errors + other.rx_errors,
            tx_errors: self.tx_errors + other.tx_errors,
            rx_nombuf: self.rx_nombuf + other.rx_nombuf,
            queue_rx_packets: queues(&self.queue_rx_packets, &other.queue_rx_packets),
            queue_tx_packets: queues(&self.queue_tx_packets, &other.queue_tx_packets),
        }
    }

    /// Whether the driver counted from zero again since `before`: a packet count below half
    /// of what it was (a count a driver works out, such as packets less discards, may dip
    /// a little without a reset; that is no reset).
    fn went_back(&self, before: &PortStats) -> bool {
        self.rx_packets < before.rx_packets / 2 || self.tx_packets < before.tx_packets / 2
    }
}

/// A port's driver counters over the whole run, across the driver's resets and the spells
/// in which it shows none. memif reads zero while its peer is away and its running totals
/// again once the peer is back (a lab's server side stops first, which left a switch's
/// summary with zeros for ports that had carried its traffic); a driver that resets counts
/// from zero up. A reading below the last that counts something is a reset (what came
/// before is kept and added); one of no packets at all is held until the readings say
/// which: back to at least what they were (the counts were only hidden: nothing is added),
/// or counting up again from below (a reset). Read about once a second, what a reset takes
/// is at most the packets since the reading before it.
#[derive(Debug, Clone, Default)]
pub struct PortTotals {
    /// What the driver had counted before its resets, summed.
    before: PortStats,
    /// The last reading.
    last: PortStats,
    /// The last reading before a dip not yet told apart (hidden counts or a reset).
    dipped_from: Option<PortStats>,
}

impl PortTotals {
    /// Takes a reading of the driver's counters.
    pub fn observe(&mut self, now: PortStats) {
        if let Some(peak) = &self.dipped_from {
            let back = now.rx_packets >= peak.rx_packets && now.tx_packets >= peak.tx_packets;
            let counting_again = !back && (now.rx_packets > 0 || now.tx_packets > 0);
            if back {
                self.dipped_from = None;
            } else if counting_again {
                self.before = self.before.plus(peak);
                self.dipped_from = None;
            }
        } else if now.went_back(&self.last) {
            if now.rx_packets == 0 && now.tx_packets == 0 {
                self.dipped_from = Some(self.last.clone());
            } else {
                self.before = self.before.plus(&self.last);
            }
        }
        self.last = now;
    }

    /// The counts over the run so far.
    pub fn total(&self) -> PortStats {
        match &self.dipped_from {
            // Hidden or reset, the counts up to the dip were made.
            Some(peak) => self.before.plus(peak),
            None => self.before.plus(&self.last),
        }
    }
}

/// One port's final statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortSummary {
    /// Port name.
    pub name: String,
    /// DPDK driver.
    pub driver: String,
    /// Driver counters.
    pub stats: PortStats,
    /// Packets the workers handed to the port (forwarded there, less tx-full and
    /// impairment drops; virtual devices do not all count what they send).
    #[serde(default)]
    pub forwarded_packets: u64,
    /// Their bytes.
    #[serde(default)]
    pub forwarded_bytes: u64,
    /// Packets for the port not sent: its tx queue stayed full, its link was down or it
    /// was closed while restarted.
    #[serde(default)]
    pub tx_full_drops: u64,
    /// Packets for the port its impairment dropped (`impair` loss).
    #[serde(default)]
    pub impair_lost: u64,
    /// Packets for the port its impairment's full delay line dropped (`impair_overflow`).
    #[serde(default)]
    pub impair_overflow: u64,
}

/// What the telemetry did over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// Whether telemetry was on.
    pub enabled: bool,
    /// The plan version in use at the end (hex), if any.
    pub plan_version: Option<String>,
    /// Plan versions installed over the run, in order (the first at start): the last 64
    /// when there were more.
    pub plans_installed: Vec<String>,
    /// Query-file reloads applied (each installed a plan).
    #[serde(default)]
    pub reloads_applied: u64,
    /// Query-file reloads rejected (the reason was logged; nothing changed).
    pub reloads_rejected: u64,
    /// The data plane's telemetry events, summed over workers.
    pub events: TelemetryCounts,
    /// Digest records written to the sink's connection.
    pub digests_exported: u64,
    /// Digest records dropped by the control thread (export queue full or no sink).
    pub digests_dropped: u64,
    /// Flowsets (one per worker per epoch) written to the sink's connection.
    pub flowsets_exported: u64,
    /// Flowsets dropped (export queue full or no sink).
    pub flowsets_dropped: u64,
    /// Probe records (a probe packet's sequence number and times at the edge) dropped on
    /// the way to the sink (export queue full or no sink): the sink would read them as lost.
    #[serde(default)]
    pub probes_dropped: u64,
    /// Epoch deadlines the control thread missed (it woke up after the next epoch ended).
    pub deadlines_missed: u64,
    /// Frames written to the sink.
    pub frames_sent: u64,
    /// Bytes written to the sink.
    pub bytes_sent: u64,
    /// Connections made to the sink.
    pub sink_connections: u64,
    /// The sink's address (`telemetry.sink`); none: digests and flowsets were made and let
    /// go.
    #[serde(default)]
    pub sink: Option<String>,
}

/// A port's impairment drops for its summary line (nothing where it dropped none).
fn impair_counts(p: &PortSummary) -> String {
    let mut s = String::new();
    if p.impair_lost > 0 {
        s += &format!(" impair_lost {}", p.impair_lost);
    }
    if p.impair_overflow > 0 {
        s += &format!(" impair_overflow {}", p.impair_overflow);
    }
    s
}

/// TSC cycles per received packet in the polls that received packets (0 without any).
fn cycles_per_packet(c: &LocalCounters) -> f64 {
    if c.rx_packets > 0 {
        c.busy_cycles as f64 / c.rx_packets as f64
    } else {
        0.0
    }
}

/// What one worker did: a worker that stalled or took more than its share shows here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSummary {
    /// The CPU it ran on.
    pub lcore: u32,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets handed to a tx queue.
    pub tx_packets: u64,
    /// Packets the pipeline dropped (every reason).
    pub dropped: u64,
    /// Packets not sent: a tx queue stayed full, a link was down or a port closed.
    pub tx_full_drops: u64,
    /// TSC cycles per packet in its polls that received packets.
    pub cycles_per_packet: f64,
    /// Telemetry epochs it closed (one per epoch while it runs with telemetry on).
    pub epochs_closed: u64,
}

impl WorkerSummary {
    /// The summary of the worker on `lcore` from its counters.
    pub fn of(lcore: u32, c: &LocalCounters) -> WorkerSummary {
        WorkerSummary {
            lcore,
            rx_packets: c.rx_packets,
            tx_packets: c.tx_packets,
            dropped: c.dropped(),
            tx_full_drops: c.tx_full_drops,
            cycles_per_packet: cycles_per_packet(c),
            epochs_closed: c.telemetry.get(pipeline::TelemetryEvent::EpochClosed),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub drops: DropCounts,
    /// Packets not sent: a tx queue stayed full, a link was down or a port closed.
    pub tx_full_drops: u64,
    /// Tx calls made again for a burst that a call did not take whole.
    pub tx_retries: u64,
    /// Packets impaired ports held in their delay lines.
    #[serde(default)]
    pub impair_delayed: u64,
    /// Packets impaired ports reordered.
    #[serde(default)]
    pub impair_reordered: u64,
    /// Average received Mpps over the run.
    pub rx_mpps: f64,
    /// TSC cycles per packet in polls that received packets (rx, pipeline and tx).
    pub cycles_per_packet: f64,
    /// The statistics intervals.
    pub intervals: Vec<Interval>,
    /// Per-port driver statistics.
    pub ports: Vec<PortSummary>,
    /// Per-worker received packets (as in `workers`).
    pub worker_rx_packets: Vec<u64>,
    /// Per-worker totals, in the config's worker order (empty in summaries written before
    /// they were kept).
    #[serde(default)]
    pub workers: Vec<WorkerSummary>,
    /// Telemetry.
    pub telemetry: TelemetrySummary,
}

impl Summary {
    /// The totals of a run of `seconds` from the workers' summed counters.
    pub fn from_totals(switch_id: u32, seconds: f64, t: &LocalCounters) -> Summary {
        Summary {
            switch_id,
            seconds,
            rx_packets: t.rx_packets,
            rx_bytes: t.rx_bytes,
            tx_packets: t.tx_packets,
            tx_bytes: t.tx_bytes,
            drops: t.drops,
            tx_full_drops: t.tx_full_drops,
            tx_retries: t.tx_retries,
            impair_delayed: t.impair_delayed,
            impair_reordered: t.impair_reordered,
            rx_mpps: if seconds > 0.0 {
                t.rx_packets as f64 / seconds / 1e6
            } else {
                0.0
            },
            cycles_per_packet: cycles_per_packet(t),
            intervals: Vec::new(),
            ports: Vec::new(),
            worker_rx_packets: Vec::new(),
            workers: Vec::new(),
            telemetry: TelemetrySummary {
                events: t.telemetry,
                ..Default::default()
            },
        }
    }

    /// Reads a summary written by `--summary-json`.
    pub fn from_json(text: &str) -> Result<Summary, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The summary as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a summary always serialises")
    }

    /// Total pipeline drops.
    pub fn dropped(&self) -> u64 {
        self.drops.total()
    }

    /// Prints the summary for a person.
    pub fn print(&self) {
        crate::say!("== summary: {:.2} s ==", self.seconds);
        crate::say!(
            "rx {} packets ({} bytes), tx {} packets ({} bytes), average {:.3} Mpps, {:.1} cycles/packet",
            self.rx_packets,
            self.rx_bytes,
            self.tx_packets,
            self.tx_bytes,
            self.rx_mpps,
            self.cycles_per_packet
        );
        crate::say!(
            "dropped {}: {}",
            self.dropped(),
            pipeline::DropReason::ALL
                .iter()
                .map(|r| format!("{r}={}", self.drops.get(*r)))
                .collect::<Vec<_>>()
                .join(" ")
        );
        crate::say!(
            "tx queue full: {} dropped, {} retries",
            self.tx_full_drops,
            self.tx_retries
        );
        let (lost, over) = (
            self.drops.get(pipeline::DropReason::ImpairLoss),
            self.drops.get(pipeline::DropReason::ImpairOverflow),
        );
        if lost + over + self.impair_delayed + self.impair_reordered > 0 {
            crate::say!(
                "impairment: {lost} lost, {} delayed, {} reordered, {over} over the limit",
                self.impair_delayed,
                self.impair_reordered
            );
        }
        let t = &self.telemetry;
        if t.enabled {
            crate::say!(
                "telemetry: plan {} | {} | digests exported {} dropped {} | flowsets exported {} dropped {}{} | deadlines missed {} | {}",
                t.plan_version.as_deref().unwrap_or("none"),
                t.events
                    .nonzero()
                    .map(|(e, n)| format!("{e}={n}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                t.digests_exported,
                t.digests_dropped,
                t.flowsets_exported,
                t.flowsets_dropped,
                if t.probes_dropped > 0 {
                    format!(" | probes dropped {}", t.probes_dropped)
                } else {
                    String::new()
                },
                t.deadlines_missed,
                match &t.sink {
                    Some(sink) => format!(
                        "sink {sink}: {} connection{}, {} frames, {} bytes",
                        t.sink_connections,
                        if t.sink_connections == 1 { "" } else { "s" },
                        t.frames_sent,
                        t.bytes_sent
                    ),
                    None =>
                        "no sink (telemetry.sink not set): digests and flowsets made and let go"
                            .to_owned(),
                }
            );
        }
        if self.workers.len() > 1 {
            for (i, w) in self.workers.iter().enumerate() {
                crate::say!(
                    "worker {i} (lcore {}) rx {} tx {} dropped {} tx_full {}, {:.1} cycles/packet{}",
                    w.lcore,
                    w.rx_packets,
                    w.tx_packets,
                    w.dropped,
                    w.tx_full_drops,
                    w.cycles_per_packet,
                    if self.telemetry.enabled {
                        format!(", epochs closed {}", w.epochs_closed)
                    } else {
                        String::new()
                    }
                );
            }
        }
        for p in &self.ports {
            let st = &p.stats;
            crate::say!(
                "port {:<8} ({}) rx {} tx {} missed {} rx_errors {} tx_errors {} rx_nombuf {} tx_full {}{}",
                p.name,
                p.driver,
                st.rx_packets,
                st.tx_packets,
                st.rx_missed,
                st.rx_errors,
                st.tx_errors,
                st.rx_nombuf,
                p.tx_full_drops,
                impair_counts(p)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_counts_add_up_across_a_driver_reset() {
        let reading = |rx: u64, tx: u64| PortStats {
            rx_packets: rx,
            rx_bytes: rx * 100,
            tx_packets: tx,
            tx_bytes: tx * 100,
            queue_rx_packets: vec![rx],
            queue_tx_packets: vec![tx],
            ..Default::default()
        };
        let mut t = PortTotals::default();
        t.observe(reading(10, 8));
        t.observe(reading(20, 18));
        // The peer left: the driver shows nothing; what was counted stays.
        t.observe(reading(0, 0));
        assert_eq!(t.total(), reading(20, 18));
        // It counts from zero again (a reset).
        t.observe(reading(5, 4));
        assert_eq!(t.total(), reading(25, 22));
        // A reset whose first reading already counts, then past what was before: nothing
        // that came before is lost.
        let mut quick = PortTotals::default();
        for r in [1000, 3, 1500] {
            quick.observe(reading(r, 0));
        }
        assert_eq!(quick.total(), reading(2500, 0));
        // A reading that only grows adds nothing of its own.
        t.observe(reading(7, 4));
        assert_eq!(t.total(), reading(27, 22));
        // A count that dips a little (worked out by the driver) is no reset.
        t.observe(reading(100, 100));
        t.observe(reading(98, 100));
        assert_eq!(t.total(), reading(118, 118));
    }

    /// memif shows no counts while its peer is away and its running totals once the peer is
    /// back: nothing is added twice (three pint-gen sessions of 400k, 500k and 200k packets
    /// read as 2.4 M).
    #[test]
    fn port_counts_hidden_while_a_peer_is_away_are_not_added_twice() {
        let reading = |rx: u64| PortStats {
            rx_packets: rx,
            ..Default::default()
        };
        let mut t = PortTotals::default();
        for (r, total) in [
            (400_000, 400_000),
            (0, 400_000),
            (0, 400_000),
            (600_000, 600_000),
            (900_000, 900_000),
            (0, 900_000),
            (1_100_000, 1_100_000),
        ] {
            t.observe(reading(r));
            assert_eq!(t.total().rx_packets, total, "after a reading of {r}");
        }
    }

    #[test]
    fn a_summary_reads_back_from_its_json() {
        let mut t = LocalCounters {
            rx_packets: 10,
            tx_packets: 8,
            busy_cycles: 1000,
            ..Default::default()
        };
        t.drop_one(pipeline::DropReason::NoRoute);
        t.event(pipeline::TelemetryEvent::ShimInserted);
        let mut s = Summary::from_totals(7, 2.0, &t);
        s.intervals.push(Interval {
            t: 1.0,
            rx_mpps: 1.5,
            tx_mpps: 1.25,
            cycles_per_packet: 99.5,
        });
        s.ports.push(PortSummary {
            forwarded_packets: 0,
            forwarded_bytes: 0,
            tx_full_drops: 5,
            impair_lost: 2,
            impair_overflow: 3,
            name: "a".into(),
            driver: "net_null".into(),
            stats: PortStats {
                rx_packets: 3,
                queue_rx_packets: vec![1, 2],
                ..Default::default()
            },
        });
        s.telemetry.plan_version = Some("0badcafe".into());
        s.workers.push(WorkerSummary::of(3, &t));
        assert_eq!(
            (s.workers[0].dropped, s.workers[0].cycles_per_packet),
            (1, 100.0)
        );
        let back = Summary::from_json(&s.to_json()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.dropped(), 1);
        assert_eq!(back.cycles_per_packet, 100.0);
        // A summary written before per-worker totals were kept still reads.
        let mut old: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        old.as_object_mut().unwrap().remove("workers");
        // ... and before a port's impairment overflow was.
        old["ports"][0]
            .as_object_mut()
            .unwrap()
            .remove("impair_overflow")
            .unwrap();
        let back = Summary::from_json(&old.to_string()).unwrap();
        assert!(back.workers.is_empty());
        assert_eq!(back.ports[0].impair_overflow, 0);
    }
}

//! The switch's Prometheus endpoint (`[metrics] listen`): the data plane's counters per port
//! and worker, drops by reason, telemetry events, export and sink state, and the plan in
//! force. The control thread copies the workers' published counters into the metrics
//! registry every interval; scraping never touches the data plane. Labels are bounded
//! (port, worker, reason, event, plan version, reload result); no flow ever becomes a label.

use std::net::SocketAddr;

use metrics::{Counter, Gauge, Unit, counter, describe_counter, describe_gauge, gauge};
use metrics_exporter_prometheus::PrometheusBuilder;
use pipeline::{DropReason, LocalCounters, TelemetryEvent};

use crate::Config;

/// What the control thread itself counts, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlCounts {
    /// Digest records taken off the rings.
    pub digests_drained: u64,
    /// Flowsets serialised.
    pub flowsets_serialised: u64,
    /// Epoch deadlines missed.
    pub deadlines_missed: u64,
    /// Query-file reloads applied.
    pub reloads_applied: u64,
    /// Query-file reloads rejected.
    pub reloads_rejected: u64,
    /// Sink state.
    pub sink_connected: bool,
    /// Connections made to the sink.
    pub sink_connections: u64,
    /// Bytes written to the sink.
    pub sink_bytes: u64,
    /// Frames written to the sink.
    pub sink_frames: u64,
    /// Digests dropped on the way to the sink.
    pub digests_dropped: u64,
    /// Flowsets dropped on the way to the sink.
    pub flowsets_dropped: u64,
    /// Digests written to the sink's connection.
    pub digests_written: u64,
    /// Flowsets written to the sink's connection.
    pub flowsets_written: u64,
    /// Probe records dropped on the way to the sink.
    pub probes_dropped: u64,
    /// Probe records taken off the workers' probe rings.
    pub probes_drained: u64,
}

impl ControlCounts {
    /// Digests that went to the sink: written to its connection (those still on their way
    /// are neither sent nor dropped yet, so the count never goes back).
    pub fn digests_sent(&self) -> u64 {
        self.digests_written
    }

    /// Flowsets that went to the sink: written to its connection.
    pub fn flowsets_sent(&self) -> u64 {
        self.flowsets_written
    }
}

struct PortHandles {
    rx_packets: Counter,
    rx_bytes: Counter,
    tx_packets: Counter,
    tx_bytes: Counter,
    tx_full_drops: Counter,
}

struct WorkerHandles {
    ports: Vec<PortHandles>,
    drops: Vec<Counter>,
    events: Vec<Counter>,
    busy_cycles: Counter,
}

/// The registered metrics.
pub struct SwitchMetrics {
    workers: Vec<WorkerHandles>,
    digests_drained: Counter,
    flowsets_exported: Counter,
    digests_exported: Counter,
    deadlines_missed: Counter,
    reloads_applied: Counter,
    reloads_rejected: Counter,
    sink_connected: Gauge,
    sink_connections: Counter,
    sink_bytes: Counter,
    sink_frames: Counter,
    digests_dropped: Counter,
    flowsets_dropped: Counter,
    probes_dropped: Counter,
    plan: Option<(u32, Gauge)>,
}

fn describe() {
    describe_counter!(
        "pint_switch_rx_packets_total",
        Unit::Count,
        "Packets received, per port and worker."
    );
    describe_counter!(
        "pint_switch_rx_bytes_total",
        Unit::Bytes,
        "Bytes received, per port and worker."
    );
    describe_counter!(
        "pint_switch_tx_packets_total",
        Unit::Count,
        "Packets sent, per port and worker."
    );
    describe_counter!(
        "pint_switch_tx_bytes_total",
        Unit::Bytes,
        "Bytes sent (shims included), per port and worker."
    );
    describe_counter!(
        "pint_switch_dropped_packets_total",
        Unit::Count,
        "Packets the pipeline dropped, per reason and worker."
    );
    describe_counter!(
        "pint_switch_tx_full_dropped_packets_total",
        Unit::Count,
        "Packets not sent (a tx queue stayed full, a link was down or a port closed while restarted), per port and worker."
    );
    describe_counter!(
        "pint_switch_busy_cycles_total",
        Unit::Count,
        "TSC cycles spent in polls that received packets, per worker (over pint_switch_tsc_hertz: seconds)."
    );
    describe_gauge!(
        "pint_switch_tsc_hertz",
        Unit::Count,
        "TSC cycles per second: turns the cycle counters into seconds."
    );
    describe_counter!(
        "pint_switch_telemetry_events_total",
        Unit::Count,
        "Telemetry stage events (shims inserted and stripped, digests recorded, epochs), per event and worker."
    );
    describe_counter!(
        "pint_switch_digests_drained_total",
        Unit::Count,
        "Digest records the control thread took off the workers' rings."
    );
    describe_counter!(
        "pint_switch_flowsets_exported_total",
        Unit::Count,
        "FlowRadar flowsets (one per worker per epoch) written to the sink's connection."
    );
    describe_counter!(
        "pint_switch_digests_exported_total",
        Unit::Count,
        "Digests written to the sink's connection."
    );
    describe_counter!(
        "pint_switch_port_rx_missed_packets_total",
        Unit::Count,
        "Packets the port's device dropped because no rx descriptor was free (the workers fell behind), per port."
    );
    describe_gauge!(
        "pint_switch_port_link_up",
        Unit::Count,
        "1 while the port's link is up (a memif port: while its peer is connected), per port."
    );
    describe_counter!(
        "pint_switch_port_rx_nombuf_total",
        Unit::Count,
        "Receive failures because the mbuf pool was empty, per port."
    );
    describe_counter!(
        "pint_switch_port_rx_errors_total",
        Unit::Count,
        "Erroneous packets the port's device received, per port."
    );
    describe_counter!(
        "pint_switch_port_tx_errors_total",
        Unit::Count,
        "Transmissions the port's device failed, per port."
    );
    describe_counter!(
        "pint_switch_epoch_deadlines_missed_total",
        Unit::Count,
        "Epochs whose flowsets the control thread collected more than an epoch late."
    );
    describe_counter!(
        "pint_switch_plan_reloads_total",
        Unit::Count,
        "Query-file reloads, by result (applied or rejected)."
    );
    describe_gauge!(
        "pint_switch_sink_connected",
        Unit::Count,
        "1 while the connection to the sink is up."
    );
    describe_counter!(
        "pint_switch_sink_connections_total",
        Unit::Count,
        "Connections made to the sink."
    );
    describe_counter!(
        "pint_switch_sink_sent_bytes_total",
        Unit::Bytes,
        "Bytes written to the sink."
    );
    describe_counter!(
        "pint_switch_sink_frames_total",
        Unit::Count,
        "Frames written to the sink."
    );
    describe_counter!(
        "pint_switch_export_dropped_digests_total",
        Unit::Count,
        "Digests dropped on the way to the sink (queue full or no connection)."
    );
    describe_counter!(
        "pint_switch_export_dropped_flowsets_total",
        Unit::Count,
        "Flowsets dropped on the way to the sink (queue full or no connection)."
    );
    describe_counter!(
        "pint_switch_export_dropped_probes_total",
        Unit::Count,
        "Probe records dropped on the way to the sink (queue full or no connection)."
    );
    describe_gauge!(
        "pint_switch_plan_info",
        Unit::Count,
        "1 for the plan version in force, 0 for earlier ones."
    );
}

impl SwitchMetrics {
    /// Starts the endpoint on `listen` and registers the switch's metrics.
    #[cold]
    pub fn install(
        listen: SocketAddr,
        config: &Config,
        tsc_hz: u64,
    ) -> anyhow::Result<SwitchMetrics> {
        let cannot = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("config key `metrics.listen`: cannot serve metrics on {listen}: {e}")
        };
        let listener = std::net::TcpListener::bind(listen).map_err(|e| cannot(&e))?;
        let handle = PrometheusBuilder::new()
            .install_recorder()
            .map_err(|e| cannot(&e))?;
        crate::metrics_http::serve(listener, handle, crate::metrics_http::Limits::default())
            .map_err(|e| cannot(&e))?;
        describe();
        gauge!("pint_switch_tsc_hertz").set(tsc_hz as f64);
        let workers = (0..config.workers.len())
            .map(|w| {
                let worker = w.to_string();
                WorkerHandles {
                    ports: config
                        .ports
                        .iter()
                        .map(|p| {
                            let l = [("port", p.name.clone()), ("worker", worker.clone())];
                            PortHandles {
                                rx_packets: counter!("pint_switch_rx_packets_total", &l),
                                rx_bytes: counter!("pint_switch_rx_bytes_total", &l),
                                tx_packets: counter!("pint_switch_tx_packets_total", &l),
                                tx_bytes: counter!("pint_switch_tx_bytes_total", &l),
                                tx_full_drops: counter!(
                                    "pint_switch_tx_full_dropped_packets_total",
                                    &l
                                ),
                            }
                        })
                        .collect(),
                    drops: DropReason::ALL
                        .iter()
                        .map(|r| {
                            counter!("pint_switch_dropped_packets_total", "reason" => r.name(), "worker" => worker.clone())
                        })
                        .collect(),
                    events: TelemetryEvent::ALL
                        .iter()
                        .map(|e| {
                            counter!("pint_switch_telemetry_events_total", "event" => e.name(), "worker" => worker.clone())
                        })
                        .collect(),
                    busy_cycles: counter!("pint_switch_busy_cycles_total", "worker" => worker.clone()),
                }
            })
            .collect();
        Ok(SwitchMetrics {
            workers,
            digests_drained: counter!("pint_switch_digests_drained_total"),
            flowsets_exported: counter!("pint_switch_flowsets_exported_total"),
            digests_exported: counter!("pint_switch_digests_exported_total"),
            deadlines_missed: counter!("pint_switch_epoch_deadlines_missed_total"),
            reloads_applied: counter!("pint_switch_plan_reloads_total", "result" => "applied"),
            reloads_rejected: counter!("pint_switch_plan_reloads_total", "result" => "rejected"),
            sink_connected: gauge!("pint_switch_sink_connected"),
            sink_connections: counter!("pint_switch_sink_connections_total"),
            sink_bytes: counter!("pint_switch_sink_sent_bytes_total"),
            sink_frames: counter!("pint_switch_sink_frames_total"),
            digests_dropped: counter!("pint_switch_export_dropped_digests_total"),
            flowsets_dropped: counter!("pint_switch_export_dropped_flowsets_total"),
            probes_dropped: counter!("pint_switch_export_dropped_probes_total"),
            plan: None,
        })
    }

    /// Copies the current counters into the registry.
    pub fn update(&mut self, per_worker: &[LocalCounters], c: &ControlCounts, plan: Option<u32>) {
        for (h, w) in self.workers.iter().zip(per_worker) {
            for (p, pc) in h.ports.iter().zip(&w.ports) {
                p.rx_packets.absolute(pc.rx_packets);
                p.rx_bytes.absolute(pc.rx_bytes);
                p.tx_packets.absolute(pc.tx_packets);
                p.tx_bytes.absolute(pc.tx_bytes);
                p.tx_full_drops.absolute(pc.tx_full_drops);
            }
            for (d, v) in h.drops.iter().zip(w.drops.0) {
                d.absolute(v);
            }
            for (e, v) in h.events.iter().zip(w.telemetry.0) {
                e.absolute(v);
            }
            h.busy_cycles.absolute(w.busy_cycles);
        }
        self.digests_drained.absolute(c.digests_drained);
        self.flowsets_exported.absolute(c.flowsets_sent());
        self.digests_exported.absolute(c.digests_sent());
        self.deadlines_missed.absolute(c.deadlines_missed);
        self.reloads_applied.absolute(c.reloads_applied);
        self.reloads_rejected.absolute(c.reloads_rejected);
        self.sink_connected
            .set(if c.sink_connected { 1.0 } else { 0.0 });
        self.sink_connections.absolute(c.sink_connections);
        self.sink_bytes.absolute(c.sink_bytes);
        self.sink_frames.absolute(c.sink_frames);
        self.digests_dropped.absolute(c.digests_dropped);
        self.flowsets_dropped.absolute(c.flowsets_dropped);
        self.probes_dropped.absolute(c.probes_dropped);
        if let Some(v) = plan
            && self.plan.as_ref().map(|p| p.0) != Some(v)
        {
            if let Some((_, g)) = &self.plan {
                g.set(0.0);
            }
            let g = gauge!("pint_switch_plan_info", "version" => format!("{v:08x}"));
            g.set(1.0);
            self.plan = Some((v, g));
        }
    }
}

/// The ports' device counters (read from their drivers about once a second): losses the
/// pipeline's own counters cannot see.
pub struct PortMetrics {
    ports: Vec<[Counter; 4]>,
    links: Vec<Gauge>,
}

impl PortMetrics {
    /// Registers the counters of the configured ports (after [`SwitchMetrics::install`]).
    #[cold]
    pub fn new(config: &Config) -> PortMetrics {
        PortMetrics {
            ports: config
                .ports
                .iter()
                .map(|p| {
                    let l = [("port", p.name.clone())];
                    [
                        counter!("pint_switch_port_rx_missed_packets_total", &l),
                        counter!("pint_switch_port_rx_nombuf_total", &l),
                        counter!("pint_switch_port_rx_errors_total", &l),
                        counter!("pint_switch_port_tx_errors_total", &l),
                    ]
                })
                .collect(),
            links: config
                .ports
                .iter()
                .map(|p| gauge!("pint_switch_port_link_up", "port" => p.name.clone()))
                .collect(),
        }
    }

    /// Sets the ports' link states (up or not), in the configured ports' order.
    pub fn set_links(&self, up: &[bool]) {
        for (g, &up) in self.links.iter().zip(up) {
            g.set(f64::from(u8::from(up)));
        }
    }

    /// Copies the ports' counts over the run so far, in the configured ports' order.
    pub fn update(&self, totals: &[crate::summary::PortStats]) {
        for (h, t) in self.ports.iter().zip(totals) {
            for (c, v) in h
                .iter()
                .zip([t.rx_missed, t.rx_nombuf, t.rx_errors, t.tx_errors])
            {
                c.absolute(v);
            }
        }
    }
}

//! The sink's Prometheus metrics (`GET /metrics`): sink health, per-switch ingest counters,
//! decoding and epoch counters, per-link loss, and per-switch hop latency summaries. Labels
//! are bounded: switch, link (from, to), reason, mode, query, plan, output, and an event's
//! kind and label; never a flow.
//!
//! Values are copied from the sink's own counters when scraped, into a recorder of its own
//! (`metrics-exporter-prometheus`, not installed globally, so several sinks can share a
//! process). Hop latency summaries come from the KLL sketches the decode threads keep per
//! switch; they are written in the exposition format's summary form after the recorder's
//! output.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use telemetry::pint::plan::QueryKind;
use telemetry::pint::query::ValueKind;

use crate::app::Shared;
use crate::flows::{LinkStats, ShardStats};
use crate::summary::RecentSummary;

/// The sink's recorder.
pub struct SinkMetrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl Default for SinkMetrics {
    fn default() -> Self {
        SinkMetrics::new()
    }
}

fn describe() {
    describe_gauge!("pint_sink_up", "1 while the sink runs.");
    describe_gauge!(
        "pint_sink_uptime_seconds",
        Unit::Seconds,
        "Time since the sink started."
    );
    describe_gauge!(
        "pint_sink_switch_connected",
        "1 while the switch is connected."
    );
    describe_counter!(
        "pint_sink_switch_connections_total",
        "Connections accepted from the switch."
    );
    describe_counter!("pint_sink_frames_total", "Frames decoded from the switch.");
    describe_counter!(
        "pint_sink_received_bytes_total",
        Unit::Bytes,
        "Bytes of frames decoded from the switch."
    );
    describe_counter!(
        "pint_sink_frames_rejected_total",
        "Frames refused (each closes its connection), by reason."
    );
    describe_counter!(
        "pint_sink_plans_evicted_total",
        "Plans no switch had in force let go, beyond the 64 spare ones kept."
    );
    describe_counter!(
        "pint_sink_sequence_gaps_total",
        "Frames the switch numbered but never sent (dropped on its side)."
    );
    describe_counter!("pint_sink_digests_total", "Digests received.");
    describe_counter!(
        "pint_sink_digests_dropped_total",
        "Digests dropped because a decode thread's queue was full."
    );
    describe_counter!(
        "pint_sink_digests_unknown_plan_total",
        "Digests of a plan the sink could not compile."
    );
    describe_counter!(
        "pint_sink_digests_unknown_flow_total",
        "Digests naming a flow slot the connection had not defined (not attributed)."
    );
    describe_counter!("pint_sink_flowsets_total", "Flowsets received.");
    describe_counter!(
        "pint_sink_flowsets_dropped_total",
        "Flowsets dropped undecoded: the epoch assembler's queue was full, the flowsets held took --flowset-memory-mb, or the process had no memory to decode one."
    );
    describe_gauge!(
        "pint_sink_flowset_lag_seconds",
        "How long after the end of its epochs (the switch's clock) its last flowset arrived (the sink's): negative when the switch's clock runs ahead."
    );
    describe_counter!("pint_sink_probes_total", "Probe arrivals received.");
    describe_counter!(
        "pint_sink_probes_dropped_total",
        "Probe arrivals dropped because a decode thread's queue was full."
    );
    describe_gauge!("pint_sink_flows", "Flows tracked.");
    describe_counter!(
        "pint_sink_digests_recorded_total",
        "Digests recorded into flows."
    );
    describe_counter!(
        "pint_sink_flows_evicted_total",
        "Flows forgotten after the idle timeout."
    );
    describe_counter!(
        "pint_sink_flows_refused_total",
        "Updates for new flows refused because the flow table was full (of flows, or of their paths' hops)."
    );
    describe_counter!(
        "pint_sink_path_resets_total",
        "Path decodings started over (route or plan changes)."
    );
    describe_counter!(
        "pint_sink_epochs_total",
        "Epochs finished, by how they were decoded."
    );
    describe_counter!(
        "pint_sink_epochs_incomplete_total",
        "Epochs with a switch missing or not decoded completely."
    );
    describe_counter!(
        "pint_sink_epochs_by_deadline_total",
        "Epochs finished by the grace time rather than by every flowset arriving."
    );
    describe_counter!(
        "pint_sink_late_flowsets_total",
        "Flowsets decoded on their own after their epoch."
    );
    describe_counter!(
        "pint_sink_duplicate_flowsets_total",
        "Flowsets dropped because their switch's worker had already delivered that epoch."
    );
    describe_counter!(
        "pint_sink_counts_dropped_total",
        "Epoch counters not handed to a decode thread in time."
    );
    describe_counter!(
        "pint_sink_http_connections_refused_total",
        "HTTP connections closed at once because the server had as many as it serves."
    );
    describe_gauge!(
        "pint_sink_backlog_flowsets",
        "Flowsets received and not yet decoded into counters (queued, or waiting for the rest of their epoch)."
    );
    describe_gauge!(
        "pint_sink_backlog_decode_messages",
        "Digest batches, probe batches and epoch counters queued for the decode threads or being applied."
    );
    describe_gauge!(
        "pint_sink_link_lost_packets",
        "Packets counted before the link and not after it, over the flows crossing it."
    );
    describe_gauge!(
        "pint_sink_link_flows_with_loss",
        "Flows that lost packets on the link."
    );
    describe_gauge!(
        "pint_sink_link_vanished_flows",
        "Flows counted before the link and never after it."
    );
    describe_counter!(
        "pint_sink_exported_records_total",
        "Per-flow records exported, by output."
    );
    describe_counter!(
        "pint_sink_export_errors_total",
        "IPFIX messages the socket refused (a collector not listening), or JSON lines not written."
    );
    describe_counter!("pint_sink_ipfix_messages_total", "IPFIX messages sent.");
    describe_counter!(
        "pint_sink_probes_refused_total",
        "Probe arrivals left out of detection: sent more than a second after they arrived, or more than 10 s before."
    );
    describe_counter!(
        "pint_sink_samples_ahead_total",
        "Samples left out of detection (a digest's latency, a probe's delay, an epoch's loss from counters) because their time was more than a minute ahead of the sink's clock."
    );
    describe_counter!(
        "pint_sink_flows_swept_total",
        "Flows the decode threads' once-a-second sweeps looked at (ended, an active timeout passed, or a detection window due to close); the others were passed by."
    );
    describe_counter!(
        "pint_sink_export_records_dropped_total",
        "Per-flow records lost to the full export queue: at the sink's stop, after an ended flow's 10 s of waiting, or at once while the flow table is nearly full."
    );
    describe_counter!(
        "pint_sink_export_records_deferred_total",
        "Per-flow records put off to a later sweep because the export queue was full (their counts go in a later record)."
    );
    describe_counter!(
        "pint_sink_events_total",
        "Problems detected online, by kind and diagnosis label (an event with two labels counts under both)."
    );
}

fn sum_stats(shared: &Shared) -> (ShardStats, usize) {
    let mut total = ShardStats::default();
    let mut flows = 0;
    for s in &shared.shards {
        let t = s.table.lock().expect("flow table lock");
        flows += t.len();
        let x = t.stats;
        total.digests += x.digests;
        total.unknown_plan += x.unknown_plan;
        total.flows_created += x.flows_created;
        total.flows_evicted += x.flows_evicted;
        total.flows_refused += x.flows_refused;
        total.path_resets += x.path_resets;
        total.counts_applied += x.counts_applied;
        total.exports_dropped += x.exports_dropped;
        total.exports_deferred += x.exports_deferred;
        total.probes_refused += x.probes_refused;
        total.samples_ahead += x.samples_ahead;
        total.flows_swept += x.flows_swept;
    }
    (total, flows)
}

/// Per-link loss summed over the decode threads.
pub fn links(shared: &Shared) -> Vec<((u32, u32), LinkStats)> {
    let mut all: std::collections::BTreeMap<(u32, u32), LinkStats> = Default::default();
    for s in &shared.shards {
        let t = s.table.lock().expect("flow table lock");
        for (k, v) in t.links() {
            let e = all.entry(*k).or_default();
            e.lost_packets += v.lost_packets;
            e.flows += v.flows;
            e.flows_with_loss += v.flows_with_loss;
            e.vanished_flows += v.vanished_flows;
        }
    }
    all.into_iter().collect()
}

/// One switch's samples of one query: (switch, plan version, query), merged summary.
pub type SwitchLatency = ((u32, u32, u16), RecentSummary);

/// Per (switch, plan version, query): the samples merged over the decode threads.
pub fn switch_latency(shared: &Shared) -> Vec<SwitchLatency> {
    let mut all: std::collections::BTreeMap<(u32, u32, u16), RecentSummary> = Default::default();
    for s in &shared.shards {
        let t = s.table.lock().expect("flow table lock");
        for (k, v) in t.switch_samples() {
            match all.get_mut(k) {
                Some(x) => x.merge(v),
                None => {
                    all.insert(*k, v.clone());
                }
            }
        }
    }
    all.into_iter().collect()
}

impl SinkMetrics {
    /// A recorder of the sink's own.
    pub fn new() -> SinkMetrics {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, describe);
        SinkMetrics { recorder, handle }
    }

    /// The exposition text, with every value as of now.
    pub fn render(&self, shared: &Shared) -> String {
        let (stats, flows) = sum_stats(shared);
        metrics::with_local_recorder(&self.recorder, || {
            gauge!("pint_sink_up").set(1.0);
            gauge!("pint_sink_uptime_seconds").set(shared.started.elapsed().as_secs_f64());
            for e in shared.registry.switches() {
                let id = e.info.lock().expect("switch lock").id.to_string();
                let c = &e.counters;
                let l = [("switch", id.clone())];
                gauge!("pint_sink_switch_connected", &l)
                    .set(f64::from(u8::from(c.connected.load(Relaxed))));
                counter!("pint_sink_switch_connections_total", &l)
                    .absolute(c.connections.load(Relaxed));
                counter!("pint_sink_frames_total", &l).absolute(c.frames.load(Relaxed));
                counter!("pint_sink_received_bytes_total", &l).absolute(c.bytes.load(Relaxed));
                counter!("pint_sink_sequence_gaps_total", &l)
                    .absolute(c.sequence_gaps.load(Relaxed));
                counter!("pint_sink_digests_total", &l).absolute(c.digests.load(Relaxed));
                counter!("pint_sink_digests_dropped_total", &l)
                    .absolute(c.digests_dropped.load(Relaxed));
                counter!("pint_sink_digests_unknown_plan_total", &l)
                    .absolute(c.digests_unknown_plan.load(Relaxed));
                counter!("pint_sink_digests_unknown_flow_total", &l)
                    .absolute(c.digests_unknown_flow.load(Relaxed));
                counter!("pint_sink_flowsets_total", &l).absolute(c.flowsets.load(Relaxed));
                counter!("pint_sink_flowsets_dropped_total", &l)
                    .absolute(c.flowsets_dropped.load(Relaxed));
                if let Some(lag) = c.flowset_lag.get() {
                    gauge!("pint_sink_flowset_lag_seconds", &l).set(lag as f64 / 1000.0);
                }
                counter!("pint_sink_probes_total", &l).absolute(c.probes.load(Relaxed));
                counter!("pint_sink_probes_dropped_total", &l)
                    .absolute(c.probes_dropped.load(Relaxed));
                for (reason, n) in e.reject_reasons.lock().expect("switch lock").iter() {
                    counter!(
                        "pint_sink_frames_rejected_total",
                        "switch" => id.clone(),
                        "reason" => *reason
                    )
                    .absolute(*n);
                }
            }
            for (reason, n) in shared.registry.anonymous_rejects() {
                counter!(
                    "pint_sink_frames_rejected_total",
                    "switch" => "none",
                    "reason" => reason
                )
                .absolute(n);
            }
            gauge!("pint_sink_flows").set(flows as f64);
            counter!("pint_sink_digests_recorded_total").absolute(stats.digests);
            counter!("pint_sink_flows_evicted_total").absolute(stats.flows_evicted);
            counter!("pint_sink_flows_refused_total").absolute(stats.flows_refused);
            counter!("pint_sink_path_resets_total").absolute(stats.path_resets);
            counter!("pint_sink_probes_refused_total").absolute(stats.probes_refused);
            counter!("pint_sink_samples_ahead_total").absolute(stats.samples_ahead);
            counter!("pint_sink_plans_evicted_total").absolute(shared.registry.plans_evicted());
            counter!("pint_sink_flows_swept_total").absolute(stats.flows_swept);
            let ec = &shared.epochs.counters;
            counter!("pint_sink_epochs_total", "mode" => "single")
                .absolute(ec.single.load(Relaxed));
            counter!("pint_sink_epochs_total", "mode" => "network")
                .absolute(ec.network.load(Relaxed));
            counter!("pint_sink_epochs_incomplete_total").absolute(ec.incomplete.load(Relaxed));
            counter!("pint_sink_epochs_by_deadline_total").absolute(ec.by_deadline.load(Relaxed));
            counter!("pint_sink_late_flowsets_total").absolute(ec.late_flowsets.load(Relaxed));
            counter!("pint_sink_duplicate_flowsets_total")
                .absolute(ec.duplicate_flowsets.load(Relaxed));
            counter!("pint_sink_counts_dropped_total")
                .absolute(shared.counts_dropped.load(Relaxed));
            counter!("pint_sink_http_connections_refused_total")
                .absolute(shared.http_refused.load(Relaxed));
            let backlog = shared.backlog();
            gauge!("pint_sink_backlog_flowsets").set(backlog.flowsets as f64);
            gauge!("pint_sink_backlog_decode_messages").set(backlog.decode_messages as f64);
            for ((from, to), l) in links(shared) {
                let lbl = [("from", from.to_string()), ("to", to.to_string())];
                gauge!("pint_sink_link_lost_packets", &lbl).set(l.lost_packets as f64);
                gauge!("pint_sink_link_flows_with_loss", &lbl).set(l.flows_with_loss as f64);
                gauge!("pint_sink_link_vanished_flows", &lbl).set(l.vanished_flows as f64);
            }
            let x = &shared.exports;
            counter!("pint_sink_exported_records_total", "output" => "ipfix")
                .absolute(x.ipfix_records.load(Relaxed));
            counter!("pint_sink_exported_records_total", "output" => "json_lines")
                .absolute(x.json_records.load(Relaxed));
            counter!("pint_sink_export_errors_total", "output" => "ipfix")
                .absolute(x.ipfix_errors.load(Relaxed));
            counter!("pint_sink_export_errors_total", "output" => "json_lines")
                .absolute(x.json_errors.load(Relaxed));
            let ev = &shared.events.line_counts;
            counter!("pint_sink_exported_records_total", "output" => "event_lines")
                .absolute(ev.written.load(Relaxed));
            counter!("pint_sink_export_errors_total", "output" => "event_lines")
                .absolute(ev.lost.load(Relaxed));
            counter!("pint_sink_ipfix_messages_total").absolute(x.ipfix_messages.load(Relaxed));
            counter!("pint_sink_export_records_dropped_total").absolute(stats.exports_dropped);
            counter!("pint_sink_export_records_deferred_total").absolute(stats.exports_deferred);
            // Every kind with each label it can have from the start, at 0 until counted: a
            // series that first appears at 2 has no increase to a rate() or increase() that
            // alerts on it.
            let counts = shared.events.counts();
            for kind in crate::detect::Kind::ALL {
                for &label in crate::detect::diagnose::labels_of(kind) {
                    let n = counts.get(&(kind, label)).copied().unwrap_or(0);
                    counter!("pint_sink_events_total", "kind" => kind.name(), "label" => label.name())
                        .absolute(n);
                }
            }
        });
        let mut out = self.handle.render();
        // A family of its own (the sort reads families between blank lines).
        if !out.is_empty() && !out.ends_with("\n\n") {
            out.push('\n');
        }
        render_latency(&mut out, shared);
        telemetry::exposition::in_order(&out)
    }
}

/// Appends the per-switch hop latency summaries.
fn render_latency(out: &mut String, shared: &Shared) {
    let rows = switch_latency(shared);
    if rows.is_empty() {
        return;
    }
    let name = "pint_sink_hop_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Latency of the hops decoded to each switch (per dynamic query), from the sampled digests."
    );
    let _ = writeln!(out, "# TYPE {name} summary");
    for ((switch, version, query), summary) in rows {
        let Some(plan) = shared.registry.plan(version) else {
            continue;
        };
        let q = &plan.plan.queries[usize::from(query)];
        // Hop latency only (in ns; the metric is in seconds): a dynamic query of another
        // value (queue bytes, utilisation) is in the API's flow detail.
        let QueryKind::DynamicPerFlow { compression, .. } = &q.kind else {
            continue;
        };
        if q.value != ValueKind::HopLatency {
            continue;
        }
        let labels = format!(
            "switch=\"{switch}\",plan=\"{version:08x}\",query=\"{}\"",
            escape(&q.name)
        );
        for x in [0.5, 0.9, 0.99] {
            if let Some(v) = summary.quantile(x, compression) {
                let _ = writeln!(out, "{name}{{{labels},quantile=\"{x}\"}} {}", v / 1e9);
            }
        }
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            summary.sum(compression) / 1e9
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", summary.count());
    }
}

/// A label value as the exposition format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

//! Probe arrivals: each probe stream's one-way delay, loss and reordering, fed to its flow's
//! probe detector; probes whose times cannot be of one clock are left out.

use super::loss::place_of;
use super::{FlowState, FlowTable, ShardContext, flow_entry, note_ahead};
use crate::detect::online::{Detector, ahead_in_reach};
use crate::detect::{Params, Sample};
use crate::schedule::Now;

/// How far a probe's send time may be after its arrival (clocks of one machine, or of
/// hosts kept in step), ns.
const PROBE_CLOCK_SLACK_NS: u64 = 1_000_000_000;

/// The longest one-way delay a probe may show, ns: beyond it the send time is not of the
/// clock the arrival is measured by. Two windows: the sweeps close a series' windows by the
/// sink's clock, and a sender's clock further behind would have them closed before its
/// probes came.
const PROBE_MAX_DELAY_NS: u64 = 10_000_000_000;

/// A probe stream seen this far (numbered up to at least this) that shows a number this far
/// below its highest, sent later than any before, restarted.
const RESTART_AFTER_SEQ: u64 = 64;

/// Whether a probe's send time cannot be of the clock its arrival is measured by (see
/// [`PROBE_CLOCK_SLACK_NS`], [`PROBE_MAX_DELAY_NS`]).
fn times_out_of_reach(p: &telemetry::protocol::WireProbe) -> bool {
    p.sent_ns > p.recv_ns.saturating_add(PROBE_CLOCK_SLACK_NS)
        || p.sent_ns.saturating_add(PROBE_MAX_DELAY_NS) < p.recv_ns
}

impl FlowTable {
    /// Notes probe arrivals whose reports the sink dropped (its decode queue full): they
    /// arrived, so the gaps they leave in their streams' numbers are no loss; they are no
    /// samples either. Counted where they were dropped, not as the flow's probes. A stream
    /// not seen yet gets its detector with `detection`'s parameters.
    pub fn add_unseen_probes(
        &mut self,
        detection: Params,
        probes: &[telemetry::protocol::WireProbe],
    ) {
        self.add_unseen_probes_at(detection, probes, Now::read());
    }

    /// [`FlowTable::add_unseen_probes`] at `now`.
    pub(super) fn add_unseen_probes_at(
        &mut self,
        detection: Params,
        probes: &[telemetry::protocol::WireProbe],
        now: Now,
    ) {
        for p in probes {
            let Some(flow) = flow_entry(
                &mut self.flows,
                self.capacity,
                &mut self.stats.flows_created,
                p.key,
                p.recv_ns / 1_000_000,
            ) else {
                self.stats.flows_refused += 1;
                continue;
            };
            flow.touched = now.at;
            flow.last_ms = flow.last_ms.max(p.recv_ns / 1_000_000);
            let sent_s = p.sent_ns as f64 / 1e9;
            if times_out_of_reach(p) || !ahead_in_reach(now.unix_s, sent_s) {
                // As a probe that came would be: left out, its number excused.
                if let Some(d) = &mut flow.probe_detector {
                    d.excuse_seq(p.seq);
                }
            } else {
                let det = flow
                    .probe_detector
                    .get_or_insert_with(|| Box::new(Detector::adaptive(detection)));
                det.note_arrival(now.unix_s, sent_s);
                det.push_unseen(p.seq, sent_s);
            }
            let due = flow.deadline(&self.schedule, now);
            self.schedule.put(p.key, &mut flow.due, due);
        }
    }

    /// Records probe arrivals: each probe stream's samples (sequence number, send time,
    /// one-way delay = arrival at the last switch less send time) go to its flow's detector.
    pub fn add_probes(&mut self, cx: &ShardContext, probes: &[telemetry::protocol::WireProbe]) {
        self.add_probes_at(cx, probes, None, Now::read());
    }

    /// [`FlowTable::add_probes`] of probes `reporter` (switch, its count of probe-record
    /// breaks: [`crate::registry::SwitchCounters::probe_breaks`]) reported: a stream whose
    /// last probe came from the same switch before a break (a reconnection, records it
    /// dropped) is not taken to have lost the probes numbered in between, whose records
    /// may have been dropped.
    pub fn add_reported_probes(
        &mut self,
        cx: &ShardContext,
        reporter: (u32, u64),
        probes: &[telemetry::protocol::WireProbe],
    ) {
        self.add_probes_at(cx, probes, Some(reporter), Now::read());
    }

    /// [`FlowTable::add_probes`] at `now`.
    pub(super) fn add_probes_at(
        &mut self,
        cx: &ShardContext,
        probes: &[telemetry::protocol::WireProbe],
        reporter: Option<(u32, u64)>,
        now: Now,
    ) {
        for p in probes {
            let Some(flow) = flow_entry(
                &mut self.flows,
                self.capacity,
                &mut self.stats.flows_created,
                p.key,
                p.recv_ns / 1_000_000,
            ) else {
                self.stats.flows_refused += 1;
                continue;
            };
            flow.touched = now.at;
            flow.probes += 1;
            if let Some((switch, breaks)) = reporter {
                let across_a_break = flow
                    .probe_reporter
                    .is_some_and(|(s, b)| s == switch && b != breaks);
                if across_a_break
                    && p.seq > 0
                    && let Some(d) = &mut flow.probe_detector
                {
                    d.excuse_seq(p.seq - 1);
                }
                flow.probe_reporter = Some((switch, breaks));
            }
            flow.last_ms = flow.last_ms.max(p.recv_ns / 1_000_000);
            // Sent more than a second after it arrived: a clock stepped, or not a probe. Its
            // send time would close every window and open one far ahead. Sent more than
            // 10 s before: no path holds a packet that long; a capture replayed (its probes
            // carry the send times of its making) or a clock far off, whose delays would be
            // events of years, or whose windows the sweeps would close before they filled.
            if times_out_of_reach(p) {
                self.stats.probes_refused += 1;
                // Arrived, not lost: the gap it leaves in the stream's numbers is no loss.
                if let Some(d) = &mut flow.probe_detector {
                    d.excuse_seq(p.seq);
                }
                let due = flow.deadline(&self.schedule, now);
                self.schedule.put(p.key, &mut flow.due, due);
                continue;
            }
            // Timed far ahead of the sink's clock: left out before it can start a new
            // series.
            let sent_s = p.sent_ns as f64 / 1e9;
            if !ahead_in_reach(now.unix_s, sent_s) {
                note_ahead(&mut self.stats.samples_ahead);
                if let Some(d) = &mut flow.probe_detector {
                    d.excuse_seq(p.seq);
                }
                let due = flow.deadline(&self.schedule, now);
                self.schedule.put(p.key, &mut flow.due, due);
                continue;
            }
            // A stream that starts again from 0 (its sender restarted) is a new series: the
            // old one's events are closed, not mixed with it. Its first probes may be lost:
            // a number far below the stream's highest, sent after every probe seen so far
            // (a late probe of the old numbers was sent before), starts it again.
            if let Some(old) = flow.probe_detector.take_if(|d| {
                d.highest_seq()
                    .is_some_and(|h| h >= RESTART_AFTER_SEQ && p.seq <= h - RESTART_AFTER_SEQ)
                    && d.latest_send().is_some_and(|t| sent_s > t)
            }) {
                let events = old.finish().events;
                cx.events
                    .record(p.key, "probes", events, |e| place_of(flow, cx, e));
            }
            let det = flow
                .probe_detector
                .get_or_insert_with(|| Box::new(Detector::adaptive(cx.detection)));
            let sample = Sample {
                seq: Some(p.seq),
                send: p.sent_ns as f64 / 1e9,
                delay_ms: (p.recv_ns as i128 - p.sent_ns as i128) as f64 / 1e6,
            };
            let taken = det.push_at(now.unix_s, sample);
            debug_assert!(taken, "checked above");
            let events = det.take_events();
            cx.events
                .record(p.key, "probes", events, |e| place_of(flow, cx, e));
            flow.detect_due_s = FlowState::detect_due(
                &flow.latency_detector,
                &flow.loss_detector,
                &flow.probe_detector,
            );
            let due = flow.deadline(&self.schedule, now);
            self.schedule.put(p.key, &mut flow.due, due);
        }
    }
}

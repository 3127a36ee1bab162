//! Probe arrivals: each probe stream's one-way delay, loss and reordering, fed to its flow's
//! probe detector; probes whose times cannot be of one clock are left out.

use super::loss::place_of;
use super::{FlowState, FlowTable, ShardContext, flow_entry, note_ahead};
use crate::detect::Sample;
use crate::detect::online::{Detector, ahead_in_reach};
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

/// Probes a break in a switch's probe records excuses at most, by number: beyond, the gap
/// is counted as lost.
const MAX_EXCUSED_ACROSS_A_BREAK: u64 = 1 << 16;

/// The switch that reported a flow's last probe: its count of probe-record breaks then
/// ([`crate::registry::SwitchCounters::probe_breaks`]), and that probe's number and send
/// time (s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ProbeReporter {
    switch: u32,
    breaks: u64,
    seq: u64,
    sent_s: f64,
}

impl FlowTable {
    /// Records probe arrivals: each probe stream's samples (sequence number, send time,
    /// one-way delay = arrival at the last switch less send time) go to its flow's detector.
    pub fn add_probes(&mut self, cx: &ShardContext, probes: &[telemetry::protocol::WireProbe]) {
        self.add_probes_at(cx, probes, None, false, Now::read());
    }

    /// [`FlowTable::add_probes`] of probes `reporter` (switch, its count of probe-record
    /// breaks: [`crate::registry::SwitchCounters::probe_breaks`]) reported: a stream whose
    /// last probe came from the same switch before a break (a reconnection, records it
    /// said it dropped) has the numbers between that probe and this one taken as arrived
    /// (their records may be what was lost), not as lost.
    pub fn add_reported_probes(
        &mut self,
        cx: &ShardContext,
        reporter: (u32, u64),
        probes: &[telemetry::protocol::WireProbe],
    ) {
        self.add_probes_at(cx, probes, Some(reporter), false, Now::read());
    }

    /// Notes probe arrivals whose reports the sink dropped (its decode queue full), in their
    /// place among the messages queued: they arrived, so the gaps they leave in their
    /// streams' numbers are no loss; they are no samples either. Counted where they were
    /// dropped, not as the flow's probes.
    pub fn add_unseen_probes(
        &mut self,
        cx: &ShardContext,
        probes: &[telemetry::protocol::WireProbe],
    ) {
        self.add_probes_at(cx, probes, None, true, Now::read());
    }

    /// [`FlowTable::add_probes`] at `now`; `unseen`: [`FlowTable::add_unseen_probes`].
    pub(super) fn add_probes_at(
        &mut self,
        cx: &ShardContext,
        probes: &[telemetry::protocol::WireProbe],
        reporter: Option<(u32, u64)>,
        unseen: bool,
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
            flow.probes += u64::from(!unseen);
            flow.last_ms = flow.last_ms.max(p.recv_ns / 1_000_000);
            // Sent more than a second after it arrived: a clock stepped, or not a probe. Its
            // send time would close every window and open one far ahead. Sent more than
            // 10 s before: no path holds a packet that long; a capture replayed (its probes
            // carry the send times of its making) or a clock far off, whose delays would be
            // events of years, or whose windows the sweeps would close before they filled.
            if times_out_of_reach(p) {
                self.stats.probes_refused += u64::from(!unseen);
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
                if !unseen {
                    note_ahead(&mut self.stats.samples_ahead);
                }
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
                flow.probe_reporter = None;
            }
            let det = flow
                .probe_detector
                .get_or_insert_with(|| Box::new(Detector::adaptive(cx.detection)));
            if let Some((switch, breaks)) = reporter {
                // The numbers between the stream's last probe from this switch before a
                // break in its records and this one: arrived, their send times placed
                // between the two probes'.
                if let Some(last) = flow.probe_reporter
                    && last.switch == switch
                    && last.breaks != breaks
                    && p.seq > last.seq.saturating_add(1)
                    && p.seq - last.seq <= MAX_EXCUSED_ACROSS_A_BREAK
                {
                    let span = (p.seq - last.seq) as f64;
                    for q in last.seq + 1..p.seq {
                        let at =
                            last.sent_s + (sent_s - last.sent_s) * (q - last.seq) as f64 / span;
                        det.push_unseen(q, at);
                    }
                }
                if flow
                    .probe_reporter
                    .is_none_or(|r| p.seq >= r.seq || r.switch != switch)
                {
                    flow.probe_reporter = Some(ProbeReporter {
                        switch,
                        breaks,
                        seq: p.seq,
                        sent_s,
                    });
                }
            }
            if unseen {
                det.push_unseen(p.seq, sent_s);
            } else {
                let sample = Sample {
                    seq: Some(p.seq),
                    send: sent_s,
                    delay_ms: (p.recv_ns as i128 - p.sent_ns as i128) as f64 / 1e6,
                };
                let taken = det.push_at(now.unix_s, sample);
                debug_assert!(taken, "checked above");
            }
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

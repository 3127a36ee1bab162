//! The once-a-second sweep: exports the counters of flows due (an active timeout passed,
//! a flow ended), closes the detection windows time has passed, and forgets idle flows.

use std::time::{Duration, Instant};

use telemetry::flowradar::FlowKey;

use super::loss::place_of;
use super::{
    EXPORT_WAIT, EndReason, FlowExport, FlowState, FlowTable, HOPS_PER_FLOW, ShardContext,
};
use crate::schedule::{Now, UNSCHEDULED};

/// One sweep's moment, timeouts and tallies, and where its records go.
struct Sweep<'a, F> {
    now: Instant,
    now_s: f64,
    idle: Duration,
    active: Duration,
    ending: EndReason,
    at_stop: bool,
    /// The table is nearly full: an ended flow's records that cannot go are dropped.
    crowded: bool,
    /// Where detected events go, and what places them.
    cx: Option<&'a ShardContext>,
    out: F,
    /// The export queue refused a record: the sweep's other records wait too.
    full: bool,
    dropped: u64,
    deferred: u64,
    swept: u64,
}

impl<F: FnMut(FlowExport) -> bool> Sweep<'_, F> {
    /// Looks at one flow, if anything is due for it: closes its detection windows that
    /// time has passed, sends its records due. Returns whether the flow ended and has
    /// nothing left to send (to be forgotten).
    fn look_at(&mut self, key: &FlowKey, flow: &mut FlowState) -> bool {
        let (now, now_s, idle, active) = (self.now, self.now_s, self.idle, self.active);
        let (ending, at_stop, crowded) = (self.ending, self.at_stop, self.crowded);
        if !at_stop && !flow.sweep_due(now, now_s, idle, active) {
            return false;
        }
        self.swept += 1;
        let ended = now.duration_since(flow.touched) >= idle;
        let lose = at_stop
            || (ended && (crowded || now.duration_since(flow.touched) >= idle + EXPORT_WAIT));
        // Detection: windows that time has passed close; an ending flow's close all.
        let found = [
            (&mut flow.latency_detector, "latency"),
            (&mut flow.loss_detector, "counters"),
            (&mut flow.probe_detector, "probes"),
        ]
        .map(|(det, series)| {
            let events = match det {
                Some(d) if ended => det.take().map(|d| d.finish().events).unwrap_or_default(),
                Some(d) => {
                    d.tick(now_s);
                    d.take_events()
                }
                None => Vec::new(),
            };
            (series, events)
        });
        if let Some(cx) = self.cx {
            for (series, events) in found {
                cx.events
                    .record(*key, series, events, |e| place_of(flow, cx, e));
            }
        }
        let ports = flow.pint.as_ref().map(|p| {
            (
                p.reporter,
                u16::from(p.ingress_port),
                u16::from(p.egress_port),
            )
        });
        let mut all_sent = true;
        for c in &mut flow.counts {
            let delta = (c.packets - c.exported.0, c.bytes - c.exported.1);
            // An ending flow always says so, its last packets already in an active-timeout
            // record or not (collectors wait for the end); a going one when there is
            // something new and the active timeout has passed.
            let due = if ended {
                c.packets > 0 && (delta.0 > 0 || !c.end_sent)
            } else {
                delta.0 > 0 && now.duration_since(c.exported_at) >= active
            };
            if !due {
                continue;
            }
            let (ingress, egress) = match ports {
                Some((r, i, e)) if r == c.switch => (Some(i), Some(e)),
                _ => (None, None),
            };
            let rec = FlowExport {
                key: *key,
                switch: c.switch,
                packets: delta.0,
                bytes: delta.1,
                start_ms: if delta.0 == 0 { c.last_ms } else { c.since_ms },
                end_ms: c.last_ms,
                ingress,
                egress,
                ended,
                end_reason: if ended {
                    ending
                } else {
                    EndReason::ActiveTimeout
                },
            };
            // Once the queue is full, the sweep's other records wait too.
            let sent = if lose {
                (self.out)(rec)
            } else {
                !self.full && (self.out)(rec)
            };
            if !sent {
                self.full = true;
                if lose {
                    self.dropped += 1;
                } else {
                    // Counted once however many sweeps it waits.
                    self.deferred += u64::from(!c.deferred);
                    c.deferred = true;
                    all_sent = false;
                    continue;
                }
            }
            c.exported = (c.packets, c.bytes);
            c.exported_at = now;
            c.recorded_to_ms = c.last_ms;
            c.end_sent |= ended;
            c.deferred = false;
        }
        let gone = ended && all_sent;
        if !gone {
            flow.refresh_detect_due();
        }
        gone
    }
}

impl FlowTable {
    /// Exports counters due (the active timeout passed) and forgets flows idle for
    /// `idle`; records go to `out`. A record `out` refuses (its queue is full) waits for a
    /// later sweep, counted, an ended flow kept for it `EXPORT_WAIT` (10 s) at most and not while
    /// the table is nearly full (then it is dropped, counted). Events of the detection
    /// windows it closes go to `cx`'s event log, when given.
    pub fn sweep(
        &mut self,
        idle: Duration,
        active: Duration,
        cx: Option<&ShardContext>,
        out: impl FnMut(FlowExport) -> bool,
    ) {
        let now = Now::read();
        self.sweep_as(now, idle, active, EndReason::IdleTimeout, cx, out);
    }

    /// [`FlowTable::sweep`], the records of flows that end saying `ending`. The flows looked
    /// at are those the schedule lists as due; when the timeouts are new (the first sweep, or
    /// others than the last's), at the stop, and after a wall-clock step, every flow is
    /// checked and listed again.
    pub(super) fn sweep_as(
        &mut self,
        now: Now,
        idle: Duration,
        active: Duration,
        ending: EndReason,
        cx: Option<&ShardContext>,
        out: impl FnMut(FlowExport) -> bool,
    ) {
        for (_, summary) in &mut self.switch_samples {
            summary.rotate(now.at);
        }
        // At the stop a record that cannot go is lost (counted); otherwise it waits: its
        // counts stay unexported (and an ended flow in the table) until a sweep with room,
        // an ended flow's for `EXPORT_WAIT` (10 s) at most, and not while the table is nearly
        // full (a flow kept for its records would take a new flow's place).
        let at_stop = ending == EndReason::ForcedEnd;
        let hop_budget = self.capacity.saturating_mul(HOPS_PER_FLOW);
        let mut sweep = Sweep {
            now: now.at,
            now_s: now.unix_s,
            idle,
            active,
            ending,
            at_stop,
            crowded: self.flows.len() >= self.capacity - self.capacity / 16
                || self.hops_held >= hop_budget - hop_budget / 16,
            cx,
            out,
            full: false,
            dropped: 0,
            deferred: 0,
            swept: 0,
        };
        let mut gone = Vec::new();
        // Every flow listed again when the timeouts are new, at the stop, and when the wall
        // clock stepped (detection deadlines were placed by the clocks' old offset).
        if at_stop || !self.schedule.holds_for((idle, active), now) {
            self.schedule.reset((idle, active), now);
            for (key, flow) in &mut self.flows {
                flow.due = UNSCHEDULED;
                if sweep.look_at(key, flow) {
                    gone.push(*key);
                } else {
                    let due = flow.deadline(&self.schedule, now);
                    self.schedule.put(*key, &mut flow.due, due);
                }
            }
        } else {
            let mut again = Vec::new();
            let this_second = self.schedule.second(Some(now.at));
            for (second, keys) in self.schedule.take_due(now.at) {
                for key in keys {
                    // Forgotten since, listed for another second since, or looked at
                    // already in this sweep (listed twice in the seconds taken).
                    let Some(flow) = self.flows.get_mut(&key).filter(|f| f.due == second) else {
                        continue;
                    };
                    flow.due = UNSCHEDULED;
                    if sweep.look_at(&key, flow) {
                        gone.push(key);
                        continue;
                    }
                    let due = flow.deadline(&self.schedule, now);
                    if due > this_second {
                        self.schedule.put(key, &mut flow.due, due);
                    } else {
                        again.push(key);
                    }
                }
            }
            // A flow whose deadline is a second taken already (not quite due yet, or its
            // records wait) is listed again, for the next sweep, once the seconds taken are
            // done: listed now, another listing of it among them would count.
            for key in again {
                if let Some(flow) = self.flows.get_mut(&key) {
                    let due = flow.deadline(&self.schedule, now);
                    self.schedule.put(key, &mut flow.due, due);
                }
            }
        }
        self.stats.flows_swept += sweep.swept;
        self.stats.exports_dropped += sweep.dropped;
        self.stats.exports_deferred += sweep.deferred;
        for k in gone {
            if let Some(f) = self.flows.remove(&k) {
                self.hops_held -= f.pint.map_or(0, |p| p.record.k());
            }
            self.stats.flows_evicted += 1;
        }
    }

    /// Exports every flow's remaining counters and events (at shutdown).
    pub fn flush(&mut self, cx: Option<&ShardContext>, out: impl FnMut(FlowExport) -> bool) {
        self.sweep_as(
            Now::read(),
            Duration::ZERO,
            Duration::ZERO,
            EndReason::ForcedEnd,
            cx,
            out,
        );
    }
}

//! Problems detected online, per flow: the latest ones for the API, counts by kind and
//! label for the metrics, and every one as a JSON line when asked.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use telemetry::flowradar::FlowKey;

use crate::detect::diagnose::Label;
use crate::detect::{Event, Kind};
use crate::flows::FlowId;
use crate::lines::{LineCounts, LineFile};

/// Events kept for the API.
pub const EVENTS_KEPT: usize = 10_000;

/// An event of one flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowEvent {
    /// The flow.
    pub flow: FlowId,
    /// What series it was found in: `latency` (per-packet end-to-end latency from the
    /// digests), `counters` (loss from the FlowRadar counters along the path) or `probes`
    /// (a probe stream's sequence numbers and one-way delay).
    pub series: &'static str,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
    /// Where in the network it happened, as far as the sink knows.
    #[serde(flatten)]
    pub place: EventPlace,
    #[serde(skip)]
    key: FlowKey,
}

/// Where a flow's event happened: what an operator needs beside the flow to find the
/// problem.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventPlace {
    /// The flow's decoded path when the event was reported (switch IDs, the first hop
    /// first); absent until its digests decode it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<u32>>,
    /// Loss events only: the link of that path (`[from, to]`, switch IDs) where the flow's
    /// FlowRadar counters say the most of its packets went missing during the event (so
    /// far, when no link lost any then or the event is older than what is remembered);
    /// absent when they show no loss on any link (the counters may not have caught up, or
    /// the loss was outside the switches: a host's link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossy_link: Option<[u32; 2]>,
}

/// Events by kind and label (an event with two labels under both), and events.
type Counts = (BTreeMap<(Kind, Label), u64>, u64);

/// The sink's events.
#[derive(Debug, Default)]
pub struct EventLog {
    recent: Mutex<VecDeque<FlowEvent>>,
    counts: Mutex<Counts>,
    lines: Mutex<Option<LineFile>>,
    /// Event lines written and lost (shared with the metrics).
    pub line_counts: Arc<LineCounts>,
}

impl EventLog {
    /// A log that also writes every event to `lines`.
    pub fn with_lines(lines: Option<LineFile>) -> EventLog {
        EventLog {
            line_counts: lines.as_ref().map(LineFile::counts).unwrap_or_default(),
            lines: Mutex::new(lines),
            ..EventLog::default()
        }
    }

    /// Records events of flow `key` found in `series`; `place` says where each happens
    /// (asked only when there are events).
    pub fn record(
        &self,
        key: FlowKey,
        series: &'static str,
        events: Vec<Event>,
        mut place: impl FnMut(&Event) -> EventPlace,
    ) {
        if events.is_empty() {
            return;
        }
        // Worked out before the log's locks are taken (every decode thread records here).
        let places: Vec<EventPlace> = events.iter().map(&mut place).collect();
        {
            let mut c = self.counts.lock().expect("event counts lock");
            for e in &events {
                for l in &e.labels {
                    *c.0.entry((e.kind, *l)).or_default() += 1;
                }
            }
            c.1 += events.len() as u64;
        }
        let mut recent = self.recent.lock().expect("events lock");
        let mut lines = self.lines.lock().expect("event lines lock");
        for (event, at) in events.into_iter().zip(places) {
            let place = EventPlace {
                path: at.path,
                lossy_link: at.lossy_link.filter(|_| event.kind == Kind::Loss),
            };
            let fe = FlowEvent {
                flow: key.into(),
                series,
                event,
                place,
                key,
            };
            // Flushed by `flush_lines` (after each sweep, at the stop), not per event: a
            // sweep that closes many flows' windows writes as many events.
            if let Some(w) = lines.as_mut() {
                w.push(&fe);
            }
            if recent.len() >= EVENTS_KEPT {
                recent.pop_front();
            }
            recent.push_back(fe);
        }
    }

    /// Writes the event lines buffered so far to their file.
    pub fn flush_lines(&self) {
        if let Some(w) = self.lines.lock().expect("event lines lock").as_mut() {
            w.flush();
        }
    }

    /// The latest `n` events (newest first), of `kind` if given.
    pub fn latest(&self, n: usize, kind: Option<Kind>) -> Vec<FlowEvent> {
        self.recent
            .lock()
            .expect("events lock")
            .iter()
            .rev()
            .filter(|e| kind.is_none_or(|k| e.event.kind == k))
            .take(n)
            .cloned()
            .collect()
    }

    /// The kept events of flow `key`.
    pub fn of_flow(&self, key: &FlowKey) -> Vec<FlowEvent> {
        self.recent
            .lock()
            .expect("events lock")
            .iter()
            .filter(|e| e.key == *key)
            .cloned()
            .collect()
    }

    /// Events by kind and label since the start (an event with two labels counts under
    /// both).
    pub fn counts(&self) -> BTreeMap<(Kind, Label), u64> {
        self.counts.lock().expect("event counts lock").0.clone()
    }

    /// Events since the start, each once.
    pub fn total(&self) -> u64 {
        self.counts.lock().expect("event counts lock").1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, labels: Vec<Label>) -> Event {
        Event {
            kind,
            start: 1.0,
            end: 2.0,
            baseline_ms: None,
            peak_ms: None,
            loss_rate: 0.1,
            reordering: 0.0,
            labels,
        }
    }

    #[test]
    fn an_event_counts_once_in_all_and_under_each_label() {
        let log = EventLog::default();
        let key = FlowKey {
            src: 1,
            dst: 2,
            src_port: 3,
            dst_port: 4,
            protocol: 17,
        };
        log.record(
            key,
            "counters",
            vec![
                event(Kind::Loss, vec![Label::DelayCorrelatedLoss, Label::Unknown]),
                event(Kind::Delay, vec![Label::Unknown]),
            ],
            |_| EventPlace {
                path: Some(vec![4, 5, 6]),
                lossy_link: Some([5, 6]),
            },
        );
        assert_eq!(log.total(), 2);
        // Both say the path; only the loss event names a lossy link.
        let kept = log.of_flow(&key);
        assert!(kept.iter().all(|e| e.place.path == Some(vec![4, 5, 6])));
        assert_eq!(kept[0].place.lossy_link, Some([5, 6]));
        assert_eq!(kept[1].place.lossy_link, None);
        let c = log.counts();
        assert_eq!(c.values().sum::<u64>(), 3);
        assert_eq!(c[&(Kind::Loss, Label::DelayCorrelatedLoss)], 1);
        assert_eq!(c[&(Kind::Loss, Label::Unknown)], 1);
        assert_eq!(log.latest(10, None).len(), 2);
    }
}

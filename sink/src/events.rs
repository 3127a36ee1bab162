//! Problems detected online, per flow: the latest ones for the API, counts by kind and
//! label for the metrics, and every one as a JSON line when asked.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

use serde::Serialize;
use telemetry::flowradar::FlowKey;

use crate::detect::diagnose::Label;
use crate::detect::{Event, Kind};
use crate::flows::FlowId;

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
    #[serde(skip)]
    key: FlowKey,
}

/// The sink's events.
#[derive(Debug, Default)]
pub struct EventLog {
    recent: Mutex<VecDeque<FlowEvent>>,
    counts: Mutex<BTreeMap<(Kind, Label), u64>>,
    lines: Mutex<Option<BufWriter<File>>>,
}

impl EventLog {
    /// A log that also writes every event to `lines`.
    pub fn with_lines(lines: Option<File>) -> EventLog {
        EventLog {
            lines: Mutex::new(lines.map(BufWriter::new)),
            ..EventLog::default()
        }
    }

    /// Records events of flow `key` found in `series`.
    pub fn record(&self, key: FlowKey, series: &'static str, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        {
            let mut c = self.counts.lock().expect("event counts lock");
            for e in &events {
                for l in &e.labels {
                    *c.entry((e.kind, *l)).or_default() += 1;
                }
            }
        }
        let mut recent = self.recent.lock().expect("events lock");
        let mut lines = self.lines.lock().expect("event lines lock");
        for event in events {
            let fe = FlowEvent {
                flow: key.into(),
                series,
                event,
                key,
            };
            // Flushed by `flush_lines` (after each sweep, at the stop), not per event: a
            // sweep that closes many flows' windows writes as many events.
            if let Some(w) = lines.as_mut() {
                let _ = serde_json::to_writer(&mut *w, &fe);
                let _ = w.write_all(b"\n");
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
            let _ = w.flush();
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

    /// Events by kind and label since the start.
    pub fn counts(&self) -> BTreeMap<(Kind, Label), u64> {
        self.counts.lock().expect("event counts lock").clone()
    }
}

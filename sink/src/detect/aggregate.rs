//! Problem windows merged into events: windows of one kind separated by at most the merge
//! gap join one event; an event that ends (a gap longer than the merge gap follows it) is
//! kept if it lasted at least the minimum event length, and diagnosed.

use super::diagnose::diagnose;
use super::window::WindowStats;
use super::{Event, Kind, Params};

/// An event being built.
#[derive(Debug, Clone)]
struct Open {
    windows: Vec<WindowStats>,
    /// Windows between the problem ones (not problems themselves), counted for the
    /// persistence of reordering.
    quiet_windows: usize,
    /// Quiet windows after the last problem one (inside the event only if another follows).
    trailing_quiet: usize,
    baseline_ms: Option<f64>,
}

/// Merges one kind's problem windows into events.
#[derive(Debug, Clone)]
pub struct Aggregator {
    kind: Kind,
    open: Option<Open>,
    /// The last normal window's baseline (kept for long events).
    baseline_ms: Option<f64>,
}

impl Aggregator {
    /// An aggregator for `kind`.
    pub fn new(kind: Kind) -> Aggregator {
        Aggregator {
            kind,
            open: None,
            baseline_ms: None,
        }
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The baseline of the last normal window (delay only): what a window's delay is
    /// raised against.
    pub fn baseline_ms(&self) -> Option<f64> {
        self.baseline_ms
    }

    fn is_problem(&self, w: &WindowStats, p: &Params) -> bool {
        match self.kind {
            Kind::Delay => w.delay_problem,
            Kind::Loss => {
                let floor = if w.counted_lost > 0 {
                    p.counted_loss_rate
                } else {
                    p.loss_rate
                };
                w.lost > 0 && w.loss_rate() > floor
            }
            Kind::Reordering => w.reordering > p.reordering,
        }
    }

    /// Takes the next window; returns an event that ended before it, if any.
    pub fn push(&mut self, w: &WindowStats, p: &Params) -> Option<Event> {
        let problem = self.is_problem(w, p);
        let mut done = None;
        if let Some(open) = &self.open {
            let last_end = open.windows.last().map_or(w.start, |x| x.end);
            if w.start - last_end > p.merge_gap_s + 1e-9
                || (!problem && w.end - last_end > p.merge_gap_s + 1e-9)
            {
                done = self.close(p);
            }
        }
        if problem {
            let baseline = self.baseline_ms.or(w.baseline_ms);
            let open = self.open.get_or_insert_with(|| Open {
                windows: Vec::new(),
                quiet_windows: 0,
                trailing_quiet: 0,
                baseline_ms: baseline,
            });
            open.quiet_windows += open.trailing_quiet;
            open.trailing_quiet = 0;
            open.windows.push(*w);
        } else {
            if let Some(open) = &mut self.open {
                open.trailing_quiet += 1;
            }
            if self.kind == Kind::Delay && w.baseline_ms.is_some() {
                self.baseline_ms = w.baseline_ms;
            }
        }
        done
    }

    /// Ends the event being built, if any (at the end of a series).
    pub fn close(&mut self, p: &Params) -> Option<Event> {
        let open = self.open.take()?;
        let first = open.windows.first()?;
        let last = open.windows.last()?;
        if last.end - first.start < p.min_event_s - 1e-9 {
            return None;
        }
        let (mut start, mut end) = (first.start, last.end);
        let span = |w: &WindowStats| match self.kind {
            Kind::Delay => w.high_span,
            Kind::Loss => w.lost_span,
            Kind::Reordering => None,
        };
        if let Some((a, _)) = span(first) {
            start = a;
        }
        if let Some((_, b)) = span(last) {
            end = b;
        }
        if start > end {
            // One window whose delay was up at both of its ends: all of it.
            (start, end) = (first.start, last.end);
        }
        let lost: u64 = open.windows.iter().map(|w| w.lost).sum();
        let sent: u64 = open.windows.iter().map(|w| w.sent).sum();
        let reordered: Vec<f64> = open
            .windows
            .iter()
            .map(|w| w.reordering)
            .filter(|r| *r > 0.0)
            .collect();
        let peak = open
            .windows
            .iter()
            .filter(|w| w.samples > 0)
            .map(|w| w.max_ms)
            .reduce(f64::max);
        Some(Event {
            kind: self.kind,
            start,
            end,
            baseline_ms: open.baseline_ms,
            peak_ms: peak,
            loss_rate: if sent == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            reordering: if reordered.is_empty() {
                0.0
            } else {
                reordered.iter().sum::<f64>() / reordered.len() as f64
            },
            labels: diagnose(self.kind, &open.windows, open.quiet_windows),
        })
    }
}

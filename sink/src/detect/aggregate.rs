//! Problem windows merged into events: windows of one kind separated by at most the merge
//! gap join one event; an event that ends (a gap longer than the merge gap follows it) is
//! kept if it lasted at least the minimum event length, and diagnosed. A delay event whose
//! delay was already up when its first window began starts where it rose in the quiet
//! window before, and one whose delay was still up when its last window ended ends where it
//! fell in the quiet window after: a window only part raised is no problem on its own
//! (its lowest mode still holds most samples), but the event began or ended in it.

use super::diagnose::diagnose;
use super::window::WindowStats;
use super::{Event, Kind, Params};

/// A window's delay counts as up from its start (or until its end) when fewer than this
/// many of its samples were sent before the rise (or after the fall).
const EDGE_SAMPLES: usize = 5;

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
    /// The quiet window just before the first problem one, if adjacent.
    before: Option<WindowStats>,
    /// The quiet window just after the last problem one, if adjacent.
    after: Option<WindowStats>,
}

/// Merges one kind's problem windows into events.
#[derive(Debug, Clone)]
pub struct Aggregator {
    kind: Kind,
    open: Option<Open>,
    /// The last normal window's baseline (kept for long events).
    baseline_ms: Option<f64>,
    /// The last window, if it was quiet.
    last_quiet: Option<WindowStats>,
}

/// Whether `b` starts where `a` ends.
fn adjacent(a: &WindowStats, b: &WindowStats) -> bool {
    (b.start - a.end).abs() < 1e-9
}

impl Aggregator {
    /// An aggregator for `kind`.
    pub fn new(kind: Kind) -> Aggregator {
        Aggregator {
            kind,
            open: None,
            baseline_ms: None,
            last_quiet: None,
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
            let before = self.last_quiet.take().filter(|q| adjacent(q, w));
            let open = self.open.get_or_insert_with(|| Open {
                windows: Vec::new(),
                quiet_windows: 0,
                trailing_quiet: 0,
                baseline_ms: baseline,
                before,
                after: None,
            });
            open.quiet_windows += open.trailing_quiet;
            open.trailing_quiet = 0;
            open.after = None;
            open.windows.push(*w);
        } else {
            if let Some(open) = &mut self.open {
                if open.trailing_quiet == 0 {
                    open.after = open
                        .windows
                        .last()
                        .filter(|last| adjacent(last, w))
                        .map(|_| *w);
                }
                open.trailing_quiet += 1;
            }
            self.last_quiet = Some(*w);
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
        if self.kind == Kind::Delay {
            // Up from the first window's start: it rose in the quiet window before, if
            // that one's delay was up until its end.
            let up_at_start = first.high_span.is_some() && first.high_margins.0 < EDGE_SAMPLES;
            if let Some(b) = open.before.as_ref().filter(|_| up_at_start)
                && let Some((rise, _)) = b.high_span
                && b.high_margins.1 < EDGE_SAMPLES
            {
                start = start.min(rise);
            }
            let up_at_end = last.high_span.is_some() && last.high_margins.1 < EDGE_SAMPLES;
            if let Some(a) = open.after.as_ref().filter(|_| up_at_end)
                && let Some((_, fall)) = a.high_span
                && a.high_margins.0 < EDGE_SAMPLES
            {
                end = end.max(fall);
            }
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

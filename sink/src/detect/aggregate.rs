//! Problem windows merged into events: windows of one kind separated by at most the merge
//! gap join one event; an event that ends (a gap longer than the merge gap follows it) is
//! kept if it lasted at least the minimum event length, and diagnosed. A delay event whose
//! delay was already up when its first window began starts where it rose in the quiet
//! window before, and one whose delay was still up when its last window ended ends where it
//! fell in the quiet window after: a window only part raised is no problem on its own
//! (its lowest mode still holds most samples), but the event began or ended in it.
//!
//! The delay aggregator keeps the baseline of the last normal window: a window whose own
//! level (its lowest mode) sits more than the delay threshold above it is a problem too, the
//! delay up throughout it, however narrow its spread; a level that stays up for
//! [`ADOPT_LEVEL_S`] becomes the baseline (a route that got longer is the new normal). A
//! window at a lower level is no problem: its level is the baseline from then on.

use super::diagnose::diagnose;
use super::window::{FLAT_MS, LEVEL_SHIFT_MS, WindowStats};
use super::{Event, Kind, Params};

/// A window's delay counts as up from its start (or until its end) when fewer than this
/// many of its samples were sent before the rise (or after the fall).
const EDGE_SAMPLES: usize = 5;

/// A delay level raised above the baseline for this long (s) becomes the baseline: what
/// lasts a minute (a longer route, a moved clock) is the new normal, not a problem forever.
pub const ADOPT_LEVEL_S: f64 = 60.0;

/// A delay window's level: its lowest mode, or its median when its delays have no spread.
fn level(w: &WindowStats) -> f64 {
    w.baseline_ms.unwrap_or(w.median_ms)
}

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
    /// The quiet window just before the first problem one, if adjacent (delay only).
    before: Option<Quiet>,
    /// The quiet window just after the last problem one, if adjacent (delay only).
    after: Option<Quiet>,
}

/// What a quiet window next to a delay event tells of it: where its delay rose and fell,
/// and how many samples came before the rise and after the fall.
#[derive(Debug, Clone, Copy)]
struct Quiet {
    end: f64,
    span: (f64, f64),
    margins: (usize, usize),
}

impl Quiet {
    /// A delay aggregator's note of quiet window `w` (None: no raised sample in it).
    fn of(w: &WindowStats) -> Option<Quiet> {
        w.high_span.map(|span| Quiet {
            end: w.end,
            span,
            margins: w.high_margins,
        })
    }
}

/// Merges one kind's problem windows into events.
#[derive(Debug, Clone)]
pub struct Aggregator {
    kind: Kind,
    open: Option<Open>,
    /// The last normal window's baseline (kept for long events).
    baseline_ms: Option<f64>,
    /// The last window, if it was quiet and had raised samples (delay only).
    last_quiet: Option<Quiet>,
    /// The last window, if it was normal and held more than a few samples (delay only):
    /// its end and its level (its baseline, or its median when it has none).
    last_normal: Option<(f64, f64)>,
    /// When the delay's level rose above the baseline, while it stays up (delay only).
    raised_since: Option<f64>,
    /// The end of the last window with more than a few samples (delay only): a window
    /// after a gap in the series is not judged against the baseline from before it (where
    /// the level changed is not known).
    last_dense_end: Option<f64>,
}

/// Whether a window starting at `b_start` begins where one ending at `a_end` ends.
fn adjacent(a_end: f64, b_start: f64) -> bool {
    (b_start - a_end).abs() < 1e-9
}

impl Aggregator {
    /// An aggregator for `kind`.
    pub fn new(kind: Kind) -> Aggregator {
        Aggregator {
            kind,
            open: None,
            baseline_ms: None,
            last_quiet: None,
            last_normal: None,
            raised_since: None,
            last_dense_end: None,
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

    /// Whether delay window `w` sits at a level more than the delay threshold above the
    /// baseline, right after a window with more than a few samples: its delay was up
    /// throughout, which its own spread does not show.
    fn raised(&self, w: &WindowStats, p: &Params) -> bool {
        self.kind == Kind::Delay
            && w.samples > p.min_high_samples
            && self
                .last_dense_end
                .is_some_and(|end| adjacent(end, w.start))
            && self
                .baseline_ms
                .is_some_and(|b| level(w) - b > p.delay_threshold_ms)
    }

    /// Whether delay window `w`, right after a normal one, sits flat at a level more than
    /// [`LEVEL_SHIFT_MS`] from that one's: the level changed at the boundary between them
    /// (a route or a clock changed), which neither window's own spread shows. Returns
    /// whether it fell (a shorter route, a clock set back).
    fn shifted_at_start(&self, w: &WindowStats, p: &Params) -> Option<bool> {
        if self.kind != Kind::Delay
            || w.samples <= p.min_high_samples
            || w.p95_ms - w.p5_ms >= FLAT_MS
        {
            return None;
        }
        let (end, level) = self.last_normal?;
        (adjacent(end, w.start) && (w.median_ms - level).abs() > LEVEL_SHIFT_MS)
            .then_some(w.median_ms < level)
    }

    /// Takes the next window; returns an event that ended before it, if any.
    pub fn push(&mut self, w: &WindowStats, p: &Params) -> Option<Event> {
        let raised = self.raised(w, p);
        let shift = self.shifted_at_start(w, p);
        if self.kind == Kind::Delay && w.samples > p.min_high_samples {
            self.last_dense_end = Some(w.end);
        }
        let shifted = shift.is_some();
        if raised {
            // Up since this window, or since the window before it when the delay rose
            // part-way through that one (a problem of its own) and stayed up to its end.
            let began = self
                .open
                .as_ref()
                .and_then(|o| o.windows.last())
                .filter(|last| {
                    adjacent(last.end, w.start)
                        && last.high_span.is_some()
                        && last.high_margins.1 < EDGE_SAMPLES
                })
                .map_or(w.start, |last| last.start);
            let since = *self.raised_since.get_or_insert(began);
            if w.end - since >= ADOPT_LEVEL_S - 1e-9 {
                // Up for a minute: the new normal (this window still ends the event).
                self.baseline_ms = Some(level(w));
                self.raised_since = None;
            }
        } else {
            self.raised_since = None;
        }
        let problem = self.is_problem(w, p) || raised || shifted;
        let w = &WindowStats {
            level_shift: w.level_shift || shifted,
            ..*w
        };
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
            // A delay event's baseline is the last normal window's; without one, its first
            // window's lowest mode, kept as the baseline the windows after it are raised
            // against. Other kinds report the delay's baseline too.
            let baseline = self.baseline_ms.or(w.reference_ms).or(w.baseline_ms);
            if self.kind == Kind::Delay && self.baseline_ms.is_none() {
                self.baseline_ms = w.baseline_ms;
            }
            let before = self.last_quiet.take().filter(|q| adjacent(q.end, w.start));
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
            self.last_normal = None;
            if shift == Some(true) {
                // Fallen to a level of its own: the baseline from now on, so that the
                // windows after it are no problem for being at it.
                self.baseline_ms = Some(level(w));
            }
            // Long enough: reported now; the problem, if it goes on, is the next event.
            let lasted = open.windows.first().map_or(0.0, |f| w.end - f.start);
            if done.is_none() && lasted >= p.max_event_s - 1e-9 {
                done = self.close(p);
            }
        } else {
            if let Some(open) = &mut self.open {
                if open.trailing_quiet == 0 && self.kind == Kind::Delay {
                    open.after = open
                        .windows
                        .last()
                        .filter(|last| adjacent(last.end, w.start))
                        .and_then(|_| Quiet::of(w));
                }
                open.trailing_quiet += 1;
            }
            if self.kind == Kind::Delay {
                self.last_quiet = Quiet::of(w);
            }
            if self.kind == Kind::Delay {
                // A normal window's level is the baseline: the same, one a little off, or
                // lower (a shorter route: no problem, the new normal). A window too sparse
                // for a level of its own leaves it.
                if w.samples > p.min_high_samples {
                    self.baseline_ms = Some(level(w));
                } else if w.baseline_ms.is_some() {
                    self.baseline_ms = w.baseline_ms;
                }
            }
            if self.kind == Kind::Delay {
                self.last_normal = (w.samples > p.min_high_samples)
                    .then(|| (w.end, w.baseline_ms.unwrap_or(w.median_ms)));
            }
        }
        done
    }

    /// The end of the last problem window of the event being built, if any: a window that
    /// starts more than the merge gap after it cannot join the event.
    pub fn building_until(&self) -> Option<f64> {
        self.open.as_ref()?.windows.last().map(|w| w.end)
    }

    /// Ends the event being built, if any (at the end of a series).
    pub fn close(&mut self, p: &Params) -> Option<Event> {
        let open = self.open.take()?;
        let first = open.windows.first()?;
        let last = open.windows.last()?;
        // An outage's losses are all listed in the window where packets came back: its
        // lost packets' send times say how long the event lasted.
        let from = match (self.kind, first.lost_span) {
            (Kind::Loss, Some((a, _))) => a.min(first.start),
            _ => first.start,
        };
        if last.end - from < p.min_event_s - 1e-9 {
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
            if let Some(b) = open
                .before
                .filter(|b| up_at_start && b.margins.1 < EDGE_SAMPLES)
            {
                start = start.min(b.span.0);
            }
            let up_at_end = last.high_span.is_some() && last.high_margins.1 < EDGE_SAMPLES;
            if let Some(a) = open
                .after
                .filter(|a| up_at_end && a.margins.0 < EDGE_SAMPLES)
            {
                end = end.max(a.span.1);
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

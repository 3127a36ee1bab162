//! Detection of performance problems on a measurement series (Pythia's detection logic,
//! `docs/detection.md`): delay, loss and reordering problems found per window and merged
//! into events, then labelled with likely causes.
//!
//! A series is what one path or flow measured: per received packet its sequence number (if
//! any), send time and delay, in arrival order; lost packets are the sequence numbers
//! missing, or (for series without sequence numbers) loss counts per stretch of time. The
//! series is cut into back-to-back windows by send time (5 s by default); each window is
//! analysed on its own ([`window::analyse`]) and an [`aggregate::Aggregator`] per kind
//! merges problem windows into events. [`detect`] runs a whole series (offline);
//! [`online::Detector`] runs one as it arrives (the sink).

pub mod aggregate;
pub mod diagnose;
pub mod input;
pub mod kde;
pub mod online;
pub mod window;

use serde::Serialize;

/// One received packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Sequence number (None: the series has none, e.g. per-packet latency from digests).
    pub seq: Option<u64>,
    /// Send time, seconds.
    pub send: f64,
    /// Delay (one-way or round trip), ms.
    pub delay_ms: f64,
}

/// How eager detection is: one knob that scales every threshold together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivity(pub f64);

impl Sensitivity {
    /// Fewer, larger events: thresholds doubled.
    pub const LOW: Sensitivity = Sensitivity(0.5);
    /// The defaults.
    pub const MEDIUM: Sensitivity = Sensitivity(1.0);
    /// More, smaller events: thresholds halved.
    pub const HIGH: Sensitivity = Sensitivity(2.0);

    /// `low`, `medium`, `high`, or a number above zero (1 = medium; larger is more
    /// sensitive).
    pub fn parse(s: &str) -> Result<Sensitivity, String> {
        match s {
            "low" => Ok(Sensitivity::LOW),
            "medium" => Ok(Sensitivity::MEDIUM),
            "high" => Ok(Sensitivity::HIGH),
            _ => match s.parse::<f64>() {
                Ok(v) if v > 0.0 && v.is_finite() && v <= 100.0 => Ok(Sensitivity(v)),
                _ => Err(format!(
                    "`{s}` is not a sensitivity (low, medium, high, or a number in (0, 100])"
                )),
            },
        }
    }
}

/// Detection parameters. The defaults and why they were chosen: `docs/detection.md`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Window length, s.
    pub window_s: f64,
    /// Packets sent closer than this (s) share the earlier one's delay (self-queueing).
    pub self_queueing_s: f64,
    /// A window's delay range must exceed this (ms) for a delay problem (tau_d).
    pub delay_threshold_ms: f64,
    /// ... and more than this many samples must lie above its minimum plus tau_d.
    pub min_high_samples: usize,
    /// The lowest mode must hold at least this share of the window's samples ...
    pub mode_mass: f64,
    /// ... and be at most this wide (ms), or the window is a problem.
    pub mode_width_ms: f64,
    /// Problem windows this close (s) or closer merge into one event (tau_m).
    pub merge_gap_s: f64,
    /// Events shorter than this (s) are dropped (tau_l).
    pub min_event_s: f64,
    /// A window with a loss rate above this is a loss problem.
    pub loss_rate: f64,
    /// ... or above this, when the loss is known from counters: packets in flight when a
    /// window ends look lost to counters (latency x rate: 5% of a 5 s window is 250 ms of
    /// latency).
    pub counted_loss_rate: f64,
    /// A window with a reordering metric R above this is a reordering problem.
    pub reordering: f64,
    /// An event that has lasted this long (s) is reported and the problem, if it goes on,
    /// is a new event: online, a problem that lasts is then seen while it lasts (and an
    /// event's memory stays bounded). Unbounded offline, where the series ends.
    pub max_event_s: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params::with_sensitivity(Sensitivity::MEDIUM)
    }
}

impl Params {
    /// The defaults scaled by `s`: severity thresholds (delay range, samples above, loss
    /// rate, reordering) and the shortest event divide by it.
    pub fn with_sensitivity(s: Sensitivity) -> Params {
        let k = s.0;
        Params {
            window_s: 5.0,
            self_queueing_s: 100e-6,
            delay_threshold_ms: 5.0 / k,
            min_high_samples: (5.0 / k).round() as usize,
            mode_mass: 0.4,
            mode_width_ms: 2.0,
            merge_gap_s: 5.0,
            min_event_s: 5.0 / k,
            // Medium and above: any loss, any reordering (as the source); below medium, a
            // share of the window that grows from nothing as the knob turns down (2% and
            // R above 2 at low, s = 0.5), with no jump at 1.
            loss_rate: 0.02 * (1.0 / k - 1.0).max(0.0),
            counted_loss_rate: 0.05 / k,
            reordering: 2.0 * (1.0 / k - 1.0).max(0.0),
            max_event_s: f64::INFINITY,
        }
    }

    /// When (send-time clock) an event whose last problem window ended at `end` is final
    /// online: the last window that could join it (starting at most the merge gap later)
    /// has closed by then, a window after its end.
    pub fn event_final_at(&self, end: f64) -> f64 {
        end + self.merge_gap_s + 2.0 * self.window_s
    }

    /// The parameters of online detection in the sink: these, with events reported at
    /// least every [`ONLINE_MAX_EVENT_S`].
    pub fn online(s: Sensitivity) -> Params {
        Params {
            max_event_s: ONLINE_MAX_EVENT_S,
            ..Params::with_sensitivity(s)
        }
    }
}

/// The longest event the sink reports online before a problem that goes on becomes the
/// next event, s.
pub const ONLINE_MAX_EVENT_S: f64 = 60.0;

/// What kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Delays well above the baseline.
    Delay,
    /// Lost packets.
    Loss,
    /// Packets out of order.
    Reordering,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::Delay, Kind::Loss, Kind::Reordering];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Delay => "delay",
            Kind::Loss => "loss",
            Kind::Reordering => "reordering",
        }
    }
}

/// A detected problem.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Its kind.
    pub kind: Kind,
    /// Start, s (send time, as in the series).
    pub start: f64,
    /// End, s.
    pub end: f64,
    /// The delay baseline before the event (the lowest mode of the last normal window, or
    /// of the event's first window), ms.
    pub baseline_ms: Option<f64>,
    /// The largest delay during the event, ms.
    pub peak_ms: Option<f64>,
    /// Packets lost over packets sent during the event.
    pub loss_rate: f64,
    /// The reordering metric R over the event's windows with reordering (mean).
    pub reordering: f64,
    /// Likely causes (`unknown` when no test holds).
    pub labels: Vec<diagnose::Label>,
}

/// What a run found, with counts for the summary line.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Events, ordered by start.
    pub events: Vec<Event>,
    /// Samples read.
    pub samples: u64,
    /// Packets lost.
    pub lost: u64,
    /// Windows analysed.
    pub windows: u64,
}

/// Samples a window should hold for its delay test to see a problem: several times the
/// high samples it asks for.
const SAMPLES_PER_WINDOW: f64 = 20.0;

/// The median time between consecutive samples' send times, s (None with fewer than two).
pub fn median_spacing_s(samples: &[Sample]) -> Option<f64> {
    let mut t: Vec<f64> = samples.iter().map(|s| s.send).collect();
    t.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_by(f64::total_cmp);
    Some(gaps[gaps.len() / 2])
}

/// The window for a series whose samples are `spacing` s apart: `params.window_s`, or
/// longer (whole seconds) where that would hold fewer than about 20 samples (one probe a
/// second: 20 s), so that a delay problem can show in it.
pub fn window_for(spacing: Option<f64>, params: &Params) -> f64 {
    match spacing {
        Some(g) if g.is_finite() && g > 0.0 => (g * SAMPLES_PER_WINDOW)
            .ceil()
            .clamp(params.window_s, 3600.0),
        _ => params.window_s,
    }
}

/// What a user should hear about a series before trusting its events: send times far
/// apart for seconds (in ms or ns?), or going back (a file not in time order).
pub fn series_warnings(samples: &[Sample], spacing: Option<f64>, window_s: f64) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(g) = spacing
        && g > 60.0
    {
        out.push(format!(
            "samples are {g} s apart (the median): send times must be in seconds"
        ));
    }
    let mut latest = f64::NEG_INFINITY;
    let mut back = 0u64;
    for s in samples {
        if s.send < latest - window_s {
            back += 1;
        }
        latest = latest.max(s.send);
    }
    if back > 0 {
        out.push(format!(
            "{back} samples were sent more than a window ({window_s} s) before one earlier in the file: the file should be in time order (such samples fall in the oldest window still open)"
        ));
    }
    // Sequence numbers spanning far more than the samples (a jump, or numbers of several
    // streams mixed): what the gaps count as lost is no loss of one stream.
    let seqs = samples.iter().filter_map(|s| s.seq);
    if let (Some(lo), Some(hi)) = (seqs.clone().min(), seqs.max()) {
        let span = hi - lo;
        if span > SEQ_SPAN_WARNED && span / 100 > samples.len() as u64 {
            out.push(format!(
                "sequence numbers span {lo} to {hi} over {} samples: a jump, or several streams in one series? The gaps count as lost",
                samples.len()
            ));
        }
    }
    out
}

/// Sequence numbers spanning more than this, and a hundred times the samples, are said.
const SEQ_SPAN_WARNED: u64 = 1 << 20;

/// Runs detection over a whole series: `samples` in arrival order; packets whose sequence
/// numbers are missing between the smallest and largest seen are lost.
pub fn detect(samples: &[Sample], params: &Params) -> Report {
    let mut d = online::Detector::new(*params);
    d.push_all(samples);
    d.finish()
}

#[cfg(test)]
mod tests;

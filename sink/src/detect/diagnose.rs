//! Likely causes of an event, from simple symptom tests on its windows. Several labels may
//! hold at once; when none does, the event is `unknown`. The tests and their thresholds are
//! listed in `docs/detection.md`.

use serde::Serialize;

use super::Kind;
use super::window::WindowStats;

/// A likely cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Delay jumps of more than 300 ms in at most 10% of the samples: the receiving host
    /// was busy elsewhere.
    ContextSwitch,
    /// Isolated one-sample spikes: noise at an end host, not the path.
    EndHostNoise,
    /// Loss whose neighbouring packets were not delayed.
    RandomLoss,
    /// Loss whose neighbouring packets were delayed: queues overflowing.
    DelayCorrelatedLoss,
    /// A run of consecutive losses in a short event: the path was down briefly.
    ShortOutage,
    /// Delays spread over more than 500 ms (P95 - P5): a large buffer filling.
    LargeBuffer,
    /// Delays spread over less than 1 ms while packets are lost: a small buffer.
    SmallBuffer,
    /// A flat level shift of more than 10 ms: a route change or a clock step.
    RouteOrClockChange,
    /// Most samples far above the baseline for the whole event: sustained overload.
    CongestionOverload,
    /// Some samples far above the baseline, on and off: bursty congestion.
    CongestionBursty,
    /// Reordering in most of the event's windows.
    ReorderingPersistent,
    /// Reordering now and then.
    ReorderingUnstable,
    /// No test holds.
    Unknown,
}

impl Label {
    /// Every label.
    pub const ALL: [Label; 13] = [
        Label::ContextSwitch,
        Label::EndHostNoise,
        Label::RandomLoss,
        Label::DelayCorrelatedLoss,
        Label::ShortOutage,
        Label::LargeBuffer,
        Label::SmallBuffer,
        Label::RouteOrClockChange,
        Label::CongestionOverload,
        Label::CongestionBursty,
        Label::ReorderingPersistent,
        Label::ReorderingUnstable,
        Label::Unknown,
    ];

    /// Its name (as JSON writes it).
    pub fn name(self) -> &'static str {
        match self {
            Label::ContextSwitch => "context_switch",
            Label::EndHostNoise => "end_host_noise",
            Label::RandomLoss => "random_loss",
            Label::DelayCorrelatedLoss => "delay_correlated_loss",
            Label::ShortOutage => "short_outage",
            Label::LargeBuffer => "large_buffer",
            Label::SmallBuffer => "small_buffer",
            Label::RouteOrClockChange => "route_or_clock_change",
            Label::CongestionOverload => "congestion_overload",
            Label::CongestionBursty => "congestion_bursty",
            Label::ReorderingPersistent => "reordering_persistent",
            Label::ReorderingUnstable => "reordering_unstable",
            Label::Unknown => "unknown",
        }
    }
}

/// The labels [`diagnose`] can give an event of `kind` (the others never go with it).
pub fn labels_of(kind: Kind) -> &'static [Label] {
    match kind {
        Kind::Delay => &[
            Label::ContextSwitch,
            Label::EndHostNoise,
            Label::RouteOrClockChange,
            Label::CongestionOverload,
            Label::CongestionBursty,
            Label::LargeBuffer,
            Label::Unknown,
        ],
        Kind::Loss => &[
            Label::RandomLoss,
            Label::DelayCorrelatedLoss,
            Label::ShortOutage,
            Label::SmallBuffer,
            Label::LargeBuffer,
            Label::Unknown,
        ],
        Kind::Reordering => &[Label::ReorderingPersistent, Label::ReorderingUnstable],
    }
}

/// Labels for an event of `kind` made of `windows` (problem windows, in order), with
/// `quiet` normal windows between them.
pub fn diagnose(kind: Kind, windows: &[WindowStats], quiet: usize) -> Vec<Label> {
    let mut out = Vec::new();
    let samples: usize = windows.iter().map(|w| w.samples).sum();
    let high: usize = windows.iter().map(|w| w.high).sum();
    let isolated: usize = windows.iter().map(|w| w.isolated_high).sum();
    let jumps: usize = windows.iter().map(|w| w.jumps).sum();
    let lost: u64 = windows.iter().map(|w| w.lost).sum();
    let with_samples = || windows.iter().filter(|w| w.samples > 0);
    let p5 = with_samples().map(|w| w.p5_ms).reduce(f64::min);
    let p95 = with_samples().map(|w| w.p95_ms).reduce(f64::max);
    let spread = p5.zip(p95).map(|(a, b)| b - a);
    let high_share = if samples == 0 {
        0.0
    } else {
        high as f64 / samples as f64
    };
    match kind {
        Kind::Delay => {
            if jumps > 0 && (jumps as f64) <= 0.1 * samples as f64 {
                out.push(Label::ContextSwitch);
            }
            if high > 0 && isolated as f64 >= 0.8 * high as f64 {
                out.push(Label::EndHostNoise);
            }
            // A level shift: a window whose lowest mode is narrow and whose other samples
            // form one flat level more than 10 ms above it.
            if windows.iter().any(|w| w.level_shift) {
                out.push(Label::RouteOrClockChange);
            } else if high_share >= 0.5 {
                out.push(Label::CongestionOverload);
            } else if high_share >= 0.1 && !out.contains(&Label::EndHostNoise) {
                out.push(Label::CongestionBursty);
            }
            if spread.is_some_and(|s| s > 500.0) {
                out.push(Label::LargeBuffer);
            }
        }
        Kind::Loss => {
            let neighbours: u64 = windows.iter().map(|w| w.lost_neighbours).sum();
            let delayed: u64 = windows.iter().map(|w| w.lost_neighbours_high).sum();
            if neighbours > 0 {
                if delayed as f64 >= 0.5 * neighbours as f64 {
                    out.push(Label::DelayCorrelatedLoss);
                } else {
                    out.push(Label::RandomLoss);
                }
            }
            let run = windows.iter().map(|w| w.lost_run).max().unwrap_or(0);
            // Short in time too: an outage's losses are all listed in the window after it,
            // however long it lasted; their send times say how long that was.
            let window_s = windows.first().map_or(0.0, |w| w.end - w.start);
            let lost_from = windows
                .iter()
                .filter_map(|w| w.lost_span)
                .map(|s| s.0)
                .reduce(f64::min);
            let lost_to = windows
                .iter()
                .filter_map(|w| w.lost_span)
                .map(|s| s.1)
                .reduce(f64::max);
            let brief = lost_from
                .zip(lost_to)
                .is_none_or(|(a, b)| b - a <= 2.0 * window_s);
            if run >= 5 && windows.len() <= 2 && run * 2 >= lost && brief {
                out.push(Label::ShortOutage);
            }
            if spread.is_some_and(|s| s < 1.0) && lost > 0 {
                out.push(Label::SmallBuffer);
            } else if spread.is_some_and(|s| s > 500.0) {
                out.push(Label::LargeBuffer);
            }
        }
        Kind::Reordering => {
            if windows.len() as f64 >= 0.8 * (windows.len() + quiet) as f64 {
                out.push(Label::ReorderingPersistent);
            } else {
                out.push(Label::ReorderingUnstable);
            }
        }
    }
    if out.is_empty() {
        out.push(Label::Unknown);
    }
    debug_assert!(
        out.iter().all(|l| labels_of(kind).contains(l)),
        "{kind:?}: {out:?}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn window() -> impl Strategy<Value = WindowStats> {
        (
            (0usize..50, 0usize..50, 0usize..50, 0usize..10),
            (0u64..50, 0u64..20, 0u64..20, 0u64..20),
            (0.0f64..2000.0, 0.0f64..2000.0, any::<bool>()),
        )
            .prop_map(
                |((samples, high, isolated, jumps), (lost, run, nb, nbh), (p5, width, shift))| {
                    WindowStats {
                        samples,
                        high,
                        isolated_high: isolated,
                        jumps,
                        lost,
                        lost_run: run,
                        lost_neighbours: nb,
                        lost_neighbours_high: nbh,
                        p5_ms: p5,
                        p95_ms: p5 + width,
                        level_shift: shift,
                        ..WindowStats::default()
                    }
                },
            )
    }

    /// A run of losses in one window is a short outage when the lost packets were sent
    /// within two windows' time; the same run listed after a 300 s outage is not.
    #[test]
    fn a_short_outage_is_short_in_time() {
        let after = |from: f64, to: f64| WindowStats {
            start: 300.0,
            end: 305.0,
            lost: 600,
            sent: 610,
            lost_run: 600,
            lost_span: Some((from, to)),
            ..WindowStats::default()
        };
        assert!(diagnose(Kind::Loss, &[after(300.5, 302.0)], 0).contains(&Label::ShortOutage));
        assert!(!diagnose(Kind::Loss, &[after(1.0, 301.0)], 0).contains(&Label::ShortOutage));
    }

    proptest! {
        /// Whatever the windows, an event's labels are among its kind's (the metrics publish
        /// those pairs from the start, at 0).
        #[test]
        fn an_events_labels_are_among_its_kinds(
            windows in proptest::collection::vec(window(), 0..4),
            quiet in 0usize..5,
        ) {
            for kind in Kind::ALL {
                let labels = diagnose(kind, &windows, quiet);
                prop_assert!(!labels.is_empty());
                prop_assert!(labels.iter().all(|l| labels_of(kind).contains(l)), "{:?}: {:?}", kind, labels);
            }
        }
    }
}

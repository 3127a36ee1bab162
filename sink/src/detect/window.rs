//! One window's analysis: is it a delay, loss or reordering problem, and the symptoms the
//! diagnosis reads later.

use super::kde::lowest_mode;
use super::{Params, Sample};

/// What one window showed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowStats {
    /// Start (send time), s.
    pub start: f64,
    /// End, s.
    pub end: f64,
    /// Samples received.
    pub samples: usize,
    /// Smallest and largest delay, ms.
    pub min_ms: f64,
    /// Largest delay, ms.
    pub max_ms: f64,
    /// 5th and 95th percentiles of the delays, ms.
    pub p5_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// Median, ms.
    pub median_ms: f64,
    /// The lowest mode's peak (the window's baseline), ms, when the window has spread.
    pub baseline_ms: Option<f64>,
    /// The baseline the window was judged against: that of the last normal window before
    /// it, if any (what an event's `baseline_ms` reports, whatever its kind).
    pub reference_ms: Option<f64>,
    /// Whether delay makes it a problem window.
    pub delay_problem: bool,
    /// Whether the delays form two flat levels more than 10 ms apart: a level shift inside
    /// the window.
    pub level_shift: bool,
    /// Samples above the baseline the window is judged against (the kept one, or the
    /// window's minimum when lower) plus the delay threshold: what the labels count (a
    /// window raised throughout is all high).
    pub high: usize,
    /// Of those, ones whose neighbours (in arrival order) are not high: single spikes.
    pub isolated_high: usize,
    /// Send times of the raised samples where the delay rose and where it fell again (see
    /// `high_span`; the rise may come after the fall when the delay was up at both ends
    /// of the window): where an event starting or ending in this window starts or ends.
    pub high_span: Option<(f64, f64)>,
    /// Samples sent before that rise and after that fall: few of them mean the delay was
    /// up from the window's start, or until its end (and an event may run on into the
    /// window next to it).
    pub high_margins: (usize, usize),
    /// Delay jumps of more than 300 ms from one sample to the next.
    pub jumps: usize,
    /// Packets lost (and packets sent: received plus lost).
    pub lost: u64,
    /// Packets sent.
    pub sent: u64,
    /// Of the packets lost, those known from counters rather than sequence numbers.
    pub counted_lost: u64,
    /// Longest run of consecutive lost sequence numbers.
    pub lost_run: u64,
    /// Received neighbours of lost packets (by sequence number), and how many of them were
    /// high.
    pub lost_neighbours: u64,
    /// Neighbours of lost packets that were high.
    pub lost_neighbours_high: u64,
    /// Estimated send times of the first and last lost packet.
    pub lost_span: Option<(f64, f64)>,
    /// The reordering metric R (0 without reordering).
    pub reordering: f64,
}

impl WindowStats {
    /// Loss rate.
    pub fn loss_rate(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

/// The reordering metric of sequence numbers in arrival order: with E_k the k-th smallest
/// of them, D_k = n_k - E_k, R = sum |D_k| / #{D_k != 0} (0 when nothing is out of place).
/// `scratch` is reused between calls.
pub fn reordering(arrivals: &[u64], scratch: &mut Vec<u64>) -> f64 {
    if arrivals.is_sorted() {
        return 0.0;
    }
    scratch.clear();
    scratch.extend_from_slice(arrivals);
    scratch.sort_unstable();
    let (mut sum, mut count) = (0u64, 0u64);
    for (n, e) in arrivals.iter().zip(scratch.iter()) {
        if n != e {
            sum = sum.saturating_add(n.abs_diff(*e));
            count += 1;
        }
    }
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

/// An integer whose order is the float's total order.
#[inline]
fn order_key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// The float back from [`order_key`].
#[inline]
fn from_order_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

/// Delays whose 5th and 95th percentiles are closer than this, ms, are one flat level.
pub const FLAT_MS: f64 = 2.0;
/// Two flat levels further apart than this, ms, are a level shift (the source's
/// RouteNTPChange: a route or a clock changed).
pub const LEVEL_SHIFT_MS: f64 = 10.0;

/// Whether sorted delays form two flat levels (each spread under [`FLAT_MS`] between its
/// 5th and 95th percentile, at least three samples each) more than [`LEVEL_SHIFT_MS`]
/// apart: a level shift.
fn level_shift(sorted: &[f64]) -> bool {
    let n = sorted.len();
    if n < 6 {
        return false;
    }
    let (gap, at) = sorted
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1] - w[0], i + 1))
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
    let flat = |v: &[f64]| {
        let k = v.len();
        k >= 3 && v[(k * 95 / 100).min(k - 1)] - v[k * 5 / 100] < FLAT_MS
    };
    gap > LEVEL_SHIFT_MS && flat(&sorted[..at]) && flat(&sorted[at..])
}

/// Scratch buffers reused from window to window.
#[derive(Debug, Default)]
pub struct Scratch {
    delays: Vec<f64>,
    keys: Vec<u64>,
    seqs: Vec<u64>,
    sorted_seqs: Vec<u64>,
    by_seq: Vec<(u64, f64, f64)>,
    by_send: Vec<(f64, bool)>,
}

/// The fewest samples a dip between a window's fall and its rise takes to count as one.
const MIN_DIP_SAMPLES: usize = 5;

/// Where a window's delay rose and where it fell again: a change-point estimate on the
/// cumulative excess of raised samples (CUSUM). `by_send` holds every sample's send time
/// and whether it is raised (above the reference baseline plus the delay threshold), sorted
/// here by send time. With q the window's share of raised samples, the running sum
/// P(t) = (raised samples before t) - q x (samples before t) falls while raised samples are
/// rarer than on average and climbs while they are commoner: the delay rose where P is
/// lowest (at the first raised sample after it) and fell where P is highest (at the last
/// raised sample before it). A stall of the measuring hosts raises a few samples at once,
/// or a few now and then: it moves P little, so it does not move the start of an event
/// seconds before the delay really rose. `None` without raised samples; with them, also
/// how many samples were sent before the rise and after the fall.
fn high_span(by_send: &mut [(f64, bool)]) -> Option<((f64, f64), (usize, usize))> {
    by_send.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let n = by_send.len();
    let raised = by_send.iter().filter(|x| x.1).count();
    if raised == 0 {
        return None;
    }
    // In integers: n x P(t) = n x (raised before t) - raised x (samples before t), exact.
    let (n_i, raised_i) = (n as i64, raised as i64);
    let (mut p, mut low, mut top) = (0i64, (0i64, 0usize), (0i64, 0usize));
    for (i, x) in by_send.iter().enumerate() {
        p += if x.1 { n_i - raised_i } else { -raised_i };
        // P after sample i: the lowest (the earliest on ties: a window raised throughout
        // rose at its start) before the rise, the highest (the latest on ties) at the fall.
        if p < low.0 && i + 1 < n {
            low = (p, i + 1);
        }
        if p >= top.0 {
            top = (p, i);
        }
    }
    let mut rise = low.1 + by_send[low.1..].iter().position(|x| x.1)?;
    let mut fall = by_send[..=top.1].iter().rposition(|x| x.1)?;
    // A side holding raised samples at half the share between the rise and the fall or
    // more is no quiet side: the delay was up there too, and the lowest (highest) point of
    // P only marks where its unraised samples happened to bunch (noisy congestion started
    // events seconds late and ended them seconds early). A stall now and then raises a
    // smaller share.
    // Likewise a window up at both ends (the rise after the fall) whose stretch between
    // them is no quiet one, or too short to tell (a few unraised samples in a row are
    // common in noisy congestion), was up throughout.
    let count = |side: &[(f64, bool)]| (side.iter().filter(|x| x.1).count(), side.len());
    let busy = |(r, len): (usize, usize), (r_ref, n_ref): (usize, usize)| {
        len > 0 && 2 * r * n_ref >= r_ref * len
    };
    let (first, last) = (
        by_send.iter().position(|x| x.1)?,
        by_send.iter().rposition(|x| x.1)?,
    );
    // (Each side from the window's first raised sample, or to its last: quiet samples
    // before the delay first rose are no sign that it was down.)
    if rise <= fall {
        let inside = count(&by_send[rise..=fall]);
        if busy(count(&by_send[first..rise]), inside) {
            rise = first;
        }
        if busy(count(&by_send[fall + 1..=last]), inside) {
            fall = last;
        }
    } else if rise - fall - 1 < MIN_DIP_SAMPLES
        || busy(
            count(&by_send[fall + 1..rise]),
            count(&by_send[first..=last]),
        )
    {
        (rise, fall) = (first, last);
    }
    Some(((by_send[rise].0, by_send[fall].0), (rise, n - 1 - fall)))
}

/// Analyses one window: `samples` in arrival order (delays already corrected for
/// self-queueing), `lost` sequence numbers (sorted) lost in it, and `extra`: packets lost
/// but not listed, and packets received but not among the samples (losses and deliveries
/// known from counters rather than sequence numbers). `reference_ms` is the baseline of
/// the last normal window before it, if any: where the delay rose and fell is told against
/// it (a window raised throughout rose at its start), the problem itself against the
/// window's own minimum. `before` is the last packet received before the window (sequence
/// number, send time): a lost packet between it and the window's first is placed between
/// the two by its number, before the window's start if that is when it was sent (an
/// outage longer than a window shows from its start, not only from where the packets came
/// back).
#[allow(clippy::too_many_arguments)]
pub fn analyse(
    start: f64,
    end: f64,
    samples: &[Sample],
    (lost, before): (&[u64], Option<(u64, f64)>),
    extra: (u64, u64),
    reference_ms: Option<f64>,
    p: &Params,
    s: &mut Scratch,
) -> WindowStats {
    let mut w = WindowStats {
        start,
        end,
        reference_ms,
        samples: samples.len(),
        lost: lost.len() as u64 + extra.0,
        sent: samples.len() as u64 + lost.len() as u64 + extra.0 + extra.1,
        ..WindowStats::default()
    };
    if !samples.is_empty() {
        // Sorted as integers that order like the floats (`f64::total_cmp`'s order), which
        // sorts faster than comparing floats.
        s.keys.clear();
        s.keys.extend(samples.iter().map(|x| order_key(x.delay_ms)));
        s.keys.sort_unstable();
        s.delays.clear();
        s.delays.extend(s.keys.iter().map(|&k| from_order_key(k)));
        let n = s.delays.len();
        w.min_ms = s.delays[0];
        w.max_ms = s.delays[n - 1];
        w.p5_ms = s.delays[(n * 5 / 100).min(n - 1)];
        w.p95_ms = s.delays[(n * 95 / 100).min(n - 1)];
        w.median_ms = s.delays[n / 2];
        // The window's own problem test counts samples above its minimum plus tau_d; the
        // labels count those above the baseline it is judged against.
        let own_high_at = w.min_ms + p.delay_threshold_ms;
        let mut own_high = 0usize;
        let raised_at = reference_ms.map_or(w.min_ms, |r| r.min(w.min_ms)) + p.delay_threshold_ms;
        let is_high = |d: f64| d > raised_at;
        let mut prev_d: Option<f64> = None;
        s.by_send.clear();
        for (i, x) in samples.iter().enumerate() {
            s.by_send.push((x.send, x.delay_ms > raised_at));
            own_high += usize::from(x.delay_ms > own_high_at);
            if is_high(x.delay_ms) {
                w.high += 1;
                let before = i > 0 && is_high(samples[i - 1].delay_ms);
                let after = i + 1 < samples.len() && is_high(samples[i + 1].delay_ms);
                if !before && !after {
                    w.isolated_high += 1;
                }
            }
            if let Some(pd) = prev_d
                && x.delay_ms - pd > 300.0
            {
                w.jumps += 1;
            }
            prev_d = Some(x.delay_ms);
        }
        if let Some((span, margins)) = high_span(&mut s.by_send) {
            w.high_span = Some(span);
            w.high_margins = margins;
        }
        w.level_shift = level_shift(&s.delays);
        if let Some(m) = lowest_mode(&s.delays) {
            w.baseline_ms = Some(m.peak_ms);
            // A window whose delays change level is a problem wherever in it the change
            // falls (late in it, the lower level is a mode narrow and heavy enough).
            w.delay_problem =
                (m.mass < p.mode_mass || m.width_ms > p.mode_width_ms || w.level_shift)
                    && w.max_ms - w.min_ms > p.delay_threshold_ms
                    && own_high > p.min_high_samples;
        }
        // Reordering, over the packets with sequence numbers.
        s.seqs.clear();
        s.seqs.extend(samples.iter().filter_map(|x| x.seq));
        if s.seqs.len() > 1 {
            w.reordering = reordering(&s.seqs, &mut s.sorted_seqs);
        }
    }
    if !lost.is_empty() {
        // Runs of consecutive lost numbers, and the lost packets' received neighbours.
        let mut run = 1u64;
        for pair in lost.windows(2) {
            run = if pair[1] == pair[0] + 1 { run + 1 } else { 1 };
            w.lost_run = w.lost_run.max(run);
        }
        w.lost_run = w.lost_run.max(1);
        s.by_seq.clear();
        s.by_seq.extend(
            samples
                .iter()
                .filter_map(|x| x.seq.map(|q| (q, x.send, x.delay_ms))),
        );
        s.by_seq.sort_unstable_by_key(|x| x.0);
        let spacing = match (s.by_seq.first(), s.by_seq.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) / (b.0 - a.0) as f64,
            _ => 0.0,
        };
        let high_at = w.min_ms + p.delay_threshold_ms;
        for &l in lost {
            let i = s.by_seq.partition_point(|x| x.0 < l);
            for j in [i.wrapping_sub(1), i] {
                if let Some(&(q, _, d)) = s.by_seq.get(j)
                    && q.abs_diff(l) <= 2
                {
                    w.lost_neighbours += 1;
                    w.lost_neighbours_high += u64::from(d > high_at);
                }
            }
            // Its send time: between its neighbours', by sequence number (one side missing:
            // the last packet before the window, or the window's packet spacing from the
            // other).
            let between = |a: (u64, f64), b: (u64, f64)| {
                a.1 + (b.1 - a.1) * (l - a.0) as f64 / (b.0 - a.0) as f64
            };
            let lower = s.by_seq.get(i.wrapping_sub(1)).map(|x| (x.0, x.1));
            let upper = s.by_seq.get(i).map(|x| (x.0, x.1));
            let t = match (lower, upper) {
                (Some(a), Some(b)) if b.0 > a.0 => between(a, b).clamp(start, end),
                (Some(a), _) => (a.1 + (l - a.0) as f64 * spacing).clamp(start, end),
                (None, Some(b)) => match before.filter(|a| a.0 < l && a.1 < b.1) {
                    Some(a) => between(a, b).clamp(a.1, end),
                    None => (b.1 - (b.0 - l) as f64 * spacing).clamp(start, end),
                },
                (None, None) => start,
            };
            w.lost_span = Some(match w.lost_span {
                None => (t, t),
                Some((a, b)) => (a.min(t), b.max(t)),
            });
        }
    } else if extra.0 > 0 {
        w.lost_span = Some((start, end));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_sort_like_floats() {
        let mut v = [3.5, -0.0, 0.0, -2.0, 1e-300, -1e300, 7.25, f64::INFINITY];
        let mut keys: Vec<u64> = v.iter().map(|&x| order_key(x)).collect();
        keys.sort_unstable();
        let back: Vec<f64> = keys.iter().map(|&k| from_order_key(k)).collect();
        v.sort_by(f64::total_cmp);
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    /// Where a window's delay rose and fell, for patterns of raised (`R`) and unraised
    /// samples 0.1 s apart.
    fn span_of(pattern: &str) -> (usize, usize) {
        let mut by_send: Vec<(f64, bool)> = pattern
            .chars()
            .enumerate()
            .map(|(i, c)| (i as f64 * 0.1, c == 'R'))
            .collect();
        let (span, _) = high_span(&mut by_send).unwrap();
        (
            (span.0 * 10.0).round() as usize,
            (span.1 * 10.0).round() as usize,
        )
    }

    /// A side of the change point as busy as the rest was up too, a short dip in it or
    /// not; a stall beyond a quiet stretch, or now and then before a clean rise, is not.
    #[test]
    fn busy_sides_and_stalls() {
        // Up, a dip of half a second, up again (noisily) to near the end.
        assert_eq!(
            span_of("RRRRRRRRRRRRRRRRRR.....RR.R.RRR.RRRRRRRR.RR.RR.R.."),
            (0, 47)
        );
        assert_eq!(
            span_of("RRRRRRRRRR......RRRRRRRRRRRRRRRR.RRR..RRR.R.RR..R."),
            (0, 48)
        );
        // Noisy congestion ending, a quiet stretch, a stall of three.
        let noisy = "RR.R.".repeat(6);
        assert_eq!(span_of(&format!("{noisy}......RRR..........")), (0, 28));
        // Stalls now and then, then a clean rise: it rose at the rise (the last stall runs
        // into it).
        assert_eq!(
            span_of(&format!("{}{}", "...R".repeat(5), "R".repeat(30))).0,
            19
        );
    }

    #[test]
    fn the_worked_example_gives_1_2() {
        // Arrivals 1 2 4 3 6 7 5 9 10, 8 lost.
        let r = reordering(&[1, 2, 4, 3, 6, 7, 5, 9, 10], &mut Vec::new());
        assert!((r - 1.2).abs() < 1e-12, "{r}");
        assert_eq!(reordering(&[1, 2, 3, 5], &mut Vec::new()), 0.0);
        // One packet three places late: D = 1, 1, 1, -3.
        assert!((reordering(&[2, 3, 4, 1], &mut Vec::new()) - 1.5).abs() < 1e-12);
    }
}

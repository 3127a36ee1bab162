//! Detection as a series arrives: samples go into windows by send time; a window closes once
//! a sample two windows later arrives (one window of slack for packets that arrive out of
//! order) or time passes it ([`Detector::tick`]); each closed window is analysed and merged
//! into events at once. Memory is two windows of samples and the events being built.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use super::aggregate::Aggregator;
use super::window::{Scratch, WindowStats, analyse};
use super::{Event, Kind, Params, Report, Sample};

/// Most lost sequence numbers listed per window (beyond, they are only counted).
const MAX_LOST_LISTED: u64 = 1 << 16;

/// Most samples a window keeps: beyond, every other one is dropped and only one in two
/// (then four, ...) of the later ones is kept, so a window is an evenly thinned series.
pub const MAX_WINDOW_SAMPLES: usize = 4096;

/// A window's sequence numbers: a list that stays sorted while they arrive in order (the
/// common case: no hashing), with a hash set built once the first one arrives out of order.
#[derive(Debug, Default)]
struct SeqSet {
    list: Vec<u64>,
    max: Option<u64>,
    set: Option<FxHashSet<u64>>,
}

impl SeqSet {
    /// Adds `q`; false if it was already there (a duplicate).
    #[inline]
    fn insert(&mut self, q: u64) -> bool {
        match self.max {
            Some(m) if q <= m => {
                let set = self
                    .set
                    .get_or_insert_with(|| self.list.iter().copied().collect());
                if !set.insert(q) {
                    return false;
                }
            }
            _ => {
                self.max = Some(q);
                if let Some(set) = &mut self.set {
                    set.insert(q);
                }
            }
        }
        self.list.push(q);
        true
    }

    fn contains(&self, q: u64) -> bool {
        match &self.set {
            Some(set) => set.contains(&q),
            None => self.list.binary_search(&q).is_ok(),
        }
    }

    fn min(&self) -> Option<u64> {
        match &self.set {
            Some(_) => self.list.iter().copied().min(),
            None => self.list.first().copied(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &u64> {
        self.list.iter()
    }

    fn clear(&mut self) {
        self.list.clear();
        self.max = None;
        self.set = None;
    }
}

#[derive(Debug, Default)]
struct WindowBuf {
    index: i64,
    samples: Vec<Sample>,
    seqs: SeqSet,
    /// Packets lost known from counters (signed: counts taken at two points may run ahead
    /// of each other between windows).
    extra_lost: i64,
    /// Packets sent known from counters.
    extra_sent: u64,
    /// Counter inputs given ([`Detector::push_loss`]) and stretches left out
    /// ([`Detector::push_unsure`]): a window with too many of the latter is not judged for
    /// loss from counters.
    counted_inputs: u32,
    unsure_inputs: u32,
    /// One sample in `stride` is kept (see [`MAX_WINDOW_SAMPLES`]).
    stride: u64,
    offered: u64,
}

/// The largest share of a window's counter inputs that may be left out
/// ([`Detector::push_unsure`]) for the window to be judged for loss from counters.
pub const MAX_UNSURE_SHARE: f64 = 0.1;

/// A series' detector.
#[derive(Debug)]
pub struct Detector {
    p: Params,
    t0: Option<f64>,
    open: VecDeque<WindowBuf>,
    /// The lowest sequence number not yet accounted for (received or lost).
    next_seq: Option<u64>,
    /// Sequence numbers up to this one are not counted as lost: packets the caller left out
    /// ([`Detector::excuse_seq`]) are numbered up to it.
    excused_through: Option<u64>,
    /// The losses known from counters of the windows closed so far, summed (signed): how far
    /// the counts at the two ends stand apart; and the furthest they stood apart (0 or
    /// more).
    counted_level: i64,
    counted_high: i64,
    /// The highest-numbered packet of the windows closed so far: (sequence number, send
    /// time).
    last_received: Option<(u64, f64)>,
    last: Option<(f64, f64)>,
    aggregators: [Aggregator; 3],
    scratch: Scratch,
    lost_list: Vec<u64>,
    /// Closed windows' buffers, kept for their allocations.
    spare: Vec<WindowBuf>,
    report: Report,
    /// The last closed window.
    pub last_window: Option<WindowStats>,
    /// How far the series' clock runs behind the caller's, s: the least of arrival time
    /// less send time over the samples of the current and the last period of
    /// [`BEHIND_PERIOD_S`] ([`Detector::note_arrival`]; 0 until noted), so that it follows a
    /// clock that steps: (period, least in it) for each.
    behind_s: [Option<(i64, f64)>; 2],
    /// The highest window index closed so far.
    closed_through: Option<i64>,
    /// The latest send time pushed, s.
    latest_send: Option<f64>,
    /// An adaptive detector's first samples, held until their spacing chooses its window
    /// ([`Detector::adaptive`]).
    pending: Option<Vec<Sample>>,
}

/// Samples an adaptive detector takes before it chooses its window (a window's worth: a
/// burst at a flow's start is outvoted by what follows).
const ADAPT_SAMPLES: usize = super::SAMPLES_PER_WINDOW as usize;

/// The fewest samples an adaptive detector lengthens its window from.
const ADAPT_MIN_SAMPLES: usize = 5;

/// The longest window an adaptive detector chooses, s: an event is reported at the latest
/// three windows after its end, and a longer window would hide a short problem in it.
const ADAPT_MAX_WINDOW_S: f64 = 60.0;

/// How long an adaptive detector holds fewer samples than that before it chooses from
/// those it has, s (series clock).
const ADAPT_WAIT_S: f64 = 60.0;

/// The most a series' clock is taken to run behind the caller's, s.
const MAX_BEHIND_S: f64 = 3600.0;

/// The furthest a sample's time may lie ahead of the caller's clock, s, for
/// [`Detector::push_at`], [`Detector::push_loss_at`] and [`Detector::push_unsure_at`] to
/// take it: a sample timed far
/// ahead (a corrupt time, a clock stepped ahead and back) would close every open window at
/// once, and every later sample would join the one window it opened, which time reaches
/// only that much later: the series' detection stopped until then.
pub const MAX_AHEAD_S: f64 = 60.0;

/// How long the least lag seen holds, s: after a clock steps, the lag follows within two
/// such periods.
const BEHIND_PERIOD_S: f64 = 30.0;

/// Whether series time `t` is at most [`MAX_AHEAD_S`] ahead of `now_s` (false when either
/// is not finite).
pub fn ahead_in_reach(now_s: f64, t: f64) -> bool {
    t <= now_s + MAX_AHEAD_S && now_s.is_finite() && t.is_finite()
}

impl Detector {
    /// A detector with parameters `p`.
    pub fn new(p: Params) -> Detector {
        Detector {
            p,
            t0: None,
            open: VecDeque::with_capacity(3),
            next_seq: None,
            excused_through: None,
            counted_level: 0,
            counted_high: 0,
            last_received: None,
            last: None,
            aggregators: Kind::ALL.map(Aggregator::new),
            scratch: Scratch::default(),
            lost_list: Vec::new(),
            spare: Vec::new(),
            report: Report::default(),
            last_window: None,
            behind_s: [None; 2],
            closed_through: None,
            latest_send: None,
            pending: None,
        }
    }

    /// A detector whose window is chosen from its series' first samples, as offline
    /// ([`super::window_for`]: `p.window_s`, or longer where that would hold fewer than
    /// about 20 samples): a series of a sample a second gets 20 s windows, in which a delay
    /// problem can show (a 5 s window of 5 samples never could: more than 5 raised samples
    /// are needed). For series of samples (latency, probes), not of counts.
    pub fn adaptive(p: Params) -> Detector {
        Detector {
            pending: Some(Vec::with_capacity(ADAPT_SAMPLES)),
            ..Detector::new(p)
        }
    }

    /// Chooses an adaptive detector's window from the samples held, and takes them.
    fn settle(&mut self) {
        let Some(held) = self.pending.take() else {
            return;
        };
        let spacing = super::median_spacing_s(&held);
        // Longer only where the window would hold too few samples (not rounded up from a
        // window under a second that holds enough).
        if held.len() >= ADAPT_MIN_SAMPLES
            && spacing.is_some_and(|g| g * super::SAMPLES_PER_WINDOW > 1.01 * self.p.window_s)
        {
            let window_s = super::window_for(spacing, &self.p)
                .min(ADAPT_MAX_WINDOW_S)
                .max(self.p.window_s);
            self.p.window_s = window_s;
            self.p.merge_gap_s = self.p.merge_gap_s.max(window_s);
        }
        for s in held {
            match s.seq {
                Some(q) if s.delay_ms.is_nan() => self.push_unseen(q, s.send),
                _ => self.push(s),
            }
        }
    }

    /// The earliest send time of an adaptive detector's samples held, s.
    fn held_since(&self) -> Option<f64> {
        self.pending
            .as_ref()?
            .iter()
            .map(|s| s.send)
            .reduce(f64::min)
    }

    /// The window length in use, s (an adaptive detector's once chosen).
    pub fn window_s(&self) -> f64 {
        self.p.window_s
    }

    /// Notes that a sample of series time `series_s` arrived at `now_s` (the clock
    /// [`Detector::tick`] is given): a series whose clock runs behind (a switch's or a
    /// sender's clock seconds off the sink's) has its windows closed by its own time, not
    /// while its samples are still coming (each sweep closed a part of a window, and each
    /// part was an event of its own).
    pub fn note_arrival(&mut self, now_s: f64, series_s: f64) {
        let behind = now_s - series_s;
        if !behind.is_finite() {
            return;
        }
        let period = (now_s / BEHIND_PERIOD_S).floor() as i64;
        match self.behind_s[1] {
            Some((p, ref mut least)) if p == period => *least = least.min(behind),
            current => {
                // A new period: the one before it is kept only if it is the last one.
                self.behind_s = [
                    current.filter(|(p, _)| *p == period - 1),
                    Some((period, behind)),
                ];
            }
        }
    }

    /// How far to take the series' clock as behind the caller's, s.
    fn behind(&self) -> f64 {
        self.behind_s
            .iter()
            .flatten()
            .map(|&(_, b)| b)
            .reduce(f64::min)
            .unwrap_or(0.0)
            .clamp(0.0, MAX_BEHIND_S)
    }

    fn index_of(&mut self, t: f64) -> i64 {
        let t0 = *self.t0.get_or_insert(t);
        ((t - t0) / self.p.window_s).floor() as i64
    }

    /// The window for index `idx`, closing those it leaves behind.
    fn window(&mut self, idx: i64) -> &mut WindowBuf {
        while let Some(first) = self.open.front() {
            if idx >= first.index + 2 {
                self.close_oldest();
            } else {
                break;
            }
        }
        // A late sample falls in the oldest window still open: a closed one is not made
        // again (it would be judged twice, in parts).
        let idx = match (self.open.front(), self.closed_through) {
            (Some(f), _) => idx.max(f.index),
            (None, Some(c)) => idx.max(c + 1),
            (None, None) => idx,
        };
        let pos = self.open.iter().position(|w| w.index == idx);
        match pos {
            Some(p) => &mut self.open[p],
            None => {
                // Windows in between (no packet arrived in them) exist too.
                let from = self.open.back().map_or(idx, |b| b.index + 1);
                for i in from..=idx {
                    let mut w = self.spare.pop().unwrap_or_default();
                    w.index = i;
                    self.open.push_back(w);
                }
                self.open.back_mut().expect("pushed")
            }
        }
    }

    /// Adds a received packet (in arrival order).
    pub fn push(&mut self, mut s: Sample) {
        if !s.send.is_finite() || !s.delay_ms.is_finite() {
            return;
        }
        self.latest_send = Some(self.latest_send.map_or(s.send, |t| t.max(s.send)));
        if let Some(held) = &mut self.pending {
            held.push(s);
            if held.len() >= ADAPT_SAMPLES {
                self.settle();
            }
            return;
        }
        // Self-queueing: a packet sent right after the previous one waited behind it.
        if let Some((t, d)) = self.last
            && (0.0..self.p.self_queueing_s).contains(&(s.send - t))
        {
            s.delay_ms = d;
        }
        self.last = Some((s.send, s.delay_ms));
        self.report.samples += 1;
        let idx = self.index_of(s.send);
        let w = self.window(idx);
        if let Some(q) = s.seq
            && !w.seqs.insert(q)
        {
            return; // a duplicate
        }
        w.offered += 1;
        let stride = w.stride.max(1);
        if !w.offered.is_multiple_of(stride) {
            return;
        }
        if w.samples.len() >= MAX_WINDOW_SAMPLES {
            let mut i = 0;
            w.samples.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            w.stride = stride * 2;
        }
        w.samples.push(s);
    }

    /// Says that the packet numbered `q`, sent at `send` (s), arrived but is no sample: its
    /// report was lost on the way to the detector (the sink dropped it, counted, when it
    /// fell behind). Its number is no gap, so it is not counted as lost; it adds no delay and
    /// no place in the arrival order (no reordering).
    pub fn push_unseen(&mut self, q: u64, send: f64) {
        if !send.is_finite() {
            return;
        }
        self.latest_send = Some(self.latest_send.map_or(send, |t| t.max(send)));
        if let Some(held) = &mut self.pending {
            // Held as a sample whose delay is not a number, told apart when settled.
            held.push(Sample {
                seq: Some(q),
                send,
                delay_ms: f64::NAN,
            });
            if held.len() >= ADAPT_SAMPLES {
                self.settle();
            }
            return;
        }
        let idx = self.index_of(send);
        self.window(idx).seqs.insert(q);
    }

    /// Adds a packet that arrived at `now_s` (the clock [`Detector::tick`] is given), noting
    /// its arrival ([`Detector::note_arrival`]); false, and nothing added, when its send
    /// time is more than [`MAX_AHEAD_S`] ahead of `now_s`.
    pub fn push_at(&mut self, now_s: f64, s: Sample) -> bool {
        if !ahead_in_reach(now_s, s.send) {
            return false;
        }
        self.note_arrival(now_s, s.send);
        self.push(s);
        true
    }

    /// [`Detector::push_loss`] for a stretch ending at `end` that became known at `now_s`,
    /// noting its arrival; false, and nothing added, when `end` is more than
    /// [`MAX_AHEAD_S`] ahead of `now_s`.
    pub fn push_loss_at(&mut self, now_s: f64, end: f64, t: f64, lost: i64, sent: u64) -> bool {
        if !ahead_in_reach(now_s, end) {
            return false;
        }
        self.note_arrival(now_s, end);
        self.push_loss(t, lost, sent);
        true
    }

    /// Adds the counts of a stretch from `t` to `end` (known at `now_s`) whose far end's
    /// clock runs `moved` s ahead of the near end's (behind: negative): `sent` counted at
    /// the near end around `t`, and `delivered` at the far end, whose counts stand for
    /// packets sent `moved` s before `t`. What one end counted of packets whose counts at
    /// the other end came before the series' first stretch (never given) is left out.
    /// False, and nothing added, when a time is more than [`MAX_AHEAD_S`] ahead of `now_s`.
    pub fn push_shifted_at(
        &mut self,
        now_s: f64,
        (t, end): (f64, f64),
        sent: u64,
        delivered: u64,
        moved: f64,
    ) -> bool {
        if !ahead_in_reach(now_s, end) || !ahead_in_reach(now_s, end - moved) {
            return false;
        }
        if !t.is_finite() || !moved.is_finite() {
            return true;
        }
        self.note_arrival(now_s, end);
        self.settle();
        let t0 = *self.t0.get_or_insert(t);
        // Sent packets the far end (behind) counted before the series began.
        if t >= t0 - moved.min(0.0) {
            self.push_loss(t, sent.min(i64::MAX as u64) as i64, sent);
        }
        // Delivered packets the near end (behind the far end) counted sent before it.
        let at = t - moved;
        if at >= t0 {
            let idx = self.index_of(at);
            let w = self.window(idx);
            w.extra_lost = w
                .extra_lost
                .saturating_sub(delivered.min(i64::MAX as u64) as i64);
        }
        true
    }

    /// [`Detector::push_unsure`] for a stretch ending at `end` that became known at
    /// `now_s`; false, and nothing added, when `end` is more than [`MAX_AHEAD_S`] ahead of
    /// `now_s`.
    pub fn push_unsure_at(&mut self, now_s: f64, end: f64, t: f64) -> bool {
        if !ahead_in_reach(now_s, end) {
            return false;
        }
        self.push_unsure(t);
        true
    }

    /// Says that the packet numbered `q` arrived but is left out (its times cannot be
    /// taken: a clock stepped): it and the numbers before it are not counted as lost, as
    /// their gap would be. A number more than 65,536 above every number seen or excused
    /// (not of this series) changes nothing.
    pub fn excuse_seq(&mut self, q: u64) {
        let reach = self
            .highest_seq()
            .max(self.excused_through)
            .map(|h| h.saturating_add(MAX_LOST_LISTED));
        if reach.is_some_and(|r| q <= r) {
            self.excused_through = self.excused_through.max(Some(q));
        }
    }

    /// Adds every sample of a series.
    pub fn push_all(&mut self, samples: &[Sample]) {
        for s in samples {
            self.push(*s);
        }
    }

    /// Adds losses known without sequence numbers: `lost` of `sent` packets around time
    /// `t` (e.g. the difference of a flow's counters at its first and last switch; it may
    /// be negative for a stretch when packets in flight are counted at the second switch
    /// later, and evens out within a window).
    pub fn push_loss(&mut self, t: f64, lost: i64, sent: u64) {
        if !t.is_finite() {
            return;
        }
        self.settle();
        let idx = self.index_of(t);
        let w = self.window(idx);
        w.extra_lost += lost;
        w.extra_sent += sent;
        w.counted_inputs = w.counted_inputs.saturating_add(1);
    }

    /// Says that a stretch around time `t` (an epoch) is left out of the losses known
    /// without sequence numbers (its counts are unsure at one end). Packets in flight into
    /// or out of a stretch left out are counted at one end only, and make a loss (or gain)
    /// that never was: a window with more than [`MAX_UNSURE_SHARE`] of its inputs left out
    /// is not judged for loss from counters.
    pub fn push_unsure(&mut self, t: f64) {
        if !t.is_finite() {
            return;
        }
        self.settle();
        let idx = self.index_of(t);
        let w = self.window(idx);
        w.unsure_inputs = w.unsure_inputs.saturating_add(1);
    }

    /// Closes the windows that time `now` (the caller's clock, taken back by how far the
    /// series' runs behind it) has left behind by a window, and the events no window still
    /// to close can join.
    pub fn tick(&mut self, now: f64) {
        if self
            .held_since()
            .is_some_and(|t| now - self.behind() >= t + ADAPT_WAIT_S)
        {
            self.settle();
        }
        let Some(t0) = self.t0 else { return };
        let now = now - self.behind();
        let idx = ((now - t0) / self.p.window_s).floor() as i64;
        while self.open.front().is_some_and(|f| idx >= f.index + 2) {
            self.close_oldest();
        }
        // Every window that could join an event has closed by now, had it samples: one
        // that did not come is a series gone quiet (a flow that ended, a probe stream
        // that stopped), and the event ends here as the next window would have ended it.
        for a in &mut self.aggregators {
            if a.building_until()
                .is_some_and(|end| now >= self.p.event_final_at(end))
                && let Some(e) = a.close(&self.p)
            {
                self.report.events.push(e);
            }
        }
    }

    /// The earliest time (the caller's clock, as [`Detector::tick`] takes it) at which a
    /// tick may close a window or an event, or minus infinity while events wait to be
    /// taken: until then a tick changes nothing, so that a caller with many detectors ticks
    /// only those due. `None` when no window is open and no event being built.
    pub fn next_close(&self) -> Option<f64> {
        if !self.report.events.is_empty() {
            return Some(f64::NEG_INFINITY);
        }
        if let Some(t) = self.held_since() {
            return Some(t + ADAPT_WAIT_S + self.behind());
        }
        let window = self
            .t0
            .zip(self.open.front())
            .map(|(t0, front)| t0 + (front.index + 2) as f64 * self.p.window_s);
        let event = self
            .aggregators
            .iter()
            .filter_map(Aggregator::building_until)
            .map(|end| self.p.event_final_at(end))
            .min_by(f64::total_cmp);
        let behind = self.behind();
        match (window, event) {
            (Some(w), Some(e)) => Some(w.min(e) + behind),
            (w, e) => w.or(e).map(|t| t + behind),
        }
    }

    /// The latest send time of the samples pushed so far, s.
    pub fn latest_send(&self) -> Option<f64> {
        self.latest_send
    }

    /// The highest sequence number seen so far, if any.
    pub fn highest_seq(&self) -> Option<u64> {
        let held = self.pending.iter().flatten().filter_map(|s| s.seq).max();
        let open = self.open.iter().filter_map(|w| w.seqs.max).max().max(held);
        let closed = self.next_seq.map(|n| n.saturating_sub(1));
        open.max(closed)
    }

    /// Events found so far (taken).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.report.events)
    }

    fn close_oldest(&mut self) {
        let Some(mut w) = self.open.pop_front() else {
            return;
        };
        self.closed_through = Some(w.index);
        // Counted loss evens out across the boundary with the next window: packets sent
        // at the end of this one and counted delivered in the next (their latency, or the
        // far end's clock ahead) are lost here and more than delivered there, and the
        // reverse for a clock behind. Left apart, the next window's negative part would be
        // dropped and this one's would be a loss that never was (a flow of a few packets a
        // window shows it as a loss of tens of percent).
        // (A window closes once counts of the one after the next have come, so the next
        // holds its part by then.)
        if let Some(next) = self.open.front_mut()
            && (w.extra_lost > 0) != (next.extra_lost > 0)
        {
            let even = w.extra_lost.abs().min(next.extra_lost.abs()) * w.extra_lost.signum();
            w.extra_lost -= even;
            next.extra_lost += even;
        }
        let inputs = u64::from(w.counted_inputs) + u64::from(w.unsure_inputs);
        if u64::from(w.unsure_inputs) as f64 > MAX_UNSURE_SHARE * inputs as f64 {
            // Too much of it left out to tell loss from packets in flight at its holes.
            w.extra_lost = 0;
            w.extra_sent = 0;
        }
        // Loss from counters: how far the counts stand apart at the window's end beyond the
        // furthest they stood apart before (lost packets stay lost: what the counts lose
        // and gain back is timing). Counts that show more delivered than sent, or fewer lost
        // than before (the far end's clock behind: its counts of a packet come in an earlier
        // epoch than the near end's; a packet counted sent in an epoch the series had not
        // yet taken), and their way back, are no loss: where a flow ends just after a
        // window began, its last packets were counted delivered in the window before, a loss
        // of all of them that never was.
        self.counted_level = self.counted_level.saturating_add(w.extra_lost);
        let counted = self.counted_level.saturating_sub(self.counted_high).max(0);
        self.counted_high = self.counted_high.max(self.counted_level);
        // Loss: sequence numbers up to this window's highest that never arrived (in this
        // window or the next, which catches packets that arrived late).
        self.lost_list.clear();
        let counted_lost = (counted as u64).min(w.extra_sent);
        let mut extra_lost = counted_lost;
        if let Some(max) = w.seqs.max {
            let lo = *self
                .next_seq
                .get_or_insert_with(|| w.seqs.min().unwrap_or(max));
            let lo = lo.max(self.excused_through.map_or(0, |e| e.saturating_add(1)));
            if max >= lo {
                let next = self.open.front().map(|n| &n.seqs);
                let span = (max - lo).saturating_add(1);
                let received = |q: u64| w.seqs.contains(q) || next.is_some_and(|n| n.contains(q));
                if span <= MAX_LOST_LISTED * 4 {
                    self.lost_list.extend(
                        (lo..=max)
                            .filter(|&q| !received(q))
                            .take(MAX_LOST_LISTED as usize),
                    );
                    let listed = self.lost_list.len() as u64;
                    let all = if listed < MAX_LOST_LISTED {
                        listed
                    } else {
                        (lo..=max).filter(|&q| !received(q)).count() as u64
                    };
                    extra_lost += all - listed;
                } else {
                    // A jump too large to list (a restarted sender): counted, not listed.
                    let got = w.seqs.iter().filter(|&&q| q >= lo).count() as u64
                        + next.map_or(0, |n| {
                            n.iter().filter(|&&q| q >= lo && q <= max).count() as u64
                        });
                    extra_lost += span.saturating_sub(got);
                }
                self.next_seq = Some(max.saturating_add(1));
            }
        }
        let t0 = self.t0.unwrap_or(0.0);
        let start = t0 + w.index as f64 * self.p.window_s;
        let stats = analyse(
            start,
            start + self.p.window_s,
            &w.samples,
            (&self.lost_list, self.last_received),
            (extra_lost, w.extra_sent - counted_lost),
            self.aggregators
                .iter()
                .find(|a| a.kind() == Kind::Delay)
                .and_then(Aggregator::baseline_ms),
            &self.p,
            &mut self.scratch,
        );
        let mut stats = stats;
        stats.counted_lost = counted_lost;
        if let Some(top) = w
            .samples
            .iter()
            .filter_map(|x| x.seq.map(|q| (q, x.send)))
            .max_by_key(|x| x.0)
            .filter(|top| self.last_received.is_none_or(|l| top.0 > l.0))
        {
            self.last_received = Some(top);
        }
        self.report.lost += stats.lost;
        self.report.windows += 1;
        for a in &mut self.aggregators {
            if let Some(e) = a.push(&stats, &self.p) {
                self.report.events.push(e);
            }
        }
        self.last_window = Some(stats);
        w.samples.clear();
        w.seqs.clear();
        w.extra_lost = 0;
        w.extra_sent = 0;
        w.counted_inputs = 0;
        w.unsure_inputs = 0;
        w.stride = 0;
        w.offered = 0;
        if self.spare.len() < 2 {
            self.spare.push(w);
        }
    }

    /// Closes everything and returns the whole report.
    pub fn finish(mut self) -> Report {
        self.settle();
        while !self.open.is_empty() {
            self.close_oldest();
        }
        for a in &mut self.aggregators {
            if let Some(e) = a.close(&self.p) {
                self.report.events.push(e);
            }
        }
        self.report
            .events
            .sort_by(|a, b| a.start.total_cmp(&b.start).then(a.kind.cmp(&b.kind)));
        self.report
    }
}

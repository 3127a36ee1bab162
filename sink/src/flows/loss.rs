//! A flow's loss on each link of its decoded path: what its counters at the link's ends
//! differ by, kept per link with marks of when it changed (so that an event can be put
//! where the flow lost packets at its time), and the loss series fed to its detector from
//! the counts at its first and last switch, epoch by epoch.

use telemetry::flowradar::FlowKey;
use telemetry::pint::path_decoder::Space;

use super::{FlowState, FlowTable, ShardContext, decoded_path, note_ahead, path_hash};
use crate::clock_leads::lead_of;
use crate::detect::online::Detector;
use crate::events::EventPlace;

/// The loss one flow contributes to one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LinkLoss {
    link: (u32, u32),
    lost: i64,
    /// Counted before the link, never after it.
    vanished: bool,
    /// What the counts before the link less those after it held that is not loss: what
    /// an end of the link may have missed in epochs whose counts there were unsure.
    offset: i64,
    /// `lost` before the last update changed it.
    prev_lost: i64,
    /// Start of the epoch of the last update, Unix ms.
    at_ms: u64,
    /// Whether the last update was unsure at an end of the link (see
    /// [`FlowTable::update_loss`]).
    after_unsure: bool,
    /// Where `lost` stood as recent periods began: what the flow lost on the link during
    /// an event.
    marks: LossMarks,
}

/// Periods a link's loss is remembered for ([`LossMarks`]): 16 detection windows (80 s by
/// default), as long as an online event lasts (60 s at most) and is reported after its
/// end (15 s); an older event's loss is put where the flow lost the most so far.
pub(super) const LOSS_MARKS: usize = 16;

/// A link's loss over time, coarsely: its value when each of the last periods in which it
/// changed began (a period is a detection window, `Params::window_s`, in Unix time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct LossMarks {
    /// (period, the loss before its first change in that period), oldest first.
    at: [(u32, i32); LOSS_MARKS],
    len: u8,
    /// Whether older marks were dropped.
    evicted: bool,
}

impl LossMarks {
    /// Notes that the loss changes from `was` to `now` in `period`. A change of an earlier
    /// period than the last noted (a late flowset's) is read into the later marks too.
    pub(super) fn note(&mut self, period: u32, was: i64, now: i64) {
        let n = usize::from(self.len);
        match n.checked_sub(1).map(|last| self.at[last].0) {
            Some(last) if last == period => {}
            Some(last) if last > period => {
                let start = self.at_start_of(period, was);
                for m in &mut self.at[..n] {
                    if m.0 > period {
                        m.1 = narrow(i64::from(m.1) + now - was);
                    }
                }
                if let Some(v) = start
                    && !self.at[..n].iter().any(|m| m.0 == period)
                {
                    self.insert(period, v);
                }
            }
            _ => self.insert(period, was),
        }
    }

    /// Puts mark (`period`, `value`) in its place, the oldest dropped when all are taken
    /// (and this one, when it is older than all of them).
    fn insert(&mut self, period: u32, value: i64) {
        if usize::from(self.len) == LOSS_MARKS {
            self.evicted = true;
            if period < self.at[0].0 {
                return;
            }
            self.at.copy_within(1.., 0);
            self.len -= 1;
        }
        let n = usize::from(self.len);
        let at = self.at[..n].partition_point(|m| m.0 < period);
        self.at.copy_within(at..n, at + 1);
        self.at[at] = (period, narrow(value));
        self.len += 1;
    }

    /// The loss as `period` began, the loss being `now`; None when that is before the
    /// marks kept.
    pub(super) fn at_start_of(&self, period: u32, now: i64) -> Option<i64> {
        let marks = &self.at[..usize::from(self.len)];
        match marks.iter().position(|m| m.0 >= period) {
            Some(0) if self.evicted && marks[0].0 > period => None,
            Some(i) => Some(i64::from(marks[i].1)),
            None => Some(now),
        }
    }
}

/// How near a switch's hello its first count of a flow must begin for the flow's earlier
/// packets to be taken as not asked of it (see `joined_late` in
/// [`FlowTable::update_loss`]), ms, or two epochs if longer: its first flowset is of the
/// epoch it connected in, or the next.
const JOINED_SLACK_MS: u64 = 1000;

/// Unsure switches a flow remembers before its path is known; beyond, every link counts
/// from the path's decoding.
const UNSETTLED_KEPT: usize = 32;

/// [`FlowState::loss_unsettled`] for "every switch".
pub(super) const ALL_UNSETTLED: u32 = u32::MAX;

/// Moves a count of flows with a property when one flow gains or loses it.
fn adjust(v: &mut u64, was: bool, is: bool) {
    match (was, is) {
        (false, true) => *v += 1,
        (true, false) => *v = v.saturating_sub(1),
        _ => {}
    }
}

/// Epochs whose loss input a flow remembers (a flowset later than this many epochs adds
/// its counts as new).
pub(super) const LOSS_EPOCHS_KEPT: usize = 4;

/// The place of epoch `epoch` in a flow's loss input, the oldest epoch's if it has none.
/// None for an epoch older than every one remembered: a part of an epoch long gone (a
/// flowset that came many epochs late), whose other part may have gone into the series
/// already or been left out; given now it would stand alone in a later window, as a loss
/// (or a gain) that never was.
fn loss_slot(fed: &mut [(u64, u64, u64); LOSS_EPOCHS_KEPT], epoch: u64) -> Option<usize> {
    if let Some(i) = fed.iter().position(|f| f.0 == epoch) {
        return Some(i);
    }
    // The oldest epoch's place (an unused one, u64::MAX, first).
    let oldest = (0..LOSS_EPOCHS_KEPT)
        .min_by_key(|&i| fed[i].0.wrapping_add(1))
        .expect("slots");
    if fed[oldest].0 != u64::MAX && fed[oldest].0 > epoch {
        return None;
    }
    fed[oldest] = (epoch, 0, 0);
    Some(oldest)
}

/// What epoch `epoch`'s counts at a flow's first and last switch (None: that switch's
/// counts have moved to a later epoch, or have not come) add to its loss series: (lost,
/// sent) not given before, as `fed` remembers; None when nothing is new. An epoch whose
/// counts come in parts (a late flowset) adds each part once.
pub(super) fn loss_input(
    fed: &mut [(u64, u64, u64); LOSS_EPOCHS_KEPT],
    epoch: u64,
    first: Option<u64>,
    last: Option<u64>,
) -> Option<(i64, u64)> {
    let slot = loss_slot(fed, epoch)?;
    let (_, sent_before, delivered_before) = fed[slot];
    if sent_before == u64::MAX {
        // An epoch whose counts were unsure at either end.
        return None;
    }
    // A switch whose counts moved on keeps what it gave for this epoch.
    let sent = first.unwrap_or(sent_before).max(sent_before);
    let delivered = last.unwrap_or(delivered_before).max(delivered_before);
    fed[slot] = (epoch, sent, delivered);
    let (new_sent, new_delivered) = (sent - sent_before, delivered - delivered_before);
    if new_sent == 0 && new_delivered == 0 {
        return None;
    }
    Some((new_sent as i64 - new_delivered as i64, new_sent))
}

impl FlowState {
    /// The packets the flow lost on `link` as the link's totals count them, once its path
    /// is decoded and counted on both sides.
    pub fn loss_on(&self, link: (u32, u32)) -> Option<i64> {
        self.loss.iter().find(|l| l.link == link).map(|l| l.lost)
    }
}

/// A loss in a mark (a flow's loss on one link beyond 2^31 packets reads as that).
fn narrow(v: i64) -> i32 {
    v.clamp(i32::MIN.into(), i32::MAX.into()) as i32
}

/// The period of a link's loss marks that time `t_s` (Unix s) falls in.
fn loss_period(t_s: f64, window_s: f64) -> u32 {
    (t_s / window_s).floor().clamp(0.0, f64::from(u32::MAX - 1)) as u32
}

/// Where event `e` of `flow` happens: the flow's decoded path, and the link of it where its
/// counters lost the most packets during the event (`window_s`: the loss marks' period).
pub(super) fn event_place(
    flow: &FlowState,
    space: Space<'_>,
    e: &crate::detect::Event,
    window_s: f64,
) -> EventPlace {
    EventPlace {
        path: decoded_path(flow, space),
        lossy_link: lossy_link(flow, (e.start, e.end), window_s),
    }
}

/// The link of `flow`'s path that lost the most of its packets from `start` to `end` (s,
/// to the loss marks' periods); the one that lost the most so far where no link lost any
/// then (the loss may be off the switches: a host's link) or the marks do not reach back
/// that far.
fn lossy_link(flow: &FlowState, (start, end): (f64, f64), window_s: f64) -> Option<[u32; 2]> {
    let most_so_far = || {
        flow.loss
            .iter()
            .filter(|l| l.lost > 0)
            .max_by_key(|l| l.lost)
            .map(|l| [l.link.0, l.link.1])
    };
    // From the period the event starts in to the first that begins at or after its end.
    let (from, to) = (
        loss_period(start, window_s),
        loss_period((end / window_s).ceil() * window_s, window_s),
    );
    let mut best: Option<([u32; 2], i64)> = None;
    for l in &flow.loss {
        let (Some(a), Some(b)) = (
            l.marks.at_start_of(from, l.lost),
            l.marks.at_start_of(to, l.lost),
        ) else {
            return most_so_far();
        };
        let lost = b - a;
        if lost > 0 && best.is_none_or(|(_, most)| lost > most) {
            best = Some(([l.link.0, l.link.1], lost));
        }
    }
    best.map(|(l, _)| l).or_else(most_so_far)
}

/// [`event_place`] among the sink's switches.
pub(super) fn place_of(
    flow: &FlowState,
    cx: &ShardContext,
    e: &crate::detect::Event,
) -> EventPlace {
    event_place(flow, cx.switches().space(), e, cx.detection.window_s)
}

impl FlowTable {
    /// Feeds the flow's loss in this epoch (its count at its first switch less its count at
    /// its last, on its decoded path) to its loss detector.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn detect_loss(
        &mut self,
        cx: &ShardContext,
        key: FlowKey,
        c: &crate::epochs::EpochCounts,
        now_s: f64,
    ) {
        let (epoch, epoch_ms) = (c.epoch, c.epoch_ms);
        let (unsure, missing) = (&c.unsure[..], &c.missing[..]);
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let switches = cx.switches();
        let space = switches.space();
        let Some(path) = decoded_path(flow, space) else {
            return;
        };
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return;
        };
        let in_epoch = |s: u32| {
            flow.counts
                .iter()
                .find(|c| c.switch == s && c.last_epoch.0 == epoch)
                .map(|c| c.last_epoch.1)
        };
        let left_out =
            |s: u32| unsure.binary_search(&s).is_ok() || missing.binary_search(&s).is_ok();
        if left_out(first) || left_out(last) {
            // Either end may have missed some of the epoch's packets, or counts them only
            // later: none of its counts (now or late) is the flow's loss.
            if let Some(slot) = loss_slot(&mut flow.loss_fed, epoch) {
                flow.loss_fed[slot] = (epoch, u64::MAX, u64::MAX);
            }
            // Packets in flight into or out of it are counted at one end only: the windows
            // it falls in are judged for loss only while few of their epochs are left out.
            if let Some(det) = flow.loss_detector.as_mut() {
                let end = (epoch_ms.0 + epoch_ms.1) as f64 / 1e3;
                if !det.push_unsure_at(now_s, end, epoch_ms.0 as f64 / 1e3) {
                    note_ahead(&mut self.stats.samples_ahead);
                }
                flow.detect_due_s = FlowState::detect_due(
                    &flow.latency_detector,
                    &flow.loss_detector,
                    &flow.probe_detector,
                );
            }
            return;
        }
        let (sent, delivered) = (in_epoch(first), in_epoch(last));
        let Some((lost, sent)) = loss_input(&mut flow.loss_fed, epoch, sent, delivered) else {
            return;
        };
        let det = flow
            .loss_detector
            .get_or_insert_with(|| Box::new(Detector::new(cx.detection)));
        let end = (epoch_ms.0 + epoch_ms.1) as f64 / 1e3;
        let start = epoch_ms.0 as f64 / 1e3;
        // The last switch's clock ahead of the first's by `shift` epochs: it counts a
        // packet that many epochs after the first did, and its counts of this epoch stand
        // for packets sent that much earlier (behind: later).
        let lead = lead_of(&c.leads, last) - lead_of(&c.leads, first);
        let shift = (lead as f64 / epoch_ms.1.max(1) as f64).round();
        let taken = if shift == 0.0 {
            det.push_loss_at(now_s, end, start, lost, sent)
        } else {
            let delivered = (sent as i64).saturating_sub(lost).max(0) as u64;
            let moved = shift * epoch_ms.1 as f64 / 1e3;
            det.push_shifted_at(now_s, (start, end), sent, delivered, moved)
        };
        if !taken {
            note_ahead(&mut self.stats.samples_ahead);
        }
        let events = det.take_events();
        cx.events.record(key, "counters", events, |e| {
            event_place(flow, space, e, cx.detection.window_s)
        });
        flow.detect_due_s = FlowState::detect_due(
            &flow.latency_detector,
            &flow.loss_detector,
            &flow.probe_detector,
        );
    }

    /// Recomputes a flow's loss on each link of its decoded path and adds the change to the
    /// links' totals. A link with an end in `unsure` keeps the loss it had: what its counts
    /// now differ by beyond that is taken as what that end missed, not as loss.
    ///
    /// `epoch_ms` is the start of the epoch whose counts came (Unix ms), None where a newly
    /// decoded path, not counts, calls for the update; `at_s` is the time the loss marks
    /// take.
    pub(super) fn update_loss(
        &mut self,
        cx: &ShardContext,
        key: FlowKey,
        unsure: &[u32],
        at_s: f64,
        epoch_ms: Option<u64>,
    ) {
        let unsure_epochs = &self.unsure_epochs;
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let is_unsure = |s: u32| unsure.binary_search(&s).is_ok();
        // Without an epoch: just before the start of the epoch after the latest counted, so
        // that an unsure epoch after the latest counted one is after it.
        let latest = flow.counts.iter().map(|c| c.last_ms).max().unwrap_or(0);
        let at_ms = epoch_ms.unwrap_or(latest.saturating_sub(1));
        // Whether switch `s` had an unsure epoch (start, length) starting after `after` that
        // `also` accepts.
        let unsure_in = |s: u32, after: u64, also: &dyn Fn(u64, u64) -> bool| {
            unsure_epochs.get(&s).is_some_and(|e| {
                e.iter()
                    .any(|&(start, len)| start > after && also(start, len))
            })
        };
        let unsure_within =
            |s: u32, from: u64, to: u64| unsure_in(s, from, &|start, _| start <= to);
        let switches = cx.switches();
        let space = switches.space();
        let Some(path) = decoded_path(flow, space) else {
            let u = &mut flow.loss_unsettled;
            if u.first() != Some(&ALL_UNSETTLED) {
                u.extend_from_slice(unsure);
                u.sort_unstable();
                u.dedup();
                if u.len() > UNSETTLED_KEPT {
                    *u = vec![ALL_UNSETTLED];
                }
            }
            return;
        };
        let unsettled = |s: u32| {
            let u = &flow.loss_unsettled;
            u.first() == Some(&ALL_UNSETTLED) || u.binary_search(&s).is_ok()
        };
        let counted = |s: u32| flow.counts.iter().find(|c| c.switch == s);
        let count = |s: u32| counted(s).map(|c| c.packets);
        // What `b` counted of the flow in epochs before `a` first did, when `a` connected
        // to this sink only after the first of them began (after the sink's restart, `b`
        // came back first): `a`'s flowsets of those epochs never come, so that is no gain
        // on the link. None otherwise: `b` counting earlier because the two clocks differ
        // evens out as the counts go on.
        let missed_upstream = |a: u32, b: u32| -> Option<i64> {
            let (up, down) = (counted(a)?, counted(b)?);
            if down.first_ms >= up.first_ms {
                return None;
            }
            let since = cx
                .registry
                .switch(a)?
                .counters
                .connected_ms
                .load(std::sync::atomic::Ordering::Relaxed);
            if since <= down.first_ms {
                return None;
            }
            // `a`'s first epoch is the one just counted, and `b`'s last: what `b` counted
            // before it is its total less that epoch's (else all it counted beyond `a`).
            let before = if up.epochs == 1 && down.last_epoch.0 == up.last_epoch.0 {
                down.packets - down.last_epoch.1
            } else {
                down.packets.saturating_sub(up.packets)
            };
            Some(before as i64)
        };
        // Whether switch `s` said hello to this sink only after the end of the epoch in
        // which `other` first counted the flow, and has counted none of it since or only
        // from the epochs around its hello on: its flowsets of the epochs before never came (the sink restarted and `s` came
        // back later, `s` came later than the others, or it reconnected), so what it
        // counted of the flow falls short of what `other` counted by what it was never asked
        // for. A switch that counted the flow before its hello, or only well after it,
        // lost what it missed.
        let joined_late = |s: u32, other: u32| -> bool {
            let Some(other) = counted(other) else {
                return false;
            };
            let Some((since, epoch_ms)) = cx.registry.switch(s).map(|e| {
                let since = e
                    .counters
                    .connected_ms
                    .load(std::sync::atomic::Ordering::Relaxed);
                let epoch_ns = e.info.lock().map_or(0, |i| i.epoch_ns);
                (since, epoch_ns / 1_000_000)
            }) else {
                return false;
            };
            let slack = JOINED_SLACK_MS.max(2 * epoch_ms);
            // Its flowset of an epoch that ended after its hello came whole.
            since > other.first_ms.saturating_add(epoch_ms)
                && counted(s).is_none_or(|c| {
                    c.first_ms.saturating_add(slack) >= since
                        && c.first_ms < since.saturating_add(slack)
                })
        };
        // Another path than the one before: the route changed. The counts are totals over
        // the flow's life, the old route's packets in them: a link new to the flow counts
        // its loss from when it has it, until every link of the new path has.
        let path_hash = path_hash(&path);
        let rerouted = (flow.loss_path != 0 && flow.loss_path != path_hash) || flow.loss_rerouting;
        let mut now = Vec::with_capacity(path.len().saturating_sub(1));
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            // Counted before the link (or, in an epoch unsure there, possibly missed); after
            // it, counted or known to be zero (the switch exports, so a flow it never counted
            // had no packet there).
            let up = match count(a) {
                Some(u) => u,
                None if is_unsure(a) || is_unsure(b) => 0,
                None => continue,
            };
            let down = match count(b) {
                Some(d) => d,
                None if cx.registry.switch(b).is_some() => 0,
                None => continue,
            };
            let raw = up as i64 - down as i64;
            let old = flow.loss.iter().find(|o| o.link == (a, b));
            // An end unsure in this epoch, or in one since the link's last update that did
            // not count the flow (its flowset there may have missed the flow's packets).
            let unsure_now = is_unsure(a)
                || is_unsure(b)
                || (old.is_none() && (joined_late(b, a) || joined_late(a, b)))
                || (epoch_ms.is_some()
                    && old.is_some_and(|o| {
                        unsure_within(a, o.at_ms, at_ms) || unsure_within(b, o.at_ms, at_ms)
                    }));
            // A late epoch's counts do not move the link's time back.
            let link_ms = old.map_or(at_ms, |o| o.at_ms.max(at_ms));
            now.push(if unsure_now {
                // The loss before stays; what the counts differ by beyond it is what the
                // unsure end missed. Packets counted at `a` in the epoch just before one
                // whose counts at `b` are unsure, and which missed the flow there, may have
                // been in flight into it and would stay as loss for good: what the last
                // sure update added is taken back (loss that the update before had shown
                // too stays).
                let b_counted_now = counted(b).is_some_and(|c| c.last_ms > at_ms);
                let missed_next = |o: &LinkLoss| {
                    unsure_in(b, o.at_ms, &|start, len| {
                        start <= o.at_ms.saturating_add(len) && (start < at_ms || !b_counted_now)
                    })
                };
                // (`old` is None where a late hello made the update unsure.)
                let (lost, vanished) = old.map_or((0, false), |o| {
                    let lost = if !o.after_unsure && missed_next(o) {
                        o.lost.min(o.prev_lost)
                    } else {
                        o.lost
                    };
                    (lost, o.vanished)
                });
                LinkLoss {
                    link: (a, b),
                    lost,
                    vanished,
                    offset: raw - lost,
                    prev_lost: lost,
                    at_ms: link_ms,
                    after_unsure: true,
                    marks: LossMarks::default(),
                }
            } else {
                let offset = match old {
                    // Right after an unsure update, a packet its end missed and the other
                    // end counts now shows as counts coming closer than no loss: none.
                    Some(o) if o.after_unsure && raw - o.offset < 0 => raw,
                    // What an unsure epoch set aside held the packets in flight across it
                    // too: counted at `b` later, they take it back, never below no loss.
                    Some(o) if o.offset > 0 && raw < o.offset => raw.max(0),
                    Some(o) => o.offset,
                    None if rerouted || unsettled(a) || unsettled(b) => raw,
                    None => missed_upstream(a, b).map_or(0, |m| -m),
                };
                let lost = raw - offset;
                // An update for a newly decoded path keeps the link's bookkeeping.
                let (prev_lost, after_unsure) = match (old, epoch_ms) {
                    (Some(o), None) => (o.prev_lost, o.after_unsure),
                    (Some(o), Some(_)) => (o.lost, false),
                    (None, _) => (lost, false),
                };
                LinkLoss {
                    link: (a, b),
                    lost,
                    vanished: up > 0 && down == 0,
                    offset,
                    prev_lost,
                    at_ms: link_ms,
                    after_unsure,
                    marks: LossMarks::default(),
                }
            });
        }
        // Where each link's loss stood as this period began, when it changes now.
        let period = loss_period(at_s, cx.detection.window_s);
        for l in &mut now {
            let old = flow.loss.iter().find(|o| o.link == l.link);
            l.marks = old.map_or_else(LossMarks::default, |o| o.marks);
            let was = old.map_or(0, |o| o.lost);
            if l.lost != was {
                l.marks.note(period, was, l.lost);
            }
        }
        flow.loss_unsettled = Vec::new();
        let before = std::mem::take(&mut flow.loss);
        for l in &now {
            let old = before.iter().find(|o| o.link == l.link);
            let e = self.links.entry(l.link).or_default();
            e.flows += u64::from(old.is_none());
            e.lost_packets += l.lost - old.map_or(0, |o| o.lost);
            adjust(
                &mut e.flows_with_loss,
                old.is_some_and(|o| o.lost > 0),
                l.lost > 0,
            );
            adjust(
                &mut e.vanished_flows,
                old.is_some_and(|o| o.vanished),
                l.vanished,
            );
        }
        flow.loss_path = path_hash;
        flow.loss_rerouting = rerouted && now.len() + 1 < path.len();
        flow.loss = now;
    }
}

//! Impairments on a port's transmit side, the way testers use netem: random loss, a delay
//! line (fixed delay plus uniform jitter), and reordering, optionally only during a window of
//! the run. Labs use them to put a known problem on a known link. Generic over the packet
//! type: the switch holds mbufs, tests hold plain values. One [`Impairer`] per worker per
//! port (each worker owns its tx queue), so nothing is shared; decisions come from a
//! per-impairer random stream compared against integer thresholds (no floating point per
//! packet). A port without impairment has no `Impairer` at all.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// What to do to a port's packets, as plain values (times in TSC cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImpairSpec {
    /// Drop a packet when the next random draw is below this (`loss` x 2^64).
    pub loss_threshold: u64,
    /// Hold every packet this long.
    pub delay_cycles: u64,
    /// Plus or minus up to this much, uniformly and independently per packet (at most
    /// `delay_cycles`): as with netem, jitter larger than the gap between two packets
    /// reorders them.
    pub jitter_cycles: u64,
    /// Reorder a packet when the next draw is below this (`reorder` x 2^64).
    pub reorder_threshold: u64,
    /// Without delay, a reordered packet waits for the port's next packet at most this
    /// long (then it is sent anyway).
    pub reorder_hold_cycles: u64,
    /// Packets held at most (the delay line and reordered packets together); more are
    /// dropped and counted as overflow.
    pub limit: usize,
    /// Active from this many cycles after the port's first packet on this worker...
    pub from_cycles: u64,
    /// ...until this many (exclusive; `u64::MAX`: to the end).
    pub until_cycles: u64,
    /// Seed of the random stream.
    pub seed: u64,
}

impl ImpairSpec {
    /// A probability as a threshold on a uniform `u64` draw.
    pub fn threshold(p: f64) -> u64 {
        if p <= 0.0 {
            0
        } else if p >= 1.0 {
            u64::MAX
        } else {
            (p * 18_446_744_073_709_551_616.0) as u64
        }
    }
}

/// What happened to one packet handed to [`Impairer::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Sent now (impairment inactive, or neither delayed nor reordered).
    Sent,
    /// Dropped by the loss draw.
    Lost,
    /// Held in the delay line.
    Delayed,
    /// Reordered: sent ahead of the packets in the delay line, or (without delay) held back
    /// and sent right after the port's next packet.
    Reordered,
    /// Dropped: the impairer already holds `limit` packets.
    Overflow,
}

/// A packet in the delay line, ordered by release time, then arrival.
#[derive(Debug)]
struct Held<M> {
    at: u64,
    seq: u64,
    m: M,
}

impl<M> PartialEq for Held<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<M> Eq for Held<M> {}

impl<M> PartialOrd for Held<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<M> Ord for Held<M> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// One worker's impairment state for one port.
#[derive(Debug)]
pub struct Impairer<M> {
    spec: ImpairSpec,
    rng: u64,
    /// Delayed packets by release time (ties in arrival order).
    line: BinaryHeap<Reverse<Held<M>>>,
    /// Packets admitted to the line so far (the tie-breaker).
    seq: u64,
    /// A packet held back by reordering without delay (since when): sent right after the
    /// port's next packet.
    held: Option<(u64, M)>,
    last_release: u64,
    /// When the port's first packet came (the impairment's window counts from it).
    start: Option<u64>,
}

impl<M> Impairer<M> {
    /// An impairer with room for `spec.limit` held packets (allocated once, here).
    #[cold]
    pub fn new(spec: ImpairSpec) -> Impairer<M> {
        Impairer {
            spec,
            rng: spec.seed ^ 0x9e37_79b9_7f4a_7c15,
            line: BinaryHeap::with_capacity(spec.limit),
            seq: 0,
            held: None,
            last_release: 0,
            start: None,
        }
    }

    /// The spec it applies.
    pub fn spec(&self) -> &ImpairSpec {
        &self.spec
    }

    /// Packets it holds now.
    pub fn holding(&self) -> usize {
        self.line.len() + usize::from(self.held.is_some())
    }

    #[inline(always)]
    fn draw(&mut self) -> u64 {
        // splitmix64: one add and a few multiplies, full period.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Whether the impairment applies at `now` (the first call fixes when the port's
    /// traffic started).
    #[inline(always)]
    pub fn active(&mut self, now: u64) -> bool {
        let since = now.saturating_sub(*self.start.get_or_insert(now));
        since >= self.spec.from_cycles && since < self.spec.until_cycles
    }

    /// Decides one packet's fate at `now`: `send` gets it when it goes out now, `drop` when
    /// it is lost or does not fit; otherwise the impairer keeps it.
    #[inline]
    pub fn admit(
        &mut self,
        now: u64,
        m: M,
        send: &mut impl FnMut(M),
        drop: &mut impl FnMut(M),
    ) -> Fate {
        if !self.active(now) {
            // Outside the window packets still queue behind those the line holds, so the
            // window's end reorders nothing.
            if self.line.is_empty() {
                self.send_now(m, send);
                return Fate::Sent;
            }
            return self.hold(self.last_release.max(now), m, drop);
        }
        let s = self.spec;
        if s.loss_threshold != 0 && self.draw() < s.loss_threshold {
            drop(m);
            return Fate::Lost;
        }
        if s.reorder_threshold != 0 && self.draw() < s.reorder_threshold {
            if s.delay_cycles != 0 {
                send(m);
                return Fate::Reordered;
            }
            if self.held.is_none() {
                self.held = Some((now, m));
                return Fate::Reordered;
            }
        }
        if s.delay_cycles == 0 {
            self.send_now(m, send);
            return Fate::Sent;
        }
        let mut release = now + s.delay_cycles;
        if s.jitter_cycles != 0 {
            let span = 2 * s.jitter_cycles + 1;
            release = release - s.jitter_cycles + self.draw() % span;
        }
        self.hold(release, m, drop)
    }

    /// Sends `m`, then the packet held back for reordering, if any.
    #[inline(always)]
    fn send_now(&mut self, m: M, send: &mut impl FnMut(M)) {
        send(m);
        if let Some((_, h)) = self.held.take() {
            send(h);
        }
    }

    fn hold(&mut self, release: u64, m: M, drop: &mut impl FnMut(M)) -> Fate {
        if self.holding() >= self.spec.limit {
            drop(m);
            return Fate::Overflow;
        }
        self.last_release = self.last_release.max(release);
        self.seq += 1;
        self.line.push(Reverse(Held {
            at: release,
            seq: self.seq,
            m,
        }));
        Fate::Delayed
    }

    /// The next packet due at `now`, if any: a packet held back for reordering that waited
    /// long enough, then the delay line's packets whose time has come, oldest first.
    #[inline]
    pub fn pop_due(&mut self, now: u64) -> Option<M> {
        if let Some((since, _)) = &self.held
            && now.saturating_sub(*since) >= self.spec.reorder_hold_cycles
        {
            return self.held.take().map(|(_, m)| m);
        }
        match self.line.peek() {
            Some(Reverse(h)) if h.at <= now => self.line.pop().map(|Reverse(h)| h.m),
            _ => None,
        }
    }

    /// Hands `send` every packet due at `now` ([`Impairer::pop_due`]). Returns how many.
    pub fn release(&mut self, now: u64, send: &mut impl FnMut(M)) -> usize {
        let mut n = 0;
        while let Some(m) = self.pop_due(now) {
            send(m);
            n += 1;
        }
        n
    }

    /// When the next delayed packet is due, if any is held.
    pub fn next_due(&self) -> Option<u64> {
        let held = self
            .held
            .as_ref()
            .map(|(t, _)| t + self.spec.reorder_hold_cycles);
        let line = self.line.peek().map(|Reverse(h)| h.at);
        match (held, line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Hands `send` everything it holds, in order (the switch is stopping).
    #[cold]
    pub fn drain_all(&mut self, send: &mut impl FnMut(M)) {
        if let Some((_, h)) = self.held.take() {
            send(h);
        }
        self.release(u64::MAX, send);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ImpairSpec {
        ImpairSpec {
            loss_threshold: 0,
            delay_cycles: 0,
            jitter_cycles: 0,
            reorder_threshold: 0,
            reorder_hold_cycles: 1000,
            limit: 1000,
            from_cycles: 0,
            until_cycles: u64::MAX,
            seed: 7,
        }
    }

    /// Runs `n` packets (numbered) through, one per `gap` cycles, releasing as time passes;
    /// returns (sent packets with their send times, lost, overflowed).
    fn run(s: ImpairSpec, n: u64, gap: u64) -> (Vec<(u64, u64)>, u64, u64) {
        let mut imp = Impairer::new(s);
        let mut sent = Vec::new();
        let (mut lost, mut over) = (0, 0);
        for i in 0..n {
            let now = i * gap;
            imp.release(now, &mut |m| sent.push((m, now)));
            let mut out = Vec::new();
            let fate = imp.admit(now, i, &mut |m| out.push(m), &mut |_| {});
            match fate {
                Fate::Lost => lost += 1,
                Fate::Overflow => over += 1,
                _ => {}
            }
            sent.extend(out.into_iter().map(|m| (m, now)));
        }
        let mut now = n * gap;
        while imp.holding() > 0 {
            imp.release(now, &mut |m| sent.push((m, now)));
            now += gap;
        }
        (sent, lost, over)
    }

    #[test]
    fn no_impairment_sends_everything_at_once_in_order() {
        let (sent, lost, over) = run(spec(), 1000, 10);
        assert_eq!((lost, over), (0, 0));
        assert!(
            sent.iter()
                .enumerate()
                .all(|(i, (m, t))| *m == i as u64 && *t == *m * 10)
        );
    }

    #[test]
    fn loss_drops_the_configured_share() {
        let s = ImpairSpec {
            loss_threshold: ImpairSpec::threshold(0.1),
            ..spec()
        };
        let (sent, lost, _) = run(s, 100_000, 1);
        assert_eq!(sent.len() as u64 + lost, 100_000);
        assert!((9_500..10_500).contains(&lost), "{lost}");
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
    }

    #[test]
    fn delay_holds_each_packet_its_time_and_jitter_may_reorder() {
        // Without jitter, order is kept.
        let s = ImpairSpec {
            delay_cycles: 1000,
            ..spec()
        };
        let (sent, _, _) = run(s, 5000, 10);
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
        assert!(sent.iter().all(|(m, t)| t - m * 10 == 1000));
        // With jitter each packet is held delay - jitter to delay + jitter, independently:
        // packets closer than twice the jitter may swap, as with netem.
        let s = ImpairSpec {
            jitter_cycles: 300,
            ..s
        };
        let (sent, lost, over) = run(s, 5000, 10);
        assert_eq!((lost, over, sent.len()), (0, 0, 5000));
        let held: Vec<u64> = sent.iter().map(|(m, t)| t - m * 10).collect();
        assert!(held.iter().all(|h| (700..=1310).contains(h)), "{held:?}");
        let (lo, hi) = (held.iter().min().unwrap(), held.iter().max().unwrap());
        assert!(*lo < 720 && *hi > 1280, "{lo} {hi}");
        assert!(sent.windows(2).any(|w| w[0].0 > w[1].0), "some swapped");
        let mut ids: Vec<u64> = sent.iter().map(|(m, _)| *m).collect();
        ids.sort_unstable();
        assert!(
            ids.iter().enumerate().all(|(i, m)| *m == i as u64),
            "each once"
        );
    }

    #[test]
    fn reordering_without_delay_sends_a_packet_after_its_successors() {
        let s = ImpairSpec {
            reorder_threshold: ImpairSpec::threshold(0.05),
            ..spec()
        };
        let (sent, _, _) = run(s, 10_000, 1);
        assert_eq!(sent.len(), 10_000);
        let late = sent.windows(2).filter(|w| w[0].0 > w[1].0).count();
        assert!((350..650).contains(&late), "{late}");
        let mut ids: Vec<u64> = sent.iter().map(|(m, _)| *m).collect();
        ids.sort_unstable();
        assert!(
            ids.iter().enumerate().all(|(i, m)| *m == i as u64),
            "each once"
        );
    }

    #[test]
    fn reordering_with_delay_lets_a_packet_overtake_the_line() {
        let s = ImpairSpec {
            delay_cycles: 100,
            reorder_threshold: ImpairSpec::threshold(0.01),
            ..spec()
        };
        let (sent, _, _) = run(s, 10_000, 1);
        let overtook = sent.windows(2).filter(|w| w[0].0 > w[1].0).count();
        assert!((50..150).contains(&overtook), "{overtook}");
    }

    #[test]
    fn the_window_bounds_the_impairment_and_the_limit_holds() {
        let s = ImpairSpec {
            loss_threshold: ImpairSpec::threshold(0.5),
            from_cycles: 1000,
            until_cycles: 2000,
            ..spec()
        };
        let mut imp = Impairer::new(s);
        // The window counts from the port's first packet (here at 5000).
        let mut lost = [0u32; 3];
        for now in 5000..8000u64 {
            if imp.admit(now, now, &mut |_| {}, &mut |_| {}) == Fate::Lost {
                lost[((now - 5000) / 1000) as usize] += 1;
            }
        }
        assert_eq!(lost[0], 0);
        assert_eq!(lost[2], 0);
        assert!((400..600).contains(&lost[1]), "{lost:?}");

        let s = ImpairSpec {
            delay_cycles: 1_000_000,
            limit: 10,
            ..spec()
        };
        let (sent, _, over) = run(s, 100, 1);
        assert_eq!((sent.len(), over), (10, 90));
    }

    #[test]
    fn packets_after_the_window_queue_behind_the_delayed_ones() {
        let s = ImpairSpec {
            delay_cycles: 500,
            until_cycles: 1000,
            ..spec()
        };
        let (sent, _, _) = run(s, 2000, 1);
        assert_eq!(sent.len(), 2000);
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
        assert_eq!(
            sent.last().unwrap().1,
            1999,
            "the line empties after the window"
        );
    }
}

//! How far each switch's clock runs ahead of the others', from when its flowsets arrive.
//!
//! A switch numbers epochs by its own clock, so a switch whose clock runs 30 ms behind
//! counts a packet three 10 ms epochs before the switch that sent it on did: compared epoch
//! by epoch, a flow's counts at the two ends disagree wherever its rate changes (a loss where
//! it ends that never was). A flowset arrives a moment after its epoch ends by its switch's
//! clock; that moment (its lag, arrival less the epoch's end) is about the same for every
//! switch (the export, the way to the sink), so the switches' lags differ by how far their
//! clocks do. The least lag of the last second or two stands for each switch (a flowset
//! held on the way only adds to it), and a switch's lead is how far its least lag lies
//! below the typical (median) switch's.

use rustc_hash::FxHashMap;

/// How long one least lag holds, ms: a clock that steps is followed within two.
const PERIOD_MS: u64 = 1000;

/// The furthest the typical switch's lag may be from 0 for lags to tell clocks apart, ms.
const MAX_TYPICAL_LAG_MS: i64 = 1000;

/// One switch's least lags.
#[derive(Debug, Default)]
struct Lags {
    /// The switch process's session they are of.
    session: u64,
    /// (period, least lag in it, ms) for the last two periods it delivered in.
    least: [Option<(u64, i64)>; 2],
}

/// The least lags of each switch that delivered in the current or the last period.
#[derive(Debug, Default)]
pub struct ClockLeads {
    least: FxHashMap<u32, Lags>,
}

impl ClockLeads {
    /// Notes a flowset of `switch` (its process's `session`) whose epochs end at `end_ms` by
    /// its clock (Unix ms), that arrived at `now_ms` by the sink's. A new session starts
    /// afresh: a switch that stops sends its epoch under way before its end, which reads as
    /// a clock ahead.
    pub fn note(&mut self, switch: u32, session: u64, end_ms: u64, now_ms: u64) {
        let lag = i64::try_from(now_ms)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(end_ms).unwrap_or(i64::MAX));
        let period = now_ms / PERIOD_MS;
        let lags = self.least.entry(switch).or_default();
        if lags.session != session {
            *lags = Lags {
                session,
                least: [None; 2],
            };
        }
        let e = &mut lags.least;
        match &mut e[1] {
            Some((p, least)) if *p == period => *least = (*least).min(lag),
            current => {
                let last = current.filter(|(p, _)| *p + 1 == period);
                *e = [last, Some((period, lag))];
            }
        }
    }

    /// The least lag of `switch` over its last two periods, if it delivered in the current
    /// or the last period by `now_ms`.
    fn least_lag(&self, switch: u32, now_ms: u64) -> Option<i64> {
        let period = now_ms / PERIOD_MS;
        self.least
            .get(&switch)?
            .least
            .iter()
            .flatten()
            .filter(|(p, _)| p + 1 >= period)
            .map(|&(_, l)| l)
            .min()
    }

    /// The switches (sorted) whose clocks run at least half an epoch of `epoch_ms` ahead
    /// (positive) or behind (negative) the typical switch's at `now_ms`, with how far, ms.
    pub fn leads(&self, epoch_ms: u64, now_ms: u64) -> Vec<(u32, i64)> {
        let mut lags: Vec<(u32, i64)> = self
            .least
            .keys()
            .filter_map(|&s| Some((s, self.least_lag(s, now_ms)?)))
            .collect();
        let mut sorted: Vec<i64> = lags.iter().map(|&(_, l)| l).collect();
        sorted.sort_unstable();
        let Some(&typical) = sorted.get(sorted.len() / 2) else {
            return Vec::new();
        };
        if typical.abs() > MAX_TYPICAL_LAG_MS {
            // Most switches' flowsets come long after (or before) their epochs end by the
            // sink's clock: telemetry replayed or emulated faster or slower than time, or
            // the sink's own clock far off. Their lags then tell nothing of their clocks.
            return Vec::new();
        }
        let half = i64::try_from(epoch_ms / 2).unwrap_or(i64::MAX).max(1);
        lags.retain(|&(_, l)| (typical - l).abs() >= half);
        let mut leads: Vec<(u32, i64)> = lags.into_iter().map(|(s, l)| (s, typical - l)).collect();
        leads.sort_unstable();
        leads
    }

    /// Forgets switches that have not delivered for two periods by `now_ms`.
    pub fn forget_quiet(&mut self, now_ms: u64) {
        let period = now_ms / PERIOD_MS;
        self.least
            .retain(|_, e| e.least.iter().flatten().any(|(p, _)| p + 1 >= period));
    }
}

/// The lead of `switch` in `leads` ([`ClockLeads::leads`]), ms: 0 when it is not there.
pub fn lead_of(leads: &[(u32, i64)], switch: u32) -> i64 {
    leads
        .binary_search_by_key(&switch, |&(s, _)| s)
        .map_or(0, |i| leads[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Switches a few ms apart lead nothing; one 30 ms behind leads -30, one 300 ms ahead
    /// +300, whatever their flowsets' delays on the way (the least lag stands); a switch
    /// quiet for two periods is forgotten, and a clock that steps is followed.
    #[test]
    fn leads_follow_the_least_lags() {
        let mut c = ClockLeads::default();
        let now = 1_800_000_000_000u64;
        for (i, t) in (now..now + 500).step_by(10).enumerate() {
            let end = t - 3;
            c.note(1, 1, end, t);
            c.note(2, 1, end, t + (i as u64 % 7));
            c.note(3, 1, end, t + 1);
            c.note(4, 1, end - 30, t);
            c.note(5, 1, end + 300, t + 50 * (i as u64 % 2));
        }
        let leads = c.leads(10, now + 500);
        assert_eq!(leads, [(4, -30), (5, 300)]);
        assert_eq!(lead_of(&leads, 4), -30);
        assert_eq!(lead_of(&leads, 1), 0);
        // Switch 4's clock steps to agree; its old least lag holds for up to two periods.
        let later = now + 2 * PERIOD_MS + 500;
        for t in (later..later + 100).step_by(10) {
            for s in 1..=5 {
                c.note(s, 1, t - 3, t);
            }
        }
        assert_eq!(c.leads(10, later + 100), []);
        // Switch 1 stops, sending its epoch under way 8 ms early: it reads as ahead until
        // it starts again (a new session).
        c.note(1, 1, later + 108, later + 100);
        assert_eq!(c.leads(10, later + 100), [(1, 11)]);
        c.note(1, 2, later + 107, later + 110);
        assert_eq!(c.leads(10, later + 110), []);
        // Flowsets of epochs that ended two minutes before (telemetry replayed): no leads.
        let replay = later + 3 * PERIOD_MS;
        for s in 1..=5 {
            c.note(s, 2, replay - 120_000 - 10 * u64::from(s), replay);
        }
        assert_eq!(c.leads(10, replay), []);
        c.forget_quiet(later + 5 * PERIOD_MS);
        assert!(c.least.is_empty());
        assert_eq!(c.leads(10, later + 5 * PERIOD_MS), []);
    }
}

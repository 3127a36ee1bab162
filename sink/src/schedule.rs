//! When each flow is next due for a look by its decode thread's sweep (its idle or active
//! timeout, or a detection window's close), so that a sweep looks at the flows due and not
//! at every flow: a look at every flow cost about 400 ns a flow, most of it cache misses
//! (200 ms a second per decode thread at half a million flows, under the table's lock).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use telemetry::flowradar::FlowKey;

/// A flow's place in the schedule while it has none.
pub const UNSCHEDULED: u32 = u32::MAX;

/// The monotonic clock and the wall clock read together: deadlines on either are placed
/// on the schedule's own (monotonic) seconds.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// The monotonic clock.
    pub at: Instant,
    /// The wall clock, Unix s.
    pub unix_s: f64,
}

impl Now {
    /// Both clocks now.
    pub fn read() -> Now {
        Now {
            at: Instant::now(),
            unix_s: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// Flows by the second (of the schedule's monotonic clock) in which a sweep is due to look
/// at them. A flow may be listed in several seconds: only the one its own record names
/// counts, the others are passed over when their second comes.
#[derive(Debug)]
pub struct Schedule {
    origin: Instant,
    seconds: BTreeMap<u32, Vec<FlowKey>>,
    entries: usize,
    timeouts: Option<(Duration, Duration)>,
    /// The wall clock less the monotonic one when the schedule was last worked out, s.
    offset_s: f64,
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            origin: Instant::now(),
            seconds: BTreeMap::new(),
            entries: 0,
            timeouts: None,
            offset_s: 0.0,
        }
    }
}

impl Schedule {
    /// The (idle, active) timeouts the deadlines are worked out for; `None` until the first
    /// sweep says them (until then nothing is listed).
    #[inline]
    pub fn timeouts(&self) -> Option<(Duration, Duration)> {
        self.timeouts
    }

    /// Whether its listings hold for a sweep with `timeouts` at `now`: they were worked out
    /// for those timeouts, and the wall clock has not stepped (by more than a second against
    /// the monotonic clock) since, which would have moved the wall-clock deadlines.
    pub fn holds_for(&self, timeouts: (Duration, Duration), now: Now) -> bool {
        self.timeouts == Some(timeouts) && (self.offset(now) - self.offset_s).abs() <= 1.0
    }

    /// Forgets every listing, for deadlines worked out for `timeouts` and `now`'s clocks
    /// from now on (the caller lists every flow again).
    pub fn reset(&mut self, timeouts: (Duration, Duration), now: Now) {
        self.seconds.clear();
        self.entries = 0;
        self.timeouts = Some(timeouts);
        self.offset_s = self.offset(now);
    }

    /// The wall clock less the schedule's monotonic one at `now`, s.
    fn offset(&self, now: Now) -> f64 {
        now.unix_s - now.at.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// The second `at` falls in; [`UNSCHEDULED`] for `None` (a deadline past the clock's
    /// range).
    pub fn second(&self, at: Option<Instant>) -> u32 {
        at.map_or(UNSCHEDULED, |at| {
            let s = at.saturating_duration_since(self.origin).as_secs();
            u32::try_from(s).unwrap_or(UNSCHEDULED)
        })
    }

    /// The second in which wall-clock time `unix_s` comes, by `now`'s reading of both
    /// clocks (a time before the schedule's start, or minus infinity, is second 0).
    pub fn second_of_wall(&self, unix_s: f64, now: Now) -> u32 {
        let s = unix_s - self.offset(now);
        if s.is_nan() {
            return 0;
        }
        // Saturating: infinity (or 136 years on) is never.
        s as u32
    }

    /// Lists `key` in `second` when that is sooner than `due`, the second the flow is
    /// listed in now, and makes it `due`.
    #[inline]
    pub fn put(&mut self, key: FlowKey, due: &mut u32, second: u32) {
        if second < *due {
            *due = second;
            self.seconds.entry(second).or_default().push(key);
            self.entries += 1;
        }
    }

    /// Takes the listings of every second up to `now`'s, each with its second.
    pub fn take_due(&mut self, now: Instant) -> BTreeMap<u32, Vec<FlowKey>> {
        let later = self
            .seconds
            .split_off(&(self.second(Some(now)).saturating_add(1)));
        let due = std::mem::replace(&mut self.seconds, later);
        self.entries -= due.values().map(Vec::len).sum::<usize>();
        due
    }

    /// Bytes its listings take.
    pub fn memory_bytes(&self) -> usize {
        self.entries * std::mem::size_of::<FlowKey>()
            + self.seconds.len() * (std::mem::size_of::<(u32, Vec<FlowKey>)>() + 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey {
            src: 1,
            dst: 2,
            src_port: n,
            dst_port: 3,
            protocol: 17,
        }
    }

    /// A flow is listed only when the new second is sooner; seconds up to now's come out
    /// once, later ones stay.
    #[test]
    fn sooner_seconds_list_a_flow_and_due_ones_come_out_once() {
        let mut s = Schedule::default();
        let now = Now::read();
        s.reset((Duration::from_secs(60), Duration::from_secs(60)), now);
        let (mut a, mut b) = (UNSCHEDULED, UNSCHEDULED);
        s.put(key(1), &mut a, 100);
        s.put(key(1), &mut a, 200);
        assert_eq!(a, 100, "a later second does not list it again");
        s.put(key(1), &mut a, 0);
        s.put(key(2), &mut b, s.second(Some(now.at)));
        assert_eq!((a, s.entries), (0, 3));
        let due = s.take_due(now.at);
        let listed: Vec<_> = due
            .iter()
            .flat_map(|(&t, ks)| ks.iter().map(move |k| (t, *k)))
            .collect();
        assert_eq!(listed, [(0, key(1)), (s.second(Some(now.at)), key(2))]);
        assert!(s.take_due(now.at).is_empty());
        assert_eq!(s.entries, 1, "second 100 stays");
    }

    /// The listings hold for the timeouts they were worked out for while the wall clock
    /// keeps pace with the monotonic one; not for other timeouts, nor after a step of the
    /// wall clock either way.
    #[test]
    fn a_wall_clock_step_or_new_timeouts_make_the_listings_stale() {
        let mut s = Schedule::default();
        let t = (Duration::from_secs(60), Duration::from_secs(60));
        let now = Now::read();
        assert!(!s.holds_for(t, now), "nothing worked out yet");
        s.reset(t, now);
        assert!(s.holds_for(t, now));
        assert!(!s.holds_for((t.0, Duration::ZERO), now));
        let later = Now {
            at: now.at + Duration::from_secs(30),
            unix_s: now.unix_s + 30.2,
        };
        assert!(s.holds_for(t, later), "a slewed clock");
        for step in [-5.0, 5.0] {
            let stepped = Now {
                unix_s: later.unix_s + step,
                ..later
            };
            assert!(!s.holds_for(t, stepped), "stepped by {step} s");
        }
    }

    /// A wall-clock deadline lands in the second the monotonic clock reaches it; one long
    /// past, minus infinity and NaN are due at once, infinity never.
    #[test]
    fn wall_clock_deadlines_land_on_monotonic_seconds() {
        let s = Schedule::default();
        let now = Now::read();
        let here = now.at.duration_since(s.origin).as_secs_f64();
        assert_eq!(
            s.second_of_wall(now.unix_s + 30.0, now),
            (here + 30.0) as u32
        );
        assert_eq!(s.second_of_wall(1000.0, now), 0);
        assert_eq!(s.second_of_wall(f64::NEG_INFINITY, now), 0);
        assert_eq!(s.second_of_wall(f64::NAN, now), 0);
        assert_eq!(s.second_of_wall(f64::INFINITY, now), UNSCHEDULED);
        assert_eq!(s.second(None), UNSCHEDULED);
    }
}

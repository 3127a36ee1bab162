//! Time on the data plane: the CPU's time-stamp counter, read once per burst, and its
//! mapping to nanoseconds and to Unix time, which the control thread calibrates and
//! refreshes (the workers convert with integer arithmetic only).
//!
//! FlowRadar epochs are numbered by Unix time (`unix_ns / epoch_ns`), so switches on hosts
//! synchronised by NTP or PTP agree on epoch boundaries; the control thread re-anchors the
//! mapping to the system clock every second, following its adjustments.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

/// Reads the time-stamp counter (the same counter DPDK's `rte_rdtsc` reads).
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// A linear map from counter ticks to nanoseconds and Unix time, anchored at one reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Counter value at the anchor.
    pub tsc0: u64,
    /// Unix time in ns at the anchor.
    pub unix_ns0: u64,
    /// Nanoseconds per tick, in 32.32 fixed point.
    pub ns_per_tick_q32: u64,
}

impl Clock {
    /// A clock whose ticks are nanoseconds, with tick 0 at `unix_ns0` (the emulator's).
    pub const fn nanoseconds(unix_ns0: u64) -> Clock {
        Clock {
            tsc0: 0,
            unix_ns0,
            ns_per_tick_q32: 1 << 32,
        }
    }

    /// Ticks as nanoseconds.
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.ns_per_tick_q32)) >> 32) as u64
    }

    /// Nanoseconds as ticks.
    #[inline]
    pub fn ticks(&self, ns: u64) -> u64 {
        ((u128::from(ns) << 32) / u128::from(self.ns_per_tick_q32.max(1))) as u64
    }

    /// The Unix time of counter value `tsc`.
    #[inline]
    pub fn unix_ns(&self, tsc: u64) -> u64 {
        if tsc >= self.tsc0 {
            self.unix_ns0 + self.ns(tsc - self.tsc0)
        } else {
            self.unix_ns0.saturating_sub(self.ns(self.tsc0 - tsc))
        }
    }

    /// The counter value at Unix time `unix_ns`.
    #[inline]
    pub fn tsc_at(&self, unix_ns: u64) -> u64 {
        if unix_ns >= self.unix_ns0 {
            self.tsc0 + self.ticks(unix_ns - self.unix_ns0)
        } else {
            self.tsc0
                .saturating_sub(self.ticks(self.unix_ns0 - unix_ns))
        }
    }
}

fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The clock the control thread keeps calibrated and the workers read.
pub struct SharedClock {
    current: ArcSwap<Clock>,
    start_tsc: u64,
    start: Instant,
    /// The monotonic and the system clock at the last anchor.
    last: Mutex<(Instant, u64)>,
}

/// The counter, the monotonic clock and the system clock read together: of three tries, the
/// one whose counter reads either side are closest, the counter taken at their midpoint (a
/// thread paused between the reads would put the anchor off by the pause).
fn read_together() -> (u64, Instant, u64) {
    let mut best: Option<(u64, u64, Instant, u64)> = None;
    for _ in 0..3 {
        let t0 = tsc();
        let mono = Instant::now();
        let unix = unix_now_ns();
        let gap = tsc().wrapping_sub(t0);
        if best.is_none_or(|(g, ..)| gap < g) {
            best = Some((gap, t0.wrapping_add(gap / 2), mono, unix));
        }
    }
    let (_, t, mono, unix) = best.expect("three tries");
    (t, mono, unix)
}

impl SharedClock {
    /// Calibrates the counter against the monotonic clock over `settle` (a few ms is enough
    /// to start; every [`SharedClock::recalibrate`] refines it over a longer span).
    pub fn calibrate(settle: Duration) -> Arc<SharedClock> {
        let (start_tsc, start, unix) = read_together();
        std::thread::sleep(settle);
        let clock = SharedClock {
            current: ArcSwap::from_pointee(Clock::nanoseconds(0)),
            start_tsc,
            start,
            last: Mutex::new((start, unix)),
        };
        clock.recalibrate();
        Arc::new(clock)
    }

    /// A clock that never changes (tests and the emulator).
    pub fn fixed(clock: Clock) -> Arc<SharedClock> {
        Arc::new(SharedClock {
            current: ArcSwap::from_pointee(clock),
            start_tsc: 0,
            start: Instant::now(),
            last: Mutex::new((Instant::now(), clock.unix_ns0)),
        })
    }

    /// Measures ticks per nanosecond since the start and re-anchors to the system clock.
    /// Returns how far the system clock stepped since the last anchor ([`clock_step`]).
    pub fn recalibrate(&self) -> i64 {
        let (t, now, unix_ns0) = read_together();
        let mut last = self.last.lock().expect("clock lock");
        let step = clock_step(*last, (now, unix_ns0));
        *last = (now, unix_ns0);
        let elapsed = now.duration_since(self.start).as_nanos() as u64;
        let ticks = t.wrapping_sub(self.start_tsc);
        if ticks == 0 || elapsed == 0 {
            return step;
        }
        let ns_per_tick_q32 = ((u128::from(elapsed) << 32) / u128::from(ticks)) as u64;
        self.current.store(Arc::new(Clock {
            tsc0: t,
            unix_ns0,
            ns_per_tick_q32,
        }));
        step
    }

    /// The current mapping.
    #[inline]
    pub fn get(&self) -> Clock {
        **self.current.load()
    }
}

/// How far the system clock stepped between two readings of (monotonic clock, system
/// clock in Unix ns), `old` and `new`: how much more it moved than the monotonic clock (ns,
/// later positive). NTP slews both alike; a step (NTP setting the clock, a VM
/// resynchronised, a leap second) moves the system clock alone.
pub fn clock_step(old: (Instant, u64), new: (Instant, u64)) -> i64 {
    let mono = new.0.saturating_duration_since(old.0).as_nanos() as i128;
    let moved = i128::from(new.1) - i128::from(old.1);
    (moved - mono).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_step_is_the_system_clock_against_the_monotonic_one() {
        let t = Instant::now();
        let old = (t, 5_000_000_000);
        let later = t + Duration::from_secs(1);
        assert_eq!(clock_step(old, (later, 6_000_000_000)), 0);
        assert_eq!(clock_step(old, (later, 6_002_000_000)), 2_000_000);
        assert_eq!(clock_step(old, (later, 5_000_000_000)), -1_000_000_000);
        // A running clock read twice has not stepped.
        let s = SharedClock::calibrate(Duration::from_millis(5));
        assert!(s.recalibrate().abs() < 50_000_000);
    }

    #[test]
    fn conversions_round_trip() {
        let c = Clock {
            tsc0: 1_000_000,
            unix_ns0: 1_700_000_000_000_000_000,
            ns_per_tick_q32: (1u64 << 32) / 3, // 3 GHz
        };
        assert_eq!(c.ns(3_000_000), 999_999);
        let t = c.tsc_at(c.unix_ns0 + 10_000_000);
        assert!((c.unix_ns(t) as i64 - (c.unix_ns0 + 10_000_000) as i64).abs() <= 1);
        assert!(c.unix_ns(0) < c.unix_ns0);
        let e = Clock::nanoseconds(5);
        assert_eq!((e.ns(7), e.unix_ns(10), e.tsc_at(20)), (7, 15, 15));
    }

    #[test]
    fn calibration_follows_the_system_clock() {
        let s = SharedClock::calibrate(Duration::from_millis(20));
        let c = s.get();
        // The system clock read between two counter reads falls between their times, give
        // or take the calibration's own error (however long the thread was paused between
        // the reads).
        let before = c.unix_ns(tsc());
        let now = unix_now_ns();
        let after = c.unix_ns(tsc());
        assert!(
            before.saturating_sub(50_000_000) <= now && now <= after + 50_000_000,
            "{before} <= {now} <= {after}"
        );
        assert!(c.ns_per_tick_q32 > 0);
    }
}

//! Time on the data plane: the CPU's time-stamp counter, read once per burst, and its
//! mapping to nanoseconds and to Unix time, which the control thread calibrates and
//! refreshes (the workers convert with integer arithmetic only).
//!
//! FlowRadar epochs are numbered by Unix time (`unix_ns / epoch_ns`), so switches on hosts
//! synchronised by NTP or PTP agree on epoch boundaries; the control thread re-anchors the
//! mapping to the system clock every second, following its adjustments.

use std::sync::Arc;
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
}

impl SharedClock {
    /// Calibrates the counter against the monotonic clock over `settle` (a few ms is enough
    /// to start; every [`SharedClock::recalibrate`] refines it over a longer span).
    pub fn calibrate(settle: Duration) -> Arc<SharedClock> {
        let start = Instant::now();
        let start_tsc = tsc();
        std::thread::sleep(settle);
        let clock = SharedClock {
            current: ArcSwap::from_pointee(Clock::nanoseconds(0)),
            start_tsc,
            start,
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
        })
    }

    /// Measures ticks per nanosecond since the start and re-anchors to the system clock.
    /// Returns how far the system clock stepped since the last anchor (ns, later positive):
    /// what the old mapping says now against what the system clock says.
    pub fn recalibrate(&self) -> i64 {
        let (t, now) = (tsc(), Instant::now());
        let elapsed = now.duration_since(self.start).as_nanos() as u64;
        let ticks = t.wrapping_sub(self.start_tsc);
        if ticks == 0 || elapsed == 0 {
            return 0;
        }
        let ns_per_tick_q32 = ((u128::from(elapsed) << 32) / u128::from(ticks)) as u64;
        let unix_ns0 = unix_now_ns();
        let new = Clock {
            tsc0: t,
            unix_ns0,
            ns_per_tick_q32,
        };
        let step = clock_step(&self.get(), &new);
        self.current.store(Arc::new(new));
        step
    }

    /// The current mapping.
    #[inline]
    pub fn get(&self) -> Clock {
        **self.current.load()
    }
}

/// How far the system clock moved between anchors `old` and `new` beyond the time the
/// counter measured (ns, later positive, the ticks between converted at the new rate,
/// measured over longer): a step of the clock (NTP setting it, a VM resynchronised).
pub fn clock_step(old: &Clock, new: &Clock) -> i64 {
    let ticks = i128::from(new.tsc0) - i128::from(old.tsc0);
    let counted = (ticks * i128::from(new.ns_per_tick_q32)) >> 32;
    let moved = i128::from(new.unix_ns0) - i128::from(old.unix_ns0);
    (moved - counted).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_step_is_the_system_clock_against_the_mapping() {
        // 2 ticks per ns, anchored a second (2e9 ticks) apart.
        let rate = 1u64 << 31;
        let old = Clock {
            tsc0: 1_000,
            unix_ns0: 5_000_000_000,
            ns_per_tick_q32: rate + 3, // the old rate a little off: not a step
        };
        let at = |unix_ns0| Clock {
            tsc0: 1_000 + 2_000_000_000,
            unix_ns0,
            ns_per_tick_q32: rate,
        };
        assert_eq!(clock_step(&old, &at(6_000_000_000)), 0);
        assert_eq!(clock_step(&old, &at(6_002_000_000)), 2_000_000);
        assert_eq!(clock_step(&old, &at(5_000_000_000)), -1_000_000_000);
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

//! Egress link utilisation as HPCC estimates it, per port, in fixed point, updated once per
//! transmitted burst rather than per packet:
//!
//! `U = (T - tau) / T * U + qlen * tau / (B * T^2) + bytes / (B * T)`
//!
//! with `T` the base RTT, `B` the port's capacity in bytes per ns, `tau` the time since the
//! port's previous burst (capped at `T`), `qlen` the bytes still queued behind the burst and
//! `bytes` the burst's bytes. Per burst, `bytes / (B * T)` adds the burst's share of one RTT's
//! worth of line rate, so over any window of `T` the estimate is the bytes sent in it over
//! `B * T`, as HPCC's per-packet form gives.
//!
//! Several workers send on one port through their own tx queues. Each worker keeps the
//! estimate of its own traffic; the link's `U` is the sum over workers (both terms of the
//! formula add up over disjoint traffic). A worker adds the other workers' estimates, which
//! the control thread sums (decayed to the present) and publishes for it every few
//! milliseconds, so every worker sees the link's load, not its own share of it.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::tables::MAX_PORTS;

/// Fixed-point one (U is kept in 32.32).
pub const ONE: u64 = 1 << 32;

/// One port's estimator parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadParams {
    /// The base RTT `T` in ns.
    pub rtt_ns: u64,
    /// Bytes the port sends in one base RTT (`B * T`), at least 1.
    pub bytes_per_rtt: u64,
    /// `ceil(2^64 / T)` and `ceil(2^96 / (B * T))`: the per-burst update multiplies by
    /// these instead of dividing (a 128-bit division costs more than the rest of a burst's
    /// bookkeeping).
    inv_rtt: u128,
    inv_bytes: u128,
}

impl LoadParams {
    /// Parameters for a port of `capacity_bps` bit/s with base RTT `rtt_ns`.
    pub fn new(capacity_bps: u64, rtt_ns: u64) -> LoadParams {
        let rtt_ns = rtt_ns.max(1);
        let bytes_per_rtt =
            ((u128::from(capacity_bps) * u128::from(rtt_ns)) / 8_000_000_000).max(1) as u64;
        LoadParams {
            rtt_ns,
            bytes_per_rtt,
            inv_rtt: (1u128 << 64).div_ceil(u128::from(rtt_ns)),
            inv_bytes: (1u128 << 96).div_ceil(u128::from(bytes_per_rtt)),
        }
    }

    /// `U` after `elapsed_ns` without traffic.
    #[inline]
    pub fn decay(&self, u: u64, elapsed_ns: u64) -> u64 {
        let tau = elapsed_ns.min(self.rtt_ns);
        ((u128::from(u) * u128::from(self.rtt_ns - tau)) / u128::from(self.rtt_ns)) as u64
    }

    /// [`LoadParams::update`] for a burst with no queue behind it (what the data plane
    /// sees of its own transmit queues), by multiplication: within two units and a part in
    /// 2^32 of the exact form (a test checks it).
    #[inline]
    pub fn update_sent(&self, u: u64, elapsed_ns: u64, bytes: u64) -> u64 {
        let tau = elapsed_ns.min(self.rtt_ns);
        if self.rtt_ns >= 1 << 32 || bytes >= 1 << 32 {
            return self.update(u, elapsed_ns, bytes, 0);
        }
        // u * (T - tau) / T as u * q / 2^64 with q = (T - tau) * ceil(2^64 / T) (below 2^64
        // when tau > 0 and T < 2^32), and (bytes << 32) / (B * T): each at most one above
        // the exact quotient.
        let kept = if tau == 0 {
            u128::from(u)
        } else {
            let q = u128::from(self.rtt_ns - tau) * self.inv_rtt;
            ((u128::from(u) * q) >> 64).min(u128::from(u))
        };
        let sent = (u128::from(bytes) * self.inv_bytes) >> 64;
        (kept + sent).min(u128::from(u64::MAX)) as u64
    }

    /// `U` after a burst of `bytes` leaving `elapsed_ns` after the previous one, with
    /// `queued` bytes behind it.
    #[inline]
    pub fn update(&self, u: u64, elapsed_ns: u64, bytes: u64, queued: u64) -> u64 {
        let tau = elapsed_ns.min(self.rtt_ns);
        let t = u128::from(self.rtt_ns);
        let bt = u128::from(self.bytes_per_rtt);
        let kept = u128::from(u) * (t - u128::from(tau)) / t;
        let queue = ((u128::from(queued) * u128::from(tau)) << 32) / (bt * t);
        let sent = (u128::from(bytes) << 32) / bt;
        (kept + queue + sent).min(u128::from(u64::MAX)) as u64
    }
}

/// The value PINT carries for utilisation `u` (32.32): `max(1, ceil(512 U))`.
#[inline(always)]
pub fn carried_value(u: u64) -> u64 {
    ((u128::from(u) * 512).div_ceil(u128::from(ONE)) as u64).max(1)
}

/// What one worker publishes about its ports and reads about the others'.
pub struct SharedLoad {
    /// Its own estimate per port (32.32).
    pub own: CachePadded<[AtomicU64; MAX_PORTS]>,
    /// Counter value of its last update per port.
    pub stamp: CachePadded<[AtomicU64; MAX_PORTS]>,
    /// The other workers' estimates per port, summed by the control thread.
    pub others: CachePadded<[AtomicU64; MAX_PORTS]>,
}

impl Default for SharedLoad {
    fn default() -> Self {
        SharedLoad {
            own: CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))),
            stamp: CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))),
            others: CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

/// One worker's estimators.
pub struct PortLoads {
    params: [LoadParams; MAX_PORTS],
    u: [u64; MAX_PORTS],
    /// The counter value of each port's last update.
    last_tsc: [u64; MAX_PORTS],
}

impl PortLoads {
    /// Estimators for ports with these parameters.
    pub fn new(params: &[LoadParams]) -> PortLoads {
        let mut p = [LoadParams::new(1, 1); MAX_PORTS];
        p[..params.len()].copy_from_slice(params);
        PortLoads {
            params: p,
            u: [0; MAX_PORTS],
            last_tsc: [0; MAX_PORTS],
        }
    }

    /// Updates port `port` for a burst of `bytes` at counter value `now_tsc` with `queued`
    /// bytes behind it; returns the worker's own estimate. `ns(ticks)` converts the time
    /// since the port's last update: a difference, since the clock's rate is recalibrated
    /// every second, and a counter value itself (counting since the host started) scaled
    /// by a rate changed in its last digit moves by milliseconds on a host up for days.
    #[inline]
    pub fn on_burst(
        &mut self,
        port: usize,
        now_tsc: u64,
        bytes: u64,
        queued: u64,
        ns: impl Fn(u64) -> u64,
    ) -> u64 {
        let elapsed = ns(now_tsc.saturating_sub(self.last_tsc[port]));
        let p = &self.params[port];
        self.u[port] = if queued == 0 {
            p.update_sent(self.u[port], elapsed, bytes)
        } else {
            p.update(self.u[port], elapsed, bytes, queued)
        };
        self.last_tsc[port] = now_tsc;
        self.u[port]
    }

    /// Publishes port `port`'s estimate (taken at counter value `tsc`).
    #[inline]
    pub fn publish(&self, shared: &SharedLoad, port: usize, tsc: u64) {
        shared.own[port].store(self.u[port], Ordering::Relaxed);
        shared.stamp[port].store(tsc, Ordering::Relaxed);
    }
}

/// Sums every worker's published estimates into the others' view of each (the control
/// thread calls this every few milliseconds). `ns(ticks)` converts counter ticks.
pub fn share_loads(
    workers: &[&SharedLoad],
    params: &[LoadParams],
    now_tsc: u64,
    ns: impl Fn(u64) -> u64,
) {
    if workers.len() < 2 {
        return;
    }
    for (port, p) in params.iter().enumerate() {
        let decayed: Vec<u64> = workers
            .iter()
            .map(|w| {
                let u = w.own[port].load(Ordering::Relaxed);
                let at = w.stamp[port].load(Ordering::Relaxed);
                p.decay(u, ns(now_tsc.saturating_sub(at)))
            })
            .collect();
        let total: u64 = decayed.iter().sum();
        for (w, mine) in workers.iter().zip(&decayed) {
            w.others[port].store(total - mine, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_the_offered_load() {
        // 10 Gbit/s, T = 13 us: 3200 bytes every 3.2 us is 8 Gbit/s, U -> 0.8.
        let p = LoadParams::new(10_000_000_000, 13_000);
        assert_eq!(p.bytes_per_rtt, 16_250);
        let mut l = PortLoads::new(&[p]);
        let mut now = 0;
        let mut u = 0;
        for _ in 0..1000 {
            now += 3_200;
            u = l.on_burst(0, now, 3_200, 0, |t| t);
        }
        let f = u as f64 / ONE as f64;
        assert!((f - 0.8).abs() < 0.02, "{f}");
        assert!((carried_value(u) as f64 / 512.0 - f).abs() < 0.01);
        // A standing queue of one B*T adds about 1.
        for _ in 0..1000 {
            now += 3_200;
            u = l.on_burst(0, now, 3_200, 16_250, |t| t);
        }
        let f = u as f64 / ONE as f64;
        assert!((f - 1.8).abs() < 0.05, "{f}");
        // Idle for longer than T forgets the past.
        assert_eq!(p.decay(u, 20_000), 0);
        assert_eq!(carried_value(0), 1);
    }

    /// The clock's rate recalibrated by a part in 10^9 on a host up for a year (a counter
    /// near 2^56 at 2.6 GHz) leaves the estimate where it was: only the time between
    /// bursts is converted.
    #[test]
    fn a_recalibrated_clock_leaves_the_estimate_alone() {
        let p = LoadParams::new(10_000_000_000, 13_000);
        let mut l = PortLoads::new(&[p]);
        let q = (1u64 << 32) * 10 / 26; // 2.6 GHz: ns per tick in 32.32 fixed point
        let ns = |q: u64| move |t: u64| ((u128::from(t) * u128::from(q)) >> 32) as u64;
        let mut tsc = 1u64 << 56;
        let mut u = 0;
        for i in 0..2000 {
            // 3200 bytes every 3.2 us (8320 ticks); the rate changes by 2 every 100 bursts.
            tsc += 8_320;
            u = l.on_burst(0, tsc, 3_200, 0, ns(q + (i / 100) % 2 * 2));
            if i > 1000 {
                let f = u as f64 / ONE as f64;
                assert!((f - 0.8).abs() < 0.02, "burst {i}: {f}");
            }
        }
        assert!(u > 0);
    }

    #[test]
    fn updates_by_multiplication_stay_within_a_part_in_2_32_of_the_exact_form() {
        let mut rng = telemetry::sim_rng::SimRng::new(9);
        for (bps, rtt) in [
            (10_000_000_000u64, 13_000u64),
            (100_000_000_000, 5_000),
            (1_000_000, 1),
        ] {
            let p = LoadParams::new(bps, rtt);
            for _ in 0..20_000 {
                let u = rng.next_u64() >> (rng.next_u64() % 40);
                let elapsed = rng.next_u64() % (2 * rtt + 1);
                let bytes = rng.next_u64() % 100_000;
                let exact = p.update(u, elapsed, bytes, 0);
                let fast = p.update_sent(u, elapsed, bytes);
                assert!(
                    fast.abs_diff(exact) <= 2 + (exact >> 32),
                    "{bps} {rtt}: {u} {elapsed} {bytes}: {fast} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn workers_see_each_others_load() {
        let p = [LoadParams::new(10_000_000_000, 13_000)];
        let (a, b) = (SharedLoad::default(), SharedLoad::default());
        a.own[0].store(ONE / 2, Ordering::Relaxed);
        b.own[0].store(ONE / 4, Ordering::Relaxed);
        share_loads(&[&a, &b], &p, 0, |t| t);
        assert_eq!(a.others[0].load(Ordering::Relaxed), ONE / 4);
        assert_eq!(b.others[0].load(Ordering::Relaxed), ONE / 2);
        // Half a base RTT later the estimates have decayed by half.
        share_loads(&[&a, &b], &p, 6_500, |t| t);
        assert_eq!(a.others[0].load(Ordering::Relaxed), ONE / 8);
    }
}

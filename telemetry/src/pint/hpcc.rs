//! HPCC's link-utilization estimate, kept per egress port and updated on every transmitted
//! packet (the form PINT uses, without multiplications the switch cannot do cheaply):
//!
//! `U = (T - tau) / T * U + qlen * tau / (B * T^2) + bytes / (B * T)`
//!
//! with `tau` the time since the previous packet on the port (capped at `T`), `T` the base
//! RTT, `B` the capacity in bytes per nanosecond, `qlen` the bytes queued, and `bytes` the
//! size of the previous packet.

/// One egress port's estimator.
#[derive(Debug, Clone, PartialEq)]
pub struct HpccEstimator {
    base_rtt_ns: f64,
    bytes_per_ns: f64,
    u: f64,
    last_ns: Option<u64>,
    last_bytes: u32,
}

impl HpccEstimator {
    /// An estimator for a port of `capacity_bps` bit/s with base RTT `base_rtt_ns`.
    pub fn new(capacity_bps: u64, base_rtt_ns: f64) -> HpccEstimator {
        assert!(capacity_bps > 0 && base_rtt_ns > 0.0);
        HpccEstimator {
            base_rtt_ns,
            bytes_per_ns: capacity_bps as f64 / 8e9,
            u: 0.0,
            last_ns: None,
            last_bytes: 0,
        }
    }

    /// The current estimate.
    pub fn utilization(&self) -> f64 {
        self.u
    }

    /// Updates on a packet of `packet_bytes` leaving at `now_ns` with `queue_bytes` queued;
    /// returns the new estimate.
    #[inline]
    pub fn on_transmit(&mut self, now_ns: u64, queue_bytes: f64, packet_bytes: u32) -> f64 {
        let t = self.base_rtt_ns;
        let tau = match self.last_ns {
            None => t,
            Some(l) => (now_ns.saturating_sub(l) as f64).min(t),
        };
        let b = self.bytes_per_ns;
        self.u = (t - tau) / t * self.u
            + queue_bytes * tau / (b * t * t)
            + f64::from(self.last_bytes) / (b * t);
        self.last_ns = Some(now_ns);
        self.last_bytes = packet_bytes;
        self.u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_the_offered_load() {
        // 100 Gbit/s, T = 13 us, 1000-byte packets every 100 ns = 80 Gbit/s: U -> 0.8.
        let mut e = HpccEstimator::new(100_000_000_000, 13_000.0);
        let mut t = 0;
        for _ in 0..10_000 {
            t += 100;
            e.on_transmit(t, 0.0, 1000);
        }
        assert!((e.utilization() - 0.8).abs() < 0.01, "{}", e.utilization());
        // A standing queue of one BDP adds about 1.
        let bdp = 100e9 / 8.0 * 13e-6;
        for _ in 0..10_000 {
            t += 100;
            e.on_transmit(t, bdp, 1000);
        }
        assert!((e.utilization() - 1.8).abs() < 0.02, "{}", e.utilization());
        // Idle for longer than T forgets the past.
        t += 1_000_000;
        let u = e.on_transmit(t, 0.0, 1000);
        assert!(u < 0.01, "{u}");
    }
}

//! Why packets are dropped, and the per-worker counters the poll loop keeps.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::Serialize;

/// Why the pipeline dropped a packet. Every dropped packet is counted under exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum DropReason {
    /// The frame ends inside the Ethernet/VLAN or IPv4 header, or before the IPv4 total length.
    Truncated = 0,
    /// The IPv4 header is invalid (version, IHL, total length below the header) or the frame
    /// has more than two VLAN tags.
    Malformed,
    /// The IPv4 header checksum is wrong.
    BadChecksum,
    /// The TTL is 0 or 1, so it would reach 0 here (no ICMP time-exceeded is sent).
    TtlExpired,
    /// No route matches the destination address.
    NoRoute,
    /// The packet is larger than the egress port's MTU (the switch does not fragment).
    MtuExceeded,
    /// The port is not promiscuous and the frame is not addressed to its MAC.
    NotForUs,
    /// ARP (next-hop MACs are static; the switch does not answer ARP).
    Arp,
    /// IPv6 (not routed by this switch).
    Ipv6,
    /// Any other EtherType.
    OtherEthertype,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 10;
    /// All reasons, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Truncated,
        DropReason::Malformed,
        DropReason::BadChecksum,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::MtuExceeded,
        DropReason::NotForUs,
        DropReason::Arp,
        DropReason::Ipv6,
        DropReason::OtherEthertype,
    ];

    /// The reason's name as printed and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::BadChecksum => "bad_checksum",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoute => "no_route",
            DropReason::MtuExceeded => "mtu_exceeded",
            DropReason::NotForUs => "not_for_us",
            DropReason::Arp => "arp",
            DropReason::Ipv6 => "ipv6",
            DropReason::OtherEthertype => "other_ethertype",
        }
    }
}

/// A worker's own running totals, plain integers on its stack; published once per burst.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets handed to a tx queue.
    pub tx_packets: u64,
    /// Bytes handed to a tx queue.
    pub tx_bytes: u64,
    /// Tx calls that did not take every packet (each retry counts).
    pub tx_retries: u64,
    /// Packets dropped because a tx queue stayed full.
    pub tx_full_drops: u64,
    /// Packets dropped by the pipeline, by reason.
    pub drops: [u64; DropReason::COUNT],
    /// TSC cycles spent in loop iterations that received packets.
    pub busy_cycles: u64,
    /// Loop iterations that received packets.
    pub busy_polls: u64,
}

impl LocalCounters {
    /// Total pipeline drops.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Adds another set of totals (for sums over workers).
    pub fn add(&mut self, o: &LocalCounters) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_retries += o.tx_retries;
        self.tx_full_drops += o.tx_full_drops;
        for (a, b) in self.drops.iter_mut().zip(o.drops.iter()) {
            *a += b;
        }
        self.busy_cycles += o.busy_cycles;
        self.busy_polls += o.busy_polls;
    }
}

const FIELDS: usize = 8 + DropReason::COUNT;

/// A worker's counters as the control thread sees them: one writer (the worker, with plain
/// relaxed stores, no atomic read-modify-write), any number of readers. Cache-padded so
/// workers never share a line.
#[derive(Default)]
pub struct SharedCounters {
    cells: CachePadded<[AtomicU64; FIELDS]>,
}

impl SharedCounters {
    /// Publishes the worker's totals. Only the owning worker calls this.
    #[inline(always)]
    pub fn publish(&self, c: &LocalCounters) {
        let f = &self.cells;
        f[0].store(c.rx_packets, Ordering::Relaxed);
        f[1].store(c.rx_bytes, Ordering::Relaxed);
        f[2].store(c.tx_packets, Ordering::Relaxed);
        f[3].store(c.tx_bytes, Ordering::Relaxed);
        f[4].store(c.tx_retries, Ordering::Relaxed);
        f[5].store(c.tx_full_drops, Ordering::Relaxed);
        f[6].store(c.busy_cycles, Ordering::Relaxed);
        f[7].store(c.busy_polls, Ordering::Relaxed);
        for (i, d) in c.drops.iter().enumerate() {
            f[8 + i].store(*d, Ordering::Relaxed);
        }
    }

    /// Reads the last published totals.
    pub fn read(&self) -> LocalCounters {
        let f = &self.cells;
        let mut c = LocalCounters {
            rx_packets: f[0].load(Ordering::Relaxed),
            rx_bytes: f[1].load(Ordering::Relaxed),
            tx_packets: f[2].load(Ordering::Relaxed),
            tx_bytes: f[3].load(Ordering::Relaxed),
            tx_retries: f[4].load(Ordering::Relaxed),
            tx_full_drops: f[5].load(Ordering::Relaxed),
            busy_cycles: f[6].load(Ordering::Relaxed),
            busy_polls: f[7].load(Ordering::Relaxed),
            ..Default::default()
        };
        for (i, d) in c.drops.iter_mut().enumerate() {
            *d = f[8 + i].load(Ordering::Relaxed);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_read_round_trip() {
        let s = SharedCounters::default();
        let mut c = LocalCounters {
            rx_packets: 5,
            tx_bytes: 9,
            busy_polls: 3,
            ..Default::default()
        };
        c.drops[DropReason::NoRoute as usize] = 4;
        s.publish(&c);
        assert_eq!(s.read(), c);
        assert_eq!(c.dropped(), 4);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }
}

//! Why packets are dropped, what the telemetry did to them, and the per-worker counters the
//! poll loop keeps and the control thread reads.
//!
//! Each list of named counters is declared once with `named_counters!`: the enum, its
//! names (as printed, in JSON and in metrics labels), `COUNT` and `ALL` all come from that
//! one declaration, so adding a reason is one line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::tables::MAX_PORTS;

/// Declares an enum of named counters: variants with their names, `COUNT`, `ALL`, `name`
/// and `from_name`.
macro_rules! named_counters {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident {
            $( $(#[doc = $doc:expr])* $variant:ident => $name:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum $ty {
            $( $(#[doc = $doc])* $variant, )+
        }

        impl $ty {
            /// Every value, in counter order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// Number of values.
            pub const COUNT: usize = Self::ALL.len();

            /// The name as printed, in JSON and in metric labels.
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }

            /// The value with this name.
            pub fn from_name(name: &str) -> Option<$ty> {
                Self::ALL.iter().copied().find(|v| v.name() == name)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_counters! {
    /// Why the pipeline dropped a packet. Every dropped packet is counted under exactly one.
    pub enum DropReason {
        /// The frame ends inside the Ethernet/VLAN, shim or IPv4 header, or before the IPv4
        /// total length.
        Truncated => "truncated",
        /// The IPv4 header is invalid (version, IHL, total length below the header) or the
        /// frame has more than two VLAN tags.
        Malformed => "malformed",
        /// The IPv4 header checksum is wrong.
        BadChecksum => "bad_checksum",
        /// The TTL is 0 or 1, so it would reach 0 here (no ICMP time-exceeded is sent).
        TtlExpired => "ttl_expired",
        /// No route matches the destination address.
        NoRoute => "no_route",
        /// The destination is one a router does not forward (RFC 1812): 0/8, loopback
        /// 127/8, multicast 224/4, reserved 240/4 or the limited broadcast.
        Martian => "martian",
        /// The packet is larger than the egress port's MTU (the switch does not fragment).
        MtuExceeded => "mtu_exceeded",
        /// The port is not promiscuous and the frame is not addressed to its MAC.
        NotForUs => "not_for_us",
        /// ARP (next-hop MACs are static; the switch does not answer ARP).
        Arp => "arp",
        /// IPv6 (not routed by this switch).
        Ipv6 => "ipv6",
        /// Any other EtherType.
        OtherEthertype => "other_ethertype",
        /// A telemetry shim whose format byte this switch does not read, or that does not
        /// carry IPv4: its length is unknown, so the packet cannot be parsed safely.
        BadShim => "bad_shim",
        /// A frame with the telemetry shim arrived on an edge port: hosts do not send
        /// telemetry, and forwarding it would let a host forge another path's digest.
        ShimFromHost => "shim_from_host",
        /// Dropped on transmit by the port's configured impairment (`impair.loss`).
        ImpairLoss => "impair_loss",
        /// The port's impairment already held its `impair.limit` packets.
        ImpairOverflow => "impair_overflow",
    }
}

named_counters! {
    /// What the telemetry stages did (each packet counts under at most one of the shim
    /// events, but for a transit shim of an unknown plan that no longer fits the egress MTU,
    /// which counts as `unknown_plan` and as `no_telemetry_mtu`; and separately under the
    /// digest and epoch events).
    pub enum TelemetryEvent {
        /// Edge ingress: a shim was inserted.
        ShimInserted => "shim_inserted",
        /// A transit hop encoded its values into the shim.
        TransitEncoded => "transit_encoded",
        /// Edge egress: the digest was taken and the shim stripped.
        ShimStripped => "shim_stripped",
        /// In and out through edge ports of this one switch: encoded and reported without a
        /// shim on the wire.
        OneHop => "one_hop",
        /// The shim would push the packet past the egress MTU: forwarded without telemetry
        /// (not inserted at the edge, removed in transit).
        NoTelemetryMtu => "no_telemetry_mtu",
        /// No headroom in the packet buffer for the shim: forwarded without telemetry.
        NoHeadroom => "no_headroom",
        /// A shim naming a plan version this switch does not hold: forwarded without encoding
        /// (and stripped at the edge).
        UnknownPlan => "unknown_plan",
        /// Edge egress: a hop before forwarded the packet without encoding (it did not hold
        /// the packet's plan, as during a rolling plan change): the digest is incomplete, so
        /// it is not reported, and the shim is stripped.
        DigestIncomplete => "digest_incomplete",
        /// A packet from a fabric port without a shim (a neighbour without telemetry, or one
        /// that removed it): forwarded as it is.
        NoShim => "no_shim",
        /// A packet from an edge port forwarded without telemetry because no plan is
        /// installed or the packet's headers give no packet ID (IPv4 fragments past the first
        /// carry no ports and are still traced; this counts only plan-less cases).
        NoPlan => "no_plan",
        /// A digest record was put on the worker's ring for export.
        DigestRecorded => "digest_recorded",
        /// A digest record was dropped because the ring was full (the control thread fell
        /// behind).
        DigestDropped => "digest_dropped",
        /// A probe's arrival was not reported because the worker's probe ring was full (the
        /// control thread fell behind); its digest still was.
        ProbeDropped => "probe_dropped",
        /// A FlowRadar epoch ended and its flowset went to the control thread.
        EpochClosed => "epoch_closed",
        /// An epoch ended while no clean flowset was free: counting went on in the old one,
        /// which then covers more than one epoch.
        EpochLate => "epoch_late",
        /// The worker switched to a new plan at a burst boundary.
        PlanInstalled => "plan_installed",
    }
}

/// Counts per [`DropReason`], serialised as a map from reason name to count (every reason
/// listed), and read back from one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DropCounts(pub [u64; DropReason::COUNT]);

/// Counts per [`TelemetryEvent`], serialised like [`DropCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TelemetryCounts(pub [u64; TelemetryEvent::COUNT]);

macro_rules! named_count_serde {
    ($counts:ident, $ty:ident) => {
        impl $counts {
            /// The count of one value.
            pub fn get(&self, v: $ty) -> u64 {
                self.0[v as usize]
            }

            /// The sum of all counts.
            pub fn total(&self) -> u64 {
                self.0.iter().sum()
            }

            /// (name, count) pairs with a count above zero.
            pub fn nonzero(&self) -> impl Iterator<Item = ($ty, u64)> + '_ {
                $ty::ALL
                    .iter()
                    .map(|v| (*v, self.0[*v as usize]))
                    .filter(|(_, n)| *n > 0)
            }
        }

        impl Serialize for $counts {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let map: BTreeMap<&str, u64> = $ty::ALL
                    .iter()
                    .map(|v| (v.name(), self.0[*v as usize]))
                    .collect();
                map.serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $counts {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let map = BTreeMap::<String, u64>::deserialize(d)?;
                let mut out = $counts::default();
                for (name, n) in map {
                    let v = $ty::from_name(&name).ok_or_else(|| {
                        serde::de::Error::custom(format!("unknown {} `{name}`", stringify!($ty)))
                    })?;
                    out.0[v as usize] = n;
                }
                Ok(out)
            }
        }
    };
}

named_count_serde!(DropCounts, DropReason);
named_count_serde!(TelemetryCounts, TelemetryEvent);

/// Per-port totals of one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// Packets received on the port.
    pub rx_packets: u64,
    /// Bytes received on the port.
    pub rx_bytes: u64,
    /// Packets handed to the port's tx queue.
    pub tx_packets: u64,
    /// Bytes handed to the port's tx queue.
    pub tx_bytes: u64,
    /// Packets for the port not sent: its tx queue stayed full, its link was down or it was
    /// closed while restarted.
    pub tx_full_drops: u64,
    /// Packets for the port its impairment dropped (`impair` loss).
    pub impair_lost: u64,
    /// Packets for the port its impairment's full delay line dropped (`impair_overflow`).
    pub impair_overflow: u64,
}

/// A worker's own running totals, plain integers it owns; published every few bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LocalCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets handed to a tx queue.
    pub tx_packets: u64,
    /// Bytes handed to a tx queue.
    pub tx_bytes: u64,
    /// Tx calls made again for a burst that a call did not take whole (the first call is
    /// not a retry: a burst dropped after 16 calls counts 15).
    pub tx_retries: u64,
    /// Packets not sent: a tx queue stayed full, a link was down or a port closed.
    pub tx_full_drops: u64,
    /// Packets an impaired port held in its delay line.
    pub impair_delayed: u64,
    /// Packets an impaired port reordered.
    pub impair_reordered: u64,
    /// TSC cycles spent in loop iterations that received packets.
    pub busy_cycles: u64,
    /// Loop iterations that received packets.
    pub busy_polls: u64,
    /// Packets dropped by the pipeline, by reason.
    pub drops: DropCounts,
    /// Telemetry events.
    pub telemetry: TelemetryCounts,
    /// Per-port totals, by port index.
    pub ports: [PortCounters; MAX_PORTS],
}

impl LocalCounters {
    /// Total pipeline drops.
    pub fn dropped(&self) -> u64 {
        self.drops.total()
    }

    /// Counts a drop.
    #[inline(always)]
    pub fn drop_one(&mut self, r: DropReason) {
        self.drops.0[r as usize] += 1;
    }

    /// Counts a telemetry event.
    #[inline(always)]
    pub fn event(&mut self, e: TelemetryEvent) {
        self.telemetry.0[e as usize] += 1;
    }

    /// Counts `n` telemetry events of one kind.
    #[inline(always)]
    pub fn events(&mut self, e: TelemetryEvent, n: u64) {
        self.telemetry.0[e as usize] += n;
    }

    /// Visits every counter in a fixed order (the one place that lists the fields, so
    /// publishing, reading and summing cannot miss one).
    fn visit(&mut self, mut f: impl FnMut(&mut u64)) {
        f(&mut self.rx_packets);
        f(&mut self.rx_bytes);
        f(&mut self.tx_packets);
        f(&mut self.tx_bytes);
        f(&mut self.tx_retries);
        f(&mut self.tx_full_drops);
        f(&mut self.impair_delayed);
        f(&mut self.impair_reordered);
        f(&mut self.busy_cycles);
        f(&mut self.busy_polls);
        self.drops.0.iter_mut().for_each(&mut f);
        self.telemetry.0.iter_mut().for_each(&mut f);
        for p in &mut self.ports {
            f(&mut p.rx_packets);
            f(&mut p.rx_bytes);
            f(&mut p.tx_packets);
            f(&mut p.tx_bytes);
            f(&mut p.tx_full_drops);
            f(&mut p.impair_lost);
            f(&mut p.impair_overflow);
        }
    }

    /// Adds another set of totals (for sums over workers).
    pub fn add(&mut self, o: &LocalCounters) {
        let mut theirs = [0u64; FIELDS];
        let mut o = *o;
        let mut i = 0;
        o.visit(|v| {
            theirs[i] = *v;
            i += 1;
        });
        let mut i = 0;
        self.visit(|v| {
            *v += theirs[i];
            i += 1;
        });
    }
}

/// Counters per port in [`PortCounters`].
const PORT_FIELDS: usize = 7;

/// Counters in [`LocalCounters`] (as [`LocalCounters::visit`] lists them).
const FIELDS: usize = 10 + DropReason::COUNT + TelemetryEvent::COUNT + PORT_FIELDS * MAX_PORTS;

/// A worker's counters as the control thread sees them: one writer (the worker, with plain
/// relaxed stores, no atomic read-modify-write), any number of readers. Cache-padded so
/// workers never share a line.
pub struct SharedCounters {
    cells: CachePadded<[AtomicU64; FIELDS]>,
}

impl Default for SharedCounters {
    fn default() -> Self {
        SharedCounters {
            cells: CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

impl SharedCounters {
    /// Publishes the worker's totals. Only the owning worker calls this.
    #[inline]
    pub fn publish(&self, c: &LocalCounters) {
        let mut c = *c;
        let mut i = 0;
        c.visit(|v| {
            self.cells[i].store(*v, Ordering::Relaxed);
            i += 1;
        });
    }

    /// Reads the last published totals.
    pub fn read(&self) -> LocalCounters {
        let mut c = LocalCounters::default();
        let mut i = 0;
        c.visit(|v| {
            *v = self.cells[i].load(Ordering::Relaxed);
            i += 1;
        });
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared cells hold exactly the counters a worker has (a counter added to the
    /// struct and not to the count indexed past the cells: every switch panicked).
    #[test]
    fn the_shared_cells_fit_every_counter() {
        let mut n = 0;
        LocalCounters::default().visit(|_| n += 1);
        assert_eq!(n, FIELDS);
    }

    #[test]
    fn publish_read_round_trip() {
        let s = SharedCounters::default();
        let mut c = LocalCounters {
            rx_packets: 5,
            tx_bytes: 9,
            busy_polls: 3,
            ..Default::default()
        };
        c.drop_one(DropReason::NoRoute);
        c.drops.0[DropReason::ShimFromHost as usize] = 3;
        c.event(TelemetryEvent::DigestDropped);
        c.ports[MAX_PORTS - 1].tx_bytes = 77;
        s.publish(&c);
        assert_eq!(s.read(), c);
        assert_eq!(c.dropped(), 4);
        let mut sum = c;
        sum.add(&c);
        assert_eq!(sum.ports[MAX_PORTS - 1].tx_bytes, 154);
        assert_eq!(sum.telemetry.get(TelemetryEvent::DigestDropped), 2);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert_eq!(DropReason::from_name(r.name()), Some(*r));
        }
    }

    #[test]
    fn counts_serialise_as_named_maps_and_read_back() {
        let mut d = DropCounts::default();
        d.0[DropReason::TtlExpired as usize] = 7;
        let text = serde_json::to_string(&d).unwrap();
        assert!(text.contains("\"ttl_expired\":7"), "{text}");
        assert!(
            text.contains("\"no_route\":0"),
            "every reason is listed: {text}"
        );
        let back: DropCounts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, d);
        let err = serde_json::from_str::<DropCounts>("{\"nope\":1}").unwrap_err();
        assert!(
            err.to_string().contains("unknown DropReason `nope`"),
            "{err}"
        );
        let mut t = TelemetryCounts::default();
        t.0[TelemetryEvent::ShimInserted as usize] = 1;
        let back: TelemetryCounts =
            serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}

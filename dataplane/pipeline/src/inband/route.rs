//! Routing (longest prefix match, ECMP by the key hash), the rewrite (TTL, checksum, MACs) and
//! the telemetry action from the ports' roles and the shim. The parse (stage 1) routes every
//! packet whose route has one next hop as soon as it is parsed; stage 3, once the key hashes
//! are known, routes the others and prefetches each counted flow's FlowRadar entry.

use telemetry::wire::shim::shim_len;

use super::{Action, Meta, NO_PLAN, Scratch, State};
use crate::burst::{BurstVerdicts, MAX_BURST};
use crate::counters::{LocalCounters, TelemetryEvent};
use crate::fib::NextHop;
use crate::forward::{Forwarder, Ipv4Offsets, Verdict};
use crate::frame::PacketBuf;
use crate::tables::MAX_PORTS;

/// What routing a burst found, for the per-burst work.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Routed {
    /// Bytes per egress port.
    pub port_bytes: [u64; MAX_PORTS],
    /// Bit `e`: some packet leaves by port `e`.
    pub used: u32,
    /// Bit `2e + p`: some packet leaving by port `e` encodes with plan `p`.
    pub encoding: u64,
    /// Packets forwarded.
    pub tx_packets: u64,
    /// Per plan (current, previous): bit `i` when packet `i` encodes with it.
    pub lanes: [u64; 2],
    /// When every forwarded packet takes one action with one plan and leaves by one port:
    /// (action, plan, port).
    pub uniform: Option<(Action, u8, u8)>,
    /// Bit `i`: packet `i` waits for its key hash to pick one of its route's next hops.
    pub ecmp: u64,
    /// The forwarded packets' action, plan and port, packed, ORed and ANDed together: equal
    /// when every forwarded packet had the same.
    pub keys_or: u32,
    pub keys_and: u32,
    /// Bit `i`: packet `i` is forwarded.
    pub forwarded: u64,
    /// Bytes forwarded.
    pub bytes: u64,
}

impl Routed {
    /// Nothing routed yet.
    pub fn new() -> Routed {
        Routed {
            keys_and: u32::MAX,
            ..Routed::default()
        }
    }

    /// Notes that packet `i`, of `len` bytes, is forwarded with `meta`'s action and plan by
    /// port `e`: per packet only what tells whether the burst is uniform ([`Routed::tally`]
    /// does the rest once per burst).
    #[inline(always)]
    fn note(&mut self, i: usize, len: usize, meta: &Meta, e: usize) {
        let key = meta.action as u32 | u32::from(meta.plan) << 8 | (e as u32) << 16;
        self.keys_or |= key;
        self.keys_and &= key;
        self.forwarded |= 1 << (i & (MAX_BURST - 1));
        self.bytes += len as u64;
    }

    /// Whether every forwarded packet so far took one action with one plan and leaves by one
    /// port (also when none is forwarded).
    #[inline(always)]
    pub fn same(&self) -> bool {
        self.forwarded == 0 || self.keys_or == self.keys_and
    }

    /// Once every packet is routed: the ports, plans and lanes the burst uses, and whether
    /// it is uniform (for a uniform burst from the packets' common key alone).
    fn tally<B: PacketBuf>(&mut self, metas: &[Meta], pkts: &[B]) {
        if self.forwarded == 0 {
            return;
        }
        self.tx_packets = u64::from(self.forwarded.count_ones());
        if self.same() {
            let key = self.keys_and;
            let (action, p, e) = (
                Action::from_u8(key as u8),
                (key >> 8) as u8,
                (key >> 16) as u8,
            );
            self.uniform = Some((action, p, e));
            let e = usize::from(e) & (MAX_PORTS - 1);
            self.port_bytes[e] = self.bytes;
            self.used = 1 << e;
            if action.encodes() {
                let p = usize::from(p & 1);
                self.encoding = 1 << (2 * e + p);
                self.lanes[p] = self.forwarded;
            }
            return;
        }
        let mut bits = self.forwarded;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize & (MAX_BURST - 1);
            bits &= bits - 1;
            let (Some(meta), Some(m)) = (metas.get(i), pkts.get(i)) else {
                continue;
            };
            let e = usize::from(meta.egress) & (MAX_PORTS - 1);
            self.port_bytes[e] += m.pkt_len() as u64;
            self.used |= 1 << e;
            if meta.action.encodes() {
                let p = usize::from(meta.plan & 1);
                self.encoding |= 1 << (2 * e + p);
                self.lanes[p] |= 1 << i;
            }
        }
    }
}

impl State {
    /// Routes packet `i` (`frame`, of `len` bytes in all), parsed into `meta`, by next hop
    /// `hop`: rewrite, decide the telemetry action, and note where it goes in `r`. Returns
    /// its verdict.
    #[inline(always)]
    pub(super) fn route_to(
        &self,
        rx_port: usize,
        (i, frame, len): (usize, &mut [u8], usize),
        meta: &mut Meta,
        hop: &NextHop,
        r: &mut Routed,
        c: &mut LocalCounters,
    ) -> u16 {
        let total = meta.ip_len;
        let at = Ipv4Offsets {
            l3: usize::from(meta.l3),
            header_len: usize::from(meta.hl),
        };
        let egress = match Forwarder::rewrite(frame, at, total, hop) {
            Verdict::Forward(e) => e,
            Verdict::Drop(reason) => return c.dropped_verdict(reason),
        };
        meta.action = self.action(rx_port, usize::from(egress), meta, c);
        if matches!(meta.action, Action::Insert | Action::OneHop) {
            meta.plan = 0;
        }
        meta.egress = egress as u8;
        meta.counted = true;
        let e = usize::from(egress) & (MAX_PORTS - 1);
        r.note(i, len, meta, e);
        e as u16
    }

    /// The telemetry action of a packet from `rx_port` to `egress`, from the ports' roles and
    /// the shim it arrived with (counting why when it gets none); sets the plan it encodes
    /// with when it arrived with one.
    #[inline(always)]
    fn action(
        &self,
        rx_port: usize,
        egress: usize,
        meta: &mut Meta,
        c: &mut LocalCounters,
    ) -> Action {
        let total = meta.ip_len;
        let egress_edge = self.is_edge(egress);
        let shim_fits = |len: usize| {
            usize::from(total) + len <= usize::from(self.mtu[egress & (MAX_PORTS - 1)])
        };
        if meta.shim_len == 0 {
            if !self.is_edge(rx_port) {
                c.event(TelemetryEvent::NoShim);
                Action::None
            } else if let Some(p) = &self.plans.current {
                if egress_edge {
                    Action::OneHop
                } else if shim_fits(shim_len(p.digest_bytes())) {
                    Action::Insert
                } else {
                    c.event(TelemetryEvent::NoTelemetryMtu);
                    Action::None
                }
            } else {
                c.event(TelemetryEvent::NoPlan);
                Action::None
            }
        } else if meta.shim_plan == NO_PLAN {
            c.event(TelemetryEvent::UnknownPlan);
            if egress_edge {
                Action::Remove
            } else if shim_fits(usize::from(meta.shim_len)) {
                Action::None
            } else {
                // Passed on as it came only where it fits, as a shim of a known plan is.
                c.event(TelemetryEvent::NoTelemetryMtu);
                Action::Remove
            }
        } else if egress_edge && meta.incomplete {
            c.event(TelemetryEvent::DigestIncomplete);
            Action::Remove
        } else {
            meta.plan = meta.shim_plan;
            if egress_edge {
                Action::Strip
            } else if shim_fits(usize::from(meta.shim_len)) {
                Action::Transit
            } else {
                c.event(TelemetryEvent::NoTelemetryMtu);
                Action::Remove
            }
        }
    }

    /// Stage 3, once the key hashes are known: routes the packets whose route has several
    /// next hops (ECMP by the key hash; the parse routed the others), and prefetches the
    /// FlowRadar entry of every packet to be counted.
    #[inline(never)]
    pub(super) fn route_stage<B: PacketBuf>(
        &mut self,
        fwd: &Forwarder,
        rx_port: usize,
        pkts: &mut [B],
        s: &mut Scratch,
        out: &mut BurstVerdicts,
        c: &mut LocalCounters,
    ) {
        let Scratch {
            meta: metas,
            hashes,
            routed,
            ..
        } = s;
        let mut waiting = routed.ecmp;
        while waiting != 0 {
            let i = waiting.trailing_zeros() as usize & (MAX_BURST - 1);
            waiting &= waiting - 1;
            let (Some(m), meta) = (pkts.get_mut(i), &mut metas[i]) else {
                continue;
            };
            out.verdicts[i] = match fwd.route_hashed(meta.dst, hashes.f[i]) {
                Ok(hop) => {
                    let len = m.pkt_len();
                    self.route_to(rx_port, (i, m.data_mut(), len), meta, hop, routed, c)
                }
                Err(reason) => c.dropped_verdict(reason),
            };
        }
        let counts = self.epochs.active_ref();
        for (meta, &f) in metas.iter().zip(&hashes.f).take(pkts.len()) {
            if meta.counted {
                counts.prefetch(f);
            }
        }
        routed.tally(metas, pkts);
    }
}

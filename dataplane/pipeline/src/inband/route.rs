//! Stage 3 (route): each parsed packet, whose flow key is hashed, routed (longest prefix
//! match, ECMP by the key hash), rewritten (TTL, checksum, MACs) and given its telemetry action
//! from its ports' roles and its shim; the flow's FlowRadar entry is prefetched.

use telemetry::wire::shim::shim_len;

use super::{Action, Meta, NO_PLAN, Scratch, State};
use crate::burst::{BurstVerdicts, DROPPED};
use crate::counters::{LocalCounters, TelemetryEvent};
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
    pub encoding: u32,
    /// Packets forwarded.
    pub tx_packets: u64,
    /// Per plan (current, previous): bit `i` when packet `i` encodes with it.
    pub lanes: [u64; 2],
    /// When every forwarded packet takes one action with one plan and leaves by one port:
    /// (action, plan, port).
    pub uniform: Option<(Action, u8, u8)>,
}

impl State {
    /// Routes every parsed packet of a burst: its verdict in `out`.
    #[inline(never)]
    pub(super) fn route_stage<B: PacketBuf>(
        &mut self,
        fwd: &Forwarder,
        rx_port: usize,
        pkts: &mut [B],
        s: &mut Scratch,
        out: &mut BurstVerdicts,
        c: &mut LocalCounters,
    ) -> Routed {
        let Scratch {
            meta: metas,
            hashes,
            ..
        } = s;
        let mut r = Routed::default();
        // Action, plan and port of the first forwarded packet, packed (u32::MAX: none yet).
        let mut first = u32::MAX;
        let mut uniform = true;
        for (i, (((m, meta), v), &f)) in pkts
            .iter_mut()
            .zip(metas)
            .zip(out.verdicts.iter_mut())
            .zip(&hashes.f)
            .enumerate()
        {
            if *v & DROPPED == 0 {
                *v = match self.route(fwd, rx_port, m.data_mut(), meta, f, c) {
                    Verdict::Forward(e) => {
                        let e = usize::from(e) & (MAX_PORTS - 1);
                        r.port_bytes[e] += m.pkt_len() as u64;
                        r.used |= 1 << e;
                        if meta.action.encodes() {
                            let p = usize::from(meta.plan & 1);
                            r.encoding |= 1 << (2 * e + p);
                            r.lanes[p] |= 1 << i;
                        }
                        r.tx_packets += 1;
                        let key = meta.action as u32 | u32::from(meta.plan) << 8 | (e as u32) << 16;
                        if first == u32::MAX {
                            first = key;
                        }
                        uniform &= first == key;
                        e as u16
                    }
                    Verdict::Drop(reason) => c.dropped_verdict(reason),
                };
            }
        }
        if uniform && first != u32::MAX {
            r.uniform = Some((
                Action::from_u8(first as u8),
                (first >> 8) as u8,
                (first >> 16) as u8,
            ));
        }
        r
    }

    /// Routes one parsed packet whose key hash is `f`: route, rewrite, decide
    /// the telemetry action, and prefetch the flow's FlowRadar entry. Returns the verdict.
    #[inline(always)]
    fn route(
        &mut self,
        fwd: &Forwarder,
        rx_port: usize,
        frame: &mut [u8],
        meta: &mut Meta,
        f: u64,
        c: &mut LocalCounters,
    ) -> Verdict {
        let hop = match fwd.route_hashed(meta.dst, f) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(r),
        };
        let total = meta.ip_len;
        let at = Ipv4Offsets {
            l3: usize::from(meta.l3),
            header_len: usize::from(meta.hl),
        };
        let v = Forwarder::rewrite(frame, at, total, hop);
        let Verdict::Forward(egress) = v else {
            return v;
        };
        let egress_edge = self.is_edge(usize::from(egress));
        let shim_fits = |len: usize| {
            usize::from(total) + len <= usize::from(self.mtu[usize::from(egress) & (MAX_PORTS - 1)])
        };
        meta.action = if meta.shim_len == 0 {
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
            } else {
                Action::None
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
        };
        if matches!(meta.action, Action::Insert | Action::OneHop) {
            meta.plan = 0;
        }
        meta.egress = egress as u8;
        meta.counted = true;
        self.epochs.active_ref().prefetch(f);
        v
    }
}

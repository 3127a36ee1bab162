//! Stage 6 (encode): each forwarded packet's draw applied to its digest with the burst's
//! prepared values, its shim inserted, updated or stripped, a digest record put on the ring
//! at an edge egress, and the packet counted in the epoch's flow cache and the port's totals.

use telemetry::flowradar::FlowKey;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::pint::plan::HopInput;
use telemetry::wire::probe::ProbePayload;
use telemetry::wire::shim::{FORMAT, first_flags, shim_len};

use super::route::Routed;
use super::{Action, BurstTime, Meta, Scratch, State};
use crate::burst::MAX_BURST;
use crate::counters::{LocalCounters, TelemetryEvent};
use crate::digest::{ProbeRecord, RingDigest};
use crate::frame::PacketBuf;
use crate::tables::MAX_PORTS;

impl State {
    /// Encodes, reshapes, reports and counts every forwarded packet of a burst received on
    /// `rx_port`; returns the bytes handed to tx queues. A burst whose packets all do the
    /// same (the common case: one action, one plan, one egress port) takes a loop made for
    /// that action, which keeps its totals in registers.
    #[inline(never)]
    pub(super) fn encode_stage<B: PacketBuf>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        s: &Scratch,
        routed: &Routed,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> u64 {
        // A uniform burst takes the loop of its action (the lean one when the draw stage
        // encoded its digests whole), with the plan held for the burst (plans change only
        // between bursts).
        macro_rules! uniform {
            ($a:ident, $p:expr, $e:expr) => {
                match self.plans.get_arc($p & 1) {
                    Some(plan) => {
                        let u = Uniform {
                            plan,
                            p: usize::from($p & 1),
                            e: usize::from($e) & (MAX_PORTS - 1),
                        };
                        let sent = if s.whole {
                            self.encode_whole::<B, $a>(rx_port, pkts, s, routed, &u, time, c)
                        } else {
                            self.encode_uniform::<B, $a>(rx_port, pkts, s, &u, time, c)
                        };
                        sent.count(uniform_action($a), u.e, c)
                    }
                    None => self.encode_mixed(rx_port, pkts, s, time, c),
                }
            };
        }
        let tx_bytes = match routed.uniform {
            Some((Action::Transit, p, e)) => uniform!(TRANSIT, p, e),
            Some((Action::Insert, p, e)) => uniform!(INSERT, p, e),
            Some((Action::Strip, p, e)) => uniform!(STRIP, p, e),
            _ => self.encode_mixed(rx_port, pkts, s, time, c),
        };
        let pushed = self.digests.push_burst();
        c.events(TelemetryEvent::DigestRecorded, pushed.recorded);
        c.events(TelemetryEvent::DigestDropped, pushed.dropped);
        tx_bytes
    }

    /// The encode loop of a burst whose forwarded packets all take action `A` with one plan
    /// and leave by one port (`u`), their draws applied here packet by packet.
    #[inline(always)]
    fn encode_uniform<B: PacketBuf, const A: u8>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        s: &Scratch,
        u: &Uniform,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> Sent {
        let action = uniform_action(A);
        let prepared = &s.prepared[u.p][u.e];
        let (mut ahead, mut sent) = (0u64, Sent::default());
        for (i, (m, meta)) in pkts.iter_mut().zip(&s.meta).enumerate() {
            if !meta.counted {
                continue;
            }
            let len = m.pkt_len() as u64;
            let counted = self.step(
                action, &u.plan, m, meta, i, s, rx_port, prepared, ahead, time, c,
            );
            match counted {
                Some(ev) if ev == done_event(action) => sent.done += 1,
                Some(ev) => c.event(ev),
                None => {}
            }
            ahead += len;
            sent.add(m.pkt_len());
        }
        sent
    }

    /// The encode loop of a burst whose forwarded packets all take action `A` with one plan
    /// and leave by one port (`u`), their digests encoded whole by the draw stage: per
    /// packet only the digest written (or the shim inserted, or the record taken and the
    /// shim stripped) and the flow counted, with everything the burst shares hoisted.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn encode_whole<B: PacketBuf, const A: u8>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        s: &Scratch,
        routed: &Routed,
        u: &Uniform,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> Sent {
        let action = uniform_action(A);
        let plan = &*u.plan;
        let field = DigestField::of(plan.digest_bytes());
        let mut sent = Sent::default();
        let mut bits = routed.forwarded;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize & (MAX_BURST - 1);
            bits &= bits - 1;
            let (Some(m), Some(meta)) = (pkts.get_mut(i), s.meta.get(i)) else {
                continue;
            };
            let digest = s.lanes.digest[i];
            let eth_at = usize::from(meta.eth_at);
            match action {
                Action::Transit => {
                    field.put(m.data_mut(), eth_at + 6, digest);
                    sent.done += 1;
                }
                Action::Insert => {
                    if insert_shim(m, meta, self.shim_ethertype, plan, field, digest) {
                        sent.done += 1;
                    } else {
                        c.event(TelemetryEvent::NoHeadroom);
                    }
                }
                _ => {
                    self.report(&*m, meta, i, s, rx_port, plan.version(), digest, time, c);
                    strip(m, meta);
                    sent.done += 1;
                }
            }
            self.count_flow(s, i, meta);
            sent.add(m.pkt_len());
        }
        sent
    }

    /// The encode stage for any burst.
    fn encode_mixed<B: PacketBuf>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        s: &Scratch,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> u64 {
        let mut ahead = [0u64; MAX_PORTS];
        let mut tx_bytes = 0u64;
        // The plans, held for the burst (plans change only between bursts).
        let plans = [self.plans.get_arc(0), self.plans.get_arc(1)];
        for (i, (m, meta)) in pkts.iter_mut().zip(&s.meta).enumerate() {
            if !meta.counted {
                continue;
            }
            let e = usize::from(meta.egress) & (MAX_PORTS - 1);
            let len = m.pkt_len() as u64;
            let p = usize::from(meta.plan & 1);
            match (meta.action, plans[p].as_deref()) {
                (Action::None, _) => {
                    self.count_flow(s, i, meta);
                }
                (Action::Remove, _) => {
                    // At an edge egress (an unknown plan, or a digest left incomplete at a
                    // hop before) the packet still arrived: a probe's arrival is reported
                    // without the digest, so that its stream shows no loss.
                    if self.is_edge(e) {
                        self.report_probe(&*m, meta, i, s, time, c);
                    }
                    strip(m, meta);
                    self.count_flow(s, i, meta);
                }
                (action, Some(plan)) => {
                    let prepared = &s.prepared[p][e];
                    let done = self.step(
                        action, plan, m, meta, i, s, rx_port, prepared, ahead[e], time, c,
                    );
                    if let Some(ev) = done {
                        c.event(ev);
                    }
                }
                (_, None) => {
                    self.count_flow(s, i, meta);
                }
            }
            ahead[e] += len;
            // The frame may have grown or shrunk by a shim.
            let new_len = m.pkt_len() as u64;
            tx_bytes += new_len;
            let pc = &mut c.ports[e];
            pc.tx_packets += 1;
            pc.tx_bytes += new_len;
        }
        tx_bytes
    }

    /// Counts packet `i` in its flow's FlowRadar entry.
    #[inline(always)]
    fn count_flow(&mut self, s: &Scratch, i: usize, meta: &Meta) {
        let i = i & (s.hashes.f.len() - 1);
        self.epochs.active().count(
            s.hashes.f[i],
            s.hashes.w0[i],
            s.hashes.w1[i],
            u32::from(meta.ip_len),
        );
    }

    /// One packet's encode work for an action that encodes: its digest after this hop, the
    /// shim inserted, updated or stripped, the digest record gathered at an edge egress, the
    /// flow counted. Returns the event to count (None for an action that does not encode).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn step<B: PacketBuf>(
        &mut self,
        action: Action,
        plan: &SwitchPlan,
        m: &mut B,
        meta: &Meta,
        i: usize,
        s: &Scratch,
        rx_port: usize,
        prepared: &telemetry::pint::encoder::PreparedValues,
        queue_bytes: u64,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> Option<TelemetryEvent> {
        let i = i & (s.hashes.f.len() - 1);
        let pid = s.hashes.pid[i] as u32;
        let e = usize::from(meta.egress) & (MAX_PORTS - 1);
        let input = || HopInput {
            pid,
            hop: usize::from(meta.hop),
            switch_id: self.switch_id,
            ingress_port: rx_port as u32,
            egress_port: e as u32,
            hop_latency_ns: time.latency_ns,
            queue_bytes,
            utilization: time.util[e],
        };
        let digest = plan.apply_lane(&s.lanes, i, s.hashes.m[i], prepared, queue_bytes, input);
        let eth_at = usize::from(meta.eth_at);
        let done = match action {
            Action::Insert => {
                let field = DigestField::of(plan.digest_bytes());
                if insert_shim(m, meta, self.shim_ethertype, plan, field, digest) {
                    Some(TelemetryEvent::ShimInserted)
                } else {
                    Some(TelemetryEvent::NoHeadroom)
                }
            }
            Action::Transit => {
                // The shim is the plan's (the parse matched its tag and length).
                DigestField::of(plan.digest_bytes()).put(m.data_mut(), eth_at + 6, digest);
                Some(TelemetryEvent::TransitEncoded)
            }
            Action::Strip | Action::OneHop => {
                self.report(&*m, meta, i, s, rx_port, plan.version(), digest, time, c);
                if action == Action::Strip {
                    strip(m, meta);
                    Some(TelemetryEvent::ShimStripped)
                } else {
                    Some(TelemetryEvent::OneHop)
                }
            }
            Action::None | Action::Remove => None,
        };
        self.count_flow(s, i, meta);
        done
    }

    /// Reports packet `i` at an edge egress: its digest record gathered for the ring, and
    /// its probe, if it carries one, recorded.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn report<B: PacketBuf>(
        &mut self,
        m: &B,
        meta: &Meta,
        i: usize,
        s: &Scratch,
        rx_port: usize,
        version: u32,
        digest: u64,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) {
        self.report_probe(m, meta, i, s, time, c);
        let i = i & (s.hashes.f.len() - 1);
        let (w0, w1) = (s.hashes.w0[i], s.hashes.w1[i]);
        self.digests.gather(RingDigest::new(
            w0,
            w1,
            meta.hop,
            rx_port as u8,
            meta.egress,
            s.hashes.pid[i] as u32,
            version,
            digest,
            time.now_tsc,
        ));
    }

    /// Records packet `i`'s probe, if it carries one, as arrived at this edge egress (called
    /// before its shim is stripped: `meta`'s offsets are the frame's as parsed).
    #[inline(always)]
    fn report_probe<B: PacketBuf>(
        &mut self,
        m: &B,
        meta: &Meta,
        i: usize,
        s: &Scratch,
        time: &BurstTime,
        c: &mut LocalCounters,
    ) {
        if meta.udp_payload_at == 0 {
            return;
        }
        let Some(probe) = m
            .data()
            // Within the IP packet: the frame's padding is no probe.
            .get(usize::from(meta.udp_payload_at)..usize::from(meta.l3) + usize::from(meta.ip_len))
            .and_then(ProbePayload::decode)
        else {
            return;
        };
        let i = i & (s.hashes.f.len() - 1);
        let p = ProbeRecord {
            key: FlowKey::from_words(s.hashes.w0[i], s.hashes.w1[i]),
            probe,
            tsc: time.now_tsc,
        };
        if !self.digests.push_probe(p) {
            c.event(TelemetryEvent::ProbeDropped);
        }
    }
}

/// Whether a burst whose packets all take `action` (with one plan and port) has an encode
/// loop of its own (which can take digests encoded whole in the draw stage).
pub(super) fn has_uniform_loop(action: Action) -> bool {
    matches!(action, Action::Transit | Action::Insert | Action::Strip)
}

/// What the packets of a uniform burst share.
struct Uniform {
    /// The plan, held for the burst.
    plan: std::sync::Arc<SwitchPlan>,
    /// Which of the worker's plans it is (0 current, 1 previous), and the egress port.
    p: usize,
    e: usize,
}

/// What a uniform burst's encode loop sent.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    packets: u64,
    bytes: u64,
    /// Packets whose action went as planned.
    done: u64,
}

impl Sent {
    /// Notes a packet of `len` bytes (after its encode) handed to the port.
    #[inline(always)]
    fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }

    /// Counts what `action`'s loop sent by port `e`; returns the bytes.
    #[inline(always)]
    fn count(self, action: Action, e: usize, c: &mut LocalCounters) -> u64 {
        c.events(done_event(action), self.done);
        let pc = &mut c.ports[e & (MAX_PORTS - 1)];
        pc.tx_packets += self.packets;
        pc.tx_bytes += self.bytes;
        self.bytes
    }
}

/// The uniform loops' actions, as const parameters.
const TRANSIT: u8 = 0;
const INSERT: u8 = 1;
const STRIP: u8 = 2;

/// The action of a uniform loop's const parameter.
#[inline(always)]
fn uniform_action(a: u8) -> Action {
    match a {
        TRANSIT => Action::Transit,
        INSERT => Action::Insert,
        _ => Action::Strip,
    }
}

/// The event a packet of `action` counts when all goes well.
#[inline(always)]
fn done_event(action: Action) -> TelemetryEvent {
    match action {
        Action::Insert => TelemetryEvent::ShimInserted,
        Action::Transit => TelemetryEvent::TransitEncoded,
        Action::Strip => TelemetryEvent::ShimStripped,
        _ => TelemetryEvent::OneHop,
    }
}

/// Inserts the shim of `plan` carrying `digest` (in the plan's digest `field`) and the TTL
/// the packet arrived with (the hops after count their index from it) after the Ethernet
/// header (which ends with the EtherType field at `meta.eth_at`); false, changing nothing,
/// without headroom for it.
#[inline(always)]
fn insert_shim<B: PacketBuf>(
    m: &mut B,
    meta: &Meta,
    ethertype: u16,
    plan: &SwitchPlan,
    field: DigestField,
    digest: u64,
) -> bool {
    let (eth_at, ttl) = (usize::from(meta.eth_at), meta.ttl);
    let n = plan.digest_bytes();
    let len = shim_len(n);
    if !m.prepend(len) {
        return false;
    }
    let f = m.data_mut();
    move_header(f, len, 0, eth_at);
    // The frame's own EtherType (IPv4) stays where it was and ends the shim.
    if let Some(s) = f.get_mut(eth_at..eth_at + 6) {
        s[0..2].copy_from_slice(&ethertype.to_be_bytes());
        s[2] = (FORMAT << 4) | n as u8;
        s[3] = first_flags(ttl);
        s[4..6].copy_from_slice(&plan.tag().to_be_bytes());
    }
    field.put(f, eth_at + 6, digest);
    true
}

/// Where a shim's digest of `n` bytes sits in the 8 bytes from its start, worked out once
/// for a burst.
#[derive(Debug, Clone, Copy)]
struct DigestField {
    /// Left shift of a right-aligned digest into the word.
    shift: u32,
    /// The bits of the word behind the digest, kept.
    keep: u64,
}

impl DigestField {
    /// The field of an `n`-byte digest (1 to 8; other values are taken as the nearest).
    #[inline(always)]
    fn of(n: usize) -> DigestField {
        let bits = 8 * n.clamp(1, 8) as u32;
        DigestField {
            shift: 64 - bits,
            keep: u64::MAX.checked_shr(bits).unwrap_or(0),
        }
    }

    /// Writes `digest` at `at` as one 8-byte read, merge and write (a shim's digest is
    /// followed by at least its EtherType and an IPv4 header, so the 8 bytes are in the
    /// frame; a shorter frame is left as it is).
    #[inline(always)]
    fn put(self, f: &mut [u8], at: usize, digest: u64) {
        let Some(w) = f.get_mut(at..at + 8) else {
            return;
        };
        let old = u64::from_be_bytes((&*w).try_into().expect("8 bytes"));
        let new = (old & self.keep) | (digest << self.shift);
        w.copy_from_slice(&new.to_be_bytes());
    }
}

/// Moves the `len` bytes of the Ethernet header (MACs and VLAN tags) from `from` to `to`,
/// with fixed-size copies for the common untagged header.
#[inline(always)]
fn move_header(f: &mut [u8], from: usize, to: usize, len: usize) {
    if len == 12 {
        let mut h = [0u8; 12];
        h.copy_from_slice(&f[from..from + 12]);
        f[to..to + 12].copy_from_slice(&h);
    } else {
        f.copy_within(from..from + len, to);
    }
}

/// Removes the shim a packet arrived with, restoring the frame plain forwarding gives.
#[inline(always)]
fn strip<B: PacketBuf>(m: &mut B, meta: &Meta) {
    let len = usize::from(meta.shim_len);
    let eth_at = usize::from(meta.eth_at);
    // The shim's next-EtherType field ends up where the Ethernet header's EtherType goes.
    move_header(m.data_mut(), 0, len, eth_at);
    let _ = m.adj(len);
}

//! Stage 6 (encode): each forwarded packet's draw applied to its digest with the burst's
//! prepared values, its shim inserted, updated or stripped, a digest record put on the ring
//! at an edge egress, and the packet counted in the epoch's flow cache and the port's totals.

use telemetry::flowradar::FlowKey;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::pint::plan::HopInput;
use telemetry::wire::probe::ProbePayload;
use telemetry::wire::shim::{FORMAT, shim_len};

use super::route::Routed;
use super::{Action, BurstTime, Meta, Scratch, State};
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
        // The uniform loop of action `$a`, taking the digests as the draw stage left them
        // when it encoded the burst whole.
        macro_rules! uniform {
            ($a:ident, $pe:expr) => {
                if s.whole {
                    self.encode_uniform::<B, $a, true>(rx_port, pkts, s, $pe, time, c)
                } else {
                    self.encode_uniform::<B, $a, false>(rx_port, pkts, s, $pe, time, c)
                }
            };
        }
        let tx_bytes = match routed.uniform {
            Some((Action::Transit, p, e)) => uniform!(TRANSIT, (p, e)),
            Some((Action::Insert, p, e)) => uniform!(INSERT, (p, e)),
            Some((Action::Strip, p, e)) => uniform!(STRIP, (p, e)),
            _ => self.encode_mixed(rx_port, pkts, s, time, c),
        };
        let pushed = self.digests.push_burst();
        c.events(TelemetryEvent::DigestRecorded, pushed.recorded);
        c.events(TelemetryEvent::DigestDropped, pushed.dropped);
        tx_bytes
    }

    /// The encode stage for a burst whose forwarded packets all take action `A` with plan
    /// `p` and leave by port `e`; with `WHOLE`, their digests are already encoded.
    #[inline(always)]
    fn encode_uniform<B: PacketBuf, const A: u8, const WHOLE: bool>(
        &mut self,
        rx_port: usize,
        pkts: &mut [B],
        s: &Scratch,
        (p, e): (u8, u8),
        time: &BurstTime,
        c: &mut LocalCounters,
    ) -> u64 {
        let action = match A {
            TRANSIT => Action::Transit,
            INSERT => Action::Insert,
            _ => Action::Strip,
        };
        let (p, e) = (usize::from(p & 1), usize::from(e) & (MAX_PORTS - 1));
        // The plan, held for the burst (plans change only between bursts).
        let Some(plan) = self.plans.get_arc(p as u8) else {
            return self.encode_mixed(rx_port, pkts, s, time, c);
        };
        let prepared = &s.prepared[p][e];
        let (mut ahead, mut tx_bytes, mut forwarded, mut done) = (0u64, 0u64, 0u64, 0u64);
        for (i, (m, meta)) in pkts.iter_mut().zip(&s.meta).enumerate() {
            if !meta.counted {
                continue;
            }
            let len = m.pkt_len() as u64;
            let counted = self.step::<B, WHOLE>(
                action, &plan, m, meta, i, s, rx_port, prepared, ahead, time, c,
            );
            match counted {
                Some(ev) if ev == done_event(action) => done += 1,
                Some(ev) => c.event(ev),
                None => {}
            }
            ahead += len;
            tx_bytes += m.pkt_len() as u64;
            forwarded += 1;
        }
        c.events(done_event(action), done);
        let pc = &mut c.ports[e];
        pc.tx_packets += forwarded;
        pc.tx_bytes += tx_bytes;
        tx_bytes
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
                    strip(m, meta);
                    self.count_flow(s, i, meta);
                }
                (action, Some(plan)) => {
                    let prepared = &s.prepared[p][e];
                    let done = self.step::<B, false>(
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
    /// flow counted. With `WHOLE` the lane's digest is already encoded (stage 5). Returns the
    /// event to count (None for an action that does not encode).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn step<B: PacketBuf, const WHOLE: bool>(
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
        let (w0, w1, pid) = (s.hashes.w0[i], s.hashes.w1[i], s.hashes.pid[i] as u32);
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
        let digest = if WHOLE {
            s.lanes.digest[i]
        } else {
            plan.apply_lane(&s.lanes, i, s.hashes.m[i], prepared, queue_bytes, input)
        };
        let eth_at = usize::from(meta.eth_at);
        let done = match action {
            Action::Insert => {
                if insert_shim(m, eth_at, self.shim_ethertype, plan, digest) {
                    Some(TelemetryEvent::ShimInserted)
                } else {
                    Some(TelemetryEvent::NoHeadroom)
                }
            }
            Action::Transit => {
                // The shim is the plan's (the parse matched its tag and length).
                put_digest(m.data_mut(), eth_at + 6, plan.digest_bytes(), digest);
                Some(TelemetryEvent::TransitEncoded)
            }
            Action::Strip | Action::OneHop => {
                if meta.udp_payload_at != 0
                    && let Some(probe) = m
                        .data()
                        .get(usize::from(meta.udp_payload_at)..)
                        .and_then(ProbePayload::decode)
                {
                    let p = ProbeRecord {
                        key: FlowKey::from_words(w0, w1),
                        probe,
                        tsc: time.now_tsc,
                    };
                    if !self.digests.push_probe(p) {
                        c.event(TelemetryEvent::ProbeDropped);
                    }
                }
                self.digests.gather(RingDigest::new(
                    w0,
                    w1,
                    meta.hop,
                    rx_port as u8,
                    meta.egress,
                    pid,
                    plan.version(),
                    digest,
                    time.now_tsc,
                ));
                if action == Action::Strip {
                    strip(m, meta);
                    Some(TelemetryEvent::ShimStripped)
                } else {
                    Some(TelemetryEvent::OneHop)
                }
            }
            Action::None | Action::Remove => None,
        };
        self.epochs
            .active()
            .count(s.hashes.f[i], w0, w1, u32::from(meta.ip_len));
        done
    }
}

/// Whether a burst whose packets all take `action` (with one plan and port) has an encode
/// loop of its own (which can take digests encoded whole in the draw stage).
pub(super) fn has_uniform_loop(action: Action) -> bool {
    matches!(action, Action::Transit | Action::Insert | Action::Strip)
}

/// The uniform loops' actions, as const parameters.
const TRANSIT: u8 = 0;
const INSERT: u8 = 1;
const STRIP: u8 = 2;

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

/// Inserts the shim of `plan` carrying `digest` after the Ethernet header (which ends with the
/// EtherType field at `eth_at`); false, changing nothing, without headroom for it.
#[inline(always)]
fn insert_shim<B: PacketBuf>(
    m: &mut B,
    eth_at: usize,
    ethertype: u16,
    plan: &SwitchPlan,
    digest: u64,
) -> bool {
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
        s[3] = 0;
        s[4..6].copy_from_slice(&plan.tag().to_be_bytes());
    }
    put_digest(f, eth_at + 6, n, digest);
    true
}

/// Writes the low `n` bytes (1 to 8) of `digest` big-endian at `at`, as one 8-byte read,
/// merge and write (a shim's digest is followed by at least its EtherType and an IPv4
/// header, so the 8 bytes are in the frame; a shorter frame is left as it is).
#[inline(always)]
fn put_digest(f: &mut [u8], at: usize, n: usize, digest: u64) {
    let Some(w) = f.get_mut(at..at + 8) else {
        return;
    };
    let bits = 8 * n as u32;
    let keep = u64::MAX.checked_shr(bits).unwrap_or(0);
    let old = u64::from_be_bytes((&*w).try_into().expect("8 bytes"));
    let new = (old & keep) | (digest << (64 - bits));
    w.copy_from_slice(&new.to_be_bytes());
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

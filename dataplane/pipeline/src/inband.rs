//! The telemetry stages of one worker (`docs/architecture.md`, "The per-packet work"):
//!
//! - pass 1, per packet: parse once (Ethernet, VLAN tags, the shim if any, IPv4, ports),
//!   hash the flow key once (`F`, which also picks the ECMP next hop), route, rewrite TTL and
//!   MACs, decide the packet's telemetry action from its ports' roles and the shim, compute
//!   the packet ID, and locate and prefetch its FlowRadar block and cells;
//! - once per burst: read the clock (hop latency = now - the burst's rx time), update each
//!   used egress port's utilisation estimate;
//! - pass 2, per packet: encode this hop into the digest (the plan the shim names), insert,
//!   update or strip the shim, put a digest record on the ring at an edge egress, and count
//!   the packet in the active flowset.
//!
//! No locks, no allocation, no floating point; plans come from a [`PlanCell`] checked once
//! per burst, flowsets from the worker's [`WorkerEpochs`].

use std::sync::Arc;

use telemetry::flowradar::{FlowKey, Slots};
use telemetry::hash::key_hash;
use telemetry::packet_id::hop_index;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::pint::plan::HopInput;
use telemetry::pint::tape::packet_word;
use telemetry::wire::EtherType;
use telemetry::wire::ipv4::protocol;
use telemetry::wire::probe::ProbePayload;
use telemetry::wire::shim::{FLAG_INCOMPLETE, FORMAT, MAX_DIGEST_BYTES, shim_len};

use crate::burst::{BurstVerdicts, MAX_BURST};
use crate::clock::{Clock, SharedClock};
use crate::counters::{DropReason, LocalCounters, TelemetryEvent};
use crate::digest::{DigestProducer, DigestRecord};
use crate::epochs::{EpochStep, WorkerEpochs};
use crate::forward::{Forwarder, Ipv4Offsets, Verdict};
use crate::frame::PacketBuf;
use crate::load::{PortLoads, SharedLoad, carried_value};
use crate::plans::{PlanCell, WorkerPlans};
use crate::tables::{MAX_PORTS, PortRole, Tables};

/// What one worker needs to run the telemetry stages.
pub struct InbandSetup {
    /// This switch's ID.
    pub switch_id: u32,
    /// The EtherType that announces the shim.
    pub shim_ethertype: u16,
    /// Where new plans come from.
    pub plans: Arc<PlanCell>,
    /// The calibrated clock.
    pub clock: Arc<SharedClock>,
    /// The worker's FlowRadar epochs.
    pub epochs: WorkerEpochs,
    /// The worker's digest ring.
    pub digests: DigestProducer,
    /// The worker's utilisation estimators.
    pub loads: PortLoads,
    /// Where the worker publishes its estimates and reads the other workers'.
    pub shared_load: Arc<SharedLoad>,
}

/// A received burst.
pub struct Received<'a, B> {
    /// The port it arrived on.
    pub port: usize,
    /// Its packets.
    pub pkts: &'a mut [B],
    /// Counter value when it arrived.
    pub tsc: u64,
}

/// What a packet's telemetry does at this hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Action {
    /// Nothing (no telemetry, or dropped).
    #[default]
    None,
    /// Edge in, fabric out: insert a shim with this hop encoded.
    Insert,
    /// Fabric in, fabric out: encode into the shim.
    Transit,
    /// Fabric in, edge out: encode, report, strip the shim.
    Strip,
    /// Edge in, edge out: encode and report; no shim on the wire.
    OneHop,
    /// Remove the shim without encoding or reporting (unknown plan at the edge, or the
    /// shim no longer fits the egress MTU).
    Remove,
}

/// What pass 1 learns about a packet for pass 2.
#[derive(Debug, Clone, Copy, Default)]
struct Meta {
    action: Action,
    /// The plan: 0 current, 1 previous.
    plan: u8,
    /// Offset of the EtherType field before the shim (or IPv4).
    eth_at: u8,
    /// Length of the shim the packet arrived with (0 if none).
    shim_len: u8,
    hop: u8,
    egress: u8,
    /// Whether FlowRadar counts the packet (it is forwarded).
    counted: bool,
    /// IPv4 total length (what FlowRadar counts as bytes: the same at every hop).
    ip_len: u16,
    /// The shim says a hop before did not encode ([`FLAG_INCOMPLETE`]).
    incomplete: bool,
    /// Where a UDP payload starts in the frame as received (0: not UDP), to recognise
    /// probes at the last hop.
    udp_payload_at: u16,
    pid: u32,
    digest: u64,
    key: FlowKey,
    slots: Slots,
}

/// A worker's telemetry state.
pub struct Inband {
    state: State,
    /// What pass 1 found about each packet of the burst, for pass 2.
    meta: Box<[Meta; MAX_BURST]>,
}

/// Everything but the per-burst scratch.
struct State {
    switch_id: u32,
    shim_ethertype: u16,
    edge_ports: u32,
    mtu: [u16; MAX_PORTS],
    plan_cell: Arc<PlanCell>,
    plans: WorkerPlans,
    /// The current and previous plan's (shim tag, digest bytes), for the shim check.
    tags: [Option<(u16, usize)>; 2],
    shared_clock: Arc<SharedClock>,
    clock: Clock,
    epochs: WorkerEpochs,
    digests: DigestProducer,
    loads: PortLoads,
    shared_load: Arc<SharedLoad>,
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl Inband {
    /// The telemetry state of a worker of a switch with `tables`.
    pub fn new(tables: &Tables, setup: InbandSetup) -> Inband {
        let mut mtu = [0u16; MAX_PORTS];
        let mut edge_ports = 0u32;
        for (i, p) in tables.ports.iter().enumerate().take(MAX_PORTS) {
            mtu[i] = p.mtu;
            if p.role == PortRole::Edge {
                edge_ports |= 1 << i;
            }
        }
        let mut plans = WorkerPlans::default();
        plans.refresh(&setup.plans);
        let tags = tags_of(&plans);
        let state = State {
            tags,
            switch_id: setup.switch_id,
            shim_ethertype: setup.shim_ethertype,
            edge_ports,
            mtu,
            plan_cell: setup.plans,
            plans,
            clock: setup.clock.get(),
            shared_clock: setup.clock,
            epochs: setup.epochs,
            digests: setup.digests,
            loads: setup.loads,
            shared_load: setup.shared_load,
        };
        Inband {
            state,
            meta: Box::new([Meta::default(); MAX_BURST]),
        }
    }

    /// The plans this worker holds.
    pub fn plans(&self) -> &WorkerPlans {
        &self.state.plans
    }

    /// Work between bursts (and on idle polls): takes a new plan, ends the FlowRadar epoch
    /// when its time is up.
    #[inline(always)]
    pub fn tick(&mut self, now_tsc: u64, c: &mut LocalCounters) {
        let s = &mut self.state;
        s.refresh_plans(c);
        if s.epochs.due(now_tsc) {
            s.end_epoch(now_tsc, c);
        }
    }

    /// Runs a burst received on `rx.port` at counter value `rx.tsc`; `tx_tsc` reads the
    /// counter once the burst is routed (the time its packets leave).
    #[inline]
    pub fn process_burst<B: PacketBuf>(
        &mut self,
        fwd: &Forwarder,
        rx: Received<'_, B>,
        tx_tsc: impl FnOnce() -> u64,
        out: &mut BurstVerdicts,
        c: &mut LocalCounters,
    ) {
        let Inband { state, meta: metas } = self;
        let Received {
            port: rx_port,
            pkts,
            tsc: rx_tsc,
        } = rx;
        let n = pkts.len().min(MAX_BURST);
        state.refresh_plans(c);
        let mut port_bytes = [0u64; MAX_PORTS];
        let mut used = 0u32;
        let (mut rx_bytes, mut tx_bytes, mut tx_packets) = (0u64, 0u64, 0u64);
        let mut all_same = true;
        for (i, m) in pkts.iter_mut().enumerate().take(n) {
            let meta = &mut metas[i];
            meta.counted = false;
            meta.action = Action::None;
            let len = m.pkt_len();
            rx_bytes += len as u64;
            let v = match state.classify(fwd, rx_port, m.data_mut(), len, meta, c) {
                Verdict::Forward(e) => {
                    let e = usize::from(e);
                    port_bytes[e] += len as u64;
                    used |= 1 << e;
                    tx_packets += 1;
                    e as u16
                }
                Verdict::Drop(r) => c.dropped_verdict(r),
            };
            out.verdicts[i] = v;
            all_same &= v == out.verdicts[0];
        }
        out.all_same = all_same;

        // Once per burst: the time the packets leave, each used port's utilisation.
        let now = tx_tsc();
        let latency_ns = state.clock.ns(now.saturating_sub(rx_tsc));
        let now_ns = state.clock.ns(now);
        let mut util = [1u64; MAX_PORTS];
        let mut ports = used;
        while ports != 0 {
            let e = ports.trailing_zeros() as usize;
            ports &= ports - 1;
            let own = state.loads.on_burst(e, now_ns, port_bytes[e], 0);
            state.loads.publish(&state.shared_load, e, now);
            let others = state.shared_load.others[e].load(std::sync::atomic::Ordering::Relaxed);
            util[e] = carried_value(own.saturating_add(others));
        }

        // Pass 2: encode, shim, report, count.
        let mut ahead = [0u64; MAX_PORTS];
        for (i, m) in pkts.iter_mut().enumerate().take(n) {
            let meta = &metas[i];
            if !meta.counted {
                continue;
            }
            let e = usize::from(meta.egress);
            let len = m.pkt_len() as u64;
            if meta.action != Action::None && meta.action != Action::Remove {
                let input = HopInput {
                    pid: meta.pid,
                    hop: usize::from(meta.hop),
                    switch_id: state.switch_id,
                    ingress_port: rx_port as u32,
                    egress_port: e as u32,
                    hop_latency_ns: latency_ns,
                    queue_bytes: ahead[e],
                    utilization: util[e],
                };
                state.encode(m, meta, &input, now, c);
            } else if meta.action == Action::Remove {
                strip(m, meta);
            }
            ahead[e] += len;
            let fs = state.epochs.active();
            fs.update_slots(&meta.slots, &meta.key, u32::from(meta.ip_len));
            // The frame may have grown or shrunk by a shim.
            let new_len = m.pkt_len() as u64;
            tx_bytes += new_len;
            let pc = &mut c.ports[e];
            pc.tx_packets += 1;
            pc.tx_bytes += new_len;
        }
        c.count_burst(rx_port, n as u64, rx_bytes, tx_packets, tx_bytes);
    }
}

impl State {
    /// Takes a new plan if one was installed.
    #[inline(always)]
    fn refresh_plans(&mut self, c: &mut LocalCounters) {
        if self.plans.refresh(&self.plan_cell) {
            self.tags = tags_of(&self.plans);
            c.event(TelemetryEvent::PlanInstalled);
        }
    }

    #[cold]
    fn end_epoch(&mut self, now_tsc: u64, c: &mut LocalCounters) {
        self.clock = self.shared_clock.get();
        match self.epochs.advance(now_tsc, &self.clock) {
            EpochStep::Same => {}
            EpochStep::Closed => c.event(TelemetryEvent::EpochClosed),
            EpochStep::Late => c.event(TelemetryEvent::EpochLate),
        }
    }

    #[inline(always)]
    fn is_edge(&self, port: usize) -> bool {
        self.edge_ports & (1 << (port & 31)) != 0
    }

    /// Pass 1 for one packet: parse, route, rewrite, decide (into `meta`). Returns the
    /// verdict.
    #[inline(always)]
    fn classify(
        &mut self,
        fwd: &Forwarder,
        rx_port: usize,
        frame: &mut [u8],
        frame_len: usize,
        meta: &mut Meta,
        c: &mut LocalCounters,
    ) -> Verdict {
        let eth_at = match fwd.parse_l2(rx_port, frame) {
            Ok(a) => a,
            Err(r) => return Verdict::Drop(r),
        };
        let ty = be16(frame, eth_at);
        meta.eth_at = eth_at as u8;
        meta.shim_len = 0;
        meta.digest = 0;
        meta.plan = 0;
        meta.incomplete = false;
        // The shim, if any: its plan, digest and length.
        let mut plan: Option<u8> = None;
        let l3 = if ty == self.shim_ethertype {
            if self.is_edge(rx_port) {
                return Verdict::Drop(DropReason::ShimFromHost);
            }
            let at = eth_at + 2;
            let Some(&format) = frame.get(at) else {
                return Verdict::Drop(DropReason::Truncated);
            };
            let n = usize::from(format & 0x0f);
            if format >> 4 != FORMAT || n == 0 || n > MAX_DIGEST_BYTES {
                return Verdict::Drop(DropReason::BadShim);
            }
            let len = shim_len(n);
            if frame.len() < at + len {
                return Verdict::Drop(DropReason::Truncated);
            }
            if be16(frame, at + len - 2) != EtherType::IPV4 {
                return Verdict::Drop(DropReason::BadShim);
            }
            let tag = be16(frame, at + 2);
            let mut digest = 0u64;
            for &b in &frame[at + 4..at + 4 + n] {
                digest = (digest << 8) | u64::from(b);
            }
            plan = if self.tags[0] == Some((tag, n)) {
                Some(0)
            } else if self.tags[1] == Some((tag, n)) {
                Some(1)
            } else {
                None
            };
            if plan.is_none() {
                // Passed on without encoding: whoever reports the digest must know.
                frame[at + 1] |= FLAG_INCOMPLETE;
            }
            meta.incomplete = frame[at + 1] & FLAG_INCOMPLETE != 0;
            meta.digest = digest;
            meta.shim_len = len as u8;
            at + len
        } else if ty == EtherType::IPV4 {
            eth_at + 2
        } else {
            return Verdict::Drop(Forwarder::non_ipv4(ty));
        };
        let header_len = match Forwarder::parse_ipv4(frame, l3, frame_len) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(r),
        };
        let ip = &frame[l3..l3 + header_len];
        let ttl = ip[8];
        if ttl <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        let total = be16(ip, 2);
        let proto = ip[9];
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let ident = be16(ip, 4);
        let fragment = be16(ip, 6) & 0x3fff != 0;
        let (mut sport, mut dport, mut seq) = (0u16, 0u16, 0u32);
        meta.udp_payload_at = 0;
        if (proto == protocol::TCP || proto == protocol::UDP) && !fragment {
            let l4 = &frame[l3 + header_len..];
            if l4.len() >= 4 {
                sport = be16(l4, 0);
                dport = be16(l4, 2);
                if proto == protocol::UDP {
                    meta.udp_payload_at = (l3 + header_len + 8) as u16;
                }
                if proto == protocol::TCP && l4.len() >= 8 {
                    seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
                }
            }
        }
        let w0 = (u64::from(src) << 32) | u64::from(dst);
        let w1 = (u64::from(proto) << 32) | (u64::from(sport) << 16) | u64::from(dport);
        let f = key_hash(w0, w1);
        let hop = match fwd.route_hashed(dst, f) {
            Ok(h) => *h,
            Err(r) => return Verdict::Drop(r),
        };
        let at = Ipv4Offsets { l3, header_len };
        let v = Forwarder::rewrite(frame, at, total, &hop);
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
        } else {
            match plan {
                None => {
                    c.event(TelemetryEvent::UnknownPlan);
                    if egress_edge {
                        Action::Remove
                    } else {
                        Action::None
                    }
                }
                Some(_) if egress_edge && meta.incomplete => {
                    c.event(TelemetryEvent::DigestIncomplete);
                    Action::Remove
                }
                Some(p) => {
                    meta.plan = p;
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
        };
        if matches!(meta.action, Action::Insert | Action::OneHop) {
            meta.plan = 0;
        }
        meta.hop = hop_index(ttl).unwrap_or(0);
        meta.egress = egress as u8;
        meta.pid = telemetry::hash::packet_id(f, (u64::from(ident) << 32) | u64::from(seq));
        meta.ip_len = total;
        meta.key = FlowKey {
            src,
            dst,
            src_port: sport,
            dst_port: dport,
            protocol: proto,
        };
        meta.counted = true;
        let fs = self.epochs.active_ref();
        meta.slots = fs.slots(f);
        fs.prefetch(&meta.slots);
        v
    }

    /// Encodes this hop and does the packet's shim action.
    #[inline(always)]
    fn encode<B: PacketBuf>(
        &mut self,
        m: &mut B,
        meta: &Meta,
        input: &HopInput,
        now: u64,
        c: &mut LocalCounters,
    ) {
        let plan: &SwitchPlan = match (meta.plan, &self.plans.current, &self.plans.previous) {
            (0, Some(p), _) | (1, _, Some(p)) => p,
            _ => return,
        };
        let digest = plan.encode(meta.digest, packet_word(meta.pid), input);
        let eth_at = usize::from(meta.eth_at);
        match meta.action {
            Action::Insert => {
                let n = plan.digest_bytes();
                let len = shim_len(n);
                if !m.prepend(len) {
                    c.event(TelemetryEvent::NoHeadroom);
                    return;
                }
                let f = m.data_mut();
                move_header(f, len, 0, eth_at);
                f[eth_at..eth_at + 2].copy_from_slice(&self.shim_ethertype.to_be_bytes());
                f[eth_at + 2] = (FORMAT << 4) | n as u8;
                f[eth_at + 3] = 0;
                f[eth_at + 4..eth_at + 6].copy_from_slice(&plan.tag().to_be_bytes());
                put_digest(f, eth_at + 6, n, digest);
                c.event(TelemetryEvent::ShimInserted);
            }
            Action::Transit => {
                let n = usize::from(meta.shim_len) - shim_len(0);
                let at = eth_at + 6;
                put_digest(m.data_mut(), at, n, digest);
                c.event(TelemetryEvent::TransitEncoded);
            }
            Action::Strip | Action::OneHop => {
                let probe = match usize::from(meta.udp_payload_at) {
                    0 => None,
                    at => m.data().get(at..).and_then(ProbePayload::decode),
                };
                let rec = DigestRecord {
                    probe,
                    key: meta.key,
                    pid: meta.pid,
                    plan_version: plan.version(),
                    digest,
                    tsc: now,
                    hops: meta.hop,
                    ingress_port: input.ingress_port as u8,
                    egress_port: meta.egress,
                };
                if self.digests.push(rec).is_ok() {
                    c.event(TelemetryEvent::DigestRecorded);
                } else {
                    c.event(TelemetryEvent::DigestDropped);
                }
                if meta.action == Action::Strip {
                    strip(m, meta);
                    c.event(TelemetryEvent::ShimStripped);
                } else {
                    c.event(TelemetryEvent::OneHop);
                }
            }
            Action::None | Action::Remove => {}
        }
    }
}

/// The shim tag and digest length of the current and previous plan.
fn tags_of(plans: &WorkerPlans) -> [Option<(u16, usize)>; 2] {
    let t = |p: &Option<Arc<SwitchPlan>>| p.as_ref().map(|p| (p.tag(), p.digest_bytes()));
    [t(&plans.current), t(&plans.previous)]
}

/// Writes the low `n` bytes (1 to 8) of `digest` big-endian at `at`, byte by byte (a
/// variable-length slice copy would be a library call per packet).
#[inline(always)]
fn put_digest(f: &mut [u8], at: usize, n: usize, digest: u64) {
    let b = digest.to_be_bytes();
    for (i, dst) in f[at..at + n].iter_mut().enumerate() {
        *dst = b[8 - n + i];
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

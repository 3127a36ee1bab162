//! The telemetry stages of one worker (`docs/architecture.md`, "The per-packet work"). A
//! burst goes through six stages, each a loop over the burst, so that the work of its packets
//! overlaps (a hash chain of one packet runs beside the next packet's, instead of one packet
//! going through everything before the next starts):
//!
//! 1. parse (`parse`): headers found and validated once, the fields read; a packet whose
//!    route has one next hop is routed (`route`) on the spot: rewritten (TTL and MACs)
//!    and given its telemetry action while its headers are at hand;
//! 2. hash ([`telemetry::hash::burst`]): the flow key's hash `F` (ECMP and FlowRadar use
//!    it), the packet ID, the packet word and the hop's tape and value words, eight packets
//!    at a time where the CPU allows;
//! 3. route (`route`): the packets whose route has several next hops routed by `F`, and
//!    each counted packet's FlowRadar entry prefetched;
//! 4. per burst: the clock (hop latency = now - the burst's rx time), each used egress
//!    port's utilisation, and the burst's values prepared for compression at each port;
//! 5. draw ([`telemetry::pint::encoder::DrawLanes`]): every PINT decision of this hop (query
//!    set, sampling, rounding coins) from the hashes, the path query encoded on the way,
//!    eight packets at a time where the CPU allows; a burst whose packets all leave by one
//!    port with one plan gets its values encoded here too, eight at a time;
//! 6. encode (`encode`): the draws applied to the digests (unless stage 5 did), shims
//!    inserted, updated or stripped, digest records put on the ring at an edge egress,
//!    packets counted.
//!
//! No locks, no allocation, no floating point; plans come from a [`PlanCell`] checked once
//! per burst, counts from the worker's [`WorkerEpochs`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use telemetry::hash::burst::BurstHashes;
use telemetry::pint::encoder::{BurstValues, DrawLanes, PreparedValues, SwitchPlan};
use telemetry::wire::shim::{FLAG_INCOMPLETE, FORMAT, shim_len};

use crate::burst::{BurstVerdicts, MAX_BURST};
use crate::clock::{Clock, SharedClock};
use crate::counters::{LocalCounters, TelemetryEvent};
use crate::digest::DigestRing;
use crate::epochs::{EpochStep, WorkerEpochs};
use crate::forward::Forwarder;
use crate::frame::PacketBuf;
use crate::load::{PortLoads, SharedLoad, carried_value};
use crate::plans::{PlanCell, WorkerPlans};
use crate::stages::{self, STAGES};
use crate::tables::{MAX_PORTS, PortRole, PortSpec};

mod encode;
mod parse;
mod route;

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
    pub digests: DigestRing,
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
#[repr(u8)]
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
    /// Remove the shim without encoding or reporting a digest (unknown plan at the edge,
    /// or the shim no longer fits the egress MTU); at an edge a probe's arrival is still
    /// reported.
    Remove,
}

impl Action {
    /// The action whose `as u8` is `v` (None for any other value).
    fn from_u8(v: u8) -> Action {
        [
            Action::None,
            Action::Insert,
            Action::Transit,
            Action::Strip,
            Action::OneHop,
            Action::Remove,
        ]
        .into_iter()
        .find(|a| *a as u8 == v)
        .unwrap_or(Action::None)
    }

    /// Whether this hop encodes its values into the packet's digest.
    #[inline(always)]
    fn encodes(self) -> bool {
        matches!(
            self,
            Action::Insert | Action::Transit | Action::Strip | Action::OneHop
        )
    }
}

/// What the stages learn about a packet, for the stages after them.
#[derive(Debug, Clone, Copy, Default)]
struct Meta {
    /// IPv4 total length (what FlowRadar counts as bytes: the same at every hop).
    ip_len: u16,
    /// Where a UDP payload starts in the frame as received (0: not UDP), to recognise
    /// probes at the last hop.
    udp_payload_at: u16,
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
    /// Filled by the parse, for routing once `F` is known: the IPv4 header's offset and
    /// length, its TTL and destination, the plan the shim names ([`NO_PLAN`] if none this
    /// worker holds) and whether the shim says incomplete.
    l3: u8,
    hl: u8,
    ttl: u8,
    shim_plan: u8,
    incomplete: bool,
    dst: u32,
}

/// [`Meta::shim_plan`] of a shim whose plan this worker does not hold.
const NO_PLAN: u8 = 2;

/// A worker's telemetry state.
pub struct Inband {
    state: State,
    scratch: Box<Scratch>,
}

/// What the stages learn about a burst's packets, for the stages after them.
struct Scratch {
    /// Per packet.
    meta: [Meta; MAX_BURST],
    /// The hash inputs and outputs, a lane per packet.
    hashes: BurstHashes,
    /// The draws (and digests), a lane per packet.
    lanes: DrawLanes,
    /// The burst's values prepared for compression, per plan (current, previous) and
    /// egress port.
    prepared: [[PreparedValues; MAX_PORTS]; 2],
    /// Where the burst goes (stages 1 and 3).
    routed: route::Routed,
    /// Whether the draw stage encoded the burst's digests whole (the encode stage takes
    /// them as they are).
    whole: bool,
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
    /// The shim the current plan gives, as the fast parse matches it: format byte, tag,
    /// digest bytes, and where IPv4 starts behind it in an untagged frame (0: no plan).
    fast_shim: FastShim,
    /// Whether the fast parse is tried first (always, but in equivalence tests).
    try_fast_parse: bool,
    /// Whether a uniform burst is encoded whole in the draw stage (always, but in
    /// equivalence tests).
    try_whole: bool,
    shared_clock: Arc<SharedClock>,
    clock: Clock,
    epochs: WorkerEpochs,
    digests: DigestRing,
    loads: PortLoads,
    shared_load: Arc<SharedLoad>,
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl Inband {
    /// The telemetry state of a worker of a switch with these ports (the routes are the
    /// forwarder's).
    pub fn new(ports: &[PortSpec], setup: InbandSetup) -> Inband {
        let mut mtu = [0u16; MAX_PORTS];
        let mut edge_ports = 0u32;
        for (i, p) in ports.iter().enumerate().take(MAX_PORTS) {
            mtu[i] = p.mtu;
            if p.role == PortRole::Edge {
                edge_ports |= 1 << i;
            }
        }
        let mut plans = WorkerPlans::default();
        plans.refresh(&setup.plans);
        let tags = tags_of(&plans);
        let fast_shim = FastShim::of(&plans);
        let state = State {
            tags,
            fast_shim,
            try_fast_parse: true,
            try_whole: true,
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
            scratch: Box::new(Scratch {
                meta: [Meta::default(); MAX_BURST],
                hashes: BurstHashes::new(),
                lanes: DrawLanes::default(),
                prepared: [[PreparedValues::default(); MAX_PORTS]; 2],
                routed: route::Routed::new(),
                whole: false,
            }),
        }
    }

    /// Turns the fast parse off (every frame takes the general parse) or on: for tests that
    /// check the two give the same results, and for measuring the fast parse.
    pub fn set_fast_parse(&mut self, on: bool) {
        self.state.try_fast_parse = on;
    }

    /// Turns encoding uniform bursts whole in the draw stage off (every packet is applied
    /// in the encode stage) or on: for tests that check the two give the same results.
    pub fn set_whole_encode(&mut self, on: bool) {
        self.state.try_whole = on;
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

    /// The worker stops: the flowset of the epoch under way goes to the control thread as
    /// far as it got (a stop or restart otherwise lost up to an epoch of counts, which the
    /// sink took for loss on the links into this switch).
    #[cold]
    pub fn finish(self) {
        self.state.epochs.close_at_stop();
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
        let Inband { state, scratch } = self;
        let s = &mut **scratch;
        let Received {
            port: rx_port,
            pkts,
            tsc: rx_tsc,
        } = rx;
        let n = pkts.len().min(MAX_BURST);
        let pkts = &mut pkts[..n];
        state.refresh_plans(c);
        // A burst received after an epoch boundary the worker has not yet acted on counts in
        // the new epoch.
        if state.epochs.due(rx_tsc) {
            state.end_epoch(rx_tsc, c);
        }
        let mut marks = [0u64; STAGES.len() + 1];
        marks[0] = stages::mark();
        let rx_bytes = state.parse_stage(fwd, rx_port, pkts, s, out, c);
        marks[1] = stages::mark();
        let key = state.plans.current.as_ref().map_or(0, |p| p.value_key());
        s.hashes.compute(n, key);
        marks[2] = stages::mark();
        state.route_stage(fwd, rx_port, pkts, s, out, c);
        let routed = &s.routed;
        // Every verdict is the same port when every packet is forwarded by one port.
        out.all_same = (routed.same() && routed.forwarded == burst_mask(n))
            || out.verdicts[..n].iter().all(|&v| v == out.verdicts[0]);
        marks[3] = stages::mark();
        let time = state.burst_stage(rx_port, rx_tsc, tx_tsc(), routed, &mut s.prepared);
        marks[4] = stages::mark();
        // A burst leaving by one port with one plan and an action with its own encode loop
        // is encoded whole here; any other is drawn here and applied packet by packet in
        // the encode stage.
        s.whole = false;
        for (p, &mask) in routed.lanes.iter().enumerate() {
            if mask != 0
                && let Some(plan) = state.plans.get(p as u8)
            {
                s.whole = match routed.uniform {
                    Some((a, up, e))
                        if state.try_whole
                            && usize::from(up) == p
                            && encode::has_uniform_loop(a) =>
                    {
                        plan.encode_lanes(
                            &s.hashes,
                            key,
                            mask,
                            &s.prepared[p][usize::from(e) & (MAX_PORTS - 1)],
                            &mut s.lanes,
                        )
                    }
                    _ => false,
                };
                if !s.whole {
                    plan.draw_lanes(&s.hashes, key, mask, &mut s.lanes);
                }
            }
        }
        marks[5] = stages::mark();
        let tx_bytes = state.encode_stage(rx_port, pkts, s, routed, &time, c);
        marks[6] = stages::mark();
        c.count_burst(rx_port, n as u64, rx_bytes, routed.tx_packets, tx_bytes);
        stages::record(&marks, n);
    }
}

/// The bits of a burst of `n` packets.
#[inline(always)]
fn burst_mask(n: usize) -> u64 {
    u64::MAX.checked_shr(64 - n as u32).unwrap_or(0)
}

/// The burst's time and each used egress port's utilisation (stage 4), for stages 5 and 6.
#[derive(Debug, Clone, Copy)]
struct BurstTime {
    /// Counter value when the burst leaves.
    now_tsc: u64,
    /// Its packets' time in the switch.
    latency_ns: u64,
    /// Utilisation as PINT carries it, per used egress port.
    util: [u64; MAX_PORTS],
}

impl State {
    /// Takes a new plan if one was installed.
    #[inline(always)]
    fn refresh_plans(&mut self, c: &mut LocalCounters) {
        if self.plans.refresh(&self.plan_cell) {
            self.tags = tags_of(&self.plans);
            self.fast_shim = FastShim::of(&self.plans);
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
}

impl State {
    /// Stage 4: the time the burst leaves (`now`), each used port's utilisation, and the
    /// values each plan compresses at each port the burst uses.
    #[inline(never)]
    fn burst_stage(
        &mut self,
        rx_port: usize,
        rx_tsc: u64,
        now: u64,
        routed: &route::Routed,
        prepared: &mut [[PreparedValues; MAX_PORTS]; 2],
    ) -> BurstTime {
        let latency_ns = self.clock.ns(now.saturating_sub(rx_tsc));
        let mut util = [1u64; MAX_PORTS];
        let mut ports = routed.used;
        while ports != 0 {
            let e = ports.trailing_zeros() as usize;
            ports &= ports - 1;
            let clock = &self.clock;
            let own = self
                .loads
                .on_burst(e, now, routed.port_bytes[e], 0, |t| clock.ns(t));
            self.loads.publish(&self.shared_load, e, now);
            let others = self.shared_load.others[e].load(Ordering::Relaxed);
            util[e] = carried_value(own.saturating_add(others));
        }
        let mut encoding = routed.encoding;
        while encoding != 0 {
            let bit = encoding.trailing_zeros() as usize;
            encoding &= encoding - 1;
            let (e, p) = (bit / 2, bit % 2);
            if let Some(plan) = self.plans.get(p as u8) {
                let values = BurstValues {
                    switch_id: self.switch_id,
                    ingress_port: rx_port as u32,
                    egress_port: e as u32,
                    hop_latency_ns: latency_ns,
                    utilization: util[e],
                };
                plan.prepare(&values, &mut prepared[p][e]);
            }
        }
        BurstTime {
            now_tsc: now,
            latency_ns,
            util,
        }
    }
}

/// The current plan's shim as the fast parse matches it.
#[derive(Debug, Clone, Copy, Default)]
struct FastShim {
    /// The shim's first four bytes (format, flags, tag) as a little-endian word, with the
    /// flags but [`FLAG_INCOMPLETE`] masked out, and the mask.
    fixed: u32,
    fixed_mask: u32,
    digest_bytes: usize,
    /// Offset of IPv4 behind the shim in an untagged frame (0: no current plan).
    l3: usize,
}

impl FastShim {
    fn of(plans: &WorkerPlans) -> FastShim {
        plans.current.as_ref().map_or(FastShim::default(), |p| {
            let n = p.digest_bytes();
            let [t0, t1] = p.tag().to_be_bytes();
            FastShim {
                fixed: u32::from_le_bytes([(FORMAT << 4) | n as u8, 0, t0, t1]),
                fixed_mask: u32::from_le_bytes([0xff, FLAG_INCOMPLETE, 0xff, 0xff]),
                digest_bytes: n,
                l3: 14 + shim_len(n),
            }
        })
    }
}

/// The shim tag and digest length of the current and previous plan.
fn tags_of(plans: &WorkerPlans) -> [Option<(u16, usize)>; 2] {
    let t = |p: &Option<Arc<SwitchPlan>>| p.as_ref().map(|p| (p.tag(), p.digest_bytes()));
    [t(&plans.current), t(&plans.previous)]
}

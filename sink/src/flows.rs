//! The flows one decode thread owns (flows are sharded by flow hash): per flow its PINT
//! record (path decoding, latency sketches per hop, per-packet aggregates), its exact
//! FlowRadar counters at every switch, and the loss on each link of its decoded path; per
//! link the loss summed over flows; per switch the latency samples of the hops decoded to it.
//!
//! Memory is bounded: at most `capacity` flows; a flow not heard of for the idle timeout is
//! exported and forgotten, and when the table is full a new flow is refused (counted) until
//! the next sweep frees room. One flow costs about 400 bytes plus its path state and its
//! latency sketches (bounded by the query's `space_budget`, 4 KB in the paper's plan);
//! [`FlowTable::memory_bytes`] measures it.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

use rustc_hash::FxHashMap;
use serde::Serialize;
use telemetry::flowradar::FlowKey;
use telemetry::pint::path_decoder::Space;
use telemetry::pint::plan::QueryKind;
use telemetry::pint::recording::{FlowRecord, path_context};
use telemetry::protocol::{FlowRuns, WireDigest};
use telemetry::topology::Topology;

use crate::detect::online::Detector;
use crate::detect::{Params, Sample};
use crate::events::EventLog;
use crate::registry::{Registry, SinkPlan};
use crate::schedule::{Now, Schedule, UNSCHEDULED};
use crate::summary::RecentSummary;

mod loss;
mod probes;
mod sweep;

use loss::{LOSS_EPOCHS_KEPT, LinkLoss, event_place};

/// Quantiles reported for latency.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 1.0];

/// What a decode thread reads besides its flows.
#[derive(Debug, Clone)]
pub struct ShardContext {
    /// Switches, plans, address owners.
    pub registry: Arc<Registry>,
    /// Path candidates, when the sink was given a topology.
    pub topology: Option<Arc<Topology>>,
    /// Where detected events go.
    pub events: Arc<EventLog>,
    /// Online detection's parameters.
    pub detection: Params,
    /// When a flow whose digests fit no path was last said in the log, Unix ms (0: never).
    pub unfit_said_ms: Arc<AtomicU64>,
}

/// Times a flow's path decoding starts over on a conflict under one plan and path length,
/// without its path ever decoding, before the log says so: a route that changed, or a pin
/// that was wrong, starts it over once or twice (a plan reload starts the count again).
const UNFIT_RESETS: u32 = 4;

impl ShardContext {
    /// The switches paths are decoded among: the topology's, or those that said hello.
    fn switches(&self) -> Switches<'_> {
        match &self.topology {
            Some(t) => Switches::Topology(t),
            None => Switches::Ids(self.registry.ids()),
        }
    }
}

/// The switches paths are decoded among, held for as long as a [`Space`] of them is used.
enum Switches<'a> {
    Topology(&'a Topology),
    Ids(Arc<Vec<u32>>),
}

impl Switches<'_> {
    fn space(&self) -> Space<'_> {
        match self {
            Switches::Topology(t) => Space::Topology(t),
            Switches::Ids(ids) => Space::Ids(ids),
        }
    }
}

/// A flow's PINT state: the plan and path length its digests carry.
#[derive(Debug)]
pub struct PintState {
    /// The plan.
    pub plan: Arc<SinkPlan>,
    /// Everything recorded.
    pub record: FlowRecord,
    /// The switch that reports the flow (its last hop).
    pub reporter: u32,
    /// Port the flow arrives on at its last hop.
    pub ingress_port: u8,
    /// Edge port it leaves by.
    pub egress_port: u8,
    /// Whether hop 1 is pinned to the source's edge switch.
    pub first_pinned: bool,
    /// The switch hop 1 was pinned to, when it was (not the trivial one-hop case).
    first_pin: Option<u32>,
    /// Per (query, hop), at `query * k + hop - 1`: the index into the table's switch
    /// summaries once the hop's switch is decoded ([`NO_SLOT`] before), so that a sample of
    /// such a hop goes straight to its switch's summary. Empty until a hop is decoded.
    summary_slots: Vec<u32>,
    /// The path last decoded: when the path decodes again (after a conflict) to another,
    /// the route changed and the hops' values so far were partly the old route's.
    last_decoded: Option<Vec<u32>>,
    /// Times the path's decoding started over on a conflict under this state (this plan
    /// and path length).
    conflicts: u32,
}

impl PintState {
    /// Its decoded path, if its path query is decoded.
    fn path(&self, space: Space<'_>) -> Option<Vec<u32>> {
        let q = self.plan.path_query?;
        let cx = path_context(&self.plan.plan, space, q)?;
        self.record.path(q)?.path(cx)
    }
}

/// A (query, hop) whose switch summary is not known yet.
const NO_SLOT: u32 = u32::MAX;

/// A flow's counters at one switch, summed over epochs.
#[derive(Debug, Clone)]
pub struct SwitchCount {
    /// The switch.
    pub switch: u32,
    /// Packets.
    pub packets: u64,
    /// Bytes (IPv4 total length).
    pub bytes: u64,
    /// Epochs it was counted in.
    pub epochs: u32,
    /// Of those, epochs in which the sink took the switch's counts as short (its flowset
    /// not decoded whole, or set aside): a flow that peeled out of such a set is almost
    /// always right, but a flow the flow filter hid (its false positive) can leave its
    /// packets on one that shares its cells.
    pub unsure_epochs: u32,
    /// Start of the first of those epochs, Unix ms.
    pub first_ms: u64,
    /// End of the last, Unix ms.
    pub last_ms: u64,
    /// The last epoch's packets and bytes.
    pub last_epoch: (u64, u64, u64),
    exported: (u64, u64),
    exported_at: Instant,
    /// Start of the first epoch counted since the last record, Unix ms (the next record's
    /// start: a record's counts and times cover the same span), never before the last
    /// record's end.
    since_ms: u64,
    /// End of the last record sent, Unix ms (0 before any): a late flowset of an epoch
    /// before it goes in the next record, which starts there (one flow's records at one
    /// switch follow each other in time, as active-timeout records do at any exporter).
    recorded_to_ms: u64,
    /// Whether a record saying the flow ended went (a flow kept because another switch's
    /// record had to wait sends it once), since the last counts.
    end_sent: bool,
    /// Whether its next record is waiting for room in the export queue (counted once).
    deferred: bool,
}

/// One flow.
#[derive(Debug)]
pub struct FlowState {
    /// The flow.
    pub key: FlowKey,
    /// Digests received.
    pub digests: u64,
    /// First heard of, Unix ms.
    pub first_ms: u64,
    /// Last heard of, Unix ms.
    pub last_ms: u64,
    touched: Instant,
    /// PINT state, once a digest came.
    pub pint: Option<PintState>,
    /// Times the path decoding started over (route or plan changes).
    pub path_resets: u32,
    /// Digests it took to decode the path (since decoding last started), once decoded.
    pub decode_digests: Option<u64>,
    /// `digests` when path decoding last started.
    pint_since: u64,
    /// Counters per switch.
    pub counts: Vec<SwitchCount>,
    loss: Vec<LinkLoss>,
    /// Switches whose counts were unsure in an epoch that counted the flow before its path
    /// was known (sorted; [`loss::ALL_UNSETTLED`] alone when too many to list): their links' loss
    /// counts from when the path is first known.
    loss_unsettled: Vec<u32>,
    /// A hash of the decoded path the flow's loss was last looked at on (0: none yet): a
    /// link of another path counts its loss from when the flow has it (a route change).
    loss_path: u64,
    /// Whether the route changed and some link of the new path has no counts yet.
    loss_rerouting: bool,
    /// Online detection on the flow's end-to-end latency (from a latency-sum query).
    latency_detector: Option<Box<Detector>>,
    /// Online detection on the flow's loss (from its counters at its first and last switch).
    loss_detector: Option<Box<Detector>>,
    /// What the loss detector has been given for the latest epochs: (epoch, packets at the
    /// first switch, at the last), so that an epoch whose counts come in parts (a late
    /// flowset) adds only what is new.
    loss_fed: [(u64, u64, u64); LOSS_EPOCHS_KEPT],
    /// A switch learned as the source's edge switch whose pin as hop 1 was followed by a
    /// conflict: it may not be this flow's first hop (a multi-homed or anycast source, a
    /// border switch the flow entered by another), so it is not pinned again.
    owner_doubted: Option<u32>,
    /// Probes of the flow that left the network (it is a probe stream).
    pub probes: u64,
    /// Online detection on the flow's probes (sequence numbers, one-way delay).
    probe_detector: Option<Box<Detector>>,
    /// The switch that reported the flow's last probe and its count of probe-record breaks
    /// then ([`crate::registry::SwitchCounters::probe_breaks`]).
    probe_reporter: Option<probes::ProbeReporter>,
    /// The earliest time (Unix s) at which one of its detectors may close a window (see
    /// [`Detector::next_close`]; never later than that): a sweep before it and before the
    /// flow's timeouts passes the flow by.
    detect_due_s: f64,
    /// The second of the table's [`Schedule`] it is listed in ([`UNSCHEDULED`] if none).
    due: u32,
}

impl FlowState {
    /// Whether a sweep at `now` (`now_s` Unix s) has anything to do for the flow: it ended,
    /// a count's active timeout passed, or a detector's window may close. Otherwise a sweep
    /// would change nothing, and it is passed by without a look at its counts or detectors
    /// (a sweep of every flow took about 400 ns a flow, most of it cache misses: 200 ms a
    /// second per decode thread at half a million flows).
    fn sweep_due(&self, now: Instant, now_s: f64, idle: Duration, active: Duration) -> bool {
        now.duration_since(self.touched) >= idle
            || self
                .unexported_since()
                .is_some_and(|t| now.duration_since(t) >= active)
            // A millisecond early: a tick's floor of the same sum may round the other way.
            || now_s >= self.detect_due_s - 1e-3
    }

    /// [`FlowState::detect_due_s`] worked out from the flow's detectors (after one was fed
    /// or ticked: a feed that closed windows puts it off, so a flow fed all along is seldom
    /// due). Takes the fields, so that it can be called while others are borrowed.
    fn detect_due(
        latency: &Option<Box<Detector>>,
        loss: &Option<Box<Detector>>,
        probes: &Option<Box<Detector>>,
    ) -> f64 {
        [latency, loss, probes]
            .into_iter()
            .flatten()
            .filter_map(|d| d.next_close())
            .fold(f64::INFINITY, f64::min)
    }

    /// The second of `schedule` in which a sweep is next due to look at the flow (see
    /// [`FlowState::sweep_due`]); [`UNSCHEDULED`] before the first sweep says the timeouts.
    fn deadline(&self, schedule: &Schedule, now: Now) -> u32 {
        let Some((idle, active)) = schedule.timeouts() else {
            return UNSCHEDULED;
        };
        let idle_at = schedule.second(self.touched.checked_add(idle));
        let active_at = self
            .unexported_since()
            .map_or(UNSCHEDULED, |t| schedule.second(t.checked_add(active)));
        let detect_at = schedule.second_of_wall(self.detect_due_s - 1e-3, now);
        idle_at.min(active_at).min(detect_at)
    }

    /// The earliest `exported_at` of its counts with packets not yet in a record: the
    /// active timeout runs from it.
    fn unexported_since(&self) -> Option<Instant> {
        self.counts
            .iter()
            .filter(|c| c.packets > c.exported.0)
            .map(|c| c.exported_at)
            .min()
    }

    /// Works out [`FlowState::detect_due_s`] again (after a sweep closed windows).
    fn refresh_detect_due(&mut self) {
        self.detect_due_s = FlowState::detect_due(
            &self.latency_detector,
            &self.loss_detector,
            &self.probe_detector,
        );
    }
}

/// Loss on one link (from switch, to switch) over all flows whose path crosses it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LinkStats {
    /// Packets counted before the link and not after it.
    pub lost_packets: i64,
    /// Flows whose decoded path crosses it (ever).
    pub flows: u64,
    /// Of those, flows that lost packets on it.
    pub flows_with_loss: u64,
    /// Flows counted before it and never after it.
    pub vanished_flows: u64,
}

/// A record for IPFIX and JSON lines: a flow's counters at one switch since its last record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowExport {
    /// The flow.
    #[serde(serialize_with = "ser_key")]
    pub key: FlowKey,
    /// The switch (IPFIX observation domain).
    pub switch: u32,
    /// Packets since the last record.
    pub packets: u64,
    /// Bytes since the last record.
    pub bytes: u64,
    /// First epoch's start, Unix ms.
    pub start_ms: u64,
    /// Last epoch's end, Unix ms.
    pub end_ms: u64,
    /// Ingress port at the switch (known at the flow's last hop only).
    pub ingress: Option<u16>,
    /// Egress port at the switch (known at the flow's last hop only).
    pub egress: Option<u16>,
    /// Whether the flow ended (idle, or the sink stopping) rather than the active timeout
    /// passing.
    pub ended: bool,
    /// Why the record was sent.
    pub end_reason: EndReason,
}

/// Why a flow record was sent: IPFIX's `flowEndReason` (information element 136), whose
/// codes the discriminants are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EndReason {
    /// Nothing was heard of the flow for the idle timeout; it is forgotten.
    IdleTimeout = 1,
    /// The flow goes on; the active timeout passed since its last record.
    ActiveTimeout = 2,
    /// The sink is stopping.
    ForcedEnd = 4,
}

fn ser_key<S: serde::Serializer>(k: &FlowKey, s: S) -> Result<S::Ok, S::Error> {
    FlowId::from(*k).serialize(s)
}

/// A flow key as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct FlowId {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol.
    pub protocol: u8,
}

impl From<FlowKey> for FlowId {
    fn from(k: FlowKey) -> FlowId {
        FlowId {
            src: Ipv4Addr::from(k.src),
            dst: Ipv4Addr::from(k.dst),
            src_port: k.src_port,
            dst_port: k.dst_port,
            protocol: k.protocol,
        }
    }
}

/// What a decode thread counts.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ShardStats {
    /// Digests recorded.
    pub digests: u64,
    /// Digests of a plan the sink does not have.
    pub unknown_plan: u64,
    /// Flows created.
    pub flows_created: u64,
    /// Flows forgotten after the idle timeout.
    pub flows_evicted: u64,
    /// Updates for new flows refused because the table was full (of flows, or of their
    /// paths' hops).
    pub flows_refused: u64,
    /// Path decodings started over.
    pub path_resets: u64,
    /// FlowRadar counters applied (flow, switch, epoch).
    pub counts_applied: u64,
    /// Export records lost to the exporter's full queue: at the sink's stop, after an ended
    /// flow's `EXPORT_WAIT` (10 s), or at once while the table is nearly full.
    pub exports_dropped: u64,
    /// Export records put off to a later sweep because the exporter's queue was full
    /// (their counts go in the next record that does go).
    pub exports_deferred: u64,
    /// Probe arrivals left out of detection: sent more than a second after they arrived,
    /// or more than 10 s before.
    pub probes_refused: u64,
    /// Samples left out of detection (a digest's latency, a probe's delay, an epoch's loss
    /// from counters) because their time was more than [`crate::detect::online::MAX_AHEAD_S`]
    /// ahead of the sink's clock.
    pub samples_ahead: u64,
    /// Flows the sweeps looked at (ended, an active timeout passed, or a detection window
    /// due to close); the others were passed by.
    pub flows_swept: u64,
}

/// Counts a sample left out of detection as timed ahead of the sink's clock in `count`
/// ([`ShardStats::samples_ahead`]); the 1st, 2nd, 4th, ... are logged too (a clock that runs
/// ahead has every sample counted).
fn note_ahead(count: &mut u64) {
    *count += 1;
    if count.is_power_of_two() {
        tracing::warn!(
            samples = *count,
            "samples timed more than a minute ahead of the sink's clock left out of detection: a switch's or a sender's clock ahead of the sink's?"
        );
    }
}

/// The flows of one decode thread.
#[derive(Debug)]
pub struct FlowTable {
    flows: FxHashMap<FlowKey, FlowState>,
    capacity: usize,
    /// Hops of the flows' path records together, at most [`HOPS_PER_FLOW`] per flow of
    /// `capacity`: a record's memory grows with its path length (up to 128 hops), so that
    /// long paths fill the table sooner rather than past its memory.
    hops_held: usize,
    links: FxHashMap<(u32, u32), LinkStats>,
    /// Per (switch, plan version, query): samples of the hops decoded to the switch.
    switch_samples: Vec<((u32, u32, u16), RecentSummary)>,
    /// Where each (switch, plan version, query) is in `switch_samples`.
    summary_index: FxHashMap<(u32, u32, u16), u32>,
    plans: FxHashMap<u32, Arc<SinkPlan>>,
    samples: Vec<(usize, usize, u32)>,
    /// The indices of a batch taken as it is.
    identity: Vec<u32>,
    owners: Vec<(u32, u32)>,
    /// New flow records with their last hop pinned to a reporter, by (plan version,
    /// reporter, path length): pinning spreads candidates hop by hop over the topology (a
    /// third of a millisecond on a graph of hundreds of switches), the same for every flow
    /// the reporter delivers, so each new flow (or path restart) copies one.
    pinned: FxHashMap<(u32, u32, usize), FlowRecord>,
    /// When each flow is next due for a sweep.
    schedule: Schedule,
    /// Per switch, the latest epochs (start and length, Unix ms) whose counts there were
    /// unsure, at most [`UNSURE_EPOCHS_KEPT`]: a flow the switch's flowset missed in one
    /// was not touched then, and its links' loss must not take what it missed.
    unsure_epochs: FxHashMap<u32, std::collections::VecDeque<(u64, u64)>>,
    /// Counters.
    pub stats: ShardStats,
}

/// Unsure epochs kept per switch ([`FlowTable`]'s `unsure_epochs`).
const UNSURE_EPOCHS_KEPT: usize = 64;

/// How long an ended flow's records may wait for room in the export queue before they are
/// dropped (counted) and the flow forgotten.
const EXPORT_WAIT: Duration = Duration::from_secs(10);

/// The path length a table of flows holds on average: a path record of `k` hops takes `k`
/// of the table's `capacity * HOPS_PER_FLOW` (the paper's paths are 5 to 7 hops; a table
/// of 59-hop paths holds a quarter of `capacity`).
pub const HOPS_PER_FLOW: usize = 16;

/// Most pinned records kept ([`FlowTable`]'s `pinned`); past it they are worked out anew.
const PINNED_RECORDS: usize = 1024;

/// Unix time in ms.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl FlowTable {
    /// A table of at most `capacity` flows.
    pub fn new(capacity: usize) -> FlowTable {
        FlowTable {
            flows: FxHashMap::default(),
            capacity,
            hops_held: 0,
            links: FxHashMap::default(),
            switch_samples: Vec::new(),
            summary_index: FxHashMap::default(),
            plans: FxHashMap::default(),
            samples: Vec::new(),
            identity: Vec::new(),
            owners: Vec::new(),
            pinned: FxHashMap::default(),
            schedule: Schedule::default(),
            unsure_epochs: FxHashMap::default(),
            stats: ShardStats::default(),
        }
    }

    /// Flows tracked.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether no flow is tracked.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Records digests reported by switch `reporter`, taken run by run as `by_flow` groups
    /// them (or, where it does not, as they are). Any order is recorded alike; grouped by
    /// flow costs less: each run of one flow's digests looks the flow up once.
    pub fn add_digests(
        &mut self,
        cx: &ShardContext,
        reporter: u32,
        digests: &[WireDigest],
        by_flow: &FlowRuns,
    ) {
        let switches = cx.switches();
        let space = switches.space();
        let now = Now::read();
        self.owners.clear();
        // The plan of the digest before (a batch's digests mostly share one).
        let mut current: Option<Arc<SinkPlan>> = None;
        let mut identity = std::mem::take(&mut self.identity);
        by_flow.for_each_run(digests, &mut identity, |run| {
            let run = run.iter().filter_map(|&j| digests.get(j as usize));
            if let Some(key) = self.add_run(cx, space, reporter, now, run, &mut current) {
                // The loss its counts show comes with the path: as of their latest epoch.
                let at_s = self.flows.get(&key).map_or(0.0, |f| f.last_ms as f64 / 1e3);
                self.update_loss(cx, key, &[], at_s, None);
            }
        });
        self.identity = identity;
        self.owners.sort_unstable();
        self.owners.dedup();
        cx.registry.learn_owners(&self.owners);
    }

    /// Records a run of one flow's digests. Returns the flow when they decoded its path
    /// while it has counters, which then go on the path's links.
    fn add_run<'d>(
        &mut self,
        cx: &ShardContext,
        space: Space<'_>,
        reporter: u32,
        now: Now,
        mut run: impl Iterator<Item = &'d WireDigest>,
        current: &mut Option<Arc<SinkPlan>>,
    ) -> Option<FlowKey> {
        let mut known = |d: &WireDigest, current: &mut Option<Arc<SinkPlan>>| {
            known_plan(
                &mut self.plans,
                cx,
                reporter,
                current,
                d.plan_version,
                &mut self.stats.unknown_plan,
            )
        };
        // The flow is looked up at the run's first digest of a plan the sink has.
        let first = run.find(|d| known(d, current))?;
        let Some(flow) = flow_entry(
            &mut self.flows,
            self.capacity,
            &mut self.stats.flows_created,
            first.key,
            first.time_ns / 1_000_000,
        ) else {
            let refused = 1 + run.filter(|d| known(d, current)).count();
            self.stats.flows_refused += refused as u64;
            return None;
        };
        flow.touched = now.at;
        // A run brings the flow's deadline nearer only by a detection window (a later touch
        // puts its idle timeout off): listed again only then, or when new.
        let detect_due_before = flow.detect_due_s;
        let mut place_loss = false;
        let mut latency_events = Vec::new();
        let mut samples = std::mem::take(&mut self.samples);
        let mut last_ns = 0;
        // `first` has the current plan; a later digest whose plan is not the current one is
        // looked up.
        for d in std::iter::once(first).chain(run) {
            let same_plan = current
                .as_ref()
                .is_some_and(|p| p.version == d.plan_version);
            if !same_plan && !known(d, current) {
                continue;
            }
            let plan = current.as_ref().expect("a known plan");
            let k = usize::from(d.hops);
            samples.clear();
            flow.digests += 1;
            last_ns = last_ns.max(d.time_ns);
            let fresh = match &flow.pint {
                Some(p) => p.plan.version != plan.version || p.record.k() != k,
                None => true,
            };
            if fresh {
                let held = flow.pint.as_ref().map_or(0, |p| p.record.k());
                let hops = self.hops_held - held + k;
                // One flow's path is always taken (a table of one flow per thread).
                if hops > self.capacity.saturating_mul(HOPS_PER_FLOW) && self.hops_held > held {
                    self.stats.flows_refused += 1;
                    continue;
                }
                self.hops_held = hops;
                if flow.pint.is_some() {
                    flow.path_resets += 1;
                    self.stats.path_resets += 1;
                }
                let record = pinned_record(&mut self.pinned, plan, space, k, reporter).clone();
                flow.pint = Some(new_pint(plan, record, reporter, d));
                flow.pint_since = flow.digests - 1;
                flow.decode_digests = None;
            }
            let p = flow.pint.as_mut().expect("set above");
            // The switch that delivers to the flow's destination: learned when the flow (or
            // its reporter) is new, not per digest.
            if fresh || p.reporter != reporter || flow.digests == 1 {
                self.owners.push((d.key.dst, reporter));
            }
            p.reporter = reporter;
            p.ingress_port = d.ingress_port;
            p.egress_port = d.egress_port;
            // The source's edge switch, once learned (looked up now and then, not per
            // digest, until found).
            let mut path_read = false;
            if !p.first_pinned
                && k > 1
                && flow.digests % 64 == 1
                && let Some(o) = cx.registry.owner(d.key.src)
                && o != reporter
                && flow.owner_doubted != Some(o)
            {
                p.record.pin(&p.plan.plan, space, 1, o);
                p.first_pinned = true;
                p.first_pin = Some(o);
                path_read = true;
            }
            let sum_before = p
                .plan
                .latency_sum
                .and_then(|q| p.record.aggregate(q))
                .map_or(0, |a| a.count);
            path_read |=
                p.record
                    .record_samples(&p.plan.plan, space, d.pid, d.digest, &mut samples);
            // The packet's end-to-end latency, when the plan sums hop latency.
            if let Some(a) = p.plan.latency_sum.and_then(|q| p.record.aggregate(q))
                && a.count > sum_before
            {
                // The series is the flow's own packets: one queued behind the one before
                // waited in the network, so no self-queueing fix (at more than 10 kpps it
                // would give a whole burst its first packet's delay).
                let det = flow.latency_detector.get_or_insert_with(|| {
                    Box::new(Detector::adaptive(Params {
                        self_queueing_s: 0.0,
                        ..cx.detection
                    }))
                });
                let sample = Sample {
                    seq: None,
                    send: d.time_ns as f64 / 1e9,
                    delay_ms: a.last / 1e6,
                };
                if !det.push_at(now.unix_s, sample) {
                    note_ahead(&mut self.stats.samples_ahead);
                }
                latency_events.extend(det.take_events());
                flow.detect_due_s = FlowState::detect_due(
                    &flow.latency_detector,
                    &flow.loss_detector,
                    &flow.probe_detector,
                );
            }
            if path_read && p.record.conflict() {
                // The digests no longer fit one path: the route changed, or the switch
                // pinned as the first hop is not this flow's, or a hop's switch is not among
                // the candidates (a topology without it). Start over, without that pin.
                if let Some(o) = p.first_pin {
                    flow.owner_doubted = Some(o);
                }
                flow.path_resets += 1;
                self.stats.path_resets += 1;
                p.conflicts = p.conflicts.saturating_add(1);
                if p.conflicts == UNFIT_RESETS && p.last_decoded.is_none() {
                    say_unfit(cx, &flow.key, k, reporter, p.conflicts);
                }
                // Only the path's decoding starts over: the hops' latency and utilisation
                // stay until the path decodes to another (a route change). A path that
                // cannot decode (a switch missing from the topology or the sink) conflicts
                // again and again, and kept none of them when each conflict started the
                // whole record over.
                p.record.restart_paths_from(pinned_record(
                    &mut self.pinned,
                    plan,
                    space,
                    k,
                    reporter,
                ));
                p.first_pinned = k == 1;
                p.first_pin = None;
                p.summary_slots.clear();
                flow.pint_since = flow.digests - 1;
                flow.decode_digests = None;
                samples.clear();
            }
            self.stats.digests += 1;
            // Samples of hops decoded to a switch feed that switch's summary.
            if !samples.is_empty()
                && let Some(p) = &mut flow.pint
            {
                for &(query, hop, code) in &samples {
                    let at = query * k + hop.wrapping_sub(1);
                    let slot = match p.summary_slots.get(at) {
                        Some(&slot) if slot != NO_SLOT => slot,
                        _ => {
                            let Some(slot) = summary_slot(
                                p,
                                space,
                                (query, hop),
                                &mut self.switch_samples,
                                &mut self.summary_index,
                            ) else {
                                continue;
                            };
                            slot
                        }
                    };
                    if let Some((_, summary)) = self.switch_samples.get_mut(slot as usize) {
                        summary.add(code);
                    }
                }
            }
            // A path decoded just now places the flow's counters on its links (a path
            // decodes only from a digest it reads, and stops being decoded only with a
            // conflict, which starts the record over).
            let decoded_now = path_read
                && flow.decode_digests.is_none()
                && flow.pint.as_ref().is_some_and(|p| {
                    p.plan
                        .path_query
                        .and_then(|q| p.record.path(q))
                        .is_some_and(|s| s.is_decoded())
                });
            if decoded_now {
                flow.decode_digests = Some(flow.digests - flow.pint_since);
                place_loss |= !flow.counts.is_empty();
                if let Some(p) = &mut flow.pint {
                    let now = p.path(space);
                    if p.last_decoded.is_some() && now.is_some() && p.last_decoded != now {
                        // Another path than before: the route changed.
                        p.record.restart_values(&p.plan.plan);
                    }
                    p.last_decoded = now;
                }
            }
        }
        self.samples = samples;
        cx.events.record(first.key, "latency", latency_events, |e| {
            event_place(flow, space, e, cx.detection.window_s)
        });
        flow.last_ms = flow.last_ms.max(last_ns / 1_000_000);
        if (flow.due == UNSCHEDULED && self.schedule.timeouts().is_some())
            || flow.detect_due_s < detect_due_before
        {
            let due = flow.deadline(&self.schedule, now);
            self.schedule.put(first.key, &mut flow.due, due);
        }
        place_loss.then_some(first.key)
    }

    /// Applies one epoch's decoded counters: (flow, switch, packets, bytes). `epoch_ms` is
    /// the epoch's start and length in ms; `unsure` the switches whose counts of this epoch
    /// may miss flows or packets (sorted): loss on their links is not taken from it.
    pub fn add_counts(
        &mut self,
        cx: &ShardContext,
        epoch: u64,
        epoch_ms: (u64, u64),
        counts: &[(FlowKey, u32, u64, u64)],
        unsure: &[u32],
        missing: &[u32],
    ) {
        let c = crate::epochs::EpochCounts {
            epoch,
            epoch_ms,
            counts: Vec::new(),
            unsure: unsure.to_vec(),
            missing: missing.to_vec(),
            leads: Vec::new(),
        };
        self.add_epoch_counts(cx, &c, counts);
    }

    /// [`FlowTable::add_counts`] of the epoch `c` describes (its `counts` given apart, so
    /// that a caller's share of them need not be copied), with its switches' clock leads.
    pub fn add_epoch_counts(
        &mut self,
        cx: &ShardContext,
        c: &crate::epochs::EpochCounts,
        counts: &[(FlowKey, u32, u64, u64)],
    ) {
        let (epoch, epoch_ms) = (c.epoch, c.epoch_ms);
        let unsure = &c.unsure[..];
        for &s in unsure {
            let kept = self.unsure_epochs.entry(s).or_default();
            if !kept.contains(&epoch_ms) {
                if kept.len() == UNSURE_EPOCHS_KEPT {
                    kept.pop_front();
                }
                kept.push_back(epoch_ms);
            }
        }
        let now = Now::read();
        let mut touched: Vec<FlowKey> = Vec::with_capacity(counts.len());
        for &(key, switch, packets, bytes) in counts {
            let Some(flow) = flow_entry(
                &mut self.flows,
                self.capacity,
                &mut self.stats.flows_created,
                key,
                epoch_ms.0,
            ) else {
                self.stats.flows_refused += 1;
                continue;
            };
            flow.touched = now.at;
            flow.last_ms = flow.last_ms.max(epoch_ms.0 + epoch_ms.1);
            let c = match flow.counts.iter_mut().position(|c| c.switch == switch) {
                Some(i) => &mut flow.counts[i],
                None => {
                    flow.counts.push(SwitchCount {
                        switch,
                        packets: 0,
                        bytes: 0,
                        epochs: 0,
                        unsure_epochs: 0,
                        first_ms: epoch_ms.0,
                        last_ms: epoch_ms.0,
                        last_epoch: (epoch, 0, 0),
                        exported: (0, 0),
                        exported_at: now.at,
                        since_ms: epoch_ms.0,
                        recorded_to_ms: 0,
                        end_sent: false,
                        deferred: false,
                    });
                    flow.counts.last_mut().expect("pushed")
                }
            };
            c.since_ms = if c.packets == c.exported.0 {
                epoch_ms.0
            } else {
                c.since_ms.min(epoch_ms.0)
            }
            .max(c.recorded_to_ms);
            c.packets = c.packets.saturating_add(packets);
            c.bytes = c.bytes.saturating_add(bytes);
            // New packets of a flow kept for its records: it goes on, and ends again.
            c.end_sent &= packets == 0;
            // Saturating: 2^32 epochs are 497 days of 10 ms epochs, 50 of 1 ms.
            c.epochs = c.epochs.saturating_add(1);
            c.unsure_epochs = c
                .unsure_epochs
                .saturating_add(u32::from(unsure.binary_search(&switch).is_ok()));
            c.first_ms = c.first_ms.min(epoch_ms.0);
            c.last_ms = c.last_ms.max(epoch_ms.0 + epoch_ms.1);
            c.last_epoch = (epoch, packets, bytes);
            self.stats.counts_applied += 1;
            touched.push(key);
        }
        touched.sort_unstable();
        touched.dedup();
        for key in touched {
            // A switch that counted the flow in the second before and whose counts of this
            // epoch are unsure, yet have none of the flow: its flowset may have missed it.
            if !unsure.is_empty()
                && let Some(flow) = self.flows.get_mut(&key)
            {
                for c in &mut flow.counts {
                    if c.last_epoch.0 != epoch
                        && c.last_ms.saturating_add(1000) >= epoch_ms.0
                        && unsure.binary_search(&c.switch).is_ok()
                    {
                        c.unsure_epochs = c.unsure_epochs.saturating_add(1);
                    }
                }
            }
            self.update_loss(cx, key, unsure, epoch_ms.0 as f64 / 1e3, Some(epoch_ms.0));
            self.detect_loss(cx, key, c, now.unix_s);
            if let Some(flow) = self.flows.get_mut(&key) {
                let due = flow.deadline(&self.schedule, now);
                self.schedule.put(key, &mut flow.due, due);
            }
        }
    }

    /// A flow.
    pub fn get(&self, key: &FlowKey) -> Option<&FlowState> {
        self.flows.get(key)
    }

    /// Every flow.
    pub fn iter(&self) -> impl Iterator<Item = &FlowState> {
        self.flows.values()
    }

    /// Links with their loss.
    pub fn links(&self) -> impl Iterator<Item = (&(u32, u32), &LinkStats)> {
        self.links.iter()
    }

    /// Per (switch, plan version, query) samples.
    pub fn switch_samples(&self) -> impl Iterator<Item = (&(u32, u32, u16), &RecentSummary)> {
        self.switch_samples.iter().map(|(k, v)| (k, v))
    }

    /// Bytes the flows take (see the module documentation).
    pub fn memory_bytes(&self) -> usize {
        self.flows.capacity()
            * (std::mem::size_of::<FlowKey>() + std::mem::size_of::<FlowState>() + 8)
            + self.flows.values().map(flow_heap_bytes).sum::<usize>()
            + self.schedule.memory_bytes()
    }
}

/// The switch summary that samples of (query, hop) of the flow go to, once the hop's
/// switch is known (created if new); cached in the flow once the path is decoded.
fn summary_slot(
    p: &mut PintState,
    space: Space<'_>,
    (query, hop): (usize, usize),
    switch_samples: &mut Vec<((u32, u32, u16), RecentSummary)>,
    summary_index: &mut FxHashMap<(u32, u32, u16), u32>,
) -> Option<u32> {
    let k = p.record.k();
    let QueryKind::DynamicPerFlow { compression, .. } = &p.plan.plan.queries.get(query)?.kind
    else {
        return None;
    };
    let q = p.plan.path_query?;
    let state = p.record.path(q)?;
    let switch = state.hop(path_context(&p.plan.plan, space, q)?, hop)?;
    let key = (switch, p.plan.version, query as u16);
    let next = switch_samples.len() as u32;
    let slot = *summary_index.entry(key).or_insert(next);
    if slot == next {
        switch_samples.push((key, RecentSummary::new(compression)));
    }
    // Only decoded hops keep their switch: cache them.
    if state.is_decoded() && (1..=k).contains(&hop) {
        if p.summary_slots.is_empty() {
            p.summary_slots = vec![NO_SLOT; p.plan.plan.queries.len() * k];
        }
        p.summary_slots[query * k + hop - 1] = slot;
    }
    Some(slot)
}

/// Whether the sink has plan `version`, made `current` if so; a digest of a plan it lacks
/// is counted (`unknown`, and the reporter's counter).
fn known_plan(
    plans: &mut FxHashMap<u32, Arc<SinkPlan>>,
    cx: &ShardContext,
    reporter: u32,
    current: &mut Option<Arc<SinkPlan>>,
    version: u32,
    unknown: &mut u64,
) -> bool {
    if current.as_ref().is_none_or(|p| p.version != version) {
        *current = plan_of(plans, cx, version);
    }
    if current.is_none() {
        *unknown += 1;
        if let Some(e) = cx.registry.switch(reporter) {
            e.counters
                .digests_unknown_plan
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    current.is_some()
}

/// Plan `version`, from the thread's own copies or else the registry (kept once found).
fn plan_of(
    plans: &mut FxHashMap<u32, Arc<SinkPlan>>,
    cx: &ShardContext,
    version: u32,
) -> Option<Arc<SinkPlan>> {
    if let Some(p) = plans.get(&version) {
        return Some(Arc::clone(p));
    }
    let p = cx.registry.plan(version)?;
    // The registry lets spare plans go; so does this copy, all at once now and then.
    if plans.len() >= 4 * crate::registry::MAX_SPARE_PLANS {
        plans.clear();
    }
    plans.insert(version, Arc::clone(&p));
    Some(p)
}

/// The flow, created (and counted in `created`) if there is room.
fn flow_entry<'a>(
    flows: &'a mut FxHashMap<FlowKey, FlowState>,
    capacity: usize,
    created: &mut u64,
    key: FlowKey,
    now_ms: u64,
) -> Option<&'a mut FlowState> {
    let len = flows.len();
    match flows.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(_) if len >= capacity => None,
        std::collections::hash_map::Entry::Vacant(v) => {
            *created += 1;
            Some(v.insert(FlowState {
                key,
                digests: 0,
                first_ms: now_ms,
                last_ms: now_ms,
                touched: Instant::now(),
                pint: None,
                path_resets: 0,
                decode_digests: None,
                pint_since: 0,
                counts: Vec::new(),
                loss: Vec::new(),
                loss_path: 0,
                loss_rerouting: false,
                latency_detector: None,
                loss_detector: None,
                loss_fed: [(u64::MAX, 0, 0); LOSS_EPOCHS_KEPT],
                loss_unsettled: Vec::new(),
                probes: 0,
                probe_detector: None,
                probe_reporter: None,
                owner_doubted: None,
                detect_due_s: f64::INFINITY,
                due: UNSCHEDULED,
            }))
        }
    }
}

/// A new flow record of `plan` for paths of `k` hops, the last pinned to `reporter`, from
/// `pinned` (worked out there once).
fn pinned_record<'p>(
    pinned: &'p mut FxHashMap<(u32, u32, usize), FlowRecord>,
    plan: &SinkPlan,
    space: Space<'_>,
    k: usize,
    reporter: u32,
) -> &'p FlowRecord {
    let key = (plan.version, reporter, k);
    if pinned.len() >= PINNED_RECORDS && !pinned.contains_key(&key) {
        pinned.clear();
    }
    pinned.entry(key).or_insert_with(|| {
        let mut record = FlowRecord::new(&plan.plan, k);
        record.pin(&plan.plan, space, k, reporter);
        record
    })
}

fn new_pint(plan: &Arc<SinkPlan>, record: FlowRecord, reporter: u32, d: &WireDigest) -> PintState {
    let k = record.k();
    PintState {
        plan: Arc::clone(plan),
        record,
        reporter,
        ingress_port: d.ingress_port,
        egress_port: d.egress_port,
        first_pinned: k == 1,
        first_pin: None,
        summary_slots: Vec::new(),
        last_decoded: None,
        conflicts: 0,
    }
}

/// Heap bytes of one flow.
pub fn flow_heap_bytes(f: &FlowState) -> usize {
    f.counts.capacity() * std::mem::size_of::<SwitchCount>()
        + f.loss.capacity() * std::mem::size_of::<LinkLoss>()
        + f.pint.as_ref().map_or(0, |p| {
            p.record.memory_bytes() + p.summary_slots.capacity() * std::mem::size_of::<u32>()
        })
}

/// A decoded path's hash, never 0.
fn path_hash(path: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    path.hash(&mut h);
    h.finish().max(1)
}

/// The flow's decoded path (switch IDs), if its path query is decoded.
pub fn decoded_path(flow: &FlowState, space: Space<'_>) -> Option<Vec<u32>> {
    let p = flow.pint.as_ref()?;
    let q = p.plan.path_query?;
    let cx = path_context(&p.plan.plan, space, q)?;
    p.record.path(q)?.path(cx)
}

/// Says in the log, once a minute at most, that `key`'s digests fit no path of `k`
/// switches among those paths are decoded over (its decoding started over `resets` times
/// under its plan and never ended): with a `--topology`, the likeliest cause is a topology whose links are
/// not the network's, which nothing else says (every such flow's path stays unknown).
fn say_unfit(cx: &ShardContext, key: &FlowKey, k: usize, reporter: u32, resets: u32) {
    let now = crate::registry::unix_ms();
    let said = cx.unfit_said_ms.load(Relaxed);
    if now < said.saturating_add(60_000)
        || cx
            .unfit_said_ms
            .compare_exchange(said, now, Relaxed, Relaxed)
            .is_err()
    {
        return;
    }
    let among = match &cx.topology {
        Some(t) => format!(
            "in the --topology given ({}): a link of its route is not in it (is it the network's?), or the route keeps changing",
            t.name
        ),
        None => "among the switches connected to this sink: a switch of its route is not connected here (no telemetry.sink, or another sink), or the route keeps changing".to_owned(),
    };
    tracing::warn!(
        flow = %key,
        switch = reporter,
        "flow {key} (reported by switch {reporter}): its digests fit no path of {k} switches {among}; its path's decoding started over {resets} times and never ended (said once a minute at most; each flow's path_resets is in /api/flows)"
    );
}

#[cfg(test)]
mod tests;

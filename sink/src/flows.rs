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
use crate::events::{EventLog, EventPlace};
use crate::registry::{Registry, SinkPlan};
use crate::schedule::{Now, Schedule, UNSCHEDULED};
use crate::summary::RecentSummary;

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
}

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
    /// Of those, epochs whose flowsets at the switch did not decode whole: a flow that
    /// peeled out of such a set is almost always right, but a flow the flow filter hid
    /// (its false positive) can leave its packets on one that shares its cells.
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

/// The loss one flow contributes to one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LinkLoss {
    link: (u32, u32),
    lost: i64,
    /// Counted before the link, never after it.
    vanished: bool,
    /// What the counts before the link less those after it held that is not loss: what
    /// an end of the link may have missed in epochs whose counts there were unsure.
    offset: i64,
}

/// Unsure switches a flow remembers before its path is known; beyond, every link counts
/// from the path's decoding.
const UNSETTLED_KEPT: usize = 32;

/// [`FlowState::loss_unsettled`] for "every switch".
const ALL_UNSETTLED: u32 = u32::MAX;

/// Moves a count of flows with a property when one flow gains or loses it.
fn adjust(v: &mut u64, was: bool, is: bool) {
    match (was, is) {
        (false, true) => *v += 1,
        (true, false) => *v = v.saturating_sub(1),
        _ => {}
    }
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
    /// was known (sorted; [`ALL_UNSETTLED`] alone when too many to list): their links' loss
    /// counts from when the path is first known.
    loss_unsettled: Vec<u32>,
    /// Whether loss was counted on a decoded path of the flow: a link of a later path that
    /// the flow did not have counts its loss from when it has it (a route change).
    loss_counted: bool,
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

/// How far a probe's send time may be after its arrival (clocks of one machine, or of
/// hosts kept in step), ns.
const PROBE_CLOCK_SLACK_NS: u64 = 1_000_000_000;

/// The longest one-way delay a probe may show, ns: beyond it the send time is not of the
/// clock the arrival is measured by. Two windows: the sweeps close a series' windows by the
/// sink's clock, and a sender's clock further behind would have them closed before its
/// probes came.
const PROBE_MAX_DELAY_NS: u64 = 10_000_000_000;

/// Epochs whose loss input a flow remembers (a flowset later than this many epochs adds
/// its counts as new).
const LOSS_EPOCHS_KEPT: usize = 4;

/// The place of epoch `epoch` in a flow's loss input, the oldest epoch's if it has none.
/// None for an epoch older than every one remembered: a part of an epoch long gone (a
/// flowset that came many epochs late), whose other part may have gone into the series
/// already or been left out; given now it would stand alone in a later window, as a loss
/// (or a gain) that never was.
fn loss_slot(fed: &mut [(u64, u64, u64); LOSS_EPOCHS_KEPT], epoch: u64) -> Option<usize> {
    if let Some(i) = fed.iter().position(|f| f.0 == epoch) {
        return Some(i);
    }
    // The oldest epoch's place (an unused one, u64::MAX, first).
    let oldest = (0..LOSS_EPOCHS_KEPT)
        .min_by_key(|&i| fed[i].0.wrapping_add(1))
        .expect("slots");
    if fed[oldest].0 != u64::MAX && fed[oldest].0 > epoch {
        return None;
    }
    fed[oldest] = (epoch, 0, 0);
    Some(oldest)
}

/// What epoch `epoch`'s counts at a flow's first and last switch (None: that switch's
/// counts have moved to a later epoch, or have not come) add to its loss series: (lost,
/// sent) not given before, as `fed` remembers; None when nothing is new. An epoch whose
/// counts come in parts (a late flowset) adds each part once.
fn loss_input(
    fed: &mut [(u64, u64, u64); LOSS_EPOCHS_KEPT],
    epoch: u64,
    first: Option<u64>,
    last: Option<u64>,
) -> Option<(i64, u64)> {
    let slot = loss_slot(fed, epoch)?;
    let (_, sent_before, delivered_before) = fed[slot];
    if sent_before == u64::MAX {
        // An epoch whose counts were unsure at either end.
        return None;
    }
    // A switch whose counts moved on keeps what it gave for this epoch.
    let sent = first.unwrap_or(sent_before).max(sent_before);
    let delivered = last.unwrap_or(delivered_before).max(delivered_before);
    fed[slot] = (epoch, sent, delivered);
    let (new_sent, new_delivered) = (sent - sent_before, delivered - delivered_before);
    if new_sent == 0 && new_delivered == 0 {
        return None;
    }
    Some((new_sent as i64 - new_delivered as i64, new_sent))
}

/// A probe stream seen this far (numbered up to at least this) that shows a number this far
/// below its highest, sent later than any before, restarted.
const RESTART_AFTER_SEQ: u64 = 64;

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
    /// Updates for new flows refused because the table was full.
    pub flows_refused: u64,
    /// Path decodings started over.
    pub path_resets: u64,
    /// FlowRadar counters applied (flow, switch, epoch).
    pub counts_applied: u64,
    /// Export records lost to the exporter's full queue: at the sink's stop, after an ended
    /// flow's [`EXPORT_WAIT`], or at once while the table is nearly full.
    pub exports_dropped: u64,
    /// Export records put off to a later sweep because the exporter's queue was full
    /// (their counts go in the next record that does go).
    pub exports_deferred: u64,
    /// Probe arrivals left out of detection: sent more than a second after they arrived.
    pub probes_refused: u64,
    /// Flows the sweeps looked at (ended, an active timeout passed, or a detection window
    /// due to close); the others were passed by.
    pub flows_swept: u64,
}

/// The flows of one decode thread.
#[derive(Debug)]
pub struct FlowTable {
    flows: FxHashMap<FlowKey, FlowState>,
    capacity: usize,
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
    /// Counters.
    pub stats: ShardStats,
}

/// How long an ended flow's records may wait for room in the export queue before they are
/// dropped (counted) and the flow forgotten.
const EXPORT_WAIT: Duration = Duration::from_secs(10);

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
            links: FxHashMap::default(),
            switch_samples: Vec::new(),
            summary_index: FxHashMap::default(),
            plans: FxHashMap::default(),
            samples: Vec::new(),
            identity: Vec::new(),
            owners: Vec::new(),
            pinned: FxHashMap::default(),
            schedule: Schedule::default(),
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
                self.update_loss(cx, key, &[]);
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
                det.note_arrival(now.unix_s, d.time_ns as f64 / 1e9);
                det.push(Sample {
                    seq: None,
                    send: d.time_ns as f64 / 1e9,
                    delay_ms: a.last / 1e6,
                });
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
        cx.events.record(first.key, "latency", latency_events, || {
            event_place(flow, space)
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
            c.epochs += 1;
            c.unsure_epochs += u32::from(unsure.binary_search(&switch).is_ok());
            c.first_ms = c.first_ms.min(epoch_ms.0);
            c.last_ms = c.last_ms.max(epoch_ms.0 + epoch_ms.1);
            c.last_epoch = (epoch, packets, bytes);
            self.stats.counts_applied += 1;
            touched.push(key);
        }
        touched.sort_unstable();
        touched.dedup();
        for key in touched {
            self.update_loss(cx, key, unsure);
            self.detect_loss(cx, key, epoch, epoch_ms, unsure, missing, now.unix_s);
            if let Some(flow) = self.flows.get_mut(&key) {
                let due = flow.deadline(&self.schedule, now);
                self.schedule.put(key, &mut flow.due, due);
            }
        }
    }

    /// Records probe arrivals: each probe stream's samples (sequence number, send time,
    /// one-way delay = arrival at the last switch less send time) go to its flow's detector.
    pub fn add_probes(&mut self, cx: &ShardContext, probes: &[telemetry::protocol::WireProbe]) {
        self.add_probes_at(cx, probes, Now::read());
    }

    /// [`FlowTable::add_probes`] at `now`.
    fn add_probes_at(
        &mut self,
        cx: &ShardContext,
        probes: &[telemetry::protocol::WireProbe],
        now: Now,
    ) {
        for p in probes {
            let Some(flow) = flow_entry(
                &mut self.flows,
                self.capacity,
                &mut self.stats.flows_created,
                p.key,
                p.recv_ns / 1_000_000,
            ) else {
                self.stats.flows_refused += 1;
                continue;
            };
            flow.touched = now.at;
            flow.probes += 1;
            flow.last_ms = flow.last_ms.max(p.recv_ns / 1_000_000);
            // Sent more than a second after it arrived: a clock stepped, or not a probe. Its
            // send time would close every window and open one far ahead. Sent more than
            // 10 s before: no path holds a packet that long; a capture replayed (its probes
            // carry the send times of its making) or a clock far off, whose delays would be
            // events of years, or whose windows the sweeps would close before they filled.
            if p.sent_ns > p.recv_ns.saturating_add(PROBE_CLOCK_SLACK_NS)
                || p.sent_ns.saturating_add(PROBE_MAX_DELAY_NS) < p.recv_ns
            {
                self.stats.probes_refused += 1;
                let due = flow.deadline(&self.schedule, now);
                self.schedule.put(p.key, &mut flow.due, due);
                continue;
            }
            // A stream that starts again from 0 (its sender restarted) is a new series: the
            // old one's events are closed, not mixed with it. Its first probes may be lost:
            // a number far below the stream's highest, sent after every probe seen so far
            // (a late probe of the old numbers was sent before), starts it again.
            let sent_s = p.sent_ns as f64 / 1e9;
            if let Some(old) = flow.probe_detector.take_if(|d| {
                d.highest_seq()
                    .is_some_and(|h| h >= RESTART_AFTER_SEQ && p.seq <= h - RESTART_AFTER_SEQ)
                    && d.latest_send().is_some_and(|t| sent_s > t)
            }) {
                let events = old.finish().events;
                cx.events
                    .record(p.key, "probes", events, || place_of(flow, cx));
            }
            let det = flow
                .probe_detector
                .get_or_insert_with(|| Box::new(Detector::adaptive(cx.detection)));
            det.note_arrival(now.unix_s, p.sent_ns as f64 / 1e9);
            det.push(Sample {
                seq: Some(p.seq),
                send: p.sent_ns as f64 / 1e9,
                delay_ms: (p.recv_ns as i128 - p.sent_ns as i128) as f64 / 1e6,
            });
            let events = det.take_events();
            cx.events
                .record(p.key, "probes", events, || place_of(flow, cx));
            flow.detect_due_s = FlowState::detect_due(
                &flow.latency_detector,
                &flow.loss_detector,
                &flow.probe_detector,
            );
            let due = flow.deadline(&self.schedule, now);
            self.schedule.put(p.key, &mut flow.due, due);
        }
    }

    /// Feeds the flow's loss in this epoch (its count at its first switch less its count at
    /// its last, on its decoded path) to its loss detector.
    #[allow(clippy::too_many_arguments)]
    fn detect_loss(
        &mut self,
        cx: &ShardContext,
        key: FlowKey,
        epoch: u64,
        epoch_ms: (u64, u64),
        unsure: &[u32],
        missing: &[u32],
        now_s: f64,
    ) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let switches = cx.switches();
        let space = switches.space();
        let Some(path) = decoded_path(flow, space) else {
            return;
        };
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return;
        };
        let in_epoch = |s: u32| {
            flow.counts
                .iter()
                .find(|c| c.switch == s && c.last_epoch.0 == epoch)
                .map(|c| c.last_epoch.1)
        };
        let left_out =
            |s: u32| unsure.binary_search(&s).is_ok() || missing.binary_search(&s).is_ok();
        if left_out(first) || left_out(last) {
            // Either end may have missed some of the epoch's packets, or counts them only
            // later: none of its counts (now or late) is the flow's loss.
            if let Some(slot) = loss_slot(&mut flow.loss_fed, epoch) {
                flow.loss_fed[slot] = (epoch, u64::MAX, u64::MAX);
            }
            // Packets in flight into or out of it are counted at one end only: the windows
            // it falls in are judged for loss only while few of their epochs are left out.
            if let Some(det) = flow.loss_detector.as_mut() {
                det.push_unsure(epoch_ms.0 as f64 / 1e3);
                flow.detect_due_s = FlowState::detect_due(
                    &flow.latency_detector,
                    &flow.loss_detector,
                    &flow.probe_detector,
                );
            }
            return;
        }
        let (sent, delivered) = (in_epoch(first), in_epoch(last));
        let Some((lost, sent)) = loss_input(&mut flow.loss_fed, epoch, sent, delivered) else {
            return;
        };
        let det = flow
            .loss_detector
            .get_or_insert_with(|| Box::new(Detector::new(cx.detection)));
        det.note_arrival(now_s, (epoch_ms.0 + epoch_ms.1) as f64 / 1e3);
        det.push_loss(epoch_ms.0 as f64 / 1e3, lost, sent);
        let events = det.take_events();
        cx.events
            .record(key, "counters", events, || event_place(flow, space));
        flow.detect_due_s = FlowState::detect_due(
            &flow.latency_detector,
            &flow.loss_detector,
            &flow.probe_detector,
        );
    }

    /// Recomputes a flow's loss on each link of its decoded path and adds the change to the
    /// links' totals. A link with an end in `unsure` keeps the loss it had: what its counts
    /// now differ by beyond that is taken as what that end missed, not as loss.
    fn update_loss(&mut self, cx: &ShardContext, key: FlowKey, unsure: &[u32]) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let is_unsure = |s: u32| unsure.binary_search(&s).is_ok();
        let switches = cx.switches();
        let space = switches.space();
        let Some(path) = decoded_path(flow, space) else {
            let u = &mut flow.loss_unsettled;
            if u.first() != Some(&ALL_UNSETTLED) {
                u.extend_from_slice(unsure);
                u.sort_unstable();
                u.dedup();
                if u.len() > UNSETTLED_KEPT {
                    *u = vec![ALL_UNSETTLED];
                }
            }
            return;
        };
        let unsettled = |s: u32| {
            let u = &flow.loss_unsettled;
            u.first() == Some(&ALL_UNSETTLED) || u.binary_search(&s).is_ok()
        };
        let count = |s: u32| {
            flow.counts
                .iter()
                .find(|c| c.switch == s)
                .map(|c| c.packets)
        };
        // A link new to a flow whose loss was counted on another path: the route changed.
        // The counts are totals over the flow's life, the old route's packets in them: the
        // link counts its loss from here on.
        let rerouted = flow.loss_counted;
        let mut now = Vec::with_capacity(path.len().saturating_sub(1));
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            // Counted before the link (or, in an epoch unsure there, possibly missed); after
            // it, counted or known to be zero (the switch exports, so a flow it never counted
            // had no packet there).
            let up = match count(a) {
                Some(u) => u,
                None if is_unsure(a) || is_unsure(b) => 0,
                None => continue,
            };
            let down = match count(b) {
                Some(d) => d,
                None if cx.registry.switch(b).is_some() => 0,
                None => continue,
            };
            let raw = up as i64 - down as i64;
            let old = flow.loss.iter().find(|o| o.link == (a, b));
            now.push(if is_unsure(a) || is_unsure(b) {
                let (lost, vanished) = old.map_or((0, false), |o| (o.lost, o.vanished));
                LinkLoss {
                    link: (a, b),
                    lost,
                    vanished,
                    offset: raw - lost,
                }
            } else {
                let offset = match old {
                    // What an unsure epoch set aside held the packets in flight across it
                    // too: counted at `b` later, they take it back, never below no loss.
                    Some(o) if o.offset > 0 && raw < o.offset => raw.max(0),
                    Some(o) => o.offset,
                    None if rerouted || unsettled(a) || unsettled(b) => raw,
                    None => 0,
                };
                LinkLoss {
                    link: (a, b),
                    lost: raw - offset,
                    vanished: up > 0 && down == 0,
                    offset,
                }
            });
        }
        flow.loss_unsettled = Vec::new();
        let before = std::mem::take(&mut flow.loss);
        for l in &now {
            let old = before.iter().find(|o| o.link == l.link);
            let e = self.links.entry(l.link).or_default();
            e.flows += u64::from(old.is_none());
            e.lost_packets += l.lost - old.map_or(0, |o| o.lost);
            adjust(
                &mut e.flows_with_loss,
                old.is_some_and(|o| o.lost > 0),
                l.lost > 0,
            );
            adjust(
                &mut e.vanished_flows,
                old.is_some_and(|o| o.vanished),
                l.vanished,
            );
        }
        flow.loss_counted |= !now.is_empty();
        flow.loss = now;
    }

    /// Exports counters due (the active timeout passed) and forgets flows idle for
    /// `idle`; records go to `out`. A record `out` refuses (its queue is full) waits for a
    /// later sweep, counted, an ended flow kept for it [`EXPORT_WAIT`] at most and not while
    /// the table is nearly full (then it is dropped, counted). Events of the detection
    /// windows it closes go to `cx`'s event log, when given.
    pub fn sweep(
        &mut self,
        idle: Duration,
        active: Duration,
        cx: Option<&ShardContext>,
        out: impl FnMut(FlowExport) -> bool,
    ) {
        let now = Now::read();
        self.sweep_as(now, idle, active, EndReason::IdleTimeout, cx, out);
    }

    /// [`FlowTable::sweep`], the records of flows that end saying `ending`. The flows looked
    /// at are those the schedule lists as due; when the timeouts are new (the first sweep, or
    /// others than the last's), at the stop, and after a wall-clock step, every flow is
    /// checked and listed again.
    fn sweep_as(
        &mut self,
        now: Now,
        idle: Duration,
        active: Duration,
        ending: EndReason,
        cx: Option<&ShardContext>,
        out: impl FnMut(FlowExport) -> bool,
    ) {
        for (_, summary) in &mut self.switch_samples {
            summary.rotate(now.at);
        }
        // At the stop a record that cannot go is lost (counted); otherwise it waits: its
        // counts stay unexported (and an ended flow in the table) until a sweep with room,
        // an ended flow's for [`EXPORT_WAIT`] at most, and not while the table is nearly
        // full (a flow kept for its records would take a new flow's place).
        let at_stop = ending == EndReason::ForcedEnd;
        let mut sweep = Sweep {
            now: now.at,
            now_s: now.unix_s,
            idle,
            active,
            ending,
            at_stop,
            crowded: self.flows.len() >= self.capacity - self.capacity / 16,
            cx,
            out,
            full: false,
            dropped: 0,
            deferred: 0,
            swept: 0,
        };
        let mut gone = Vec::new();
        // Every flow listed again when the timeouts are new, at the stop, and when the wall
        // clock stepped (detection deadlines were placed by the clocks' old offset).
        if at_stop || !self.schedule.holds_for((idle, active), now) {
            self.schedule.reset((idle, active), now);
            for (key, flow) in &mut self.flows {
                flow.due = UNSCHEDULED;
                if sweep.look_at(key, flow) {
                    gone.push(*key);
                } else {
                    let due = flow.deadline(&self.schedule, now);
                    self.schedule.put(*key, &mut flow.due, due);
                }
            }
        } else {
            let mut again = Vec::new();
            let this_second = self.schedule.second(Some(now.at));
            for (second, keys) in self.schedule.take_due(now.at) {
                for key in keys {
                    // Forgotten since, listed for another second since, or looked at
                    // already in this sweep (listed twice in the seconds taken).
                    let Some(flow) = self.flows.get_mut(&key).filter(|f| f.due == second) else {
                        continue;
                    };
                    flow.due = UNSCHEDULED;
                    if sweep.look_at(&key, flow) {
                        gone.push(key);
                        continue;
                    }
                    let due = flow.deadline(&self.schedule, now);
                    if due > this_second {
                        self.schedule.put(key, &mut flow.due, due);
                    } else {
                        again.push(key);
                    }
                }
            }
            // A flow whose deadline is a second taken already (not quite due yet, or its
            // records wait) is listed again, for the next sweep, once the seconds taken are
            // done: listed now, another listing of it among them would count.
            for key in again {
                if let Some(flow) = self.flows.get_mut(&key) {
                    let due = flow.deadline(&self.schedule, now);
                    self.schedule.put(key, &mut flow.due, due);
                }
            }
        }
        self.stats.flows_swept += sweep.swept;
        self.stats.exports_dropped += sweep.dropped;
        self.stats.exports_deferred += sweep.deferred;
        for k in gone {
            self.flows.remove(&k);
            self.stats.flows_evicted += 1;
        }
    }

    /// Exports every flow's remaining counters and events (at shutdown).
    pub fn flush(&mut self, cx: Option<&ShardContext>, out: impl FnMut(FlowExport) -> bool) {
        self.sweep_as(
            Now::read(),
            Duration::ZERO,
            Duration::ZERO,
            EndReason::ForcedEnd,
            cx,
            out,
        );
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

/// One sweep's moment, timeouts and tallies, and where its records go.
struct Sweep<'a, F> {
    now: Instant,
    now_s: f64,
    idle: Duration,
    active: Duration,
    ending: EndReason,
    at_stop: bool,
    /// The table is nearly full: an ended flow's records that cannot go are dropped.
    crowded: bool,
    /// Where detected events go, and what places them.
    cx: Option<&'a ShardContext>,
    out: F,
    /// The export queue refused a record: the sweep's other records wait too.
    full: bool,
    dropped: u64,
    deferred: u64,
    swept: u64,
}

impl<F: FnMut(FlowExport) -> bool> Sweep<'_, F> {
    /// Looks at one flow, if anything is due for it: closes its detection windows that
    /// time has passed, sends its records due. Returns whether the flow ended and has
    /// nothing left to send (to be forgotten).
    fn look_at(&mut self, key: &FlowKey, flow: &mut FlowState) -> bool {
        let (now, now_s, idle, active) = (self.now, self.now_s, self.idle, self.active);
        let (ending, at_stop, crowded) = (self.ending, self.at_stop, self.crowded);
        if !at_stop && !flow.sweep_due(now, now_s, idle, active) {
            return false;
        }
        self.swept += 1;
        let ended = now.duration_since(flow.touched) >= idle;
        let lose = at_stop
            || (ended && (crowded || now.duration_since(flow.touched) >= idle + EXPORT_WAIT));
        // Detection: windows that time has passed close; an ending flow's close all.
        let found = [
            (&mut flow.latency_detector, "latency"),
            (&mut flow.loss_detector, "counters"),
            (&mut flow.probe_detector, "probes"),
        ]
        .map(|(det, series)| {
            let events = match det {
                Some(d) if ended => det.take().map(|d| d.finish().events).unwrap_or_default(),
                Some(d) => {
                    d.tick(now_s);
                    d.take_events()
                }
                None => Vec::new(),
            };
            (series, events)
        });
        if let Some(cx) = self.cx {
            let mut place = None;
            for (series, events) in found {
                cx.events.record(*key, series, events, || {
                    place.get_or_insert_with(|| place_of(flow, cx)).clone()
                });
            }
        }
        let ports = flow.pint.as_ref().map(|p| {
            (
                p.reporter,
                u16::from(p.ingress_port),
                u16::from(p.egress_port),
            )
        });
        let mut all_sent = true;
        for c in &mut flow.counts {
            let delta = (c.packets - c.exported.0, c.bytes - c.exported.1);
            // An ending flow always says so, its last packets already in an active-timeout
            // record or not (collectors wait for the end); a going one when there is
            // something new and the active timeout has passed.
            let due = if ended {
                c.packets > 0 && (delta.0 > 0 || !c.end_sent)
            } else {
                delta.0 > 0 && now.duration_since(c.exported_at) >= active
            };
            if !due {
                continue;
            }
            let (ingress, egress) = match ports {
                Some((r, i, e)) if r == c.switch => (Some(i), Some(e)),
                _ => (None, None),
            };
            let rec = FlowExport {
                key: *key,
                switch: c.switch,
                packets: delta.0,
                bytes: delta.1,
                start_ms: if delta.0 == 0 { c.last_ms } else { c.since_ms },
                end_ms: c.last_ms,
                ingress,
                egress,
                ended,
                end_reason: if ended {
                    ending
                } else {
                    EndReason::ActiveTimeout
                },
            };
            // Once the queue is full, the sweep's other records wait too.
            let sent = if lose {
                (self.out)(rec)
            } else {
                !self.full && (self.out)(rec)
            };
            if !sent {
                self.full = true;
                if lose {
                    self.dropped += 1;
                } else {
                    // Counted once however many sweeps it waits.
                    self.deferred += u64::from(!c.deferred);
                    c.deferred = true;
                    all_sent = false;
                    continue;
                }
            }
            c.exported = (c.packets, c.bytes);
            c.exported_at = now;
            c.recorded_to_ms = c.last_ms;
            c.end_sent |= ended;
            c.deferred = false;
        }
        let gone = ended && all_sent;
        if !gone {
            flow.refresh_detect_due();
        }
        gone
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
                loss_counted: false,
                latency_detector: None,
                loss_detector: None,
                loss_fed: [(u64::MAX, 0, 0); LOSS_EPOCHS_KEPT],
                loss_unsettled: Vec::new(),
                probes: 0,
                probe_detector: None,
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
    }
}

impl FlowState {
    /// The packets the flow lost on `link` as the link's totals count them, once its path
    /// is decoded and counted on both sides.
    pub fn loss_on(&self, link: (u32, u32)) -> Option<i64> {
        self.loss.iter().find(|l| l.link == link).map(|l| l.lost)
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

/// Where `flow`'s events happen: its decoded path, and the link of it where its counters
/// lost the most packets.
fn event_place(flow: &FlowState, space: Space<'_>) -> EventPlace {
    EventPlace {
        path: decoded_path(flow, space),
        lossy_link: flow
            .loss
            .iter()
            .filter(|l| l.lost > 0)
            .max_by_key(|l| l.lost)
            .map(|l| [l.link.0, l.link.1]),
    }
}

/// [`event_place`] among the sink's switches.
fn place_of(flow: &FlowState, cx: &ShardContext) -> EventPlace {
    event_place(flow, cx.switches().space())
}

/// The flow's decoded path (switch IDs), if its path query is decoded.
pub fn decoded_path(flow: &FlowState, space: Space<'_>) -> Option<Vec<u32>> {
    let p = flow.pint.as_ref()?;
    let q = p.plan.path_query?;
    let cx = path_context(&p.plan.plan, space, q)?;
    p.record.path(q)?.path(cx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use telemetry::pint::plan::Plan;
    use telemetry::pint::query::QueryFile;

    const PAPER: &str = include_str!("../../configs/queries/paper.toml");

    fn context() -> (ShardContext, u32) {
        let registry = Arc::new(Registry::default());
        let version = Plan::compile(&QueryFile::from_toml(PAPER).unwrap())
            .unwrap()
            .version;
        registry.add_plan(version, PAPER).unwrap();
        (
            ShardContext {
                registry,
                topology: None,
                events: Arc::new(EventLog::default()),
                detection: Params::default(),
            },
            version,
        )
    }

    fn digest(version: u32, flow: u32, i: u32) -> WireDigest {
        WireDigest {
            key: FlowKey {
                src: 0x0a00_0000 | (flow >> 16),
                dst: 0x0b00_0001,
                src_port: flow as u16,
                dst_port: 443,
                protocol: 6,
            },
            ingress_port: 1,
            egress_port: 0,
            pid: i.wrapping_mul(0x9e37_79b9) ^ flow,
            hops: 3,
            plan_version: version,
            digest: u64::from(i) & 0xffff,
            time_ns: 1_700_000_000_000_000_000,
        }
    }

    /// A flood of distinct flows stays within the table's bound; the ones refused are
    /// counted, and memory follows the flows kept, not the flows offered.
    #[test]
    fn a_flood_of_flows_stays_within_the_bound() {
        let (cx, v) = context();
        let mut t = FlowTable::new(1000);
        for burst in 0..50u32 {
            let ds: Vec<WireDigest> = (0..2000).map(|i| digest(v, burst * 2000 + i, i)).collect();
            t.add_digests(&cx, 9, &ds, &FlowRuns::default());
            assert!(t.len() <= 1000);
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.stats.flows_created, 1000);
        assert_eq!(t.stats.flows_refused, 99_000);
        let per_flow = t.memory_bytes() / t.len();
        assert!(
            per_flow < 8 * 1024,
            "one digest per flow: {per_flow} bytes per flow"
        );
        // Flows already tracked keep being recorded while the table is full.
        let again: Vec<WireDigest> = (0..1000).map(|i| digest(v, i, i + 1)).collect();
        let before = t.stats.flows_refused;
        t.add_digests(&cx, 9, &again, &FlowRuns::default());
        let tracked = (0..1000)
            .filter(|&i| t.get(&digest(v, i, 0).key).is_some_and(|f| f.digests == 2))
            .count();
        assert_eq!(tracked + (t.stats.flows_refused - before) as usize, 1000);
    }

    /// Digests taken grouped by flow record exactly what they record as sent: the same
    /// flows (and the same refused when the table is full), digests, path decoding and
    /// resets, samples per hop, switch summaries and counters.
    #[test]
    fn grouped_digests_record_as_digests_in_order_do() {
        let (cx, v) = context();
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) as u32
        };
        let batches: Vec<Vec<WireDigest>> = (0..4)
            .map(|b| {
                (0..600u32)
                    .map(|i| {
                        let r = next();
                        // One digest in twenty of a plan the sink lacks.
                        let version = if r % 20 == 0 { v ^ 1 } else { v };
                        let mut d = digest(version, r % 30, b * 600 + i);
                        d.digest = u64::from(next()) & 0xffff;
                        d
                    })
                    .collect()
            })
            .collect();
        let group = |ds: &[WireDigest]| -> FlowRuns {
            let mut keys: Vec<FlowKey> = Vec::new();
            for d in ds {
                if !keys.contains(&d.key) {
                    keys.push(d.key);
                }
            }
            let mut runs = FlowRuns::default();
            for k in &keys {
                runs.order
                    .extend((0..ds.len() as u32).filter(|&i| ds[i as usize].key == *k));
                runs.ends.push(runs.order.len() as u32);
            }
            runs
        };
        // Grouped three ways: by an order and its runs (as a connection decodes a batch),
        // by an order alone (runs found by key), and the digests put in that order with
        // only their runs (as a batch split between decode threads goes to each).
        let mut plain = FlowTable::new(25);
        let mut grouped = [FlowTable::new(25), FlowTable::new(25), FlowTable::new(25)];
        for ds in &batches {
            plain.add_digests(&cx, 9, ds, &FlowRuns::default());
            let runs = group(ds);
            grouped[0].add_digests(&cx, 9, ds, &runs);
            let order_only = FlowRuns {
                order: runs.order.clone(),
                ends: Vec::new(),
            };
            grouped[1].add_digests(&cx, 9, ds, &order_only);
            let in_order: Vec<WireDigest> = runs.order.iter().map(|&i| ds[i as usize]).collect();
            let ends_only = FlowRuns {
                order: Vec::new(),
                ends: runs.ends.clone(),
            };
            grouped[2].add_digests(&cx, 9, &in_order, &ends_only);
        }
        assert!(plain.stats.flows_refused > 0 && plain.stats.unknown_plan > 0);
        for grouped in &grouped {
            same_recording(&plain, grouped);
        }
    }

    /// Two tables that recorded the same digests (in whatever order) hold the same.
    fn same_recording(plain: &FlowTable, grouped: &FlowTable) {
        let stats = |t: &FlowTable| serde_json::to_string(&t.stats).unwrap();
        assert_eq!(stats(plain), stats(grouped));
        assert_eq!(plain.len(), grouped.len());
        for f in plain.iter() {
            let g = grouped.get(&f.key).expect("the same flows");
            assert_eq!(
                (f.digests, f.path_resets, f.decode_digests),
                (g.digests, g.path_resets, g.decode_digests)
            );
            let (a, b) = (f.pint.as_ref().unwrap(), g.pint.as_ref().unwrap());
            assert_eq!(a.record.packets(), b.record.packets());
            for q in 0..a.plan.plan.queries.len() {
                assert_eq!(
                    a.record.path(q).map(|p| format!("{p:?}")),
                    b.record.path(q).map(|p| format!("{p:?}"))
                );
                assert_eq!(
                    a.record.sketches(q).is_some(),
                    b.record.sketches(q).is_some()
                );
                if let (Some(x), Some(y)) = (a.record.sketches(q), b.record.sketches(q)) {
                    for hop in 1..=a.record.k() {
                        assert_eq!(x.samples(hop), y.samples(hop));
                    }
                }
            }
        }
        let summaries = |t: &FlowTable| -> Vec<String> {
            let mut s: Vec<String> = t
                .switch_samples()
                .map(|(k, c)| format!("{k:?} {c:?}"))
                .collect();
            s.sort();
            s
        };
        assert_eq!(summaries(plain), summaries(grouped));
    }

    /// An epoch whose counts come in parts (the last switch's flowset late) gives its loss
    /// once: N sent, N delivered is no loss, however the parts arrive.
    #[test]
    fn an_epochs_counts_in_parts_add_up_to_its_loss() {
        let mut fed = [(u64::MAX, 0, 0); LOSS_EPOCHS_KEPT];
        // Epoch 7: the first switch's count, then the last's (late).
        assert_eq!(loss_input(&mut fed, 7, Some(100), None), Some((100, 100)));
        assert_eq!(
            loss_input(&mut fed, 7, Some(100), Some(100)),
            Some((-100, 0))
        );
        // Nothing new: nothing given.
        assert_eq!(loss_input(&mut fed, 7, Some(100), Some(100)), None);
        // The first switch has moved on to epoch 8 when epoch 7's last count comes.
        assert_eq!(loss_input(&mut fed, 8, Some(50), None), Some((50, 50)));
        assert_eq!(loss_input(&mut fed, 8, None, Some(48)), Some((-48, 0)));
        // Both at once, 3 lost.
        assert_eq!(loss_input(&mut fed, 9, Some(20), Some(17)), Some((3, 20)));
        // Four epochs are kept: epoch 7 is still known after 10, forgotten after 11; a part
        // of it that comes then is left out (alone in a later window it was a false loss).
        assert_eq!(loss_input(&mut fed, 10, Some(1), Some(1)), Some((0, 1)));
        assert_eq!(loss_input(&mut fed, 7, Some(100), Some(100)), None);
        assert_eq!(loss_input(&mut fed, 11, Some(1), Some(1)), Some((0, 1)));
        assert_eq!(loss_input(&mut fed, 7, Some(100), None), None);
        assert_eq!(loss_input(&mut fed, 6, None, Some(90)), None);
        // Newer epochs still take the oldest's place.
        assert_eq!(loss_input(&mut fed, 12, Some(5), Some(4)), Some((1, 5)));
    }

    /// A flow of two hops, switch 1 then switch 2 (a line topology; its source's edge
    /// switch learned): its path is decoded from its pins alone.
    fn two_hop_flow(t: &mut FlowTable) -> (ShardContext, FlowKey) {
        let (mut cx, v) = context();
        cx.topology = Some(Arc::new(Topology::line(2)));
        let d = WireDigest {
            hops: 2,
            ..digest(v, 7, 1)
        };
        cx.registry.learn_owners(&[(d.key.src, 1)]);
        t.add_digests(&cx, 2, &[d], &FlowRuns::default());
        let path = decoded_path(
            t.flows.get(&d.key).unwrap(),
            Space::Topology(&Topology::line(2)),
        );
        assert_eq!(path, Some(vec![1, 2]));
        (cx, d.key)
    }

    /// A flowset missing at its epoch's deadline and coming late: the link's totals are
    /// exact once it comes, and the flow's loss series leaves the epoch out (it took the
    /// sent packets in one window and the delivered ones, late, in a later one: a false
    /// loss event on a loaded machine).
    #[test]
    fn a_late_flowset_completes_the_totals_and_stays_out_of_the_loss_series() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        t.add_counts(&cx, 1, (1000, 10), &[(key, 1, 100, 10_000)], &[], &[2]);
        t.add_counts(&cx, 1, (1000, 10), &[(key, 2, 100, 10_000)], &[], &[]);
        assert_eq!(lost(&t, key), (0, 0, 0));
        assert_eq!(
            t.flows[&key].loss_fed.iter().find(|f| f.0 == 1),
            Some(&(1, u64::MAX, u64::MAX))
        );
        assert!(t.flows[&key].loss_detector.is_none(), "nothing fed");
    }

    /// The flow's first epoch unsure at its first switch (which missed it): the link keeps
    /// no loss from it, and what follows counts from there (it read as 50 packets more
    /// arriving than were sent).
    #[test]
    fn a_first_epoch_unsure_upstream_adds_no_loss() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        t.add_counts(&cx, 1, (1000, 10), &[(key, 2, 50, 5_000)], &[1], &[]);
        assert_eq!(lost(&t, key), (0, 0, 0));
        t.add_counts(
            &cx,
            2,
            (1010, 10),
            &[(key, 1, 100, 10_000), (key, 2, 99, 9_900)],
            &[],
            &[],
        );
        assert_eq!(lost(&t, key), (1, 1, 0));
        // Unsure switches elsewhere in the network, before a path is known, leave the loss of
        // links they are not on as it is.
        let mut t = FlowTable::new(10);
        let (mut cx, v) = context();
        cx.topology = Some(Arc::new(Topology::line(2)));
        let d = WireDigest {
            hops: 2,
            ..digest(v, 8, 1)
        };
        t.add_counts(
            &cx,
            1,
            (1000, 10),
            &[(d.key, 1, 10, 1_000), (d.key, 2, 7, 700)],
            &[44],
            &[],
        );
        cx.registry.learn_owners(&[(d.key.src, 1)]);
        t.add_digests(&cx, 2, &[d], &FlowRuns::default());
        assert_eq!(lost(&t, d.key), (3, 3, 0));
    }

    /// A source's edge switch learned wrongly (a multi-homed host): pinned as the flow's
    /// first hop, its conflict starts the path over without that pin, and the path decodes
    /// and stays decoded (the pin came back every 64 digests and broke it each time).
    #[test]
    fn a_wrong_first_hop_pin_is_not_tried_again() {
        let (mut cx, v) = context();
        let line = Arc::new(Topology::line(3));
        cx.topology = Some(Arc::clone(&line));
        let key = digest(v, 5, 0).key;
        // The flow enters at switch 2 and leaves at 3; its source is believed behind 1.
        cx.registry.learn_owners(&[(key.src, 1)]);
        let mut t = FlowTable::new(10);
        record_along(&mut t, &cx, v, (5, &[2, 3]), 2000, 1_000, 0);
        let f = &t.flows[&key];
        assert_eq!(decoded_path(f, Space::Topology(&line)), Some(vec![2, 3]));
        assert!(f.path_resets <= 2, "{} resets", f.path_resets);
    }

    /// Encodes `n` packets of flow `flow` (numbered `from` on) along `path` (switch IDs)
    /// with every hop's latency `latency_ns`, and records them in `t`.
    fn record_along(
        t: &mut FlowTable,
        cx: &ShardContext,
        v: u32,
        (flow, path): (u32, &[u32]),
        n: u32,
        latency_ns: u64,
        from: u32,
    ) {
        let plan = cx.registry.plan(v).unwrap();
        for i in from..from + n {
            let pid = i.wrapping_mul(0x9e37_79b9) ^ flow;
            let mut d = 0;
            for (h, &s) in path.iter().enumerate() {
                d = plan.plan.encode(
                    d,
                    &telemetry::pint::plan::HopInput {
                        pid,
                        hop: h + 1,
                        switch_id: s,
                        ingress_port: 1,
                        egress_port: 0,
                        hop_latency_ns: latency_ns,
                        queue_bytes: 0,
                        utilization: 100,
                    },
                );
            }
            let w = WireDigest {
                pid,
                hops: path.len() as u8,
                digest: d,
                ..digest(v, flow, i)
            };
            t.add_digests(cx, *path.last().unwrap(), &[w], &FlowRuns::default());
        }
    }

    /// A context over a diamond, 1 - 2 - 4 and 1 - 3 - 4 (two routes from 1 to 4).
    fn diamond_context() -> (ShardContext, u32, Arc<Topology>) {
        let (mut cx, v) = context();
        let diamond = Arc::new(Topology::from_edges(
            "diamond",
            (1..=4).map(|i| format!("s{i}")).collect(),
            &[(0, 1), (0, 2), (1, 3), (2, 3)],
        ));
        cx.topology = Some(Arc::clone(&diamond));
        (cx, v, diamond)
    }

    /// A route change (the path decodes again, to another) starts the hops' values over:
    /// hop latency after it is the new route's alone.
    #[test]
    fn a_route_change_starts_the_hops_values_over() {
        let (cx, v, diamond) = diamond_context();
        let latency = cx
            .registry
            .plan(v)
            .unwrap()
            .plan
            .queries
            .iter()
            .position(|q| matches!(q.kind, QueryKind::DynamicPerFlow { .. }))
            .unwrap();
        let mut t = FlowTable::new(10);
        record_along(&mut t, &cx, v, (6, &[1, 2, 4]), 3000, 2_000, 0);
        let key = digest(v, 6, 0).key;
        let space = Space::Topology(&diamond);
        assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 2, 4]));
        record_along(&mut t, &cx, v, (6, &[1, 3, 4]), 3000, 8_000, 3000);
        let f = &t.flows[&key];
        assert_eq!(decoded_path(f, space), Some(vec![1, 3, 4]));
        assert!(f.path_resets >= 1);
        let s = f.pint.as_ref().unwrap().record.sketches(latency).unwrap();
        for h in 1..=3 {
            let q = s.quantile(h, 0.1).unwrap();
            assert!((q - 8000.0).abs() < 8000.0 * 0.05, "hop {h}: {q}");
        }
    }

    /// A route change: the new route's links count loss from the change on. The counts
    /// are totals over the flow's life, so the old route's packets read as lost on the new
    /// first link (and as negative loss on the new last one) when the new links counted
    /// from no loss.
    #[test]
    fn a_route_change_counts_the_new_links_loss_from_the_change_on() {
        let (cx, v, diamond) = diamond_context();
        let space = Space::Topology(&diamond);
        let mut t = FlowTable::new(10);
        let key = digest(v, 6, 0).key;
        let at = |e: u64| (1_000_000 + 10 * e, 10);
        record_along(&mut t, &cx, v, (6, &[1, 2, 4]), 3000, 2_000, 0);
        assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 2, 4]));
        // 1000 packets on 1 - 2 - 4, 10 lost between 2 and 4.
        t.add_counts(
            &cx,
            1,
            at(1),
            &[(key, 1, 1000, 0), (key, 2, 1000, 0), (key, 4, 990, 0)],
            &[],
            &[],
        );
        assert_eq!(t.flows[&key].loss_on((2, 4)), Some(10));
        record_along(&mut t, &cx, v, (6, &[1, 3, 4]), 3000, 2_000, 3000);
        assert_eq!(decoded_path(&t.flows[&key], space), Some(vec![1, 3, 4]));
        // 500 on 1 - 3 - 4, none lost; then 100, 5 lost between 1 and 3.
        t.add_counts(
            &cx,
            2,
            at(2),
            &[(key, 1, 500, 0), (key, 3, 500, 0), (key, 4, 500, 0)],
            &[],
            &[],
        );
        let f = &t.flows[&key];
        assert_eq!((f.loss_on((1, 3)), f.loss_on((3, 4))), (Some(0), Some(0)));
        t.add_counts(
            &cx,
            3,
            at(3),
            &[(key, 1, 100, 0), (key, 3, 95, 0), (key, 4, 95, 0)],
            &[],
            &[],
        );
        let f = &t.flows[&key];
        assert_eq!((f.loss_on((1, 3)), f.loss_on((3, 4))), (Some(5), Some(0)));
        let lost = |a, b| t.links[&(a, b)].lost_packets;
        assert_eq!((lost(1, 3), lost(3, 4), lost(2, 4)), (5, 0, 10));
        assert_eq!(t.links[&(1, 3)].flows_with_loss, 1);
    }

    /// A path that cannot decode (a switch on it missing from the topology) starts its
    /// decoding over and over, but the hops' latency samples and utilisation values stay:
    /// each conflict threw them away, so such a flow showed almost none. (Here the topology
    /// alone decodes the path to 1, 2, 3 again after each conflict: the same path, so no
    /// route change.)
    #[test]
    fn a_path_that_cannot_decode_keeps_its_hops_values() {
        let (mut cx, v) = context();
        let line = Arc::new(Topology::line(3));
        cx.topology = Some(Arc::clone(&line));
        let plan = cx.registry.plan(v).unwrap();
        let latency = plan
            .plan
            .queries
            .iter()
            .position(|q| matches!(q.kind, QueryKind::DynamicPerFlow { .. }))
            .expect("the paper plan samples hop latency");
        let utilisation = plan
            .plan
            .queries
            .iter()
            .position(|q| matches!(q.kind, QueryKind::PerPacket { .. }))
            .expect("the paper plan has a per-packet query");
        let key = digest(v, 6, 0).key;
        let mut t = FlowTable::new(10);
        // Switch 9 is not in the topology: hop 2 has no candidate left once it writes.
        let n = 4000u32;
        record_along(&mut t, &cx, v, (6, &[1, 9, 3]), n, 2_000, 0);
        let f = &t.flows[&key];
        assert!(f.path_resets > 3, "{} resets", f.path_resets);
        let p = f.pint.as_ref().unwrap();
        let s = p.record.sketches(latency).unwrap();
        let samples: u64 = (1..=3).map(|h| s.samples(h)).sum();
        // About 15/16 of the packets carry a latency sample.
        assert!(
            samples as f64 >= 0.85 * f64::from(n),
            "{samples} latency samples of {n} packets"
        );
        for h in 1..=3 {
            let q = s.quantile(h, 0.5).unwrap();
            assert!((q - 2000.0).abs() < 2000.0 * 0.05, "hop {h}: {q}");
        }
        let a = p.record.aggregate(utilisation).unwrap();
        assert!(a.count as f64 >= 0.03 * f64::from(n), "{} values", a.count);
    }

    /// Lost packets on the flow's link as the link's totals count them.
    fn lost(t: &FlowTable, key: FlowKey) -> (i64, i64, u64) {
        let l = &t.links[&(1, 2)];
        (
            t.flows[&key].loss_on((1, 2)).unwrap(),
            l.lost_packets,
            l.vanished_flows,
        )
    }

    /// An epoch whose counts at one end of a link are unsure (its flowset not decoded whole,
    /// or its switch disconnected) adds no loss to the link: the difference it leaves is
    /// what that end missed. Loss before and after it still counts.
    #[test]
    fn an_epoch_unsure_at_one_end_adds_no_loss() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        // Epoch 1: 100 sent, 97 through.
        t.add_counts(
            &cx,
            1,
            (1000, 10),
            &[(key, 1, 100, 10_000), (key, 2, 97, 9_700)],
            &[],
            &[],
        );
        assert_eq!(lost(&t, key), (3, 3, 0));
        // Epoch 2: switch 2 did not decode the flow: it looks vanished there, but is not.
        t.add_counts(&cx, 2, (1010, 10), &[(key, 1, 100, 10_000)], &[2], &[]);
        assert_eq!(lost(&t, key), (3, 3, 0));
        // Epoch 3: switch 1 not decoded whole (it missed the flow), switch 2 counted it.
        t.add_counts(&cx, 3, (1020, 10), &[(key, 2, 50, 5_000)], &[1], &[]);
        assert_eq!(lost(&t, key), (3, 3, 0));
        // Epoch 4: both sure, 2 lost.
        t.add_counts(
            &cx,
            4,
            (1030, 10),
            &[(key, 1, 60, 6_000), (key, 2, 58, 5_800)],
            &[],
            &[],
        );
        assert_eq!(lost(&t, key), (5, 5, 0));
        // The flow's own loss series saw the two sure epochs only.
        let unsure: Vec<_> = t.flows[&key]
            .loss_fed
            .iter()
            .filter(|f| f.0 == 2 || f.0 == 3)
            .collect();
        assert_eq!(unsure, [&(2, u64::MAX, u64::MAX), &(3, u64::MAX, u64::MAX)]);
        // Epoch 5: switch 2 counted the flow in a flowset it did not decode whole. Each
        // switch's counts say how many of their epochs were unsure there.
        t.add_counts(
            &cx,
            5,
            (1040, 10),
            &[(key, 1, 10, 1_000), (key, 2, 10, 1_000)],
            &[2],
            &[],
        );
        let unsure_at = |s: u32| {
            let c = t.flows[&key].counts.iter().find(|c| c.switch == s).unwrap();
            (c.epochs, c.unsure_epochs)
        };
        assert_eq!((unsure_at(1), unsure_at(2)), ((4, 0), (4, 1)));
    }

    /// Packets in flight across an unsure epoch (counted at the first switch in it, at the
    /// second only in the next) take back what it set aside: the link never shows negative
    /// loss (it showed -10 for good).
    #[test]
    fn packets_in_flight_across_an_unsure_epoch_make_no_negative_loss() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        t.add_counts(
            &cx,
            1,
            (1000, 10),
            &[(key, 1, 100, 10_000), (key, 2, 90, 9_000)],
            &[2],
            &[],
        );
        t.add_counts(&cx, 2, (1010, 10), &[(key, 2, 10, 1_000)], &[], &[]);
        assert_eq!(lost(&t, key), (0, 0, 0));
    }

    /// The kinds of loss events from counters of flow `key`.
    fn counter_losses(cx: &ShardContext, key: &FlowKey) -> Vec<crate::events::FlowEvent> {
        cx.events
            .of_flow(key)
            .into_iter()
            .filter(|e| e.series == "counters")
            .collect()
    }

    /// A flow of two packets an epoch, each counted at its last switch an epoch after its
    /// first, whose last switch then misses its epochs' deadlines for good: the packets in
    /// flight into the first epoch left out, counted sent and never delivered, are no loss
    /// (they were a fifth of the window's counted packets: a false loss event on a loaded
    /// machine). The window is not judged, more of it being left out than counted.
    #[test]
    fn packets_in_flight_into_epochs_left_out_are_no_loss() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        let at = |e: u64| (1_000_000 + 10 * e, 10);
        for e in 1..6 {
            let delivered = if e == 1 {
                vec![]
            } else {
                vec![(key, 2, 2, 200)]
            };
            let counts = [vec![(key, 1, 2, 200)], delivered].concat();
            t.add_counts(&cx, e, at(e), &counts, &[], &[]);
        }
        // Switch 2 missing from here on (15 s: the windows close).
        for e in 6..1500 {
            t.add_counts(&cx, e, at(e), &[(key, 1, 2, 200)], &[], &[2]);
        }
        t.flush(Some(&cx), |_| true);
        let loss = counter_losses(&cx, &key);
        assert!(loss.is_empty(), "{loss:?}");
    }

    /// A flow losing a fifth of its packets while a few of its epochs (one in 25) are left
    /// out still shows the loss: a hole here and there takes nothing from what the others
    /// counted.
    #[test]
    fn loss_among_a_few_epochs_left_out_is_found() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        let at = |e: u64| (1_000_000 + 10 * e, 10);
        for e in 1..1500 {
            if e % 25 == 0 {
                t.add_counts(&cx, e, at(e), &[(key, 1, 10, 1000)], &[], &[2]);
            } else {
                let counts = [(key, 1, 10, 1000), (key, 2, 8, 800)];
                t.add_counts(&cx, e, at(e), &counts, &[], &[]);
            }
        }
        t.flush(Some(&cx), |_| true);
        let loss = counter_losses(&cx, &key);
        assert!(!loss.is_empty(), "no loss event");
        assert!(
            loss.iter()
                .all(|e| (0.15..0.25).contains(&e.event.loss_rate)),
            "{loss:?}"
        );
    }

    /// A loss event says where: the flow's decoded path and the link of it where its
    /// counters lost the packets, in the event line too.
    #[test]
    fn a_loss_event_says_which_path_and_link() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        let at = |e: u64| (1_000_000 + 10 * e, 10);
        for e in 1..800 {
            let counts = [(key, 1, 10, 1000), (key, 2, 8, 800)];
            t.add_counts(&cx, e, at(e), &counts, &[], &[]);
        }
        t.flush(Some(&cx), |_| true);
        let loss = counter_losses(&cx, &key);
        assert!(!loss.is_empty(), "no loss event");
        for e in &loss {
            assert_eq!(e.place.path.as_deref(), Some(&[1, 2][..]), "{e:?}");
            assert_eq!(e.place.lossy_link, Some([1, 2]), "{e:?}");
            let line = serde_json::to_value(e).unwrap();
            assert_eq!(line["path"], serde_json::json!([1, 2]), "{line}");
            assert_eq!(line["lossy_link"], serde_json::json!([1, 2]), "{line}");
        }
    }

    /// Probe arrivals of one stream of flow 7 at 20 Hz from `t0` s: (sequence number, send
    /// time offset in s) each, 1 ms one-way delay.
    fn probes(seqs: impl Iterator<Item = (u64, f64)>) -> Vec<telemetry::protocol::WireProbe> {
        probes_from(1_796_000_000.0, seqs)
    }

    /// Flow 7's probes (sequence number, send time after `t0` Unix s), each received a
    /// millisecond after it was sent.
    fn probes_from(
        t0: f64,
        seqs: impl Iterator<Item = (u64, f64)>,
    ) -> Vec<telemetry::protocol::WireProbe> {
        seqs.map(|(seq, t)| {
            let sent_ns = ((t0 + t) * 1e9) as u64;
            telemetry::protocol::WireProbe {
                key: digest(0, 7, 0).key,
                stream: 0,
                seq,
                sent_ns,
                recv_ns: sent_ns + 1_000_000,
            }
        })
        .collect()
    }

    /// Where flow 7's probe series has closed its windows up to (the last closed window's
    /// end, Unix s), if it has closed one.
    fn probes_closed_until(t: &FlowTable) -> Option<f64> {
        let det = t.flows[&digest(0, 7, 0).key].probe_detector.as_ref();
        det.expect("a probe series")
            .last_window
            .as_ref()
            .map(|w| w.end)
    }

    /// The kinds of the events found so far for flow 7's probes.
    fn probe_events(cx: &ShardContext) -> Vec<crate::detect::Kind> {
        cx.events
            .of_flow(&digest(0, 7, 0).key)
            .iter()
            .filter(|e| e.series == "probes")
            .map(|e| e.event.kind)
            .collect()
    }

    /// A probe whose send time is long after its arrival (a clock stepped, a forged probe)
    /// is left out and counted; without that it closed every window and opened one far
    /// ahead that the later probes fell into, and the loss that follows was not found as it
    /// happened.
    #[test]
    fn a_probe_sent_long_after_it_arrived_is_left_out() {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        t.add_probes(&cx, &probes((0..100).map(|s| (s, s as f64 / 20.0))));
        let mut stray = probes(std::iter::once((100, 5.0)));
        stray[0].sent_ns += 3_600_000_000_000;
        t.add_probes(&cx, &stray);
        // 60 of the next 100 lost, then 25 s more received.
        let rest = (101..700u64).filter(|s| !(120..180).contains(s));
        t.add_probes(&cx, &probes(rest.map(|s| (s, s as f64 / 20.0))));
        assert_eq!(t.stats.probes_refused, 1);
        let kinds = probe_events(&cx);
        assert!(kinds.contains(&crate::detect::Kind::Loss), "{kinds:?}");
    }

    /// Probes sent an hour before they arrived (a capture replayed, its probes carrying the
    /// send times of its making; a sender's clock far off) are left out and counted: their
    /// delays were events of years.
    #[test]
    fn probes_sent_long_before_they_arrived_are_left_out() {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let mut old = probes((0..200).map(|s| (s, s as f64 / 20.0)));
        for p in &mut old {
            p.sent_ns -= 3_600_000_000_000;
        }
        t.add_probes(&cx, &old);
        t.sweep(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            Some(&cx),
            |_| true,
        );
        assert_eq!(t.stats.probes_refused, 200);
        assert!(probe_events(&cx).is_empty());
        let flow = &t.flows[&digest(0, 7, 0).key];
        assert!(flow.probe_detector.is_none(), "no series of them");
        assert_eq!(flow.probes, 200, "counted as arrived");
    }

    /// A probe stream that starts again from 0 (its sender restarted) is a new series: no
    /// reordering is seen where the old numbers meet the new ones, and the new stream's
    /// loss is found although its numbers are below the old stream's; also when the new
    /// stream's first probes are lost.
    #[test]
    fn a_probe_stream_that_restarts_is_a_new_series() {
        for first in [0, 3] {
            let (cx, _) = context();
            let mut t = FlowTable::new(10);
            t.add_probes(&cx, &probes((0..960).map(|s| (s, s as f64 / 20.0))));
            // Restarted within the same 5 s window; 60 of its probes 100 to 200 lost.
            let new = (first..600u64).filter(|s| !(100..160).contains(s));
            t.add_probes(&cx, &probes(new.map(|s| (s, 48.0 + s as f64 / 20.0))));
            t.flush(Some(&cx), |_| true);
            let kinds = probe_events(&cx);
            assert!(
                !kinds.contains(&crate::detect::Kind::Reordering),
                "first {first}: {kinds:?}"
            );
            assert!(
                kinds.contains(&crate::detect::Kind::Loss),
                "first {first}: {kinds:?}"
            );
        }
    }

    /// An old probe arriving long after its stream went on (sent before the others) is
    /// reordering in the same series, not a restart.
    #[test]
    fn a_late_old_probe_is_no_restart() {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let arrivals = (1..400u64).chain([0]).chain(400..600);
        t.add_probes(&cx, &probes(arrivals.map(|s| (s, s as f64 / 20.0))));
        let d = t.flows[&digest(0, 7, 0).key]
            .probe_detector
            .as_ref()
            .unwrap();
        assert_eq!(d.highest_seq(), Some(599), "one series");
        t.flush(Some(&cx), |_| true);
        let kinds = probe_events(&cx);
        assert!(!kinds.contains(&crate::detect::Kind::Loss), "{kinds:?}");
    }

    /// A record's start and end are those of the epochs whose counts it carries: after an
    /// active-timeout record, the next starts where counting resumed, not at the flow's
    /// first epoch (collectors take rates from the span).
    #[test]
    fn each_record_spans_the_epochs_it_counts() {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        let d = digest(v, 3, 0);
        t.add_digests(&cx, 9, &[d], &FlowRuns::default());
        let mut out = Vec::new();
        let sweep = |t: &mut FlowTable| {
            let mut got = Vec::new();
            t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
                got.push(r);
                true
            });
            got
        };
        t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
        t.add_counts(&cx, 2, (1010, 10), &[(d.key, 9, 5, 500)], &[], &[]);
        out.extend(sweep(&mut t));
        // Nothing counted since: no record.
        out.extend(sweep(&mut t));
        t.add_counts(&cx, 4, (1030, 10), &[(d.key, 9, 2, 200)], &[], &[]);
        t.add_counts(&cx, 3, (1020, 10), &[(d.key, 9, 1, 100)], &[], &[]);
        out.extend(sweep(&mut t));
        let got: Vec<_> = out
            .iter()
            .map(|r| (r.packets, r.bytes, r.start_ms, r.end_ms, r.end_reason))
            .collect();
        assert_eq!(
            got,
            [
                (10, 1000, 1000, 1020, EndReason::ActiveTimeout),
                (3, 300, 1020, 1040, EndReason::ActiveTimeout)
            ]
        );
        // A late flowset of an epoch before the last record's end: its packets go in the next
        // record, which starts where the last ended (it started at the late epoch, inside
        // the span of the record before).
        t.add_counts(&cx, 2, (1010, 10), &[(d.key, 9, 4, 400)], &[], &[]);
        let late = sweep(&mut t);
        assert_eq!(
            late.iter()
                .map(|r| (r.packets, r.start_ms, r.end_ms))
                .collect::<Vec<_>>(),
            [(4, 1040, 1040)]
        );
        // The sink stopping: what is left goes as a forced end.
        t.add_counts(&cx, 5, (1040, 10), &[(d.key, 9, 1, 100)], &[], &[]);
        let mut last = Vec::new();
        t.flush(None, |r| {
            last.push(r);
            true
        });
        assert_eq!(last.len(), 1);
        assert_eq!(
            (last[0].start_ms, last[0].end_ms, last[0].end_reason),
            (1040, 1050, EndReason::ForcedEnd)
        );
        assert!(last[0].ended);
    }

    /// A full table of 10 flows, each counted 5 packets at switch 9.
    fn ten_flows_of_five_packets() -> FlowTable {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        let ds: Vec<WireDigest> = (0..10).map(|f| digest(v, f, 0)).collect();
        t.add_digests(&cx, 9, &ds, &FlowRuns::default());
        let counts: Vec<(FlowKey, u32, u64, u64)> = ds.iter().map(|d| (d.key, 9, 5, 500)).collect();
        t.add_counts(&cx, 1, (1000, 10), &counts, &[], &[]);
        t
    }

    /// A sweep looks at the flows with something due and passes the others by: after the
    /// first sweep (every flow), only flows given new counts are looked at when the active
    /// timeout is zero, and their records carry just the new counts.
    #[test]
    fn a_sweep_looks_only_at_flows_due() {
        let (cx, _) = context();
        let mut t = ten_flows_of_five_packets();
        let mut out = Vec::new();
        let mut sweep = |t: &mut FlowTable| {
            out.clear();
            t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
                out.push(r);
                true
            });
            out.iter()
                .map(|r| (r.key.src_port, r.packets))
                .collect::<Vec<_>>()
        };
        assert_eq!(sweep(&mut t).len(), 10);
        assert_eq!(t.stats.flows_swept, 10);
        assert!(sweep(&mut t).is_empty());
        assert_eq!(t.stats.flows_swept, 10, "nothing new: no flow looked at");
        let key = |f: u32| digest(0, f, 0).key;
        t.add_counts(
            &cx,
            2,
            (1010, 10),
            &[(key(3), 9, 2, 200), (key(7), 9, 4, 400)],
            &[],
            &[],
        );
        let mut got = sweep(&mut t);
        got.sort_unstable();
        assert_eq!(got, [(3, 2), (7, 4)]);
        assert_eq!(t.stats.flows_swept, 12);
        assert_eq!(t.len(), 10);
    }

    /// `now` stepped on by `s` seconds, both clocks: tests step the clocks the sweeps read (a
    /// busy machine running a test late must not move its windows).
    fn later(now: Now, s: f64) -> Now {
        Now {
            at: now.at + Duration::from_secs_f64(s),
            unix_s: now.unix_s + s,
        }
    }

    /// A sweep at `now`, with timeouts that end no flow.
    fn sweep_at(t: &mut FlowTable, cx: &ShardContext, now: Now) {
        let long = Duration::from_secs(600);
        t.sweep_as(now, long, long, EndReason::IdleTimeout, Some(cx), |_| true);
    }

    /// Detection windows close on time in sweeps that look only at the flows due: a probe
    /// stream that stops with windows open (no later probe closes them) has them closed by
    /// the first sweep after its own clock has left them behind by a window, and its flow
    /// is not looked at again after.
    #[test]
    fn a_sweep_closes_detection_windows_on_time() {
        let (mut cx, _) = context();
        cx.detection.window_s = 0.5;
        let mut t = FlowTable::new(10);
        let start = Now::read();
        let after = |s: f64| later(start, s);
        let sweep = |t: &mut FlowTable, now: Now| sweep_at(t, &cx, now);
        sweep(&mut t, start);
        // 2 s of probes at 40 a second (20 a window), the last sent 0.125 s ago: windows
        // of 0.5 s, the last two still open, due to close 0.5 s after the last one's end.
        let t0 = start.unix_s - 2.1;
        t.add_probes_at(
            &cx,
            &probes_from(t0, (0..80u64).map(|s| (s, s as f64 / 40.0))),
            start,
        );
        // Window ends are Unix seconds in an f64 (steps of 2^-22 s at today's times): the
        // span from `t0` comes out within a step of the window's, not always equal.
        let closed_until = |t: &FlowTable| {
            probes_closed_until(t).map(|end| ((end - t0) * 1000.0).round() / 1000.0)
        };
        assert_eq!(closed_until(&t), Some(1.0));
        sweep(&mut t, after(0.8));
        assert_eq!(closed_until(&t), Some(2.0));
        assert_eq!(t.stats.flows_swept, 1);
        sweep(&mut t, after(0.8));
        assert_eq!(t.stats.flows_swept, 1, "its windows closed: nothing due");
        assert_eq!(t.len(), 1);
    }

    /// A detection window that closes after its flow was listed (a deadline ahead, placed
    /// from the wall clock onto the schedule's seconds) closes in the first sweep after its
    /// time, not later.
    #[test]
    fn a_detection_window_due_later_closes_when_its_time_comes() {
        let (mut cx, _) = context();
        cx.detection.window_s = 0.2;
        let mut t = FlowTable::new(10);
        let start = Now::read();
        sweep_at(&mut t, &cx, start);
        // A tenth of a second of probes ending now: one window, closing 0.3 s from now.
        let t0 = start.unix_s - 0.1;
        t.add_probes_at(
            &cx,
            &probes_from(t0, (0..20u64).map(|s| (s, s as f64 / 200.0))),
            start,
        );
        let closed = |t: &FlowTable| probes_closed_until(t).map(|end| end - t0);
        assert_eq!(closed(&t), None);
        sweep_at(&mut t, &cx, later(start, 0.6));
        let end = closed(&t).expect("the window closed");
        assert!((end - 0.2).abs() < 1e-6, "{end}");
    }

    /// A flow listed in two of the seconds one sweep takes (its idle deadline, and a nearer
    /// detection window) is looked at once in that sweep, also when its records wait and it
    /// is listed again for a second already taken.
    #[test]
    fn a_flow_listed_twice_is_looked_at_once_a_sweep() {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        t.sweep(Duration::ZERO, Duration::ZERO, None, |_| true);
        // Its idle deadline a second after the schedule's start, so in a second of its own.
        std::thread::sleep(Duration::from_millis(1100));
        let d = digest(v, 7, 0);
        t.add_digests(&cx, 9, &[d], &FlowRuns::default());
        t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
        // Probes of the same flow a minute ago: a window due at once, a second of its own.
        let t0 = Now::read().unix_s - 60.0;
        t.add_probes(
            &cx,
            &probes_from(t0, (0..10u64).map(|s| (s, s as f64 / 20.0))),
        );
        for sweeps in 1..=2 {
            t.sweep(Duration::ZERO, Duration::ZERO, None, |_| false);
            assert_eq!(t.stats.flows_swept, sweeps);
        }
        assert_eq!((t.stats.exports_deferred, t.len()), (1, 1));
    }

    /// A flow whose loss series is fed all along is not due for its detection windows:
    /// each feed that closes a window puts the next close off, so a sweep has nothing to
    /// look at it for (it was looked at once a window, about every 5 s, for nothing).
    #[test]
    fn a_flow_fed_all_along_is_not_due_for_detection() {
        let mut t = FlowTable::new(10);
        let (cx, key) = two_hop_flow(&mut t);
        let long = Duration::from_secs(600);
        t.sweep(long, long, None, |_| true);
        // 12 s of epochs up to now: the first window closed by the feeds themselves, the
        // next closing 3 s from now.
        let start = unix_ms() - 12_000;
        for e in 0..1200 {
            let counts = [(key, 1, 10, 1000), (key, 2, 10, 1000)];
            t.add_counts(&cx, e, (start + 10 * e, 10), &counts, &[], &[]);
        }
        let det = t.flows[&key].loss_detector.as_ref().expect("a loss series");
        assert!(det.last_window.is_some(), "windows closed by the feeds");
        t.sweep(long, long, None, |_| true);
        assert_eq!(t.stats.flows_swept, 0);
    }

    /// A step of the wall clock lists every flow again: a detection window whose close was
    /// placed seconds ahead by the clocks' old offset closes in the first sweep after the
    /// wall clock passed it, not when the monotonic clock reaches the place.
    #[test]
    fn a_wall_clock_step_closes_windows_it_passed() {
        let (cx, _) = context();
        let mut t = FlowTable::new(10);
        let long = Duration::from_secs(600);
        let now = Now::read();
        t.sweep_as(now, long, long, EndReason::IdleTimeout, None, |_| true);
        // A second of probes up to now: one window, closing 9 s from now.
        let t0 = now.unix_s - 1.0;
        t.add_probes(
            &cx,
            &probes_from(t0, (0..20u64).map(|s| (s, s as f64 / 20.0))),
        );
        let closed = |t: &FlowTable| probes_closed_until(t).is_some();
        t.sweep_as(
            Now::read(),
            long,
            long,
            EndReason::IdleTimeout,
            None,
            |_| true,
        );
        assert!(!closed(&t), "not due yet");
        // The wall clock steps 20 s ahead; the monotonic clock has barely moved.
        let stepped = Now {
            at: Instant::now(),
            unix_s: Now::read().unix_s + 20.0,
        };
        t.sweep_as(stepped, long, long, EndReason::IdleTimeout, None, |_| true);
        assert!(closed(&t), "the window the wall clock passed closed");
    }

    /// Idle flows are exported (their remaining counters) and forgotten, making room.
    #[test]
    fn idle_flows_are_exported_and_forgotten() {
        let mut t = ten_flows_of_five_packets();
        let mut out = Vec::new();
        // Not idle yet, and the active timeout has not passed: nothing.
        t.sweep(
            Duration::from_secs(60),
            Duration::from_secs(60),
            None,
            |r| {
                out.push(r);
                true
            },
        );
        assert!(out.is_empty());
        t.sweep(Duration::ZERO, Duration::from_secs(60), None, |r| {
            out.push(r);
            true
        });
        assert_eq!(t.len(), 0);
        assert_eq!(t.stats.flows_evicted, 10);
        assert_eq!(out.len(), 10);
        for r in &out {
            assert_eq!((r.packets, r.bytes, r.switch), (5, 500, 9));
            assert!(r.ended);
            assert_eq!(r.end_reason, EndReason::IdleTimeout);
            assert_eq!(
                (r.ingress, r.egress),
                (Some(1), Some(0)),
                "known at the reporting switch"
            );
            assert_eq!((r.start_ms, r.end_ms), (1000, 1010));
        }
        // Room again.
        let (cx, v) = context();
        t.add_digests(&cx, 9, &[digest(v, 77, 0)], &FlowRuns::default());
        assert_eq!(t.len(), 1);
    }

    /// Records the export queue has no room for wait for a later sweep: their counts are
    /// not lost (they were, for good, and later records left them out too), an ended flow
    /// stays until its records go, and a switch whose end went does not send it twice.
    #[test]
    fn records_that_find_the_queue_full_go_later_with_their_counts() {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        let d = digest(v, 3, 0);
        t.add_digests(&cx, 9, &[d], &FlowRuns::default());
        t.add_counts(
            &cx,
            1,
            (1000, 10),
            &[(d.key, 9, 5, 500), (d.key, 8, 5, 500)],
            &[],
            &[],
        );
        // The queue full: nothing goes.
        t.sweep(Duration::from_secs(60), Duration::ZERO, None, |_| false);
        t.sweep(Duration::from_secs(60), Duration::ZERO, None, |_| false);
        assert_eq!(t.stats.exports_deferred, 2, "each record counted once");
        assert_eq!(t.stats.exports_dropped, 0);
        t.add_counts(
            &cx,
            2,
            (1010, 10),
            &[(d.key, 9, 1, 100), (d.key, 8, 1, 100)],
            &[],
            &[],
        );
        let mut out = Vec::new();
        // Room for one record only, then the flow ends: switch 9's (or 8's) waits again.
        let mut room = 1;
        t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
            if room == 0 {
                return false;
            }
            room -= 1;
            out.push(r);
            true
        });
        assert_eq!(t.len(), 1, "an ended flow stays until its records go");
        t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
            out.push(r);
            true
        });
        assert_eq!(t.len(), 0);
        let mut got: Vec<_> = out
            .iter()
            .map(|r| (r.switch, r.packets, r.bytes, r.start_ms, r.end_ms, r.ended))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [(8, 6, 600, 1000, 1020, true), (9, 6, 600, 1000, 1020, true)],
            "every packet in one record per switch, none twice"
        );
        assert_eq!(t.stats.exports_dropped, 0);
    }

    /// An ended flow is not kept for its records while the table is nearly full: they are
    /// dropped (counted) and the flow makes room, as it did before records could wait.
    #[test]
    fn a_full_table_keeps_no_flow_for_its_records() {
        let mut t = ten_flows_of_five_packets();
        t.sweep(Duration::ZERO, Duration::from_secs(60), None, |_| false);
        assert_eq!(t.len(), 0);
        assert_eq!((t.stats.exports_dropped, t.stats.exports_deferred), (10, 0));
    }

    /// At the sink's stop a record that finds the queue full is lost, and counted.
    #[test]
    fn records_that_find_the_queue_full_at_the_stop_are_counted_lost() {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        let d = digest(v, 3, 0);
        t.add_digests(&cx, 9, &[d], &FlowRuns::default());
        t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
        t.flush(None, |_| false);
        assert_eq!(t.stats.exports_dropped, 1);
        assert_eq!(t.len(), 0);
    }

    /// A flow whose last packets already went in an active-timeout record still gets an
    /// end record when it goes idle (no packets, `ended`, idle timeout): collectors and
    /// JSON consumers wait for the end.
    #[test]
    fn a_flow_that_ends_says_so_even_with_nothing_new() {
        let (cx, v) = context();
        let mut t = FlowTable::new(10);
        let d = digest(v, 3, 0);
        t.add_digests(&cx, 9, &[d], &FlowRuns::default());
        t.add_counts(&cx, 1, (1000, 10), &[(d.key, 9, 5, 500)], &[], &[]);
        let mut out = Vec::new();
        t.sweep(Duration::from_secs(60), Duration::ZERO, None, |r| {
            out.push(r);
            true
        });
        t.sweep(Duration::ZERO, Duration::ZERO, None, |r| {
            out.push(r);
            true
        });
        let got: Vec<_> = out
            .iter()
            .map(|r| (r.packets, r.ended, r.end_reason, r.start_ms, r.end_ms))
            .collect();
        assert_eq!(
            got,
            [
                (5, false, EndReason::ActiveTimeout, 1000, 1010),
                (0, true, EndReason::IdleTimeout, 1010, 1010)
            ]
        );
        assert_eq!(t.len(), 0);
    }
}

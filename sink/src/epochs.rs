//! FlowRadar epochs at the sink: every flowset is decoded on its own as it arrives
//! (SingleDecode); once every connected switch with the same epoch length has delivered an
//! epoch (one flowset per worker), or its deadline has passed (the grace time after most of
//! its switches usually deliver an epoch, by the sink's clock, so that one whose clock runs
//! ahead does not start the wait for the others early; at most a second beyond the grace
//! time after its first flowset), the epoch is finished: if some flowset did not decode completely, the epoch's flowsets are
//! decoded together (FlowDecode and CounterDecode over the switches that delivered). The
//! per-flow counters then go to the decode threads that own the flows, and the epoch's
//! report (what decoded, how) to the API.
//!
//! A flowset that covers several epochs (its worker was late) or that arrives after its
//! epoch was finished is decoded on its own and counted in its first epoch.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use telemetry::flowradar::decode::{DecodeResult, SingleDecoder};
use telemetry::flowradar::network::network_decode;
use telemetry::flowradar::{FlowKey, FlowSet};

use crate::clock_leads::ClockLeads;
use crate::registry::Registry;

/// A flowset as ingest hands it over.
#[derive(Debug)]
pub struct FlowSetIn {
    /// The switch.
    pub switch: u32,
    /// Its epoch length, ns.
    pub epoch_ns: u64,
    /// The worker.
    pub worker: u16,
    /// The switch process's session (its hello's): a switch restarted within an epoch
    /// sends that epoch's flowsets again, of the packets it counted since.
    pub session: u64,
    /// The first epoch it covers.
    pub epoch: u64,
    /// Epochs it covers.
    pub epochs: u32,
    /// The flowset.
    pub flowset: FlowSet,
    /// Its table's memory, counted until the assembler is done with it.
    pub held: Held,
}

/// What the flowsets held take: their tables' memory (what ingest checks a new flowset
/// against, so that flowsets never take more than the sink's limit, however fast or large
/// they come) and their number (the epoch assembler's backlog: flowsets received and not yet
/// decoded into counters).
#[derive(Debug, Default)]
pub struct HeldTotals {
    /// Bytes of the tables held.
    pub bytes: AtomicUsize,
    /// Flowsets held.
    pub flowsets: AtomicUsize,
}

/// One flowset's share of [`HeldTotals`], counted while the flowset is held (queued for the
/// assembler or waiting for the rest of its epoch) and taken off when it is dropped, after
/// its counters went to the decode threads.
#[derive(Debug)]
pub struct Held {
    bytes: usize,
    totals: Arc<HeldTotals>,
}

impl Held {
    /// Counts a flowset of `bytes` in `totals` until dropped, if that keeps the bytes held
    /// within `limit` (None, counting nothing, if not).
    pub fn reserve(totals: &Arc<HeldTotals>, bytes: usize, limit: usize) -> Option<Held> {
        totals
            .bytes
            .fetch_update(Relaxed, Relaxed, |t| {
                t.checked_add(bytes).filter(|&after| after <= limit)
            })
            .ok()?;
        totals.flowsets.fetch_add(1, Relaxed);
        Some(Held {
            bytes,
            totals: Arc::clone(totals),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.totals.bytes.fetch_sub(self.bytes, Relaxed);
        self.totals.flowsets.fetch_sub(1, Relaxed);
    }
}

/// How an epoch was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodeMode {
    /// Every flowset decoded on its own.
    Single,
    /// The flowsets were decoded together.
    Network,
}

/// One switch's part of an epoch.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchPart {
    /// The switch.
    pub switch: u32,
    /// Flowsets received (one per worker).
    pub flowsets: usize,
    /// Flows found (all workers).
    pub flows: usize,
    /// Whether every flow is known for certain.
    pub keys_complete: bool,
    /// Whether every flow's counters are known.
    pub counters_complete: bool,
}

/// What happened to one epoch.
#[derive(Debug, Clone, Serialize)]
pub struct EpochReport {
    /// Epoch number (`unix_ns / epoch_ns`).
    pub epoch: u64,
    /// Epoch length, ns.
    pub epoch_ns: u64,
    /// How it was decoded.
    pub mode: DecodeMode,
    /// Whether every switch expected delivered and decoded completely.
    pub complete: bool,
    /// Switches expected (connected with this epoch length) that did not deliver.
    pub missing: Vec<u32>,
    /// Switches whose counts of this epoch are taken as short for good (not decoded whole,
    /// disconnected, or missing after losing something on the way): they add no loss to
    /// their links.
    pub unsure: Vec<u32>,
    /// Per switch.
    pub switches: Vec<SwitchPart>,
    /// Whether it was finished by the grace time rather than by every flowset arriving.
    pub by_deadline: bool,
    /// Whether this is a late flowset decoded on its own.
    pub late: bool,
    /// Decoding time, µs.
    pub decode_us: u64,
}

/// Counters of the epoch assembler. An epoch is counted in `epochs` before its mode's
/// count: read [`EpochCounters::finished`] for both.
#[derive(Debug, Default)]
pub struct EpochCounters {
    /// Epochs finished.
    pub epochs: AtomicU64,
    /// Of those, decoded network-wide.
    pub network: AtomicU64,
    /// Of those, decoded switch by switch (kept apart from `epochs - network`, which a
    /// reader between the two counts could see one too high, for good in a counter).
    pub single: AtomicU64,
    /// Of those, not complete.
    pub incomplete: AtomicU64,
    /// Finished by the grace time.
    pub by_deadline: AtomicU64,
    /// Flowsets decoded on their own after their epoch (late or spanning several epochs).
    pub late_flowsets: AtomicU64,
    /// Flowsets dropped because their switch's worker had already delivered that epoch
    /// (two switches with one ID, or a connection replayed): counting both would double
    /// the flows' packets.
    pub duplicate_flowsets: AtomicU64,
    /// Flowsets received.
    pub flowsets: AtomicU64,
}

impl EpochCounters {
    /// (epochs finished, of them decoded network-wide), read so that the second is never
    /// above the first (an epoch is counted in `epochs` first).
    pub fn finished(&self) -> (u64, u64) {
        let network = self.network.load(Relaxed);
        (self.epochs.load(Relaxed).max(network), network)
    }
}

/// Reports of the most recent epochs.
pub const REPORTS_KEPT: usize = 512;

/// The epoch assembler's shared state: reports and counters.
#[derive(Debug, Default)]
pub struct EpochLog {
    /// The latest reports, oldest first (shared: a reader takes them under the lock at the
    /// cost of a count each, and serialises them after).
    pub reports: Mutex<VecDeque<Arc<EpochReport>>>,
    /// Counters.
    pub counters: EpochCounters,
    /// When a switch's flowsets last did not decode whole was said (Unix ms; 0: never).
    pub undecoded_said_ms: AtomicU64,
}

/// One epoch's decoded counters, as the flow table takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochCounts {
    /// The epoch.
    pub epoch: u64,
    /// Its start (Unix ms) and length (ms).
    pub epoch_ms: (u64, u64),
    /// (flow, switch, packets, bytes).
    pub counts: Vec<(FlowKey, u32, u64, u64)>,
    /// Switches whose counts of this epoch miss flows or packets for good (sorted): a
    /// flowset not decoded whole, a switch disconnected from the sink, one missing at the
    /// deadline after it lost something on the way. Loss on their links is not taken from
    /// this epoch. (A flowset missing at the deadline otherwise usually comes later, and its
    /// counts then complete the totals: its switch is not unsure.)
    pub unsure: Vec<u32>,
    /// Switches expected whose flowsets had not come by the deadline (sorted), or whose
    /// late flowset spans several epochs: their counts may yet come, late, and complete the
    /// totals; but a flow's loss series, cut in time windows, leaves the epoch out rather
    /// than take its sent packets now and its delivered ones in a later window.
    pub missing: Vec<u32>,
    /// Switches (sorted) whose clocks run half an epoch or more ahead of the typical
    /// switch's (ms; negative: behind), from when their flowsets arrive
    /// ([`crate::clock_leads`]): a flow's loss series takes their counts at the time they
    /// stand for, not at their epoch's.
    pub leads: Vec<(u32, i64)>,
}

/// Where decoded counters go.
pub type CountSink<'a> = dyn FnMut(EpochCounts) + 'a;

/// The longest an epoch waits for its switches beyond its grace time because its first
/// flowset came early (its switch's clock ahead of the others'): a switch up to this far
/// ahead meets the others in every epoch; one further ahead has them missing from its
/// epochs (and their flowsets late), as `/api/switches` shows by its lag
/// ([`crate::registry::FlowsetLag::WARN_MS`]: the sink warns beyond it).
const MAX_EARLY_WAIT: Duration = Duration::from_secs(1);

/// When a bucket opened now for epoch `epoch` (of `epoch_ns`) is finished without the
/// switches that have not delivered: its grace time after most switches usually deliver it
/// (`typical_lag_ms` after its end by the sink's clock, now `now_unix_ms`), and at most
/// [`MAX_EARLY_WAIT`] later than after the first flowset. (A switch behind most others is
/// not waited for longer than before: every epoch would hold every switch's flowsets as
/// long. Of two switches, the median is the later one's, waited for.)
fn bucket_due(
    epoch: u64,
    epoch_ns: u64,
    typical_lag_ms: Option<i64>,
    now_unix_ms: u64,
    grace: Duration,
) -> Instant {
    let end_ms = i128::from(epoch.saturating_add(1)) * i128::from(epoch_ns) / 1_000_000;
    let expected_ms = end_ms + i128::from(typical_lag_ms.unwrap_or(0));
    let wait_ms =
        (expected_ms - i128::from(now_unix_ms)).clamp(0, MAX_EARLY_WAIT.as_millis() as i128) as u64;
    Instant::now() + Duration::from_millis(wait_ms) + grace
}

/// One epoch's flowsets while it waits for the rest.
struct Bucket {
    first: Instant,
    /// When it is finished without the switches that have not delivered.
    due: Instant,
    sets: Vec<FlowSetIn>,
    /// The (switch, worker) pairs that delivered.
    delivered: rustc_hash::FxHashSet<(u32, u16)>,
    /// The (switch, worker, session) triples that delivered: a second flowset of one is a
    /// duplicate; one of another session (the switch restarted) counts beside the first.
    sessions: rustc_hash::FxHashSet<(u32, u16, u64)>,
    /// How many pairs must have delivered before the epoch can be complete: the workers
    /// expected when last looked at. Until then no flowset looks at the registry again, so
    /// that an epoch costs time linear in the switches, not quadratic.
    wanted: usize,
}

impl Bucket {
    /// Takes flowset `f` (or, when its switch's worker already delivered this epoch in the
    /// same session, drops it and counts it in `duplicates`); says whether every worker of
    /// every switch
    /// `registry` expects (connected with this epoch length) has now delivered.
    fn add(
        &mut self,
        f: FlowSetIn,
        registry: &Registry,
        grace: Duration,
        duplicates: &AtomicU64,
    ) -> bool {
        if !self.sessions.insert((f.switch, f.worker, f.session)) {
            duplicates.fetch_add(1, Relaxed);
            return false;
        }
        self.delivered.insert((f.switch, f.worker));
        let epoch_ns = f.epoch_ns;
        self.sets.push(f);
        if self.delivered.len() < self.wanted {
            return false;
        }
        let expected = registry.connected_with_epoch(epoch_ns, grace);
        let all_in = !expected.is_empty()
            && expected
                .iter()
                .all(|&(s, workers)| all_delivered(&self.delivered, s, workers));
        // Not yet: look again once as many pairs have delivered as are now expected (at
        // least one more than now: some that delivered may be no longer expected).
        let now_expected: usize = expected.iter().map(|&(_, w)| w).sum();
        self.wanted = now_expected.max(self.delivered.len() + 1);
        all_in
    }
}

/// Runs the assembler until `rx` closes.
pub fn run(
    rx: Receiver<FlowSetIn>,
    registry: Arc<Registry>,
    log: Arc<EpochLog>,
    grace: Duration,
    counts: &mut CountSink<'_>,
) {
    let mut buckets: BTreeMap<(u64, u64), Bucket> = BTreeMap::new();
    let mut finished = Finished::default();
    let mut single = SingleDecoder::default();
    let mut leads = ClockLeads::default();
    let mut leads_swept_ms = 0u64;
    loop {
        match rx.recv_timeout(grace.min(Duration::from_millis(20))) {
            Ok(f) => {
                log.counters.flowsets.fetch_add(1, Relaxed);
                let end = f.epoch.saturating_add(u64::from(f.epochs.max(1)));
                let now_ms = crate::registry::unix_ms();
                let end_ms = end.saturating_mul(f.epoch_ns) / 1_000_000;
                leads.note(f.switch, f.session, end_ms, now_ms);
                if now_ms >= leads_swept_ms + 1000 {
                    leads.forget_quiet(now_ms);
                    leads_swept_ms = now_ms;
                }
                let key = (f.epoch_ns, f.epoch);
                if f.epochs > 1 || finished.contains(key) {
                    if !finished.first_delivery(key, &f) {
                        log.counters.duplicate_flowsets.fetch_add(1, Relaxed);
                        continue;
                    }
                    log.counters.late_flowsets.fetch_add(1, Relaxed);
                    let waited = Waited::Late {
                        unsure: finished.was_unsure(key, f.switch),
                    };
                    let report = finish(
                        vec![f],
                        &Env::new(&registry, &leads, grace),
                        &mut single,
                        counts,
                        false,
                        waited,
                    );
                    keep(&log, report);
                    continue;
                }
                let b = buckets.entry(key).or_insert_with(|| Bucket {
                    first: Instant::now(),
                    due: bucket_due(
                        key.1,
                        key.0,
                        registry.typical_flowset_lag_ms(key.0, grace),
                        crate::registry::unix_ms(),
                        grace,
                    ),
                    sets: Vec::new(),
                    delivered: Default::default(),
                    sessions: Default::default(),
                    wanted: 0,
                });
                if b.add(f, &registry, grace, &log.counters.duplicate_flowsets) {
                    let b = buckets.remove(&key).expect("present");
                    let env = Env::new(&registry, &leads, grace);
                    let (r, sessions) = b.finish(&env, &mut single, counts, false);
                    finished.add(key, &r.unsure, sessions, crate::registry::unix_ms());
                    keep(&log, r);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        // Every bucket past its deadline (a few per epoch length: the order of their keys
        // is not the order they started waiting in, with several epoch lengths or a switch
        // whose clock runs ahead).
        let now = Instant::now();
        let due: Vec<(u64, u64)> = buckets
            .iter()
            .filter(|(_, b)| now >= b.due)
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            let b = buckets.remove(&key).expect("present");
            let env = Env::new(&registry, &leads, grace);
            let (r, sessions) = b.finish(&env, &mut single, counts, true);
            finished.add(key, &r.unsure, sessions, crate::registry::unix_ms());
            keep(&log, r);
        }
    }
    // Whatever is still waiting is decoded with what came.
    for (_, b) in std::mem::take(&mut buckets) {
        let env = Env::new(&registry, &leads, grace);
        let (r, _) = b.finish(&env, &mut single, counts, true);
        keep(&log, r);
    }
}

/// Epochs finished kept in full (about 41 s of 10 ms epochs).
const FINISHED_KEPT: usize = 4096;

/// How far behind the sink's clock an epoch let go must end to count every epoch up to it
/// as finished: a flowset that late is late anyway (a switch's beyond a second is), and an
/// epoch of a switch whose clock runs ahead, or a peer's made-up number, never makes the
/// epochs the other switches are delivering now look finished.
const FORGOTTEN_BEHIND_MS: u64 = 10_000;

/// Epochs recently finished (a flowset for one of them is late), with the switches whose
/// counts of them were taken as short for good and the (switch, worker, session) triples
/// that delivered them; of those let go, the latest per epoch length that ended at least
/// [`FORGOTTEN_BEHIND_MS`] before the sink's clock (an epoch at or before it is finished
/// too: a flowset for it is late, and does not finish it again).
#[derive(Default)]
struct Finished {
    order: VecDeque<(u64, u64)>,
    /// Per epoch length, the latest epoch let go.
    forgotten: rustc_hash::FxHashMap<u64, u64>,
    epochs: rustc_hash::FxHashMap<(u64, u64), FinishedEpoch>,
    /// Flowsets of several epochs that came before their first epoch finished, by that
    /// epoch (sorted), taken into its deliveries when it finishes: a repeat of one is a
    /// duplicate then too.
    spanning: rustc_hash::FxHashMap<(u64, u64), Vec<Delivery>>,
    spanning_order: VecDeque<(u64, u64)>,
}

/// A flowset's (switch, worker, session).
type Delivery = (u32, u16, u64);

/// What is kept of a finished epoch.
struct FinishedEpoch {
    unsure: Vec<u32>,
    /// Sorted: a list, not the bucket's hash set, so that thousands of finished epochs
    /// of many switches take 16 bytes per delivery.
    sessions: Vec<Delivery>,
}

impl Finished {
    /// Notes epoch `key` finished, at `now_ms` by the sink's clock.
    fn add(
        &mut self,
        key: (u64, u64),
        unsure: &[u32],
        sessions: rustc_hash::FxHashSet<(u32, u16, u64)>,
        now_ms: u64,
    ) {
        if self.order.len() >= FINISHED_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.epochs.remove(&old);
            let (len, epoch) = old;
            let behind = (now_ms.saturating_sub(FORGOTTEN_BEHIND_MS) as u128 * 1_000_000
                / u128::from(len.max(1)))
            .saturating_sub(1) as u64;
            let latest = self.forgotten.entry(len).or_default();
            *latest = (*latest).max(epoch.min(behind));
        }
        self.order.push_back(key);
        let unsure = unsure.to_vec();
        let mut sessions: Vec<_> = sessions.into_iter().collect();
        sessions.extend(self.spanning.remove(&key).unwrap_or_default());
        sessions.sort_unstable();
        sessions.dedup();
        self.epochs.insert(key, FinishedEpoch { unsure, sessions });
    }

    /// Whether epoch `key` is finished (kept, or at or before one let go).
    fn contains(&self, key: (u64, u64)) -> bool {
        self.epochs.contains_key(&key) || self.forgotten.get(&key.0).is_some_and(|&f| key.1 <= f)
    }

    /// Whether `switch`'s counts of epoch `key` were taken as short for good.
    fn was_unsure(&self, key: (u64, u64), switch: u32) -> bool {
        self.epochs
            .get(&key)
            .is_some_and(|e| e.unsure.contains(&switch))
    }

    /// Notes that `f` came for epoch `key` after it finished, or spans several epochs;
    /// false when its switch's worker had delivered that epoch in the same session already
    /// (a duplicate).
    fn first_delivery(&mut self, key: (u64, u64), f: &FlowSetIn) -> bool {
        let sessions = match self.epochs.get_mut(&key) {
            Some(e) => &mut e.sessions,
            None => {
                if !self.spanning.contains_key(&key) {
                    if self.spanning_order.len() >= 4096
                        && let Some(old) = self.spanning_order.pop_front()
                    {
                        self.spanning.remove(&old);
                    }
                    self.spanning_order.push_back(key);
                }
                self.spanning.entry(key).or_default()
            }
        };
        let t = (f.switch, f.worker, f.session);
        match sessions.binary_search(&t) {
            Ok(_) => false,
            Err(at) => {
                sessions.insert(at, t);
                true
            }
        }
    }
}

/// Keeps an epoch's report; counts it unless it is a late flowset's (those have
/// `late_flowsets`: an epoch is counted once, when it is finished).
fn keep(log: &EpochLog, r: EpochReport) {
    // Counts lost to flowsets too small for their flows are otherwise seen only in the API
    // and a lab's checks: said in the log, once a minute at most.
    if let Some(p) = r.switches.iter().find(|p| !p.counters_complete) {
        let now = crate::registry::unix_ms();
        let said = log.undecoded_said_ms.load(Relaxed);
        if now >= said.saturating_add(60_000)
            && log
                .undecoded_said_ms
                .compare_exchange(said, now, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(
                switch = p.switch,
                epoch = r.epoch,
                "switch {}'s flowsets of epoch {} did not decode whole ({} flows found{}): its FlowRadar tables are too small for the flows an epoch brings, and those flows' counts are lost; raise its telemetry.flowradar.expected_flows (or epoch_ms shorter), or give it more workers (said once a minute at most; /api/epochs has every epoch)",
                p.switch,
                r.epoch,
                p.flows,
                if r.mode == DecodeMode::Network {
                    ", even network-wide"
                } else {
                    ""
                }
            );
        }
    }
    if !r.late {
        let c = &log.counters;
        c.epochs.fetch_add(1, Relaxed);
        let network = r.mode == DecodeMode::Network;
        c.network.fetch_add(u64::from(network), Relaxed);
        c.single.fetch_add(u64::from(!network), Relaxed);
        c.incomplete.fetch_add(u64::from(!r.complete), Relaxed);
        c.by_deadline.fetch_add(u64::from(r.by_deadline), Relaxed);
    }
    let mut reports = log.reports.lock().expect("epoch log lock");
    if reports.len() >= REPORTS_KEPT {
        reports.pop_front();
    }
    reports.push_back(Arc::new(r));
}

/// Whether each of switch `s`'s `workers` workers is in `delivered`.
fn all_delivered(delivered: &rustc_hash::FxHashSet<(u32, u16)>, s: u32, workers: usize) -> bool {
    (0..workers).all(|w| u16::try_from(w).is_ok_and(|w| delivered.contains(&(s, w))))
}

/// What an epoch's flowsets waited in.
#[derive(Clone, Copy)]
enum Waited {
    /// A bucket, opened at this time.
    Bucket(Instant),
    /// None: a flowset after its epoch was finished, decoded alone; `unsure` when its
    /// switch's counts of that epoch were taken as short for good then (its counts are
    /// then no loss or gain on its links: what was missed was set aside).
    Late { unsure: bool },
}

/// Decodes one epoch's flowsets and hands the counters over.
/// What finishing an epoch reads besides its flowsets.
struct Env<'a> {
    registry: &'a Registry,
    leads: &'a ClockLeads,
    grace: Duration,
}

impl<'a> Env<'a> {
    fn new(registry: &'a Registry, leads: &'a ClockLeads, grace: Duration) -> Env<'a> {
        Env {
            registry,
            leads,
            grace,
        }
    }
}

impl Bucket {
    /// Finishes its epoch with the flowsets that came: the report, and the (switch,
    /// worker, session) triples that delivered.
    fn finish(
        self,
        env: &Env<'_>,
        single: &mut SingleDecoder,
        counts: &mut CountSink<'_>,
        by_deadline: bool,
    ) -> (EpochReport, rustc_hash::FxHashSet<(u32, u16, u64)>) {
        let opened = Waited::Bucket(self.first);
        let r = finish(self.sets, env, single, counts, by_deadline, opened);
        (r, self.sessions)
    }
}

fn finish(
    sets: Vec<FlowSetIn>,
    env: &Env<'_>,
    single: &mut SingleDecoder,
    counts: &mut CountSink<'_>,
    by_deadline: bool,
    waited: Waited,
) -> EpochReport {
    let Env {
        registry,
        leads,
        grace,
    } = *env;
    let late = matches!(waited, Waited::Late { .. });
    let t = Instant::now();
    let (epoch_ns, epoch) = (sets[0].epoch_ns, sets[0].epoch);
    let singles: Vec<DecodeResult> = sets.iter().map(|s| single.decode(&s.flowset)).collect();
    // Per flowset: flows with counters (None where unknown), keys complete, counters complete.
    type Found = (Vec<(FlowKey, Option<(u64, u64)>)>, bool, bool);
    let (mode, found): (DecodeMode, Vec<Found>) =
        if singles.iter().all(|r| r.complete) || sets.len() == 1 {
            let found = singles
                .into_iter()
                .map(|r| {
                    let c = r.complete;
                    (
                        r.flows
                            .into_iter()
                            .map(|f| (f.key, Some((f.packets, f.bytes))))
                            .collect(),
                        c,
                        c,
                    )
                })
                .collect();
            (DecodeMode::Single, found)
        } else {
            let refs: Vec<&FlowSet> = sets.iter().map(|s| &s.flowset).collect();
            let r = network_decode(&refs);
            let found = r
                .switches
                .into_iter()
                .map(|s| {
                    (
                        s.flows
                            .into_iter()
                            .map(|f| (f.key, f.packets.zip(f.bytes)))
                            .collect(),
                        s.keys_complete,
                        s.counters_complete,
                    )
                })
                .collect();
            (DecodeMode::Network, found)
        };
    // Per switch: counters summed over its workers (each counts its own packets).
    type Sums = FxHashMap<FlowKey, (u64, u64)>;
    let mut per_switch: BTreeMap<u32, (SwitchPart, Sums)> = BTreeMap::new();
    for (s, (flows, keys, counters)) in sets.iter().zip(found) {
        let (part, sums) = per_switch.entry(s.switch).or_insert_with(|| {
            (
                SwitchPart {
                    switch: s.switch,
                    flowsets: 0,
                    flows: 0,
                    keys_complete: true,
                    counters_complete: true,
                },
                FxHashMap::default(),
            )
        });
        part.flowsets += 1;
        part.keys_complete &= keys;
        part.counters_complete &= counters;
        for (key, v) in flows {
            if let Some((p, b)) = v {
                // Saturating: the counts are a switch's to choose.
                let e = sums.entry(key).or_insert((0, 0));
                e.0 = e.0.saturating_add(p);
                e.1 = e.1.saturating_add(b);
            }
        }
    }
    let expected = if late {
        Vec::new()
    } else {
        registry.connected_with_epoch(epoch_ns, grace)
    };
    let delivered: rustc_hash::FxHashSet<(u32, u16)> =
        sets.iter().map(|s| (s.switch, s.worker)).collect();
    let missing: Vec<u32> = expected
        .iter()
        .filter(|&&(s, workers)| !all_delivered(&delivered, s, workers))
        .map(|(s, _)| *s)
        .collect();
    let mut out = Vec::new();
    let mut switches = Vec::with_capacity(per_switch.len());
    for (switch, (mut part, sums)) in per_switch {
        part.flows = sums.len();
        // Counters of a switch whose counters are not all known are kept only where known.
        out.extend(sums.into_iter().map(|(k, (p, b))| (k, switch, p, b)));
        switches.push(part);
    }
    let complete = missing.is_empty()
        && switches
            .iter()
            .all(|s| s.keys_complete && s.counters_complete);
    let mut unsure: Vec<u32> = switches
        .iter()
        .filter(|s| !(s.keys_complete && s.counters_complete))
        .map(|s| s.switch)
        .collect();
    if let Waited::Late { unsure: true } = waited {
        unsure.extend(sets.iter().map(|s| s.switch));
    }
    if let Waited::Bucket(opened) = waited {
        unsure.extend(registry.disconnected_for(grace));
        // A switch that has not delivered and lost something on the way since about when
        // this epoch's flowsets began to come (a gap in its frames: the switch dropped
        // them; a flowset the sink had no room for; a connection that ended and came back
        // within the grace time): its flowset may be what was lost, and its counts would
        // otherwise be loss on its links for good.
        let since = opened.checked_sub(grace).unwrap_or(opened);
        unsure.extend(registry.lost_since(&missing, since));
    }
    unsure.sort_unstable();
    unsure.dedup();
    // A flowset of several epochs (its worker had no clean one at the boundary) spans them
    // all, and its counts are no epoch's alone: left out of the flows' loss series as a
    // missing switch's are (they came before its first epoch was finished, and with the
    // other switches' counts of that epoch they made a loss that never was).
    let spans = sets.iter().map(|s| s.epochs.max(1)).max().unwrap_or(1);
    let left_out: Vec<u32> = if late {
        let mut v: Vec<u32> = sets
            .iter()
            .filter(|s| s.epochs > 1)
            .map(|s| s.switch)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    } else {
        missing.clone()
    };
    let epoch_ms = epoch_ns / 1_000_000;
    counts(EpochCounts {
        epoch,
        epoch_ms: (
            epoch.saturating_mul(epoch_ns) / 1_000_000,
            epoch_ms.max(1).saturating_mul(u64::from(spans)),
        ),
        counts: out,
        unsure: unsure.clone(),
        missing: left_out,
        leads: leads.leads(epoch_ms, crate::registry::unix_ms()),
    });
    let unsure_out = unsure;
    EpochReport {
        epoch,
        epoch_ns,
        mode,
        complete,
        missing,
        unsure: unsure_out,
        switches,
        by_deadline,
        late,
        decode_us: t.elapsed().as_micros() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch reports kept, oldest first.
    fn reports_of(log: &EpochLog) -> Vec<EpochReport> {
        let reports = log.reports.lock().unwrap();
        reports.iter().map(|r| (**r).clone()).collect()
    }
    use telemetry::flowradar::FlowSetConfig;
    use telemetry::flowradar::flowset::FILTER_SEED;
    use telemetry::flowradar::wire::Shape;
    use telemetry::protocol::Hello;

    const EPOCH_NS: u64 = 10_000_000;

    /// An epoch's counters as handed over: (flow, switch, packets, bytes).
    type Counted = Vec<(FlowKey, u32, u64, u64)>;

    /// An epoch's counters as handed over, with its unsure switches.
    type HandedOver = (u64, Counted, Vec<u32>);

    fn flowset(switch: u32, packets: u64) -> FlowSet {
        let mut fs = FlowSet::new(&FlowSetConfig::for_flows(100, switch));
        let key = FlowKey {
            src: 0x0a00_0001,
            dst: 0x0a00_0002,
            src_port: 1,
            dst_port: 2,
            protocol: 17,
        };
        for _ in 0..packets {
            fs.update(&key, 100);
        }
        fs
    }

    /// A registry with `n` switches of `workers` workers each connected.
    fn registry(n: u32, workers: usize) -> (Arc<Registry>, Arc<HeldTotals>) {
        let r = Arc::new(Registry::default());
        for id in 1..=n {
            let fs = flowset(id, 0);
            r.connect(
                &Hello {
                    switch_id: id,
                    session: 1,
                    epoch_ns: EPOCH_NS,
                    shim_ethertype: 0x88b5,
                    shape: Shape::of(&fs),
                    filter_seed: FILTER_SEED,
                    table_seeds: vec![fs.table_seed(); workers],
                    max_digests: 1024,
                    ports: Vec::new(),
                    plan: None,
                },
                "test",
                0,
            )
            .unwrap();
        }
        (r, Arc::new(HeldTotals::default()))
    }

    fn item(held: &Arc<HeldTotals>, switch: u32, worker: u16, epoch: u64) -> FlowSetIn {
        FlowSetIn {
            switch,
            epoch_ns: EPOCH_NS,
            worker,
            session: 1,
            epoch,
            epochs: 1,
            flowset: flowset(switch, 3),
            held: Held::reserve(held, 1000, usize::MAX).unwrap(),
        }
    }

    /// Runs the assembler over `items` (grace long enough never to pass while they are
    /// taken in) and returns its reports, the counters it handed over per epoch, and its
    /// log.
    fn assemble(
        registry: Arc<Registry>,
        items: Vec<FlowSetIn>,
    ) -> (Vec<EpochReport>, Vec<HandedOver>, Arc<EpochLog>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        for i in items {
            tx.send(i).unwrap();
        }
        drop(tx);
        let log = Arc::new(EpochLog::default());
        let mut counted = Vec::new();
        run(
            rx,
            registry,
            Arc::clone(&log),
            Duration::from_secs(60),
            &mut |c: EpochCounts| counted.push((c.epoch, c.counts, c.unsure)),
        );
        (reports_of(&log), counted, log)
    }

    /// An epoch of many switches of two workers each is finished by its last flowset, not by
    /// the grace time, and each switch's counters are its workers' summed; a worker that
    /// delivers twice does not stand in for one that never does, and that epoch waits.
    #[test]
    fn an_epoch_finishes_when_every_worker_of_every_switch_delivered() {
        let n = 200;
        let (registry, held) = registry(n, 2);
        let mut items = Vec::new();
        for s in (1..=n).rev() {
            for w in 0..2 {
                items.push(item(&held, s, w, 7));
            }
        }
        for s in 1..=n {
            items.push(item(&held, s, 0, 8));
        }
        items.push(item(&held, 5, 0, 8));
        // Epoch 7 is finished by now: this one (of a restarted switch: the first session's
        // would be a duplicate) is late, decoded on its own.
        items.push(FlowSetIn {
            session: 2,
            ..item(&held, 9, 1, 7)
        });
        let (reports, counted, log) = assemble(registry, items);
        let c = &log.counters;
        assert_eq!(c.flowsets.load(Relaxed), 3 * u64::from(n) + 2);
        assert_eq!(c.late_flowsets.load(Relaxed), 1);
        assert_eq!(c.duplicate_flowsets.load(Relaxed), 1, "switch 5's second");
        assert_eq!(
            (c.epochs.load(Relaxed), c.incomplete.load(Relaxed)),
            (2, 1),
            "a late flowset is no epoch"
        );
        assert!(reports[1].late && reports[1].epoch == 7);
        let reports: Vec<EpochReport> = reports.into_iter().filter(|r| !r.late).collect();
        assert_eq!(reports.len(), 2);
        let (full, partial) = (&reports[0], &reports[1]);
        assert_eq!(
            (full.epoch, full.by_deadline, full.complete),
            (7, false, true)
        );
        assert!(full.missing.is_empty());
        assert_eq!(full.switches.len(), n as usize);
        assert!(full.switches.iter().all(|p| p.flowsets == 2));
        // Epoch 8 waited for the second workers until the end.
        assert_eq!(
            (partial.epoch, partial.by_deadline, partial.complete),
            (8, true, false)
        );
        assert_eq!(partial.missing.len(), n as usize);
        let (epoch, c, unsure) = &counted[0];
        assert_eq!((*epoch, c.len()), (7, n as usize));
        assert!(
            unsure.is_empty(),
            "every switch's counts of epoch 7 are sure"
        );
        assert!(
            c.iter()
                .all(|&(_, _, packets, bytes)| (packets, bytes) == (6, 600))
        );
        // The duplicate was not counted: switch 5 has one flowset's packets in epoch 8.
        let (_, c, unsure) = counted
            .iter()
            .find(|(e, c, _)| *e == 8 && c.len() > 1)
            .unwrap();
        assert_eq!(c.len(), n as usize);
        // Every switch's second worker is missing: their flowsets may yet come, and their
        // counts then complete the totals, so no switch is unsure for good; nor is a late
        // flowset's (decoded whole).
        assert!(unsure.is_empty());
        let late = counted
            .iter()
            .find(|(e, c, _)| *e == 7 && c.len() == 1)
            .unwrap();
        assert!(late.2.is_empty());
        assert!(
            c.iter()
                .all(|&(_, _, packets, bytes)| (packets, bytes) == (3, 300))
        );
        // Every flowset was let go once its counters were handed over.
        assert_eq!(held.flowsets.load(Relaxed), 0);
        assert_eq!(held.bytes.load(Relaxed), 0);
    }

    /// A switch that has not delivered an epoch's flowset and lost something on the way
    /// meanwhile (a gap in its frames, a flowset the sink dropped, a connection that came
    /// back within the grace time) is unsure for that epoch: its flowset may never come,
    /// and its links would show that epoch's packets as lost for good. Its flowset coming
    /// late anyway is as unsure; a switch that only has not delivered yet is not.
    #[test]
    fn a_switch_that_lost_something_and_did_not_deliver_is_unsure() {
        let (registry, held) = registry(3, 1);
        registry.switch(2).unwrap().note_lost();
        let (tx, rx) = crossbeam_channel::unbounded();
        for (s, e) in [(1, 7), (1, 8), (2, 8), (3, 8)] {
            tx.send(item(&held, s, 0, e)).unwrap();
        }
        let late = item(&held, 2, 0, 7);
        let sender = std::thread::spawn(move || {
            // Epoch 7 is finished by its deadline; then switch 2's comes after all.
            std::thread::sleep(Duration::from_millis(3000));
            tx.send(late).unwrap();
        });
        let log = Arc::new(EpochLog::default());
        let mut counted: Vec<HandedOver> = Vec::new();
        run(
            rx,
            Arc::clone(&registry),
            Arc::clone(&log),
            // Long enough that the loss noted just before counts as during the epoch
            // however slowly this thread starts.
            Duration::from_millis(1000),
            &mut |c: EpochCounts| counted.push((c.epoch, c.counts, c.unsure)),
        );
        sender.join().unwrap();
        let reports = reports_of(&log);
        let seven = reports.iter().find(|r| r.epoch == 7 && !r.late).unwrap();
        assert_eq!(seven.missing, vec![2, 3]);
        assert_eq!(seven.unsure, vec![2]);
        let (_, _, unsure) = counted.iter().find(|(e, _, _)| *e == 7).unwrap();
        assert_eq!(unsure, &vec![2]);
        let late = counted.iter().rfind(|(e, _, _)| *e == 7).unwrap();
        assert_eq!(late.1.len(), 1);
        assert_eq!(late.2, vec![2], "its late counts are as unsure");
        let eight = reports.iter().find(|r| r.epoch == 8).unwrap();
        assert!(eight.complete && eight.unsure.is_empty());
    }

    /// A flowset that spans several epochs (its worker had no clean one at the boundary) is
    /// handed over with their whole span and left out of the flows' loss series (it came
    /// before its first epoch was finished, and with the other switches' counts of that
    /// epoch made a loss that never was); its counts still count.
    #[test]
    fn a_flowset_of_several_epochs_spans_them_and_is_no_loss_sample() {
        let (registry, held) = registry(2, 1);
        let mut two = item(&held, 1, 0, 7);
        two.epochs = 2;
        let (tx, rx) = crossbeam_channel::unbounded();
        for i in [two, item(&held, 2, 0, 7), item(&held, 2, 0, 8)] {
            tx.send(i).unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        run(
            rx,
            registry,
            Arc::new(EpochLog::default()),
            Duration::from_secs(60),
            &mut |c: EpochCounts| got.push((c.epoch, c.epoch_ms, c.missing, c.counts.len())),
        );
        let spanning = got
            .iter()
            .find(|g| g.0 == 7 && g.2 == vec![1])
            .unwrap_or_else(|| panic!("{got:?}"));
        assert_eq!(spanning.1, (70, 20));
        assert_eq!(spanning.3, 1, "its counts count");
    }

    /// A flowset of several epochs that comes again is a duplicate, before its first epoch
    /// finished (it was decoded, and its counts counted, twice) and after.
    #[test]
    fn a_flowset_of_several_epochs_again_is_a_duplicate() {
        let (registry, held) = registry(2, 1);
        let spanning = || FlowSetIn {
            epochs: 2,
            ..item(&held, 1, 0, 7)
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        for i in [spanning(), spanning(), item(&held, 2, 0, 7)] {
            tx.send(i).unwrap();
        }
        let log = Arc::new(EpochLog::default());
        let mut counted = Vec::new();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Epoch 7 finishes by its grace time (switch 1 delivers no flowset of 7
                // alone); then the spanning flowset comes once more (after a minute in any
                // case: the counts below then say what went wrong).
                let waited = Instant::now();
                while log.counters.epochs.load(Relaxed) == 0
                    && waited.elapsed() < Duration::from_secs(60)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                tx.send(spanning()).unwrap();
                drop(tx);
            });
            run(
                rx,
                registry,
                Arc::clone(&log),
                Duration::ZERO,
                &mut |c: EpochCounts| counted.push(c.epoch),
            );
        });
        let c = &log.counters;
        assert_eq!(c.flowsets.load(Relaxed), 4);
        assert_eq!(c.duplicate_flowsets.load(Relaxed), 2);
        assert_eq!(
            c.late_flowsets.load(Relaxed),
            1,
            "the first, decoded on its own"
        );
        assert_eq!(c.epochs.load(Relaxed), 1);
        assert_eq!(counted, [7, 7], "the spanning flowset, then the epoch");
    }

    /// Flowsets that did not decode whole are said in the log, once a minute at most (their
    /// counts are lost; only the API and a lab's checks showed it).
    #[test]
    fn flowsets_not_decoded_whole_are_said_once_a_minute() {
        let log = EpochLog::default();
        let report = |counters_complete| EpochReport {
            epoch: 7,
            epoch_ns: 10_000_000,
            mode: DecodeMode::Single,
            complete: counters_complete,
            missing: Vec::new(),
            unsure: Vec::new(),
            switches: vec![SwitchPart {
                switch: 3,
                flowsets: 1,
                flows: 5,
                keys_complete: counters_complete,
                counters_complete,
            }],
            by_deadline: false,
            late: false,
            decode_us: 1,
        };
        keep(&log, report(true));
        assert_eq!(log.undecoded_said_ms.load(Relaxed), 0, "nothing to say");
        keep(&log, report(false));
        let said = log.undecoded_said_ms.load(Relaxed);
        assert!(said > 0);
        keep(&log, report(false));
        assert_eq!(
            log.undecoded_said_ms.load(Relaxed),
            said,
            "not again within the minute"
        );
        assert_eq!(log.counters.incomplete.load(Relaxed), 2);
    }

    /// An epoch finished long ago (its record let go) is still finished: a flowset for it is
    /// late, not the first of an epoch finished and counted again.
    #[test]
    fn an_epoch_finished_long_ago_stays_finished() {
        let mut f = Finished::default();
        let ms10 = 10_000_000;
        // Epoch 1000 of 10 ms ended at 10 s past 1970: long before now.
        let now_ms = 1_765_000_000_000;
        for e in 0..FINISHED_KEPT as u64 + 10 {
            f.add((ms10, 1000 + e), &[], Default::default(), now_ms);
        }
        assert!(f.contains((ms10, 1000)), "let go, still finished");
        assert!(f.contains((ms10, 999)), "before those let go");
        assert!(f.contains((ms10, 1009)) && f.contains((ms10, 1010)));
        assert!(
            !f.contains((ms10, 1000 + FINISHED_KEPT as u64 + 10)),
            "not yet"
        );
        assert!(!f.contains((1_000_000, 1000)), "another epoch length");
        assert!(f.contains((ms10, 1000 + FINISHED_KEPT as u64 + 9)), "kept");

        // An epoch far ahead of the sink's clock (a switch's clock ahead, a made-up number),
        // let go, does not make the epochs being delivered now look finished; nor do the
        // latest epochs, let go, make the last ten seconds' look so.
        let mut f = Finished::default();
        let now = now_ms / 10;
        f.add((ms10, u64::MAX / 2), &[], Default::default(), now_ms);
        for e in 0..FINISHED_KEPT as u64 + 10 {
            f.add((ms10, now - 100 + e), &[], Default::default(), now_ms);
        }
        assert!(!f.contains((ms10, now + 4100)), "an epoch still to come");
        assert!(
            !f.contains((ms10, now - 200)),
            "an epoch of ten seconds ago"
        );
        assert!(f.contains((ms10, now - 1001)), "more than ten seconds ago");
        assert!(f.contains((ms10, now - 100 + 10)), "kept");
    }

    /// A flowset that comes again after its epoch finished is a duplicate, not a late one
    /// whose counts add to the first's; a late one of another session counts once.
    #[test]
    fn a_flowset_again_after_its_epoch_finished_is_a_duplicate() {
        let (registry, held) = registry(2, 1);
        let restarted = || FlowSetIn {
            session: 2,
            ..item(&held, 1, 0, 7)
        };
        let items = vec![
            item(&held, 1, 0, 7),
            item(&held, 2, 0, 7),
            // Epoch 7 is finished.
            item(&held, 1, 0, 7),
            restarted(),
            restarted(),
        ];
        let (reports, counted, log) = assemble(registry, items);
        let c = &log.counters;
        assert_eq!(c.flowsets.load(Relaxed), 5);
        assert_eq!(c.duplicate_flowsets.load(Relaxed), 2);
        assert_eq!(c.late_flowsets.load(Relaxed), 1, "the restarted session's");
        assert_eq!(reports.iter().filter(|r| r.late).count(), 1);
        assert_eq!(counted.len(), 2, "the epoch, then the late flowset");
    }

    /// A switch restarted within an epoch sends that epoch's flowset again, of what it
    /// counted since: counted beside the first (it was dropped as a duplicate, and those
    /// packets read as lost); a second one of the same session is still a duplicate.
    #[test]
    fn a_restarted_switchs_flowset_of_the_same_epoch_counts_beside_the_first() {
        let (registry, held) = registry(2, 1);
        let items = vec![
            item(&held, 1, 0, 7),
            FlowSetIn {
                session: 2,
                ..item(&held, 1, 0, 7)
            },
            FlowSetIn {
                session: 2,
                ..item(&held, 1, 0, 7)
            },
            item(&held, 2, 0, 7),
        ];
        let (reports, counted, log) = assemble(registry, items);
        assert_eq!(log.counters.duplicate_flowsets.load(Relaxed), 1);
        assert_eq!(reports.len(), 1);
        assert!(reports[0].complete && reports[0].missing.is_empty());
        let (epoch, c, unsure) = &counted[0];
        assert_eq!(*epoch, 7);
        assert!(unsure.is_empty());
        let at = |s: u32| -> Vec<(u64, u64)> {
            c.iter()
                .filter(|x| x.1 == s)
                .map(|&(_, _, p, b)| (p, b))
                .collect()
        };
        assert_eq!(at(1), [(6, 600)], "both sessions' packets");
        assert_eq!(at(2), [(3, 300)]);
    }

    /// An epoch opened by a switch whose clock runs 300 ms ahead waits for the others, who
    /// deliver it when it ends by the sink's clock (its grace time from the first flowset
    /// had it finished without them, each epoch); a switch further ahead than the longest
    /// wait does not hold it longer than that.
    #[test]
    fn an_epoch_waits_for_its_switches_by_the_sinks_clock() {
        for (ahead_ms, complete) in [(300u64, true), (2500, false)] {
            let (registry, held) = registry(2, 1);
            let epoch_ms = EPOCH_NS / 1_000_000;
            let now = crate::registry::unix_ms();
            // Switch 2 delivers its epochs 5 ms after they end.
            let e = now / epoch_ms;
            registry
                .switch(2)
                .unwrap()
                .counters
                .flowset_lag
                .note(e, e * EPOCH_NS - 5_000_000, now);
            let epoch = (now + ahead_ms) / epoch_ms - 1;
            let end_ms = (epoch + 1) * epoch_ms;
            let (tx, rx) = crossbeam_channel::unbounded();
            let late = item(&held, 2, 0, epoch);
            let sender = std::thread::spawn(move || {
                tx.send(item(&held, 1, 0, epoch)).unwrap();
                // Switch 2's flowset when the epoch has ended (by the sink's clock).
                while crate::registry::unix_ms() < end_ms + 5 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                tx.send(late).unwrap();
                std::thread::sleep(Duration::from_millis(200));
            });
            let log = Arc::new(EpochLog::default());
            let mut switches = Vec::new();
            run(
                rx,
                registry,
                Arc::clone(&log),
                Duration::from_millis(50),
                &mut |c: EpochCounts| switches.push((c.counts.len(), c.missing)),
            );
            sender.join().unwrap();
            if complete {
                assert_eq!(switches, [(2, vec![])], "one epoch, both switches' counts");
            } else {
                // Finished at most a second past its grace time, switch 2 then missing;
                // its flowset came late.
                assert_eq!(switches[0], (1, vec![2]));
                assert_eq!(log.counters.late_flowsets.load(Relaxed), 1);
            }
        }
    }

    /// An epoch of another length (or far ahead) is finished at its deadline even while
    /// younger epochs of a shorter length keep waiting (their keys sort first).
    #[test]
    fn every_epoch_is_finished_at_its_deadline_whatever_its_key() {
        let (registry, held) = registry(1, 2);
        let (tx, rx) = crossbeam_channel::unbounded();
        let sender = std::thread::spawn(move || {
            let long = FlowSetIn {
                epoch_ns: 10 * EPOCH_NS,
                ..item(&held, 1, 0, 1)
            };
            tx.send(long).unwrap();
            // Worker 1 never delivers: each short epoch waits its whole grace time.
            for e in 0..60 {
                tx.send(item(&held, 1, 0, 1000 + e)).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
            Instant::now()
        });
        let log = Arc::new(EpochLog::default());
        let mut long_done = None;
        run(
            rx,
            registry,
            Arc::clone(&log),
            Duration::from_millis(50),
            &mut |c: EpochCounts| {
                if c.epoch_ms.1 == 100 {
                    long_done = Some(Instant::now());
                }
            },
        );
        let stopped = sender.join().unwrap();
        let done = long_done.expect("the long epoch was finished");
        assert!(
            done < stopped,
            "finished at its deadline, not when the flowsets stopped"
        );
    }
}

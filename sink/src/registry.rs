//! What the sink knows about switches: who connected, what they declared (ports, flowset
//! shape, epochs, plans), their counters, and which switch delivers to which host address
//! (so that a flow's first hop can be pinned: the edge switch that delivers traffic to an
//! address is the one its traffic enters by).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustc_hash::FxHashMap;
use serde::Serialize;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;
use telemetry::protocol::Hello;

/// A plan as the sink reads it.
#[derive(Debug)]
pub struct SinkPlan {
    /// Its version.
    pub version: u32,
    /// The compiled plan.
    pub plan: Plan,
    /// The query file.
    pub text: String,
    /// The path-tracing query (static per-flow, switch IDs), if any.
    pub path_query: Option<usize>,
    /// A per-packet sum of hop latency (each packet's end-to-end latency), if any: the
    /// series online delay detection reads.
    pub latency_sum: Option<usize>,
}

impl SinkPlan {
    /// Compiles `text` and checks it is plan `version`.
    pub fn compile(version: u32, text: &str) -> Result<SinkPlan, String> {
        let file = QueryFile::from_toml(text)?;
        let plan = Plan::compile(&file).map_err(|e| e.to_string())?;
        if plan.version != version {
            return Err(format!(
                "the query file compiles to plan {:08x} here, not {version:08x} (a different encoding)",
                plan.version
            ));
        }
        let path_query = plan.path_query();
        let latency_sum = plan.latency_sum_query();
        Ok(SinkPlan {
            version,
            plan,
            text: text.to_owned(),
            path_query,
            latency_sum,
        })
    }
}

/// A switch's counters at the sink (updated by its connection's thread, read by anyone).
#[derive(Debug, Default)]
pub struct SwitchCounters {
    /// Whether a connection is up.
    pub connected: AtomicBool,
    /// When the current connection's hello was taken, Unix ms (0 before any): counts of
    /// epochs before it never come (the switch drops what it cannot send).
    pub connected_ms: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Frames decoded.
    pub frames: AtomicU64,
    /// Bytes of frames decoded.
    pub bytes: AtomicU64,
    /// Frames rejected (each closes its connection).
    pub rejected: AtomicU64,
    /// Frames the switch numbered but never sent (its own drops).
    pub sequence_gaps: AtomicU64,
    /// Digests received.
    pub digests: AtomicU64,
    /// Digests dropped because a decode thread's queue was full.
    pub digests_dropped: AtomicU64,
    /// Digests of a plan the sink could not compile.
    pub digests_unknown_plan: AtomicU64,
    /// Digests whose flow slot the connection had not defined (a batch the switch encoded
    /// before it learnt of a reconnection or of a frame it could not send).
    pub digests_unknown_flow: AtomicU64,
    /// Flowsets received.
    pub flowsets: AtomicU64,
    /// Flowsets dropped undecoded (the epoch assembler's queue was full, or no room under
    /// the sink's memory for flowsets).
    pub flowsets_dropped: AtomicU64,
    /// Probe arrivals received.
    pub probes: AtomicU64,
    /// Probe arrivals dropped because a decode thread's queue was full.
    pub probes_dropped: AtomicU64,
    /// Breaks in the switch's probe records: bumped by each hello taken and by each stats
    /// frame in which the switch says it dropped probe records. A probe stream whose
    /// reports from this switch span a break may have lost reports there, not probes.
    pub probe_breaks: AtomicU64,
    /// The current connection: bumped by each hello taken. A connection that is no longer
    /// the current one (its switch reconnected) neither speaks for the switch nor marks it
    /// disconnected when it ends.
    pub generation: AtomicU64,
    /// When the current connection last delivered a frame, Unix ms.
    pub last_frame_ms: AtomicU64,
    /// How long after the end of its epochs the switch's last flowset arrived.
    pub flowset_lag: FlowsetLag,
}

/// How long after the end of its epochs (by the switch's clock) a switch's last flowset
/// arrived (by the sink's), ms: a few ms when both clocks agree, negative when the switch's
/// runs ahead, large when it lags or its frames are held on the way. Epochs are matched
/// across switches by their number, so a switch whose clock is off has its flowsets late or
/// its epochs finished without it; this is how an operator sees why.
///
/// A switch that stops sends the epoch in progress, before its end: once its connection
/// ends, the lag goes back to that of the latest flowset of an earlier epoch than the last
/// one's (a stopped switch read a negative lag for good, as if its clock ran ahead).
#[derive(Debug)]
pub struct FlowsetLag {
    /// The last flowset's lag (`NONE`: none yet).
    last: AtomicI64,
    /// The latest end epoch of the connection's flowsets (the epoch after the last they
    /// cover).
    end: AtomicU64,
    /// The lag of the latest flowset that ended there.
    at_end: AtomicI64,
    /// The lag of the latest flowset that ended before (`NONE`: none).
    before: AtomicI64,
}

impl Default for FlowsetLag {
    fn default() -> Self {
        FlowsetLag {
            last: AtomicI64::new(FlowsetLag::NONE),
            end: AtomicU64::new(0),
            at_end: AtomicI64::new(FlowsetLag::NONE),
            before: AtomicI64::new(FlowsetLag::NONE),
        }
    }
}

impl FlowsetLag {
    /// Beyond this (either way) the sink warns, once per connection.
    pub const WARN_MS: i64 = 1000;
    /// No value.
    const NONE: i64 = i64::MIN;

    /// Notes a flowset whose epochs end where epoch `end_epoch` starts, at `end_unix_ns`
    /// (the switch's clock), that arrived at `now_unix_ms` (the sink's); returns the lag,
    /// ms. Only the connection's thread notes (the workers' flowsets of one epoch come one
    /// after another, and a stop can send one worker's last epoch before another's).
    pub fn note(&self, end_epoch: u64, end_unix_ns: u64, now_unix_ms: u64) -> i64 {
        let end_ms = i64::try_from(end_unix_ns / 1_000_000).unwrap_or(i64::MAX);
        let lag = i64::try_from(now_unix_ms)
            .unwrap_or(i64::MAX)
            .saturating_sub(end_ms)
            .max(FlowsetLag::NONE + 1);
        let end = self.end.load(Relaxed);
        if end_epoch > end {
            self.before.store(self.at_end.load(Relaxed), Relaxed);
            self.end.store(end_epoch, Relaxed);
            self.at_end.store(lag, Relaxed);
        } else if end_epoch == end {
            self.at_end.store(lag, Relaxed);
        } else {
            self.before.store(lag, Relaxed);
        }
        self.last.store(lag, Relaxed);
        lag
    }

    /// The switch's connection ended: its latest epoch's flowsets may have been sent before
    /// the epoch's end (a stop), so an earlier epoch's speaks for its clock.
    pub fn connection_ended(&self) {
        let before = self.before.load(Relaxed);
        if before != FlowsetLag::NONE {
            self.last.store(before, Relaxed);
        }
    }

    /// The last flowset's lag, ms, if one came.
    pub fn get(&self) -> Option<i64> {
        Some(self.last.load(Relaxed)).filter(|v| *v != FlowsetLag::NONE)
    }
}

/// A 64-bit value as 16 hex digits.
fn hex_u64<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:016x}"))
}

/// What a switch declared, and its state.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchInfo {
    /// The switch's ID.
    pub id: u32,
    /// Its address as the sink sees it.
    pub peer: String,
    /// Its process (a new value: it restarted); 16 hex digits in JSON (above 2^53, a
    /// number would lose digits in JavaScript).
    #[serde(serialize_with = "hex_u64")]
    pub session: u64,
    /// FlowRadar epoch length, ns.
    pub epoch_ns: u64,
    /// The EtherType its shim goes under (every switch of a fabric needs the same).
    pub shim_ethertype: u16,
    /// Workers, one flowset each per epoch.
    pub workers: usize,
    /// Ports: name and role.
    pub ports: Vec<(String, bool)>,
    /// The plan in force (version), if any; shown as 8 hex digits, as `/api/plans` and
    /// `/api/flow` show versions.
    #[serde(serialize_with = "ser_plan")]
    pub plan: Option<u32>,
    /// Flowset memory it declared, bytes.
    pub flowset_bytes: usize,
    /// The last counters it reported.
    pub stats: Vec<(String, u64)>,
    /// Why its last connection was closed by the sink, if it was.
    pub last_error: Option<String>,
    /// When it last connected, Unix seconds.
    pub connected_at: u64,
}

fn ser_plan<S: serde::Serializer>(v: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&format!("{v:08x}")),
        None => s.serialize_none(),
    }
}

/// One switch.
#[derive(Debug)]
pub struct SwitchEntry {
    /// Its counters.
    pub counters: SwitchCounters,
    /// What it declared.
    pub info: Mutex<SwitchInfo>,
    /// Reasons its frames were rejected, with counts.
    pub reject_reasons: Mutex<BTreeMap<&'static str, u64>>,
    /// When its connection last ended.
    pub disconnected_at: Mutex<Option<std::time::Instant>>,
    /// When something it sent was last lost on the way: a gap in its frames' sequence (the
    /// switch dropped them), a flowset the sink had no room for, its connection ending.
    pub lost_at: Mutex<Option<std::time::Instant>>,
    /// When a second process's hello under its ID was last said in the log (Unix ms; 0:
    /// never): that process retries every few seconds, and each is counted, not each said.
    pub duplicate_said_ms: std::sync::atomic::AtomicU64,
}

impl SwitchEntry {
    /// Notes that something it sent was lost on the way, now.
    pub fn note_lost(&self) {
        *self.lost_at.lock().expect("switch lock") = Some(std::time::Instant::now());
    }
}

/// Most plans that failed to compile whose reason is remembered.
pub const MAX_BAD_PLANS: usize = 1024;

/// Plans kept besides those some switch has in force: beyond, the one announced longest ago
/// that no switch has in force is let go (any peer may send plans, each up to the protocol's 64 KiB
/// of text and its compiled form).
pub const MAX_SPARE_PLANS: usize = 64;

/// Host addresses whose delivering switch is surely remembered: the most recently learned
/// or confirmed (up to twice as many are kept); those seen least recently are forgotten
/// first (traffic to millions of destinations, as a border switch's, would otherwise leave
/// new hosts unlearned for good).
pub const MAX_OWNERS: usize = 1 << 20;

/// Host addresses and the edge switch that delivers to each, in two generations: an
/// address learned or confirmed goes to the newer; once it holds `cap`, it becomes the
/// older and the older is forgotten. Every lookup and insertion is a hash-map one; the
/// `cap` addresses seen most recently are always kept, and at most twice as many.
#[derive(Debug)]
struct Owners {
    newer: FxHashMap<u32, u32>,
    older: FxHashMap<u32, u32>,
    cap: usize,
}

impl Owners {
    fn new(cap: usize) -> Owners {
        Owners {
            newer: FxHashMap::default(),
            older: FxHashMap::default(),
            cap: cap.max(1),
        }
    }

    /// Whether `addr` is known, recently, to be delivered by `switch`.
    fn confirmed(&self, addr: u32, switch: u32) -> bool {
        self.newer.get(&addr) == Some(&switch)
    }

    fn learn(&mut self, addr: u32, switch: u32) {
        self.older.remove(&addr);
        self.newer.insert(addr, switch);
        if self.newer.len() >= self.cap {
            // The older map's memory is the next newer one's (a swap, not a new map).
            std::mem::swap(&mut self.newer, &mut self.older);
            self.newer.clear();
        }
    }

    fn get(&self, addr: u32) -> Option<u32> {
        self.newer
            .get(&addr)
            .or_else(|| self.older.get(&addr))
            .copied()
    }
}

/// Switch IDs kept by default (`--max-switches`): each keeps its counters, metric series and
/// plan in force for the sink's life, and any peer may say hello under any switch ID.
pub const DEFAULT_MAX_SWITCHES: usize = 1024;

/// Every switch, plan and learned address.
#[derive(Debug)]
pub struct Registry {
    switches: RwLock<BTreeMap<u32, Arc<SwitchEntry>>>,
    /// Most switch IDs kept: a hello with another beyond them is refused. None is let go
    /// for a new one: a switch gone long may be a switch still forwarding (its links' loss
    /// is unsure, not taken), and its metric series stay.
    max_switches: usize,
    plans: RwLock<FxHashMap<u32, Arc<SinkPlan>>>,
    /// The plans' versions in the order they were last announced (the first let go first).
    plan_order: Mutex<std::collections::VecDeque<u32>>,
    /// Plans let go for [`MAX_SPARE_PLANS`].
    plans_evicted: AtomicU64,
    /// Plans that failed to compile, with the reason.
    /// Plans that did not compile, by version and text (another switch may send the same
    /// version's good text).
    bad_plans: Mutex<BTreeMap<(u32, u64), String>>,
    owners: RwLock<Owners>,
    ids: RwLock<Arc<Vec<u32>>>,
    /// Connections closed without a switch the sink knows to count them at (before a
    /// hello, or at a refused hello from a switch not seen before), by reason.
    anonymous_rejects: Mutex<BTreeMap<&'static str, u64>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(DEFAULT_MAX_SWITCHES)
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Unix time, ms.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How recently a connection must have delivered a frame to count as alive: a hello of the
/// same switch ID from another process meanwhile is refused (two switches with one ID),
/// after it one takes over (the old connection is dead without having been closed). Every
/// switch sends a flowset per worker every epoch.
pub fn alive_within_ms(epoch_ns: u64) -> u64 {
    (2 * epoch_ns / 1_000_000).max(2000)
}

/// A hello the registry refused.
#[derive(Debug)]
pub enum HelloRefused {
    /// Another process holds the switch ID on a connection that is alive.
    Duplicate {
        /// The switch already connected under that ID.
        entry: Arc<SwitchEntry>,
        /// Why, in words.
        why: String,
    },
    /// A switch not seen before, and the registry holds as many as it may.
    TooManySwitches(String),
}

impl Registry {
    /// A registry keeping at most `max_switches` switch IDs (at least one).
    pub fn new(max_switches: usize) -> Registry {
        Registry {
            switches: RwLock::default(),
            max_switches: max_switches.max(1),
            plans: RwLock::default(),
            plan_order: Mutex::default(),
            plans_evicted: AtomicU64::new(0),
            bad_plans: Mutex::default(),
            owners: RwLock::new(Owners::new(MAX_OWNERS)),
            ids: RwLock::default(),
            anonymous_rejects: Mutex::default(),
        }
    }

    /// A switch connected with `hello`; returns its entry (the same one across reconnects)
    /// and the connection's generation. Refused when another process holds the ID on a
    /// connection that is alive, or when the switch is new and the registry holds as many
    /// IDs as it may.
    pub fn connect(
        &self,
        hello: &Hello,
        peer: &str,
        flowset_bytes: usize,
    ) -> Result<(Arc<SwitchEntry>, u64), HelloRefused> {
        let info = SwitchInfo {
            id: hello.switch_id,
            peer: peer.to_owned(),
            session: hello.session,
            epoch_ns: hello.epoch_ns,
            shim_ethertype: hello.shim_ethertype,
            workers: hello.table_seeds.len(),
            ports: hello
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.edge))
                .collect(),
            plan: hello.plan.as_ref().map(|p| p.version),
            flowset_bytes,
            stats: Vec::new(),
            last_error: None,
            connected_at: unix_secs(),
        };
        let now = unix_ms();
        let (entry, generation) = {
            let mut map = self.switches.write().expect("registry lock");
            if map.len() >= self.max_switches && !map.contains_key(&hello.switch_id) {
                return Err(HelloRefused::TooManySwitches(format!(
                    "switch ID {} is new and the sink already keeps {} (--max-switches); refused {peer}",
                    hello.switch_id,
                    map.len()
                )));
            }
            let e = map.entry(hello.switch_id).or_insert_with(|| {
                Arc::new(SwitchEntry {
                    counters: SwitchCounters::default(),
                    info: Mutex::new(info.clone()),
                    reject_reasons: Mutex::new(BTreeMap::new()),
                    disconnected_at: Mutex::new(None),
                    lost_at: Mutex::new(None),
                    duplicate_said_ms: Default::default(),
                })
            });
            let c = &e.counters;
            {
                let old = e.info.lock().expect("switch lock");
                let heard = c.last_frame_ms.load(Relaxed);
                if c.connected.load(Relaxed)
                    && old.session != hello.session
                    && now.saturating_sub(heard) < alive_within_ms(old.epoch_ns)
                {
                    return Err(HelloRefused::Duplicate {
                        entry: Arc::clone(e),
                        why: format!(
                            "switch ID {} is already connected from {} (another process: two switches with one switch_id?); refused {peer}",
                            hello.switch_id, old.peer
                        ),
                    });
                }
            }
            *e.info.lock().expect("switch lock") = info;
            c.last_frame_ms.store(now, Relaxed);
            c.connected_ms.store(now, Relaxed);
            c.connected.store(true, Relaxed);
            let generation = c.generation.fetch_add(1, Relaxed) + 1;
            c.probe_breaks.fetch_add(1, Relaxed);
            let entry = Arc::clone(e);
            // Under the map's lock: two hellos at once must not leave the list of the
            // first for good.
            *self.ids.write().expect("registry lock") = Arc::new(map.keys().copied().collect());
            (entry, generation)
        };
        entry.counters.connections.fetch_add(1, Relaxed);
        Ok((entry, generation))
    }

    /// The switch's connection `generation` ended (`error`: why the sink closed it);
    /// nothing if the switch has connected again since.
    pub fn disconnect(&self, entry: &SwitchEntry, generation: u64, error: Option<String>) {
        let _map = self.switches.write().expect("registry lock");
        if entry.counters.generation.load(Relaxed) != generation {
            return;
        }
        entry.counters.connected.store(false, Relaxed);
        entry.counters.flowset_lag.connection_ended();
        *entry.disconnected_at.lock().expect("switch lock") = Some(std::time::Instant::now());
        entry.note_lost();
        if let Some(e) = error {
            entry.info.lock().expect("switch lock").last_error = Some(e);
        }
    }

    /// Counts a connection closed for `reason` with no switch the sink knows to count it at.
    pub fn note_anonymous_reject(&self, reason: &'static str) {
        *self
            .anonymous_rejects
            .lock()
            .expect("registry lock")
            .entry(reason)
            .or_default() += 1;
    }

    /// Connections closed with no switch the sink knows to count them at, by reason.
    pub fn anonymous_rejects(&self) -> BTreeMap<&'static str, u64> {
        self.anonymous_rejects
            .lock()
            .expect("registry lock")
            .clone()
    }

    /// The switch `id`.
    pub fn switch(&self, id: u32) -> Option<Arc<SwitchEntry>> {
        self.switches
            .read()
            .expect("registry lock")
            .get(&id)
            .cloned()
    }

    /// Every switch, by ID.
    pub fn switches(&self) -> Vec<Arc<SwitchEntry>> {
        self.switches
            .read()
            .expect("registry lock")
            .values()
            .cloned()
            .collect()
    }

    /// Switch IDs heard from (path candidates without a topology).
    pub fn ids(&self) -> Arc<Vec<u32>> {
        Arc::clone(&self.ids.read().expect("registry lock"))
    }

    /// Adds plan `version` from its query file (once; later calls are no-ops). An error is
    /// remembered and returned again.
    pub fn add_plan(&self, version: u32, text: &str) -> Result<Arc<SinkPlan>, String> {
        if let Some(p) = self.plan(version) {
            // Announced again: the last to be let go.
            let mut order = self.plan_order.lock().expect("plans lock");
            if let Some(at) = order.iter().position(|&v| v == version) {
                order.remove(at);
                order.push_back(version);
            }
            return Ok(p);
        }
        let key = (version, text_hash(text));
        if let Some(e) = self.bad_plans.lock().expect("plans lock").get(&key) {
            return Err(e.clone());
        }
        match SinkPlan::compile(version, text) {
            Ok(p) => {
                let p = Arc::new(p);
                let in_force = self.plans_in_force();
                let mut order = self.plan_order.lock().expect("plans lock");
                let mut plans = self.plans.write().expect("plans lock");
                if plans.insert(version, Arc::clone(&p)).is_none() {
                    order.push_back(version);
                }
                let mut spare = order.iter().filter(|v| !in_force.contains(v)).count();
                while spare > MAX_SPARE_PLANS
                    && let Some(at) = order.iter().position(|v| !in_force.contains(v))
                {
                    let old = order.remove(at).expect("a position found");
                    plans.remove(&old);
                    self.plans_evicted.fetch_add(1, Relaxed);
                    spare -= 1;
                }
                Ok(p)
            }
            Err(e) => {
                // Remembered up to a bound (any switch may send plans); past it a bad plan
                // is compiled again when named again.
                let mut bad = self.bad_plans.lock().expect("plans lock");
                if bad.len() < MAX_BAD_PLANS {
                    bad.insert(key, e.clone());
                }
                Err(e)
            }
        }
    }

    /// The plans switches have in force (as their hellos and plan frames said).
    fn plans_in_force(&self) -> std::collections::BTreeSet<u32> {
        self.switches
            .read()
            .expect("registry lock")
            .values()
            .filter_map(|e| e.info.lock().expect("switch lock").plan)
            .collect()
    }

    /// Plans let go, beyond [`MAX_SPARE_PLANS`] of those no switch has in force.
    pub fn plans_evicted(&self) -> u64 {
        self.plans_evicted.load(Relaxed)
    }

    /// Plan `version`, if compiled.
    pub fn plan(&self, version: u32) -> Option<Arc<SinkPlan>> {
        self.plans
            .read()
            .expect("plans lock")
            .get(&version)
            .cloned()
    }

    /// Every plan compiled so far.
    pub fn plans(&self) -> Vec<Arc<SinkPlan>> {
        let mut v: Vec<_> = self
            .plans
            .read()
            .expect("plans lock")
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|p| p.version);
        v
    }

    /// Records that switch `switch` delivered traffic to host `addr` at its edge.
    pub fn learn_owners(&self, pairs: &[(u32, u32)]) {
        if pairs.is_empty() {
            return;
        }
        {
            let owners = self.owners.read().expect("owners lock");
            if pairs.iter().all(|&(a, s)| owners.confirmed(a, s)) {
                return;
            }
        }
        let mut owners = self.owners.write().expect("owners lock");
        for &(addr, switch) in pairs {
            if !owners.confirmed(addr, switch) {
                owners.learn(addr, switch);
            }
        }
    }

    /// The edge switch that delivers to host `addr`, if learned.
    pub fn owner(&self, addr: u32) -> Option<u32> {
        self.owners.read().expect("owners lock").get(addr)
    }

    /// Other switches that said hello with a shim EtherType other than `ethertype`, with
    /// theirs (at most 8): packets between them and a switch of `ethertype` cross without
    /// telemetry, or are dropped where the shim's type is no protocol the switch knows.
    pub fn other_shim_ethertypes(&self, id: u32, ethertype: u16) -> Vec<(u32, u16)> {
        let mut v: Vec<(u32, u16)> = self
            .switches
            .read()
            .expect("registry lock")
            .iter()
            .filter(|(other, _)| **other != id)
            .map(|(other, e)| (*other, e.info.lock().expect("switch lock").shim_ethertype))
            .filter(|&(_, t)| t != ethertype)
            .collect();
        v.sort_unstable();
        v.truncate(8);
        v
    }

    /// Switches that said hello once and have been disconnected for `recent` or longer:
    /// whatever they count does not reach the sink.
    pub fn disconnected_for(&self, recent: Duration) -> Vec<u32> {
        self.switches
            .read()
            .expect("registry lock")
            .iter()
            .filter(|(_, e)| {
                !e.counters.connected.load(Relaxed)
                    && e.disconnected_at
                        .lock()
                        .expect("switch lock")
                        .is_none_or(|t| t.elapsed() >= recent)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Those of `ids` that lost something on the way to the sink at `since` or later
    /// ([`SwitchEntry::lost_at`]): a flowset of theirs that has not come may never come.
    pub fn lost_since(&self, ids: &[u32], since: std::time::Instant) -> Vec<u32> {
        let map = self.switches.read().expect("registry lock");
        ids.iter()
            .copied()
            .filter(|id| {
                map.get(id).is_some_and(|e| {
                    e.lost_at
                        .lock()
                        .expect("switch lock")
                        .is_some_and(|t| t >= since)
                })
            })
            .collect()
    }

    /// The median flowset lag ([`FlowsetLag`], ms; of an even number, the higher middle
    /// one) of the switches [`Registry::connected_with_epoch`] lists, if one has delivered:
    /// how long after an epoch's end by the sink's clock most of them deliver it, whatever a
    /// few switches' clocks say.
    pub fn typical_flowset_lag_ms(&self, epoch_ns: u64, recent: Duration) -> Option<i64> {
        let ids = self.connected_with_epoch(epoch_ns, recent);
        let map = self.switches.read().expect("registry lock");
        let mut lags: Vec<i64> = ids
            .iter()
            .filter_map(|(id, _)| map.get(id)?.counters.flowset_lag.get())
            .collect();
        lags.sort_unstable();
        lags.get(lags.len() / 2).copied()
    }

    /// Switches with epoch length `epoch_ns` that are connected or were less than `recent`
    /// ago (their last flowsets may still be on their way), with their worker counts.
    pub fn connected_with_epoch(&self, epoch_ns: u64, recent: Duration) -> Vec<(u32, usize)> {
        self.switches
            .read()
            .expect("registry lock")
            .iter()
            .filter(|(_, e)| {
                e.counters.connected.load(Relaxed)
                    || e.disconnected_at
                        .lock()
                        .expect("switch lock")
                        .is_some_and(|t| t.elapsed() < recent)
            })
            .filter_map(|(id, e)| {
                let info = e.info.lock().expect("switch lock");
                (info.epoch_ns == epoch_ns).then_some((*id, info.workers))
            })
            .collect()
    }
}

/// A hash of a plan's text (to tell texts of one version apart).
fn text_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const PAPER: &str = include_str!("../../configs/queries/paper.toml");

    /// The hello of switch `id` (one worker, no ports) with `plan`.
    pub(crate) fn hello(
        id: u32,
        plan: Option<telemetry::protocol::PlanText>,
    ) -> telemetry::protocol::Hello {
        let fs = telemetry::flowradar::FlowSet::new(
            &telemetry::flowradar::FlowSetConfig::for_flows(100, id),
        );
        telemetry::protocol::Hello {
            switch_id: id,
            session: 1,
            epoch_ns: 10_000_000,
            shim_ethertype: 0x88b5,
            shape: telemetry::flowradar::wire::Shape::of(&fs),
            filter_seed: telemetry::flowradar::flowset::FILTER_SEED,
            table_seeds: vec![fs.table_seed()],
            max_digests: 1024,
            ports: Vec::new(),
            plan,
        }
    }

    #[test]
    fn plans_compile_once_and_must_match_their_version() {
        let r = Registry::default();
        let v = Plan::compile(&QueryFile::from_toml(PAPER).unwrap())
            .unwrap()
            .version;
        let p = r.add_plan(v, PAPER).unwrap();
        assert_eq!(p.path_query, Some(0));
        assert!(Arc::ptr_eq(&p, &r.add_plan(v, "ignored").unwrap()));
        let e = r.add_plan(v ^ 1, PAPER).unwrap_err();
        assert!(e.contains("compiles to plan"), "{e}");
        assert_eq!(r.add_plan(v ^ 1, PAPER).unwrap_err(), e);
        assert!(r.add_plan(7, "not toml [").is_err());
        assert_eq!(r.plans().len(), 1);
    }

    /// A version's text that does not compile (a stray or broken sender) does not keep
    /// that version's good text from compiling for every switch.
    #[test]
    fn a_bad_text_does_not_block_its_versions_good_one() {
        let r = Registry::default();
        let v = Plan::compile(&QueryFile::from_toml(PAPER).unwrap())
            .unwrap()
            .version;
        assert!(r.add_plan(v, "not toml [").is_err());
        assert!(r.add_plan(v, PAPER).is_ok());
    }

    /// Switches saying hello at once are all in the list of IDs (a list taken after the
    /// lock could leave one out for good).
    #[test]
    fn switches_saying_hello_at_once_are_all_listed() {
        for _ in 0..20 {
            let r = Arc::new(Registry::default());
            let threads: Vec<_> = (1..=16u32)
                .map(|id| {
                    let r = Arc::clone(&r);
                    std::thread::spawn(move || {
                        assert!(r.connect(&hello(id, None), "peer", 0).is_ok());
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(r.ids().len(), 16);
        }
    }

    /// A switch whose shim EtherType differs from its fabric's is named to the others (its
    /// packets cross them without telemetry, or are dropped there).
    #[test]
    fn switches_of_another_shim_ethertype_are_named() {
        let r = Registry::default();
        for (id, t) in [(1, 0x88b5), (2, 0x88b6), (3, 0x88b5)] {
            let mut h = hello(id, None);
            h.shim_ethertype = t;
            assert!(r.connect(&h, "peer", 0).is_ok());
        }
        assert_eq!(
            r.other_shim_ethertypes(2, 0x88b6),
            [(1, 0x88b5), (3, 0x88b5)]
        );
        assert_eq!(r.other_shim_ethertypes(1, 0x88b5), [(2, 0x88b6)]);
        assert_eq!(
            r.other_shim_ethertypes(9, 0x88b6),
            [(1, 0x88b5), (3, 0x88b5)]
        );
        let r = Registry::default();
        assert!(r.connect(&hello(1, None), "peer", 0).is_ok());
        assert!(r.other_shim_ethertypes(1, 0x88b5).is_empty());
    }

    /// Plans no switch has in force are kept up to a bound, the first added let go first
    /// (a peer sending plan after plan grew the sink's memory without end); a plan in
    /// force stays however old.
    #[test]
    fn spare_plans_are_bounded_and_plans_in_force_stay() {
        let r = Registry::default();
        let text = |i: usize| PAPER.replace("name = \"path\"", &format!("name = \"path{i}\""));
        let version = |t: &str| {
            Plan::compile(&QueryFile::from_toml(t).unwrap())
                .unwrap()
                .version
        };
        let first = text(0);
        r.add_plan(version(&first), &first).unwrap();
        let plan = telemetry::protocol::PlanText {
            version: version(&first),
            digest_bytes: 2,
            text: first.clone(),
        };
        assert!(r.connect(&hello(1, Some(plan)), "peer", 0).is_ok());
        let n = MAX_SPARE_PLANS + 10;
        let versions: Vec<u32> = (1..=n)
            .map(|i| {
                let t = text(i);
                r.add_plan(version(&t), &t).unwrap().version
            })
            .collect();
        assert_eq!(r.plans().len(), MAX_SPARE_PLANS + 1);
        assert_eq!(r.plans_evicted(), 10);
        assert!(r.plan(version(&first)).is_some(), "the plan in force stays");
        assert!(versions[..10].iter().all(|&v| r.plan(v).is_none()));
        assert!(versions[10..].iter().all(|&v| r.plan(v).is_some()));
        // A plan announced again is the last to go.
        let again = text(11);
        r.add_plan(versions[10], &again).unwrap();
        let t = text(n + 1);
        r.add_plan(version(&t), &t).unwrap();
        assert!(r.plan(versions[10]).is_some(), "announced again, kept");
        assert!(
            r.plan(versions[11]).is_none(),
            "the oldest announced, let go"
        );
    }

    /// A new switch ID beyond the most kept is refused, connected or not the others (any
    /// peer may say hello under any ID, and each kept its entry and plan in force for
    /// good); a known one comes back whatever the count.
    #[test]
    fn switch_ids_beyond_the_limit_are_refused() {
        let r = Registry::new(3);
        let generations: Vec<u64> = (1..=3u32)
            .map(|id| r.connect(&hello(id, None), "peer", 0).unwrap().1)
            .collect();
        let refused = r.connect(&hello(4, None), "peer", 0).unwrap_err();
        assert!(
            matches!(&refused, HelloRefused::TooManySwitches(why) if why.contains("--max-switches")),
            "{refused:?}"
        );
        let entry = |id| r.switch(id).unwrap();
        r.disconnect(&entry(2), generations[1], None);
        assert!(matches!(
            r.connect(&hello(4, None), "peer", 0),
            Err(HelloRefused::TooManySwitches(_))
        ));
        let (e2, _) = r.connect(&hello(2, None), "peer", 0).unwrap();
        assert!(Arc::ptr_eq(&e2, &entry(2)));
        assert_eq!(*r.ids(), vec![1, 2, 3]);
    }

    #[test]
    fn owners_are_learned_and_updated() {
        let r = Registry::default();
        r.learn_owners(&[(10, 1), (11, 2)]);
        r.learn_owners(&[(10, 3)]);
        assert_eq!(r.owner(10), Some(3));
        assert_eq!(r.owner(11), Some(2));
        assert_eq!(r.owner(12), None);
    }

    /// Past the bound the addresses learned or confirmed least recently are forgotten, not
    /// the new ones refused; a confirmed address stays.
    #[test]
    fn owners_forget_the_least_recent_past_their_bound() {
        let mut o = super::Owners::new(4);
        for a in 0..4 {
            o.learn(a, 1);
        }
        // 0..4 moved to the older generation; 0 is confirmed, 4 and 5 learned.
        o.learn(0, 1);
        for a in 4..6 {
            o.learn(a, 2);
        }
        assert_eq!((o.get(0), o.get(1), o.get(5)), (Some(1), Some(1), Some(2)));
        o.learn(100, 3);
        // 1, 2 and 3 were neither learned nor confirmed since: gone; the rest kept.
        assert_eq!((o.get(1), o.get(2), o.get(3)), (None, None, None));
        assert_eq!(
            (o.get(0), o.get(5), o.get(100)),
            (Some(1), Some(2), Some(3))
        );
        assert!(o.newer.len() + o.older.len() <= 8);
        // However many addresses come, at most twice the bound is kept, and the bound's
        // worth of the newest are known.
        for a in 1000..2000 {
            o.learn(a, 4);
            assert!(o.newer.len() + o.older.len() < 8);
            let newest = a.saturating_sub(3).max(1000)..=a;
            assert!(newest.clone().all(|b| o.get(b) == Some(4)), "{newest:?}");
        }
    }

    /// The typical lag is the middle one of the switches of one epoch length (the higher
    /// of two): neither a switch whose clock runs ahead nor one that runs behind moves it.
    #[test]
    fn the_typical_flowset_lag_is_the_median() {
        let r = Registry::default();
        let lags = [(1, -300), (2, 5), (3, 6), (4, 300), (5, 7)];
        for (i, (id, ms)) in lags.into_iter().enumerate() {
            r.connect(&hello(id, None), "peer", 0).unwrap();
            let entry = r.switch(id).unwrap();
            entry
                .counters
                .flowset_lag
                .note(100, 1_000_000_000, (1000 + ms) as u64);
            let expected = [-300, 5, 5, 6, 6][i];
            let epoch_ns = entry.info.lock().unwrap().epoch_ns;
            let got = r.typical_flowset_lag_ms(epoch_ns, Duration::ZERO);
            assert_eq!(got, Some(expected), "with switches 1 to {id}");
            assert_eq!(r.typical_flowset_lag_ms(epoch_ns + 1, Duration::ZERO), None);
        }
    }

    /// A switch that stops sends its epoch in progress before the epoch's end: once its
    /// connection ends, the lag is the epoch's before (it read negative for good); a switch
    /// whose clock runs ahead keeps reading negative.
    #[test]
    fn a_stopped_switchs_last_early_flowsets_do_not_set_its_lag() {
        let at = |epoch: u64| epoch * 10_000_000;
        let lag = FlowsetLag::default();
        assert_eq!(lag.get(), None);
        lag.connection_ended();
        assert_eq!(lag.get(), None);
        // Two workers an epoch, a few ms after each epoch's end; at the stop, epoch 12 sent
        // 6 ms before its end.
        for e in 10..12u64 {
            lag.note(e + 1, at(e + 1), at(e + 1) / 1_000_000 + 3);
            lag.note(e + 1, at(e + 1), at(e + 1) / 1_000_000 + 4);
        }
        lag.note(13, at(13), at(13) / 1_000_000 - 6);
        lag.note(13, at(13), at(13) / 1_000_000 - 6);
        assert_eq!(lag.get(), Some(-6), "while connected, the last flowset's");
        lag.connection_ended();
        assert_eq!(lag.get(), Some(4));
        // At the stop one worker had moved on to epoch 13 (sent early) while the other was
        // still in 12 (sent at its end): the epoch before the latest speaks.
        let straddle = FlowsetLag::default();
        straddle.note(12, at(12), at(12) / 1_000_000 + 3);
        straddle.note(13, at(13), at(13) / 1_000_000 + 2);
        straddle.note(14, at(14), at(14) / 1_000_000 - 10);
        straddle.note(13, at(13), at(13) / 1_000_000);
        straddle.connection_ended();
        assert_eq!(straddle.get(), Some(0));
        // A late worker's last flowset covering two epochs ends where the other's does.
        let late = FlowsetLag::default();
        late.note(12, at(12), at(12) / 1_000_000 + 4);
        late.note(13, at(13), at(13) / 1_000_000 - 7);
        late.note(13, at(13), at(13) / 1_000_000 - 7);
        late.connection_ended();
        assert_eq!(late.get(), Some(4));
        // A clock 50 ms ahead.
        let ahead = FlowsetLag::default();
        for e in 10..13u64 {
            ahead.note(e + 1, at(e + 1), at(e + 1) / 1_000_000 - 50);
        }
        ahead.connection_ended();
        assert_eq!(ahead.get(), Some(-50));
    }
}

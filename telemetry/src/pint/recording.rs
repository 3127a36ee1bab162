//! The sink's recording module for one flow: per static query a path decoder, per dynamic
//! query one KLL quantile sketch per hop within the flow's space budget (Apache
//! DataSketches), and per per-packet query the latest and running values.

use datasketches::common::SearchCriteria;
use datasketches::kll::KllSketch;

use crate::pint::compress::LogCompressor;
use crate::pint::path_decoder::{PathContext, PathState, PathView, Space};
use crate::pint::plan::{CompiledQuery, Plan, QueryKind, Reading, carried_unit};
use crate::pint::query::ValueKind;
use crate::pint::tape::{self, Slice};
use crate::wire::shim::get_bits;

/// Once a flow's path is decoded, one digest in this many is still fed to its decoder.
pub const PATH_CHECK_EVERY: u64 = 8;

/// Quantile sketches of one dynamic query's samples, one per hop of a flow.
#[derive(Debug, Clone)]
pub struct HopSketches {
    compression: LogCompressor,
    sketches: Sketches,
    /// Per hop, the samples carried as the largest code, counted exactly: a sketch that has
    /// compacted may no longer hold a lone sample at the top that its maximum still shows.
    at_top: Vec<u64>,
    /// A decompressed code's value in the value's units ([`crate::pint::plan::carried_unit`]).
    unit: f64,
}

/// One sketch per hop, whose items are codes as narrow as the compression's largest code
/// allows (codes have at most [`crate::pint::compress::MAX_LOG_BITS`] bits): one byte a
/// retained sample for codes of up to 8 bits, two beyond, so that a space budget holds
/// that many more samples (and compactions, sorting narrower items, come less often).
#[derive(Debug, Clone)]
enum Sketches {
    Byte(Vec<KllSketch<u8>>),
    Half(Vec<KllSketch<u16>>),
}

/// A sketch item: a compression code of a known largest value.
trait Code: Copy + Ord + Into<u32> {
    /// Bytes one takes.
    const BYTES: u32;
    /// The item for a code no larger than the type holds (the compression's largest code,
    /// which chose the type, bounds it).
    fn of(code: u32) -> Self;
}

impl Code for u8 {
    const BYTES: u32 = 1;
    fn of(code: u32) -> u8 {
        code as u8
    }
}

impl Code for u16 {
    const BYTES: u32 = 2;
    fn of(code: u32) -> u16 {
        code as u16
    }
}

/// `$body` with `$v` bound to the hops' sketches and `$t` to their item type, whatever it is.
macro_rules! each_width {
    ($sketches:expr, $v:ident, $t:ident => $body:expr) => {
        match $sketches {
            Sketches::Byte($v) => {
                type $t = u8;
                $body
            }
            Sketches::Half($v) => {
                type $t = u16;
                $body
            }
        }
    };
}

impl Sketches {
    /// `hops` sketches of parameter `kll_k` for codes up to `max_code`.
    fn new(hops: usize, kll_k: u16, max_code: u32) -> Sketches {
        fn make<T: Code>(hops: usize, kll_k: u16) -> Vec<KllSketch<T>> {
            (0..hops)
                .map(|_| KllSketch::new(kll_k).expect("K within the library's range"))
                .collect()
        }
        if item_bytes(max_code) == u8::BYTES {
            Sketches::Byte(make(hops, kll_k))
        } else {
            Sketches::Half(make(hops, kll_k))
        }
    }
}

/// Bytes a retained code up to `max_code` takes in a sketch.
fn item_bytes(max_code: u32) -> u32 {
    if max_code <= u32::from(u8::MAX) {
        u8::BYTES
    } else {
        u16::BYTES
    }
}

/// Why an aggregation cannot be answered from sampled streams.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} cannot be approximated well from a uniformly sampled stream (each hop sees only a sample of the flow's packets); PINT does not answer it"
)]
pub struct NotApproximable(pub &'static str);

/// Samples per hop a flow's sketches are sized for: the budget holds until a hop has had
/// this many samples; each doubling beyond adds at most one more level (eight items).
pub const SIZED_FOR_SAMPLES: u64 = 1 << 24;

/// Smallest KLL parameter the library takes (also its least items per level).
const KLL_MIN: u32 = 8;

/// Items a KLL sketch with parameter `k` can hold at most after `n` updates: its levels'
/// capacities, `max(8, k (2/3)^depth)` rounded up, over as many levels as `n` items need
/// (one more for the level a compaction is about to add). A test holds the library to it.
pub fn kll_items_bound(k: u16, n: u64) -> u64 {
    let cap = |depth: u32| -> u64 {
        let c = (f64::from(k) * (2.0f64 / 3.0).powi(depth as i32)).ceil() as u64 + 1;
        c.max(u64::from(KLL_MIN))
    };
    // Levels: the fewest whose full capacities, weighted 2^level, cover n.
    let mut levels = 1u32;
    loop {
        let weight: u128 = (0..levels)
            .map(|level| u128::from(cap(levels - 1 - level)) << level)
            .sum();
        if weight >= u128::from(n) || levels >= 64 {
            break;
        }
        levels += 1;
    }
    (0..=levels).map(cap).sum()
}

/// The largest KLL parameter whose sketch of `item_bytes`-byte items stays within `per_hop`
/// bytes up to [`SIZED_FOR_SAMPLES`] samples (8, the smallest, when even it does not fit).
/// Computed once per budget (a collector creates sketches for every new flow).
fn kll_k_for(per_hop: u64, item_bytes: u32) -> u16 {
    thread_local! {
        static KNOWN: std::cell::RefCell<Vec<((u64, u32), u16)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let key = (per_hop, item_bytes);
    if let Some(k) = KNOWN.with(|c| c.borrow().iter().find(|e| e.0 == key).map(|e| e.1)) {
        return k;
    }
    let fits = |kk: u16| kll_items_bound(kk, SIZED_FOR_SAMPLES) * u64::from(item_bytes) <= per_hop;
    let (mut lo, mut hi) = (KLL_MIN as u16, u16::MAX);
    if !fits(lo) {
        hi = lo;
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    KNOWN.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < 64 {
            c.push((key, lo));
        }
    });
    lo
}

impl HopSketches {
    /// Sketches for a flow of `k` hops whose samples are codes of `compression`, within
    /// `space_budget` bytes split evenly over the hops: the largest KLL parameter whose
    /// sketches stay within the budget up to [`SIZED_FOR_SAMPLES`] samples per hop (the
    /// smallest, 8, when even it does not fit: [`HopSketches::budget_bytes`] then says what
    /// it needs). A retained code takes one byte when the compression's codes fit in 8 bits,
    /// two beyond.
    pub fn new(k: usize, compression: LogCompressor, space_budget: u32) -> HopSketches {
        let max_code = compression.max_code();
        let kk = kll_k_for(
            u64::from(space_budget) / k.max(1) as u64,
            item_bytes(max_code),
        );
        HopSketches {
            sketches: Sketches::new(k, kk, max_code),
            compression,
            at_top: vec![0; k],
            unit: 1.0,
        }
    }

    /// The same sketches answering in units of `unit` per decompressed code (a utilization's
    /// codes are of `512 U`: its values read as `U`).
    pub fn in_units(mut self, unit: f64) -> HopSketches {
        self.unit = unit;
        self
    }

    /// An unbounded recorder (large sketches), for comparisons.
    pub fn large(k: usize, compression: LogCompressor) -> HopSketches {
        HopSketches {
            sketches: Sketches::new(k, u16::MAX, compression.max_code()),
            compression,
            at_top: vec![0; k],
            unit: 1.0,
        }
    }

    /// The KLL parameter of the sketches.
    pub fn kll_k(&self) -> u16 {
        each_width!(&self.sketches, v, T => v.first().map_or(0, KllSketch::<T>::k))
    }

    /// Bytes one retained sample takes (one or two: see [`HopSketches::new`]).
    pub fn item_bytes(&self) -> u32 {
        each_width!(&self.sketches, _v, T => T::BYTES)
    }

    /// Hops the sketches are for.
    fn hops(&self) -> usize {
        each_width!(&self.sketches, v, _T => v.len())
    }

    /// Bytes of retained items the sketches may hold at most, all hops, up to
    /// [`SIZED_FOR_SAMPLES`] samples per hop.
    pub fn budget_bytes(&self) -> u64 {
        self.hops() as u64
            * kll_items_bound(self.kll_k(), SIZED_FOR_SAMPLES)
            * u64::from(self.item_bytes())
    }

    /// Bytes the sketches take now (retained items and the sketches' fixed parts).
    pub fn memory_bytes(&self) -> usize {
        let fixed = each_width!(&self.sketches, v, T => {
            v.capacity() * std::mem::size_of::<KllSketch<T>>()
        });
        fixed + self.at_top.capacity() * 8 + self.retained() * self.item_bytes() as usize
    }

    /// Adds a sample written by hop `hop` (1-based). A code beyond the compression's largest
    /// is kept as the largest (it reads back as the same value).
    #[inline]
    pub fn add(&mut self, hop: usize, code: u32) {
        let top = self.compression.max_code();
        let code = code.min(top);
        let added = each_width!(&mut self.sketches, v, T => {
            v.get_mut(hop.wrapping_sub(1)).map(|s| s.update(T::of(code))).is_some()
        });
        if added && code == top {
            self.at_top[hop - 1] += 1;
        }
    }

    /// Samples recorded for hop `hop`.
    pub fn samples(&self, hop: usize) -> u64 {
        each_width!(&self.sketches, v, T => {
            v.get(hop.wrapping_sub(1)).map_or(0, KllSketch::<T>::n)
        })
    }

    /// The sketches' normalized single-sided rank error at 99% confidence (the library's
    /// published fit for KLL): a quantile answered is the true quantile of a rank within this
    /// much of the one asked.
    pub fn rank_error(&self) -> f64 {
        each_width!(&self.sketches, v, T => {
            v.first().map_or(0.0, KllSketch::<T>::normalized_rank_error)
        })
    }

    /// Items the sketches keep in all (each takes [`HopSketches::item_bytes`]).
    pub fn retained(&self) -> usize {
        each_width!(&self.sketches, v, T => v.iter().map(KllSketch::<T>::num_retained).sum())
    }

    /// The `q`-quantile (0 to 1) of hop `hop`'s values, decompressed.
    pub fn quantile(&self, hop: usize, q: f64) -> Option<f64> {
        let code: u32 = each_width!(&self.sketches, v, _T => {
            v.get(hop.wrapping_sub(1))?
                .quantile(q.clamp(0.0, 1.0), SearchCriteria::Inclusive)
                .ok()??
                .into()
        });
        Some(self.compression.decompress(code) * self.unit)
    }

    /// The largest value a code carries: a value above it is carried as it, so a quantile
    /// at this value says "at least".
    pub fn top_value(&self) -> f64 {
        self.compression.decompress(self.compression.max_code()) * self.unit
    }

    /// The share of hop `hop`'s samples carried as the largest code ([`HopSketches::top_value`]
    /// or more: the code saturated); 0 without samples.
    pub fn share_at_top(&self, hop: usize) -> f64 {
        let at_top = self.at_top.get(hop.wrapping_sub(1)).copied().unwrap_or(0);
        match self.samples(hop) {
            0 => 0.0,
            n => at_top as f64 / n as f64,
        }
    }

    /// Values of hop `hop` seen in at least `min_share` of its samples, with their shares,
    /// most frequent first.
    pub fn frequent(&self, hop: usize, min_share: f64) -> Vec<(f64, f64)> {
        // The share of each code from the lowest to the highest seen.
        let pmf: Option<(u32, Vec<f64>)> = each_width!(&self.sketches, v, T => {
            v.get(hop.wrapping_sub(1)).filter(|s| !s.is_empty()).and_then(|s| {
                let (lo, hi): (u32, u32) = ((*s.min_item()?).into(), (*s.max_item()?).into());
                let splits: Vec<T> = (lo + 1..=hi).map(T::of).collect();
                let pmf = s.pmf(&splits, SearchCriteria::Exclusive).ok()??;
                Some((lo, pmf))
            })
        });
        let Some((lo, pmf)) = pmf else {
            return Vec::new();
        };
        let mut out: Vec<(f64, f64)> = pmf
            .iter()
            .enumerate()
            .filter(|(_, p)| **p >= min_share && **p > 0.0)
            .map(|(i, p)| (self.compression.decompress(lo + i as u32) * self.unit, *p))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    /// Distinct values and entropy are not answered: see [`NotApproximable`].
    pub fn distinct_values(&self, _hop: usize) -> Result<u64, NotApproximable> {
        Err(NotApproximable("the number of distinct values"))
    }

    /// See [`HopSketches::distinct_values`].
    pub fn entropy(&self, _hop: usize) -> Result<f64, NotApproximable> {
        Err(NotApproximable("the entropy of the value distribution"))
    }
}

/// Everything the sink keeps for one flow of `k` hops under a plan, owning its data: the
/// plan and the candidate space are passed to every call that reads digests (always the
/// same ones for a record).
#[derive(Debug, Clone)]
pub struct FlowRecord {
    k: usize,
    /// Per query of the plan, what it keeps.
    slots: Vec<Slot>,
    packets: u64,
}

/// What a flow keeps for one query: one place per query, so that recording reads one
/// list whatever the query's kind.
#[derive(Debug, Clone)]
enum Slot {
    /// A static per-flow query's path decoder.
    Path(PathState),
    /// A dynamic per-flow query's sketches, and the query's sampling slice (which hop's
    /// sample a packet carries).
    Sketches(HopSketches, Slice),
    /// A per-packet query's running statistics.
    Aggregate(Aggregate),
}

/// Running statistics of a per-packet query over a flow's packets.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Aggregate {
    /// Packets that carried the query.
    pub count: u64,
    /// The latest value.
    pub last: f64,
    /// The mean value.
    pub mean: f64,
    /// The largest value.
    pub max: f64,
    /// Packets whose value was at the code's largest (a lower bound: it was that or more;
    /// see [`crate::pint::plan::CompiledQuery::at_top`]).
    pub at_top: u64,
    /// Values by power of two: (e, packets whose value v has 2^e <= v < 2^(e+1)), e from
    /// -64 to 63 (values at or below zero count in e = -128), sorted by e: at most 129
    /// entries, usually a handful.
    pub histogram: Vec<(i8, u32)>,
}

impl Aggregate {
    /// Adds one packet's value.
    pub fn add(&mut self, v: f64) {
        self.count += 1;
        self.last = v;
        self.mean += (v - self.mean) / self.count as f64;
        self.max = if self.count == 1 { v } else { self.max.max(v) };
        let e = if v > 0.0 {
            v.log2().floor().clamp(-64.0, 63.0) as i8
        } else {
            i8::MIN
        };
        match self.histogram.binary_search_by_key(&e, |b| b.0) {
            Ok(i) => self.histogram[i].1 = self.histogram[i].1.saturating_add(1),
            Err(i) => self.histogram.insert(i, (e, 1)),
        }
    }
}

impl Slot {
    /// What a flow of `k` hops keeps for `query`.
    fn new(query: &CompiledQuery, k: usize) -> Slot {
        match &query.kind {
            QueryKind::StaticPerFlow { .. } => Slot::Path(PathState::new(k)),
            QueryKind::DynamicPerFlow {
                compression,
                space_budget,
                sample,
                ..
            } => Slot::Sketches(
                HopSketches::new(k, compression.clone(), *space_budget)
                    .in_units(carried_unit(query.value)),
                *sample,
            ),
            QueryKind::PerPacket { .. } => Slot::Aggregate(Aggregate::default()),
        }
    }
}

/// A path query's field to its decoder. Out of line, as is [`read_aggregate`]: most digests
/// need neither, and the recording loop then keeps its values in registers.
#[inline(never)]
fn read_path(d: &mut PathState, cx: PathContext<'_>, width: u32, pid: u32, field: u64) {
    let bits = cx.coding.bits;
    let fields = (0..cx.coding.instances).map(move |n| get_bits(field, width, n * bits, bits));
    d.check(cx, pid, fields);
}

/// A per-packet query's field to its running statistics.
#[inline(never)]
fn read_aggregate(a: &mut Aggregate, query: &CompiledQuery, field: u64, m: u64, k: usize) {
    if let Reading::Aggregate(v) = query.decode_word(field, m, k) {
        a.add(v);
        a.at_top += u64::from(query.at_top(field));
    }
}

/// Port numbers a static port query's hops are decoded among: every port a switch may
/// declare ([`crate::protocol::MAX_PORTS`]).
static PORT_CANDIDATES: [u32; crate::protocol::MAX_PORTS] = {
    let mut p = [0u32; crate::protocol::MAX_PORTS];
    let mut i = 0;
    while i < p.len() {
        p[i] = i as u32;
        i += 1;
    }
    p
};

/// Where static query `query`'s hop values are decoded among: switch IDs in `switches`
/// (a topology, or the switches known), port numbers among every port a switch may have.
pub fn query_space<'a>(query: &CompiledQuery, switches: Space<'a>) -> Space<'a> {
    match query.value {
        ValueKind::SwitchId => switches,
        _ => Space::Ids(&PORT_CANDIDATES),
    }
}

/// The path context of static query `q` of `plan`, its hops' values among `switches` for
/// a switch ID query (ports among port numbers: [`query_space`]).
pub fn path_context<'a>(plan: &'a Plan, switches: Space<'a>, q: usize) -> Option<PathContext<'a>> {
    let query = plan.queries.get(q)?;
    match &query.kind {
        QueryKind::StaticPerFlow { coding } => Some(PathContext {
            coding,
            space: query_space(query, switches),
        }),
        _ => None,
    }
}

impl FlowRecord {
    /// A record for a flow of `k` hops (1 to 255) under `plan`.
    pub fn new(plan: &Plan, k: usize) -> FlowRecord {
        FlowRecord {
            k,
            slots: plan.queries.iter().map(|q| Slot::new(q, k)).collect(),
            packets: 0,
        }
    }

    /// Path length.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Fixes hop `hop` of every switch ID path query to `switch_id` (a hop the sink knows:
    /// the reporting switch as the last, the source's edge switch as the first). Port
    /// queries are not pinned: a digest record does carry the last hop's ports, but they
    /// are left to decode as the other hops' do.
    pub fn pin(&mut self, plan: &Plan, space: Space<'_>, hop: usize, switch_id: u32) {
        for (q, slot) in self.slots.iter_mut().enumerate() {
            let is_switch = plan
                .queries
                .get(q)
                .is_some_and(|query| query.value == ValueKind::SwitchId);
            if let (true, Slot::Path(p), Some(cx)) = (is_switch, slot, path_context(plan, space, q))
            {
                p.pin(cx, hop, switch_id);
            }
        }
    }

    /// Records one packet's digest.
    pub fn record(&mut self, plan: &Plan, space: Space<'_>, pid: u32, digest: u64) {
        let _ = self.record_into(plan, space, pid, digest, None);
    }

    /// Records one packet's digest and appends its dynamic queries' samples to `samples`
    /// as (query, hop, code), for per-switch summaries once the hop's switch is known.
    /// Returns whether a path query's state read the digest: only then can a path have
    /// become decoded or conflicting (a decoded path is checked one digest in eight).
    #[inline(always)]
    pub fn record_samples(
        &mut self,
        plan: &Plan,
        space: Space<'_>,
        pid: u32,
        digest: u64,
        samples: &mut Vec<(usize, usize, u32)>,
    ) -> bool {
        self.record_into(plan, space, pid, digest, Some(samples))
    }

    #[inline(always)]
    fn record_into(
        &mut self,
        plan: &Plan,
        space: Space<'_>,
        pid: u32,
        digest: u64,
        mut samples: Option<&mut Vec<(usize, usize, u32)>>,
    ) -> bool {
        let mut path_read = false;
        self.packets += 1;
        // The plan's readings, taken field by field: a sample's value stays a code (the
        // sketches keep codes) and a path's fields go to its decoder as they are.
        let m = tape::packet_word(pid);
        let set = plan.select_word(m);
        for f in &set.fields {
            let q = usize::from(f.query);
            let field = (digest >> f.shift) & f.mask;
            match self.slots.get_mut(q) {
                Some(Slot::Sketches(s, sample)) => {
                    let hop = tape::sample_writer(m, self.k, *sample);
                    let code = field as u32;
                    s.add(hop, code);
                    if let Some(out) = samples.as_deref_mut() {
                        out.push((q, hop, code));
                    }
                }
                // Once a path is decoded, one digest in eight still checks it (a route
                // change shows as a conflict within a few packets); the others would only
                // confirm it.
                Some(Slot::Path(d))
                    if !d.is_decoded() || self.packets.is_multiple_of(PATH_CHECK_EVERY) =>
                {
                    if let Some(query) = plan.queries.get(q)
                        && let QueryKind::StaticPerFlow { coding } = &query.kind
                    {
                        let space = query_space(query, space);
                        read_path(d, PathContext { coding, space }, query.width, pid, field);
                        path_read = true;
                    }
                }
                Some(Slot::Aggregate(a)) => {
                    if let Some(query) = plan.queries.get(q) {
                        read_aggregate(a, query, field, m, self.k);
                    }
                }
                _ => {}
            }
        }
        path_read
    }

    /// Packets recorded.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The path state of static query `q`.
    pub fn path(&self, q: usize) -> Option<&PathState> {
        match self.slots.get(q)? {
            Slot::Path(p) => Some(p),
            _ => None,
        }
    }

    /// The sketches of dynamic query `q`.
    pub fn sketches(&self, q: usize) -> Option<&HopSketches> {
        match self.slots.get(q)? {
            Slot::Sketches(s, _) => Some(s),
            _ => None,
        }
    }

    /// The running statistics of per-packet query `q`.
    pub fn aggregate(&self, q: usize) -> Option<&Aggregate> {
        match self.slots.get(q)? {
            Slot::Aggregate(a) => Some(a),
            _ => None,
        }
    }

    /// Starts every path query's decoding over (pins gone), keeping the dynamic queries'
    /// sketches and the per-packet statistics: for a path that never decoded, whose
    /// digests contradicted a pin or a candidate set, while the hops' values stay the
    /// flow's.
    pub fn restart_paths(&mut self) {
        let k = self.k;
        for slot in &mut self.slots {
            if let Slot::Path(p) = slot {
                *p = PathState::new(k);
            }
        }
    }

    /// Starts the path queries' decoding over from `fresh`'s: a new record of the same plan
    /// and path length, pinned as this one is to be (what [`FlowRecord::restart_paths`] and
    /// then [`FlowRecord::pin`] give, without working the pins out again).
    pub fn restart_paths_from(&mut self, fresh: &FlowRecord) {
        debug_assert_eq!(self.k, fresh.k);
        for (slot, from) in self.slots.iter_mut().zip(&fresh.slots) {
            if let (Slot::Path(p), Slot::Path(q)) = (slot, from) {
                p.clone_from(q);
            }
        }
    }

    /// Starts the dynamic queries' sketches and the per-packet statistics over under `plan`
    /// (the record's), keeping the path queries' state: the route changed, and the hops'
    /// values so far were partly the old route's.
    pub fn restart_values(&mut self, plan: &Plan) {
        let k = self.k;
        for (slot, query) in self.slots.iter_mut().zip(&plan.queries) {
            if !matches!(slot, Slot::Path(_)) {
                *slot = Slot::new(query, k);
            }
        }
    }

    /// Whether some path query's digests contradict each other (the route changed): the
    /// record should start over.
    pub fn conflict(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Path(p) if p.conflict()))
    }

    /// Bytes the record takes, itself and its heap (sketches counted at their item size per
    /// retained item plus their fixed part).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<FlowRecord>()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self
                .slots
                .iter()
                .map(|s| match s {
                    Slot::Path(p) => p.heap_bytes(),
                    Slot::Sketches(s, _) => s.memory_bytes(),
                    Slot::Aggregate(a) => a.histogram.capacity() * 8,
                })
                .sum::<usize>()
    }
}

/// A [`FlowRecord`] with its plan and candidate space at hand (for tests and tools that
/// follow a few flows).
#[derive(Debug, Clone)]
pub struct FlowRecorder<'a> {
    plan: &'a Plan,
    space: Space<'a>,
    record: FlowRecord,
}

impl<'a> FlowRecorder<'a> {
    /// A recorder for a flow of `k` hops whose last hop is `sink_switch`; `space` is where
    /// path candidates come from.
    pub fn new(
        plan: &'a Plan,
        k: usize,
        space: Space<'a>,
        sink_switch: Option<u32>,
    ) -> FlowRecorder<'a> {
        let mut record = FlowRecord::new(plan, k);
        if let Some(s) = sink_switch {
            record.pin(plan, space, k, s);
        }
        FlowRecorder {
            plan,
            space,
            record,
        }
    }

    /// Records one packet's digest.
    pub fn record(&mut self, pid: u32, digest: u64) {
        self.record.record(self.plan, self.space, pid, digest);
    }

    /// Packets recorded.
    pub fn packets(&self) -> u64 {
        self.record.packets()
    }

    /// The path decoding of static query `q`.
    pub fn path(&self, q: usize) -> Option<PathView<'_, 'a>> {
        Some(PathView {
            cx: path_context(self.plan, self.space, q)?,
            state: self.record.path(q)?,
        })
    }

    /// The sketches of dynamic query `q`.
    pub fn sketches(&self, q: usize) -> Option<&HopSketches> {
        self.record.sketches(q)
    }

    /// The running statistics of per-packet query `q`.
    pub fn aggregate(&self, q: usize) -> Option<&Aggregate> {
        self.record.aggregate(q)
    }
}

#[cfg(test)]
mod tests;

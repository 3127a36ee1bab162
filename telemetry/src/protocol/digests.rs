//! Digest batches: the last hop's per-packet reports, compact on the wire. A connection
//! keeps a table of flow slots: a batch defines the slots it needs that earlier batches of
//! the connection have not (a flow's key, ports and path length, 16 bytes), and each digest
//! names its flow by slot, so a flow's entry crosses once per connection rather than once
//! per batch. Per digest: the slot, the packet ID, the digest and a time delta (about 9
//! bytes with a 16-bit digest).
//!
//! ```text
//! u16   worker
//! u32   digests N (1 .. the hello's max_digests)
//! u32   flow definitions F (0 .. N)
//! u8    plans P (1 .. 4)
//! u64   base time, Unix ns
//! P x   u32 plan version (each declared by the hello or a plan frame)
//! F x   varint slot (< FLOW_SLOTS), 13-byte flow key, u8 ingress port, u8 egress port,
//!       u8 path length (1 .. MAX_PATH_LENGTH = 128)
//! N x   varint flow slot (< FLOW_SLOTS)
//!       u8 plan index (< P), present only when P > 1
//!       u32 packet ID
//!       the digest: that plan's digest bytes, big-endian
//!       zigzag varint: ns since the previous digest (the first: since the base time)
//! ```
//!
//! The slots are empty at the hello and after a sequence gap; a batch's definitions apply
//! before its digests are read. A digest whose slot is empty is left out and counted
//! ([`DigestBatch::unknown_flow`]), never attributed to another flow.

use rustc_hash::FxHashMap;

use crate::flowradar::FlowKey;
use crate::wire::bytes::{Reader, put_varint, write_varint};

use super::{Hello, MAX_BATCH, ProtocolError};

/// Most plans one batch refers to.
pub const MAX_PLANS_PER_BATCH: usize = 4;

/// Flow slots of a connection: a slot number is below this.
pub const FLOW_SLOTS: usize = 1 << 16;

/// The most bytes one digest takes in a batch: a slot (three bytes), a plan index, the
/// packet ID, eight digest bytes and a ten-byte time delta.
const MAX_DIGEST_BYTES_ON_WIRE: usize = 3 + 1 + 4 + 8 + 10;

/// One packet's report as it travels to the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireDigest {
    /// The flow.
    pub key: FlowKey,
    /// The port the packet arrived on at the last hop.
    pub ingress_port: u8,
    /// The edge port it left by.
    pub egress_port: u8,
    /// The packet ID.
    pub pid: u32,
    /// The path length.
    pub hops: u8,
    /// The version of the plan that encoded it.
    pub plan_version: u32,
    /// The digest, right-aligned.
    pub digest: u64,
    /// When the packet left the last hop, Unix ns.
    pub time_ns: u64,
}

/// A decoded batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestBatch {
    /// The worker that recorded the digests.
    pub worker: u16,
    /// The digests, in the order recorded.
    pub digests: Vec<WireDigest>,
    /// With [`DigestOrder::ByFlow`], the digests grouped by flow (one flow: in the order
    /// recorded, one run); empty when the session keeps the recorded order.
    pub by_flow: FlowRuns,
    /// Digests of the batch left out because their flow slot was empty on this connection
    /// (the batch was encoded before the switch learnt of a reconnection or a lost frame):
    /// they cannot be attributed to a flow.
    pub unknown_flow: u32,
}

/// Digests grouped by flow: an order to take them in and where each flow's run ends in it.
/// Every digest of a run has one flow entry (flow key, ports, path length).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowRuns {
    /// The digests' indices, run by run; empty: the digests in the order they are.
    pub order: Vec<u32>,
    /// The end of each run (increasing, no run empty), as positions in `order` (or in the
    /// digests, when `order` is empty); empty: the runs are not known.
    pub ends: Vec<u32>,
}

impl FlowRuns {
    /// Whether neither an order nor runs are given.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty() && self.ends.is_empty()
    }

    /// Empties both lists, keeping their memory.
    pub fn clear(&mut self) {
        self.order.clear();
        self.ends.clear();
    }

    /// Calls `f` with each run of one flow's digests of `digests` (which these runs are
    /// of), as indices into it, in order. Where the runs are not known, a run is the
    /// digests in a row that share a flow key. `scratch` holds the indices when no order
    /// is given.
    pub fn for_each_run(
        &self,
        digests: &[WireDigest],
        scratch: &mut Vec<u32>,
        mut f: impl FnMut(&[u32]),
    ) {
        let order: &[u32] = if self.order.is_empty() {
            scratch.clear();
            scratch.extend(0..digests.len() as u32);
            scratch
        } else {
            &self.order
        };
        let mut start = 0;
        for &end in &self.ends {
            let end = (end as usize).min(order.len());
            if end > start {
                f(&order[start..end]);
                start = end;
            }
        }
        // Runs by flow key, for digests no known run covers.
        let key_of = |j: u32| digests.get(j as usize).map(|d| d.key.words());
        let mut rest = &order[start..];
        while let Some(&first) = rest.first() {
            let words = key_of(first);
            let len = rest
                .iter()
                .position(|&j| key_of(j) != words)
                .unwrap_or(rest.len());
            let (run, tail) = rest.split_at(len);
            f(run);
            rest = tail;
        }
    }
}

/// The order a session gives a batch's digests in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DigestOrder {
    /// As recorded.
    #[default]
    Recorded,
    /// As recorded, and also grouped by flow entry (in the order they first appear), each flow's digests as recorded ([`DigestBatch::by_flow`]): a consumer that
    /// keeps state per flow then finds each flow once per batch rather than once per digest.
    ByFlow,
}

/// What grouping by flow reuses from batch to batch (no allocation per batch).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grouping {
    /// Each digest's group (its flow slot's, numbered by first appearance in the batch).
    flow_of: Vec<u32>,
    /// Per group, its digests, then where its next digest goes.
    next: Vec<u32>,
    /// Per flow slot, the batch that last saw it and its group there.
    slot_group: Vec<(u32, u32)>,
    /// The batch's number.
    stamp: u32,
}

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The digests batch payload for `digests` from `worker`, whose plans have the digest
/// lengths `digest_bytes(version)` gives, defining every flow slot it uses from slot 0 up
/// (it stands on its own, and overwrites whatever those slots held: do not mix it with a
/// [`DigestEncoder`] on one connection). At most [`MAX_PLANS_PER_BATCH`] plans and
/// [`MAX_BATCH`] digests (callers split larger sets). A sender of many batches keeps a
/// [`DigestEncoder`] instead.
pub fn encode_digests(
    worker: u16,
    digests: &[WireDigest],
    digest_bytes: impl Fn(u32) -> u8,
) -> Vec<u8> {
    DigestEncoder::default().encode(worker, digests, digest_bytes)
}

/// A flow entry (the flow and the ports and hop count its digests share) as one integer
/// whose big-endian bytes are the entry's 16 bytes on the wire: the key's 13, the ingress
/// port, the egress port, the hop count. One word pair to hash and compare, and one store to
/// write.
fn flow_entry(d: &WireDigest) -> u128 {
    let k = &d.key;
    (u128::from(k.src) << 96)
        | (u128::from(k.dst) << 64)
        | (u128::from(k.src_port) << 48)
        | (u128::from(k.dst_port) << 32)
        | (u128::from(k.protocol) << 24)
        | (u128::from(d.ingress_port) << 16)
        | (u128::from(d.egress_port) << 8)
        | u128::from(d.hops)
}

/// Encodes a connection's digest batches. It keeps the flow slots it has defined (the
/// sink keeps the same table for the connection), so a flow's 16-byte entry goes on the
/// wire once, not once per batch: with many flows of a few packets per batch that is the
/// larger part of a batch. Whoever sends the batches calls [`DigestEncoder::reset`] when
/// the sink may have missed one of them (a batch not sent, a new connection).
#[derive(Debug, Clone)]
pub struct DigestEncoder {
    /// Each defined flow entry's slot.
    slots: FxHashMap<u128, u32>,
    /// Per slot in use: its flow entry.
    table: Vec<u128>,
    /// Per slot in use: the number of the batch that last used it (a word apart from the
    /// entries: a batch stamps every slot it uses, and looks at the entries only to reuse
    /// one).
    stamps: Vec<u32>,
    /// Slots this encoder may use (at most [`FLOW_SLOTS`]).
    capacity: usize,
    /// The next slot to consider for reuse once all are in use.
    hand: usize,
    /// The number of the batch being encoded (never 0 in the table's stamps once used).
    batch: u32,
    /// This batch's definitions: slot and flow entry.
    defs: Vec<(u32, u128)>,
    /// Each digest's slot, from the first pass.
    slot_of: Vec<u32>,
    plans: Vec<u32>,
    lens: Vec<u8>,
}

impl Default for DigestEncoder {
    fn default() -> Self {
        DigestEncoder::with_slots(FLOW_SLOTS)
    }
}

impl DigestEncoder {
    /// An encoder that uses at most `slots` flow slots (1 ..= [`FLOW_SLOTS`]); a batch may
    /// then hold at most that many digests. Fewer slots mean more redefinitions.
    pub fn with_slots(slots: usize) -> DigestEncoder {
        assert!((1..=FLOW_SLOTS).contains(&slots));
        DigestEncoder {
            slots: FxHashMap::default(),
            table: Vec::new(),
            stamps: Vec::new(),
            capacity: slots,
            hand: 0,
            batch: 0,
            defs: Vec::new(),
            slot_of: Vec::new(),
            plans: Vec::new(),
            lens: Vec::new(),
        }
    }

    /// Forgets every slot: the next batch defines each flow it refers to, as on a new
    /// connection. Call it when a batch this encoder made did not reach the sink (or may
    /// not have), and whenever the batches start going to a new connection.
    pub fn reset(&mut self) {
        self.slots.clear();
        self.table.clear();
        self.stamps.clear();
        self.hand = 0;
    }

    /// Flow slots defined.
    pub fn slots_in_use(&self) -> usize {
        self.table.len()
    }

    /// The batch payload for `digests` from `worker` (at most [`MAX_BATCH`] digests and
    /// the encoder's slots, at most [`MAX_PLANS_PER_BATCH`] plans), whose plans have the
    /// digest lengths `digest_bytes(version)` gives. It refers to the slots earlier batches
    /// of this encoder (since its last reset) defined.
    pub fn encode(
        &mut self,
        worker: u16,
        digests: &[WireDigest],
        digest_bytes: impl Fn(u32) -> u8,
    ) -> Vec<u8> {
        assert!(!digests.is_empty() && digests.len() <= MAX_BATCH as usize);
        assert!(
            digests.len() <= self.capacity,
            "more digests than flow slots"
        );
        self.batch = self.batch.wrapping_add(1);
        if self.batch == 0 {
            // The stamps wrapped: none may look like this batch's.
            self.stamps.iter_mut().for_each(|t| *t = 0);
            self.batch = 1;
        }
        let DigestEncoder {
            slots,
            table,
            stamps,
            capacity,
            hand,
            batch,
            defs,
            slot_of,
            plans,
            lens,
        } = self;
        let batch = *batch;
        defs.clear();
        plans.clear();
        // Room for every digest to be a new flow, which also keeps the table sparse (a
        // lookup then seldom meets another entry on its way).
        slots.reserve(digests.len());
        let mut last_plan = None;
        // Each digest's slot written by index into a slice held in registers (a push would
        // reload and store the length around every stamp, which may alias it).
        slot_of.clear();
        slot_of.resize(digests.len(), 0);
        let slot_out = &mut slot_of[..];
        for (d, out) in digests.iter().zip(slot_out.iter_mut()) {
            if last_plan != Some(d.plan_version) {
                last_plan = Some(d.plan_version);
                if !plans.contains(&d.plan_version) {
                    plans.push(d.plan_version);
                }
            }
            let k = flow_entry(d);
            let s = match slots.get(&k) {
                Some(&s) => s,
                None => {
                    let s = assign(slots, table, stamps, (*capacity, hand), batch, k);
                    defs.push((s, k));
                    s
                }
            };
            if let Some(t) = stamps.get_mut(s as usize) {
                *t = batch;
            }
            *out = s;
        }
        assert!(plans.len() <= MAX_PLANS_PER_BATCH);
        lens.clear();
        lens.extend(plans.iter().map(|v| digest_bytes(*v)));
        let base = digests[0].time_ns;
        let head = 22 + plans.len() * 4 + defs.len() * 19;
        let mut out = Vec::with_capacity(head + digests.len() * MAX_DIGEST_BYTES_ON_WIRE + 8);
        out.extend_from_slice(&worker.to_be_bytes());
        out.extend_from_slice(&(digests.len() as u32).to_be_bytes());
        // At most one definition per digest: fits, as the digests do.
        out.extend_from_slice(&(defs.len() as u32).to_be_bytes());
        out.push(plans.len() as u8);
        out.extend_from_slice(&base.to_be_bytes());
        for v in plans.iter() {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for (s, entry) in defs.iter() {
            put_varint(&mut out, u64::from(*s));
            out.extend_from_slice(&entry.to_be_bytes());
        }
        // The digests go into a buffer with room for the longest each can be, fixed-width
        // stores of eight bytes that keep fewer (the next field overwrites the rest), and
        // the buffer is cut to what was written.
        let mut at = out.len();
        out.resize(at + digests.len() * MAX_DIGEST_BYTES_ON_WIRE + 8, 0);
        let buf = &mut out[..];
        let mut prev = base;
        let several_plans = plans.len() > 1;
        for (d, &s) in digests.iter().zip(slot_of.iter()) {
            at = write_varint(buf, at, u64::from(s));
            let p = if several_plans {
                let p = plans
                    .iter()
                    .position(|v| *v == d.plan_version)
                    .expect("listed");
                buf[at] = p as u8;
                at += 1;
                p
            } else {
                0
            };
            buf[at..at + 4].copy_from_slice(&d.pid.to_be_bytes());
            at += 4;
            // The digest's low `n` bytes, big-endian.
            let n = usize::from(lens[p]).min(8);
            if n > 0 {
                buf[at..at + 8].copy_from_slice(&(d.digest << (64 - 8 * n as u32)).to_be_bytes());
                at += n;
            }
            at = write_varint(buf, at, zigzag(d.time_ns.wrapping_sub(prev) as i64));
            prev = d.time_ns;
        }
        out.truncate(at);
        out
    }
}

/// A slot for `entry`, which has none, in an encoder's table (`slots`, `table`, `stamps`;
/// `capacity` slots at most, `hand` the next to consider for reuse), while batch `batch` is
/// encoded: a new one while there are, else the next one round the table that this batch
/// does not use (there is one: the batch has fewer flows than the table has slots).
#[cold]
fn assign(
    slots: &mut FxHashMap<u128, u32>,
    table: &mut Vec<u128>,
    stamps: &mut Vec<u32>,
    (capacity, hand): (usize, &mut usize),
    batch: u32,
    entry: u128,
) -> u32 {
    let s = if table.len() < capacity {
        table.push(entry);
        stamps.push(batch);
        table.len() - 1
    } else {
        let s = loop {
            let s = *hand;
            *hand = if s + 1 == capacity { 0 } else { s + 1 };
            if stamps[s] != batch {
                break s;
            }
        };
        let old = std::mem::replace(&mut table[s], entry);
        slots.remove(&old);
        stamps[s] = batch;
        s
    };
    slots.insert(entry, s as u32);
    s as u32
}

/// A flow slot's entry as the sink holds it: the flow key, ingress port, egress port and
/// path length (0: the slot is empty).
type FlowEntry = (FlowKey, u8, u8, u8);

const EMPTY_SLOT: FlowEntry = (
    FlowKey {
        src: 0,
        dst: 0,
        src_port: 0,
        dst_port: 0,
        protocol: 0,
    },
    0,
    0,
    0,
);

/// A connection's flow slots as its batches defined them (empty at the hello, emptied at
/// a sequence gap: a slot defined in a frame that never came must not be used).
#[derive(Debug, Clone, Default)]
pub(crate) struct FlowTable {
    entries: Vec<FlowEntry>,
    /// A batch's definitions (slot, entry), checked before any is applied; once applied,
    /// what each replaced.
    defs: Vec<(usize, FlowEntry)>,
}

impl FlowTable {
    /// Empties every slot.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

impl DigestBatch {
    /// Decodes a batch payload against the connection's flow slots `table` (which its
    /// definitions update, once the whole batch has checked out).
    pub(crate) fn decode(
        payload: &[u8],
        hello: &Hello,
        declared: &[(u32, u8)],
        table: &mut FlowTable,
        (mut digests, mut by_flow): (Vec<WireDigest>, FlowRuns),
        grouping: Option<&mut Grouping>,
    ) -> Result<DigestBatch, ProtocolError> {
        let mut r = Reader::new(payload);
        let worker = r.u16()?;
        if usize::from(worker) >= hello.table_seeds.len() {
            return Err(ProtocolError::BadField("worker"));
        }
        let n = r.u32()?;
        if n == 0 || n > hello.max_digests.min(MAX_BATCH) {
            return Err(ProtocolError::OverLimit("digests in a batch"));
        }
        let ndefs = r.u32()? as usize;
        if ndefs > n as usize {
            return Err(ProtocolError::BadField("flow definitions in a batch"));
        }
        let nplans = usize::from(r.u8()?);
        if nplans == 0 || nplans > MAX_PLANS_PER_BATCH {
            return Err(ProtocolError::BadField("plans in a batch"));
        }
        let base = r.u64()?;
        let mut plans = [(0u32, 0u8); MAX_PLANS_PER_BATCH];
        for p in plans.iter_mut().take(nplans) {
            let v = r.u32()?;
            let len = declared
                .iter()
                .find(|(d, _)| *d == v)
                .map(|(_, l)| *l)
                .ok_or(ProtocolError::UnknownPlan(v))?;
            *p = (v, len);
        }
        // Every definition takes at least 17 bytes and every digest at least 7: check the
        // batch can hold what it announces before allocating for it.
        if r.remaining() < ndefs * 17 + n as usize * 7 {
            return Err(ProtocolError::Truncated);
        }
        let nports = hello.ports.len();
        let FlowTable { entries, defs } = table;
        defs.clear();
        for _ in 0..ndefs {
            let slot = usize::try_from(r.varint()?).unwrap_or(usize::MAX);
            if slot >= FLOW_SLOTS {
                return Err(ProtocolError::BadField("flow slot"));
            }
            let key = FlowKey::from_bytes(r.take(13)?.try_into().expect("13 bytes"));
            let (i, e, hops) = (r.u8()?, r.u8()?, r.u8()?);
            if usize::from(i) >= nports || usize::from(e) >= nports {
                return Err(ProtocolError::BadField("port"));
            }
            if hops == 0 || hops > crate::packet_id::MAX_PATH_LENGTH {
                return Err(ProtocolError::BadField("path length"));
            }
            defs.push((slot, (key, i, e, hops)));
        }
        // The digests are checked as they are read, and a bad one refuses the whole batch,
        // whose definitions must then not stay: each swaps places with the entry it
        // replaces, and swaps back on a refusal.
        if let Some(top) = defs.iter().map(|d| d.0).max()
            && top >= entries.len()
        {
            entries.resize(top + 1, EMPTY_SLOT);
        }
        for (slot, entry) in defs.iter_mut() {
            std::mem::swap(&mut entries[*slot], entry);
        }
        let lists = Lists {
            flows: entries,
            plans: &plans[..nplans],
            base,
        };
        by_flow.clear();
        let read = match grouping {
            None => read_digests(&mut r, n, &lists, &mut digests, None),
            Some(g) => {
                let read = read_digests(&mut r, n, &lists, &mut digests, Some(&mut *g));
                if g.next.len() > 1 {
                    g.list(&mut by_flow);
                } else if !digests.is_empty() {
                    // One flow: its run is every digest, in the order recorded.
                    by_flow.ends.push(digests.len() as u32);
                }
                read
            }
        };
        let unknown_flow = match read.and_then(|u| match r.remaining() {
            0 => Ok(u),
            _ => Err(ProtocolError::TrailingBytes),
        }) {
            Ok(u) => u,
            Err(e) => {
                for (slot, old) in defs.iter_mut().rev() {
                    std::mem::swap(&mut entries[*slot], old);
                }
                return Err(e);
            }
        };
        Ok(DigestBatch {
            worker,
            digests,
            by_flow,
            unknown_flow,
        })
    }
}

impl Grouping {
    /// Starts a batch over a table of `slots` flow slots.
    fn start(&mut self, slots: usize) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.slot_group.clear();
            self.stamp = 1;
        }
        if self.slot_group.len() < slots {
            self.slot_group.resize(slots, (0, 0));
        }
        self.flow_of.clear();
        self.next.clear();
    }

    /// Counts a digest of flow slot `slot` (below the table's slots) into its group.
    #[inline(always)]
    fn add(&mut self, slot: usize) {
        let g = &mut self.slot_group[slot];
        if g.0 != self.stamp {
            *g = (self.stamp, self.next.len() as u32);
            self.next.push(0);
        }
        let group = g.1;
        self.flow_of.push(group);
        self.next[group as usize] += 1;
    }

    /// The digests' indices flow by flow into `by_flow`, from each digest's group and the
    /// digests per group: counts to start positions (and the runs' ends), then each index
    /// to its group's next place.
    fn list(&mut self, by_flow: &mut FlowRuns) {
        by_flow.clear();
        let mut at = 0u32;
        for c in self.next.iter_mut() {
            let n = std::mem::replace(c, at);
            at += n;
            by_flow.ends.push(at);
        }
        let order = &mut by_flow.order;
        order.resize(self.flow_of.len(), 0);
        for (i, &f) in self.flow_of.iter().enumerate() {
            let slot = &mut self.next[f as usize];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
    }
}

/// What a batch's digests refer to: the connection's flow slots (key, ingress and egress
/// port, path length), the batch's plans (version, digest bytes) and its base time.
struct Lists<'a> {
    flows: &'a [FlowEntry],
    plans: &'a [(u32, u8)],
    base: u64,
}

/// Reads `n` digests into `out` (cleared first) in the order recorded, leaving out those
/// of an empty flow slot, and returns how many it left out; with `group`, also each kept
/// digest's group (its flow slot's, numbered by first appearance) and the digests per group.
fn read_digests(
    r: &mut Reader<'_>,
    n: u32,
    lists: &Lists<'_>,
    out: &mut Vec<WireDigest>,
    mut group: Option<&mut Grouping>,
) -> Result<u32, ProtocolError> {
    out.clear();
    out.reserve(n as usize);
    if let Some(g) = group.as_mut() {
        g.start(lists.flows.len());
    }
    let mut time = lists.base;
    let mut unknown = 0;
    for _ in 0..n {
        // Most digests read in one go from a fixed window; anything unusual (the batch's
        // last bytes, a long varint, a bad index) is read field by field, which says what
        // is wrong.
        let fields = match read_short(r.rest(), lists) {
            Some((fields, used)) => {
                r.skip(used)?;
                fields
            }
            None => read_checked(r, lists)?,
        };
        // Both reads checked the plan index and the slot's range.
        let Fields {
            flow: f,
            plan,
            pid,
            digest,
            delta,
        } = fields;
        let Some(&(plan_version, _)) = lists.plans.get(plan) else {
            return Err(ProtocolError::BadField("plan index"));
        };
        time = time.wrapping_add(unzigzag(delta) as u64);
        let Some(&(key, ingress_port, egress_port, hops)) = lists.flows.get(f).filter(|e| e.3 != 0)
        else {
            // A slot this connection never defined (or lost at a gap): the digest cannot
            // be attributed, so it is left out, counted.
            unknown += 1;
            continue;
        };
        out.push(WireDigest {
            key,
            ingress_port,
            egress_port,
            pid,
            hops,
            plan_version,
            digest,
            time_ns: time,
        });
        if let Some(g) = group.as_mut() {
            g.add(f);
        }
    }
    Ok(unknown)
}

/// One digest's fields as read, its flow slot's range and its plan index checked.
#[derive(Debug, PartialEq, Eq)]
struct Fields {
    flow: usize,
    plan: usize,
    pid: u32,
    digest: u64,
    /// The zigzag time delta.
    delta: u64,
}

/// Bytes the short way reads at once: a digest whose flow slot takes at most three bytes
/// (every slot fits), with a plan index, a digest of up to eight bytes and a
/// time delta of up to ten.
const SHORT_WINDOW: usize = 3 + 1 + 4 + 8 + 10;

/// The next digest from a fixed window at the start of `b`, and the bytes it took; None
/// when the window does not fit in `b` or the digest is not a usual one.
#[inline(always)]
fn read_short(b: &[u8], lists: &Lists<'_>) -> Option<(Fields, usize)> {
    let w: &[u8; SHORT_WINDOW] = b.first_chunk()?;
    let (f, mut at) = short_varint::<3>(w, 0)?;
    let p = if lists.plans.len() > 1 {
        at += 1;
        usize::from(w[at - 1])
    } else {
        0
    };
    let len = usize::from(lists.plans.get(p)?.1);
    if len > 8 {
        return None;
    }
    let pid = u32::from_be_bytes(*w[at..].first_chunk()?);
    at += 4;
    // The digest's bytes, big-endian, are the top `len` bytes of the next eight.
    let digest = match len {
        0 => 0,
        _ => u64::from_be_bytes(*w[at..].first_chunk()?) >> (64 - 8 * len),
    };
    at += len;
    let (delta, used) = short_varint::<10>(w, at)?;
    let flow = usize::try_from(f).ok().filter(|&f| f < FLOW_SLOTS)?;
    Some((
        Fields {
            flow,
            plan: p,
            pid,
            digest,
            delta,
        },
        used,
    ))
}

/// A varint of at most `MAX` bytes at `at` in `w`: its value and where the next field
/// starts; None when it is longer or (at ten bytes) beyond 64 bits.
#[inline(always)]
fn short_varint<const MAX: usize>(w: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..MAX {
        let b = *w.get(at + i)?;
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, at + i + 1));
        }
    }
    None
}

/// The next digest, every field checked as it is read.
fn read_checked(r: &mut Reader<'_>, lists: &Lists<'_>) -> Result<Fields, ProtocolError> {
    let f = usize::try_from(r.varint()?).unwrap_or(usize::MAX);
    if f >= FLOW_SLOTS {
        return Err(ProtocolError::BadField("flow slot"));
    }
    let p = if lists.plans.len() > 1 {
        usize::from(r.u8()?)
    } else {
        0
    };
    let &(_, len) = lists
        .plans
        .get(p)
        .ok_or(ProtocolError::BadField("plan index"))?;
    let pid = r.u32()?;
    let mut digest = 0u64;
    for &b in r.take(usize::from(len))? {
        digest = (digest << 8) | u64::from(b);
    }
    let delta = r.varint()?;
    Ok(Fields {
        flow: f,
        plan: p,
        pid,
        digest,
        delta,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The short way reads a digest exactly as the checked way does, and it declines
        /// whatever the checked way would refuse.
        #[test]
        fn the_short_read_agrees_with_the_checked_one(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            nflows in 1usize..300,
            lens in proptest::collection::vec(0u8..11, 1..4),
            prefix in proptest::sample::select(vec![0u8, 1, 2, 0x7f, 0x80, 0x81, 0xff]),
        ) {
            let flows: Vec<(FlowKey, u8, u8, u8)> = (0..nflows)
                .map(|i| {
                    let key = FlowKey { src: i as u32, dst: 7, src_port: 1, dst_port: 2, protocol: 17 };
                    (key, 1, 0, 1 + (i % 5) as u8)
                })
                .collect();
            let plans: Vec<(u32, u8)> = lens.iter().enumerate().map(|(i, &l)| (i as u32 + 10, l)).collect();
            let lists = Lists { flows: &flows, plans: &plans, base: 0 };
            // A first byte that makes a usual flow slot more likely.
            let mut b = bytes;
            if !b.is_empty() {
                b[0] = prefix;
            }
            let mut r = Reader::new(&b);
            let checked = read_checked(&mut r, &lists);
            match read_short(&b, &lists) {
                Some((read, used)) => {
                    prop_assert_eq!(checked.ok(), Some(read));
                    prop_assert_eq!(r.position(), used);
                }
                None => {
                    // Declined while the checked way reads it: only for a window that does
                    // not fit, a flow slot longer than three bytes or a digest longer
                    // than eight.
                    if let Ok(fields) = checked {
                        let index_bytes = b.iter().position(|x| x & 0x80 == 0).map_or(b.len(), |i| i + 1);
                        let len = plans[fields.plan].1;
                        prop_assert!(b.len() < SHORT_WINDOW || index_bytes > 3 || len > 8);
                    }
                }
            }
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i64, 1, -1, 1000, -1000, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}

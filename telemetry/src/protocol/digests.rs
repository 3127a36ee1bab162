//! Digest batches: the last hop's per-packet reports, compact on the wire (about 9 bytes
//! per digest with a 16-bit digest, plus 16 bytes per flow per batch: each flow's key, ports
//! and path length once per batch, then per packet a flow index, the packet ID, the digest
//! and a time delta).
//!
//! ```text
//! u16   worker
//! u32   digests N (1 .. the hello's max_digests)
//! u16   flows F (1 .. N)
//! u8    plans P (1 .. 4)
//! u64   base time, Unix ns
//! P x   u32 plan version (each declared by the hello or a plan frame)
//! F x   13-byte flow key, u8 ingress port, u8 egress port, u8 path length (1 .. 255)
//! N x   varint flow index (< F)
//!       u8 plan index (< P), present only when P > 1
//!       u32 packet ID
//!       the digest: that plan's digest bytes, big-endian
//!       zigzag varint: ns since the previous digest (the first: since the base time)
//! ```

use rustc_hash::FxHashMap;

use crate::flowradar::FlowKey;
use crate::wire::bytes::{Reader, put_varint};

use super::{Hello, MAX_BATCH, ProtocolError};

/// Most plans one batch refers to.
pub const MAX_PLANS_PER_BATCH: usize = 4;

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
}

/// Digests grouped by flow: an order to take them in and where each flow's run ends in it.
/// Every digest of a run has one flow entry of its batch (flow key, ports, path length).
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
    /// As recorded, and also grouped by the batch's flow entries (in the order they first
    /// appear), each flow's digests as recorded ([`DigestBatch::by_flow`]): a consumer that
    /// keeps state per flow then finds each flow once per batch rather than once per digest.
    ByFlow,
}

/// What grouping by flow reuses from batch to batch (no allocation per batch).
#[derive(Debug, Clone, Default)]
pub(crate) struct Grouping {
    /// Each digest's flow entry.
    flow_of: Vec<u16>,
    /// Per flow entry, where its next digest goes.
    next: Vec<u32>,
}

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The digests batch payload for `digests` from `worker`, whose plans have the digest
/// lengths `digest_bytes(version)` gives. At most [`MAX_PLANS_PER_BATCH`] plans, 65535
/// flows and [`MAX_BATCH`] digests (callers split larger sets). A sender of many batches
/// keeps a [`DigestEncoder`] instead.
pub fn encode_digests(
    worker: u16,
    digests: &[WireDigest],
    digest_bytes: impl Fn(u32) -> u8,
) -> Vec<u8> {
    DigestEncoder::default().encode(worker, digests, digest_bytes)
}

/// A flow entry of a batch (the flow and the ports and hop count its digests share) as one
/// integer whose big-endian bytes are the entry's 16 bytes on the wire: the key's 13, the
/// ingress port, the egress port, the hop count. One word pair to hash and compare, and one
/// store to write.
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

/// Encodes digest batches, keeping its flow table and lists from batch to batch: the
/// control thread encodes millions of digests a second, and a table built anew for every
/// batch grows (and rehashes) from empty each time.
#[derive(Debug, Clone, Default)]
pub struct DigestEncoder {
    flows: FxHashMap<u128, u16>,
    flow_list: Vec<u128>,
    /// Each digest's flow entry, from the first pass.
    flow_of: Vec<u16>,
    plans: Vec<u32>,
    lens: Vec<u8>,
}

impl DigestEncoder {
    /// The batch payload, as [`encode_digests`] gives it.
    pub fn encode(
        &mut self,
        worker: u16,
        digests: &[WireDigest],
        digest_bytes: impl Fn(u32) -> u8,
    ) -> Vec<u8> {
        assert!(!digests.is_empty() && digests.len() <= MAX_BATCH as usize);
        let DigestEncoder {
            flows,
            flow_list,
            flow_of,
            plans,
            lens,
        } = self;
        flows.clear();
        flow_list.clear();
        flow_of.clear();
        plans.clear();
        flows.reserve(digests.len());
        for d in digests {
            if !plans.contains(&d.plan_version) {
                plans.push(d.plan_version);
            }
            let k = flow_entry(d);
            let at = *flows.entry(k).or_insert_with(|| {
                flow_list.push(k);
                (flow_list.len() - 1) as u16
            });
            flow_of.push(at);
        }
        assert!(plans.len() <= MAX_PLANS_PER_BATCH && flow_list.len() <= usize::from(u16::MAX));
        lens.clear();
        lens.extend(plans.iter().map(|v| digest_bytes(*v)));
        let base = digests[0].time_ns;
        // Room for the fixed-width writes below, which put 8 bytes and keep fewer.
        let mut out = Vec::with_capacity(
            18 + plans.len() * 4 + flow_list.len() * 16 + digests.len() * 32 + 8,
        );
        out.extend_from_slice(&worker.to_be_bytes());
        out.extend_from_slice(&(digests.len() as u32).to_be_bytes());
        out.extend_from_slice(&(flow_list.len() as u16).to_be_bytes());
        out.push(plans.len() as u8);
        out.extend_from_slice(&base.to_be_bytes());
        for v in plans.iter() {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for entry in flow_list.iter() {
            out.extend_from_slice(&entry.to_be_bytes());
        }
        let mut prev = base;
        for (d, &f) in digests.iter().zip(flow_of.iter()) {
            put_varint(&mut out, u64::from(f));
            let p = if plans.len() > 1 {
                let p = plans
                    .iter()
                    .position(|v| *v == d.plan_version)
                    .expect("listed");
                out.push(p as u8);
                p
            } else {
                0
            };
            out.extend_from_slice(&d.pid.to_be_bytes());
            // The digest's low `n` bytes, big-endian: all eight written, the rest cut off
            // (one store, where a copy of `n` bytes is a call).
            let n = usize::from(lens[p]).min(8);
            if n > 0 {
                out.extend_from_slice(&(d.digest << (64 - 8 * n as u32)).to_be_bytes());
                out.truncate(out.len() - (8 - n));
            }
            put_varint(&mut out, zigzag(d.time_ns.wrapping_sub(prev) as i64));
            prev = d.time_ns;
        }
        out
    }
}

impl DigestBatch {
    pub(crate) fn decode(
        payload: &[u8],
        hello: &Hello,
        declared: &[(u32, u8)],
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
        let nflows = usize::from(r.u16()?);
        if nflows == 0 || nflows > n as usize {
            return Err(ProtocolError::BadField("flows in a batch"));
        }
        let nplans = usize::from(r.u8()?);
        if nplans == 0 || nplans > MAX_PLANS_PER_BATCH {
            return Err(ProtocolError::BadField("plans in a batch"));
        }
        let base = r.u64()?;
        let mut plans = Vec::with_capacity(nplans);
        for _ in 0..nplans {
            let v = r.u32()?;
            let len = declared
                .iter()
                .find(|(d, _)| *d == v)
                .map(|(_, l)| *l)
                .ok_or(ProtocolError::UnknownPlan(v))?;
            plans.push((v, len));
        }
        // Every flow entry takes 16 bytes and every digest at least 7: check the batch can
        // hold what it announces before allocating for it.
        if r.remaining() < nflows * 16 + n as usize * 7 {
            return Err(ProtocolError::Truncated);
        }
        let nports = hello.ports.len();
        let mut flows = Vec::with_capacity(nflows);
        for _ in 0..nflows {
            let key = FlowKey::from_bytes(r.take(13)?.try_into().expect("13 bytes"));
            let (i, e, hops) = (r.u8()?, r.u8()?, r.u8()?);
            if usize::from(i) >= nports || usize::from(e) >= nports {
                return Err(ProtocolError::BadField("port"));
            }
            if hops == 0 {
                return Err(ProtocolError::BadField("path length"));
            }
            flows.push((key, i, e, hops));
        }
        let lists = Lists {
            flows: &flows,
            plans: &plans,
            base,
        };
        by_flow.clear();
        // Grouping needs each digest's flow entry; one flow is grouped already (one run).
        match grouping {
            None => read_digests(&mut r, n, &lists, &mut digests, None)?,
            Some(_) if nflows == 1 => {
                read_digests(&mut r, n, &lists, &mut digests, None)?;
                by_flow.ends.push(n);
            }
            Some(g) => {
                g.next.clear();
                g.next.resize(nflows, 0);
                read_digests(
                    &mut r,
                    n,
                    &lists,
                    &mut digests,
                    Some((&mut g.flow_of, &mut g.next)),
                )?;
                g.list(&mut by_flow);
            }
        }
        if r.remaining() != 0 {
            return Err(ProtocolError::TrailingBytes);
        }
        Ok(DigestBatch {
            worker,
            digests,
            by_flow,
        })
    }
}

impl Grouping {
    /// The digests' indices flow by flow into `by_flow`, from each digest's flow entry and
    /// the digests per entry: counts to start positions (and the runs' ends), then each
    /// index to its flow's next place.
    fn list(&mut self, by_flow: &mut FlowRuns) {
        by_flow.clear();
        let mut at = 0u32;
        for c in self.next.iter_mut() {
            let n = std::mem::replace(c, at);
            at += n;
            if n > 0 {
                by_flow.ends.push(at);
            }
        }
        let order = &mut by_flow.order;
        order.resize(self.flow_of.len(), 0);
        for (i, &f) in self.flow_of.iter().enumerate() {
            let slot = &mut self.next[usize::from(f)];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
    }
}

/// What a batch's digests refer to: its flow entries (key, ingress and egress port, path
/// length), its plans (version, digest bytes) and its base time.
struct Lists<'a> {
    flows: &'a [(FlowKey, u8, u8, u8)],
    plans: &'a [(u32, u8)],
    base: u64,
}

/// Reads `n` digests into `out` (cleared first) in the order recorded; with `track`, also
/// each one's flow entry and the digests per entry (which must start at zero).
fn read_digests(
    r: &mut Reader<'_>,
    n: u32,
    lists: &Lists<'_>,
    out: &mut Vec<WireDigest>,
    mut track: Option<(&mut Vec<u16>, &mut [u32])>,
) -> Result<(), ProtocolError> {
    out.clear();
    out.reserve(n as usize);
    if let Some((flow_of, _)) = track.as_mut() {
        flow_of.clear();
    }
    let mut time = lists.base;
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
        // Both reads checked the indices.
        let Fields {
            flow: f,
            plan,
            pid,
            digest,
            delta,
        } = fields;
        let (Some(&(key, ingress_port, egress_port, hops)), Some(&(plan_version, _))) =
            (lists.flows.get(f), lists.plans.get(plan))
        else {
            return Err(ProtocolError::BadField("flow or plan index"));
        };
        time = time.wrapping_add(unzigzag(delta) as u64);
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
        if let Some((flow_of, count)) = track.as_mut() {
            // f < the flow entries, at most 65535.
            flow_of.push(f as u16);
            count[f] += 1;
        }
    }
    Ok(())
}

/// One digest's fields as read, its flow entry and plan index checked.
#[derive(Debug, PartialEq, Eq)]
struct Fields {
    flow: usize,
    plan: usize,
    pid: u32,
    digest: u64,
    /// The zigzag time delta.
    delta: u64,
}

/// Bytes the short way reads at once: a digest whose flow index takes at most three bytes
/// (every index below 65536 fits), with a plan index, a digest of up to eight bytes and a
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
    let flow = usize::try_from(f).ok().filter(|&f| f < lists.flows.len())?;
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
    if f >= lists.flows.len() {
        return Err(ProtocolError::BadField("flow index"));
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
            // A first byte that makes a usual flow index more likely.
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
                    // not fit, a flow index longer than three bytes or a digest longer
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

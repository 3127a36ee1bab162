//! The incremental path decoder: feed a flow's digests one at a time and ask at any time which
//! hops are decoded.
//!
//! For each hop the decoder keeps the set of switches consistent with everything seen so far:
//! every baseline digest written by that hop (`h(v, pid)` must match), every XOR digest whose
//! other hops are known (peeling), and, with a topology, adjacency to the candidates of the
//! neighbouring hops on both sides (a forward-backward pass over walks of exactly `k` switches
//! that end at the sink's switch). A hop is decoded when exactly one candidate is left. The
//! true switch is never removed (it satisfies every constraint), so a decoded hop is always
//! right as long as the digests come from this path. XOR digests with several unknown hops
//! are kept (up to a bound) and also used to prune when their candidates are few enough to
//! enumerate.

use crate::pint::coding::{HopSet, Layer, PathCoding};
use crate::pint::tape;
use crate::topology::Topology;

/// Where candidates come from.
#[derive(Debug, Clone, Copy)]
pub enum Space<'a> {
    /// The nodes of a topology (switch ID = node + 1); consecutive hops must be neighbours.
    Topology(&'a Topology),
    /// These switch IDs, with no adjacency known.
    Ids(&'a [u32]),
    /// Values travel raw (the coding's `raw_values`): a baseline digest is the value.
    Raw,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cands {
    /// Nothing known yet.
    Any,
    /// Sorted candidates (node numbers with a topology, switch IDs otherwise).
    Set(Vec<u32>),
}

#[derive(Debug, Clone, Copy)]
struct Equation {
    instance: u32,
    pid: u32,
    hops: HopSet,
    digest: u64,
}

/// Candidate sets up to this size have their neighbourhoods computed in the topology pass.
const NEIGHBOUR_LIMIT: usize = 256;
/// XOR digests whose unknown hops have at most this many candidate combinations are
/// enumerated to prune candidates.
const ENUMERATION_LIMIT: usize = 4096;

/// What a path decoder reads its digests with: the query's coding and where candidates come
/// from.
#[derive(Debug, Clone, Copy)]
pub struct PathContext<'a> {
    /// The coding of the static query.
    pub coding: &'a PathCoding,
    /// Where candidates come from.
    pub space: Space<'a>,
}

/// The decoding state of one flow's path of `k` hops, owning nothing but its own data, so
/// that a collector can keep one per flow next to shared codings and topologies; every call
/// that reads digests takes the [`PathContext`] (always the same one for a state).
#[derive(Debug, Clone)]
pub struct PathState {
    k: usize,
    cands: Vec<Cands>,
    equations: Vec<Equation>,
    max_equations: usize,
    packets: u64,
    conflict: bool,
    /// Every hop down to one candidate (kept up to date by `propagate`).
    decoded: bool,
}

/// Decodes one flow's path of `k` hops: a [`PathState`] with its context at hand.
#[derive(Debug, Clone)]
pub struct PathDecoder<'a> {
    cx: PathContext<'a>,
    state: PathState,
}

/// A path state read with its context.
#[derive(Debug, Clone, Copy)]
pub struct PathView<'s, 'a> {
    /// The context.
    pub cx: PathContext<'a>,
    /// The state.
    pub state: &'s PathState,
}

impl PathView<'_, '_> {
    /// The switch at hop `i` (1-based), once decoded.
    pub fn hop(&self, i: usize) -> Option<u32> {
        self.state.hop(self.cx, i)
    }

    /// The decoded path (switch IDs, hop 1 first), once every hop is decoded.
    pub fn path(&self) -> Option<Vec<u32>> {
        self.state.path(self.cx)
    }
}

impl<'a> PathDecoder<'a> {
    /// A decoder for a path of `k` hops (1 to 255) coded with `coding`.
    pub fn new(k: usize, coding: &'a PathCoding, space: Space<'a>) -> PathDecoder<'a> {
        PathDecoder {
            cx: PathContext { coding, space },
            state: PathState::new(k),
        }
    }

    /// Path length.
    pub fn len(&self) -> usize {
        self.state.k
    }

    /// Always false: a path has at least one hop.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Digests fed so far.
    pub fn packets(&self) -> u64 {
        self.state.packets
    }

    /// See [`PathState::conflict`].
    pub fn conflict(&self) -> bool {
        self.state.conflict
    }

    /// See [`PathState::pin`].
    pub fn pin(&mut self, i: usize, switch_id: u32) {
        self.state.pin(self.cx, i, switch_id);
    }

    /// Feeds one packet: its ID and the field of each instance.
    pub fn feed(&mut self, pid: u32, fields: &[u64]) {
        self.state.feed(self.cx, pid, fields.iter().copied());
    }

    /// The switch at hop `i` (1-based), once decoded.
    pub fn hop(&self, i: usize) -> Option<u32> {
        self.state.hop(self.cx, i)
    }

    /// Candidates left at hop `i` (None: unconstrained).
    pub fn candidates(&self, i: usize) -> Option<usize> {
        self.state.candidates(i)
    }

    /// Number of decoded hops.
    pub fn decoded_hops(&self) -> usize {
        self.state.decoded_hops()
    }

    /// Whether every hop is decoded.
    pub fn is_decoded(&self) -> bool {
        self.state.is_decoded()
    }

    /// The decoded path (switch IDs, hop 1 first), once every hop is decoded.
    pub fn path(&self) -> Option<Vec<u32>> {
        self.state.path(self.cx)
    }
}

impl PathState {
    /// The state of a path of `k` hops (1 to 255), nothing known yet.
    pub fn new(k: usize) -> PathState {
        assert!(
            (1..=crate::pint::coding::MAX_HOPS).contains(&k),
            "path length {k} out of range"
        );
        PathState {
            k,
            cands: vec![Cands::Any; k],
            equations: Vec::new(),
            max_equations: 4 * k + 64,
            packets: 0,
            conflict: false,
            decoded: false,
        }
    }

    /// Path length.
    pub fn len(&self) -> usize {
        self.k
    }

    /// Always false: a path has at least one hop.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Digests fed so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Whether the digests contradicted each other (they cannot all come from one path of
    /// this length, e.g. because the route changed); the decoder should be reset.
    pub fn conflict(&self) -> bool {
        self.conflict
    }

    fn value_of(cx: PathContext<'_>, e: u32) -> u32 {
        match cx.space {
            Space::Topology(t) => t.switch_id(e),
            _ => e,
        }
    }

    fn element_of(cx: PathContext<'_>, switch_id: u32) -> Option<u32> {
        match cx.space {
            Space::Topology(t) => t.node(switch_id),
            _ => Some(switch_id),
        }
    }

    /// Fixes hop `i` (1-based) to `switch_id`, e.g. the sink's own switch as the last hop or
    /// the source's edge switch as the first.
    pub fn pin(&mut self, cx: PathContext<'_>, i: usize, switch_id: u32) {
        let Some(e) = Self::element_of(cx, switch_id) else {
            self.conflict = true;
            return;
        };
        match &mut self.cands[i - 1] {
            Cands::Set(s) => {
                if s.binary_search(&e).is_ok() {
                    *s = vec![e];
                } else {
                    s.clear();
                    self.conflict = true;
                }
            }
            c @ Cands::Any => *c = Cands::Set(vec![e]),
        }
        self.propagate(cx);
    }

    /// Feeds one packet: its ID and the field of each instance.
    pub fn feed(&mut self, cx: PathContext<'_>, pid: u32, fields: impl IntoIterator<Item = u64>) {
        self.packets += 1;
        // What this packet changed: candidates (then everything is looked at again) or
        // only new XOR digests (then only they are: the rest settled under the candidates
        // as they are).
        let mut changed = false;
        let mut new_equations = 0;
        for (n, d) in fields
            .into_iter()
            .enumerate()
            .take(cx.coding.instances as usize)
        {
            let n = n as u32;
            match cx.coding.layer(n, pid) {
                Layer::Baseline => {
                    let w = cx.coding.writer(n, pid, self.k);
                    changed |= self.constrain(cx, w, n, pid, d);
                }
                Layer::Xor(l) => {
                    let hops = cx.coding.xor_hops(n, l, pid, self.k);
                    if hops.is_empty() {
                        continue;
                    }
                    if self.equations.len() >= self.max_equations {
                        self.equations.remove(0);
                    }
                    self.equations.push(Equation {
                        instance: n,
                        pid,
                        hops,
                        digest: d,
                    });
                    new_equations += 1;
                }
            }
        }
        // Evictions take the oldest, so the new ones are the last.
        let first_new = self.equations.len().saturating_sub(new_equations);
        self.settle(cx, (!changed).then_some(first_new));
    }

    /// [`PathState::feed`], then every constraint applied again until nothing changes (as
    /// the decoder did per packet before it settled incrementally): the reference the
    /// tests hold `feed` to, since a full pass after a settled one must change nothing.
    #[cfg(test)]
    fn feed_exhaustively(&mut self, cx: PathContext<'_>, pid: u32, fields: &[u64]) {
        self.feed(cx, pid, fields.iter().copied());
        self.propagate(cx);
    }

    /// Checks one packet against a decoded path: each instance's field must be what the
    /// decoded hops would have written (the baseline writer's hash, or the XOR of the layer's
    /// members' hashes). A field that disagrees marks a conflict, as [`PathState::feed`]
    /// would, without any candidate work. On a path not yet decoded this is `feed`.
    pub fn check(&mut self, cx: PathContext<'_>, pid: u32, fields: impl IntoIterator<Item = u64>) {
        if !self.decoded {
            self.feed(cx, pid, fields);
            return;
        }
        self.packets += 1;
        // The switch at hop `i` (always one on a decoded path).
        let value = |i: usize| match &self.cands[i - 1] {
            Cands::Set(s) if s.len() == 1 => Some(Self::value_of(cx, s[0])),
            _ => None,
        };
        let mut agree = true;
        // The packet word, taken once for every instance's decisions and hashes.
        let m = tape::packet_word(pid);
        for (n, d) in fields
            .into_iter()
            .enumerate()
            .take(cx.coding.instances as usize)
        {
            let n = n as u32;
            // A hop without one (not reached) gives a value no field can hold.
            let h = cx.coding.value_hasher_word(n, m);
            let hash = |i: usize| value(i).map_or(u64::MAX, h);
            let expected = match cx.coding.layer_of_word(n, m) {
                Layer::Baseline => hash(cx.coding.writer_word(n, m, self.k)),
                Layer::Xor(l) => {
                    let hops = cx.coding.xor_hops_word(n, l, m, self.k);
                    // As in `feed`: a layer no hop took part in says nothing.
                    if hops.is_empty() {
                        continue;
                    }
                    hops.iter().fold(0, |x, i| x ^ hash(i))
                }
            };
            agree &= expected == d;
        }
        if !agree {
            self.conflict = true;
            self.decoded = false;
        }
    }

    /// The switch at hop `i` (1-based), once decoded.
    pub fn hop(&self, cx: PathContext<'_>, i: usize) -> Option<u32> {
        match &self.cands[i - 1] {
            Cands::Set(s) if s.len() == 1 => Some(Self::value_of(cx, s[0])),
            _ => None,
        }
    }

    /// Candidates left at hop `i` (None: unconstrained).
    pub fn candidates(&self, i: usize) -> Option<usize> {
        match &self.cands[i - 1] {
            Cands::Set(s) => Some(s.len()),
            Cands::Any => None,
        }
    }

    /// Number of decoded hops.
    pub fn decoded_hops(&self) -> usize {
        self.cands
            .iter()
            .filter(|c| matches!(c, Cands::Set(s) if s.len() == 1))
            .count()
    }

    /// Whether every hop is decoded.
    pub fn is_decoded(&self) -> bool {
        self.decoded
    }

    /// The decoded path (switch IDs, hop 1 first), once every hop is decoded.
    pub fn path(&self, cx: PathContext<'_>) -> Option<Vec<u32>> {
        if !self.is_decoded() {
            return None;
        }
        (1..=self.k).map(|i| self.hop(cx, i)).collect()
    }

    /// Heap bytes the state holds (candidate sets and kept XOR digests).
    pub fn heap_bytes(&self) -> usize {
        self.cands.capacity() * std::mem::size_of::<Cands>()
            + self
                .cands
                .iter()
                .map(|c| match c {
                    Cands::Set(s) => s.capacity() * 4,
                    Cands::Any => 0,
                })
                .sum::<usize>()
            + self.equations.capacity() * std::mem::size_of::<Equation>()
    }

    /// Restricts hop `i` to values whose hash for `(instance, pid)` is `target`. Returns
    /// whether the candidates changed.
    fn constrain(
        &mut self,
        cx: PathContext<'_>,
        i: usize,
        instance: u32,
        pid: u32,
        target: u64,
    ) -> bool {
        let coding = cx.coding;
        let space = cx.space;
        let value_of = |e: u32| match space {
            Space::Topology(t) => t.switch_id(e),
            _ => e,
        };
        let hash = coding.value_hasher(instance, pid);
        let matches = |e: u32| hash(value_of(e)) == target;
        let changed = match &mut self.cands[i - 1] {
            Cands::Set(s) => {
                let before = s.len();
                s.retain(|&e| matches(e));
                s.len() != before
            }
            Cands::Any => {
                let set: Vec<u32> = match space {
                    Space::Raw => u32::try_from(target).into_iter().collect(),
                    Space::Ids(ids) => {
                        let mut v: Vec<u32> = ids.iter().copied().filter(|&e| matches(e)).collect();
                        v.sort_unstable();
                        v.dedup();
                        v
                    }
                    Space::Topology(t) => self.near_matching(i, t, matches),
                };
                self.cands[i - 1] = Cands::Set(set);
                true
            }
        };
        if matches!(&self.cands[i - 1], Cands::Set(s) if s.is_empty()) {
            self.conflict = true;
        }
        changed
    }

    /// Where hop `i`'s switch can be before any digest of its own (next to a small
    /// candidate set of a neighbouring hop, or anywhere), keeping those `matches` keeps;
    /// sorted.
    fn near_matching(&self, i: usize, t: &Topology, matches: impl Fn(u32) -> bool) -> Vec<u32> {
        for j in [i.wrapping_sub(1), i + 1] {
            if j >= 1
                && j <= self.k
                && let Cands::Set(s) = &self.cands[j - 1]
                && s.len() <= 64
            {
                let mut v = Vec::new();
                neighbourhood_into(t, s, &mut v);
                v.retain(|&e| matches(e));
                return v;
            }
        }
        (0..t.len() as u32).filter(|&e| matches(e)).collect()
    }

    fn propagate(&mut self, cx: PathContext<'_>) {
        self.settle(cx, None);
    }

    /// Applies adjacency and the kept XOR digests until nothing changes, then notes whether
    /// the path is decoded. `new_from`: the candidates have not changed since the last time
    /// this settled, so the first round looks only at the XOR digests from that index on
    /// (the new ones).
    fn settle(&mut self, cx: PathContext<'_>, new_from: Option<usize>) {
        let (mut all, mut first) = (new_from.is_none(), new_from.unwrap_or(0));
        // Neighbourhoods of sets of several candidates are built here, reused across hops
        // and rounds (a single candidate's is the topology's own list).
        let mut scratch = Vec::new();
        let mut unknown = Vec::new();
        while !self.conflict {
            let mut changed = false;
            if all && let Space::Topology(t) = cx.space {
                for i in 2..=self.k {
                    changed |= self.restrict_by_neighbour(t, i, i - 1, &mut scratch);
                }
                for i in (1..self.k).rev() {
                    changed |= self.restrict_by_neighbour(t, i, i + 1, &mut scratch);
                }
            }
            changed |= self.resolve_equations(cx, first, &mut unknown);
            if !changed {
                break;
            }
            (all, first) = (true, 0);
        }
        let was = self.decoded;
        self.decoded = !self.conflict && self.decoded_hops() == self.k;
        if self.decoded && !was {
            // Decoded, a path is checked against its hops alone: the room its candidate
            // sets and XOR digests took (kilobytes on a large topology) goes back.
            for c in &mut self.cands {
                if let Cands::Set(s) = c {
                    s.shrink_to_fit();
                }
            }
            self.equations = Vec::new();
        }
    }

    /// Keeps at hop `i` only neighbours of hop `j`'s candidates (`scratch`: room for a
    /// neighbourhood).
    fn restrict_by_neighbour(
        &mut self,
        t: &Topology,
        i: usize,
        j: usize,
        scratch: &mut Vec<u32>,
    ) -> bool {
        let allowed: &[u32] = match &self.cands[j - 1] {
            Cands::Set(s) if s.len() == 1 => t.neighbours(s[0]),
            Cands::Set(s) if s.len() <= NEIGHBOUR_LIMIT => {
                neighbourhood_into(t, s, scratch);
                scratch
            }
            _ => return false,
        };
        let changed = match &mut self.cands[i - 1] {
            Cands::Set(s) => {
                let before = s.len();
                s.retain(|e| allowed.binary_search(e).is_ok());
                s.len() != before
            }
            c @ Cands::Any => {
                *c = Cands::Set(allowed.to_vec());
                true
            }
        };
        if matches!(&self.cands[i - 1], Cands::Set(s) if s.is_empty()) {
            self.conflict = true;
        }
        changed
    }

    /// Uses the stored XOR digests from index `first` on: checks fully known ones, peels
    /// those with one unknown hop, and prunes with those whose unknown combinations are few
    /// (`unknown`: room for an equation's unknown hops).
    fn resolve_equations(
        &mut self,
        cx: PathContext<'_>,
        first: usize,
        unknown: &mut Vec<usize>,
    ) -> bool {
        let mut changed = false;
        let mut idx = first;
        while idx < self.equations.len() && !self.conflict {
            let eq = self.equations[idx];
            let hash = cx.coding.value_hasher(eq.instance, eq.pid);
            let mut known = 0u64;
            unknown.clear();
            for i in eq.hops.iter() {
                match &self.cands[i - 1] {
                    Cands::Set(s) if s.len() == 1 => known ^= hash(Self::value_of(cx, s[0])),
                    _ => unknown.push(i),
                }
            }
            let target = eq.digest ^ known;
            match unknown.len() {
                0 => {
                    if target != 0 {
                        self.conflict = true;
                    }
                    self.equations.swap_remove(idx);
                }
                1 => {
                    changed |= self.constrain(cx, unknown[0], eq.instance, eq.pid, target);
                    self.equations.swap_remove(idx);
                }
                _ => {
                    changed |= self.prune_by_enumeration(cx, &eq, unknown, target);
                    idx += 1;
                }
            }
        }
        changed
    }

    /// Keeps at each unknown hop only values that take part in some assignment of all the
    /// unknown hops whose hashes XOR to `target`.
    fn prune_by_enumeration(
        &mut self,
        cx: PathContext<'_>,
        eq: &Equation,
        unknown: &[usize],
        target: u64,
    ) -> bool {
        // Whether it is worth it, before building anything.
        let mut combos = 1usize;
        for &i in unknown {
            let Cands::Set(s) = &self.cands[i - 1] else {
                return false;
            };
            combos = combos.saturating_mul(s.len());
            if combos > ENUMERATION_LIMIT {
                return false;
            }
        }
        let hash = cx.coding.value_hasher(eq.instance, eq.pid);
        let mut sets: Vec<Vec<(u32, u64)>> = Vec::with_capacity(unknown.len());
        for &i in unknown {
            let Cands::Set(s) = &self.cands[i - 1] else {
                return false;
            };
            sets.push(
                s.iter()
                    .map(|&e| (e, hash(Self::value_of(cx, e))))
                    .collect(),
            );
        }
        let mut supported: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.len()]).collect();
        let mut choice = vec![0usize; sets.len()];
        enumerate(&sets, 0, 0, target, &mut choice, &mut supported);
        let mut changed = false;
        for (n, &i) in unknown.iter().enumerate() {
            if supported[n].iter().all(|&b| b) {
                continue;
            }
            let keep: Vec<u32> = sets[n]
                .iter()
                .zip(&supported[n])
                .filter(|(_, ok)| **ok)
                .map(|((e, _), _)| *e)
                .collect();
            if keep.is_empty() {
                self.conflict = true;
            }
            self.cands[i - 1] = Cands::Set(keep);
            changed = true;
        }
        changed
    }
}

fn enumerate(
    sets: &[Vec<(u32, u64)>],
    level: usize,
    acc: u64,
    target: u64,
    choice: &mut Vec<usize>,
    supported: &mut [Vec<bool>],
) {
    if level == sets.len() {
        if acc == target {
            for (l, &c) in choice.iter().enumerate() {
                supported[l][c] = true;
            }
        }
        return;
    }
    for (c, &(_, h)) in sets[level].iter().enumerate() {
        choice[level] = c;
        enumerate(sets, level + 1, acc ^ h, target, choice, supported);
    }
}

/// The sorted union of the neighbours of `nodes`, into `out`.
fn neighbourhood_into(t: &Topology, nodes: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.extend(nodes.iter().flat_map(|&n| t.neighbours(n).iter().copied()));
    out.sort_unstable();
    out.dedup();
}

#[cfg(test)]
mod tests;

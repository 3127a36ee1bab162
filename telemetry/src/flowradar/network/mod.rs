//! Network-wide decoding across the flowsets of all switches of an epoch (FlowRadar's
//! FlowDecode and CounterDecode).
//!
//! FlowDecode: every switch peels pure cells; a flow decoded anywhere is removed (key and
//! flow count only: its counters may differ from hop to hop) from every other switch whose
//! flow filter says the flow passed there and whose keys are not all known yet, which makes
//! new pure cells. No routing information is needed. A filter false positive would remove a
//! flow that never passed; such a removal leaves its key behind in an emptied cell, where it
//! is recognised and undone.
//!
//! CounterDecode: once a switch's flows are all known, its packet and byte counters form a
//! sparse linear system (one equation per cell, one unknown per flow, `k` ones per column).
//! It is solved by peeling cells with one unknown flow, then, for what remains, by conjugate
//! gradients on the normal equations, stopping as soon as the rounded solution is a
//! non-negative integer vector that satisfies every equation exactly.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::flowradar::decode::{DecodeResult, Work, single_decode};
use crate::flowradar::flowset::FlowSet;
use crate::flowradar::key::FlowKey;

/// One flow's counters at one switch (None where the system could not determine them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowCounters {
    /// The flow.
    pub key: FlowKey,
    /// Packets counted at this switch.
    pub packets: Option<u64>,
    /// Bytes counted at this switch.
    pub bytes: Option<u64>,
}

/// What network-wide decoding found at one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchResult {
    /// Flows known at the switch, with their counters.
    pub flows: Vec<FlowCounters>,
    /// Whether every flow of the switch is known.
    pub keys_complete: bool,
    /// Whether every flow's counters are known.
    pub counters_complete: bool,
}

/// The result of network-wide decoding.
#[derive(Debug, Clone)]
pub struct NetworkResult {
    /// SingleDecode of each switch, for comparison.
    pub single: Vec<DecodeResult>,
    /// Network-wide results per switch.
    pub switches: Vec<SwitchResult>,
    /// Time of the SingleDecode pass.
    pub single_time: Duration,
    /// Time of FlowDecode.
    pub flow_decode_time: Duration,
    /// Time of CounterDecode.
    pub counter_decode_time: Duration,
    /// Removals undone because a flow filter gave a false positive.
    pub undone_removals: usize,
}

impl NetworkResult {
    /// (switch, flow) pairs SingleDecode found.
    pub fn single_pairs(&self) -> usize {
        self.single.iter().map(|r| r.flows.len()).sum()
    }

    /// (switch, flow) pairs network-wide decoding found.
    pub fn network_pairs(&self) -> usize {
        self.switches.iter().map(|s| s.flows.len()).sum()
    }
}

struct State<'a> {
    fs: &'a FlowSet,
    work: Work,
    known: HashSet<FlowKey>,
    /// Flows removed because another switch decoded them (not peeled here).
    borrowed: HashSet<FlowKey>,
    queue: Vec<usize>,
}

impl State<'_> {
    fn remove(&mut self, key: &FlowKey) {
        let x = key.to_u128();
        for c in self.fs.cells_of(key) {
            self.work.xor[c] ^= x;
            self.work.count[c] -= 1;
            if self.work.count[c] == 1 {
                self.queue.push(c);
            }
        }
    }

    fn add_back(&mut self, key: &FlowKey) {
        let x = key.to_u128();
        for c in self.fs.cells_of(key) {
            self.work.xor[c] ^= x;
            self.work.count[c] += 1;
            if self.work.count[c] == 1 {
                self.queue.push(c);
            }
        }
    }

    fn keys_complete(&self) -> bool {
        self.work.count.iter().all(|&c| c == 0) && self.work.xor.iter().all(|&x| x == 0)
    }

    /// Peels pure cells; returns the keys found.
    fn peel(&mut self) -> Vec<FlowKey> {
        let mut found = Vec::new();
        while let Some(i) = self.queue.pop() {
            let Some(key) = self.work.pure(self.fs, i) else {
                continue;
            };
            if !self.known.insert(key) {
                continue;
            }
            self.remove(&key);
            found.push(key);
        }
        found
    }

    /// Undoes removals of borrowed flows whose keys are left over in emptied (or negative)
    /// cells: the flow filter had a false positive. Returns how many.
    fn repair(&mut self) -> usize {
        let mut undone = 0;
        loop {
            let suspect = (0..self.work.count.len()).find_map(|i| {
                let c = self.work.count[i];
                if c > 0 || (c == 0 && self.work.xor[i] == 0) {
                    return None;
                }
                FlowKey::from_u128(self.work.xor[i]).filter(|k| self.borrowed.contains(k))
            });
            let Some(key) = suspect else { return undone };
            self.borrowed.remove(&key);
            self.known.remove(&key);
            self.add_back(&key);
            undone += 1;
        }
    }
}

/// Decodes all flowsets of one epoch together.
pub fn network_decode(flowsets: &[&FlowSet]) -> NetworkResult {
    let t0 = Instant::now();
    let single: Vec<DecodeResult> = flowsets.iter().map(|fs| single_decode(fs)).collect();
    let single_time = t0.elapsed();

    let t1 = Instant::now();
    let mut states: Vec<State<'_>> = flowsets
        .iter()
        .map(|fs| {
            let work = Work::of(fs);
            let queue = (0..work.count.len())
                .filter(|&i| work.count[i] == 1)
                .collect();
            State {
                fs,
                work,
                known: HashSet::new(),
                borrowed: HashSet::new(),
                queue,
            }
        })
        .collect();
    let mut complete: Vec<bool> = vec![false; states.len()];
    let mut undone_removals = 0;
    loop {
        let mut fresh: Vec<(usize, FlowKey)> = Vec::new();
        for (s, st) in states.iter_mut().enumerate() {
            fresh.extend(st.peel().into_iter().map(|k| (s, k)));
        }
        for (s, st) in states.iter().enumerate() {
            complete[s] = st.keys_complete();
        }
        // Offer each new key to the switches still missing flows.
        let mut moved = false;
        for (from, key) in &fresh {
            let words = key.words();
            for (t, st) in states.iter_mut().enumerate() {
                if t == *from
                    || complete[t]
                    || st.known.contains(key)
                    || !st.fs.filter().contains(&words)
                {
                    continue;
                }
                if st.fs.cells_of(key).any(|c| st.work.count[c] < 1) {
                    continue; // the flow cannot be in a cell that holds none
                }
                st.known.insert(*key);
                st.borrowed.insert(*key);
                st.remove(key);
                moved = true;
            }
        }
        let mut repaired = 0;
        for st in states.iter_mut() {
            repaired += st.repair();
        }
        undone_removals += repaired;
        if fresh.is_empty() && !moved && repaired == 0 {
            break;
        }
    }
    let flow_decode_time = t1.elapsed();

    let t2 = Instant::now();
    let switches = states
        .iter()
        .map(|st| {
            let keys_complete = st.keys_complete();
            let mut keys: Vec<FlowKey> = st.known.iter().copied().collect();
            keys.sort_unstable();
            let (counts, solved) = if keys_complete {
                counter_decode(st.fs, &keys)
            } else {
                (vec![None; keys.len()], false)
            };
            SwitchResult {
                flows: keys
                    .iter()
                    .zip(counts)
                    .map(|(k, c)| FlowCounters {
                        key: *k,
                        packets: c.map(|c| c.0),
                        bytes: c.map(|c| c.1),
                    })
                    .collect(),
                keys_complete,
                counters_complete: keys_complete && solved,
            }
        })
        .collect();
    let counter_decode_time = t2.elapsed();
    NetworkResult {
        single,
        switches,
        single_time,
        flow_decode_time,
        counter_decode_time,
        undone_removals,
    }
}

/// Solves a switch's counters given all of its flows. Returns per flow (packets, bytes), and
/// whether every flow was solved with every equation satisfied.
pub fn counter_decode(fs: &FlowSet, keys: &[FlowKey]) -> (Vec<Option<(u64, u64)>>, bool) {
    let cells = fs.cells();
    let n = keys.len();
    let flow_cells: Vec<Vec<usize>> = keys.iter().map(|k| fs.cells_of(k).collect()).collect();
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (f, cs) in flow_cells.iter().enumerate() {
        for &c in cs {
            members.entry(c).or_default().push(f);
        }
    }
    let mut residual: Vec<[i64; 2]> = cells
        .iter()
        .map(|c| [i64::from(c.packets), c.bytes as i64])
        .collect();
    let mut unknown_in: HashMap<usize, usize> =
        members.iter().map(|(c, fs)| (*c, fs.len())).collect();
    let mut value: Vec<Option<[i64; 2]>> = vec![None; n];
    // Peeling: a cell with one unknown flow gives it.
    let mut queue: Vec<usize> = unknown_in
        .iter()
        .filter(|(_, u)| **u == 1)
        .map(|(c, _)| *c)
        .collect();
    while let Some(c) = queue.pop() {
        if unknown_in[&c] != 1 {
            continue;
        }
        let Some(&f) = members[&c].iter().find(|&&f| value[f].is_none()) else {
            continue;
        };
        let v = residual[c];
        value[f] = Some(v);
        for &d in &flow_cells[f] {
            residual[d][0] -= v[0];
            residual[d][1] -= v[1];
            let u = unknown_in.get_mut(&d).expect("member cell");
            *u -= 1;
            if *u == 1 {
                queue.push(d);
            }
        }
    }
    // What peeling left: conjugate gradients on the remaining unknowns.
    let rest: Vec<usize> = (0..n).filter(|&f| value[f].is_none()).collect();
    if !rest.is_empty() {
        for dim in 0..2 {
            if let Some(sol) = solve_integer(&rest, &flow_cells, &residual, dim) {
                for (&f, v) in rest.iter().zip(sol) {
                    let mut cur = value[f].unwrap_or([0, 0]);
                    cur[dim] = v;
                    value[f] = Some(cur);
                }
            } else {
                for &f in &rest {
                    value[f] = None;
                }
                break;
            }
        }
        for &f in &rest {
            if let Some(v) = value[f] {
                for &d in &flow_cells[f] {
                    residual[d][0] -= v[0];
                    residual[d][1] -= v[1];
                }
            }
        }
    }
    let consistent = residual.iter().all(|r| r[0] == 0 && r[1] == 0);
    let all =
        value.iter().all(Option::is_some) && value.iter().flatten().all(|v| v[0] >= 0 && v[1] >= 0);
    let out = value
        .into_iter()
        .map(|v| {
            v.filter(|v| v[0] >= 0 && v[1] >= 0)
                .map(|v| (v[0] as u64, v[1] as u64))
        })
        .collect();
    (out, consistent && all)
}

/// Unknowns above which the uniqueness check is not attempted (the core is left unsolved).
const RANK_LIMIT: usize = 4096;

/// Whether the 0/1 matrix with these columns (row indices per column) has full column rank
/// over GF(2), which implies full rank over the rationals: the solution is then unique.
fn full_column_rank_gf2(cols: &[Vec<usize>], rows: usize) -> bool {
    let n = cols.len();
    if n > rows {
        return false;
    }
    let words = n.div_ceil(64);
    let mut m = vec![0u64; rows * words];
    for (j, rs) in cols.iter().enumerate() {
        for &r in rs {
            m[r * words + j / 64] ^= 1 << (j % 64);
        }
    }
    // Every column must give a pivot, so the rank so far equals the column number.
    for col in 0..n {
        let rank = col;
        let (w, bit) = (col / 64, 1u64 << (col % 64));
        let Some(p) = (rank..rows).find(|&r| m[r * words + w] & bit != 0) else {
            return false;
        };
        if p != rank {
            for k in 0..words {
                m.swap(p * words + k, rank * words + k);
            }
        }
        for r in 0..rows {
            if r != rank && m[r * words + w] & bit != 0 {
                for k in w..words {
                    let v = m[rank * words + k];
                    m[r * words + k] ^= v;
                }
            }
        }
    }
    true
}

/// Unknowns up to which the dense rank check modulo a large prime runs.
const PRIME_RANK_LIMIT: usize = 800;

/// Whether the 0/1 matrix has full column rank modulo the prime 2^61 - 1 (which implies full
/// rank over the rationals). Catches what GF(2) misses, e.g. cores where every row has two
/// ones.
fn full_column_rank_prime(cols: &[Vec<usize>], rows: usize) -> bool {
    const P: u64 = (1 << 61) - 1;
    let mulmod = |a: u64, b: u64| -> u64 {
        let p = u128::from(a) * u128::from(b);
        let r = (p & u128::from(P)) as u64 + (p >> 61) as u64;
        if r >= P { r - P } else { r }
    };
    let powmod = |mut a: u64, mut e: u64| -> u64 {
        let mut r = 1;
        while e > 0 {
            if e & 1 == 1 {
                r = mulmod(r, a);
            }
            a = mulmod(a, a);
            e >>= 1;
        }
        r
    };
    let n = cols.len();
    if n > rows {
        return false;
    }
    if n > PRIME_RANK_LIMIT {
        return false;
    }
    let mut m = vec![0u64; rows * n];
    for (j, rs) in cols.iter().enumerate() {
        for &r in rs {
            m[r * n + j] += 1;
        }
    }
    for (rank, col) in (0..n).enumerate() {
        let Some(p) = (rank..rows).find(|&r| m[r * n + col] != 0) else {
            return false;
        };
        if p != rank {
            for k in 0..n {
                m.swap(p * n + k, rank * n + k);
            }
        }
        let inv = powmod(m[rank * n + col], P - 2);
        for r in rank + 1..rows {
            let f = m[r * n + col];
            if f == 0 {
                continue;
            }
            let factor = mulmod(f, inv);
            for k in col..n {
                let sub = mulmod(factor, m[rank * n + k]);
                let v = m[r * n + k];
                m[r * n + k] = if v >= sub { v - sub } else { v + P - sub };
            }
        }
    }
    true
}

/// Solves `A x = b` for the unknown flows `rest` (columns; rows are the cells they touch) by
/// CGLS, returning the first rounded iterate that is a non-negative integer solution, and
/// only when the matrix has full column rank (so that solution is the only one).
fn solve_integer(
    rest: &[usize],
    flow_cells: &[Vec<usize>],
    residual: &[[i64; 2]],
    dim: usize,
) -> Option<Vec<i64>> {
    let mut row_of: HashMap<usize, usize> = HashMap::new();
    for &f in rest {
        for &c in &flow_cells[f] {
            let next = row_of.len();
            row_of.entry(c).or_insert(next);
        }
    }
    let rows = row_of.len();
    let cols: Vec<Vec<usize>> = rest
        .iter()
        .map(|&f| flow_cells[f].iter().map(|c| row_of[c]).collect())
        .collect();
    if cols.len() > RANK_LIMIT
        || !(full_column_rank_gf2(&cols, rows) || full_column_rank_prime(&cols, rows))
    {
        return None;
    }
    let mut b = vec![0.0f64; rows];
    for (c, &r) in &row_of {
        b[r] = residual[*c][dim] as f64;
    }
    let apply = |x: &[f64], out: &mut Vec<f64>| {
        out.iter_mut().for_each(|v| *v = 0.0);
        for (j, rs) in cols.iter().enumerate() {
            for &r in rs {
                out[r] += x[j];
            }
        }
    };
    let apply_t = |y: &[f64], out: &mut Vec<f64>| {
        for (j, rs) in cols.iter().enumerate() {
            out[j] = rs.iter().map(|&r| y[r]).sum();
        }
    };
    let n = cols.len();
    let mut x = vec![0.0; n];
    let mut r = b.clone();
    let mut s = vec![0.0; n];
    apply_t(&r, &mut s);
    let mut p = s.clone();
    let mut gamma: f64 = s.iter().map(|v| v * v).sum();
    let mut q = vec![0.0; rows];
    let check = |x: &[f64]| -> Option<Vec<i64>> {
        let xi: Vec<i64> = x.iter().map(|v| v.round() as i64).collect();
        if xi.iter().any(|&v| v < 0) {
            return None;
        }
        let mut ax = vec![0i64; rows];
        for (j, rs) in cols.iter().enumerate() {
            for &r in rs {
                ax[r] += xi[j];
            }
        }
        ax.iter()
            .zip(&b)
            .all(|(a, bb)| *a as f64 == *bb)
            .then_some(xi)
    };
    for it in 0..(4 * n + 100) {
        if it % 4 == 0
            && let Some(sol) = check(&x)
        {
            return Some(sol);
        }
        if gamma < 1e-18 {
            break;
        }
        apply(&p, &mut q);
        let qq: f64 = q.iter().map(|v| v * v).sum();
        if qq == 0.0 {
            break;
        }
        let alpha = gamma / qq;
        for j in 0..n {
            x[j] += alpha * p[j];
        }
        for i in 0..rows {
            r[i] -= alpha * q[i];
        }
        apply_t(&r, &mut s);
        let g2: f64 = s.iter().map(|v| v * v).sum();
        let beta = g2 / gamma;
        gamma = g2;
        for j in 0..n {
            p[j] = s[j] + beta * p[j];
        }
    }
    check(&x)
}

#[cfg(test)]
mod tests;

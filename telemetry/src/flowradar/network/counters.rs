//! CounterDecode: a switch's packet and byte counters once all of its flows are known.
//!
//! The counters form a sparse linear system: one equation per cell, one unknown per flow,
//! `k` ones per column. A cell whose unresolved flows are down to one gives that flow's
//! counters, provided the cell's check (the sum of its packets' flow fingerprints) confirms
//! that the rest of the cell is that flow's alone; the flow is then removed from its other
//! cells (peeling). What peeling cannot reach is attempted two ways:
//!
//! - Hints: the flow's counters decoded at another switch. Without loss on the way they are
//!   the same; each hint is taken tentatively, peeling continues, and the result is kept only
//!   if every flow is then resolved and every cell's packets, bytes and check come out at
//!   exactly zero. A wrong packet count shows in the check of the next cell peeled through
//!   the flow (its fingerprint differs from the other flow's), so a wrong hint is rejected
//!   rather than spread; bytes are only ever taken together with a packet count that passed.
//! - Conjugate gradients on the normal equations, from two starts (a uniqueness
//!   certificate), stopping at the first rounded iterate that is a non-negative integer
//!   vector satisfying every equation exactly.

use rustc_hash::FxHashMap;

use crate::flowradar::check;
use crate::flowradar::flowset::FlowSet;
use crate::flowradar::key::FlowKey;
use crate::flowradar::prefetch;

/// A switch's counters as a linear system over its known flows, with the peeling state.
#[derive(Debug, Clone)]
pub(crate) struct CounterSystem {
    k: usize,
    /// Per flow, its `k` cells (flat, stride `k`).
    cells_of: Vec<u32>,
    /// Per flow, its fingerprint.
    fps: Vec<u16>,
    state: PeelState,
}

/// A cell of the system: what its unresolved flows still have to explain.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct Residual {
    packets: i64,
    bytes: i64,
    /// XOR of the numbers of the unresolved flows: the flow itself when one is left.
    flows_xor: u32,
    /// Unresolved flows.
    unknown: u32,
    check: u16,
}

/// How many flows ahead a sweep over flows prefetches their cells.
const PREFETCH_AHEAD: usize = 8;

/// Marks a flow not yet resolved in [`PeelState::value`].
const UNRESOLVED: (i64, i64) = (i64::MIN, i64::MIN);

/// What changes while peeling (kept apart so that a tentative step can be undone).
#[derive(Debug, Clone)]
struct PeelState {
    /// Per flow, (packets, bytes) once resolved, else [`UNRESOLVED`].
    value: Vec<(i64, i64)>,
    cells: Vec<Residual>,
    resolved: usize,
}

impl CounterSystem {
    /// The system of flowset `fs` whose flows are `keys` (all of them), peeled as far as the
    /// cells alone allow.
    pub fn new(fs: &FlowSet, keys: &[FlowKey]) -> CounterSystem {
        let k = usize::from(fs.hashes());
        let mut cells_of = Vec::with_capacity(keys.len() * k);
        let mut fps = Vec::with_capacity(keys.len());
        for key in keys {
            let (at, fp) = fs.locate(key);
            cells_of.extend(at[..k].iter().map(|&c| c as u32));
            fps.push(fp);
        }
        CounterSystem::from_located(fs, cells_of, fps)
    }

    /// As [`CounterSystem::new`], from each flow's cells (`k` per flow) and fingerprint.
    pub fn from_located(fs: &FlowSet, cells_of: Vec<u32>, fps: Vec<u16>) -> CounterSystem {
        let k = usize::from(fs.hashes());
        debug_assert_eq!(cells_of.len(), fps.len() * k);
        let flows = fps.len();
        let mut sys = CounterSystem {
            k,
            cells_of,
            fps,
            state: PeelState {
                value: vec![UNRESOLVED; flows],
                cells: Vec::new(),
                resolved: 0,
            },
        };
        sys.start(fs);
        sys
    }

    /// Sets the state to the cells alone, peeled as far as they allow. Attempts with hints
    /// start from this state, and one that fails comes back to it the same way (cheaper
    /// than keeping a copy of every state tried: attempts mostly succeed).
    fn start(&mut self, fs: &FlowSet) {
        let k = self.k;
        let cells_of = &self.cells_of;
        let mut cells: Vec<Residual> = fs
            .cells()
            .iter()
            .map(|c| Residual {
                packets: i64::from(c.packets),
                bytes: c.bytes as i64,
                flows_xor: 0,
                unknown: 0,
                check: c.check,
            })
            .collect();
        for (f, at) in cells_of.chunks_exact(k).enumerate() {
            if let Some(ahead) =
                cells_of.get((f + PREFETCH_AHEAD) * k..(f + PREFETCH_AHEAD + 1) * k)
            {
                ahead.iter().for_each(|&c| prefetch(&cells[c as usize]));
            }
            for &c in at {
                let cell = &mut cells[c as usize];
                cell.unknown += 1;
                cell.flows_xor ^= f as u32;
            }
        }
        self.state.value.fill(UNRESOLVED);
        self.state.cells = cells;
        self.state.resolved = 0;
        let queue: Vec<u32> = (0..self.state.cells.len() as u32)
            .filter(|&c| self.state.cells[c as usize].unknown == 1)
            .collect();
        self.peel(queue);
    }

    /// Flows in the system.
    pub fn flows(&self) -> usize {
        self.fps.len()
    }

    /// Whether every flow is resolved and every cell explained exactly.
    pub fn solved(&self) -> bool {
        self.state.resolved == self.flows() && self.leftover_cells() == 0
    }

    /// Per flow, its counters if resolved (negative values, which no true count has, are
    /// left out).
    pub fn values(&self) -> impl Iterator<Item = Option<(u64, u64)>> + '_ {
        self.state
            .value
            .iter()
            .map(|&v| (v != UNRESOLVED && v.0 >= 0 && v.1 >= 0).then_some((v.0 as u64, v.1 as u64)))
    }

    fn cells(&self, f: usize) -> &[u32] {
        &self.cells_of[f * self.k..(f + 1) * self.k]
    }

    fn is_resolved(&self, f: usize) -> bool {
        self.state.value[f] != UNRESOLVED
    }

    /// Records flow `f`'s counters and removes them from its cells.
    #[inline]
    fn resolve(&mut self, f: usize, v: (i64, i64), queue: &mut Vec<u32>) {
        let st = &mut self.state;
        st.value[f] = v;
        st.resolved += 1;
        let weight = check::times(self.fps[f], v.0);
        for &d in &self.cells_of[f * self.k..(f + 1) * self.k] {
            let cell = &mut st.cells[d as usize];
            cell.packets -= v.0;
            cell.bytes -= v.1;
            cell.check = check::sub(cell.check, weight);
            cell.unknown -= 1;
            cell.flows_xor ^= f as u32;
            if cell.unknown == 1 {
                queue.push(d);
            }
        }
    }

    /// Peels cells with one unresolved flow whose check confirms the counters are its own.
    fn peel(&mut self, mut queue: Vec<u32>) {
        while let Some(c) = queue.pop() {
            let cell = self.state.cells[c as usize];
            if cell.unknown != 1 {
                continue;
            }
            let f = cell.flows_xor as usize;
            if !check::fits(cell.check, cell.packets, self.fps[f]) {
                continue; // a hidden flow's counters are mixed in here
            }
            self.resolve(f, (cell.packets, cell.bytes), &mut queue);
        }
    }

    /// Cells whose flows are all resolved yet counters remain.
    fn leftover_cells(&self) -> usize {
        self.state
            .cells
            .iter()
            .filter(|c| c.unknown == 0 && (c.packets != 0 || c.bytes != 0 || c.check != 0))
            .count()
    }

    /// Tries the counters `hint` gives for unresolved flows (see the module doc); keeps them
    /// only if the whole system then comes out exact, else goes back to the peeled state of
    /// flowset `fs` (the system's own). Returns whether it is solved.
    pub fn solve_with_hints(
        &mut self,
        fs: &FlowSet,
        hint: impl Fn(usize) -> Option<(u64, u64)>,
    ) -> bool {
        if self.solved() {
            return true;
        }
        // The hints first, in one pass: their loads overlap instead of stalling each step.
        let hinted: Vec<(u32, (i64, i64))> = (0..self.flows())
            .filter(|&f| !self.is_resolved(f))
            .filter_map(|f| {
                let (p, b) = hint(f)?;
                Some((f as u32, (i64::try_from(p).ok()?, i64::try_from(b).ok()?)))
            })
            .collect();
        if hinted.is_empty() {
            return false;
        }
        // All hints first (their cells prefetched), then peeling what they free.
        let mut queue = Vec::new();
        for (i, &(f, v)) in hinted.iter().enumerate() {
            if let Some(&(ahead, _)) = hinted.get(i + PREFETCH_AHEAD) {
                for &c in self.cells(ahead as usize) {
                    prefetch(&self.state.cells[c as usize]);
                }
            }
            self.resolve(f as usize, v, &mut queue);
        }
        self.peel(queue);
        self.keep_if_exact(fs)
    }

    /// Like [`CounterSystem::solve_with_hints`], for hints that may be wrong for some flows
    /// (packets lost between switches): each flow's candidates are tried one flow at a time,
    /// and a candidate is taken only when a cell the flow shares with exactly one other
    /// unresolved flow confirms it. That cell's packets and check are then two equations in
    /// the two flows' packet counts, so a wrong count for the first shows as a check that
    /// does not fit the second (unless the difference times the two fingerprints' difference
    /// is a multiple of the check's prime modulus). The result is kept only if the whole system comes out exact.
    pub fn solve_with_checked_hints(
        &mut self,
        fs: &FlowSet,
        hint: impl Fn(usize) -> [Option<(u64, u64)>; 2],
    ) -> bool {
        if self.solved() {
            return true;
        }
        let mut open: Vec<u32> = (0..self.flows() as u32)
            .filter(|&f| {
                !self.is_resolved(f as usize) && hint(f as usize).iter().any(Option::is_some)
            })
            .collect();
        let mut queue = Vec::new();
        loop {
            let before = open.len();
            open.retain(|&f| {
                let f = f as usize;
                if self.is_resolved(f) {
                    return false;
                }
                let Some(c) = self
                    .cells(f)
                    .iter()
                    .map(|&c| c as usize)
                    .find(|&c| self.state.cells[c].unknown == 2)
                else {
                    return true; // not yet checkable
                };
                let cell = self.state.cells[c];
                let g = (cell.flows_xor ^ f as u32) as usize;
                for (p, b) in hint(f).into_iter().flatten() {
                    let (Ok(p), Ok(b)) = (i64::try_from(p), i64::try_from(b)) else {
                        continue;
                    };
                    let rest_packets = cell.packets - p;
                    let rest_check = check::sub(cell.check, check::times(self.fps[f], p));
                    if check::fits(rest_check, rest_packets, self.fps[g]) {
                        self.resolve(f, (p, b), &mut queue);
                        self.peel(std::mem::take(&mut queue));
                        return false;
                    }
                }
                true
            });
            if open.is_empty() || open.len() == before {
                break;
            }
        }
        self.keep_if_exact(fs)
    }

    /// Keeps the current state if the system is solved with non-negative counters
    /// everywhere; otherwise goes back to the peeled state of `fs`. Returns whether it kept
    /// it.
    fn keep_if_exact(&mut self, fs: &FlowSet) -> bool {
        let exact = self.solved()
            && self
                .state
                .value
                .iter()
                .all(|v| *v != UNRESOLVED && v.0 >= 0 && v.1 >= 0);
        if !exact {
            self.start(fs);
        }
        exact
    }

    /// Conjugate gradients on what peeling left (see the module doc). Returns whether the
    /// system is solved.
    pub fn solve_numerically(&mut self) -> bool {
        if self.solved() {
            return true;
        }
        let rest: Vec<usize> = (0..self.flows())
            .filter(|&f| !self.is_resolved(f))
            .collect();
        if rest.is_empty() || rest.len() > MAX_CG_UNKNOWNS {
            return false;
        }
        let cols: Vec<&[u32]> = rest.iter().map(|&f| self.cells(f)).collect();
        let cells = &self.state.cells;
        let solved = solve_integer(&cols, |c| cells[c].packets)
            .and_then(|p| solve_integer(&cols, |c| cells[c].bytes).map(|b| (p, b)));
        let Some((p, b)) = solved else { return false };
        let saved = self.state.clone();
        let mut queue = Vec::new();
        for (i, &f) in rest.iter().enumerate() {
            self.resolve(f, (p[i], b[i]), &mut queue);
        }
        // The checks must now come out even too.
        if !self.solved() {
            self.state = saved;
            return false;
        }
        true
    }
}

/// Solves a switch's counters given all of its flows, without hints. Returns per flow
/// (packets, bytes), and whether every flow was solved and every cell explained.
pub fn counter_decode(fs: &FlowSet, keys: &[FlowKey]) -> (Vec<Option<(u64, u64)>>, bool) {
    let mut sys = CounterSystem::new(fs, keys);
    let solved = sys.solve_numerically();
    (sys.values().collect(), solved)
}

/// Most conjugate-gradient iterations per solve.
const MAX_CG_ITERATIONS: usize = 5000;
/// Unknowns beyond which the conjugate-gradient stage is not tried (their counters are left
/// unknown): near the linear-system threshold a core this large rarely converges and would
/// take seconds.
const MAX_CG_UNKNOWNS: usize = 20_000;

/// Solves `A x = b` for the unknown flows (`cols`: each flow's cells; rows are the cells
/// they touch, `residual` the right-hand side per cell): the unique non-negative integer
/// solution, or None. CGLS runs from two starts, zero and a random point; each stops at the
/// first rounded iterate that satisfies every equation exactly. CGLS keeps the start's
/// component in the null space of `A`, so if the solution were not unique the two runs would
/// (with overwhelming probability) end at different vectors; identical results certify
/// uniqueness.
fn solve_integer(cols: &[&[u32]], residual: impl Fn(usize) -> i64) -> Option<Vec<i64>> {
    let mut row_of: FxHashMap<u32, usize> = FxHashMap::default();
    for cs in cols {
        for &c in cs.iter() {
            let next = row_of.len();
            row_of.entry(c).or_insert(next);
        }
    }
    let rows: Vec<Vec<usize>> = cols
        .iter()
        .map(|cs| cs.iter().map(|c| row_of[c]).collect())
        .collect();
    let mut b = vec![0.0f64; row_of.len()];
    for (&c, &r) in &row_of {
        b[r] = residual(c as usize) as f64;
    }
    let a = cgls_integer(&rows, &b, None)?;
    let seed = 0x5eed ^ cols.len() as u64;
    let c = cgls_integer(&rows, &b, Some(seed))?;
    (a == c).then_some(a)
}

/// One CGLS run (see [`solve_integer`]) from zero or from a random start of large entries.
fn cgls_integer(cols: &[Vec<usize>], b: &[f64], start: Option<u64>) -> Option<Vec<i64>> {
    let rows = b.len();
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
    let mut r = b.to_vec();
    if let Some(seed) = start {
        let mut rng = crate::sim_rng::SimRng::new(seed);
        x.iter_mut().for_each(|v| *v = 1000.0 + 9000.0 * rng.unit());
        let mut ax = vec![0.0; rows];
        apply(&x, &mut ax);
        r.iter_mut().zip(&ax).for_each(|(r, a)| *r -= a);
    }
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
            .zip(b)
            .all(|(a, bb)| *a as f64 == *bb)
            .then_some(xi)
    };
    let mut gamma_before = gamma;
    for it in 0..(4 * n + 100).min(MAX_CG_ITERATIONS) {
        if it % 4 == 0
            && let Some(sol) = check(&x)
        {
            return Some(sol);
        }
        // A system with a unique solution converges steadily; one whose normal-equation
        // residual has not fallen tenfold in 250 iterations is not going to give an exact
        // integer solution in time.
        if it > 0 && it % 250 == 0 {
            if gamma > 0.1 * gamma_before {
                break;
            }
            gamma_before = gamma;
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

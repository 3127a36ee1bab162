//! SingleDecode: peel pure cells of one flowset. A cell is pure when it holds one flow
//! (FlowCount 1) and the key in FlowXor hashes back to that very cell; its counters are then
//! the flow's, and the flow is removed from its other cells, which may become pure in turn.

use crate::flowradar::check;
use crate::flowradar::flowset::{Cell, FlowSet, MAX_HASHES};
use crate::flowradar::key::FlowKey;
use crate::flowradar::prefetch;

/// A decoded flow and its counters at one switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodedFlow {
    /// The flow.
    pub key: FlowKey,
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// What SingleDecode found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeResult {
    /// The flows peeled, with their counters.
    pub flows: Vec<DecodedFlow>,
    /// Whether every cell emptied, counters included: every flow of the flowset was decoded
    /// with exact counters.
    pub complete: bool,
    /// Cells still holding flows.
    pub remaining_cells: usize,
}

/// A working copy of a counting table for peeling. Counters use wrapping arithmetic: a value
/// "below zero" wraps, and only comparisons with zero and one (and exact reads from pure
/// cells) matter. One struct per cell keeps a flow's updates to one cache line per cell.
#[derive(Debug, Clone, Default)]
pub(crate) struct Work {
    pub cells: Vec<Cell>,
}

impl Work {
    /// The key of cell `i`, its cells and its fingerprint, if its key part is pure: one flow
    /// whose key hashes back to this cell.
    #[inline]
    pub fn pure(
        &self,
        fs: &FlowSet,
        i: usize,
    ) -> Option<(FlowKey, [usize; MAX_HASHES as usize], u16)> {
        let c = &self.cells[i];
        if c.flow_count != 1 {
            return None;
        }
        let key = FlowKey::from_u128(c.key_xor)?;
        let (cells, fp) = fs.locate(&key);
        (cells[fs.table_of(i) as usize] == i).then_some((key, cells, fp))
    }

    /// Cells whose key part is not empty.
    pub fn key_cells(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.flow_count != 0 || c.key_xor != 0)
            .count()
    }

    /// Cells whose counters are not empty.
    pub fn counter_cells(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.packets != 0 || c.bytes != 0 || c.check != 0)
            .count()
    }
}

/// Decodes one flowset on its own.
///
/// Keys are peeled from cells that hold one flow; a flow's counters are taken from that cell
/// when its check shows the counters are the flow's alone. Packets of a flow the filter hid
/// (a false positive on its first packet) fail that check: the flows they touch get their
/// counters from other cells afterwards, and the hidden packets stay behind, marking the
/// decode incomplete instead of corrupting other flows' counters.
pub fn single_decode(fs: &FlowSet) -> DecodeResult {
    SingleDecoder::default().decode(fs)
}

/// A SingleDecode that keeps its buffers between flowsets (a collector decodes one flowset
/// per switch per epoch; reusing the working copy avoids faulting in megabytes each time).
#[derive(Debug, Clone, Default)]
pub struct SingleDecoder {
    work: Work,
    queue: Vec<usize>,
    keys: Vec<FlowKey>,
    counters: Vec<Option<(i64, i64)>>,
}

impl SingleDecoder {
    /// Decodes one flowset (see [`single_decode`]).
    pub fn decode(&mut self, fs: &FlowSet) -> DecodeResult {
        if fs.is_clear() {
            // A quiet epoch: no flow, nothing to look at.
            return DecodeResult {
                complete: true,
                flows: Vec::new(),
                remaining_cells: 0,
            };
        }
        self.peel(fs);
        let key_cells = self.work.key_cells();
        let pending: Vec<usize> = (0..self.keys.len())
            .filter(|&f| self.counters[f].is_none())
            .collect();
        let leftover = if pending.is_empty() && key_cells == 0 {
            self.work.counter_cells()
        } else {
            let keys: Vec<FlowKey> = pending.iter().map(|&f| self.keys[f]).collect();
            let cp = CounterPeel::from_residual(fs, &keys, &self.work);
            for (i, &f) in pending.iter().enumerate() {
                self.counters[f] = cp.value[i];
            }
            cp.leftover_cells()
        };
        let flows = self
            .keys
            .iter()
            .zip(&self.counters)
            .filter_map(|(k, v)| {
                v.filter(|v| v.0 >= 0 && v.1 >= 0)
                    .map(|(a, b)| DecodedFlow {
                        key: *k,
                        packets: a as u64,
                        bytes: b as u64,
                    })
            })
            .collect::<Vec<_>>();
        let complete = key_cells == 0 && leftover == 0 && flows.len() == self.keys.len();
        DecodeResult {
            complete,
            flows,
            remaining_cells: key_cells + leftover,
        }
    }

    fn peel(&mut self, fs: &FlowSet) {
        /// Pure cells examined together, so that their flows' cells are fetched from memory
        /// in parallel rather than one cache miss after another.
        const BATCH: usize = 16;
        let w = &mut self.work;
        w.cells.clear();
        w.cells.extend_from_slice(fs.cells());
        let k = usize::from(fs.hashes());
        let queue = &mut self.queue;
        queue.clear();
        queue.extend((0..w.cells.len()).filter(|&i| w.cells[i].flow_count == 1));
        self.keys.clear();
        self.counters.clear();
        let mut batch: [(usize, FlowKey, [usize; MAX_HASHES as usize], u16); BATCH] =
            [(0, FlowKey::default(), [0; MAX_HASHES as usize], 0); BATCH];
        while !queue.is_empty() {
            let mut n = 0;
            while n < BATCH {
                let Some(i) = queue.pop() else { break };
                if let Some((key, cells, fp)) = w.pure(fs, i) {
                    for &c in &cells[..k] {
                        prefetch(&w.cells[c]);
                    }
                    batch[n] = (i, key, cells, fp);
                    n += 1;
                }
            }
            for &(i, key, cells, fp) in &batch[..n] {
                // An earlier flow of the batch may have shared this cell: check again.
                let pc = w.cells[i];
                let x = key.to_u128();
                if pc.flow_count != 1 || pc.key_xor != x {
                    continue;
                }
                let counts = check::fits(pc.check, i64::from(pc.packets), fp)
                    .then_some((pc.packets, pc.bytes));
                for &c in &cells[..k] {
                    let cell = &mut w.cells[c];
                    cell.key_xor ^= x;
                    cell.flow_count = cell.flow_count.wrapping_sub(1);
                    if let Some((p, b)) = counts {
                        cell.packets = cell.packets.wrapping_sub(p);
                        cell.bytes = cell.bytes.wrapping_sub(b);
                        cell.check = check::sub(cell.check, check::times(fp, i64::from(p)));
                    }
                    if cell.flow_count == 1 {
                        queue.push(c);
                    }
                }
                self.keys.push(key);
                self.counters
                    .push(counts.map(|(p, b)| (i64::from(p), b as i64)));
            }
        }
    }
}

/// Counters of known flows by peeling: a cell whose unresolved flows are down to one flow,
/// and whose check confirms the counters are that flow's alone, gives that flow's counters.
#[derive(Debug, Clone)]
pub(crate) struct CounterPeel {
    /// Per flow, (packets, bytes) once resolved.
    pub value: Vec<Option<(i64, i64)>>,
    /// Per flow, its cells.
    pub cells_of: Vec<Vec<usize>>,
    /// Per flow, its fingerprint.
    pub fps: Vec<u16>,
    /// Per cell, counters not yet explained by resolved flows.
    pub packets: Vec<i64>,
    /// As above, bytes.
    pub bytes: Vec<i64>,
    /// As above, the check.
    pub check: Vec<u16>,
    /// Per cell, unresolved flows.
    pub unknown: Vec<u32>,
}

impl CounterPeel {
    /// Peels the counters of `keys`, which with the flows already subtracted from `rest`
    /// are all the flows of the table.
    pub fn from_residual(fs: &FlowSet, keys: &[FlowKey], rest: &Work) -> CounterPeel {
        let k = usize::from(fs.hashes());
        let mut fps = Vec::with_capacity(keys.len());
        let mut cells_of = Vec::with_capacity(keys.len());
        for key in keys {
            let (cells, fp) = fs.locate(key);
            fps.push(fp);
            cells_of.push(cells[..k].to_vec());
        }
        let mut members: rustc_hash::FxHashMap<usize, Vec<u32>> = rustc_hash::FxHashMap::default();
        for (f, cs) in cells_of.iter().enumerate() {
            for &c in cs {
                members.entry(c).or_default().push(f as u32);
            }
        }
        let mut unknown = vec![0u32; rest.cells.len()];
        for (c, m) in &members {
            unknown[*c] = m.len() as u32;
        }
        let mut p = CounterPeel {
            value: vec![None; keys.len()],
            unknown,
            cells_of,
            fps,
            packets: rest
                .cells
                .iter()
                .map(|c| i64::from(c.packets as i32))
                .collect(),
            bytes: rest.cells.iter().map(|c| c.bytes as i64).collect(),
            check: rest.cells.iter().map(|c| c.check).collect(),
        };
        let mut queue: Vec<usize> = members
            .iter()
            .filter(|(_, m)| m.len() == 1)
            .map(|(c, _)| *c)
            .collect();
        while let Some(c) = queue.pop() {
            if p.unknown[c] != 1 {
                continue;
            }
            let Some(&f) = members[&c].iter().find(|&&f| p.value[f as usize].is_none()) else {
                continue;
            };
            let f = f as usize;
            // The cell must hold no flow but the known ones: its key part empty, and the
            // check confirming the rest is one flow's.
            let r = &rest.cells[c];
            if r.flow_count != 0 || r.key_xor != 0 {
                continue;
            }
            if !check::fits(p.check[c], p.packets[c], p.fps[f]) {
                continue; // a hidden flow's counters are mixed in here
            }
            let v = (p.packets[c], p.bytes[c]);
            p.resolve(f, v, &mut queue);
        }
        p
    }

    /// Records flow `f`'s counters and removes them from its cells.
    pub fn resolve(&mut self, f: usize, v: (i64, i64), queue: &mut Vec<usize>) {
        self.value[f] = Some(v);
        for &d in &self.cells_of[f] {
            self.packets[d] -= v.0;
            self.bytes[d] -= v.1;
            self.check[d] = check::sub(self.check[d], check::times(self.fps[f], v.0));
            self.unknown[d] -= 1;
            if self.unknown[d] == 1 {
                queue.push(d);
            }
        }
    }

    /// Cells whose flows are all resolved yet counters remain (a hidden flow is there).
    pub fn leftover_cells(&self) -> usize {
        (0..self.unknown.len())
            .filter(|&c| {
                self.unknown[c] == 0
                    && (self.packets[c] != 0 || self.bytes[c] != 0 || self.check[c] != 0)
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowradar::flowset::FlowSetConfig;
    use crate::sim_rng::SimRng;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src: 0x0a00_0000 | i,
            dst: 0x0b00_0000 | i.wrapping_mul(7),
            src_port: i as u16,
            dst_port: 80,
            protocol: 6,
        }
    }

    #[test]
    fn decodes_every_flow_with_exact_counters() {
        let n = 10_000u32;
        // A generous filter: a false positive would hide a flow's key (see FlowSet::update).
        let mut fs = FlowSet::new(&FlowSetConfig {
            filter_bits_per_flow: 32.0,
            ..FlowSetConfig::for_flows(n, 3)
        });
        let mut rng = SimRng::new(1);
        let mut truth = std::collections::HashMap::new();
        for i in 0..n {
            let pkts = 1 + rng.below(20) as u32;
            for _ in 0..pkts {
                let bytes = 64 + rng.below(1400) as u32;
                fs.update(&key(i), bytes);
                let e = truth.entry(key(i)).or_insert((0u64, 0u64));
                e.0 += 1;
                e.1 += u64::from(bytes);
            }
        }
        let r = single_decode(&fs);
        assert!(r.complete, "{} cells left", r.remaining_cells);
        assert_eq!(r.flows.len() as u64, u64::from(n));
        for f in &r.flows {
            assert_eq!(truth[&f.key], (f.packets, f.bytes), "{}", f.key);
        }
    }

    /// Packets of a flow the filter hid, in the one cell of a flowset whose key part holds
    /// another flow: a multiple of 4096 of them, from a flow whose fingerprint differs from
    /// the known flow's by a multiple of 16, never pass for the known flow's own (a check
    /// summed modulo 2^16 took them for its: such counts leave it 4 bits to tell them apart).
    #[test]
    fn a_hidden_flows_packets_never_pass_for_the_known_flows() {
        let cfg = FlowSetConfig {
            cells_per_flow: 1.0,
            hashes: 1,
            ..FlowSetConfig::for_flows(1, 1)
        };
        let mut known = FlowSet::new(&cfg);
        let a = key(1);
        known.add(&a, 10, 1000);
        let fa = known.fingerprint(&a);
        let mut tried = 0;
        for i in 2..20_000 {
            let b = key(i);
            let fb = known.fingerprint(&b);
            if fb == fa || !fb.wrapping_sub(fa).is_multiple_of(16) {
                continue;
            }
            tried += 1;
            for hidden in [4096u32, 8192, 65_536] {
                let mut cell = known.cells()[0];
                cell.packets += hidden;
                cell.bytes += u64::from(hidden) * 100;
                cell.check = check::add(cell.check, check::times(fb, i64::from(hidden)));
                let fs =
                    FlowSet::from_parts(known.filter().clone(), vec![cell], 1, known.table_seed())
                        .unwrap();
                let r = single_decode(&fs);
                assert!(!r.complete, "flow {b}'s {hidden} packets are left over");
                assert!(
                    r.flows.iter().all(|f| f.key != a || f.packets == 10),
                    "flow {b}'s {hidden} packets read as {a}'s: {:?}",
                    r.flows
                );
            }
        }
        assert!(tried > 100, "{tried} flows tried");
    }

    /// A cell that still holds an undecoded flow never gives a known flow its counters, even
    /// when its check happens to fit the known flow.
    #[test]
    fn counters_never_come_from_a_cell_with_an_undecoded_flow() {
        // One cell: every flow lands in it.
        let fs = FlowSet::new(&FlowSetConfig {
            cells_per_flow: 1.0,
            hashes: 1,
            ..FlowSetConfig::for_flows(1, 1)
        });
        let (a, b) = (key(1), key(2));
        let fp = fs.fingerprint(&a);
        let packets = 7u32;
        let rest = Work {
            cells: vec![Cell {
                key_xor: b.to_u128(),
                flow_count: 1,
                packets,
                bytes: 7000,
                check: check::times(fp, i64::from(packets)),
            }],
        };
        let cp = CounterPeel::from_residual(&fs, &[a], &rest);
        assert_eq!(cp.value, vec![None], "flow b's packets are in that cell");
        let clean = Work {
            cells: vec![Cell {
                key_xor: 0,
                flow_count: 0,
                ..rest.cells[0]
            }],
        };
        let cp = CounterPeel::from_residual(&fs, &[a], &clean);
        assert_eq!(cp.value, vec![Some((7, 7000))]);
    }

    #[test]
    fn overloaded_table_decodes_partially() {
        let mut fs = FlowSet::new(&FlowSetConfig::for_flows(1000, 4));
        for i in 0..2000 {
            fs.update(&key(i), 100);
        }
        let r = single_decode(&fs);
        assert!(!r.complete);
        assert!(r.flows.len() < 2000);
    }
}

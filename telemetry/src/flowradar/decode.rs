//! SingleDecode: peel pure cells of one flowset. A cell is pure when it holds one flow
//! (FlowCount 1) and the key in FlowXor hashes back to that very cell; its counters are then
//! the flow's, and the flow is removed from its other cells, which may become pure in turn.

use crate::flowradar::flowset::FlowSet;
use crate::flowradar::key::FlowKey;

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

/// A working copy of a counting table with wide signed counters, for peeling.
#[derive(Debug, Clone)]
pub(crate) struct Work {
    pub xor: Vec<u128>,
    pub count: Vec<i64>,
    pub packets: Vec<i64>,
    pub bytes: Vec<i64>,
    pub check: Vec<u16>,
}

impl Work {
    pub fn of(fs: &FlowSet) -> Work {
        let c = fs.cells();
        Work {
            xor: c.iter().map(|c| c.key_xor).collect(),
            count: c.iter().map(|c| i64::from(c.flow_count)).collect(),
            packets: c.iter().map(|c| i64::from(c.packets)).collect(),
            bytes: c.iter().map(|c| c.bytes as i64).collect(),
            check: c.iter().map(|c| c.check).collect(),
        }
    }

    /// The key of cell `i` if its key part is pure: one flow whose key hashes back to it.
    #[inline]
    pub fn pure(&self, fs: &FlowSet, i: usize) -> Option<FlowKey> {
        if self.count[i] != 1 {
            return None;
        }
        let key = FlowKey::from_u128(self.xor[i])?;
        (fs.cell_of(&key, fs.table_of(i)) == i).then_some(key)
    }
}

/// Decodes one flowset on its own.
///
/// Keys are peeled from cells that hold one flow. A flow's counters are read from one of its
/// cells whose check shows that cell's counters are the flow's alone; packets of a flow the
/// filter hid (a false positive on its first packet) then stay where they are instead of
/// being credited to another flow, and show as an incomplete decode.
pub fn single_decode(fs: &FlowSet) -> DecodeResult {
    let mut w = Work::of(fs);
    let mut queue: Vec<usize> = (0..w.count.len()).filter(|&i| w.count[i] == 1).collect();
    let mut keys: Vec<FlowKey> = Vec::new();
    while let Some(i) = queue.pop() {
        let Some(key) = w.pure(fs, i) else { continue };
        keys.push(key);
        let x = key.to_u128();
        for c in fs.cells_of(&key) {
            w.xor[c] ^= x;
            w.count[c] -= 1;
            if w.count[c] == 1 {
                queue.push(c);
            }
        }
    }
    let key_cells = (0..w.count.len())
        .filter(|&i| w.count[i] != 0 || w.xor[i] != 0)
        .count();
    // Counters: with every key of a cell known, peel counters cell by cell.
    let peel = CounterPeel::run(fs, &keys);
    let flows = keys
        .iter()
        .zip(&peel.value)
        .filter_map(|(k, v)| {
            v.filter(|v| v.0 >= 0 && v.1 >= 0)
                .map(|(p, b)| DecodedFlow {
                    key: *k,
                    packets: p as u64,
                    bytes: b as u64,
                })
        })
        .collect::<Vec<_>>();
    let leftover = peel.leftover_cells();
    DecodeResult {
        complete: key_cells == 0 && leftover == 0 && flows.len() == keys.len(),
        flows,
        remaining_cells: key_cells + leftover,
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
    pub fn run(fs: &FlowSet, keys: &[FlowKey]) -> CounterPeel {
        let w = Work::of(fs);
        let fps: Vec<u16> = keys.iter().map(|k| fs.fingerprint(k)).collect();
        let cells_of: Vec<Vec<usize>> = keys.iter().map(|k| fs.cells_of(k).collect()).collect();
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); w.count.len()];
        for (f, cs) in cells_of.iter().enumerate() {
            for &c in cs {
                members[c].push(f as u32);
            }
        }
        let mut p = CounterPeel {
            value: vec![None; keys.len()],
            unknown: members.iter().map(|m| m.len() as u32).collect(),
            cells_of,
            fps,
            packets: w.packets,
            bytes: w.bytes,
            check: w.check,
        };
        let mut queue: Vec<usize> = (0..p.unknown.len())
            .filter(|&c| p.unknown[c] == 1)
            .collect();
        while let Some(c) = queue.pop() {
            if p.unknown[c] != 1 {
                continue;
            }
            let Some(&f) = members[c].iter().find(|&&f| p.value[f as usize].is_none()) else {
                continue;
            };
            let f = f as usize;
            if p.check[c] != (p.packets[c] as u16).wrapping_mul(p.fps[f]) {
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
            self.check[d] = self.check[d].wrapping_sub((v.0 as u16).wrapping_mul(self.fps[f]));
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

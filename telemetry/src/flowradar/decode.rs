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
    /// Whether every cell emptied: every flow of the flowset was decoded.
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
}

impl Work {
    pub fn of(fs: &FlowSet) -> Work {
        let c = fs.cells();
        Work {
            xor: c.iter().map(|c| c.key_xor).collect(),
            count: c.iter().map(|c| i64::from(c.flow_count)).collect(),
            packets: c.iter().map(|c| i64::from(c.packets)).collect(),
            bytes: c.iter().map(|c| c.bytes as i64).collect(),
        }
    }

    /// The key of cell `i` if the cell is pure.
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
pub fn single_decode(fs: &FlowSet) -> DecodeResult {
    let mut w = Work::of(fs);
    let mut queue: Vec<usize> = (0..w.count.len()).filter(|&i| w.count[i] == 1).collect();
    let mut flows = Vec::new();
    let mut cells = Vec::with_capacity(usize::from(fs.hashes()));
    while let Some(i) = queue.pop() {
        let Some(key) = w.pure(fs, i) else { continue };
        let (p, b) = (w.packets[i], w.bytes[i]);
        flows.push(DecodedFlow {
            key,
            packets: p.max(0) as u64,
            bytes: b.max(0) as u64,
        });
        cells.clear();
        cells.extend(fs.cells_of(&key));
        let x = key.to_u128();
        for &c in &cells {
            w.xor[c] ^= x;
            w.count[c] -= 1;
            w.packets[c] -= p;
            w.bytes[c] -= b;
            if w.count[c] == 1 {
                queue.push(c);
            }
        }
    }
    let remaining_cells = (0..w.count.len())
        .filter(|&i| w.count[i] != 0 || w.xor[i] != 0)
        .count();
    DecodeResult {
        flows,
        complete: remaining_cells == 0,
        remaining_cells,
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

//! The encoded flowset of one switch (and one worker core) for one epoch: the flow filter and
//! the counting table (an invertible Bloom lookup table of `k` sub-tables).
//!
//! A packet of a new flow (the filter had not seen it) adds the key to FlowXor, one to
//! FlowCount, and its packet and bytes to PacketCount and ByteCount of one cell in each
//! sub-table; a later packet of the flow only adds to PacketCount and ByteCount. Cell `j` of
//! a key: with `F` the key hash ([`crate::hash::key_hash`]), `H_0 = mix64(F ^ seed_table)` and
//! `H_(i+1) = mix64(H_i)`, the 32-bit value `u_j` is the low (even `j`) or high (odd `j`) half
//! of `H_(j/2)`, and the index in sub-table `j` is `u_j * m >> 32` for `m` cells per
//! sub-table: independent positions, so two flows share all their cells only by chance (1 in
//! m^k). The key's fingerprint comes from the top 16 bits of `H_(k/2)`
//! ([`crate::flowradar::check::fingerprint`]: 1 to 65,520, for the cells' check modulo a prime).
//!
//! The data plane computes `F` once per packet and locates the flow's block and cells
//! ([`FlowSet::slots`]) a few packets ahead, prefetching them, before it counts the packet
//! ([`FlowSet::update_slots`]).

use crate::flowradar::check;
use crate::flowradar::filter::FlowFilter;
use crate::flowradar::key::FlowKey;
use crate::hash::{key_hash, mix64};

/// Flow-filter bits per expected flow by default. A false positive on a flow's first packet
/// hides its key; with 64 bits (8 bytes, under a fifth of the flowset) the rate is about
/// 1e-7, so 100K-flow flowsets decode completely for practically every seed.
pub const DEFAULT_FILTER_BITS: f64 = 64.0;

/// The flow filter's hash seed, the same on every switch: membership needs no per-switch
/// hashing (the counting tables do), and a shared hash lets the collector test a flow against
/// every switch's filter with one hash and one block position.
pub const FILTER_SEED: u64 = 0x464c_5452_4649_4c54;

/// Largest number of sub-tables.
pub const MAX_HASHES: u8 = 8;

/// How a flowset is sized and seeded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSetConfig {
    /// Flows expected per epoch.
    pub expected_flows: u32,
    /// Counting-table cells per expected flow (peeling succeeds above about 1.222 for k = 3).
    pub cells_per_flow: f64,
    /// Sub-tables, one cell each per flow (`k`, default 3).
    pub hashes: u8,
    /// Flow-filter bits per expected flow.
    pub filter_bits_per_flow: f64,
    /// Seed; each switch (and core) needs its own for network-wide decoding.
    pub seed: u64,
}

impl FlowSetConfig {
    /// The sizes a flowset of this configuration has: counting-table cells per sub-table
    /// and filter bits (before rounding up to whole blocks).
    pub fn sizes(&self) -> (u64, usize) {
        let cells = (f64::from(self.expected_flows.max(1)) * self.cells_per_flow).ceil() as u64;
        let per_table = cells.div_ceil(u64::from(self.hashes.max(1))).max(1);
        let filter_bits =
            (f64::from(self.expected_flows.max(1)) * self.filter_bits_per_flow).ceil() as usize;
        (per_table, filter_bits)
    }

    /// The defaults for `expected_flows` flows: 1.3 cells per flow, k = 3,
    /// [`DEFAULT_FILTER_BITS`] filter bits per flow, seed derived from `switch_id`.
    pub fn for_flows(expected_flows: u32, switch_id: u32) -> FlowSetConfig {
        FlowSetConfig {
            expected_flows,
            cells_per_flow: 1.3,
            hashes: 3,
            filter_bits_per_flow: DEFAULT_FILTER_BITS,
            seed: seed_for_switch(switch_id),
        }
    }
}

/// A per-switch seed, so that switches hash flows to different cells.
pub fn seed_for_switch(switch_id: u32) -> u64 {
    mix64(0x464c_4f57_5241_4452 ^ u64::from(switch_id))
}

/// One counting-table cell (32 bytes: two per cache line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
pub struct Cell {
    /// XOR of the keys of the flows in the cell (104 bits used).
    pub key_xor: u128,
    /// Bytes of those flows.
    pub bytes: u64,
    /// Packets of those flows.
    pub packets: u32,
    /// Number of flows in the cell.
    pub flow_count: u16,
    /// Sum over packets of the fingerprint of the packet's flow, modulo the prime
    /// [`check::MODULUS`]. A cell that holds one known flow has `check = packets *
    /// fingerprint` (modulo the prime); packets of a flow whose key the filter hid break
    /// that, so they cannot pass for another flow's ([`crate::flowradar::check`]).
    pub check: u16,
}

impl Cell {
    /// Whether nothing was counted in the cell.
    pub fn is_empty(&self) -> bool {
        self.flow_count == 0
            && self.key_xor == 0
            && self.packets == 0
            && self.bytes == 0
            && self.check == 0
    }
}

/// Where one flow lives in a flowset: its filter block and probes, its cells and its
/// fingerprint, from one key hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    /// The filter block.
    pub block: usize,
    /// The filter's probe word.
    pub probes: u64,
    /// The cell in each sub-table (the first `hashes` entries).
    pub cells: [u32; MAX_HASHES as usize],
    /// The fingerprint.
    pub fingerprint: u16,
}

/// The encoded flowset.
#[derive(Debug, Clone)]
pub struct FlowSet {
    filter: FlowFilter,
    cells: Vec<Cell>,
    per_table: u32,
    hashes: u8,
    table_seed: u64,
    flows: u64,
    packets: u64,
    /// Made empty ([`FlowSet::new`], [`FlowSet::clear`]), so that while it counts no flow
    /// every cell and filter block is known to be zero.
    cleared: bool,
}

/// Flowsets are equal when they count alike (whether one is known to be clear is not part
/// of what it counts).
impl PartialEq for FlowSet {
    fn eq(&self, o: &FlowSet) -> bool {
        self.filter == o.filter
            && self.cells == o.cells
            && self.per_table == o.per_table
            && self.hashes == o.hashes
            && self.table_seed == o.table_seed
            && self.flows == o.flows
            && self.packets == o.packets
    }
}

impl FlowSet {
    /// An empty flowset sized by `cfg`.
    pub fn new(cfg: &FlowSetConfig) -> FlowSet {
        assert!(
            (1..=MAX_HASHES).contains(&cfg.hashes),
            "hashes must be 1 to {MAX_HASHES}"
        );
        let (per_table, filter_bits) = cfg.sizes();
        let per_table = per_table as u32;
        let mut fs = FlowSet::from_parts(
            FlowFilter::new(filter_bits, FILTER_SEED),
            vec![Cell::default(); per_table as usize * usize::from(cfg.hashes)],
            cfg.hashes,
            mix64(cfg.seed ^ 0x74),
        )
        .expect("consistent sizes");
        fs.cleared = true;
        fs
    }

    /// A flowset from its parts (the wire form); None if the sizes disagree.
    pub fn from_parts(
        filter: FlowFilter,
        cells: Vec<Cell>,
        hashes: u8,
        table_seed: u64,
    ) -> Option<FlowSet> {
        if hashes == 0
            || hashes > MAX_HASHES
            || cells.is_empty()
            || !cells.len().is_multiple_of(usize::from(hashes))
        {
            return None;
        }
        let per_table = u32::try_from(cells.len() / usize::from(hashes)).ok()?;
        let flows = cells[..per_table as usize]
            .iter()
            .map(|c| u64::from(c.flow_count))
            .sum();
        let packets = cells[..per_table as usize]
            .iter()
            .map(|c| u64::from(c.packets))
            .sum();
        Some(FlowSet {
            filter,
            cells,
            per_table,
            hashes,
            table_seed,
            flows,
            packets,
            cleared: false,
        })
    }

    /// Counts one packet of `bytes` bytes of flow `key`; returns whether the flow was new in
    /// this epoch. No allocation.
    #[inline]
    pub fn update(&mut self, key: &FlowKey, bytes: u32) -> bool {
        let [w0, w1] = key.words();
        let slots = self.slots(key_hash(w0, w1));
        self.update_slots(&slots, key, bytes)
    }

    /// The slots of a flow with key hash `f`.
    #[inline(always)]
    pub fn slots(&self, f: u64) -> Slots {
        let (block, probes) = self.filter.locate_hash(f);
        let mut cells = [0u32; MAX_HASHES as usize];
        let m = u64::from(self.per_table);
        let k = usize::from(self.hashes);
        let mut h = mix64(f ^ self.table_seed);
        for (j, slot) in cells.iter_mut().enumerate().take(k) {
            if j > 0 && j % 2 == 0 {
                h = mix64(h);
            }
            let u = if j % 2 == 0 { h & 0xffff_ffff } else { h >> 32 };
            *slot = (j as u64 * m + ((u * m) >> 32)) as u32;
        }
        if k % 2 == 0 {
            h = mix64(h);
        }
        Slots {
            block,
            probes,
            cells,
            fingerprint: check::fingerprint((h >> 48) as u16),
        }
    }

    /// Starts loading the filter block and the cells of `slots` (the data plane calls this a
    /// few packets before [`FlowSet::update_slots`]).
    #[inline(always)]
    pub fn prefetch(&self, slots: &Slots) {
        self.filter.prefetch(slots.block);
        for &c in &slots.cells[..usize::from(self.hashes)] {
            if let Some(cell) = self.cells.get(c as usize) {
                crate::flowradar::prefetch(cell);
            }
        }
    }

    /// Counts one packet of `bytes` bytes of flow `key` located at `slots` (from
    /// [`FlowSet::slots`] of this flowset); returns whether the flow was new in this epoch.
    #[inline(always)]
    pub fn update_slots(&mut self, slots: &Slots, key: &FlowKey, bytes: u32) -> bool {
        self.add_slots(slots, key, 1, u64::from(bytes))
    }

    /// Counts `packets` packets of `bytes` bytes in all of flow `key`: the same cells as
    /// that many [`FlowSet::update`] calls (the counters wrap alike; the check, a sum modulo a
    /// prime, agrees with a wrapped PacketCount only below 2^32 packets a cell an epoch,
    /// which no switch reaches), in one hash. A flow
    /// cache folds its exact counts in with this ([`crate::flowradar::cache`]).
    pub fn add(&mut self, key: &FlowKey, packets: u32, bytes: u64) -> bool {
        let [w0, w1] = key.words();
        let slots = self.slots(key_hash(w0, w1));
        self.add_slots(&slots, key, packets, bytes)
    }

    /// [`FlowSet::add`] for a flow located at `slots`.
    #[inline(always)]
    pub fn add_slots(&mut self, slots: &Slots, key: &FlowKey, packets: u32, bytes: u64) -> bool {
        let mut new = self.filter.insert_located(slots.block, slots.probes);
        let idx = &slots.cells[..usize::from(self.hashes)];
        // A flow already counted has a flow in each of its cells: an empty one proves the
        // filter's "seen" a false positive, which would otherwise drop the flow's key and
        // leave its packets in other flows' counters.
        if !new && idx.iter().any(|&i| self.cells[i as usize].flow_count == 0) {
            new = true;
        }
        let x = key.to_u128();
        let check = check::times(slots.fingerprint, i64::from(packets));
        for &i in idx {
            let c = &mut self.cells[i as usize];
            if new {
                c.key_xor ^= x;
                c.flow_count = c.flow_count.wrapping_add(1);
            }
            c.packets = c.packets.wrapping_add(packets);
            c.bytes = c.bytes.wrapping_add(bytes);
            c.check = check::add(c.check, check);
        }
        self.flows += u64::from(new);
        self.packets += u64::from(packets);
        new
    }

    /// The cell of the key in each sub-table (the first `hashes` entries are used), and the
    /// key's fingerprint.
    #[inline(always)]
    fn indices(&self, key: &FlowKey) -> ([usize; MAX_HASHES as usize], u16) {
        let [w0, w1] = key.words();
        let s = self.slots(key_hash(w0, w1));
        (s.cells.map(|c| c as usize), s.fingerprint)
    }

    /// The key's cells (first [`FlowSet::hashes`] entries) and its fingerprint, in one hash.
    #[inline]
    pub fn locate(&self, key: &FlowKey) -> ([usize; MAX_HASHES as usize], u16) {
        self.indices(key)
    }

    /// The key's fingerprint (see [`Cell::check`]).
    pub fn fingerprint(&self, key: &FlowKey) -> u16 {
        self.indices(key).1
    }

    /// The cell of `key` in sub-table `j`, as an index into [`FlowSet::cells`].
    pub fn cell_of(&self, key: &FlowKey, j: u32) -> usize {
        self.indices(key).0[j as usize]
    }

    /// The cells of `key`, one per sub-table.
    pub fn cells_of(&self, key: &FlowKey) -> impl Iterator<Item = usize> + use<> {
        let idx = self.indices(key).0;
        idx.into_iter().take(usize::from(self.hashes))
    }

    /// Which sub-table cell `i` belongs to.
    pub fn table_of(&self, i: usize) -> u32 {
        (i / self.per_table as usize) as u32
    }

    /// Clears the flowset for a new epoch (at no cost when it counted nothing since it was
    /// last cleared: a quiet epoch's flowset).
    pub fn clear(&mut self) {
        if self.is_clear() {
            return;
        }
        self.filter.clear();
        self.cells.fill(Cell::default());
        self.flows = 0;
        self.packets = 0;
        self.cleared = true;
    }

    /// Notes that every cell and filter block is zero (the wire form said so).
    pub(crate) fn known_clear(&mut self) {
        debug_assert!(self.cells.iter().all(Cell::is_empty));
        self.cleared = self.flows == 0 && self.packets == 0;
    }

    /// Whether nothing was counted since the flowset was made empty: every cell and filter
    /// block is zero, known without looking at them (every count adds a flow when it meets
    /// an empty flowset).
    pub fn is_clear(&self) -> bool {
        self.cleared && self.flows == 0
    }

    /// The flow filter.
    pub fn filter(&self) -> &FlowFilter {
        &self.filter
    }

    /// The counting table, sub-table after sub-table.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Sub-tables (`k`).
    pub fn hashes(&self) -> u8 {
        self.hashes
    }

    /// Cells per sub-table.
    pub fn cells_per_table(&self) -> u32 {
        self.per_table
    }

    /// Seed of the counting table's hash.
    pub fn table_seed(&self) -> u64 {
        self.table_seed
    }

    /// Flows counted (new flows seen by the filter).
    pub fn flows(&self) -> u64 {
        self.flows
    }

    /// Packets counted.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Memory of the filter and the table in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.filter.bits() / 8 + self.cells.len() * std::mem::size_of::<Cell>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_counts_new_flows_once() {
        let mut fs = FlowSet::new(&FlowSetConfig::for_flows(1000, 1));
        let k = FlowKey {
            src: 1,
            dst: 2,
            src_port: 3,
            dst_port: 4,
            protocol: 6,
        };
        assert!(fs.update(&k, 100));
        assert!(!fs.update(&k, 200));
        let cells: Vec<usize> = fs.cells_of(&k).collect();
        assert_eq!(cells.len(), 3);
        for (j, &i) in cells.iter().enumerate() {
            assert_eq!(fs.table_of(i), j as u32);
            let c = fs.cells()[i];
            assert_eq!(
                (c.key_xor, c.flow_count, c.packets, c.bytes, c.check),
                (k.to_u128(), 1, 2, 300, check::times(fs.fingerprint(&k), 2))
            );
        }
        assert_eq!((fs.flows(), fs.packets()), (1, 2));
        fs.clear();
        assert!(fs.cells().iter().all(Cell::is_empty));
        assert!(fs.update(&k, 1), "new again after an epoch");
        assert_eq!(std::mem::size_of::<Cell>(), 32);
    }
}

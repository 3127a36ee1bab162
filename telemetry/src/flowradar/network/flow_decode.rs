//! FlowDecode: the flow keys of every switch of an epoch, decoded together.
//!
//! Switches peel their pure cells. The moment a flow is found it gets a number and is taken
//! out of every other switch whose flow filter says it passed there (key and flow count
//! only: counters may differ from hop to hop), which may make new pure cells there. No
//! routing information is needed.
//!
//! Because a flow is removed everywhere as soon as it is found, no other switch can find it
//! again, so the decoder needs no global table of flows seen: a switch only remembers the
//! few flows it could not take (a cell of the flow already held no flow, which only a filter
//! false positive elsewhere causes) and finds later itself.
//!
//! A filter false positive removes a flow that never passed. The removal leaves the flow's
//! key behind in a cell that ends up holding no flow (or fewer than none); there it is
//! recognised and undone.
//!
//! The filters are bit-sliced, so that one flow is tested against every switch with eight
//! loads per 64 switches; a switch's working cells pack key and flow count into 16 bytes.

use rustc_hash::FxHashMap;

use crate::flowradar::filter::{BLOCK_BITS, Block, PROBES};
use crate::flowradar::flowset::{FlowSet, MAX_HASHES};
use crate::flowradar::key::FlowKey;
use crate::flowradar::prefetch;

/// Bit position of the flow count in a packed working cell (above the 104-bit key).
const COUNT_SHIFT: u32 = 104;
/// One flow in the count field.
const ONE: u128 = 1 << COUNT_SHIFT;
/// The key part of a packed working cell.
const KEY_MASK: u128 = ONE - 1;

/// The flow count of a packed cell (24-bit two's complement: removals of false positives can
/// take it below zero).
#[inline(always)]
fn count(v: u128) -> i32 {
    ((((v >> COUNT_SHIFT) as u32) << 8) as i32) >> 8
}

/// One switch's working copy of its cells' key part.
struct Switch<'a> {
    fs: &'a FlowSet,
    k: usize,
    cells: Vec<u128>,
    /// Cells that may be pure.
    queue: Vec<u32>,
    /// Cells that may hold a lone key with no flow (a false positive's trace).
    suspects: Vec<u32>,
    /// Cells whose key part is not empty.
    nonzero: usize,
    /// Cells whose key part has bits beyond a key: no set of flows explains them.
    malformed: usize,
    /// Flows known here, by number.
    flows: Vec<u32>,
    /// Their cells here (`k` per flow) and fingerprints, for CounterDecode.
    located: Vec<u32>,
    fps: Vec<u16>,
    /// Flows this switch could not take or gave back, by key: if it finds one itself later,
    /// it is the same flow, not a new one.
    declined: FxHashMap<u128, u32>,
    /// Flows taken and given back (filter false positives), by number.
    given_back: Vec<u32>,
}

impl<'a> Switch<'a> {
    fn new(fs: &'a FlowSet) -> Switch<'a> {
        let (mut nonzero, mut malformed) = (0, 0);
        let cells: Vec<u128> = fs
            .cells()
            .iter()
            .map(|c| {
                let v = (c.key_xor & KEY_MASK) | (u128::from(c.flow_count) << COUNT_SHIFT);
                nonzero += usize::from(v != 0);
                malformed += usize::from(c.key_xor >> COUNT_SHIFT != 0);
                v
            })
            .collect();
        let queue = (0..cells.len() as u32)
            .filter(|&i| count(cells[i as usize]) == 1)
            .collect();
        let expected = usize::try_from(fs.flows())
            .unwrap_or(0)
            .min(cells.len() * 4);
        Switch {
            fs,
            k: usize::from(fs.hashes()),
            cells,
            queue,
            suspects: Vec::new(),
            nonzero,
            malformed,
            // The table's own flow count (sub-table 0), so the lists do not grow by copying.
            flows: Vec::with_capacity(expected),
            located: Vec::with_capacity(expected * usize::from(fs.hashes())),
            fps: Vec::with_capacity(expected),
            declined: FxHashMap::default(),
            given_back: Vec::new(),
        }
    }

    fn keys_complete(&self) -> bool {
        self.nonzero == 0 && self.malformed == 0
    }

    /// The cells of a key here (the first `k` entries) and its fingerprint.
    #[inline(always)]
    fn cells_of(&self, key: &FlowKey) -> ([usize; MAX_HASHES as usize], u16) {
        self.fs.locate(key)
    }

    /// Records flow `id` as known here.
    #[inline(always)]
    fn know(&mut self, id: u32, cells: &[usize], fp: u16) {
        self.flows.push(id);
        self.located.extend(cells.iter().map(|&c| c as u32));
        self.fps.push(fp);
    }

    /// Adds (`delta` = 1) or removes (-1) a flow in its cells.
    #[inline]
    fn apply(&mut self, x: u128, cells: &[usize], delta: i32) {
        for &c in cells {
            let before = self.cells[c] != 0;
            let v = self.cells[c] ^ x;
            let v = if delta > 0 {
                v.wrapping_add(ONE)
            } else {
                v.wrapping_sub(ONE)
            };
            self.cells[c] = v;
            match (before, v != 0) {
                (true, false) => self.nonzero -= 1,
                (false, true) => self.nonzero += 1,
                _ => {}
            }
            match count(v) {
                1 => self.queue.push(c as u32),
                n if n < 1 && v & KEY_MASK != 0 => self.suspects.push(c as u32),
                _ => {}
            }
        }
    }

    /// Removes flow `id` found at another switch, if each of its cells holds a flow.
    /// Returns false, and remembers the flow, if it cannot.
    #[inline]
    fn take(&mut self, id: u32, key: &FlowKey, cells: &[usize], fp: u16) -> bool {
        if cells.iter().any(|&c| count(self.cells[c]) < 1) {
            self.declined.insert(key.to_u128(), id);
            return false;
        }
        self.know(id, cells, fp);
        self.apply(key.to_u128(), cells, -1);
        true
    }

    /// Undoes the removal of flows whose keys were left alone in cells holding no flow: the
    /// filter said they passed here, but they did not.
    fn give_back_false_positives(&mut self, keys: &[FlowKey]) {
        while let Some(c) = self.suspects.pop() {
            let c = c as usize;
            let v = self.cells[c];
            if count(v) >= 1 || v & KEY_MASK == 0 {
                continue;
            }
            let Some(key) = FlowKey::from_u128(v & KEY_MASK) else {
                continue;
            };
            let (cells, _) = self.cells_of(&key);
            if !cells[..self.k].contains(&c) {
                continue;
            }
            // Taken here, not found here: a flow found here was really here. Rare (a handful
            // per epoch), so a scan is fine.
            let Some(pos) = self.flows.iter().position(|&id| keys[id as usize] == key) else {
                continue;
            };
            let id = self.flows.swap_remove(pos);
            self.fps.swap_remove(pos);
            let k = self.k;
            let last = self.located.len() - k;
            self.located.copy_within(last.., pos * k);
            self.located.truncate(last);
            self.given_back.push(id);
            self.declined.insert(key.to_u128(), id);
            self.apply(key.to_u128(), &cells[..self.k], 1);
        }
    }
}

/// Slices this large are built whatever the filters' size (a few switches with filters of
/// a few thousand blocks, as a lab's are).
const SLICES_ALWAYS_BYTES: usize = 64 << 20;

/// The flow filters of all switches, bit-sliced: for every filter bit position, the set of
/// switches whose filter has that bit (`words` 64-bit words per position). A flow is then
/// tested against every switch at once.
struct Membership {
    words: usize,
    slices: Vec<u64>,
}

impl Membership {
    /// Built when all filters share seed and size (the default configuration) and the
    /// slices take little memory beside the filters ([`Membership::worth_slicing`]).
    fn build(flowsets: &[&FlowSet]) -> Option<Membership> {
        let first = flowsets.first()?.filter();
        let same = flowsets.iter().all(|f| {
            f.filter().seed() == first.seed() && f.filter().blocks().len() == first.blocks().len()
        });
        let words = flowsets.len().div_ceil(64);
        let blocks = first.blocks().len();
        if !same || !Membership::worth_slicing(flowsets.len(), blocks) {
            return None;
        }
        let mut slices = vec![0u64; blocks * BLOCK_BITS * words];
        // Each 64-bit filter word of 64 switches is a 64 x 64 bit matrix; its transpose is
        // the switch sets of those 64 positions. Blocks are independent: split among cores.
        let per_block = BLOCK_BITS * words;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk_blocks = blocks.div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            for (ci, out) in slices.chunks_mut(chunk_blocks * per_block).enumerate() {
                scope.spawn(move || {
                    let mut m = [0u64; 64];
                    for (bi, region) in out.chunks_mut(per_block).enumerate() {
                        let b = ci * chunk_blocks + bi;
                        for j in 0..BLOCK_BITS / 64 {
                            for w in 0..words {
                                let group = &flowsets[w * 64..flowsets.len().min(w * 64 + 64)];
                                m.fill(0);
                                for (s, fs) in group.iter().enumerate() {
                                    m[s] = fs.filter().blocks()[b].0[j];
                                }
                                transpose64(&mut m);
                                for (bit, &set) in m.iter().enumerate() {
                                    region[(j * 64 + bit) * words + w] = set;
                                }
                            }
                        }
                    }
                });
            }
        });
        Some(Membership { words, slices })
    }

    /// Whether the slices of `switches` filters of `blocks` blocks each are small enough to
    /// build: at most twice the filters' own size, or [`SLICES_ALWAYS_BYTES`]. Slicing
    /// takes 64 bits per filter bit for every 64 switches or fewer, so a few switches with
    /// large filters (two of 16 MiB would take 1 GiB of slices) are tested filter by filter.
    fn worth_slicing(switches: usize, blocks: usize) -> bool {
        let filters = switches.saturating_mul(blocks * std::mem::size_of::<Block>());
        let slices = switches
            .div_ceil(64)
            .saturating_mul(blocks * BLOCK_BITS * std::mem::size_of::<u64>());
        slices <= SLICES_ALWAYS_BYTES.max(filters.saturating_mul(2))
    }

    /// Starts fetching the slices of a key's probes.
    #[inline(always)]
    fn prefetch(&self, b: usize, m: u64) {
        let base = b * BLOCK_BITS;
        for j in 0..PROBES as usize {
            let pos = base + j * 64 + ((m >> (6 * j)) & 63) as usize;
            prefetch(&self.slices[pos * self.words]);
        }
    }

    /// Word `w` of the set of switches whose filter may hold the key at block `b`, probe
    /// word `m`.
    #[inline(always)]
    fn switches(&self, b: usize, m: u64, w: usize) -> u64 {
        let base = b * BLOCK_BITS;
        (0..PROBES as usize).fold(u64::MAX, |acc, j| {
            let pos = base + j * 64 + ((m >> (6 * j)) & 63) as usize;
            acc & self.slices[pos * self.words + w]
        })
    }
}

/// Transposes a 64 x 64 bit matrix (row `i` is `m[i]`, column `j` is bit `j`): afterwards
/// bit `i` of `m[j]` is what bit `j` of `m[i]` was.
fn transpose64(m: &mut [u64; 64]) {
    let mut width = 32;
    let mut mask: u64 = 0x0000_0000_ffff_ffff;
    while width != 0 {
        let mut k = 0;
        while k < 64 {
            for i in k..k + width {
                let t = ((m[i] >> width) ^ m[i + width]) & mask;
                m[i] ^= t << width;
                m[i + width] ^= t;
            }
            k += 2 * width;
        }
        width >>= 1;
        mask ^= mask << width;
    }
}

/// What FlowDecode found.
pub(crate) struct FlowDecoded {
    /// Every flow found, by number.
    pub keys: Vec<FlowKey>,
    /// Per switch, the numbers of its flows.
    pub flows: Vec<Vec<u32>>,
    /// Per switch, its flows' cells (`k` per flow, in the order of `flows`).
    pub located: Vec<Vec<u32>>,
    /// Per switch, its flows' fingerprints.
    pub fps: Vec<Vec<u16>>,
    /// Per switch, whether all of its flows are known.
    pub complete: Vec<bool>,
    /// Flows a switch took and gave back because its filter gave a false positive.
    pub undone: usize,
}

/// Pure cells taken together, so that the memory they lead to (their flows' cells here, the
/// filter slices, the flows' cells at other switches) is fetched in parallel, stage by stage.
const BATCH: usize = 16;

/// A pure cell found, with its flow.
#[derive(Clone, Copy, Default)]
struct Found {
    cell: u32,
    key: FlowKey,
    cells: [usize; MAX_HASHES as usize],
    fp: u16,
    /// Filter block and probe word of the key.
    block: usize,
    probes: u64,
}

/// A flow to take out at another switch.
#[derive(Clone, Copy)]
struct Offer {
    switch: usize,
    id: u32,
    cells: [usize; MAX_HASHES as usize],
    fp: u16,
}

/// Decodes the flow keys of all switches of an epoch together.
pub(crate) fn flow_decode(flowsets: &[&FlowSet]) -> FlowDecoded {
    let n = flowsets.len();
    let (switches, membership) = std::thread::scope(|scope| {
        let membership = scope.spawn(|| Membership::build(flowsets));
        let switches: Vec<Switch<'_>> = flowsets.iter().map(|fs| Switch::new(fs)).collect();
        (switches, membership.join().expect("filter slicing thread"))
    });
    let mut switches = switches;
    let mut keys: Vec<FlowKey> = Vec::new();
    let mut batch = [Found::default(); BATCH];
    let mut offers: Vec<Offer> = Vec::new();
    let mut targets: Vec<usize> = Vec::with_capacity(n);
    // Switches are peeled one after the other, again while any has work.
    let mut active: Vec<usize> = (0..n).rev().collect();
    let mut queued = vec![true; n];
    while let Some(s) = active.pop() {
        queued[s] = false;
        loop {
            // Stage 1: pure cells, their flows' cells here and the flows' filter slices.
            let mut len = 0;
            let sw = &mut switches[s];
            while len < BATCH {
                let Some(i) = sw.queue.pop() else {
                    break;
                };
                let Some(found) = sw_pure(sw, i) else {
                    continue;
                };
                for &c in &found.cells[..sw.k] {
                    prefetch(&sw.cells[c]);
                }
                let (block, probes) = flowsets[0].filter().locate(&found.key.words());
                if let Some(mem) = &membership {
                    mem.prefetch(block, probes);
                }
                batch[len] = Found {
                    block,
                    probes,
                    ..found
                };
                len += 1;
            }
            if len == 0 {
                break;
            }
            // Stage 2: take each flow out here; new flows are offered to the switches whose
            // filter holds them, whose cells are prefetched.
            offers.clear();
            for f in &batch[..len] {
                let sw = &switches[s];
                let v = sw.cells[f.cell as usize];
                let x = f.key.to_u128();
                // An earlier flow of the batch may have changed this cell.
                if count(v) != 1 || v & KEY_MASK != x {
                    continue;
                }
                let (id, new) = match sw.declined.get(&x) {
                    Some(&id) => (id, false),
                    None => (keys.len() as u32, true),
                };
                if new {
                    keys.push(f.key);
                }
                let sw = &mut switches[s];
                let k = sw.k;
                sw.know(id, &f.cells[..k], f.fp);
                sw.apply(x, &f.cells[..k], -1);
                if !sw.suspects.is_empty() {
                    sw.give_back_false_positives(&keys);
                }
                if !new {
                    continue;
                }
                targets.clear();
                match &membership {
                    Some(mem) => {
                        for w in 0..mem.words {
                            let mut cand = mem.switches(f.block, f.probes, w);
                            while cand != 0 {
                                targets.push(w * 64 + cand.trailing_zeros() as usize);
                                cand &= cand - 1;
                            }
                        }
                    }
                    None => targets
                        .extend((0..n).filter(|&t| flowsets[t].filter().contains(&f.key.words()))),
                }
                for &t in &targets {
                    let st = &switches[t];
                    if t == s || st.keys_complete() {
                        continue;
                    }
                    let (cells, fp) = st.cells_of(&f.key);
                    for &c in &cells[..st.k] {
                        prefetch(&st.cells[c]);
                    }
                    offers.push(Offer {
                        switch: t,
                        id,
                        cells,
                        fp,
                    });
                }
            }
            // Stage 3: take the flows out at the other switches.
            for o in &offers {
                let st = &mut switches[o.switch];
                let k = st.k;
                let key = keys[o.id as usize];
                if st.take(o.id, &key, &o.cells[..k], o.fp) {
                    if !st.suspects.is_empty() {
                        st.give_back_false_positives(&keys);
                    }
                    if !st.queue.is_empty() && !queued[o.switch] {
                        queued[o.switch] = true;
                        active.push(o.switch);
                    }
                }
            }
        }
    }
    let undone = switches.iter().map(|s| s.given_back.len()).sum();
    let complete = switches.iter().map(Switch::keys_complete).collect();
    let mut flows = Vec::with_capacity(n);
    let mut located = Vec::with_capacity(n);
    let mut fps = Vec::with_capacity(n);
    for sw in switches {
        flows.push(sw.flows);
        located.push(sw.located);
        fps.push(sw.fps);
    }
    FlowDecoded {
        keys,
        flows,
        located,
        fps,
        complete,
        undone,
    }
}

/// The flow of cell `i` and its cells, if the cell is pure: one flow whose key hashes back
/// to it.
#[inline(always)]
fn sw_pure(sw: &Switch<'_>, i: u32) -> Option<Found> {
    let v = sw.cells[i as usize];
    if count(v) != 1 {
        return None;
    }
    let key = FlowKey::from_u128(v & KEY_MASK)?;
    let (cells, fp) = sw.cells_of(&key);
    (cells[sw.fs.table_of(i as usize) as usize] == i as usize).then_some(Found {
        cell: i,
        key,
        cells,
        fp,
        block: 0,
        probes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slices are built for many switches, or small filters; not for a few switches with
    /// large ones, whose slices would take far more memory than the filters.
    #[test]
    fn filters_are_sliced_only_where_the_slices_stay_small() {
        // 80 switches (two words of 64), 16 MiB filters: 2 GiB of slices for 1.25 GiB.
        assert!(Membership::worth_slicing(80, 1 << 18));
        assert!(Membership::worth_slicing(64, 1 << 22));
        // A lab: 5 switches of 2000 blocks (8 MiB of slices).
        assert!(Membership::worth_slicing(5, 2000));
        // Two switches of 16 MiB each: 1 GiB of slices for 32 MiB of filters.
        assert!(!Membership::worth_slicing(2, 1 << 18));
        assert!(!Membership::worth_slicing(31, 1 << 15));
        assert!(Membership::worth_slicing(32, 1 << 15));
    }

    #[test]
    fn transpose_moves_every_bit() {
        let mut m = [0u64; 64];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for r in m.iter_mut() {
            x = crate::hash::mix64(x);
            *r = x;
        }
        let orig = m;
        transpose64(&mut m);
        for (i, row) in orig.iter().enumerate() {
            for (j, col) in m.iter().enumerate() {
                assert_eq!((col >> i) & 1, (row >> j) & 1, "bit {i},{j}");
            }
        }
    }
}

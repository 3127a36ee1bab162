//! A worker's exact per-flow counts for one epoch, folded into its flowset when the epoch
//! ends: FlowRadar's encoding without its per-packet cost (`docs/architecture.md`,
//! "FlowRadar on a worker").
//!
//! A flowset is linear in each flow's counts: every packet of a flow adds one to PacketCount,
//! its bytes to ByteCount and the flow's fingerprint to the check of the same `k` cells, and
//! the flow's first packet adds its key and one to FlowCount. So counting a flow's packets
//! and bytes exactly during the epoch and adding them to the flowset once at its end gives
//! the same cells as counting every packet into them, for one cache line per packet instead
//! of the filter's block and `k` cells (and the hashes that find them). The only thing order
//! changes is which flows a filter false positive hides (the flows are inserted in another
//! order), which is as likely either way.
//!
//! The cache is an open-addressing table of 32-byte entries (two per cache line) indexed by
//! the key hash `F` every packet already has, probing at most [`MAX_PROBES`] entries; it
//! never evicts within an epoch. A packet whose flow has no entry and finds none free counts
//! straight into the flowset ([`EpochCounts::count`] does both), so any number of flows is
//! counted exactly; the cache is sized at twice the expected flows to make that rare.
//!
//! Entries carry the generation (epoch of use) they were written in, and an entry of an
//! older generation counts as free: emptying the cache for the next epoch is a new
//! generation, not a write to every entry. So the control thread that folds a finished
//! cache only reads its entries, and the worker that counts into it next finds the lines
//! clean in the caches rather than modified on another core.

use crate::flowradar::flowset::{FlowSet, FlowSetConfig, Slots};
use crate::flowradar::key::FlowKey;
use crate::hash::key_hash;

/// Entries a lookup probes before the packet is counted in the flowset directly.
pub const MAX_PROBES: usize = 8;

/// Where an entry's generation starts in the key's second word (which holds 40 bits).
const GENERATION_SHIFT: u32 = 40;
/// The largest generation (24 bits); the cache is wiped once it wraps.
#[cfg(test)]
const MAX_GENERATION: u64 = (1 << (64 - GENERATION_SHIFT)) - 1;

/// One flow's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
struct Entry {
    /// `src << 32 | dst`.
    w0: u64,
    /// `protocol << 32 | src_port << 16 | dst_port`, with the generation in the bits from
    /// [`GENERATION_SHIFT`] (0: never used).
    w1: u64,
    bytes: u64,
    packets: u32,
}

/// Exact packet and byte counts per flow for one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowCache {
    entries: Vec<Entry>,
    mask: usize,
    /// Indices of the used entries, in the order their flows arrived.
    used: Vec<u32>,
    /// The current generation (1 and up), shifted into place.
    generation: u64,
}

impl Default for FlowCache {
    /// A cache without entries: every packet goes to the flowset.
    fn default() -> Self {
        FlowCache {
            entries: Vec::new(),
            mask: 0,
            used: Vec::new(),
            generation: 1 << GENERATION_SHIFT,
        }
    }
}

impl FlowCache {
    /// A cache for `expected` flows: the next power of two at or above twice as many
    /// entries (at least 64), 32 bytes each.
    pub fn for_flows(expected: u32) -> FlowCache {
        let n = (2 * expected as usize).max(64).next_power_of_two();
        FlowCache {
            entries: vec![Entry::default(); n],
            mask: n - 1,
            used: Vec::with_capacity(n),
            generation: 1 << GENERATION_SHIFT,
        }
    }

    /// Entries (0 for [`FlowCache::default`]).
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Flows with an entry.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no flow has an entry.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Memory of the entries and the index list in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.entries.len() * (std::mem::size_of::<Entry>() + 4)
    }

    /// Where a flow with key hash `f` starts probing.
    #[inline(always)]
    pub fn home(&self, f: u64) -> usize {
        f as usize & self.mask
    }

    /// Starts loading the entry at `home` (a few packets before [`FlowCache::count`]).
    #[inline(always)]
    pub fn prefetch(&self, home: usize) {
        if let Some(e) = self.entries.get(home) {
            crate::flowradar::prefetch(e);
        }
    }

    /// Counts one packet of `bytes` bytes of the flow with key words `w0`, `w1` (see
    /// [`FlowKey::words`]) starting at `home`; false, counting nothing, when the flow has no
    /// entry and none of the probed entries is free.
    #[inline(always)]
    pub fn count(&mut self, home: usize, w0: u64, w1: u64, bytes: u32) -> bool {
        let tag = w1 | self.generation;
        let mut i = home;
        for _ in 0..MAX_PROBES {
            let Some(e) = self.entries.get_mut(i) else {
                return false;
            };
            if e.w1 == tag && e.w0 == w0 {
                e.packets = e.packets.wrapping_add(1);
                e.bytes = e.bytes.wrapping_add(u64::from(bytes));
                return true;
            }
            if e.w1 >> GENERATION_SHIFT != self.generation >> GENERATION_SHIFT {
                *e = Entry {
                    w0,
                    w1: tag,
                    bytes: u64::from(bytes),
                    packets: 1,
                };
                self.used.push(i as u32);
                return true;
            }
            i = (i + 1) & self.mask;
        }
        false
    }

    /// The counted flows: (key, packets, bytes), in the order they arrived.
    pub fn flows(&self) -> impl Iterator<Item = (FlowKey, u32, u64)> + '_ {
        self.used.iter().map(|&i| {
            let e = &self.entries[i as usize];
            (key_of(e.w0, e.w1), e.packets, e.bytes)
        })
    }

    /// Adds every counted flow to `fs` (in arrival order) and empties the cache (reading
    /// its entries, never writing them). The flows go in a few at a time, their flowset
    /// lines located and prefetched before the first is added: the flowset is cold when
    /// an epoch ends (its lines are touched once per epoch), and one flow after another
    /// would wait for each of its four lines in turn.
    pub fn drain_into(&mut self, fs: &mut FlowSet) {
        const AHEAD: usize = 16;
        for chunk in self.used.chunks(AHEAD) {
            let mut located = [(FlowKey::default(), Slots::default(), 0u32, 0u64); AHEAD];
            for (l, &i) in located.iter_mut().zip(chunk) {
                let e = &self.entries[i as usize];
                let key = key_of(e.w0, e.w1);
                let [w0, w1] = key.words();
                let slots = fs.slots(key_hash(w0, w1));
                fs.prefetch(&slots);
                *l = (key, slots, e.packets, e.bytes);
            }
            for (key, slots, packets, bytes) in &located[..chunk.len()] {
                fs.add_slots(slots, key, *packets, *bytes);
            }
        }
        self.clear();
    }

    /// Empties the cache without counting: the next generation (every entry is wiped only
    /// when the generations wrap).
    pub fn clear(&mut self) {
        self.used.clear();
        self.generation = self.generation.wrapping_add(1 << GENERATION_SHIFT);
        if self.generation == 0 {
            self.entries.fill(Entry::default());
            self.generation = 1 << GENERATION_SHIFT;
        }
    }
}

/// The flow key of an entry's words.
#[inline]
fn key_of(w0: u64, w1: u64) -> FlowKey {
    FlowKey::from_words(w0, w1)
}

/// One epoch's counting on one worker: the flow cache, and the flowset it is folded into
/// (which also takes the packets the cache has no room for).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochCounts {
    /// The flowset (complete only after [`EpochCounts::finish`]).
    pub flowset: FlowSet,
    /// The exact counts not yet in the flowset.
    pub cache: FlowCache,
}

impl EpochCounts {
    /// Empty counts for a flowset sized by `cfg`, with a cache for its expected flows.
    pub fn new(cfg: &FlowSetConfig) -> EpochCounts {
        EpochCounts {
            flowset: FlowSet::new(cfg),
            cache: FlowCache::for_flows(cfg.expected_flows),
        }
    }

    /// Starts loading what counting the flow with key hash `f` touches.
    #[inline(always)]
    pub fn prefetch(&self, f: u64) {
        self.cache.prefetch(self.cache.home(f));
    }

    /// Counts one packet of `bytes` bytes of the flow with key hash `f` and key words `w0`,
    /// `w1`.
    #[inline(always)]
    pub fn count(&mut self, f: u64, w0: u64, w1: u64, bytes: u32) {
        let home = self.cache.home(f);
        if !self.cache.count(home, w0, w1, bytes) {
            self.count_in_flowset(f, w0, w1, bytes);
        }
    }

    #[cold]
    #[inline(never)]
    fn count_in_flowset(&mut self, f: u64, w0: u64, w1: u64, bytes: u32) {
        let key = key_of(w0, w1);
        let slots = self.flowset.slots(f);
        self.flowset.update_slots(&slots, &key, bytes);
    }

    /// Folds the cache into the flowset and returns it: the epoch's encoded flowset.
    pub fn finish(&mut self) -> &FlowSet {
        self.cache.drain_into(&mut self.flowset);
        &self.flowset
    }

    /// Clears both for a new epoch.
    pub fn clear(&mut self) {
        self.cache.clear();
        self.flowset.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::key_hash;
    use crate::sim_rng::SimRng;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src: 0x0a00_0000 | (i >> 8),
            dst: 0x0a01_0001,
            src_port: 1000 + (i & 0xff) as u16,
            dst_port: 4791,
            protocol: if i.is_multiple_of(3) { 6 } else { 17 },
        }
    }

    fn count(c: &mut EpochCounts, k: &FlowKey, bytes: u32) {
        let [w0, w1] = k.words();
        c.count(key_hash(w0, w1), w0, w1, bytes);
    }

    /// Counting through the cache gives the flowset that counting every packet into it gives,
    /// cell for cell, with more flows than the cache holds (so some go to the flowset
    /// directly) and flows whose packets are interleaved.
    #[test]
    fn folded_counts_equal_per_packet_counting() {
        let cfg = FlowSetConfig::for_flows(300, 7);
        let mut rng = SimRng::new(5);
        for flows in [1u32, 40, 300, 900] {
            let mut cached = EpochCounts::new(&cfg);
            let mut direct = FlowSet::new(&cfg);
            // Flows in order of first arrival (the cache folds them in that order), then
            // packets of random flows.
            let mut packets: Vec<(u32, u32)> = (0..flows).map(|i| (i, 64 + i % 1400)).collect();
            for _ in 0..flows * 5 {
                let i = (rng.next_u64() % u64::from(flows)) as u32;
                packets.push((i, 60 + (rng.next_u64() % 1440) as u32));
            }
            for &(i, bytes) in &packets {
                count(&mut cached, &key(i), bytes);
            }
            let overflowed = cached.flowset.packets();
            // The reference: the flows the cache kept, then the rest packet by packet.
            let in_cache: Vec<(FlowKey, u32, u64)> = cached.cache.flows().collect();
            for &(i, bytes) in &packets {
                if !in_cache.iter().any(|(k, _, _)| *k == key(i)) {
                    direct.update(&key(i), bytes);
                }
            }
            for &(k, _, _) in &in_cache {
                for &(i, bytes) in &packets {
                    if key(i) == k {
                        direct.update(&k, bytes);
                    }
                }
            }
            assert_eq!(
                overflowed as usize,
                packets.len() - in_cache.iter().map(|(_, p, _)| *p as usize).sum::<usize>()
            );
            if flows == 900 {
                assert!(overflowed > 0, "more flows than entries: some overflow");
            } else {
                assert_eq!(overflowed, 0, "{flows} flows fit");
            }
            let folded = cached.finish().clone();
            // Cells and totals equal; the filter may differ only by insertion order, which
            // here is the same (cached flows first in arrival order after the overflowed
            // ones, as the reference did).
            assert_eq!(folded.cells(), direct.cells(), "{flows} flows");
            assert_eq!(folded.packets(), packets.len() as u64);
            assert_eq!(folded.flows(), direct.flows());
            assert!(cached.cache.is_empty());
            cached.clear();
            assert!(cached.flowset.cells().iter().all(|c| c.is_empty()));
        }
    }

    #[test]
    fn entries_count_exactly_and_clear() {
        let mut c = FlowCache::for_flows(10);
        assert_eq!(c.capacity(), 64);
        let [w0, w1] = key(1).words();
        let f = key_hash(w0, w1);
        for b in [100u32, 200, 300] {
            assert!(c.count(c.home(f), w0, w1, b));
        }
        assert_eq!(c.flows().collect::<Vec<_>>(), vec![(key(1), 3, 600)]);
        // Flows that share a home slot probe onward; the ninth finds no room.
        for i in 2..=9u32 {
            let [a, b] = key(i).words();
            assert_eq!(c.count(c.home(f), a, b, 1), i <= 8, "flow {i}");
        }
        assert_eq!(c.len(), 8);
        c.clear();
        assert!(c.is_empty());
        assert!(c.count(c.home(f), w0, w1, 5));
        assert_eq!(c.flows().next(), Some((key(1), 1, 5)));
        let mut none = FlowCache::default();
        assert!(
            !none.count(0, w0, w1, 5),
            "a cache without entries counts nothing"
        );
    }

    /// Generations: entries of an emptied cache count as free without being written, and
    /// when the generations wrap every entry is wiped.
    #[test]
    fn emptied_entries_are_free_and_generations_wrap() {
        let mut c = FlowCache::for_flows(10);
        let [w0, w1] = key(1).words();
        let f = key_hash(w0, w1);
        assert!(c.count(c.home(f), w0, w1, 7));
        let before = c.entries.clone();
        c.clear();
        assert_eq!(c.entries, before, "emptying writes no entry");
        assert!(c.count(c.home(f), w0, w1, 9));
        assert_eq!(c.flows().collect::<Vec<_>>(), vec![(key(1), 1, 9)]);
        c.generation = MAX_GENERATION << GENERATION_SHIFT;
        c.clear();
        assert!(
            c.entries.iter().all(|e| *e == Entry::default()),
            "wiped at the wrap"
        );
        assert_eq!(c.generation, 1 << GENERATION_SHIFT);
        assert!(c.count(c.home(f), w0, w1, 3));
        assert_eq!(c.flows().collect::<Vec<_>>(), vec![(key(1), 1, 3)]);
    }
}

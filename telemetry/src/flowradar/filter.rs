//! The flow filter: a cache-blocked Bloom filter that tells whether a packet's flow is new in
//! this epoch. All probes of a key fall in one 64-byte block (one cache line), so a check
//! and insert costs one memory access.
//!
//! A key's hash is `H = F ^ seed`, where `F` is the key hash every packet already has
//! ([`crate::hash::key_hash`]) and `seed` the filter's seed. `H` picks the block from its
//! high 32 bits (multiply-shift); `M = mix64(H)` picks the probes: probe `j` (0..8) sets bit
//! `(M >> 6j) & 63` of word `j` of the block (one bit per 64-bit word, as in split-block
//! Bloom filters).

use crate::hash::{key_hash, mix64};

/// Bits per block (one cache line).
pub const BLOCK_BITS: usize = 512;
/// Probes per key.
pub const PROBES: u32 = 8;

/// One cache line of filter bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(64))]
pub struct Block(pub [u64; 8]);

/// A blocked Bloom filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFilter {
    blocks: Vec<Block>,
    seed: u64,
}

impl FlowFilter {
    /// A filter of at least `bits` bits (rounded up to whole blocks) with hash seed `seed`.
    pub fn new(bits: usize, seed: u64) -> FlowFilter {
        FlowFilter {
            blocks: vec![Block::default(); bits.div_ceil(BLOCK_BITS).max(1)],
            seed,
        }
    }

    /// A filter built from its blocks (the wire form).
    pub fn from_blocks(blocks: Vec<Block>, seed: u64) -> FlowFilter {
        FlowFilter { blocks, seed }
    }

    /// The blocks.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Size in bits.
    pub fn bits(&self) -> usize {
        self.blocks.len() * BLOCK_BITS
    }

    /// The block and probe bits of a key with key hash `f`: (block index, probe word).
    #[inline(always)]
    pub fn locate_hash(&self, f: u64) -> (usize, u64) {
        let h = f ^ self.seed;
        let block = ((h >> 32) * self.blocks.len() as u64) >> 32;
        (block as usize, mix64(h))
    }

    /// The block and probe bits of a key's words: (block index, probe word).
    #[inline(always)]
    pub fn locate(&self, words: &[u64; 2]) -> (usize, u64) {
        self.locate_hash(key_hash(words[0], words[1]))
    }

    /// Starts loading the block of a key with key hash `f`.
    #[inline(always)]
    pub fn prefetch(&self, block: usize) {
        if let Some(b) = self.blocks.get(block) {
            crate::flowradar::prefetch(b);
        }
    }

    #[inline(always)]
    fn mask(m: u64, j: u32) -> u64 {
        1u64 << ((m >> (6 * j)) & 63)
    }

    /// Whether `block` has every probe bit of probe word `m` set.
    #[inline(always)]
    pub fn block_contains(block: &Block, m: u64) -> bool {
        (0..PROBES).all(|j| block.0[j as usize] & Self::mask(m, j) != 0)
    }

    /// Whether the key may have been inserted (false positives possible, no false negatives).
    #[inline(always)]
    pub fn contains(&self, words: &[u64; 2]) -> bool {
        let (b, m) = self.locate(words);
        let block = &self.blocks[b].0;
        (0..PROBES).all(|j| block[j as usize] & Self::mask(m, j) != 0)
    }

    /// Inserts the key; returns true if it was not (apparently) present before.
    #[inline(always)]
    pub fn insert(&mut self, words: &[u64; 2]) -> bool {
        let (b, m) = self.locate(words);
        self.insert_located(b, m)
    }

    /// Inserts a key located by [`FlowFilter::locate_hash`]; returns true if it was not
    /// (apparently) present before.
    #[inline(always)]
    pub fn insert_located(&mut self, b: usize, m: u64) -> bool {
        let block = &mut self.blocks[b].0;
        let mut new = false;
        for j in 0..PROBES {
            let bit = Self::mask(m, j);
            new |= block[j as usize] & bit == 0;
            block[j as usize] |= bit;
        }
        new
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.blocks.fill(Block::default());
    }

    /// Share of bits set.
    pub fn fill_ratio(&self) -> f64 {
        let ones: u32 = self
            .blocks
            .iter()
            .flat_map(|b| b.0.iter())
            .map(|w| w.count_ones())
            .sum();
        f64::from(ones) / self.bits() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_low_false_positives() {
        let n = 20_000u64;
        let mut f = FlowFilter::new(16 * n as usize, 7);
        let missed = (0..n).filter(|&i| !f.insert(&[i, 1])).count();
        assert!(
            missed < 20,
            "fresh keys are new but for rare false positives: {missed}"
        );
        for i in 0..n {
            assert!(f.contains(&[i, 1]));
            assert!(!f.insert(&[i, 1]));
        }
        let fp = (n..n + 200_000).filter(|&i| f.contains(&[i, 1])).count() as f64 / 200_000.0;
        assert!(fp < 0.0015, "false positive rate {fp}");
        f.clear();
        assert!(!f.contains(&[1, 1]));
    }
}

//! Where every PINT decision's randomness comes from: a few 64-bit words derived from the
//! packet ID (and the hop index), cut into fixed bit slices by the plan compiler. Switch
//! and sink derive the same words, so they make the same decisions, and the switch pays one
//! `mix64` per word instead of one hash per decision.
//!
//! ```text
//! packet word  M      = mix64(pid ^ PACKET_WORD)
//!   bits 63..32       the query set (compared with the plan's thresholds over 2^32)
//!   bits 31..0        packet slices 0 and 1 (16 bits each; slice 0 = bits 15..0)
//! packet tape  P_j    = mix64(M ^ mix64(PACKET_TAPE + j))        j >= 1: packet slices 4j-2 .. 4j+1
//! hop tape     H_i,j  = mix64(M ^ HOP_KEYS[i] ^ j * STRIDE)        hop i (1..=255), word j
//! value word   V_q,v,k = mix64(M ^ value_key(salt_q, v) ^ k * STRIDE)
//!              value_key(salt, v) = mix64(v ^ salt)
//! HOP_KEYS[i]         = mix64(HOP_TAPE ^ i)
//! ```
//!
//! Packet slices (16 bits) choose per-packet things: the coding layer of each instance of a
//! static per-flow query. Hop slices (24 bits for sampling, 16 for rounding coins) choose
//! per-hop things: whether hop `i` writes (`g < floor(2^24 / i)`), joins an XOR layer
//! (`g < floor(p * 2^24)`), and which way a value is rounded. Value words give `b`-bit hashes
//! of a switch's value salted by the packet (instance `n` of a query takes its own `b` bits).
//! A slice never straddles two words; the plan compiler hands slices out in query order so
//! that no two decisions share bits.

use crate::hash::mix64;

/// Seeds of the tape words.
pub mod seeds {
    /// The packet word `M`.
    pub const PACKET_WORD: u64 = 0x5049_4e54_5041_434b;
    /// Packet tape words after `M`.
    pub const PACKET_TAPE: u64 = 0x5049_4e54_5054_4150;
    /// Hop tape words.
    pub const HOP_TAPE: u64 = 0x5049_4e54_4854_4150;
    /// Value keys.
    pub const VALUE_KEY: u64 = 0x5049_4e54_564b_4559;
    /// Spacing of the words of one tape.
    pub const STRIDE: u64 = 0x9e37_79b9_7f4a_7c15;
}

/// Bits of a sampling slice.
pub const SAMPLE_BITS: u32 = 24;
/// Bits of a rounding coin or a layer slice.
pub const COIN_BITS: u32 = 16;

/// The keys of hop indices 0..=255 in the hop tape (index 0 is unused: hops count from 1).
pub static HOP_KEYS: [u64; 256] = {
    let mut k = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        k[i] = mix64(seeds::HOP_TAPE ^ i as u64);
        i += 1;
    }
    k
};

/// `floor(2^24 / i)` for hop `i` (index 0 unused): hop `i` writes on the baseline layer
/// when its sampling slice is below this, with probability `1 / i`.
pub static SAMPLE_THRESHOLDS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 1;
    while i < 256 {
        t[i] = (1u32 << SAMPLE_BITS) / i as u32;
        i += 1;
    }
    t
};

/// The hop whose sample survives on a `k`-hop path, for the packet with packet word `m` and
/// a query whose sampling slice is `s`: the largest `i <= k` whose slice is below its
/// threshold (hop 1 always samples).
#[inline(always)]
pub fn sample_writer(m: u64, k: usize, s: Slice) -> usize {
    let mut i = k.min(255);
    while i >= 2 && hop_slice(m, i, s) >= SAMPLE_THRESHOLDS[i] {
        i -= 1;
    }
    i.max(1)
}

/// The packet word `M` of packet ID `pid`.
#[inline(always)]
pub const fn packet_word(pid: u32) -> u64 {
    mix64(pid as u64 ^ seeds::PACKET_WORD)
}

/// The query-set choice of a packet: the high half of `M`.
#[inline(always)]
pub const fn set_choice(m: u64) -> u32 {
    (m >> 32) as u32
}

/// Word `j` of hop `hop`'s tape.
#[inline(always)]
pub fn hop_word(m: u64, hop: usize, j: u32) -> u64 {
    mix64(m ^ HOP_KEYS[hop & 255] ^ u64::from(j).wrapping_mul(seeds::STRIDE))
}

/// The key of value `v` for a query with salt `salt`.
#[inline(always)]
pub const fn value_key(salt: u64, v: u32) -> u64 {
    mix64(v as u64 ^ salt)
}

/// Value word `k` of a value with key `vkey`.
#[inline(always)]
pub const fn value_word(m: u64, vkey: u64, k: u32) -> u64 {
    mix64(m ^ vkey ^ (k as u64).wrapping_mul(seeds::STRIDE))
}

/// A query's salt: distinct queries of one plan get distinct salts (from their names),
/// so their decisions are independent.
pub fn query_salt(name: &str) -> u64 {
    let mut s = seeds::VALUE_KEY;
    for b in name.bytes() {
        s = mix64(s ^ u64::from(b));
    }
    mix64(s ^ name.len() as u64)
}

/// A bit range of one tape word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slice {
    /// The word.
    pub word: u8,
    /// The lowest bit.
    pub shift: u8,
    /// The width in bits.
    pub width: u8,
    /// The low `width` bits set.
    mask: u32,
}

impl Default for Slice {
    /// The lowest bit of word 0 (a placeholder for a decision a plan does not make).
    fn default() -> Self {
        Slice::new(0, 0, 1)
    }
}

impl Slice {
    /// The slice of `width` bits (1 to 32) at bit `shift` of word `word`.
    pub const fn new(word: u8, shift: u8, width: u8) -> Slice {
        Slice {
            word,
            shift,
            width,
            mask: ((1u64 << width) - 1) as u32,
        }
    }

    /// The slice's bits of `w`.
    #[inline(always)]
    pub const fn of(&self, w: u64) -> u32 {
        (w >> self.shift) as u32 & self.mask
    }
}

/// Hands out slices of a tape in order. Packet slices start at bit 0 of word 0 with 32 bits
/// free (the query set uses the rest of `M`); hop slices start at bit 0 of word 0 with 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceAllocator {
    word: u8,
    used: u8,
    first_word_bits: u8,
    /// A slice was asked for past the tape's last word ([`MAX_TAPE_WORDS`]).
    overflowed: bool,
}

/// Words a tape holds: a slice names its word in one byte.
pub const MAX_TAPE_WORDS: u32 = 256;

impl SliceAllocator {
    /// An allocator for the packet tape.
    pub const fn packet() -> SliceAllocator {
        SliceAllocator {
            word: 0,
            used: 0,
            first_word_bits: 32,
            overflowed: false,
        }
    }

    /// An allocator for a hop tape.
    pub const fn hop() -> SliceAllocator {
        SliceAllocator {
            word: 0,
            used: 0,
            first_word_bits: 64,
            overflowed: false,
        }
    }

    /// The next `width`-bit slice (1 to 32 bits). Past the tape's last word it hands out
    /// the last word's bits again and remembers it ([`SliceAllocator::overflowed`]): the
    /// plan must then be refused, its queries' draws no longer independent.
    pub fn take(&mut self, width: u32) -> Slice {
        assert!((1..=32).contains(&width));
        let room = if self.word == 0 {
            self.first_word_bits
        } else {
            64
        };
        if u32::from(self.used) + width > u32::from(room) {
            match self.word.checked_add(1) {
                Some(w) => self.word = w,
                None => self.overflowed = true,
            }
            self.used = 0;
        }
        let s = Slice::new(self.word, self.used, width as u8);
        self.used += width as u8;
        s
    }

    /// Whether more slices were asked for than the tape holds.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Words of the tape in use (the switch computes no more than these).
    pub fn words(&self) -> u32 {
        if self.used == 0 && self.word == 0 {
            0
        } else {
            u32::from(self.word) + 1
        }
    }
}

/// Word `j` of the packet tape (word 0 is `M` itself).
#[inline(always)]
pub fn packet_tape_word(m: u64, j: u32) -> u64 {
    if j == 0 {
        m
    } else {
        mix64(m ^ mix64(seeds::PACKET_TAPE.wrapping_add(u64::from(j))))
    }
}

/// A packet's slice of its packet tape.
#[inline(always)]
pub fn packet_slice(m: u64, s: Slice) -> u32 {
    s.of(packet_tape_word(m, u32::from(s.word)))
}

/// A hop's slice of its hop tape.
#[inline(always)]
pub fn hop_slice(m: u64, hop: usize, s: Slice) -> u32 {
    s.of(hop_word(m, hop, u32::from(s.word)))
}

/// The words of one hop's tape: the first few (as many as the plan uses, at most four)
/// computed up front, independent of each other; any further word is computed when read.
#[derive(Debug, Clone, Copy)]
pub struct HopTape {
    m: u64,
    key: u64,
    words: [u64; 4],
    ready: u32,
}

impl HopTape {
    /// The tape of hop `hop` for the packet with packet word `m`, with its first `words`
    /// words computed.
    #[inline(always)]
    pub fn new(m: u64, hop: usize, words: u32) -> HopTape {
        let key = HOP_KEYS[hop & 255];
        let ready = words.min(4);
        let mut w = [0u64; 4];
        for (j, slot) in w.iter_mut().enumerate().take(ready as usize) {
            *slot = mix64(m ^ key ^ (j as u64).wrapping_mul(seeds::STRIDE));
        }
        HopTape {
            m,
            key,
            words: w,
            ready,
        }
    }

    /// The slice `s` of this tape.
    #[inline(always)]
    pub fn slice(&self, s: Slice) -> u32 {
        let j = u32::from(s.word);
        if j < self.ready {
            s.of(self.words[j as usize])
        } else {
            s.of(mix64(
                self.m ^ self.key ^ u64::from(j).wrapping_mul(seeds::STRIDE),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tape_asked_for_more_than_its_words_says_so() {
        let mut a = SliceAllocator::hop();
        for _ in 0..MAX_TAPE_WORDS * 2 {
            a.take(32);
        }
        assert!(!a.overflowed(), "every word used, none past");
        assert_eq!(a.words(), MAX_TAPE_WORDS);
        a.take(1);
        assert!(a.overflowed());
        assert_eq!(a.words(), MAX_TAPE_WORDS);
    }

    #[test]
    fn allocation_never_straddles_and_counts_words() {
        let mut a = SliceAllocator::hop();
        assert_eq!(a.words(), 0);
        let s0 = a.take(24);
        let s1 = a.take(24);
        let c0 = a.take(16);
        let c1 = a.take(16);
        assert_eq!((s0.word, s0.shift), (0, 0));
        assert_eq!((s1.word, s1.shift), (0, 24));
        assert_eq!((c0.word, c0.shift), (0, 48));
        assert_eq!((c1.word, c1.shift), (1, 0));
        assert_eq!(a.words(), 2);
        let mut p = SliceAllocator::packet();
        assert_eq!(p.take(16).word, 0);
        assert_eq!(p.take(16).shift, 16);
        assert_eq!(p.take(16).word, 1);
    }

    #[test]
    fn tape_words_agree_with_their_definitions() {
        let m = packet_word(12345);
        let t = HopTape::new(m, 3, 2);
        for j in 0..6u8 {
            let s = Slice::new(j, 8, 24);
            assert_eq!(t.slice(s), hop_slice(m, 3, s));
            assert_eq!(
                hop_word(m, 3, u32::from(j)) >> 8 & 0xff_ffff,
                u64::from(t.slice(s))
            );
        }
        assert_eq!(SAMPLE_THRESHOLDS[1], 1 << 24);
        assert_eq!(SAMPLE_THRESHOLDS[3], 5_592_405);
        assert_ne!(query_salt("path"), query_salt("latency"));
        // Literal vectors: these words are part of the switch-to-sink contract.
        assert_eq!(packet_word(0), 0x33a1_1604_7178_5691);
        assert_eq!(hop_word(packet_word(1), 1, 0), 0x0b6e_680a_8228_0a2a);
        assert_eq!(
            value_word(packet_word(1), value_key(query_salt("path"), 7), 0),
            0x2abc_059a_3e5f_6d3c
        );
    }

    #[test]
    fn slices_are_uniform_and_independent() {
        // Two 24-bit slices of one word and the same slice at two hops: each below a quarter
        // about a quarter of the time, jointly about a sixteenth.
        let (mut a, mut b, mut both, mut hops) = (0u32, 0u32, 0u32, 0u32);
        let q = 1u32 << 22;
        let n = 200_000u32;
        let s0 = Slice::new(0, 0, 24);
        let s1 = Slice::new(0, 24, 24);
        for pid in 0..n {
            let m = packet_word(pid);
            let x = hop_slice(m, 2, s0) < q;
            let y = hop_slice(m, 2, s1) < q;
            let z = hop_slice(m, 3, s0) < q;
            a += u32::from(x);
            b += u32::from(y);
            both += u32::from(x && y);
            hops += u32::from(x && z);
        }
        let near = |v: u32, p: f64| (f64::from(v) / f64::from(n) - p).abs() < 0.005;
        assert!(near(a, 0.25) && near(b, 0.25), "{a} {b}");
        assert!(near(both, 0.0625) && near(hops, 0.0625), "{both} {hops}");
    }
}

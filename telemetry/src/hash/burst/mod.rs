//! Every per-packet hash a hop needs, for a whole burst at a time: the key hash `F`, the
//! packet ID, the packet word `M`, the hop's first tape word and the value word of one key
//! (`crate::pint::tape`). The data plane fills in each packet's words and hop index, calls
//! [`BurstHashes::compute`] once, and reads the results; the same functions the switch and
//! the sink use one packet at a time give the same values (a test checks every lane).
//!
//! A burst's packets are independent and 64-bit multiplies dominate the work, so on x86-64
//! they are hashed several at a time: eight with AVX-512 (F and DQ), four with AVX2; a
//! plain loop does the same arithmetic elsewhere ([`Width`]).

use crate::hash::{key_hash, mix64, packet_id};
use crate::pint::tape::{self, HOP_KEYS};

/// Most packets in one burst.
pub const MAX: usize = 64;

/// One burst's hash inputs and outputs, a lane per packet (structure of arrays, so that
/// lanes load and store together).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct BurstHashes {
    /// In: `src << 32 | dst` (see [`crate::hash::flow_words`]).
    pub w0: [u64; MAX],
    /// In: `protocol << 32 | src_port << 16 | dst_port`.
    pub w1: [u64; MAX],
    /// In: `ident << 32 | tcp_seq`.
    pub w2: [u64; MAX],
    /// In: the hop index (1 to 255).
    pub hop: [u64; MAX],
    /// Out: the key hash `F` ([`crate::hash::key_hash`]).
    pub f: [u64; MAX],
    /// Out: the packet ID ([`crate::hash::packet_id`]) in the low 32 bits.
    pub pid: [u64; MAX],
    /// Out: the packet word `M` ([`tape::packet_word`]).
    pub m: [u64; MAX],
    /// Out: word 0 of the hop's tape ([`tape::hop_word`]).
    pub hop_word: [u64; MAX],
    /// Out: `mix64(M ^ key)` for the `key` given to [`BurstHashes::compute`] (a path query's
    /// value word).
    pub value_word: [u64; MAX],
    /// How the lanes are computed.
    width: Width,
}

/// How many lanes one instruction works on, from the CPU's vector units: every width gives
/// the same values, bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// One lane at a time, in plain integer arithmetic (any CPU).
    Plain,
    /// Four lanes at a time (x86-64 with AVX2).
    Avx2,
    /// Eight lanes at a time (x86-64 with AVX-512 F and DQ).
    Avx512,
}

impl Width {
    /// Every width, narrowest first.
    pub const ALL: [Width; 3] = [Width::Plain, Width::Avx2, Width::Avx512];

    /// The widest this CPU has.
    pub fn best() -> Width {
        if Width::Avx512.available() {
            Width::Avx512
        } else if Width::Avx2.available() {
            Width::Avx2
        } else {
            Width::Plain
        }
    }

    /// Whether this CPU has it.
    pub fn available(self) -> bool {
        match self {
            Width::Plain => true,
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512dq")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Its name in reports (the switch prints it when it starts): `plain`, `avx2`,
    /// `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Width::Plain => "plain",
            Width::Avx2 => "avx2",
            Width::Avx512 => "avx512",
        }
    }
}

impl Default for BurstHashes {
    fn default() -> Self {
        BurstHashes::new()
    }
}

impl BurstHashes {
    /// Empty lanes, computed with the widest vectors this CPU has.
    pub fn new() -> BurstHashes {
        BurstHashes::with_width(Width::best()).expect("the best width is available")
    }

    /// Empty lanes computed `width` lanes at a time; `None` when this CPU lacks it.
    pub fn with_width(width: Width) -> Option<BurstHashes> {
        if !width.available() {
            return None;
        }
        Some(BurstHashes {
            w0: [0; MAX],
            w1: [0; MAX],
            w2: [0; MAX],
            hop: [0; MAX],
            f: [0; MAX],
            pid: [0; MAX],
            m: [0; MAX],
            hop_word: [0; MAX],
            value_word: [0; MAX],
            width,
        })
    }

    /// The same, always with the plain loop (to compare the widths).
    pub fn narrow() -> BurstHashes {
        BurstHashes::with_width(Width::Plain).expect("plain works everywhere")
    }

    /// How this burst's lanes are computed.
    pub fn width(&self) -> Width {
        self.width
    }

    /// Computes every output of the first `n` lanes (at most [`MAX`]) from their inputs,
    /// with `value_key` for the value words.
    #[inline]
    pub fn compute(&mut self, n: usize, value_key: u64) {
        let n = n.min(MAX);
        match self.width {
            // SAFETY: `width` is AVX-512 only when the CPU reports AVX-512 F and DQ.
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => unsafe { avx512::compute(self, n, value_key) },
            // SAFETY: `width` is AVX2 only when the CPU reports AVX2.
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => unsafe { avx2::compute(self, n, value_key) },
            _ => self.compute_narrow(n, value_key),
        }
    }

    fn compute_narrow(&mut self, n: usize, value_key: u64) {
        for i in 0..n {
            let f = key_hash(self.w0[i], self.w1[i]);
            let pid = packet_id(f, self.w2[i]);
            let m = tape::packet_word(pid);
            self.f[i] = f;
            self.pid[i] = u64::from(pid);
            self.m[i] = m;
            self.hop_word[i] = mix64(m ^ HOP_KEYS[(self.hop[i] & 255) as usize]);
            self.value_word[i] = mix64(m ^ value_key);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim_rng::SimRng;

    fn filled(h: &mut BurstHashes, rng: &mut SimRng) {
        for i in 0..MAX {
            h.w0[i] = rng.next_u64();
            h.w1[i] = rng.next_u64() & 0xff_ffff_ffff;
            h.w2[i] = rng.next_u64();
            h.hop[i] = 1 + rng.next_u64() % 255;
        }
    }

    /// Every lane equals the one-packet functions, at every width, for every burst length.
    #[test]
    fn lanes_equal_the_per_packet_hashes() {
        let mut rng = SimRng::new(3);
        for width in Width::ALL {
            let Some(mut h) = BurstHashes::with_width(width) else {
                eprintln!("{width:?}: not on this CPU, not tested");
                continue;
            };
            for n in [1usize, 7, 8, 9, 17, 24, 31, 32, 40, 64] {
                filled(&mut h, &mut rng);
                let key = rng.next_u64();
                h.compute(n, key);
                for i in 0..n {
                    let f = key_hash(h.w0[i], h.w1[i]);
                    let pid = packet_id(f, h.w2[i]);
                    let m = tape::packet_word(pid);
                    assert_eq!(h.f[i], f, "lane {i} of {n}, {width:?}");
                    assert_eq!(h.pid[i], u64::from(pid));
                    assert_eq!(h.m[i], m);
                    assert_eq!(h.hop_word[i], tape::hop_word(m, h.hop[i] as usize, 0));
                    assert_eq!(h.value_word[i], mix64(m ^ key));
                }
            }
        }
    }
}

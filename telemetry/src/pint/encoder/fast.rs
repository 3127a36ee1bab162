//! The straight-line form of a plan whose every query set holds at most one path query
//! (keyed by the switch's ID, one instance, at most one XOR layer) and at most one
//! compressed value (a per-flow sample or a max, min or sum aggregate), with all randomness
//! in the packet word and the first two hop words: the shape of the paper's plan and of most
//! deployments. Per packet it is the set choice, at most three `mix64` and one compression,
//! with no dispatch; it is bit for bit the general form's result (tested).

use crate::pint::compress::LogCompressor;
use crate::pint::plan::{HopInput, PerPacketOp};
use crate::pint::query::ValueKind;
use crate::pint::tape::{HOP_KEYS, SAMPLE_THRESHOLDS, Slice, seeds};

use crate::hash::mix64;

/// A path query's work at this switch.
#[derive(Debug, Clone, Copy)]
pub(super) struct FastPath {
    pub shift: u32,
    pub mask: u64,
    /// The switch's value key mixed with the value word's stride.
    pub key: u64,
    pub value_shift: u32,
    pub value_mask: u64,
    /// Packet-word slice that chooses the layer (word 0).
    pub layer: Slice,
    /// Hop slice that decides whether this hop writes.
    pub sample: Slice,
    pub tau: u32,
    /// The XOR layer's threshold (0 without one: no hop writes there).
    pub xor: u32,
}

/// What a compressed value does with its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Merge {
    /// Reservoir sample: replace when the hop's sample slice says so.
    Sample(Slice),
    Max,
    /// Min as the max of complements.
    Min,
    /// Sum (and product, in the log domain), saturating.
    Sum,
}

/// A compressed value's work at this switch.
#[derive(Debug, Clone)]
pub(super) struct FastValue {
    pub shift: u32,
    pub mask: u64,
    pub value: ValueKind,
    pub coin: Slice,
    pub merge: Merge,
    pub compression: LogCompressor,
    pub max: u64,
}

/// One query set.
#[derive(Debug, Clone)]
pub(super) struct FastSet {
    /// The set's end threshold over 2^32.
    pub end: u64,
    pub path: Option<FastPath>,
    pub value: Option<FastValue>,
    /// Whether the set reads hop word 1.
    pub second_word: bool,
}

/// The plan in straight-line form.
#[derive(Debug, Clone)]
pub(super) struct FastProgram {
    pub sets: Vec<FastSet>,
}

impl FastValue {
    pub fn merge_of(op: PerPacketOp) -> Merge {
        match op {
            PerPacketOp::Max => Merge::Max,
            PerPacketOp::Min => Merge::Min,
            PerPacketOp::Sum | PerPacketOp::Product => Merge::Sum,
        }
    }
}

impl FastProgram {
    /// Encodes one hop (see [`super::SwitchPlan::encode`]).
    #[inline(always)]
    pub fn encode(&self, digest: u64, m: u64, input: &HopInput) -> u64 {
        let choice = m >> 32;
        let sets = &self.sets;
        let mut s = 0;
        while s + 1 < sets.len() && sets[s].end <= choice {
            s += 1;
        }
        let set = &sets[s];
        let hop = input.hop & 255;
        let hop_key = m ^ HOP_KEYS[hop];
        let w0 = mix64(hop_key);
        let w1 = if set.second_word {
            mix64(hop_key ^ seeds::STRIDE)
        } else {
            0
        };
        let word = |s: Slice| s.of(if s.word == 0 { w0 } else { w1 });
        let threshold = SAMPLE_THRESHOLDS[hop];
        let mut d = digest;
        if let Some(p) = &set.path {
            let field = (d >> p.shift) & p.mask;
            let h = (mix64(m ^ p.key) >> p.value_shift) & p.value_mask;
            let baseline = p.layer.of(m) < p.tau;
            let limit = if baseline { threshold } else { p.xor };
            let writes = 0u64.wrapping_sub(u64::from(word(p.sample) < limit));
            let new = if baseline {
                (h & writes) | (field & !writes)
            } else {
                field ^ (h & writes)
            };
            d = (d & !(p.mask << p.shift)) | (new << p.shift);
        }
        if let Some(v) = &set.value {
            let field = (d >> v.shift) & v.mask;
            let code = u64::from(v.compression.compress(input.value(v.value), word(v.coin)));
            let new = match v.merge {
                Merge::Sample(sample) => {
                    if word(sample) < threshold {
                        code
                    } else {
                        field
                    }
                }
                Merge::Max => field.max(code),
                Merge::Min => field.max(v.max - code),
                Merge::Sum => (field + code).min(v.max),
            };
            d = (d & !(v.mask << v.shift)) | ((new & v.mask) << v.shift);
        }
        d
    }
}

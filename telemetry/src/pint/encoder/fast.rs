//! The straight-line form of a plan whose every query set holds at most one path query
//! (keyed by the switch's ID, one instance, at most one XOR layer) and at most one
//! compressed value (a per-flow sample or a max, min or sum aggregate), with all randomness
//! in the packet word and the first two hop words: the shape of the paper's plan and of most
//! deployments. Per packet it is the set choice, at most three `mix64` and one compression,
//! with no dispatch; it is bit for bit the general form's result (tested).

use super::lanes::SetTables;
use crate::pint::compress::{LogCompressor, Prepared};
use crate::pint::plan::{HopInput, PerPacketOp};
use crate::pint::query::ValueKind;
use crate::pint::tape::{HOP_KEYS, SAMPLE_THRESHOLDS, Slice, seeds};

use std::hint::select_unpredictable;

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

/// The plan in straight-line form, flattened for the data plane: each set's constants in
/// one [`Flat`] record and the set chosen by counting thresholds, so that encoding a packet
/// takes no branch on the set, the layer, a coin or a sample (any of which would be
/// mispredicted at random).
#[derive(Debug, Clone)]
pub(super) struct FastProgram {
    /// The sets as compiled (the reference form, [`FastProgram::encode`]).
    pub sets: Vec<FastSet>,
    /// Set end thresholds over 2^32, padded with `u64::MAX`.
    ends: [u64; MAX_FAST_SETS],
    /// One record per set, padded with copies of the last.
    flat: [Flat; MAX_FAST_SETS],
    /// Whether any set reads hop word 1.
    second_word: bool,
    /// The same constants as per-set tables, for drawing eight lanes at once.
    tables: SetTables,
}

/// One query set's constants; a part the set lacks has zero masks (it changes nothing).
#[derive(Debug, Clone, Default)]
struct Flat {
    p_shift: u32,
    p_mask: u64,
    p_key: u64,
    p_value_shift: u32,
    p_value_mask: u64,
    p_layer: Slice,
    p_sample: Slice,
    p_tau: u32,
    p_xor: u32,
    v_shift: u32,
    v_mask: u64,
    v_coin: Slice,
    v_sample: Slice,
    v_max: u64,
    /// All ones when the value is a reservoir sample (else zero).
    v_is_sample: u64,
    /// All ones for max and min (min merges the complement `max - code`).
    v_is_max: u64,
    /// All ones for min.
    v_is_min: u64,
    /// All ones for sum.
    v_is_sum: u64,
    /// The value changes packet by packet (queue occupancy): compressed per packet.
    v_per_packet: Option<LogCompressor>,
}

/// All ones if `b`, else zero.
#[inline(always)]
fn ones(b: bool) -> u64 {
    0u64.wrapping_sub(u64::from(b))
}

impl Flat {
    fn of(set: &FastSet) -> Flat {
        let mut f = Flat::default();
        if let Some(p) = &set.path {
            f.p_shift = p.shift;
            f.p_mask = p.mask;
            f.p_key = p.key;
            f.p_value_shift = p.value_shift;
            f.p_value_mask = p.value_mask;
            f.p_layer = p.layer;
            f.p_sample = p.sample;
            f.p_tau = p.tau;
            f.p_xor = p.xor;
        }
        if let Some(v) = &set.value {
            f.v_shift = v.shift;
            f.v_mask = v.mask;
            f.v_coin = v.coin;
            f.v_max = v.max;
            if let Merge::Sample(sample) = v.merge {
                f.v_sample = sample;
            }
            f.v_is_sample = ones(matches!(v.merge, Merge::Sample(_)));
            f.v_is_max = ones(matches!(v.merge, Merge::Max | Merge::Min));
            f.v_is_min = ones(v.merge == Merge::Min);
            f.v_is_sum = ones(v.merge == Merge::Sum);
            f.v_per_packet = (v.value == ValueKind::QueueOccupancy).then(|| v.compression.clone());
        }
        f
    }
}

/// Most query sets a plan can have in the straight-line form (one prepared value each).
pub const MAX_FAST_SETS: usize = 8;

/// What hashing decides about one packet at one hop ([`super::SwitchPlan::draw`]) that the
/// burst's measured values are still needed for: the query set, the value's rounding coin
/// and whether a sampled value replaces its field. (The path query needs no measured value:
/// the draw encodes it straight away.) The data plane draws while it parses a burst and
/// applies the draws once the burst's values are known ([`super::SwitchPlan::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Draw {
    /// The packet word.
    pub(super) m: u64,
    /// The value's rounding coin.
    coin: u16,
    /// The query set.
    set: u8,
    /// Whether a sampled value replaces its field at this hop.
    value_writes: bool,
}

impl Draw {
    /// A draw that holds only the packet word (plans without the straight-line form).
    pub(super) fn of_word(m: u64) -> Draw {
        Draw {
            m,
            ..Draw::default()
        }
    }

    /// The query set.
    pub(super) fn set(&self) -> u8 {
        self.set
    }

    /// The rounding coin.
    pub(super) fn coin(&self) -> u16 {
        self.coin
    }

    /// Whether a sampled value replaces its field.
    pub(super) fn value_writes(&self) -> bool {
        self.value_writes
    }
}

impl SetTables {
    /// The tables of a flattened program.
    fn of(
        ends: &[u64; MAX_FAST_SETS],
        flat: &[Flat; MAX_FAST_SETS],
        second_word: bool,
    ) -> SetTables {
        let col = |f: &dyn Fn(&Flat) -> u64| -> [u64; MAX_FAST_SETS] {
            core::array::from_fn(|s| f(&flat[s]))
        };
        let slice = |f: &dyn Fn(&Flat) -> Slice| -> [[u64; MAX_FAST_SETS]; 3] {
            [
                col(&|x| u64::from(f(x).word)),
                col(&|x| u64::from(f(x).shift)),
                col(&|x| (1u64 << f(x).width) - 1),
            ]
        };
        SetTables {
            ends: *ends,
            real_ends: ends[..MAX_FAST_SETS - 1]
                .iter()
                .filter(|&&e| e != u64::MAX)
                .count(),
            p_shift: col(&|x| u64::from(x.p_shift)),
            p_mask: col(&|x| x.p_mask),
            p_key: col(&|x| x.p_key),
            p_value_shift: col(&|x| u64::from(x.p_value_shift)),
            p_value_mask: col(&|x| x.p_value_mask),
            layer_shift: col(&|x| u64::from(x.p_layer.shift)),
            layer_mask: col(&|x| (1u64 << x.p_layer.width) - 1),
            tau: col(&|x| u64::from(x.p_tau)),
            xor: col(&|x| u64::from(x.p_xor)),
            slices: [
                slice(&|x| x.p_sample),
                slice(&|x| x.v_coin),
                slice(&|x| x.v_sample),
            ],
            second_word,
            v_shift: col(&|x| u64::from(x.v_shift)),
            v_mask: col(&|x| x.v_mask),
            v_max: col(&|x| x.v_max),
            v_is_sample: col(&|x| x.v_is_sample),
            v_is_max: col(&|x| x.v_is_max),
            v_is_min: col(&|x| x.v_is_min),
            v_is_sum: col(&|x| x.v_is_sum),
            per_packet: flat.iter().any(|x| x.v_per_packet.is_some()),
        }
    }
}

/// The values of one burst (and egress port) prepared for compression, one per query set
/// ([`super::SwitchPlan::prepare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreparedValues(pub(super) [Prepared; MAX_FAST_SETS]);

/// What a burst's packets share at one egress port: every value but the queue occupancy
/// (which grows packet by packet) and the packet's own hop index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BurstValues {
    /// The switch's ID.
    pub switch_id: u32,
    /// The port the burst arrived on.
    pub ingress_port: u32,
    /// The egress port.
    pub egress_port: u32,
    /// Time in the switch, ns.
    pub hop_latency_ns: u64,
    /// The egress link's utilisation as PINT carries it.
    pub utilization: u64,
}

impl BurstValues {
    fn value(&self, kind: ValueKind) -> u64 {
        match kind {
            ValueKind::SwitchId => u64::from(self.switch_id),
            ValueKind::IngressPort => u64::from(self.ingress_port),
            ValueKind::EgressPort => u64::from(self.egress_port),
            ValueKind::HopLatency => self.hop_latency_ns,
            ValueKind::QueueOccupancy => 0,
            ValueKind::LinkUtilization => self.utilization.max(1),
        }
    }
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
    /// The flattened form of `sets` (at most [`MAX_FAST_SETS`], at least one).
    pub fn new(sets: Vec<FastSet>) -> FastProgram {
        assert!((1..=MAX_FAST_SETS).contains(&sets.len()));
        let mut ends = [u64::MAX; MAX_FAST_SETS];
        for (e, set) in ends.iter_mut().zip(&sets[..sets.len() - 1]) {
            *e = set.end;
        }
        let last = Flat::of(sets.last().expect("one set"));
        let mut flat: [Flat; MAX_FAST_SETS] = core::array::from_fn(|_| last.clone());
        for (f, set) in flat.iter_mut().zip(&sets) {
            *f = Flat::of(set);
        }
        let second_word = sets.iter().any(|s| s.second_word);
        let tables = SetTables::of(&ends, &flat, second_word);
        FastProgram {
            second_word,
            sets,
            ends,
            flat,
            tables,
        }
    }

    /// The constants as per-set tables.
    pub(super) fn tables(&self) -> &SetTables {
        &self.tables
    }

    /// The key whose value word ([`FastProgram::draw_hashed`]'s `value_word`) the first
    /// set's path query hashes (0 without one).
    pub fn value_key(&self) -> u64 {
        self.flat[0].p_key
    }

    /// Draws packet word `m` at hop `hop` (see [`Draw`]), encoding the path query into
    /// `digest` on the way.
    #[inline(always)]
    pub fn draw(&self, m: u64, hop: usize, digest: &mut u64) -> Draw {
        let hop_word = mix64(m ^ HOP_KEYS[hop & 255]);
        let value_word = mix64(m ^ self.value_key());
        self.draw_hashed(m, hop, hop_word, value_word, digest)
    }

    /// [`FastProgram::draw`] with the hop's first tape word and the value word of
    /// [`FastProgram::value_key`] already computed (a burst at a time:
    /// [`crate::hash::burst`]).
    #[inline(always)]
    pub fn draw_hashed(
        &self,
        m: u64,
        hop: usize,
        hop_word: u64,
        value_word: u64,
        digest: &mut u64,
    ) -> Draw {
        // A branch, not a computed index: the first set is the likely one (the predictor
        // learns it), and on that path the set's constants do not wait for the hash.
        let choice = m >> 32;
        let s = if choice < self.ends[0] {
            0
        } else {
            self.later_set(choice)
        };
        let set = &self.flat[s & (MAX_FAST_SETS - 1)];
        let hop = hop & 255;
        let w0 = hop_word;
        let w1 = if self.second_word {
            mix64(m ^ HOP_KEYS[hop] ^ seeds::STRIDE)
        } else {
            0
        };
        // Every random decision as arithmetic: a branch on one would be mispredicted half
        // the time.
        let word = |s: Slice| s.of(select_unpredictable(s.word == 0, w0, w1));
        let threshold = SAMPLE_THRESHOLDS[hop];
        // The path query: replace (baseline) or XOR in the hash when this hop writes.
        let vw = if set.p_key == self.flat[0].p_key {
            value_word
        } else {
            mix64(m ^ set.p_key)
        };
        let h = (vw >> set.p_value_shift) & set.p_value_mask;
        let baseline = set.p_layer.of(m) < set.p_tau;
        let limit = select_unpredictable(baseline, threshold, set.p_xor);
        let writes = ones(word(set.p_sample) < limit);
        let field = (*digest >> set.p_shift) & set.p_mask;
        let h = h & writes;
        let new = select_unpredictable(baseline, h | (field & !writes), field ^ h);
        *digest = (*digest & !(set.p_mask << set.p_shift)) | ((new & set.p_mask) << set.p_shift);
        Draw {
            m,
            coin: word(set.v_coin) as u16,
            set: s as u8,
            value_writes: word(set.v_sample) < threshold,
        }
    }

    /// The set of a choice past the first set's end.
    #[cold]
    #[inline(never)]
    fn later_set(&self, choice: u64) -> usize {
        self.ends.iter().map(|&e| usize::from(e <= choice)).sum()
    }

    /// Prepares each set's value of a burst.
    pub fn prepare(&self, values: &BurstValues, out: &mut PreparedValues) {
        for (slot, set) in out.0.iter_mut().zip(&self.sets) {
            if let Some(v) = &set.value {
                *slot = v.compression.prepare(values.value(v.value));
            }
        }
    }

    /// Encodes a drawn packet's value into `digest` (as the draw left it) with the burst's
    /// prepared values and the bytes queued ahead of it: with the draw, bit for bit
    /// [`FastProgram::encode`].
    #[inline(always)]
    pub fn apply(&self, digest: u64, d: &Draw, prepared: &PreparedValues, queue_bytes: u64) -> u64 {
        self.apply_drawn(
            digest,
            usize::from(d.set),
            u32::from(d.coin),
            d.value_writes,
            prepared,
            queue_bytes,
        )
    }

    /// [`FastProgram::apply`] from a draw's parts (a lane of [`super::DrawLanes`]).
    #[inline(always)]
    pub fn apply_drawn(
        &self,
        digest: u64,
        set: usize,
        coin: u32,
        value_writes: bool,
        prepared: &PreparedValues,
        queue_bytes: u64,
    ) -> u64 {
        let s = set & (MAX_FAST_SETS - 1);
        let set = &self.flat[s];
        // The value: sample, max, min or sum of its code.
        let field = (digest >> set.v_shift) & set.v_mask;
        let code = u64::from(match &set.v_per_packet {
            Some(c) => c.compress(queue_bytes, coin),
            None => prepared.0[s].code(coin),
        });
        let merged = select_unpredictable(set.v_is_min != 0, set.v_max.wrapping_sub(code), code);
        let sampled = select_unpredictable(value_writes, merged, field);
        let new = (sampled & set.v_is_sample)
            | (field.max(merged) & set.v_is_max)
            | ((field + merged).min(set.v_max) & set.v_is_sum);
        (digest & !(set.v_mask << set.v_shift)) | ((new & set.v_mask) << set.v_shift)
    }

    /// Encodes one hop (see [`super::SwitchPlan::encode`]): the draw, then the apply with
    /// the packet's own value prepared.
    #[inline(always)]
    pub fn encode(&self, digest: u64, m: u64, input: &HopInput) -> u64 {
        let mut d = digest;
        let draw = self.draw(m, input.hop, &mut d);
        let s = usize::from(draw.set) & (MAX_FAST_SETS - 1);
        let mut prepared = PreparedValues::default();
        if let Some(v) = self.sets.get(s).and_then(|set| set.value.as_ref()) {
            prepared.0[s] = v.compression.prepare(input.value(v.value));
        }
        self.apply(d, &draw, &prepared, input.queue_bytes)
    }
}

//! A plan as one switch runs it: the compiled plan plus what the switch can work out once
//! for its own static values (the value keys of its switch ID and port numbers), and each
//! query set flattened into a short list of operations with every constant resolved, so that
//! the per-packet work is the tape words, a few compares and table lookups, and no branch on
//! a coin flip. The result is bit for bit [`Plan::encode`]'s (a test checks it on random
//! inputs); queries the flat form does not cover run through the plan's own encoder.

use crate::hash::burst::BurstHashes;
use crate::pint::coding::PathParts;
use crate::pint::compress::LogCompressor;
use crate::pint::plan::{Compression, HopInput, PerPacketOp, Plan, QueryKind, ValueKeys};
use crate::pint::query::{QueryFile, ValueKind};
use crate::pint::tape::{self, HopTape, SAMPLE_THRESHOLDS, Slice};
use crate::wire::shim::digest_bytes;

mod fast;
mod lanes;

pub use fast::{BurstValues, Draw, MAX_FAST_SETS, PreparedValues};
use fast::{FastPath, FastProgram, FastSet, FastValue, Merge};
pub use lanes::DrawLanes;

/// Where a static query's value key comes from.
#[derive(Debug, Clone, Copy)]
enum KeySource {
    /// The switch's own ID: one key.
    Switch(u64),
    /// A port number: the query's precomputed port keys (computed with the salt beyond).
    Port(u64),
}

/// One query's work at a hop, with its constants resolved.
#[derive(Debug, Clone)]
enum Op {
    /// Path tracing, one instance, at most one XOR layer.
    Path {
        qi: usize,
        parts: PathParts,
        keys: KeySource,
        value: ValueKind,
    },
    /// A dynamic per-flow sample (reservoir) of a compressed value.
    Sample {
        sample: Slice,
        coin: Slice,
        value: ValueKind,
        compression: LogCompressor,
    },
    /// A per-packet aggregate with multiplicative codes.
    Aggregate {
        op: PerPacketOp,
        coin: Slice,
        value: ValueKind,
        compression: LogCompressor,
        max: u64,
    },
    /// Anything else: the plan's own encoder.
    General { qi: usize },
}

/// An operation and where its field sits in the digest.
#[derive(Debug, Clone)]
struct Placed {
    shift: u32,
    mask: u64,
    /// Every bit of the digest but the field's.
    keep: u64,
    op: Op,
}

/// The plan's query sets as operation lists.
#[derive(Debug, Clone, Default)]
struct Program {
    /// Per set: its end threshold and its operations.
    sets: Vec<(u64, Vec<Placed>)>,
}

/// Port numbers whose value keys are precomputed (larger ones are computed per packet).
pub const PRECOMPUTED_PORTS: usize = 64;

/// A compiled plan ready for one switch's data plane.
#[derive(Debug, Clone)]
pub struct SwitchPlan {
    /// The plan.
    pub plan: Plan,
    /// The query file it was compiled from (the sink compiles the same text).
    pub text: String,
    /// Per query: the value key of this switch's ID (static switch-ID queries; 0 otherwise).
    switch_keys: Vec<u64>,
    /// Per query: the value keys of port numbers (static port queries; empty otherwise).
    port_keys: Vec<Vec<u64>>,
    program: Program,
    /// The straight-line form, when the plan has its shape.
    fast: Option<FastProgram>,
}

impl SwitchPlan {
    /// Compiles `text` (a query file) for switch `switch_id`.
    pub fn compile(text: &str, switch_id: u32) -> Result<SwitchPlan, String> {
        let file = QueryFile::from_toml(text)?;
        let plan = Plan::compile(&file).map_err(|e| e.to_string())?;
        Ok(SwitchPlan::new(plan, text.to_owned(), switch_id))
    }

    /// Prepares `plan` (compiled from `text`) for switch `switch_id`.
    pub fn new(plan: Plan, text: String, switch_id: u32) -> SwitchPlan {
        let mut switch_keys = Vec::with_capacity(plan.queries.len());
        let mut port_keys = Vec::with_capacity(plan.queries.len());
        for q in &plan.queries {
            let salt = match &q.kind {
                QueryKind::StaticPerFlow { coding } => Some(coding.salt()),
                _ => None,
            };
            switch_keys.push(match (salt, q.value) {
                (Some(s), ValueKind::SwitchId) => tape::value_key(s, switch_id),
                _ => 0,
            });
            port_keys.push(match (salt, q.value) {
                (Some(s), ValueKind::IngressPort | ValueKind::EgressPort) => (0..PRECOMPUTED_PORTS)
                    .map(|p| tape::value_key(s, p as u32))
                    .collect(),
                _ => Vec::new(),
            });
        }
        let program = Program::compile(&plan, &switch_keys);
        let fast = program.fast();
        SwitchPlan {
            plan,
            text,
            switch_keys,
            port_keys,
            program,
            fast,
        }
    }

    /// The plan's version (what digest records and the sink use).
    pub fn version(&self) -> u32 {
        self.plan.version
    }

    /// The plan's tag in the shim: the version's low 16 bits.
    pub fn tag(&self) -> u16 {
        self.plan.version as u16
    }

    /// Bytes of the digest in the shim.
    pub fn digest_bytes(&self) -> usize {
        digest_bytes(self.plan.global_bits)
    }

    /// Updates a digest at one hop; `m` is the packet word ([`tape::packet_word`] of the packet
    /// ID) and `input` what the switch measured (its `switch_id` must be this plan's switch).
    #[inline(always)]
    pub fn encode(&self, digest: u64, m: u64, input: &HopInput) -> u64 {
        match &self.fast {
            Some(f) => f.encode(digest, m, input),
            None => self.encode_general(digest, m, input),
        }
    }

    /// What hashing decides about packet `pid` at hop `hop`: the first half of
    /// [`SwitchPlan::encode`], which the data plane runs while it parses a burst. What needs
    /// no measured value (the path query) it encodes into `digest` straight away.
    #[inline(always)]
    pub fn draw(&self, pid: u32, hop: usize, digest: &mut u64) -> Draw {
        let m = tape::packet_word(pid);
        match &self.fast {
            Some(f) => f.draw(m, hop, digest),
            None => Draw::of_word(m),
        }
    }

    /// The key whose value word the data plane hashes a burst at a time for
    /// [`SwitchPlan::draw_lanes`] (any key works; this one saves a hash per packet).
    pub fn value_key(&self) -> u64 {
        self.fast.as_ref().map_or(0, FastProgram::value_key)
    }

    /// Draws the lanes of `mask` of a burst whose `hashes` were computed with value key
    /// `key` (any key; [`SwitchPlan::value_key`] saves work), encoding the path query into
    /// each lane's digest: a burst's [`SwitchPlan::draw`]s. Plans without the straight-line
    /// form draw nothing here ([`SwitchPlan::apply_lane`] encodes them whole).
    pub fn draw_lanes(&self, hashes: &BurstHashes, key: u64, mask: u64, out: &mut DrawLanes) {
        if let Some(f) = &self.fast {
            f.draw_lanes(hashes, key, mask, out);
        }
    }

    /// Encodes the lanes of `mask` whole, all with the same `prepared` values (a burst's
    /// packets leaving by one port): each lane's digest after this hop in `out.digest`,
    /// exactly what [`SwitchPlan::draw_lanes`] then [`SwitchPlan::apply_lane`] give. False,
    /// changing nothing, for a plan without the straight-line form or whose values change
    /// packet by packet (the queue occupancy); draw and apply those lane by lane.
    pub fn encode_lanes(
        &self,
        hashes: &BurstHashes,
        key: u64,
        mask: u64,
        prepared: &PreparedValues,
        out: &mut DrawLanes,
    ) -> bool {
        self.fast
            .as_ref()
            .is_some_and(|f| f.encode_lanes(hashes, key, mask, prepared, out))
    }

    /// Lane `i`'s digest after this hop, its draw and packet word `m` given, with the
    /// burst's `prepared` values and the bytes queued ahead of the packet ([`SwitchPlan::apply`]
    /// for a lane).
    #[inline(always)]
    pub fn apply_lane(
        &self,
        lanes: &DrawLanes,
        i: usize,
        m: u64,
        prepared: &PreparedValues,
        queue_bytes: u64,
        input: impl FnOnce() -> HopInput,
    ) -> u64 {
        let i = i & (lanes.digest.len() - 1);
        match &self.fast {
            Some(f) => f.apply_drawn(
                lanes.digest[i],
                lanes.set[i] as usize,
                lanes.coin[i] as u32,
                lanes.value_writes[i] != 0,
                prepared,
                queue_bytes,
            ),
            None => self.encode_general(lanes.digest[i], m, &input()),
        }
    }

    /// Prepares a burst's values at one egress port for [`SwitchPlan::apply`].
    pub fn prepare(&self, values: &BurstValues, out: &mut PreparedValues) {
        if let Some(f) = &self.fast {
            f.prepare(values, out);
        }
    }

    /// The second half of [`SwitchPlan::encode`]: the digest after this hop for a drawn
    /// packet whose `digest` is as [`SwitchPlan::draw`] left it, with the burst's `prepared`
    /// values and the bytes queued ahead of the packet. `input` gives the packet's whole
    /// input for plans without the straight-line form. The result is exactly
    /// `encode(digest before the draw, packet_word(pid), &input())`.
    #[inline(always)]
    pub fn apply(
        &self,
        digest: u64,
        draw: &Draw,
        prepared: &PreparedValues,
        queue_bytes: u64,
        input: impl FnOnce() -> HopInput,
    ) -> u64 {
        match &self.fast {
            Some(f) => f.apply(digest, draw, prepared, queue_bytes),
            None => self.encode_general(digest, draw.m, &input()),
        }
    }

    /// Whether the plan runs in the straight-line form.
    pub fn is_straight_line(&self) -> bool {
        self.fast.is_some()
    }

    /// [`SwitchPlan::encode`] through the operation lists.
    #[inline(always)]
    fn encode_general(&self, digest: u64, m: u64, input: &HopInput) -> u64 {
        let choice = u64::from(tape::set_choice(m));
        let sets = &self.program.sets;
        let mut s = 0;
        while s + 1 < sets.len() && sets[s].0 <= choice {
            s += 1;
        }
        let tape = HopTape::new(m, input.hop, self.plan.hop_words);
        let mut d = digest;
        for p in &sets[s].1 {
            let field = (d >> p.shift) & p.mask;
            let new = match &p.op {
                Op::Path {
                    qi,
                    parts,
                    keys,
                    value,
                } => {
                    let key = match keys {
                        KeySource::Switch(k) => *k,
                        KeySource::Port(salt) => {
                            let port = input.static_value(*value);
                            self.key(*qi, *value, *salt, port)
                        }
                    };
                    let w = tape::value_word(m, key, parts.value_word);
                    let h = (w >> parts.value_shift) & parts.value_mask;
                    let u = tape::packet_slice(m, parts.layer);
                    let g = tape.slice(parts.sample);
                    let baseline = u < parts.tau;
                    let threshold = if baseline {
                        SAMPLE_THRESHOLDS[input.hop & 255]
                    } else {
                        parts.xor.unwrap_or(0)
                    };
                    let writes = 0u64.wrapping_sub(u64::from(g < threshold));
                    let replaced = (h & writes) | (field & !writes);
                    let xored = field ^ (h & writes);
                    if baseline { replaced } else { xored }
                }
                Op::Sample {
                    sample,
                    coin,
                    value,
                    compression,
                } => {
                    let writes = tape.slice(*sample) < SAMPLE_THRESHOLDS[input.hop & 255];
                    let code =
                        u64::from(compression.compress(input.value(*value), tape.slice(*coin)));
                    let keep = u64::from(writes).wrapping_sub(1);
                    (field & keep) | (code & !keep)
                }
                Op::Aggregate {
                    op,
                    coin,
                    value,
                    compression,
                    max,
                } => {
                    let code =
                        u64::from(compression.compress(input.value(*value), tape.slice(*coin)));
                    match op {
                        PerPacketOp::Max => field.max(code),
                        PerPacketOp::Min => field.max(max - code),
                        PerPacketOp::Sum | PerPacketOp::Product => (field + code).min(*max),
                    }
                }
                Op::General { qi } => {
                    self.plan.queries[*qi].encode_with(field, m, &tape, input, self, *qi)
                }
            };
            d = (d & p.keep) | ((new & p.mask) << p.shift);
        }
        d
    }
}

impl Program {
    /// The straight-line form, if every set has its shape.
    fn fast(&self) -> Option<FastProgram> {
        if self.sets.len() > MAX_FAST_SETS {
            return None;
        }
        let hop_word = |s: &Slice| (s.word <= 1).then_some(s.word == 1);
        let mut sets = Vec::with_capacity(self.sets.len());
        for (end, ops) in &self.sets {
            let mut set = FastSet {
                end: *end,
                path: None,
                value: None,
                second_word: false,
            };
            for p in ops {
                match &p.op {
                    Op::Path {
                        parts,
                        keys: KeySource::Switch(key),
                        ..
                    } if set.path.is_none() && parts.layer.word == 0 => {
                        set.second_word |= hop_word(&parts.sample)?;
                        set.path = Some(FastPath {
                            shift: p.shift,
                            mask: p.mask,
                            key: key
                                ^ u64::from(parts.value_word).wrapping_mul(tape::seeds::STRIDE),
                            value_shift: parts.value_shift,
                            value_mask: parts.value_mask,
                            layer: parts.layer,
                            sample: parts.sample,
                            tau: parts.tau,
                            xor: parts.xor.unwrap_or(0),
                        });
                    }
                    Op::Sample {
                        sample,
                        coin,
                        value,
                        compression,
                    } if set.value.is_none() => {
                        set.second_word |= hop_word(sample)? | hop_word(coin)?;
                        set.value = Some(FastValue {
                            shift: p.shift,
                            mask: p.mask,
                            value: *value,
                            coin: *coin,
                            merge: Merge::Sample(*sample),
                            compression: compression.clone(),
                            max: u64::from(compression.max_code()),
                        });
                    }
                    Op::Aggregate {
                        op,
                        coin,
                        value,
                        compression,
                        max,
                    } if set.value.is_none() => {
                        set.second_word |= hop_word(coin)?;
                        set.value = Some(FastValue {
                            shift: p.shift,
                            mask: p.mask,
                            value: *value,
                            coin: *coin,
                            merge: FastValue::merge_of(*op),
                            compression: compression.clone(),
                            max: *max,
                        });
                    }
                    _ => return None,
                }
            }
            sets.push(set);
        }
        Some(FastProgram::new(sets))
    }

    fn compile(plan: &Plan, switch_keys: &[u64]) -> Program {
        let op_of = |qi: usize| -> Op {
            let q = &plan.queries[qi];
            match &q.kind {
                QueryKind::StaticPerFlow { coding } => match coding.parts() {
                    Some(parts) => Op::Path {
                        qi,
                        parts,
                        keys: if q.value == ValueKind::SwitchId {
                            KeySource::Switch(switch_keys[qi])
                        } else {
                            KeySource::Port(coding.salt())
                        },
                        value: q.value,
                    },
                    None => Op::General { qi },
                },
                QueryKind::DynamicPerFlow {
                    sample,
                    coin,
                    compression,
                    ..
                } => Op::Sample {
                    sample: *sample,
                    coin: *coin,
                    value: q.value,
                    compression: compression.clone(),
                },
                QueryKind::PerPacket {
                    op,
                    compression: Compression::Log(c),
                    coin,
                } => Op::Aggregate {
                    op: *op,
                    coin: *coin,
                    value: q.value,
                    compression: c.clone(),
                    max: u64::from(c.max_code()),
                },
                QueryKind::PerPacket { .. } => Op::General { qi },
            }
        };
        Program {
            sets: plan
                .sets
                .iter()
                .map(|s| {
                    let ops = s
                        .fields
                        .iter()
                        .map(|f| {
                            let (qi, m) = (usize::from(f.query), f.mask);
                            Placed {
                                shift: u32::from(f.shift),
                                mask: m,
                                keep: !(m << f.shift),
                                op: op_of(qi),
                            }
                        })
                        .collect();
                    (s.end, ops)
                })
                .collect(),
        }
    }
}

impl ValueKeys for SwitchPlan {
    #[inline(always)]
    fn key(&self, query: usize, kind: ValueKind, salt: u64, value: u32) -> u64 {
        match kind {
            ValueKind::SwitchId => self.switch_keys[query],
            _ => match self.port_keys[query].get(value as usize) {
                Some(k) => *k,
                None => tape::value_key(salt, value),
            },
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::hash::hash64;

    #[test]
    fn switch_plan_encodes_exactly_as_the_plan() {
        let text = r#"
global_bits = 48
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
instances = 2
[[queries]]
name = "egress"
value = "egress_port"
aggregation = "static_per_flow"
bits = 4
frequency = 0.5
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
frequency = 0.5
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "max"
bits = 8
frequency = 0.5
[[queries]]
name = "queue"
value = "queue_occupancy"
aggregation = "sum"
bits = 8
unit = 100.0
frequency = 0.5
[[queries]]
name = "min_latency"
value = "hop_latency"
aggregation = "min"
bits = 8
frequency = 0.5
[[queries]]
name = "ingress"
value = "ingress_port"
aggregation = "static_per_flow"
bits = 4
scheme = "baseline"
frequency = 0.5
"#;
        for switch_id in [1u32, 77, 0xdead_beef] {
            let sp = SwitchPlan::compile(text, switch_id).unwrap();
            for pid in 0..5000u32 {
                let r = hash64(9, &[u64::from(pid)]);
                let input = HopInput {
                    pid,
                    hop: 1 + (r % 12) as usize,
                    switch_id,
                    ingress_port: (r >> 8) as u32 % 70,
                    egress_port: (r >> 16) as u32 % 70,
                    hop_latency_ns: r >> 40,
                    queue_bytes: r >> 44,
                    utilization: (r >> 50) + 1,
                };
                let d0 = r >> 32;
                assert_eq!(
                    sp.encode(d0, tape::packet_word(pid), &input),
                    sp.plan.encode(d0, &input),
                    "pid {pid}"
                );
                assert_eq!(drawn(&sp, d0, &input), sp.plan.encode(d0, &input));
            }
            assert_eq!(sp.digest_bytes(), 6);
            assert!(
                sp.program
                    .sets
                    .iter()
                    .flat_map(|s| &s.1)
                    .any(|p| matches!(p.op, Op::General { .. })),
                "the test covers the general path too"
            );
            assert_eq!(sp.tag(), sp.version() as u16);
            assert!(
                !sp.is_straight_line(),
                "two path instances need the general form"
            );
        }
    }

    /// [`SwitchPlan::encode`] the data plane's way: draw, prepare the burst's values, apply.
    fn drawn(sp: &SwitchPlan, digest: u64, input: &HopInput) -> u64 {
        let mut digest = digest;
        let draw = sp.draw(input.pid, input.hop, &mut digest);
        let mut prepared = PreparedValues::default();
        sp.prepare(
            &BurstValues {
                switch_id: input.switch_id,
                ingress_port: input.ingress_port,
                egress_port: input.egress_port,
                hop_latency_ns: input.hop_latency_ns,
                utilization: input.utilization,
            },
            &mut prepared,
        );
        sp.apply(digest, &draw, &prepared, input.queue_bytes, || *input)
    }

    /// Plans of the straight-line shape: every set one path query and one value.
    pub(in crate::pint::encoder) const STRAIGHT: [&str; 7] = [
        include_str!("../../../../configs/queries/paper.toml"),
        r#"
global_bits = 24
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 12
scheme = "baseline"
[[queries]]
name = "queue"
value = "queue_occupancy"
aggregation = "max"
bits = 12
frequency = 0.25
[[queries]]
name = "min_latency"
value = "hop_latency"
aggregation = "min"
bits = 12
frequency = 0.75
"#,
        r#"
global_bits = 8
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
"#,
        r#"
global_bits = 24
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 16
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
frequency = 0.5
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "max"
bits = 8
frequency = 0.3
[[queries]]
name = "s"
value = "queue_occupancy"
aggregation = "min"
bits = 8
frequency = 0.2
"#,
        include_str!("../../../tests/plans/min_product.toml"),
        // Four sets (the most AVX2 lanes pick from), then five (drawn one lane at a time
        // there).
        r#"
global_bits = 16
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
frequency = 0.4
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "max"
bits = 8
frequency = 0.3
[[queries]]
name = "min_latency"
value = "hop_latency"
aggregation = "min"
bits = 8
frequency = 0.2
[[queries]]
name = "util_product"
value = "link_utilization"
aggregation = "product"
bits = 8
frequency = 0.1
"#,
        r#"
global_bits = 16
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
frequency = 0.3
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "max"
bits = 8
frequency = 0.2
[[queries]]
name = "min_latency"
value = "hop_latency"
aggregation = "min"
bits = 8
frequency = 0.2
[[queries]]
name = "util_product"
value = "link_utilization"
aggregation = "product"
bits = 8
frequency = 0.2
[[queries]]
name = "max_latency"
value = "hop_latency"
aggregation = "max"
bits = 8
frequency = 0.1
"#,
    ];

    #[test]
    fn straight_line_plans_encode_exactly_as_the_plan() {
        for text in STRAIGHT {
            for switch_id in [3u32, 0x0102_0304] {
                let sp = SwitchPlan::compile(text, switch_id).unwrap();
                assert!(sp.is_straight_line(), "{text}");
                for pid in 0..20_000u32 {
                    let r = hash64(11, &[u64::from(pid)]);
                    let input = HopInput {
                        pid,
                        hop: 1 + (r % 40) as usize,
                        switch_id,
                        ingress_port: 1,
                        egress_port: 2,
                        hop_latency_ns: r >> (24 + (r % 30)),
                        queue_bytes: r >> 40,
                        utilization: (r >> 52) + 1,
                    };
                    let d0 = r >> 40;
                    let m = tape::packet_word(pid);
                    assert_eq!(
                        sp.encode(d0, m, &input),
                        sp.encode_general(d0, m, &input),
                        "pid {pid}"
                    );
                    assert_eq!(
                        drawn(&sp, d0, &input),
                        sp.encode(d0, m, &input),
                        "pid {pid}"
                    );
                    assert_eq!(sp.encode(d0, m, &input), sp.plan.encode(d0, &input));
                }
            }
        }
    }
}

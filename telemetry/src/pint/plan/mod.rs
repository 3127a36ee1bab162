//! The query engine: compiles queries and a global bit budget into an execution plan (a
//! probability distribution over query sets, each query at a fixed bit offset), picks each
//! packet's set from a global hash of its packet ID, and encodes and decodes the digest.
//!
//! Compilation lays every query's frequency along the probability line [0, 1), widest
//! queries first, each at the lowest free bit offset of the stretch it lands on, continuing
//! where the previous query stopped and wrapping around (McNaughton's wrap-around rule; for
//! equal widths it places any set of queries whose frequencies sum to at most
//! `global_bits / bits`). A query never appears twice in one set. Boundaries become integer
//! thresholds over 2^32, so every switch and the sink choose the same set for a packet.
//!
//! Every random decision comes from the packet's tape ([`crate::pint::tape`]): compilation
//! also hands each query its own slices of the tape (layer choices, per-hop sampling,
//! rounding coins) and a salt from its name, so no two queries share a decision.

use serde::Serialize;

use crate::hash::{hash64, seeds};
use crate::pint::coding::{PathCoding, Scheme, scheme_parameters};
use crate::pint::compress::{LinearCompressor, LogCompressor, MAX_LOG_BITS, MAX_UNIT, MIN_UNIT};
use crate::pint::query::{Aggregation, FlowDefinition, QueryFile, QuerySpec, ValueKind};
use crate::pint::tape::{
    self, COIN_BITS, HopTape, SAMPLE_BITS, SAMPLE_THRESHOLDS, Slice, SliceAllocator,
};
use crate::wire::shim::{get_bits, mask, set_bits};

/// Why queries cannot be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The global budget is outside 1 to 64 bits.
    #[error("global_bits = {0}: must be 1 to 64")]
    BadBudget(u32),
    /// A query is invalid on its own.
    #[error("query `{name}`: {reason}")]
    BadQuery {
        /// Query name.
        name: String,
        /// Why.
        reason: String,
    },
    /// No queries: every packet would carry a shim with nothing in it.
    #[error(
        "no queries: every packet would carry a shim with nothing in it; add a [[queries]] table (or set telemetry.enabled = false)"
    )]
    NoQueries,
    /// The queries need more bits per packet on average than the budget holds.
    #[error(
        "the queries need {needed:.3} bits per packet on average but global_bits is {budget} (over by {over:.3}); lower a frequency or a width"
    )]
    OverBudget {
        /// Average bits needed.
        needed: f64,
        /// The budget.
        budget: u32,
        /// By how much.
        over: f64,
    },
    /// The queries draw more random bits per packet than a tape holds.
    #[error(
        "the queries draw more random bits per packet than the encoding holds ({words} words of 64 bits per hop and per packet); use fewer queries or fewer instances"
    )]
    TooManyDraws {
        /// Words a tape holds.
        words: u32,
    },
    /// A query could not be placed on its whole frequency.
    #[error(
        "query `{name}` ({width} bits) fits on only {placed:.4} of packets, short of its frequency {frequency:.4} by {short:.4}; lower its frequency or the others'"
    )]
    DoesNotFit {
        /// Query name.
        name: String,
        /// Its width.
        width: u32,
        /// Its frequency.
        frequency: f64,
        /// What could be placed.
        placed: f64,
        /// The shortfall.
        short: f64,
    },
}

/// A per-packet aggregation operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PerPacketOp {
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Sum.
    Sum,
    /// Product.
    Product,
}

/// How a value becomes a code.
#[derive(Debug, Clone, PartialEq)]
pub enum Compression {
    /// Multiplicative, for max/min/product and latencies.
    Log(LogCompressor),
    /// Linear, for sums.
    Linear(LinearCompressor),
}

impl Compression {
    #[inline(always)]
    fn compress(&self, x: u64, coin: u32) -> u64 {
        u64::from(match self {
            Compression::Log(c) => c.compress(x, coin),
            Compression::Linear(c) => c.compress(x, coin),
        })
    }

    fn max_code(&self) -> u64 {
        u64::from(match self {
            Compression::Log(c) => c.max_code(),
            Compression::Linear(c) => c.max_code(),
        })
    }

    fn decompress(&self, code: u64) -> f64 {
        match self {
            Compression::Log(c) => c.decompress(code.min(u64::from(u32::MAX)) as u32),
            Compression::Linear(c) => c.decompress(code),
        }
    }
}

/// What a compiled query does.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryKind {
    /// Per-packet aggregation of a compressed value.
    PerPacket {
        /// The operator.
        op: PerPacketOp,
        /// The compression.
        compression: Compression,
        /// The hop slice of the rounding coin.
        coin: Slice,
    },
    /// Static per-flow values by distributed coding.
    StaticPerFlow {
        /// The coding.
        coding: PathCoding,
    },
    /// Dynamic per-flow sampling: one hop's compressed value per packet (reservoir: hop `i`
    /// overwrites when its sampling slice is below `floor(2^24 / i)`).
    DynamicPerFlow {
        /// The hop slice that decides whether a hop writes.
        sample: Slice,
        /// The hop slice of the rounding coin.
        coin: Slice,
        /// The compression.
        compression: LogCompressor,
        /// Per-flow sink storage in bytes.
        space_budget: u32,
    },
}

/// A query ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledQuery {
    /// Name.
    pub name: String,
    /// Measured value.
    pub value: ValueKind,
    /// Flow definition.
    pub flow: FlowDefinition,
    /// Bits it occupies in the digest.
    pub width: u32,
    /// Share of packets it runs on.
    pub frequency: f64,
    /// What it does.
    pub kind: QueryKind,
}

/// What one switch knows about a packet when it encodes, as integers (the data plane has
/// no floating point).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HopInput {
    /// Packet ID.
    pub pid: u32,
    /// Hop index (1-based, from the TTL).
    pub hop: usize,
    /// The switch's ID.
    pub switch_id: u32,
    /// Ingress port number.
    pub ingress_port: u32,
    /// Egress port number.
    pub egress_port: u32,
    /// Time in the switch, ns.
    pub hop_latency_ns: u64,
    /// Bytes queued at the egress port.
    pub queue_bytes: u64,
    /// Egress link utilization as PINT carries it: `max(1, ceil(512 U))` for HPCC's `U`.
    pub utilization: u64,
}

/// Scale of utilization values before compression (HPCC in PINT: `max(1, ceil(512 U))`).
pub const UTILIZATION_SCALE: f64 = 512.0;

/// Hops a sum's default range covers.
const SUM_HOPS: f64 = 16.0;

/// The step of a sum query given no `unit`: the value's usual range per hop (as the
/// multiplicative codes take it) over `SUM_HOPS` hops, in `2^bits` steps, at least 1 (a
/// latency sum of 8 bits steps by 4096 ns up to about 1 ms; of 16 bits by 16 ns). Values
/// without such a range (switch IDs, ports) step by 1.
pub fn default_sum_unit(kind: ValueKind, bits: u32) -> f64 {
    let per_hop = match kind {
        ValueKind::HopLatency => 65_536.0,
        ValueKind::QueueOccupancy => 3.2e7,
        ValueKind::LinkUtilization => 4.0 * UTILIZATION_SCALE,
        _ => return 1.0,
    };
    (per_hop * SUM_HOPS / 2f64.powi(bits as i32)).clamp(1.0, MAX_UNIT)
}

/// What one unit of a hop's value as PINT carries it is in the value's own units: a
/// utilization is carried as `512 U`, so a carried 1 is 1/512 of line rate; every other value
/// is carried as it is (ns, bytes, IDs).
pub fn carried_unit(kind: ValueKind) -> f64 {
    match kind {
        ValueKind::LinkUtilization => 1.0 / UTILIZATION_SCALE,
        _ => 1.0,
    }
}

impl HopInput {
    /// The value PINT carries for a utilization `u` (1.0 = line rate).
    pub fn utilization_value(u: f64) -> u64 {
        (UTILIZATION_SCALE * u).ceil().max(1.0) as u64
    }

    /// The value of `kind` as the compressor sees it.
    #[inline(always)]
    pub fn value(&self, kind: ValueKind) -> u64 {
        match kind {
            ValueKind::SwitchId => u64::from(self.switch_id),
            ValueKind::IngressPort => u64::from(self.ingress_port),
            ValueKind::EgressPort => u64::from(self.egress_port),
            ValueKind::HopLatency => self.hop_latency_ns,
            ValueKind::QueueOccupancy => self.queue_bytes,
            ValueKind::LinkUtilization => self.utilization.max(1),
        }
    }

    /// The value of a static kind as an integer.
    #[inline(always)]
    pub fn static_value(&self, kind: ValueKind) -> u32 {
        match kind {
            ValueKind::IngressPort => self.ingress_port,
            ValueKind::EgressPort => self.egress_port,
            _ => self.switch_id,
        }
    }
}

/// Where a switch gets the value keys ([`tape::value_key`]) of static queries from: computed
/// on the spot ([`Plan::encode`]) or precomputed for its own values
/// ([`crate::pint::encoder::SwitchPlan`]).
pub trait ValueKeys {
    /// The key of `value` (of `kind`) for query `query` with salt `salt`.
    fn key(&self, query: usize, kind: ValueKind, salt: u64, value: u32) -> u64;
}

/// Value keys computed on the spot.
pub struct ComputedKeys;

impl ValueKeys for ComputedKeys {
    #[inline(always)]
    fn key(&self, _query: usize, _kind: ValueKind, salt: u64, value: u32) -> u64 {
        tape::value_key(salt, value)
    }
}

/// The fields of a static per-flow query in one digest, one per instance (read without
/// allocating).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    field: u64,
    width: u32,
    bits: u32,
    instances: u32,
}

impl Fields {
    /// The field of each instance, instance 0 first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + use<> {
        let f = *self;
        (0..f.instances).map(move |n| get_bits(f.field, f.width, n * f.bits, f.bits))
    }

    /// The fields as a vector.
    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }
}

/// What the sink reads for one query from one digest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// A per-packet aggregate, decompressed (utilization already divided by 512).
    Aggregate(f64),
    /// The fields of a static per-flow query, one per instance, for the path decoder.
    Fields(Fields),
    /// A dynamic per-flow sample: the hop that wrote it and its value.
    Sample {
        /// Hop index.
        hop: usize,
        /// The code as carried.
        code: u32,
        /// The decompressed value.
        value: f64,
    },
}

impl CompiledQuery {
    fn compile(
        spec: &QuerySpec,
        global_bits: u32,
        packet: &mut SliceAllocator,
        hop: &mut SliceAllocator,
    ) -> Result<CompiledQuery, PlanError> {
        let bad = |reason: String| PlanError::BadQuery {
            name: spec.name.clone(),
            reason,
        };
        if !(1..=32).contains(&spec.bits) {
            return Err(bad(format!("bits = {} must be 1 to 32", spec.bits)));
        }
        if spec.flow != FlowDefinition::FiveTuple {
            // Accepted and ignored, it would promise what no switch or sink does.
            return Err(bad(format!(
                "flow = \"{}\": the switch and the sink key every flow by its 5-tuple; only five_tuple is supported",
                spec.flow
            )));
        }
        let frequency = spec.frequency.value();
        if !(frequency > 0.0 && frequency <= 1.0) {
            return Err(bad(format!("frequency {frequency} must be in (0, 1]")));
        }
        if frequency < MIN_FREQUENCY {
            return Err(bad(format!(
                "frequency {frequency} is below 2^-32, the finest step a packet's draw takes: no packet would carry it"
            )));
        }
        // Keys that do not apply to the query are refused, not ignored: each would promise
        // what no switch or sink does.
        let is_static = spec.aggregation == Aggregation::StaticPerFlow;
        let linear = spec.aggregation == Aggregation::Sum
            || (matches!(spec.aggregation, Aggregation::Max | Aggregation::Min)
                && spec.unit.is_some());
        if !is_static {
            for (key, given) in [
                ("instances", spec.instances.is_some()),
                ("scheme", spec.scheme.is_some()),
                ("max_path_length", spec.max_path_length.is_some()),
            ] {
                if given {
                    return Err(bad(format!("{key} applies to static_per_flow queries")));
                }
            }
        }
        if spec.unit.is_some()
            && matches!(
                spec.aggregation,
                Aggregation::StaticPerFlow | Aggregation::DynamicPerFlow
            )
        {
            return Err(bad(
                "unit applies to sum, max and min queries (linear codes)".into(),
            ));
        }
        if (is_static || linear) && (spec.epsilon.is_some() || spec.max_value.is_some()) {
            return Err(bad(
                "epsilon and max_value apply to multiplicative codes (dynamic_per_flow, product, and max or min without unit)".into()
            ));
        }
        if spec.epsilon.is_some() && spec.max_value.is_some() {
            return Err(bad("give epsilon or max_value, not both".into()));
        }
        let log = |default_eps: Option<f64>,
                   default_max: f64|
         -> Result<LogCompressor, PlanError> {
            if spec.bits > MAX_LOG_BITS {
                return Err(bad(format!(
                    "bits = {} is too wide for a multiplicative code (at most {MAX_LOG_BITS}; give `unit` for a linear code)",
                    spec.bits
                )));
            }
            if let Some(eps) = spec.epsilon {
                // Below 1e-6 the code's steps vanish in floating point (every value ends
                // up in one code).
                if !(1e-6..10.0).contains(&eps) {
                    return Err(bad(format!("epsilon {eps} must be in [1e-6, 10)")));
                }
                return Ok(LogCompressor::with_epsilon(eps, spec.bits));
            }
            if let Some(m) = spec.max_value {
                if !(m > 1.0 && m.is_finite()) {
                    return Err(bad(format!("max_value {m} must be above 1")));
                }
                return Ok(LogCompressor::for_range(m, spec.bits));
            }
            Ok(match default_eps {
                Some(eps) => LogCompressor::with_epsilon(eps, spec.bits),
                None => LogCompressor::for_range(default_max, spec.bits),
            })
        };
        // Defaults from the paper: 8-bit codes with eps 0.025 for utilization, 0.022 (8 bits)
        // or 0.42 (4 bits) for latency; other widths cover a typical range.
        let default_log = |kind: ValueKind| -> (Option<f64>, f64) {
            match (kind, spec.bits) {
                (ValueKind::LinkUtilization, 8) => (Some(0.025), 0.0),
                (ValueKind::LinkUtilization, _) => (None, 4.0 * UTILIZATION_SCALE),
                (ValueKind::HopLatency, 8) => (Some(0.022), 0.0),
                (ValueKind::HopLatency, 4) => (Some(0.42), 0.0),
                (ValueKind::HopLatency, _) => (None, 65_536.0),
                (ValueKind::QueueOccupancy, _) => (None, 3.2e7),
                _ => (None, f64::from(u32::MAX)),
            }
        };
        let (kind, width) = match spec.aggregation {
            Aggregation::Max | Aggregation::Min | Aggregation::Sum | Aggregation::Product => {
                let op = match spec.aggregation {
                    Aggregation::Max => PerPacketOp::Max,
                    Aggregation::Min => PerPacketOp::Min,
                    Aggregation::Sum => PerPacketOp::Sum,
                    _ => PerPacketOp::Product,
                };
                let compression = match (op, spec.unit) {
                    (PerPacketOp::Product, Some(_)) => {
                        return Err(bad(
                            "unit applies to sums (products are multiplicative)".into()
                        ));
                    }
                    (PerPacketOp::Sum, unit)
                    | (PerPacketOp::Max | PerPacketOp::Min, unit @ Some(_)) => {
                        let unit = unit.unwrap_or_else(|| default_sum_unit(spec.value, spec.bits));
                        if !(MIN_UNIT..=MAX_UNIT).contains(&unit) {
                            return Err(bad(format!(
                                "unit {unit} must be 2^-30 to 2^32 (the code's step)"
                            )));
                        }
                        Compression::Linear(LinearCompressor::new(unit, spec.bits))
                    }
                    _ => {
                        let (e, m) = default_log(spec.value);
                        Compression::Log(log(e, m)?)
                    }
                };
                let coin = hop.take(COIN_BITS);
                (
                    QueryKind::PerPacket {
                        op,
                        compression,
                        coin,
                    },
                    spec.bits,
                )
            }
            Aggregation::StaticPerFlow => {
                if !spec.value.is_static() {
                    return Err(bad(format!(
                        "{} changes from packet to packet; static_per_flow needs switch_id, ingress_port or egress_port (use dynamic_per_flow)",
                        spec.value
                    )));
                }
                let instances = spec.instances.unwrap_or(1);
                if !(1..=8).contains(&instances) {
                    return Err(bad(format!("instances = {instances} must be 1 to 8")));
                }
                let d = spec.max_path_length.unwrap_or(10);
                if !(1..=255).contains(&d) {
                    return Err(bad(format!("max_path_length = {d} must be 1 to 255")));
                }
                if spec.bits * instances > global_bits {
                    return Err(bad(format!(
                        "{instances} instances of {} bits need {} bits but global_bits is {global_bits}",
                        spec.bits,
                        spec.bits * instances
                    )));
                }
                let (tau, xor) = scheme_parameters(spec.scheme.unwrap_or(Scheme::Interleaved), d);
                let coding = PathCoding::with_slices(
                    spec.bits, instances, tau, &xor, &spec.name, packet, hop,
                );
                (QueryKind::StaticPerFlow { coding }, spec.bits * instances)
            }
            Aggregation::DynamicPerFlow => {
                if spec.value.is_static() {
                    return Err(bad(format!(
                        "{} is fixed per switch; use static_per_flow",
                        spec.value
                    )));
                }
                if spec.bits < 2 {
                    return Err(bad("dynamic_per_flow needs at least 2 bits".into()));
                }
                let (e, m) = default_log(spec.value);
                let compression = log(e, m)?;
                let space_budget = spec.space_budget.unwrap_or(4096);
                if space_budget < 64 {
                    return Err(bad(format!(
                        "space_budget = {space_budget} bytes is too small (at least 64)"
                    )));
                }
                (
                    QueryKind::DynamicPerFlow {
                        sample: hop.take(SAMPLE_BITS),
                        coin: hop.take(COIN_BITS),
                        compression,
                        space_budget,
                    },
                    spec.bits,
                )
            }
        };
        if width > global_bits {
            return Err(bad(format!(
                "needs {width} bits but global_bits is {global_bits}"
            )));
        }
        if spec.space_budget.is_some() && spec.aggregation != Aggregation::DynamicPerFlow {
            return Err(bad(
                "space_budget applies to dynamic_per_flow queries".into()
            ));
        }
        Ok(CompiledQuery {
            name: spec.name.clone(),
            value: spec.value,
            flow: spec.flow,
            width,
            frequency,
            kind,
        })
    }

    /// Updates this query's field at one hop: `m` is the packet word, `tape` this hop's tape,
    /// `keys` where value keys come from and `qi` this query's index in the plan.
    #[inline(always)]
    pub fn encode_with(
        &self,
        field: u64,
        m: u64,
        tape: &HopTape,
        input: &HopInput,
        keys: &impl ValueKeys,
        qi: usize,
    ) -> u64 {
        match &self.kind {
            QueryKind::PerPacket {
                op,
                compression,
                coin,
            } => {
                let code = compression.compress(input.value(self.value), tape.slice(*coin));
                let max = compression.max_code();
                match op {
                    PerPacketOp::Max => field.max(code),
                    // Minimum as the maximum of complemented codes: an empty field (0) means
                    // "no value yet", and hop 1 always writes.
                    PerPacketOp::Min => field.max(max - code),
                    PerPacketOp::Sum | PerPacketOp::Product => (field + code).min(max),
                }
            }
            QueryKind::StaticPerFlow { coding } => {
                let v = input.static_value(self.value);
                let key = keys.key(qi, self.value, coding.salt(), v);
                let h = |n: u32| {
                    if coding.raw_values {
                        u64::from(v)
                    } else {
                        coding.value_hash_with_key(n, m, key)
                    }
                };
                if coding.instances == 1 {
                    return coding.encode_with(0, m, tape, input.hop, field, || h(0));
                }
                let mut f = field;
                for n in 0..coding.instances {
                    let sub = get_bits(f, self.width, n * coding.bits, coding.bits);
                    let sub = coding.encode_with(n, m, tape, input.hop, sub, || h(n));
                    f = set_bits(f, self.width, n * coding.bits, coding.bits, sub);
                }
                f
            }
            QueryKind::DynamicPerFlow {
                sample,
                coin,
                compression,
                ..
            } => {
                // Without a branch: whether this hop writes is a coin flip per packet.
                let writes = tape.slice(*sample) < SAMPLE_THRESHOLDS[input.hop & 255];
                let code =
                    u64::from(compression.compress(input.value(self.value), tape.slice(*coin)));
                let keep = u64::from(writes).wrapping_sub(1);
                (field & keep) | (code & !keep)
            }
        }
    }

    /// The hop whose sample a dynamic per-flow query's field holds for a packet that crossed
    /// `k` hops (None for other queries).
    pub fn sample_writer(&self, pid: u32, k: usize) -> Option<usize> {
        self.sample_writer_word(tape::packet_word(pid), k)
    }

    /// [`CompiledQuery::sample_writer`] of the packet with packet word `m`.
    pub fn sample_writer_word(&self, m: u64, k: usize) -> Option<usize> {
        let QueryKind::DynamicPerFlow { sample, .. } = &self.kind else {
            return None;
        };
        Some(tape::sample_writer(m, k, *sample))
    }

    /// Reads this query's field of a packet that crossed `k` hops.
    pub fn decode(&self, field: u64, pid: u32, k: usize) -> Reading {
        self.decode_word(field, tape::packet_word(pid), k)
    }

    /// Whether a per-packet query's field is at its code's largest value: what it reads is
    /// then a lower bound (a sum, product or maximum went past what the code carries, or
    /// every hop's value did for a minimum). False for other queries.
    pub fn at_top(&self, field: u64) -> bool {
        match &self.kind {
            QueryKind::PerPacket {
                op, compression, ..
            } => {
                let max = compression.max_code();
                match op {
                    PerPacketOp::Min => field == 0,
                    _ => field >= max,
                }
            }
            _ => false,
        }
    }

    /// [`CompiledQuery::decode`] for the packet with packet word `m`.
    #[inline]
    pub fn decode_word(&self, field: u64, m: u64, k: usize) -> Reading {
        match &self.kind {
            QueryKind::PerPacket {
                op, compression, ..
            } => {
                let code = match op {
                    PerPacketOp::Min => compression.max_code() - field.min(compression.max_code()),
                    _ => field,
                };
                let unit = carried_unit(self.value);
                let v = match (op, compression) {
                    // A product of k hops' carried values is in the unit to the k-th power.
                    (PerPacketOp::Product, Compression::Log(c)) => {
                        c.decompress_sum(code) * unit.powi(k.min(255) as i32)
                    }
                    _ => compression.decompress(code) * unit,
                };
                Reading::Aggregate(v)
            }
            QueryKind::StaticPerFlow { coding } => Reading::Fields(Fields {
                field,
                width: self.width,
                bits: coding.bits,
                instances: coding.instances,
            }),
            QueryKind::DynamicPerFlow { compression, .. } => {
                let hop = self.sample_writer_word(m, k).unwrap_or(1);
                let code = (field & mask(self.width)) as u32;
                Reading::Sample {
                    hop,
                    code,
                    value: compression.decompress(code) * carried_unit(self.value),
                }
            }
        }
    }
}

/// One query's place in a query set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Index into [`Plan::queries`].
    pub query: u16,
    /// Bit offset in the digest (from its most significant bit).
    pub offset: u8,
}

/// A set of queries that share a packet's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuerySet {
    /// Packets whose plan hash is below this (and at or above the previous set's) use this
    /// set; a threshold over 2^32.
    pub end: u64,
    /// The queries and their offsets.
    pub placements: Vec<Placement>,
    /// Per placement, where its field sits in the right-aligned digest.
    #[serde(skip)]
    pub fields: Vec<FieldAt>,
}

/// Where one query's field sits in a set's right-aligned digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldAt {
    /// Index into [`Plan::queries`].
    pub query: u16,
    /// The field's right shift.
    pub shift: u8,
    /// Its bits, right-aligned.
    pub mask: u64,
}

/// A compiled execution plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Digest bits.
    pub global_bits: u32,
    /// The queries, in file order.
    pub queries: Vec<CompiledQuery>,
    /// The query sets in threshold order; the last ends at 2^32.
    pub sets: Vec<QuerySet>,
    /// A hash of everything that affects encoding: switches and sink must agree on it.
    pub version: u32,
    /// Words of the hop tape the queries' slices use.
    pub hop_words: u32,
}

#[derive(Debug, Clone)]
struct Stretch {
    start: f64,
    end: f64,
    used: Vec<(u16, u32, u32)>, // (query, offset, width)
}

impl Stretch {
    fn lowest_free(&self, width: u32, bits: u32) -> Option<u32> {
        (0..=bits - width).find(|&o| {
            self.used
                .iter()
                .all(|&(_, uo, uw)| o + width <= uo || uo + uw <= o)
        })
    }
}

const EPS: f64 = 1e-12;

/// The smallest frequency a query may have: one step of the 32-bit draw that picks a
/// packet's query set.
const MIN_FREQUENCY: f64 = 1.0 / 4_294_967_296.0;

/// The version of the per-packet encoding (tapes, slices, hashes, compression): part of
/// every plan version, so switches and sinks of different encodings never mistake each
/// other's digests. 2: a sum without a `unit` steps through its value's range (it stepped
/// by 1).
pub const ENCODING_FORMAT: u32 = 2;

impl Plan {
    /// Compiles a plan file.
    pub fn compile(file: &QueryFile) -> Result<Plan, PlanError> {
        let g = file.global_bits;
        if !(1..=64).contains(&g) {
            return Err(PlanError::BadBudget(g));
        }
        if file.queries.is_empty() {
            return Err(PlanError::NoQueries);
        }
        let mut names = std::collections::BTreeSet::new();
        let mut queries = Vec::with_capacity(file.queries.len());
        let (mut packet, mut hop) = (SliceAllocator::packet(), SliceAllocator::hop());
        for spec in &file.queries {
            if !names.insert(spec.name.clone()) {
                return Err(PlanError::BadQuery {
                    name: spec.name.clone(),
                    reason: "another query has the same name".into(),
                });
            }
            queries.push(CompiledQuery::compile(spec, g, &mut packet, &mut hop)?);
        }
        if packet.overflowed() || hop.overflowed() {
            return Err(PlanError::TooManyDraws {
                words: tape::MAX_TAPE_WORDS,
            });
        }
        if queries.len() > usize::from(u16::MAX) {
            return Err(PlanError::BadQuery {
                name: String::new(),
                reason: "too many queries".into(),
            });
        }
        let needed: f64 = queries
            .iter()
            .map(|q| q.frequency * f64::from(q.width))
            .sum();
        if needed > f64::from(g) + 1e-9 {
            return Err(PlanError::OverBudget {
                needed,
                budget: g,
                over: needed - f64::from(g),
            });
        }
        let mut order: Vec<usize> = (0..queries.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(queries[i].width));
        let mut stretches = vec![Stretch {
            start: 0.0,
            end: 1.0,
            used: Vec::new(),
        }];
        let mut cursor = 0.0f64;
        for &qi in &order {
            let q = &queries[qi];
            let mut remaining = q.frequency;
            // Visit stretches from the cursor, wrapping once around the line.
            let mut visited = 0.0;
            let mut pos = cursor;
            while remaining > EPS && visited < 1.0 - EPS {
                let idx = stretches
                    .iter()
                    .position(|s| s.start <= pos + EPS && pos < s.end - EPS)
                    .unwrap_or(0);
                if stretches[idx].start < pos - EPS {
                    // Split so that a stretch starts at the cursor.
                    let mut tail = stretches[idx].clone();
                    tail.start = pos;
                    stretches[idx].end = pos;
                    stretches.insert(idx + 1, tail);
                    continue;
                }
                let s = &stretches[idx];
                let len = s.end - s.start;
                match s.lowest_free(q.width, g) {
                    Some(offset) => {
                        let take = remaining.min(len);
                        if take < len - EPS {
                            let mut tail = stretches[idx].clone();
                            tail.start = stretches[idx].start + take;
                            stretches[idx].end = tail.start;
                            stretches.insert(idx + 1, tail);
                        }
                        stretches[idx].used.push((qi as u16, offset, q.width));
                        remaining -= take;
                        visited += take;
                        pos = stretches[idx].end;
                    }
                    None => {
                        visited += len;
                        pos = s.end;
                    }
                }
                if pos >= 1.0 - EPS {
                    pos = 0.0;
                }
            }
            if remaining > 1e-9 {
                return Err(PlanError::DoesNotFit {
                    name: q.name.clone(),
                    width: q.width,
                    frequency: q.frequency,
                    placed: q.frequency - remaining,
                    short: remaining,
                });
            }
            cursor = pos;
        }
        let field_of = |p: &Placement| -> FieldAt {
            let width = queries[usize::from(p.query)].width;
            FieldAt {
                query: p.query,
                shift: (g - u32::from(p.offset) - width) as u8,
                mask: mask(width),
            }
        };
        // Integer thresholds; merge neighbours with the same placements.
        let mut sets: Vec<QuerySet> = Vec::new();
        for s in &stretches {
            let end = ((s.end * 4_294_967_296.0).round() as u64).min(1 << 32);
            let mut placements: Vec<Placement> = s
                .used
                .iter()
                .map(|&(q, o, _)| Placement {
                    query: q,
                    offset: o as u8,
                })
                .collect();
            placements.sort_by_key(|p| p.offset);
            match sets.last_mut() {
                Some(last) if last.placements == placements => last.end = end,
                _ => {
                    if sets.last().is_some_and(|l| l.end >= end) {
                        continue; // a sliver below one threshold step
                    }
                    let fields = placements.iter().map(field_of).collect();
                    sets.push(QuerySet {
                        end,
                        placements,
                        fields,
                    })
                }
            }
        }
        if let Some(last) = sets.last_mut() {
            last.end = 1 << 32;
        }
        let mut plan = Plan {
            global_bits: g,
            queries,
            sets,
            version: 0,
            hop_words: hop.words(),
        };
        plan.version = Plan::fingerprint(file);
        Ok(plan)
    }

    /// The version of the plan a query file compiles to: a hash of the encoding's format
    /// version and the file's canonical form (the parsed queries written out again), so it
    /// depends on what the queries say, not on how the file is laid out or on how this code
    /// stores a compiled plan. Bump [`ENCODING_FORMAT`] when the encoding itself changes.
    fn fingerprint(file: &QueryFile) -> u32 {
        let canonical = toml::to_string(file).unwrap_or_else(|_| format!("{file:?}"));
        let text = format!("pint-encoding-{ENCODING_FORMAT}|{canonical}");
        let words: Vec<u64> = text
            .as_bytes()
            .chunks(8)
            .map(|c| c.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
            .collect();
        (hash64(seeds::PLAN, &words) >> 32) as u32
    }

    /// The query set of the packet with packet word `m`.
    #[inline(always)]
    pub fn select_word(&self, m: u64) -> &QuerySet {
        let u = u64::from(tape::set_choice(m));
        // Plans have a few sets: a scan beats a binary search there.
        let i = if self.sets.len() <= 8 {
            self.sets
                .iter()
                .position(|s| s.end > u)
                .unwrap_or(self.sets.len() - 1)
        } else {
            self.sets.partition_point(|s| s.end <= u)
        };
        &self.sets[i.min(self.sets.len() - 1)]
    }

    /// The query set of packet `pid`.
    pub fn select(&self, pid: u32) -> &QuerySet {
        self.select_word(tape::packet_word(pid))
    }

    /// Whether the plan keeps its layout's rules, as every plan compiled from any query file
    /// must: thresholds rising to 2^32, each set's fields inside the digest without overlap
    /// and no query twice in a set, and a hop's draws within its tape (the fuzz target and
    /// the property tests check it on arbitrary files).
    pub fn well_formed(&self) -> Result<(), String> {
        let g = self.global_bits;
        if !(1..=64).contains(&g) {
            return Err(format!("global_bits {g}"));
        }
        if self.hop_words > tape::MAX_TAPE_WORDS {
            return Err(format!("{} hop words", self.hop_words));
        }
        let mut start = 0;
        for (i, s) in self.sets.iter().enumerate() {
            if s.end <= start {
                return Err(format!("set {i}: threshold {} after {start}", s.end));
            }
            start = s.end;
            let mut used = 0u64;
            let mut seen = std::collections::BTreeSet::new();
            for p in &s.placements {
                let Some(q) = self.queries.get(usize::from(p.query)) else {
                    return Err(format!(
                        "set {i}: query {} of {}",
                        p.query,
                        self.queries.len()
                    ));
                };
                if !seen.insert(p.query) {
                    return Err(format!("set {i}: query {} twice", p.query));
                }
                let (o, w) = (u32::from(p.offset), q.width);
                if w == 0 || o + w > g {
                    return Err(format!("set {i}: {w} bits at {o} of {g}"));
                }
                let bits = mask(w) << (64 - o - w);
                if used & bits != 0 {
                    return Err(format!("set {i}: query {} overlaps another", p.query));
                }
                used |= bits;
            }
        }
        if start != 1 << 32 {
            return Err(format!("the last set ends at {start}"));
        }
        Ok(())
    }

    /// The share of packets each query runs on, from the integer thresholds.
    pub fn frequencies(&self) -> Vec<f64> {
        let mut f = vec![0.0; self.queries.len()];
        let mut start = 0u64;
        for s in &self.sets {
            for p in &s.placements {
                f[usize::from(p.query)] += (s.end - start) as f64 / 4_294_967_296.0;
            }
            start = s.end;
        }
        f
    }

    /// Updates a packet's digest at one hop, with the packet word `m` (from the packet ID)
    /// and value keys from `keys`: the one encoder, used by switches and simulations alike.
    #[inline(always)]
    pub fn encode_with(&self, digest: u64, m: u64, input: &HopInput, keys: &impl ValueKeys) -> u64 {
        let tape = HopTape::new(m, input.hop, self.hop_words);
        let mut d = digest;
        let set = self.select_word(m);
        for f in &set.fields {
            let (qi, shift) = (usize::from(f.query), u32::from(f.shift));
            let q = &self.queries[qi];
            let field_mask = f.mask << shift;
            let field = (d & field_mask) >> shift;
            let new = q.encode_with(field, m, &tape, input, keys, qi);
            d = (d & !field_mask) | ((new << shift) & field_mask);
        }
        d
    }

    /// Updates a packet's digest at one hop.
    pub fn encode(&self, digest: u64, input: &HopInput) -> u64 {
        self.encode_with(digest, tape::packet_word(input.pid), input, &ComputedKeys)
    }

    /// Reads a digest at the sink: for each query the packet carried, its reading.
    pub fn decode(&self, pid: u32, k: usize, digest: u64) -> Vec<(usize, Reading)> {
        self.readings(pid, k, digest).collect()
    }

    /// As [`Plan::decode`], without allocating.
    pub fn readings(
        &self,
        pid: u32,
        k: usize,
        digest: u64,
    ) -> impl Iterator<Item = (usize, Reading)> + '_ {
        let m = tape::packet_word(pid);
        self.select_word(m).placements.iter().map(move |p| {
            let q = &self.queries[usize::from(p.query)];
            let field = get_bits(digest, self.global_bits, u32::from(p.offset), q.width);
            (usize::from(p.query), q.decode_word(field, m, k))
        })
    }

    /// Index of the query paths are decoded from (the first `static_per_flow`
    /// `switch_id` query), if the plan has one: without it a sink decodes no path.
    pub fn path_query(&self) -> Option<usize> {
        self.queries.iter().position(|q| {
            matches!(q.kind, QueryKind::StaticPerFlow { .. }) && q.value == ValueKind::SwitchId
        })
    }

    /// Index of the first per-packet sum of hop latency, if any: the one a sink reads a
    /// path's latency from.
    pub fn latency_sum_query(&self) -> Option<usize> {
        self.queries.iter().position(|q| {
            matches!(
                q.kind,
                QueryKind::PerPacket {
                    op: PerPacketOp::Sum,
                    ..
                }
            ) && q.value == ValueKind::HopLatency
        })
    }

    /// Index of the query called `name`.
    pub fn query_index(&self, name: &str) -> Option<usize> {
        self.queries.iter().position(|q| q.name == name)
    }

    /// A human-readable description of the plan.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "plan {:08x}: {} bits per packet\n",
            self.version, self.global_bits
        );
        let mut start = 0u64;
        for s in &self.sets {
            let share = (s.end - start) as f64 / 4_294_967_296.0;
            let parts: Vec<String> = s
                .placements
                .iter()
                .map(|p| {
                    let q = &self.queries[usize::from(p.query)];
                    format!("{}@{}..{}", q.name, p.offset, u32::from(p.offset) + q.width)
                })
                .collect();
            out.push_str(&format!(
                "  {:>9.6} of packets: {}\n",
                share,
                parts.join(", ")
            ));
            start = s.end;
        }
        out
    }
}

#[cfg(test)]
mod tests;

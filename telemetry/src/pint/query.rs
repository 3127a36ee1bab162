//! Telemetry queries as operators write them: the tuple
//! `<value, aggregation, bits, space_budget, flow definition, frequency>` in TOML.
//!
//! ```toml
//! global_bits = 16
//!
//! [[queries]]
//! name = "path"
//! value = "switch_id"
//! aggregation = "static_per_flow"
//! bits = 8
//!
//! [[queries]]
//! name = "latency"
//! value = "hop_latency"
//! aggregation = "dynamic_per_flow"
//! bits = 8
//! frequency = "15/16"
//! space_budget = 1024
//!
//! [[queries]]
//! name = "utilization"
//! value = "link_utilization"
//! aggregation = "max"
//! bits = 8
//! frequency = "1/16"
//! ```

use serde::{Deserialize, Serialize};

use crate::pint::coding::Scheme;

/// What a switch measures for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// The switch's ID (static per flow and switch).
    SwitchId,
    /// The packet's ingress port number at the switch (static per flow and switch).
    IngressPort,
    /// The packet's egress port number at the switch (static per flow and switch).
    EgressPort,
    /// Time the packet spent in the switch, in nanoseconds.
    HopLatency,
    /// Bytes queued at the egress port when the packet left.
    QueueOccupancy,
    /// The egress link's utilization as HPCC estimates it (1.0 = line rate).
    LinkUtilization,
}

impl ValueKind {
    /// Whether the value is fixed for a (flow, switch) pair.
    pub fn is_static(self) -> bool {
        matches!(
            self,
            ValueKind::SwitchId | ValueKind::IngressPort | ValueKind::EgressPort
        )
    }
}

/// How values are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Per-packet maximum along the path.
    Max,
    /// Per-packet minimum along the path.
    Min,
    /// Per-packet sum along the path.
    Sum,
    /// Per-packet product along the path.
    Product,
    /// Every switch's value of a flow (e.g. the path), by distributed coding.
    StaticPerFlow,
    /// Per (flow, switch), the stream of values, sampled: quantiles and frequent values.
    DynamicPerFlow,
}

impl std::fmt::Display for ValueKind {
    /// The name a query file gives it (`hop_latency`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ValueKind::SwitchId => "switch_id",
            ValueKind::IngressPort => "ingress_port",
            ValueKind::EgressPort => "egress_port",
            ValueKind::HopLatency => "hop_latency",
            ValueKind::QueueOccupancy => "queue_occupancy",
            ValueKind::LinkUtilization => "link_utilization",
        })
    }
}

/// Which packets form a flow, for per-flow queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowDefinition {
    /// Addresses, protocol and ports.
    #[default]
    FiveTuple,
    /// Source and destination addresses.
    SrcDst,
    /// Source address.
    SrcIp,
    /// Destination address.
    DstIp,
}

impl std::fmt::Display for FlowDefinition {
    /// The name a query file gives it (`five_tuple`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FlowDefinition::FiveTuple => "five_tuple",
            FlowDefinition::SrcDst => "src_dst",
            FlowDefinition::SrcIp => "src_ip",
            FlowDefinition::DstIp => "dst_ip",
        })
    }
}

/// A fraction of packets, written as a number (`0.0625`) or a ratio (`"1/16"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Frequency {
    /// A number in (0, 1].
    Number(f64),
    /// `"a/b"`.
    Ratio(Ratio),
}

/// A ratio `"a/b"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratio(pub f64);

impl Ratio {
    /// Reads `"a/b"` (a number alone is taken as such); the error says what to write.
    fn parse(s: &str) -> Result<Ratio, String> {
        let bad = || format!("`{s}` is not a fraction (write 0.25 or \"1/4\")");
        if let Ok(v) = s.trim().parse::<f64>() {
            return Ok(Ratio(v));
        }
        let (a, b) = s.split_once('/').ok_or_else(bad)?;
        let a: f64 = a.trim().parse().map_err(|_| bad())?;
        let b: f64 = b.trim().parse().map_err(|_| bad())?;
        if b == 0.0 {
            return Err(format!("`{s}` divides by zero"));
        }
        Ok(Ratio(a / b))
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ratio::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Frequency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Frequency;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a fraction of packets: a number such as 0.25, or \"1/4\"")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Frequency, E> {
                Ok(Frequency::Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Frequency, E> {
                Ok(Frequency::Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Frequency, E> {
                Ok(Frequency::Number(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Frequency, E> {
                Ratio::parse(s).map(Frequency::Ratio).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Frequency {
    /// The fraction as a number.
    pub fn value(&self) -> f64 {
        match self {
            Frequency::Number(v) | Frequency::Ratio(Ratio(v)) => *v,
        }
    }
}

impl Default for Frequency {
    fn default() -> Self {
        Frequency::Number(1.0)
    }
}

/// One query as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuerySpec {
    /// A name for reports and errors.
    pub name: String,
    /// The measured value.
    pub value: ValueKind,
    /// The aggregation.
    pub aggregation: Aggregation,
    /// Bits per packet (per instance for static per-flow queries), 1 to 32.
    pub bits: u32,
    /// Per-flow storage at the sink in bytes (dynamic per-flow queries), split evenly over
    /// the flow's hops.
    #[serde(default)]
    pub space_budget: Option<u32>,
    /// Flow definition for per-flow queries.
    #[serde(default)]
    pub flow: FlowDefinition,
    /// Share of packets that carry this query.
    #[serde(default)]
    pub frequency: Frequency,
    /// Static per-flow: independent instances, each `bits` wide (e.g. 2 for 2 x (b = 8)).
    #[serde(default)]
    pub instances: Option<u32>,
    /// Static per-flow: `baseline` or `interleaved` (default).
    #[serde(default)]
    pub scheme: Option<Scheme>,
    /// Static per-flow: the bound `d` on path length that sets the XOR probability.
    #[serde(default)]
    pub max_path_length: Option<u32>,
    /// Multiplicative compression: relative error parameter (base `(1 + eps)^2`).
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// Multiplicative compression: the largest value to represent (sets `eps` from `bits`).
    #[serde(default)]
    pub max_value: Option<f64>,
    /// Sum: the value of one code step (linear compression).
    #[serde(default)]
    pub unit: Option<f64>,
}

/// A set of queries and the global bit budget, as in a plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryFile {
    /// Digest bits carried by every packet (1 to 64).
    pub global_bits: u32,
    /// The queries.
    #[serde(default)]
    pub queries: Vec<QuerySpec>,
}

impl QueryFile {
    /// Parses a plan file.
    pub fn from_toml(text: &str) -> Result<QueryFile, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())
    }

    /// The paper's concurrent example: 16 bits; path tracing (8 bits) on all packets,
    /// latency quantiles (8 bits) on 15/16, HPCC utilization (8 bits) on 1/16.
    pub fn paper_example() -> QueryFile {
        QueryFile::from_toml(include_str!("../../../configs/queries/paper.toml"))
            .expect("built-in example parses")
    }
}

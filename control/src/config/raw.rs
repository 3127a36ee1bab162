//! The configuration file as written: TOML deserialised with unknown keys rejected. Values
//! stay loosely typed here (strings for MACs, prefixes, capacities) so that validation can
//! name the key of any bad value.

use serde::Deserialize;

use super::types::{IdleMode, PortRole};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub switch_id: Option<u64>,
    pub routes_file: Option<String>,
    #[serde(default)]
    pub eal: RawEal,
    #[serde(default)]
    pub dataplane: RawDataplane,
    #[serde(default)]
    pub stats: RawStats,
    #[serde(default)]
    pub ports: Vec<RawPort>,
    #[serde(default)]
    pub workers: Vec<RawWorker>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    pub telemetry: Option<RawTelemetry>,
    #[serde(default)]
    pub metrics: RawMetrics,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    pub enabled: Option<bool>,
    pub queries: Option<String>,
    pub shim_ethertype: Option<RawNumber>,
    pub path_length_bound: Option<u32>,
    pub epoch_ms: Option<u64>,
    pub sink: Option<String>,
    pub base_rtt_us: Option<u64>,
    pub digest_ring: Option<u32>,
    pub batch_digests: Option<u32>,
    pub flowset_buffers: Option<u32>,
    pub export_queue_mb: Option<u32>,
    #[serde(default)]
    pub flowradar: RawFlowRadar,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlowRadar {
    pub expected_flows: Option<u32>,
    pub cells_per_flow: Option<f64>,
    pub hashes: Option<u8>,
    pub filter_bits_per_flow: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub listen: Option<String>,
}

/// An integer written as a number or as a string (`"0x88b5"`); anything else is kept for
/// validation to name the key (an untagged enum's own error names only the enum).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawNumber {
    Int(i64),
    Text(String),
    Other(toml::Value),
}

/// A [`RawNumber::Text`]'s value: decimal, or hex after `0x`; underscores between digits as
/// TOML's integers take them; no sign.
pub(super) fn number_text(t: &str) -> Option<u64> {
    let digits = t.trim().replace('_', "");
    if digits.contains(['+', '-']) {
        return None;
    }
    match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => digits.parse().ok(),
    }
}

/// A value of the wrong type as an error shows it: the value and its TOML type.
pub(super) fn shown(v: &toml::Value) -> String {
    format!("`{v}` (a TOML {})", v.type_str())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEal {
    pub args: Option<Vec<String>>,
    pub main_lcore: Option<u32>,
    pub memory_mb: Option<u32>,
    pub hugepages: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataplane {
    pub idle: Option<IdleMode>,
    pub idle_sleep_us: Option<u64>,
    pub idle_sleep_max_us: Option<u64>,
    pub mbufs: Option<u32>,
    pub mbuf_cache: Option<u32>,
    pub ecmp_seed: Option<RawNumber>,
    pub prefetch: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStats {
    pub interval_ms: Option<u64>,
}

/// A capacity written as bit/s or as a string with a unit (`"10G"`); anything else is kept
/// for validation to name the key.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawCapacity {
    Bits(u64),
    Text(String),
    Other(toml::Value),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPort {
    pub name: Option<String>,
    pub device: Option<String>,
    pub role: Option<PortRole>,
    pub mac: Option<String>,
    pub mtu: Option<u32>,
    pub capacity: Option<RawCapacity>,
    pub rx_descriptors: Option<u32>,
    pub tx_descriptors: Option<u32>,
    pub promiscuous: Option<bool>,
    pub impair: Option<RawImpair>,
}

/// A port's `impair` table as written (checked by [`super::ImpairConfig::from_raw`]); a
/// lab file's `[[impair]]` gives the same values.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawImpair {
    /// `loss`.
    pub loss: Option<f64>,
    /// `delay_us`.
    pub delay_us: Option<u64>,
    /// `jitter_us`.
    pub jitter_us: Option<u64>,
    /// `reorder`.
    pub reorder: Option<f64>,
    /// `limit`.
    pub limit: Option<u32>,
    /// `from_s`.
    pub from_s: Option<f64>,
    /// `until_s`.
    pub until_s: Option<f64>,
    /// `seed`.
    pub seed: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorker {
    pub lcore: Option<u32>,
    #[serde(default)]
    pub rx: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub prefix: Option<String>,
    pub next_hops: Option<Vec<RawNextHop>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNextHop {
    pub port: Option<String>,
    pub mac: Option<String>,
}

//! The `[telemetry]` and `[metrics]` tables: which queries the switch runs, how its
//! FlowRadar flowsets are sized, where it exports, and where it serves metrics.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use telemetry::flowradar::flowset::{DEFAULT_FILTER_BITS, MAX_HASHES};
use telemetry::pint::plan::Plan;
use telemetry::pint::query::{Aggregation, QueryFile};
use telemetry::protocol::MAX_PLAN_TEXT;
use telemetry::wire::EtherType;
use telemetry::wire::shim::DEFAULT_ETHERTYPE;

use super::raw::{RawMetrics, RawNumber, RawTelemetry};
use super::{ConfigError, key_err};

/// The built-in query file: the PINT paper's concurrent example.
pub const PAPER_QUERIES: &str = include_str!("../../../configs/queries/paper.toml");

/// FlowRadar sizing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRadarConfig {
    /// Flows expected per epoch per worker.
    pub expected_flows: u32,
    /// Counting-table cells per expected flow.
    pub cells_per_flow: f64,
    /// Sub-tables (cells per flow), `k`.
    pub hashes: u8,
    /// Flow-filter bits per expected flow.
    pub filter_bits_per_flow: f64,
}

/// The telemetry settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryConfig {
    /// Whether the switch carries telemetry (false: plain forwarding).
    pub enabled: bool,
    /// The query file as resolved (None: the built-in paper plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queries: Option<PathBuf>,
    /// The EtherType that announces the shim (printed in hex, as `"0x88b5"`).
    #[serde(serialize_with = "hex_u16")]
    pub shim_ethertype: u16,
    /// Default path-length bound `d` for static per-flow queries that do not give one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_length_bound: Option<u32>,
    /// FlowRadar epoch length, ms.
    pub epoch_ms: u64,
    /// The sink's address (`host:port`); None exports nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    /// HPCC's base RTT `T`, microseconds.
    pub base_rtt_us: u64,
    /// Digest records each worker's ring holds.
    pub digest_ring: u32,
    /// Most digests in one batch to the sink.
    pub batch_digests: u32,
    /// Flowsets per worker (one counting, the rest waiting for or back from export).
    pub flowset_buffers: u32,
    /// Bytes the export queue may hold before frames are dropped, MiB.
    pub export_queue_mb: u32,
    /// FlowRadar sizing.
    pub flowradar: FlowRadarConfig,
    /// The effective query file (defaults applied): what the switch compiles and sends.
    #[serde(skip)]
    pub query_text: String,
}

impl TelemetryConfig {
    /// Telemetry off.
    pub fn off() -> TelemetryConfig {
        TelemetryConfig {
            enabled: false,
            queries: None,
            shim_ethertype: DEFAULT_ETHERTYPE,
            path_length_bound: None,
            epoch_ms: 10,
            sink: None,
            base_rtt_us: 10,
            digest_ring: 1 << 16,
            batch_digests: 4096,
            flowset_buffers: 3,
            export_queue_mb: 64,
            flowradar: FlowRadarConfig {
                expected_flows: 10_000,
                cells_per_flow: 1.3,
                hashes: 3,
                filter_bits_per_flow: DEFAULT_FILTER_BITS,
            },
            query_text: String::new(),
        }
    }

    /// The epoch length in ns.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ms * 1_000_000
    }

    /// Reads and compiles the query file again (a reload): the effective text and the plan.
    pub fn load_queries(&self) -> Result<(String, Plan), String> {
        load_queries(self.queries.as_deref(), self.path_length_bound)
    }
}

/// Reads the query file at `path` (None: the built-in paper plan), applies the default
/// path-length bound, and compiles it: the effective text (what the sink compiles) and the
/// plan. Errors say what is wrong, naming the query.
pub fn load_queries(path: Option<&Path>, bound: Option<u32>) -> Result<(String, Plan), String> {
    let text = match path {
        None => PAPER_QUERIES.to_owned(),
        Some(p) => std::fs::read_to_string(p).map_err(|e| {
            // Where it looked, in full (a relative path is the config file's directory's).
            let looked = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            format!("cannot read query file {}: {e}", looked.display())
        })?,
    };
    let mut file = QueryFile::from_toml(&text).map_err(|e| format!("query file: {e}"))?;
    let mut effective = text;
    if let Some(d) = bound {
        let mut changed = false;
        for q in &mut file.queries {
            if q.aggregation == Aggregation::StaticPerFlow && q.max_path_length.is_none() {
                q.max_path_length = Some(d);
                changed = true;
            }
        }
        if changed {
            effective = toml::to_string(&file).map_err(|e| format!("query file: {e}"))?;
        }
    }
    let plan = Plan::compile(&file).map_err(|e| e.to_string())?;
    // The sink gets the text in the hello; one longer than the protocol carries (long
    // comments) goes as the queries alone, written anew.
    if effective.len() > MAX_PLAN_TEXT {
        effective = toml::to_string(&file).map_err(|e| format!("query file: {e}"))?;
    }
    if effective.len() > MAX_PLAN_TEXT {
        return Err(format!(
            "query file: its queries take {} bytes written out, above the {MAX_PLAN_TEXT} the switch can send the sink",
            effective.len()
        ));
    }
    Ok((effective, plan))
}

fn ethertype(raw: Option<RawNumber>) -> Result<u16, ConfigError> {
    let key = "telemetry.shim_ethertype";
    let v = match raw {
        None => return Ok(DEFAULT_ETHERTYPE),
        Some(RawNumber::Int(i)) => i128::from(i),
        Some(RawNumber::Text(t)) => super::raw::number_text(&t)
            .map(i128::from)
            .ok_or_else(|| key_err(key, format!("`{}` is not a number (e.g. 0x88b5)", t.trim())))?,
        Some(RawNumber::Other(v)) => {
            return Err(key_err(
                key,
                format!(
                    "{} is not an EtherType: write an integer or a string such as \"0x88b5\"",
                    super::raw::shown(&v)
                ),
            ));
        }
    };
    let ty = u16::try_from(v)
        .ok()
        .filter(|t| *t >= 0x0600)
        .ok_or_else(|| {
            key_err(
                key,
                if v < 0 {
                    format!("{v} is not an EtherType (0x0600 to 0xffff)")
                } else {
                    format!("{v:#x} is not an EtherType (0x0600 to 0xffff)")
                },
            )
        })?;
    if [
        EtherType::IPV4,
        EtherType::ARP,
        EtherType::IPV6,
        EtherType::VLAN,
        EtherType::QINQ,
    ]
    .contains(&ty)
    {
        return Err(key_err(
            key,
            format!("{ty:#06x} is already in use by another protocol"),
        ));
    }
    // 0x9100 is an old QinQ tag, which switches and NICs may take as one.
    if ty == 0x9100 {
        return Err(key_err(
            key,
            "0x9100 is a VLAN tag protocol identifier (an old QinQ one)",
        ));
    }
    // Frames of these types end at the NIC or a link-layer agent (pause frames, LACP,
    // LLDP, 802.1X, MACsec): a shim of them never arrives.
    if [0x8808, 0x8809, 0x88cc, 0x888e, 0x88e5].contains(&ty) {
        return Err(key_err(
            key,
            format!(
                "{ty:#06x} is a link-layer protocol that NICs or their agents take for themselves"
            ),
        ));
    }
    Ok(ty)
}

fn range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &str,
    v: Option<T>,
    default: T,
    lo: T,
    hi: T,
) -> Result<T, ConfigError> {
    let v = v.unwrap_or(default);
    if !(v >= lo && v <= hi) {
        return Err(key_err(key, format!("{v} is out of range ({lo} to {hi})")));
    }
    Ok(v)
}

/// Validates `[telemetry]`; relative query paths are resolved against `base`.
pub(super) fn validate(
    raw: Option<RawTelemetry>,
    base: Option<&Path>,
) -> Result<TelemetryConfig, ConfigError> {
    let off = TelemetryConfig::off();
    let Some(raw) = raw else {
        return Ok(off);
    };
    let queries = raw.queries.map(|q| super::resolve(base, q));
    let path_length_bound = match raw.path_length_bound {
        Some(d) if !(1..=255).contains(&d) => {
            return Err(key_err(
                "telemetry.path_length_bound",
                format!("{d} is out of range (1 to 255)"),
            ));
        }
        d => d,
    };
    let sink = match raw.sink {
        None => None,
        Some(s) => {
            let ok = s
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                return Err(key_err(
                    "telemetry.sink",
                    format!("`{s}` is not HOST:PORT (e.g. 127.0.0.1:7300)"),
                ));
            }
            Some(s)
        }
    };
    let fr = raw.flowradar;
    let flowradar = FlowRadarConfig {
        expected_flows: range(
            "telemetry.flowradar.expected_flows",
            fr.expected_flows,
            off.flowradar.expected_flows,
            1,
            10_000_000,
        )?,
        cells_per_flow: range(
            "telemetry.flowradar.cells_per_flow",
            fr.cells_per_flow,
            off.flowradar.cells_per_flow,
            1.0,
            16.0,
        )?,
        hashes: range(
            "telemetry.flowradar.hashes",
            fr.hashes,
            off.flowradar.hashes,
            1,
            MAX_HASHES,
        )?,
        filter_bits_per_flow: range(
            "telemetry.flowradar.filter_bits_per_flow",
            fr.filter_bits_per_flow,
            off.flowradar.filter_bits_per_flow,
            1.0,
            512.0,
        )?,
    };
    let mut t = TelemetryConfig {
        enabled: raw.enabled.unwrap_or(true),
        queries,
        shim_ethertype: ethertype(raw.shim_ethertype)?,
        path_length_bound,
        epoch_ms: range("telemetry.epoch_ms", raw.epoch_ms, off.epoch_ms, 1, 60_000)?,
        sink,
        base_rtt_us: range(
            "telemetry.base_rtt_us",
            raw.base_rtt_us,
            off.base_rtt_us,
            1,
            1_000_000,
        )?,
        digest_ring: range(
            "telemetry.digest_ring",
            raw.digest_ring,
            off.digest_ring,
            64,
            1 << 24,
        )?,
        batch_digests: range(
            "telemetry.batch_digests",
            raw.batch_digests,
            off.batch_digests,
            1,
            telemetry::protocol::MAX_BATCH,
        )?,
        flowset_buffers: range(
            "telemetry.flowset_buffers",
            raw.flowset_buffers,
            off.flowset_buffers,
            2,
            16,
        )?,
        export_queue_mb: range(
            "telemetry.export_queue_mb",
            raw.export_queue_mb,
            off.export_queue_mb,
            1,
            4096,
        )?,
        flowradar,
        query_text: String::new(),
    };
    check_flowset_size(&t)?;
    if t.enabled {
        let (text, _) = t
            .load_queries()
            .map_err(|e| key_err("telemetry.queries", e))?;
        t.query_text = text;
    }
    Ok(t)
}

/// Refuses FlowRadar sizes whose flowsets the protocol cannot carry: more cells or filter
/// blocks than a flowset holds (the sink would refuse the switch's hello), or a full
/// flowset larger than a frame to the sink or the export queue (every busy epoch's would be
/// dropped). The error names the key that sets the limit: `expected_flows` at the default
/// cells (or filter bits) per flow, the per-flow key when that was raised.
pub fn check_flowset_size(t: &TelemetryConfig) -> Result<(), ConfigError> {
    use telemetry::flowradar::filter::BLOCK_BITS;
    use telemetry::flowradar::wire::{MAX_CELLS, MAX_FILTER_BLOCKS, max_encoded_len};
    let fr = &t.flowradar;
    let (per_table, filter_bits) = telemetry::flowradar::FlowSetConfig {
        expected_flows: fr.expected_flows,
        cells_per_flow: fr.cells_per_flow,
        hashes: fr.hashes,
        filter_bits_per_flow: fr.filter_bits_per_flow,
        seed: 0,
    }
    .sizes();
    let defaults = TelemetryConfig::off().flowradar;
    // The key to name for a limit on cells: the per-flow one when it was raised.
    let cells_key = if fr.cells_per_flow > defaults.cells_per_flow {
        "telemetry.flowradar.cells_per_flow"
    } else {
        "telemetry.flowradar.expected_flows"
    };
    let cells = per_table.saturating_mul(u64::from(fr.hashes));
    if cells > MAX_CELLS as u64 {
        return Err(key_err(
            cells_key,
            format!(
                "{cells} counting-table cells (expected_flows {} x cells_per_flow {}) are more than a flowset holds ({MAX_CELLS})",
                fr.expected_flows, fr.cells_per_flow
            ),
        ));
    }
    let blocks = filter_bits.div_ceil(BLOCK_BITS).max(1);
    if blocks > MAX_FILTER_BLOCKS {
        return Err(key_err(
            if fr.filter_bits_per_flow > defaults.filter_bits_per_flow {
                "telemetry.flowradar.filter_bits_per_flow"
            } else {
                "telemetry.flowradar.expected_flows"
            },
            format!(
                "{blocks} flow-filter blocks (expected_flows x filter_bits_per_flow / {BLOCK_BITS}) are more than a flowset holds ({MAX_FILTER_BLOCKS})"
            ),
        ));
    }
    // A flowset frame: the 16-byte header, worker and epoch count, then the flowset.
    let largest = 16 + 6 + max_encoded_len(cells as usize, blocks);
    if largest > telemetry::protocol::MAX_FRAME {
        // Whichever per-flow size was raised is the one to lower; else the flows.
        let (key, fewer) = if fr.cells_per_flow > defaults.cells_per_flow {
            ("telemetry.flowradar.cells_per_flow", "fewer cells per flow")
        } else if fr.filter_bits_per_flow > defaults.filter_bits_per_flow {
            (
                "telemetry.flowradar.filter_bits_per_flow",
                "fewer filter bits per flow",
            )
        } else {
            (
                "telemetry.flowradar.expected_flows",
                "fewer expected flows per worker (more workers share the flows)",
            )
        };
        return Err(key_err(
            key,
            format!(
                "a full flowset ({cells} cells, {blocks} filter blocks) takes up to {} MiB, more than a frame to the sink holds ({} MiB): {fewer}",
                largest.div_ceil(1 << 20),
                telemetry::protocol::MAX_FRAME >> 20
            ),
        ));
    }
    let queue = (t.export_queue_mb as usize) << 20;
    if largest > queue {
        return Err(key_err(
            "telemetry.export_queue_mb",
            format!(
                "{} MiB cannot hold a full flowset ({} MiB at expected_flows {})",
                t.export_queue_mb,
                largest.div_ceil(1 << 20),
                fr.expected_flows
            ),
        ));
    }
    Ok(())
}

/// `v` as the file may write it: a string of four hex digits after `0x`.
fn hex_u16<S: serde::Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#06x}"))
}

/// The `[metrics]` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct MetricsConfig {
    /// Where the Prometheus endpoint listens (None: no endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
}

/// Validates `[metrics]`.
pub(super) fn validate_metrics(raw: RawMetrics) -> Result<MetricsConfig, ConfigError> {
    let listen = match raw.listen {
        None => None,
        Some(s) => Some(s.parse::<SocketAddr>().map_err(|_| {
            key_err(
                "metrics.listen",
                format!("`{s}` is not an IP address and port (e.g. 127.0.0.1:9400)"),
            )
        })?),
    };
    if listen.is_some_and(|a| a.port() == 0) {
        return Err(key_err(
            "metrics.listen",
            "port 0 would serve on a port chosen at random, where no scraper looks; name one",
        ));
    }
    Ok(MetricsConfig { listen })
}

//! The switch's configuration file: TOML, every key documented in `docs/config.md`.
//!
//! [`Config::from_toml`] parses and validates in one step; any error names the key and the
//! reason, and nothing is half-applied because the result is a fresh value.

pub mod impair;
mod raw;
mod routes;
pub mod telemetry;
pub mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::telemetry::wire::MacAddr;
use serde::Serialize;

pub use impair::ImpairConfig;
pub use raw::RawImpair;
pub use telemetry::{FlowRadarConfig, MetricsConfig, TelemetryConfig};
pub use types::{IdleMode, Ipv4Prefix, PortRole};

use raw::{RawCapacity, RawConfig, RawNumber};

pub use pipeline::MAX_PORTS;
/// Largest number of rx queues per port.
pub const MAX_QUEUES: u16 = 64;
/// Longest port name, bytes: what the hello to the sink carries.
pub const MAX_PORT_NAME: usize = 255;

/// A configuration problem: the key (a TOML path such as `ports[1].mac`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {reason}")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is not valid TOML or has an unknown key or a value of the wrong type.
    #[error("config is not valid: {0}")]
    Syntax(String),
    /// A key is missing or holds a value that cannot be used.
    #[error("config key `{key}`: {reason}")]
    Key {
        /// The TOML path of the key.
        key: String,
        /// Why the value cannot be used.
        reason: String,
    },
}

/// `path` as written in the config file: a relative one is read from the file's directory
/// (`base`), or from the working directory for a config given as text.
pub(crate) fn resolve(base: Option<&Path>, path: String) -> PathBuf {
    let p = PathBuf::from(path);
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p,
    }
}

pub(crate) fn key_err(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key: key.into(),
        reason: reason.into(),
    }
}

/// The largest port MTU (`ports[].mtu`): jumbo frames.
pub const MAX_MTU: u16 = 9600;

/// The validated configuration of one switch, with every default filled in.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// This switch's identifier (the value PINT path tracing reports), 1 to 2^32-1.
    pub switch_id: u32,
    /// The file more routes were read from, one per line (None: only `[[routes]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes_file: Option<PathBuf>,
    /// How many of `routes`, at its end, came from `routes_file`.
    #[serde(skip)]
    pub file_routes: usize,
    /// DPDK EAL settings.
    pub eal: EalConfig,
    /// Data plane settings.
    pub dataplane: DataplaneConfig,
    /// Statistics output.
    pub stats: StatsConfig,
    /// The ports, in the order of the file; routes and workers refer to them by name.
    pub ports: Vec<PortConfig>,
    /// The worker threads and the rx queues each polls.
    pub workers: Vec<WorkerConfig>,
    /// IPv4 routes: those of `[[routes]]`, then those of `routes_file`.
    pub routes: Vec<RouteConfig>,
    /// In-band telemetry, FlowRadar and export.
    pub telemetry: TelemetryConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
}

/// DPDK EAL settings.
#[derive(Debug, Clone, Serialize)]
pub struct EalConfig {
    /// Arguments that replace the generated EAL arguments entirely (None: generate them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// The lcore (CPU) of the control thread (None: the lowest CPU no worker uses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub main_lcore: Option<u32>,
    /// EAL memory in MiB (None: sized from the mbuf count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u32>,
    /// Use hugepages (they must be set up); false runs with `--no-huge`.
    pub hugepages: bool,
}

/// Default of [`DataplaneConfig::idle_sleep_max_us`]: an idle worker wakes a thousand times
/// a second instead of ten thousand, and a packet that ends a long idle spell waits at most a
/// millisecond.
pub const DEFAULT_IDLE_SLEEP_MAX_US: u64 = 1000;

/// Data plane settings shared by all workers.
#[derive(Debug, Clone, Serialize)]
pub struct DataplaneConfig {
    /// What a worker does when its queues are empty.
    pub idle: IdleMode,
    /// How long a worker sleeps in `sleep` idle mode, in microseconds.
    pub idle_sleep_us: u64,
    /// The longest sleep a worker in `sleep` mode backs off to once it has been idle a
    /// while, in microseconds (at least `idle_sleep_us`).
    pub idle_sleep_max_us: u64,
    /// Mbufs in the packet pool (None: sized from ports, queues and captures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mbufs: Option<u32>,
    /// Per-lcore mbuf cache size of the pool.
    pub mbuf_cache: u32,
    /// Seed of the ECMP flow hash (switches with the same seed pick alike).
    #[serde(serialize_with = "seed_as_toml")]
    pub ecmp_seed: u64,
    /// Prefetch packet data a few packets ahead of the pipeline.
    pub prefetch: bool,
}

/// Statistics output.
#[derive(Debug, Clone, Serialize)]
pub struct StatsConfig {
    /// Interval between statistics lines in milliseconds (0: no periodic lines).
    pub interval_ms: u64,
}

/// One port.
#[derive(Debug, Clone, Serialize)]
pub struct PortConfig {
    /// The name routes and workers use.
    pub name: String,
    /// DPDK device arguments: a virtual device (`net_pcap0,rx_pcap=in.pcap`) or a PCI address.
    pub device: String,
    /// Edge (hosts) or fabric (switches).
    pub role: PortRole,
    /// The port's own MAC: the source MAC of frames it sends.
    pub mac: MacAddr,
    /// Largest IPv4 packet (L3 bytes) the port sends.
    pub mtu: u16,
    /// Line rate in bit/s (used by utilisation telemetry); printed as the file's `capacity`.
    #[serde(rename = "capacity")]
    pub capacity_bps: u64,
    /// Rx descriptors per queue.
    pub rx_descriptors: u16,
    /// Tx descriptors per queue.
    pub tx_descriptors: u16,
    /// Accept frames for any destination MAC (true) or only those sent to the port's MAC.
    pub promiscuous: bool,
    /// Rx queues (derived from the workers: highest polled queue + 1, at least 1); not a
    /// key of the file, so not printed.
    #[serde(skip)]
    pub rx_queues: u16,
    /// Loss, delay and reordering applied on transmit (None: none, at no cost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impair: Option<ImpairConfig>,
}

impl PortConfig {
    /// Whether the device is a PCI address rather than a virtual device.
    pub fn is_pci(&self) -> bool {
        is_pci_address(self.device.split(',').next().unwrap_or(""))
    }
}

/// One worker thread.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerConfig {
    /// The lcore (CPU) the worker is pinned to.
    pub lcore: u32,
    /// The rx queues it polls.
    pub rx: Vec<RxQueueRef>,
}

/// A reference to one rx queue of a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxQueueRef {
    /// Port name.
    pub port: String,
    /// Index of the port in [`Config::ports`].
    pub port_index: usize,
    /// Queue number.
    pub queue: u16,
}

/// Printed as the file writes it: `"port:queue"`.
impl Serialize for RxQueueRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{}:{}", self.port, self.queue))
    }
}

/// One IPv4 route.
#[derive(Debug, Clone, Serialize)]
pub struct RouteConfig {
    /// The destination prefix.
    pub prefix: Ipv4Prefix,
    /// One next hop, or several forming an ECMP group; routes with the same group share it.
    pub next_hops: Arc<[NextHopConfig]>,
}

/// One next hop of a route.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct NextHopConfig {
    /// Egress port name.
    pub port: String,
    /// Index of the port in [`Config::ports`].
    #[serde(skip)]
    pub port_index: usize,
    /// The next hop's MAC: the destination MAC of forwarded frames.
    pub mac: MacAddr,
}

/// The ECMP seed of switch `switch_id` when its config gives none: its own, so that
/// switches in tiers do not choose alike (a flow set one switch sent up one of its links
/// would all take the same few links of the next switch's group: polarisation).
pub fn default_ecmp_seed(switch_id: u32) -> u64 {
    // Below 2^63, as a TOML integer holds it (`--check-config` prints it back).
    ::telemetry::hash::mix64(0x5049_4e54_4543_4d50 ^ u64::from(switch_id)) >> 1
}

/// A seed as TOML holds it: an integer up to 2^63 - 1, a hex string above.
fn seed_as_toml<S: serde::Serializer>(seed: &u64, s: S) -> Result<S::Ok, S::Error> {
    if i64::try_from(*seed).is_ok() {
        s.serialize_u64(*seed)
    } else {
        s.collect_str(&format_args!("{seed:#x}"))
    }
}

/// `dataplane.ecmp_seed`: any 64-bit value, as an integer or (above TOML's integers) a
/// string in hex or decimal; the switch's own when the key is left out.
fn ecmp_seed(raw: Option<RawNumber>, switch_id: u32) -> Result<u64, ConfigError> {
    const KEY: &str = "dataplane.ecmp_seed";
    const RANGE: &str =
        "0 to 2^64 - 1; above 2^63 - 1, write a string such as \"0xfedcba9876543210\"";
    match raw {
        None => Ok(default_ecmp_seed(switch_id)),
        Some(RawNumber::Int(i)) => {
            u64::try_from(i).map_err(|_| key_err(KEY, format!("{i} is negative ({RANGE})")))
        }
        Some(RawNumber::Text(t)) => raw::number_text(&t)
            .ok_or_else(|| key_err(KEY, format!("`{}` is not a seed ({RANGE})", t.trim()))),
        Some(RawNumber::Other(v)) => Err(key_err(
            KEY,
            format!("{} is not a seed ({RANGE})", raw::shown(&v)),
        )),
    }
}

/// Whether `s` looks like a PCI address (`0000:01:00.0` or `01:00.0`).
pub fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
    let (bus, devfn) = match parts.as_slice() {
        [dom, bus, devfn] if hex(dom, 4) => (*bus, *devfn),
        [bus, devfn] => (*bus, *devfn),
        _ => return false,
    };
    match devfn.split_once('.') {
        Some((dev, func)) => {
            hex(bus, 2)
                && hex(dev, 2)
                && func.len() == 1
                && func.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The ethdev name DPDK gives the device in `devargs`: the text before the first comma,
/// trimmed; a PCI address in DPDK's form (`0000:3b:00.0`: with its domain, in lower case),
/// so that two spellings of one device are one name.
pub fn device_name(devargs: &str) -> String {
    let name = devargs.split(',').next().unwrap_or("").trim();
    if is_pci_address(name) {
        let lower = name.to_ascii_lowercase();
        if lower.matches(':').count() == 1 {
            format!("0000:{lower}")
        } else {
            lower
        }
    } else {
        name.to_owned()
    }
}

impl Config {
    /// Reads and validates a configuration file; relative paths in it (the query file)
    /// are relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Config::parse(&text, path.parent()).map_err(|e| match e {
            // The parser's message gives the line and column: with the file's name, an
            // editor's jump target.
            ConfigError::Syntax(why) => ConfigError::Syntax(format!("{}: {why}", path.display())),
            e => e,
        })
    }

    /// Parses and validates a configuration from TOML text; relative paths in it are
    /// relative to the working directory.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, None)
    }

    fn parse(text: &str, base: Option<&Path>) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let mut why = e.to_string().trim_end().to_owned();
            // The demo's template (configs/demo.toml) run as it is.
            if text.contains("@WORKER@") || text.contains("@CAPTURE@") {
                why.push_str("\n(this is a template: `pint-switch --demo` fills in its @WORKER@ and @CAPTURE@; to run it yourself, put a CPU number and a capture file in their place)");
            }
            ConfigError::Syntax(why)
        })?;
        validate(raw, base)
    }

    /// The resolved configuration as TOML (what `--check-config` prints): a file in the
    /// form the switch reads, every default written out, that configures the same switch
    /// run from the same directory (a relative query file's path, read from the config
    /// file's directory, is printed absolute).
    pub fn to_toml(&self) -> String {
        self.try_to_toml()
            .unwrap_or_else(|e| format!("# cannot print configuration: {e}\n"))
    }

    /// [`Config::to_toml`], or why the configuration cannot be printed as TOML (a path that
    /// is not UTF-8: TOML's strings are).
    pub fn try_to_toml(&self) -> Result<String, String> {
        let mut c = self.clone();
        for path in [c.telemetry.queries.as_mut(), c.routes_file.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Ok(abs) = std::path::absolute(&*path) {
                *path = abs;
            }
        }
        // The routes file's routes stay in their file.
        c.routes
            .truncate(c.routes.len().saturating_sub(c.file_routes));
        toml::to_string(&c).map_err(|e| e.to_string())
    }

    /// Index of the port called `name`.
    pub fn port_index(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }

    /// What the operator should hear before the switch starts (`--check-config` prints it
    /// too): settings that are valid but likely not what was meant, each naming its key:
    /// memif queues that do not match, next hops with one of the switch's own MACs, EAL keys
    /// that `eal.args` replaces, an idle sleep longer than an epoch, fabric ports without room
    /// for the plan's shim ([`Config::shim_room_warnings`]).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.memif_queue_warnings();
        out.extend(self.own_mac_next_hop_warnings());
        if self.eal.args.is_some() {
            // The arguments replace the generated ones whole.
            for (key, set) in [
                ("eal.main_lcore", self.eal.main_lcore.is_some()),
                ("eal.memory_mb", self.eal.memory_mb.is_some()),
            ] {
                if set {
                    out.push(format!(
                        "config key `{key}` is not used: eal.args replaces the generated EAL arguments (give --main-lcore or -m there)"
                    ));
                }
            }
        }
        if !self.telemetry.enabled {
            return out;
        }
        // An idle worker closes its epochs when it wakes: one that sleeps longer than an
        // epoch sends late flowsets that span several, and the sink waits its grace time
        // on each of those epochs and finds this switch missing.
        if self.dataplane.idle == IdleMode::Sleep
            && self.dataplane.idle_sleep_max_us > self.telemetry.epoch_ms * 1000
        {
            out.push(format!(
                "config key `dataplane.idle_sleep_max_us` ({} us; never below `idle_sleep_us`) is longer than an epoch (telemetry.epoch_ms = {}): an idle worker's flowsets come late and span several epochs, and the sink finds this switch missing in each",
                self.dataplane.idle_sleep_max_us, self.telemetry.epoch_ms
            ));
        }
        // A query file that does not load is an error where the plan is compiled.
        if let Ok((_, plan)) = self.telemetry.load_queries() {
            out.extend(self.shim_room_warnings(::telemetry::wire::shim::shim_len(
                ::telemetry::wire::shim::digest_bytes(plan.global_bits),
            )));
        }
        out
    }

    /// Lines for next hops whose MAC is one of this switch's own ports' (at most 5, then
    /// a count): frames sent there come back to the switch, or go nowhere.
    pub fn own_mac_next_hop_warnings(&self) -> Vec<String> {
        let own: BTreeSet<MacAddr> = self.ports.iter().map(|p| p.mac).collect();
        let from_toml = self.routes.len().saturating_sub(self.file_routes);
        let mut hits = self
            .routes
            .iter()
            .enumerate()
            .flat_map(|(r, route)| {
                route
                    .next_hops
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| own.contains(&h.mac))
                    .map(move |(n, h)| (r, route.prefix, n, h.mac))
            })
            .map(|(r, prefix, n, mac)| {
                let key = if r < from_toml {
                    format!("`routes[{r}].next_hops[{n}].mac`")
                } else {
                    format!("`routes_file` (the route for {prefix}, next hop {})", n + 1)
                };
                format!(
                    "config key {key}: {mac} is one of this switch's own port MACs (frames sent there come back to the switch or go nowhere)"
                )
            });
        let mut out: Vec<String> = hits.by_ref().take(5).collect();
        let more = hits.count();
        if more > 0 {
            out.push(format!(
                "... and {more} more next hops with this switch's own MACs"
            ));
        }
        out
    }

    /// One line per memif port with more than one queue either way: every worker sends on
    /// its own tx queue of every port, and DPDK's memif sets up the rings both ends asked
    /// for without checking that the peer asked for as many; a peer with fewer (pint-gen
    /// has one of each) shares a ring with the switch, and packets are lost or corrupted.
    pub fn memif_queue_warnings(&self) -> Vec<String> {
        let tx = self.workers.len();
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.device.starts_with("net_memif") && (tx > 1 || p.rx_queues > 1))
            .map(|(i, p)| {
                format!(
                    "config key `ports[{i}].device`: a memif port here has {tx} tx queue(s) (one per worker) and {} rx queue(s); its peer must have as many rx and tx queues the other way round (DPDK's memif does not check, and a peer with fewer shares rings with the switch: packets lost or corrupted; pint-gen has one of each)",
                    p.rx_queues
                )
            })
            .collect()
    }

    /// What the operator should hear about the fabric ports' room for a shim of
    /// `shim_bytes` bytes: one line, naming its key, per fabric port whose MTU is below the
    /// largest edge port's plus the shim. The shim counts against the egress MTU, so the
    /// largest packets hosts send (often most of a bulk transfer's) would cross such a port
    /// without telemetry. Empty when telemetry is off, there is no edge port, or every
    /// fabric port has room.
    pub fn shim_room_warnings(&self, shim_bytes: usize) -> Vec<String> {
        if !self.telemetry.enabled {
            return Vec::new();
        }
        let Some(edge) = self
            .ports
            .iter()
            .filter(|p| p.role == PortRole::Edge)
            .rev() // max_by_key keeps the last of equals: name the first
            .max_by_key(|p| p.mtu)
        else {
            return Vec::new();
        };
        let need = usize::from(edge.mtu) + shim_bytes;
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.role == PortRole::Fabric && usize::from(p.mtu) < need)
            .map(|(i, p)| {
                let fix = if need <= usize::from(MAX_MTU) {
                    format!("set it to {need} or more")
                } else {
                    format!(
                        "a port's MTU cannot go above {MAX_MTU}: lower edge port `{}`'s to {} or less",
                        edge.name,
                        usize::from(MAX_MTU).saturating_sub(shim_bytes)
                    )
                };
                format!(
                    "config key `ports[{i}].mtu` (fabric port `{}`): {} leaves no room for the plan's {shim_bytes}-byte shim on packets above {} bytes, which edge port `{}` (mtu {}) admits: they cross it without telemetry (counted as `no_telemetry_mtu`); {fix}",
                    p.name,
                    p.mtu,
                    usize::from(p.mtu).saturating_sub(shim_bytes),
                    edge.name,
                    edge.mtu,
                )
            })
            .collect()
    }

    /// The pipeline's tables, taking the routes out of this config (left with none): a
    /// switch needs them only to build its forwarder, and the copies of a full table would
    /// otherwise stay for the whole run. Each route's group is let go as it is converted.
    pub fn take_tables(&mut self) -> pipeline::Tables {
        let routes = std::mem::take(&mut self.routes);
        self.file_routes = 0;
        pipeline::Tables {
            ports: self.port_specs(),
            routes: route_specs(routes),
            ecmp_seed: self.dataplane.ecmp_seed,
        }
    }

    /// The pipeline's tables: ports and routes as plain values.
    pub fn tables(&self) -> pipeline::Tables {
        pipeline::Tables {
            ports: self.port_specs(),
            routes: route_specs(self.routes.iter().cloned()),
            ecmp_seed: self.dataplane.ecmp_seed,
        }
    }

    /// The ports as the pipeline sees them.
    fn port_specs(&self) -> Vec<pipeline::PortSpec> {
        self.ports
            .iter()
            .map(|p| pipeline::PortSpec {
                mac: p.mac,
                promiscuous: p.promiscuous,
                role: p.role,
                mtu: p.mtu,
                capacity_bps: p.capacity_bps,
            })
            .collect()
    }
}

/// The routes as the pipeline sees them, each group converted once and shared as the
/// config's routes share it.
fn route_specs(routes: impl IntoIterator<Item = RouteConfig>) -> Vec<pipeline::RouteSpec> {
    let mut groups: std::collections::HashMap<*const NextHopConfig, Arc<[pipeline::NextHopSpec]>> =
        std::collections::HashMap::new();
    routes
        .into_iter()
        .map(|r| pipeline::RouteSpec {
            addr: r.prefix.addr,
            len: r.prefix.len,
            next_hops: Arc::clone(
                groups
                    .entry(Arc::as_ptr(&r.next_hops).cast::<NextHopConfig>())
                    .or_insert_with(|| {
                        r.next_hops
                            .iter()
                            .map(|h| pipeline::NextHopSpec {
                                port: h.port_index as u16,
                                mac: h.mac,
                            })
                            .collect()
                    }),
            ),
        })
        .collect()
}

fn validate(raw: RawConfig, base: Option<&Path>) -> Result<Config, ConfigError> {
    let switch_id = raw
        .switch_id
        .ok_or_else(|| key_err("switch_id", "missing (a number from 1 to 4294967295)"))?;
    let switch_id = u32::try_from(switch_id)
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| {
            key_err(
                "switch_id",
                format!("{switch_id} is out of range (1 to 4294967295)"),
            )
        })?;

    let eal = EalConfig {
        args: raw.eal.args,
        main_lcore: raw.eal.main_lcore,
        memory_mb: raw.eal.memory_mb,
        hugepages: raw.eal.hugepages.unwrap_or(false),
    };
    if let Some(args) = &eal.args
        && args.is_empty()
    {
        return Err(key_err(
            "eal.args",
            "is empty (leave it out to use the generated arguments)",
        ));
    }
    if let Some(mb) = eal.memory_mb
        && mb < 64
    {
        return Err(key_err(
            "eal.memory_mb",
            format!("{mb} MiB is too little for DPDK (at least 64)"),
        ));
    }

    let idle_sleep_us = raw.dataplane.idle_sleep_us.unwrap_or(100);
    let dataplane = DataplaneConfig {
        idle: raw.dataplane.idle.unwrap_or_default(),
        idle_sleep_us,
        idle_sleep_max_us: raw
            .dataplane
            .idle_sleep_max_us
            .unwrap_or(DEFAULT_IDLE_SLEEP_MAX_US.max(idle_sleep_us)),
        mbufs: raw.dataplane.mbufs,
        mbuf_cache: raw.dataplane.mbuf_cache.unwrap_or(256),
        ecmp_seed: ecmp_seed(raw.dataplane.ecmp_seed, switch_id)?,
        prefetch: raw.dataplane.prefetch.unwrap_or(false),
    };
    if dataplane.idle_sleep_us == 0 || dataplane.idle_sleep_us > 1_000_000 {
        return Err(key_err(
            "dataplane.idle_sleep_us",
            "must be between 1 and 1000000 microseconds",
        ));
    }
    if dataplane.idle_sleep_max_us < dataplane.idle_sleep_us
        || dataplane.idle_sleep_max_us > 1_000_000
    {
        return Err(key_err(
            "dataplane.idle_sleep_max_us",
            format!(
                "{}: must be between idle_sleep_us ({}) and 1000000 microseconds",
                dataplane.idle_sleep_max_us, dataplane.idle_sleep_us
            ),
        ));
    }
    if let Some(n) = dataplane.mbufs
        && n < 512
    {
        return Err(key_err(
            "dataplane.mbufs",
            format!("{n} is too few (at least 512)"),
        ));
    }
    if dataplane.mbuf_cache > 512 {
        return Err(key_err(
            "dataplane.mbuf_cache",
            "must be at most 512 (DPDK's RTE_MEMPOOL_CACHE_MAX_SIZE)",
        ));
    }
    // DPDK refuses a pool whose cache's flush threshold (1.5 x the cache) exceeds it.
    if let Some(n) = dataplane.mbufs
        && u64::from(dataplane.mbuf_cache) * 3 / 2 > u64::from(n)
    {
        return Err(key_err(
            "dataplane.mbuf_cache",
            format!(
                "{} is too large for {n} mbufs (DPDK asks for at most mbufs / 1.5: {})",
                dataplane.mbuf_cache,
                u64::from(n) * 2 / 3
            ),
        ));
    }

    let stats = StatsConfig {
        interval_ms: raw.stats.interval_ms.unwrap_or(1000),
    };
    if stats.interval_ms != 0 && stats.interval_ms < 10 {
        return Err(key_err(
            "stats.interval_ms",
            "must be 0 (off) or at least 10",
        ));
    }

    if raw.ports.is_empty() {
        return Err(key_err(
            "ports",
            "no ports configured (add at least one [[ports]] table)",
        ));
    }
    if raw.ports.len() > MAX_PORTS {
        return Err(key_err(
            "ports",
            format!("{} ports configured; at most {MAX_PORTS}", raw.ports.len()),
        ));
    }
    let mut ports = Vec::with_capacity(raw.ports.len());
    let mut names = BTreeSet::new();
    for (i, p) in raw.ports.into_iter().enumerate() {
        let k = |f: &str| format!("ports[{i}].{f}");
        let name = p.name.ok_or_else(|| key_err(k("name"), "missing"))?;
        // Routes files take names as words, and `#` begins a comment there.
        if name.is_empty()
            || name.contains(':')
            || name.contains(char::is_whitespace)
            || name.contains(char::is_control)
            || name.starts_with('#')
        {
            return Err(key_err(
                k("name"),
                format!(
                    "{name:?} must be non-empty, without ':', spaces or control characters, and not begin with '#' (a comment in a routes file)"
                ),
            ));
        }
        if name.len() > MAX_PORT_NAME {
            return Err(key_err(
                k("name"),
                format!(
                    "{} bytes long; at most {MAX_PORT_NAME} (the sink is told each port's name)",
                    name.len()
                ),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(key_err(
                k("name"),
                format!("`{name}` is used by an earlier port"),
            ));
        }
        let device = p.device.ok_or_else(|| {
            key_err(
                k("device"),
                "missing (e.g. net_pcap0,rx_pcap=in.pcap or 0000:01:00.0)",
            )
        })?;
        if device.trim().is_empty() || device.split(',').next().unwrap_or("").is_empty() {
            return Err(key_err(k("device"), "is empty"));
        }
        let role = p
            .role
            .ok_or_else(|| key_err(k("role"), "missing (edge or fabric)"))?;
        let mac_text = p.mac.ok_or_else(|| key_err(k("mac"), "missing"))?;
        let mac: MacAddr =
            mac_text
                .parse()
                .map_err(|e: ::telemetry::wire::ethernet::MacParseError| {
                    key_err(k("mac"), e.to_string())
                })?;
        if mac.is_multicast() {
            return Err(key_err(k("mac"), format!("{mac} is a multicast address")));
        }
        if mac == MacAddr([0; 6]) {
            return Err(key_err(
                k("mac"),
                "00:00:00:00:00:00 is no station's address",
            ));
        }
        let mtu = p.mtu.unwrap_or(1500);
        if !(68..=u32::from(MAX_MTU)).contains(&mtu) {
            return Err(key_err(
                k("mtu"),
                format!("{mtu} is out of range (68 to {MAX_MTU})"),
            ));
        }
        let capacity_bps = match p.capacity {
            None => 10_000_000_000,
            Some(RawCapacity::Bits(b)) if b > 0 && b <= types::MAX_CAPACITY_BPS => b,
            Some(RawCapacity::Bits(0)) => return Err(key_err(k("capacity"), "must be positive")),
            Some(RawCapacity::Bits(b)) => {
                return Err(key_err(
                    k("capacity"),
                    format!("{b} bit/s is out of range (1 bit/s to 1 Pbit/s)"),
                ));
            }
            Some(RawCapacity::Text(t)) => {
                types::parse_capacity(&t).map_err(|e| key_err(k("capacity"), e))?
            }
            Some(RawCapacity::Other(v)) => {
                return Err(key_err(
                    k("capacity"),
                    format!(
                        "{} is not a capacity: write bit/s as a positive integer or a string such as \"10G\" or \"2.5G\"",
                        raw::shown(&v)
                    ),
                ));
            }
        };
        let desc = |v: Option<u32>, f: &str| -> Result<u16, ConfigError> {
            let v = v.unwrap_or(1024);
            if !(32..=16384).contains(&v) || !v.is_power_of_two() {
                return Err(key_err(
                    k(f),
                    format!("{v} must be a power of two from 32 to 16384"),
                ));
            }
            Ok(v as u16)
        };
        ports.push(PortConfig {
            name,
            device: device.trim().to_owned(),
            role,
            mac,
            mtu: mtu as u16,
            capacity_bps,
            rx_descriptors: desc(p.rx_descriptors, "rx_descriptors")?,
            tx_descriptors: desc(p.tx_descriptors, "tx_descriptors")?,
            promiscuous: p.promiscuous.unwrap_or(true),
            rx_queues: 1,
            impair: p
                .impair
                .map(|r| ImpairConfig::from_raw(r, &format!("ports[{i}].impair")))
                .transpose()?,
        });
    }
    let mut devices = BTreeMap::new();
    for (i, p) in ports.iter().enumerate() {
        let dev_name = device_name(&p.device);
        if let Some(j) = devices.insert(dev_name.clone(), i) {
            return Err(key_err(
                format!("ports[{i}].device"),
                format!("device `{dev_name}` is already used by ports[{j}]"),
            ));
        }
    }
    let port_names: Vec<String> = ports.iter().map(|p| p.name.clone()).collect();
    let find_port = |name: &str| port_names.iter().position(|p| p == name);

    if raw.workers.is_empty() {
        return Err(key_err(
            "workers",
            "no workers configured (add a [[workers]] table with lcore and rx)",
        ));
    }
    if raw.workers.len() > ::telemetry::protocol::MAX_WORKERS {
        return Err(key_err(
            "workers",
            format!(
                "{} workers configured; at most {} (each sends the sink a flowset per epoch)",
                raw.workers.len(),
                ::telemetry::protocol::MAX_WORKERS
            ),
        ));
    }
    let mut workers = Vec::with_capacity(raw.workers.len());
    let mut lcores = BTreeSet::new();
    let mut polled: BTreeMap<(usize, u16), usize> = BTreeMap::new();
    for (w, rw) in raw.workers.into_iter().enumerate() {
        let lcore = rw
            .lcore
            .ok_or_else(|| key_err(format!("workers[{w}].lcore"), "missing"))?;
        if !lcores.insert(lcore) {
            return Err(key_err(
                format!("workers[{w}].lcore"),
                format!("lcore {lcore} already has a worker"),
            ));
        }
        if rw.rx.is_empty() {
            return Err(key_err(
                format!("workers[{w}].rx"),
                "polls no queue (list entries such as \"port\" or \"port:1\")",
            ));
        }
        let mut rx = Vec::with_capacity(rw.rx.len());
        for (q, entry) in rw.rx.iter().enumerate() {
            let key = format!("workers[{w}].rx[{q}]");
            let (pname, queue) = match entry.split_once(':') {
                Some((p, qs)) => {
                    let queue: u16 =
                        qs.parse().ok().filter(|q| *q < MAX_QUEUES).ok_or_else(|| {
                            key_err(
                                &key,
                                format!("`{qs}` is not a queue number (0 to {})", MAX_QUEUES - 1),
                            )
                        })?;
                    (p, queue)
                }
                None => (entry.as_str(), 0),
            };
            let port_index = find_port(pname)
                .ok_or_else(|| key_err(&key, format!("no port is named `{pname}`")))?;
            if let Some(other) = polled.insert((port_index, queue), w) {
                return Err(key_err(
                    &key,
                    format!(
                        "queue {queue} of port `{pname}` is already polled by workers[{other}]"
                    ),
                ));
            }
            rx.push(RxQueueRef {
                port: pname.to_owned(),
                port_index,
                queue,
            });
        }
        workers.push(WorkerConfig { lcore, rx });
    }
    if let Some(main) = eal.main_lcore
        && lcores.contains(&main)
        && eal.args.is_none()
    {
        return Err(key_err(
            "eal.main_lcore",
            format!("lcore {main} also runs a worker"),
        ));
    }
    // Each port gets as many rx queues as its highest polled queue + 1; all must be polled.
    for (i, port) in ports.iter_mut().enumerate() {
        let queues: Vec<u16> = polled
            .keys()
            .filter(|(p, _)| *p == i)
            .map(|(_, q)| *q)
            .collect();
        let n = queues.iter().max().map_or(1, |m| m + 1);
        for q in 0..n {
            if !queues.contains(&q) && !queues.is_empty() {
                return Err(key_err(
                    "workers",
                    format!(
                        "port `{}` has queue {} polled but not queue {q}: every queue below the highest must be polled",
                        port.name,
                        n - 1
                    ),
                ));
            }
        }
        port.rx_queues = n;
    }

    let mut table = routes::RouteTable::new(&port_names);
    table.add_toml(raw.routes)?;
    let routes_file = raw.routes_file.map(|f| resolve(base, f));
    let file_routes = match &routes_file {
        Some(path) => table.add_file(path)?,
        None => 0,
    };
    let routes = table.finish()?;

    let telemetry = telemetry::validate(raw.telemetry, base)?;
    let metrics = telemetry::validate_metrics(raw.metrics)?;
    Ok(Config {
        switch_id,
        eal,
        dataplane,
        stats,
        ports,
        workers,
        routes,
        routes_file,
        file_routes,
        telemetry,
        metrics,
    })
}

#[cfg(test)]
mod tests;

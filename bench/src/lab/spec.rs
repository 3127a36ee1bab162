//! A lab file (`configs/labs/*.toml`): the switches and links (a generated shape or a
//! topology file), which switches have hosts, the traffic between them, impairments on
//! links, the query file, the sink's options and the duration. Parsed strictly: an unknown
//! key or a bad value is an error that names the key.

use std::path::{Path, PathBuf};

use control::config::ImpairConfig;
use serde::Deserialize;
use telemetry::topology::{FindError, Topology};

/// A lab problem: the key (`traffic.rate_pps`) and why.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The file cannot be read.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why (said in the message, so not a `source` that a chain would say again).
        cause: std::io::Error,
    },
    /// The file is not valid TOML for a lab.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the key).
        message: String,
    },
    /// A value is wrong.
    #[error("{key}: {reason}")]
    Key {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
}

fn key_err(key: impl Into<String>, reason: impl Into<String>) -> LabError {
    LabError::Key {
        key: key.into(),
        reason: reason.into(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    name: Option<String>,
    description: Option<String>,
    duration_s: Option<f64>,
    queries: Option<String>,
    topology: RawTopology,
    #[serde(default)]
    switches: RawSwitches,
    #[serde(default)]
    traffic: RawTraffic,
    #[serde(default)]
    impair: Vec<RawImpair>,
    #[serde(default)]
    sink: RawSink,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    kind: String,
    switches: Option<u32>,
    spines: Option<u32>,
    leaves: Option<u32>,
    k: Option<u32>,
    path: Option<String>,
    links: Option<Vec<[String; 2]>>,
    hosts: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitches {
    idle: Option<String>,
    epoch_ms: Option<u64>,
    capacity: Option<String>,
    expected_flows: Option<u32>,
}

/// `traffic.packet_size`: a frame size (`1000` or `"1000"`) or a mix's name.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "imix or a frame size of 60 to 1514")]
enum PacketSize {
    Bytes(u64),
    Named(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraffic {
    rate_pps: Option<f64>,
    flows: Option<u32>,
    packet_size: Option<PacketSize>,
    tcp_share: Option<f64>,
    probes: Option<u32>,
    probe_hz: Option<f64>,
    pairs: Option<Vec<[String; 2]>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImpair {
    link: [String; 2],
    loss: Option<f64>,
    delay_us: Option<u64>,
    jitter_us: Option<u64>,
    reorder: Option<f64>,
    from_s: Option<f64>,
    until_s: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    sensitivity: Option<String>,
    args: Option<Vec<String>>,
}

/// What the switches do when idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Spin (a core per switch).
    Poll,
    /// Sleep after a run of empty polls (many switches on few cores).
    Sleep,
}

/// The traffic every host sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// Packets per second each host sends (spread over its destinations).
    pub rate_pps: f64,
    /// Flows each host sends (spread over its destinations).
    pub flows: u32,
    /// pint-gen's `--packet-size` (`imix` or bytes).
    pub packet_size: String,
    /// Share of TCP flows.
    pub tcp_share: f64,
    /// Probe streams per host (spread over its destinations).
    pub probes: u32,
    /// Probes per second per stream.
    pub probe_hz: f64,
    /// Which hosts send to which (node numbers): every pair by default.
    pub pairs: Vec<(u32, u32)>,
}

/// Flowsets a second a lab's sink is given by default: each switch sends one per epoch, and
/// the sink shares a CPU with every switch's control thread. Measured on 2 CPUs: 40
/// switches at 10 ms epochs (4000 a second) kept up; 158 at 10 ms (15 800) dropped some, at
/// 100 ms (1580) none.
pub const DEFAULT_FLOWSETS_PER_SECOND: u64 = 2000;

/// The longest a switch's name is kept in its file names (then shortened, its ID added).
const SAFE_NAME_BYTES: usize = 100;

/// Longest traffic a lab sends, s (`duration_s`, `--duration`): an hour.
pub const MAX_DURATION_S: f64 = 3600.0;

/// Switches a route between hosts may cross: a hop's index counts the TTL modulo 128.
pub const MAX_ROUTE_SWITCHES: usize = 127;

/// The FlowRadar epoch of a lab of `switches` that does not set `switches.epoch_ms`: 10 ms
/// (the switch's default), or, for a lab whose switches would send the sink more than
/// [`DEFAULT_FLOWSETS_PER_SECOND`] flowsets a second at 10 ms, the shortest multiple of 10
/// ms that keeps them to it.
pub fn default_epoch_ms(switches: usize) -> u64 {
    let per_second_at_10ms = switches as u64 * 100;
    10 * per_second_at_10ms
        .div_ceil(DEFAULT_FLOWSETS_PER_SECOND)
        .max(1)
}

/// The first ten of `n` names, comma-separated, and how many more there are.
fn shown_list(names: impl Iterator<Item = String>, n: usize) -> String {
    const SHOWN: usize = 10;
    let mut names: Vec<String> = names.take(SHOWN).collect();
    if n > SHOWN {
        names.push(format!("and {} more", n - SHOWN));
    }
    names.join(", ")
}

/// An impairment on one direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkImpair {
    /// The switch that sends (node number)...
    pub from: u32,
    /// ...to this neighbour.
    pub to: u32,
    /// Share of packets dropped.
    pub loss: f64,
    /// Delay, microseconds.
    pub delay_us: u64,
    /// Jitter, microseconds.
    pub jitter_us: u64,
    /// Share of packets reordered.
    pub reorder: f64,
    /// Active from (s after the traffic starts: the port's first packet).
    pub from_s: f64,
    /// Until (s), None: to the end.
    pub until_s: Option<f64>,
}

impl LinkImpair {
    /// Why its reordering cannot reorder probe streams of a probe every `spacing_ms`, if
    /// it cannot: without a delay a reordered packet waits only for the port's next one;
    /// with one it skips the delay line and overtakes only the packets sent in the last
    /// delay plus jitter, and jitter alone reorders packets closer than twice its size.
    pub fn reorders_no_probes(&self, spacing_ms: f64) -> Option<String> {
        if self.delay_us == 0 {
            return Some(
                "without a delay a reordered packet waits only for the port's next one, so probe streams are not reordered".to_owned(),
            );
        }
        let reach_ms = (self.delay_us + self.jitter_us) as f64 / 1000.0;
        (reach_ms <= spacing_ms).then(|| {
            format!(
                "a reordered packet skips the delay line and overtakes only the packets sent in the last {reach_ms:.1} ms (delay_us + jitter_us), so probe streams, a probe every {spacing_ms:.1} ms, are not reordered"
            )
        })
    }
}

/// A parsed, checked lab.
#[derive(Debug, Clone)]
pub struct Lab {
    /// Its name.
    pub name: String,
    /// One line on what it shows.
    pub description: String,
    /// How long the traffic runs, seconds.
    pub duration_s: f64,
    /// The query file every switch runs (None: the paper's plan, built into the switch).
    pub queries: Option<PathBuf>,
    /// The switches and links (switch IDs: a TOML topology's own, else node number + 1 in
    /// the file's order).
    pub topology: Topology,
    /// The names of a topology file's switches that are on no link, left out (they could
    /// carry no traffic).
    pub left_out: Vec<String>,
    /// Nodes with hosts behind them, ascending.
    pub hosts: Vec<u32>,
    /// Idle mode of every switch.
    pub idle: Idle,
    /// FlowRadar epoch, ms ([`default_epoch_ms`] when the lab file does not say).
    pub epoch_ms: u64,
    /// Link capacity (pint-switch's `capacity`).
    pub capacity: String,
    /// FlowRadar's expected flows per epoch per switch.
    pub expected_flows: u32,
    /// The traffic.
    pub traffic: Traffic,
    /// The impairments.
    pub impair: Vec<LinkImpair>,
    /// The sink's `--sensitivity`.
    pub sensitivity: String,
    /// More pint-sink flags.
    pub sink_args: Vec<String>,
}

impl Lab {
    /// Reads and checks a lab file; relative paths in it are relative to the file.
    pub fn from_file(path: &Path) -> Result<Lab, LabError> {
        let text = std::fs::read_to_string(path).map_err(|cause| LabError::Io {
            path: path.to_owned(),
            cause,
        })?;
        let full = path.canonicalize().map_err(|cause| LabError::Io {
            path: path.to_owned(),
            cause,
        })?;
        let base = full.parent().unwrap_or(Path::new("/"));
        let stem = path
            .file_stem()
            .map_or("lab".into(), |s| s.to_string_lossy().into_owned());
        Lab::parse(&text, base, &stem).map_err(|e| match e {
            LabError::Parse { message, .. } => LabError::Parse {
                path: path.to_owned(),
                message,
            },
            e => e,
        })
    }

    /// Parses a lab's text; `base` resolves relative paths, `default_name` names it when
    /// the file does not.
    pub fn parse(text: &str, base: &Path, default_name: &str) -> Result<Lab, LabError> {
        let raw: RawLab = toml::from_str(text).map_err(|e| LabError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        let named = raw.name.is_some();
        let name = raw.name.unwrap_or_else(|| default_name.to_owned());
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(key_err(
                "name",
                if named {
                    format!("`{name}`: letters, digits, - and _ only")
                } else {
                    format!(
                        "`{name}` (the file's name, as the lab gives no `name`): letters, digits, - and _ only; set `name`"
                    )
                },
            ));
        }
        let duration_s = raw.duration_s.unwrap_or(20.0);
        if !(duration_s.is_finite() && (1.0..=MAX_DURATION_S).contains(&duration_s)) {
            return Err(key_err(
                "duration_s",
                format!("{duration_s}: 1 to {MAX_DURATION_S}"),
            ));
        }
        let queries = match raw.queries {
            Some(q) => {
                let path = base.join(q);
                control::config::telemetry::load_queries(Some(&path), None)
                    .map_err(|e| key_err("queries", e))?;
                // It is written into each switch's config, whose TOML holds UTF-8 alone.
                if path.to_str().is_none() {
                    return Err(key_err(
                        "queries",
                        format!(
                            "{}: the path (with the lab file's directory) is not UTF-8, which a switch's config cannot hold: move the lab elsewhere",
                            path.display()
                        ),
                    ));
                }
                Some(path)
            }
            None => None,
        };
        let (topology, default_hosts, left_out, own_ids) = topology(&raw.topology, base)?;
        // A switch by its name, or by a label (a Topology Zoo place name) no other has.
        let node_of = |name: &str, key: &str| -> Result<u32, LabError> {
            // Last, in a file that gives switch IDs (a TOML adjacency file, whose switches
            // are named `s<ID>`), a number is a switch ID.
            let by_id = || {
                name.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|_| own_ids)
                    .and_then(|id| topology.node(id))
            };
            topology
                .find(name)
                .or_else(|e| by_id().ok_or(e))
                .map_err(|e| match e {
                    FindError::AmbiguousLabel(_) => key_err(key, format!("`{name}` is {e}")),
                    FindError::Unknown
                        if left_out
                            .iter()
                            .any(|(n, l)| n == name || l.as_deref() == Some(name)) =>
                    {
                        key_err(
                            key,
                            format!("`{name}` is on no link in the topology (left out of the lab)"),
                        )
                    }
                    FindError::Unknown => key_err(key, format!("no switch is called `{name}`")),
                })
        };
        let mut hosts = match &raw.topology.hosts {
            Some(h) => h
                .iter()
                .map(|n| node_of(n, "topology.hosts"))
                .collect::<Result<Vec<_>, _>>()?,
            None => default_hosts,
        };
        hosts.sort_unstable();
        hosts.dedup();
        if hosts.len() < 2 {
            return Err(key_err(
                "topology.hosts",
                "at least two switches need hosts (traffic goes between them)",
            ));
        }
        for n in 0..topology.len() as u32 {
            if topology.neighbours(n).len() + 1 > pipeline::MAX_PORTS {
                return Err(key_err(
                    "topology",
                    format!(
                        "switch `{}` has {} neighbours; a switch drives at most {} fabric ports",
                        topology.names[n as usize],
                        topology.neighbours(n).len(),
                        pipeline::MAX_PORTS - 1
                    ),
                ));
            }
        }
        let idle = match raw.switches.idle.as_deref() {
            None | Some("sleep") => Idle::Sleep,
            Some("poll") => Idle::Poll,
            Some(o) => return Err(key_err("switches.idle", format!("`{o}`: poll or sleep"))),
        };
        let epoch_ms = raw
            .switches
            .epoch_ms
            .unwrap_or_else(|| default_epoch_ms(topology.len()));
        if !(1..=60_000).contains(&epoch_ms) {
            return Err(key_err(
                "switches.epoch_ms",
                format!("{epoch_ms}: 1 to 60000"),
            ));
        }
        let capacity = raw.switches.capacity.unwrap_or_else(|| "10G".into());
        control::config::types::parse_capacity(&capacity)
            .map_err(|e| key_err("switches.capacity", e))?;
        let expected_flows = raw.switches.expected_flows.unwrap_or(2000);
        if !(1..=10_000_000).contains(&expected_flows) {
            return Err(key_err(
                "switches.expected_flows",
                format!("{expected_flows}: 1 to 10000000"),
            ));
        }
        // The switches' own limit (a full flowset must fit a frame to the sink), checked
        // here so that the lab names its key and writes no config a switch refuses.
        let mut sized = control::config::telemetry::TelemetryConfig::off();
        sized.flowradar.expected_flows = expected_flows;
        if let Err(control::config::ConfigError::Key { reason, .. }) =
            control::config::telemetry::check_flowset_size(&sized)
        {
            // A lab's switches have one worker each: the switch's hint at more is no help.
            let reason = reason.replace(" (more workers share the flows)", "");
            return Err(key_err("switches.expected_flows", reason));
        }
        let t = raw.traffic;
        let rate_pps = t.rate_pps.unwrap_or(2000.0);
        if !(rate_pps.is_finite() && (1.0..=20e6).contains(&rate_pps)) {
            return Err(key_err(
                "traffic.rate_pps",
                format!("{rate_pps}: 1 to 20000000"),
            ));
        }
        let flows = t.flows.unwrap_or(20);
        if !(1..=65_536).contains(&flows) {
            return Err(key_err("traffic.flows", format!("{flows}: 1 to 65536")));
        }
        let packet_size = match t.packet_size {
            None => "imix".to_owned(),
            Some(PacketSize::Bytes(n)) => n.to_string(),
            Some(PacketSize::Named(s)) => s,
        };
        if packet_size
            .parse::<crate::generator::PacketSizes>()
            .is_err()
        {
            return Err(key_err(
                "traffic.packet_size",
                format!("`{packet_size}`: imix or a frame size of 60 to 1514"),
            ));
        }
        let tcp_share = t.tcp_share.unwrap_or(0.3);
        if !(0.0..=1.0).contains(&tcp_share) {
            return Err(key_err("traffic.tcp_share", format!("{tcp_share}: 0 to 1")));
        }
        let probes = t.probes.unwrap_or(0);
        if probes > 1024 {
            return Err(key_err("traffic.probes", format!("{probes}: at most 1024")));
        }
        let probe_hz = t.probe_hz.unwrap_or(20.0);
        // pint-gen's bounds: a slower probe's period is no time.
        if !(probe_hz.is_finite() && (1e-6..=100_000.0).contains(&probe_hz)) {
            return Err(key_err(
                "traffic.probe_hz",
                // Debug form: 1e-300 as that, not 300 digits.
                format!("{probe_hz:?}: 0.000001 to 100000"),
            ));
        }
        // Probes take their places among a host's packets: at the rate, none would be left
        // for data.
        let probe_rate = f64::from(probes) * probe_hz;
        if probe_rate >= rate_pps {
            return Err(key_err(
                "traffic.probe_hz",
                format!(
                    "{probes} probe streams at {probe_hz} Hz are {probe_rate} packets a second, as many as traffic.rate_pps ({rate_pps}) leaves no room for data: fewer probes, a lower probe_hz or a higher rate_pps"
                ),
            ));
        }
        // Per host, which nodes it reaches.
        let reach: std::collections::HashMap<u32, Vec<bool>> = hosts
            .iter()
            .map(|&h| {
                (
                    h,
                    topology.bfs(h).0.iter().map(|&d| d != u32::MAX).collect(),
                )
            })
            .collect();
        let pairs = match &t.pairs {
            Some(p) => {
                let mut out = Vec::new();
                for (i, [a, b]) in p.iter().enumerate() {
                    let key = format!("traffic.pairs[{i}]");
                    let (a, b) = (node_of(a, &key)?, node_of(b, &key)?);
                    if a == b {
                        return Err(key_err(
                            key,
                            format!("`{}` twice: a pair is two different switches", p[i][0]),
                        ));
                    }
                    if let Some(&(n, name)) = [(a, &p[i][0]), (b, &p[i][1])]
                        .iter()
                        .find(|(n, _)| !hosts.contains(n))
                    {
                        return Err(key_err(
                            key,
                            format!(
                                "`{name}` has no hosts (`{}` is not in topology.hosts)",
                                topology.display_name(n)
                            ),
                        ));
                    }
                    if !reach[&a][b as usize] {
                        return Err(key_err(
                            key,
                            format!(
                                "no path from `{}` to `{}` in the topology",
                                p[i][0], p[i][1]
                            ),
                        ));
                    }
                    if let Some(j) = out.iter().position(|&x| x == (a, b)) {
                        return Err(key_err(key, format!("the same pair as traffic.pairs[{j}]")));
                    }
                    out.push((a, b));
                }
                out
            }
            // Every two hosts with a path between them (a topology file may have parts
            // with no link between them), each host's destinations starting from the host
            // after it: hosts with fewer flows than destinations then spread their flows
            // over different ones rather than all sending to the first few hosts.
            None => {
                let hosts = &hosts;
                (0..hosts.len())
                    .flat_map(|i| {
                        (1..hosts.len()).map(move |j| (hosts[i], hosts[(i + j) % hosts.len()]))
                    })
                    .filter(|&(a, b)| reach[&a][b as usize])
                    .collect()
            }
        };
        if pairs.is_empty() {
            return Err(key_err(
                "topology.hosts",
                "no two switches with hosts have a path between them",
            ));
        }
        let mut impair = Vec::new();
        for (i, r) in raw.impair.into_iter().enumerate() {
            let key = |f: &str| format!("impair[{i}].{f}");
            let from = node_of(&r.link[0], &key("link"))?;
            let to = node_of(&r.link[1], &key("link"))?;
            if !topology.neighbours(from).contains(&to) {
                return Err(key_err(
                    key("link"),
                    format!("`{}` and `{}` are not linked", r.link[0], r.link[1]),
                ));
            }
            if impair
                .iter()
                .any(|x: &LinkImpair| (x.from, x.to) == (from, to))
            {
                return Err(key_err(key("link"), "impaired twice"));
            }
            // Checked as the switch will check its port's `impair` table, but named here.
            let values = control::config::RawImpair {
                loss: r.loss,
                delay_us: r.delay_us,
                jitter_us: r.jitter_us,
                reorder: r.reorder,
                from_s: r.from_s,
                until_s: r.until_s,
                ..Default::default()
            };
            let c =
                ImpairConfig::from_raw(values, &format!("impair[{i}]")).map_err(|e| match e {
                    control::config::ConfigError::Key { key, reason } => {
                        LabError::Key { key, reason }
                    }
                    other => key_err(format!("impair[{i}]"), other.to_string()),
                })?;
            impair.push(LinkImpair {
                from,
                to,
                loss: c.loss,
                delay_us: c.delay_us,
                jitter_us: c.jitter_us,
                reorder: c.reorder,
                from_s: c.from_s,
                until_s: c.until_s,
            });
        }
        let sensitivity = raw.sink.sensitivity.unwrap_or_else(|| "medium".into());
        let lab = Lab {
            name,
            description: raw.description.unwrap_or_default(),
            duration_s,
            queries,
            topology,
            left_out: left_out.into_iter().map(|(n, _)| n).collect(),
            hosts,
            idle,
            epoch_ms,
            capacity,
            expected_flows,
            traffic: Traffic {
                rate_pps,
                flows,
                packet_size,
                tcp_share,
                probes,
                probe_hz,
                pairs,
            },
            impair,
            sensitivity,
            sink_args: raw.sink.args.unwrap_or_default(),
        };
        if let Err(e) = sink::detect::Sensitivity::parse(&lab.sensitivity) {
            return Err(key_err("sink.sensitivity", e));
        }
        // The sink's whole command line as the lab will give it, checked by the sink's own
        // parser: a bad flag in `sink.args` (or one the lab gives itself) is named now,
        // before anything starts.
        let placeholder = crate::lab::plan::Endpoints {
            dir: PathBuf::from("run"),
            sink_listen: ([127, 0, 0, 1], 0).into(),
            sink_http: ([127, 0, 0, 1], 0).into(),
            main_lcore: 0,
            worker_lcores: Vec::new(),
        };
        if let Err(e) =
            sink::cli::check_server_flags(crate::lab::plan::sink_args(&lab, &placeholder))
        {
            return Err(key_err("sink.args", e));
        }
        let longest = lab.longest_route();
        if longest > MAX_ROUTE_SWITCHES {
            return Err(key_err(
                "topology",
                format!(
                    "the longest route between hosts crosses {longest} switches; a lab routes across at most {MAX_ROUTE_SWITCHES} (a hop's index counts the TTL modulo 128)"
                ),
            ));
        }
        Ok(lab)
    }

    /// Switches on the longest route between hosts that send to each other.
    pub fn longest_route(&self) -> usize {
        let rows = self.hops_from_senders();
        self.traffic
            .pairs
            .iter()
            .map(|&(a, b)| rows[a as usize][b as usize] as usize + 1)
            .max()
            .unwrap_or(1)
    }

    /// The pairs that carry traffic: each sender's flow `i` (and probe stream `i`) goes to
    /// its destination `i` modulo their number, so with fewer flows than destinations the
    /// later destinations get none.
    pub fn active_pairs(&self) -> Vec<(u32, u32)> {
        self.pairs_of_first(self.traffic.flows.max(self.traffic.probes) as usize)
    }

    /// Each sender with its first `n` destinations.
    fn pairs_of_first(&self, n: usize) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for &h in &self.hosts {
            out.extend(self.destinations(h).into_iter().take(n).map(|d| (h, d)));
        }
        out
    }

    /// What the lab left out of its topology file, for the user (None: nothing).
    pub fn left_out_note(&self) -> Option<String> {
        let n = self.left_out.len();
        if n == 0 {
            return None;
        }
        Some(format!(
            "{n} switch{} of the topology file on no link left out: {}",
            if n == 1 { "" } else { "es" },
            shown_list(self.left_out.iter().map(|s| format!("`{s}`")), n)
        ))
    }

    /// Warnings about a lab that runs but cannot show what it is meant to, each naming its
    /// key: host pairs or hosts without traffic; a query plan without paths; flowsets sized
    /// below the flows an epoch brings them; impairments that act on no traffic, so that
    /// their loss and delay checks cannot pass (on a link direction that lies on no shortest
    /// path between a pair of hosts that send to each other: routes are the shortest paths,
    /// with ECMP over equal ones, so a link on any one of them may carry some of the
    /// traffic; or starting when the traffic is over, as `--duration` can make it).
    pub fn warnings(&self) -> Vec<String> {
        let rows = self.hops_from_senders();
        // Hops from sender `a` to any switch `b` (rows only exist for senders).
        let d = |a: u32, b: u32| -> u64 { u64::from(rows[a as usize][b as usize]) };
        let mut warnings = Vec::new();
        let active = self.active_pairs();
        if active.len() < self.traffic.pairs.len() {
            warnings.push(format!(
                "traffic.flows: {} flows a host, but hosts send to up to {} others: {} of the {} host pairs get no traffic (each flow goes to one destination, in turn)",
                self.traffic.flows.max(self.traffic.probes),
                self.hosts.iter().map(|&h| self.destinations(h).len()).max().unwrap_or(0),
                self.traffic.pairs.len() - active.len(),
                self.traffic.pairs.len()
            ));
        }
        for &h in &self.hosts {
            if !self.traffic.pairs.iter().any(|&(a, b)| a == h || b == h) {
                warnings.push(format!(
                    "topology.hosts: `{}` has hosts, but no route to another switch with hosts, or no pair of traffic.pairs, takes it: they send and receive nothing",
                    self.shown(h)
                ));
            }
        }
        if !self.plan_traces_paths() {
            warnings.push(
                "queries: the query plan traces no path (no static_per_flow switch_id query): the sink decodes no path and puts loss on no link, so the report cannot check paths or loss per link".to_owned(),
            );
        }
        if let Some((n, flows)) = self.busiest_switch_flows()
            && flows > u64::from(self.expected_flows)
        {
            warnings.push(format!(
                "switches.expected_flows: {}, but about {flows} flows an epoch cross {} (its share of the flows and probe streams between hosts): a flowset with more flows than it is sized for does not decode, and its counts are lost; give it {flows} or more",
                self.expected_flows,
                self.shown(n)
            ));
        }
        // Delay events come from probe streams, and from flows whose plan sums hop latency.
        let latency_sum = self
            .plan()
            .is_some_and(|plan| plan.latency_sum_query().is_some());
        let probed = self.pairs_of_first(self.traffic.probes as usize);
        for (i, x) in self.impair.iter().enumerate() {
            if x.from_s >= self.duration_s {
                warnings.push(format!(
                    "impair[{i}].from_s: {} s, when the {} s of traffic are over, so the \
                     impairment acts on no traffic",
                    x.from_s, self.duration_s
                ));
            }
            if x.reorder > 0.0
                && let Some(why) = x.reorders_no_probes(1000.0 / self.traffic.probe_hz)
            {
                let remedy = if x.delay_us == 0 {
                    "give the link a delay_us too".to_owned()
                } else {
                    format!(
                        "give the link a longer delay_us, or traffic.probe_hz above {:.1}",
                        1e6 / (x.delay_us + x.jitter_us) as f64
                    )
                };
                warnings.push(format!(
                    "impair[{i}].reorder: {why}, and no reordering event can point at it; {remedy}"
                ));
            }
            // Jitter spreads each window's delays, which detection sees whatever the level.
            let steady = 2.0 * x.jitter_us as f64 / 1000.0
                < sink::detect::Params::default().delay_threshold_ms;
            if x.delay_us > 0
                && steady
                && x.from_s <= 0.0
                && x.until_s.is_none_or(|u| u >= self.duration_s)
            {
                warnings.push(format!(
                    "impair[{i}]: a delay for the whole run is the link's baseline: detection finds changes in delay, so no delay event can point at it; give it from_s or until_s within the {} s of traffic",
                    self.duration_s
                ));
            } else if x.delay_us > 0 && steady && x.from_s <= 0.0 {
                warnings.push(format!(
                    "impair[{i}].from_s: a delay from the traffic's first packet leaves detection none of the link's normal delay: it takes the delay for the baseline and sees only its end, a fall, so no delay event can point at it; give it a from_s within the {} s of traffic",
                    self.duration_s
                ));
            }
            let crossed = active
                .iter()
                .any(|&(a, b)| d(a, x.from) + 1 + d(b, x.to) == d(a, b));
            if !crossed {
                warnings.push(format!(
                    "impair[{i}].link: no route between hosts that send to each other crosses \
                     {} -> {}, so its impairment acts on no traffic (hosts at {})",
                    self.shown(x.from),
                    self.shown(x.to),
                    shown_list(self.hosts.iter().map(|&h| self.shown(h)), self.hosts.len())
                ));
            } else if x.delay_us > 0
                && !latency_sum
                && !probed
                    .iter()
                    .any(|&(a, b)| d(a, x.from) + 1 + d(b, x.to) == d(a, b))
            {
                warnings.push(format!(
                    "impair[{i}].delay_us: no probe stream crosses {} -> {} (traffic.probes = {}) and the query plan sums no hop latency, so no delay event can point at it",
                    self.shown(x.from),
                    self.shown(x.to),
                    self.traffic.probes
                ));
            }
        }
        warnings
    }

    /// The query plan every switch runs (None: its file does not compile, which the lab's
    /// parse refuses).
    fn plan(&self) -> Option<telemetry::pint::plan::Plan> {
        control::config::telemetry::load_queries(self.queries.as_deref(), None)
            .ok()
            .map(|(_, plan)| plan)
    }

    /// Whether the query plan traces paths (a `static_per_flow` `switch_id` query, the
    /// one the sink decodes paths from): without one the sink puts loss on no link.
    pub fn plan_traces_paths(&self) -> bool {
        self.plan().is_some_and(|plan| plan.path_query().is_some())
    }

    /// The switch whose traffic makes the most flows an epoch, and about how many: the
    /// flows and probe streams that cross it (each flow's share of the shortest paths
    /// through it, as ECMP spreads them), or the packets an epoch brings it when fewer. None
    /// without traffic.
    fn busiest_switch_flows(&self) -> Option<(u32, u64)> {
        let t = &self.traffic;
        let data_rate =
            (t.rate_pps - f64::from(t.probes) * t.probe_hz).max(0.0) / f64::from(t.flows.max(1));
        let n = self.topology.len();
        let mut flows = vec![0.0f64; n];
        let mut rate = vec![0.0f64; n];
        let mut counts: Vec<Option<(Vec<u32>, Vec<f64>)>> = vec![None; n];
        for &s in &self.hosts {
            let dsts = self.destinations(s);
            if dsts.is_empty() {
                continue;
            }
            for (count, each) in [(t.flows, data_rate), (t.probes, t.probe_hz)] {
                for i in 0..count as usize {
                    let d = dsts[i % dsts.len()];
                    for end in [s, d] {
                        if counts[end as usize].is_none() {
                            counts[end as usize] = Some(self.shortest_paths(end));
                        }
                    }
                    let (Some((ds, cs)), Some((dd, cd))) =
                        (&counts[s as usize], &counts[d as usize])
                    else {
                        continue;
                    };
                    let (far, all) = (ds[d as usize], cs[d as usize]);
                    for x in 0..n {
                        if ds[x].saturating_add(dd[x]) == far && all > 0.0 {
                            let share = cs[x] * cd[x] / all;
                            flows[x] += share;
                            rate[x] += each * share;
                        }
                    }
                }
            }
        }
        let epoch_s = self.epoch_ms as f64 / 1000.0;
        (0..n as u32)
            .map(|x| {
                let packets = (rate[x as usize] * epoch_s).ceil() as u64;
                (x, (flows[x as usize].round() as u64).min(packets))
            })
            .filter(|&(_, f)| f > 0)
            .max_by_key(|&(_, f)| f)
    }

    /// Hops from `src` to every switch, and the number of shortest paths to each.
    fn shortest_paths(&self, src: u32) -> (Vec<u32>, Vec<f64>) {
        let n = self.topology.len();
        let mut hops = vec![u32::MAX; n];
        let mut paths = vec![0.0f64; n];
        hops[src as usize] = 0;
        paths[src as usize] = 1.0;
        let mut queue = std::collections::VecDeque::from([src]);
        while let Some(x) = queue.pop_front() {
            for &y in self.topology.neighbours(x) {
                if hops[y as usize] == u32::MAX {
                    hops[y as usize] = hops[x as usize] + 1;
                    queue.push_back(y);
                }
                if hops[y as usize] == hops[x as usize] + 1 {
                    paths[y as usize] += paths[x as usize];
                }
            }
        }
        (hops, paths)
    }

    /// The name of node `n`.
    pub fn name(&self, n: u32) -> &str {
        &self.topology.names[n as usize]
    }

    /// How the summary and the report name node `n`: its name, and the label a topology
    /// file gives it when that differs (`6 (Denver)`: the Topology Zoo's ids say little).
    pub fn shown(&self, n: u32) -> String {
        self.topology.display_name(n)
    }

    /// Node `n`'s name as it may appear in a port name or a file name: the name itself when
    /// it holds only letters, digits, `-`, `_` and `.`; else those kept, every other
    /// character made `_`, and `~` and the switch ID appended (no kept name has a `~`, so
    /// every node's is distinct).
    pub fn safe_name(&self, n: u32) -> String {
        let name = self.name(n);
        let ok = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
        if !name.is_empty() && name.len() <= SAFE_NAME_BYTES && name.chars().all(ok) {
            return name.to_owned();
        }
        // Shortened too where it is long (a file name has at most 255 bytes).
        let mut kept = String::new();
        for c in name.chars().map(|c| if ok(c) { c } else { '_' }) {
            if kept.len() + c.len_utf8() > SAFE_NAME_BYTES {
                break;
            }
            kept.push(c);
        }
        format!("{kept}~{}", self.switch_id(n))
    }

    /// The switch ID of node `n`.
    pub fn switch_id(&self, n: u32) -> u32 {
        self.topology.switch_id(n)
    }

    /// The node whose switch ID is `id`.
    pub fn node_of_id(&self, id: u32) -> Option<u32> {
        self.topology.node(id)
    }

    /// The destinations node `n`'s hosts send to.
    pub fn destinations(&self, n: u32) -> Vec<u32> {
        self.traffic
            .pairs
            .iter()
            .filter(|(a, _)| *a == n)
            .map(|(_, b)| *b)
            .collect()
    }

    /// For each node, whether the lab's traffic can reach it: it lies on a shortest path
    /// between a pair of hosts that send to each other (the switches route on shortest
    /// paths, with ECMP over equal ones). The others never receive a packet.
    pub fn carries_traffic(&self) -> Vec<bool> {
        let rows = self.hops_from_senders();
        let mut on = vec![false; self.topology.len()];
        for &(a, b) in &self.traffic.pairs {
            let (da, db) = (&rows[a as usize], &rows[b as usize]);
            let d = u64::from(da[b as usize]);
            for (s, flag) in on.iter_mut().enumerate() {
                *flag |= u64::from(da[s]) + u64::from(db[s]) == d;
            }
        }
        on
    }

    /// Hops from every switch of a sending pair (either end) to every switch; empty rows for
    /// the others (links are both ways, so a row serves either direction).
    fn hops_from_senders(&self) -> Vec<Vec<u32>> {
        let mut rows = vec![Vec::new(); self.topology.len()];
        for &(a, b) in &self.traffic.pairs {
            for x in [a, b] {
                if rows[x as usize].is_empty() {
                    rows[x as usize] = self.topology.bfs(x).0;
                }
            }
        }
        rows
    }
}

/// A topology file's switches on no link: name and label of each.
type LeftOut = Vec<(String, Option<String>)>;

/// The switches a links or file topology puts hosts behind when `topology.hosts` is not
/// given: in each part of the topology (switches joined by paths), its switches with one
/// neighbour, or all of the part's switches when fewer than two have one, so that every part
/// carries traffic (a topology file may come in parts).
fn default_hosts(topo: &Topology) -> Vec<u32> {
    let n = topo.len();
    let mut seen = vec![false; n];
    let mut hosts = Vec::new();
    for s in 0..n as u32 {
        if seen[s as usize] {
            continue;
        }
        let part: Vec<u32> = (0..n as u32)
            .zip(topo.bfs(s).0)
            .filter(|&(_, d)| d != u32::MAX)
            .map(|(v, _)| v)
            .collect();
        for &v in &part {
            seen[v as usize] = true;
        }
        let leaves: Vec<u32> = part
            .iter()
            .copied()
            .filter(|&v| topo.neighbours(v).len() == 1)
            .collect();
        if leaves.len() >= 2 {
            hosts.extend(leaves);
        } else if part.len() >= 2 {
            hosts.extend(part);
        }
    }
    hosts.sort_unstable();
    hosts
}

/// The topology of a `[topology]` table, its default host switches, the switches of a file
/// left out (on no link), and whether its file gave switch IDs of its own (a TOML adjacency
/// file: a number may then name a switch by its ID).
fn topology(t: &RawTopology, base: &Path) -> Result<(Topology, Vec<u32>, LeftOut, bool), LabError> {
    let need = |v: Option<u32>, key: &str, range: std::ops::RangeInclusive<u32>| {
        let v = v.ok_or_else(|| key_err(format!("topology.{key}"), "missing"))?;
        if !range.contains(&v) {
            return Err(key_err(
                format!("topology.{key}"),
                format!("{v}: {} to {}", range.start(), range.end()),
            ));
        }
        Ok(v)
    };
    // A key of another kind is a mistake (a kind changed, its old keys left), not ignored.
    let takes: &[&str] = match t.kind.as_str() {
        "chain" => &["switches"],
        "leaf-spine" => &["spines", "leaves"],
        "fat-tree" => &["k"],
        "file" => &["path"],
        "links" => &["links"],
        _ => &["switches", "spines", "leaves", "k", "path", "links"],
    };
    for (key, given) in [
        ("switches", t.switches.is_some()),
        ("spines", t.spines.is_some()),
        ("leaves", t.leaves.is_some()),
        ("k", t.k.is_some()),
        ("path", t.path.is_some()),
        ("links", t.links.is_some()),
    ] {
        if given && !takes.contains(&key) {
            return Err(key_err(
                format!("topology.{key}"),
                format!(
                    "not a key of a {} topology (it takes {})",
                    t.kind,
                    takes.join(" and ")
                ),
            ));
        }
    }
    match t.kind.as_str() {
        "chain" => {
            let n = need(t.switches, "switches", 2..=64)?;
            let names = (1..=n).map(|i| format!("s{i}")).collect();
            let edges: Vec<(u32, u32)> = (1..n).map(|i| (i - 1, i)).collect();
            Ok((
                Topology::from_edges(&format!("chain:{n}"), names, &edges),
                vec![0, n - 1],
                Vec::new(),
                false,
            ))
        }
        "leaf-spine" => {
            let s = need(t.spines, "spines", 1..=15)?;
            let l = need(t.leaves, "leaves", 2..=15)?;
            let mut names: Vec<String> = (1..=s).map(|i| format!("spine{i}")).collect();
            names.extend((1..=l).map(|i| format!("leaf{i}")));
            let edges: Vec<(u32, u32)> = (0..l)
                .flat_map(|leaf| (0..s).map(move |spine| (s + leaf, spine)))
                .collect();
            Ok((
                Topology::from_edges(&format!("leaf-spine:{s}x{l}"), names, &edges),
                (s..s + l).collect(),
                Vec::new(),
                false,
            ))
        }
        "fat-tree" => {
            let k = need(t.k, "k", 2..=8)?;
            if k % 2 != 0 {
                return Err(key_err("topology.k", format!("{k}: must be even")));
            }
            Ok((
                Topology::fat_tree(k),
                Topology::fat_tree_edges(k),
                Vec::new(),
                false,
            ))
        }
        "file" => {
            let path = t
                .path
                .as_ref()
                .ok_or_else(|| key_err("topology.path", "missing (GraphML, GML or TOML)"))?;
            let full = base.join(path);
            let whole =
                Topology::load(&full).map_err(|e| key_err("topology.path", e.to_string()))?;
            let (topo, left_out) = whole.without_isolated();
            let left_out: LeftOut = left_out
                .iter()
                .map(|&n| {
                    (
                        whole.names[n as usize].clone(),
                        whole.labels[n as usize].clone(),
                    )
                })
                .collect();
            if topo.len() < 2 || topo.len() > 256 {
                let on_no_link = if left_out.is_empty() {
                    String::new()
                } else {
                    format!(" on a link ({} on none)", left_out.len())
                };
                return Err(key_err(
                    "topology.path",
                    format!("{} switches{on_no_link}: a lab runs 2 to 256", topo.len()),
                ));
            }
            let hosts = default_hosts(&topo);
            // Renumbered without the switches on no link, a topology keeps its IDs as
            // given: only the file's own (a TOML adjacency file's) make numbers names.
            Ok((topo, hosts, left_out, whole.has_own_ids()))
        }
        "links" => {
            let links = t
                .links
                .as_ref()
                .ok_or_else(|| key_err("topology.links", "missing (e.g. [[\"a\", \"b\"]])"))?;
            let mut names: Vec<String> = Vec::new();
            let mut edges = Vec::new();
            let mut linked = std::collections::HashSet::new();
            for (i, [a, b]) in links.iter().enumerate() {
                let key = format!("topology.links[{i}]");
                if a == b {
                    return Err(key_err(key, format!("`{a}` linked to itself")));
                }
                let mut node = |n: &String| -> Result<u32, LabError> {
                    if n.is_empty()
                        || !n
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    {
                        return Err(key_err(
                            key.clone(),
                            format!("`{n}`: letters, digits, - and _ only"),
                        ));
                    }
                    Ok(match names.iter().position(|x| x == n) {
                        Some(p) => p as u32,
                        // Refused at the 257th name, not after reading every link.
                        None if names.len() == 256 => {
                            return Err(key_err(
                                "topology.links",
                                "more than 256 switches: a lab runs 2 to 256",
                            ));
                        }
                        None => {
                            names.push(n.clone());
                            (names.len() - 1) as u32
                        }
                    })
                };
                let e = (node(a)?, node(b)?);
                if !linked.insert((e.0.min(e.1), e.0.max(e.1))) {
                    return Err(key_err(key, format!("`{a}` and `{b}` are linked twice")));
                }
                edges.push(e);
            }
            let topo = Topology::from_edges("links", names, &edges);
            let from_first = topo.bfs(0).0;
            if from_first.contains(&u32::MAX) {
                return Err(key_err(
                    "topology.links",
                    "the switches are not all connected",
                ));
            }
            let hosts = default_hosts(&topo);
            Ok((topo, hosts, Vec::new(), false))
        }
        other => Err(key_err(
            "topology.kind",
            format!("`{other}`: chain, leaf-spine, fat-tree, links or file"),
        )),
    }
}

#[cfg(test)]
mod tests;

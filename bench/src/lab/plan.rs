//! What a lab runs, worked out before anything starts: every switch's configuration (a
//! normal `pint-switch` config, tables from `pipeline::fabric`), every generator's
//! arguments, the sink's arguments and topology file, and each flow's route as the switches
//! will choose it. Links are memif pairs: the lower-numbered switch is the server.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pipeline::fabric::{self, host_mac, host_prefix, port_mac};
use pipeline::{Forwarder, PortRole, Tables};
use telemetry::flowradar::FlowKey;
use telemetry::hash::key_hash;

use super::spec::{Idle, Lab};

/// Where the lab's processes meet.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// The run directory (configs, sockets, logs, report).
    pub dir: PathBuf,
    /// The sink's switch-facing address.
    pub sink_listen: std::net::SocketAddr,
    /// The sink's HTTP address.
    pub sink_http: std::net::SocketAddr,
    /// The lcore of each switch's control thread and generators.
    pub main_lcore: u32,
    /// The lcores switches' workers run on: switch `n` on the `n mod len`-th (spread over
    /// the CPUs other than the main one).
    pub worker_lcores: Vec<u32>,
}

/// One switch to start.
#[derive(Debug, Clone)]
pub struct SwitchPlan {
    /// Its node number.
    pub node: u32,
    /// Its name.
    pub name: String,
    /// Its name in file names ([`Lab::safe_name`]).
    pub file_name: String,
    /// Its configuration file.
    pub config: PathBuf,
    /// The configuration's text.
    pub text: String,
    /// Its tables (what the configuration's ports and routes say).
    pub tables: Tables,
}

/// One generator to start (the hosts behind a switch).
#[derive(Debug, Clone)]
pub struct GeneratorPlan {
    /// The switch it hangs off.
    pub node: u32,
    /// pint-gen's arguments.
    pub args: Vec<String>,
}

/// Everything a lab starts.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// The switches, by node.
    pub switches: Vec<SwitchPlan>,
    /// The generators, by host node.
    pub generators: Vec<GeneratorPlan>,
}

/// The ECMP seed of node `n`'s switch (each its own, so that layers do not polarise; 63
/// bits, as TOML integers are signed).
pub fn ecmp_seed(n: u32) -> u64 {
    telemetry::hash::mix64(0x6c61_6200 ^ u64::from(n)) >> 1
}

/// The memif socket of the link between `a` and `b`.
fn link_socket(dir: &Path, a: u32, b: u32) -> PathBuf {
    let (lo, hi) = (a.min(b), a.max(b));
    dir.join(format!("link-{lo}-{hi}.sock"))
}

/// The memif socket of node `n`'s hosts.
pub fn host_socket(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("hosts-{n}.sock"))
}

fn memif(index: usize, server: bool, sock: &Path) -> String {
    format!(
        "net_memif{index},role={},id=0,socket={},socket-abstract=no",
        if server { "server" } else { "client" },
        sock.display()
    )
}

/// The port name of node `n`'s port `p` (0: its hosts).
pub fn port_name(lab: &Lab, n: u32, p: u16) -> String {
    if p == 0 {
        "hosts".into()
    } else {
        let v = lab.topology.neighbours(n)[usize::from(p) - 1];
        format!("to-{}", lab.safe_name(v))
    }
}

pub use dataplane::device_checks::MAX_SOCKET_PATH;

/// Fails, naming the longest, when a memif socket of a lab of `nodes` switches in `dir`
/// would not fit a Unix socket address (DPDK would refuse it, or cut it short into
/// another link's), or when `dir` cannot be written in DPDK device arguments.
pub fn check_socket_paths(dir: &Path, nodes: u32) -> anyhow::Result<()> {
    let n = nodes.max(2);
    let longest = [link_socket(dir, n - 2, n - 1), host_socket(dir, n - 1)]
        .into_iter()
        .max_by_key(|p| p.as_os_str().len())
        .expect("two paths");
    let len = longest.as_os_str().len();
    anyhow::ensure!(
        len <= MAX_SOCKET_PATH,
        "the run directory {} is too long for the lab's memif sockets: {} is {len} bytes, a Unix socket path at most {MAX_SOCKET_PATH}; choose a shorter one with --out",
        dir.display(),
        longest.display()
    );
    // The sockets' paths go into DPDK device arguments (`key=value,...`), which have no
    // quoting.
    let text = dir.to_str().filter(|t| !t.contains([',', '=']));
    anyhow::ensure!(
        text.is_some(),
        "the run directory {} cannot be written in DPDK device arguments (a `,` or `=`, or not UTF-8); choose another with --out",
        dir.display()
    );
    Ok(())
}

impl LabPlan {
    /// Works out the lab's processes; writes nothing.
    pub fn new(lab: &Lab, at: &Endpoints) -> anyhow::Result<LabPlan> {
        check_socket_paths(&at.dir, lab.topology.len() as u32)?;
        let capacity =
            control::config::types::parse_capacity(&lab.capacity).map_err(anyhow::Error::msg)?;
        let mut switches = Vec::new();
        let quiet: Vec<bool> = lab.carries_traffic().iter().map(|&c| !c).collect();
        for n in 0..lab.topology.len() as u32 {
            let tables = fabric::tables(
                &lab.topology,
                n,
                capacity,
                fabric::Mtus::with_shim_room(1500),
                ecmp_seed(n),
            )?;
            let text = switch_config(lab, n, &tables, at, quiet[n as usize]);
            let file_name = lab.safe_name(n);
            switches.push(SwitchPlan {
                node: n,
                name: lab.name(n).to_owned(),
                config: at.dir.join(format!("switch-{file_name}.toml")),
                file_name,
                text,
                tables,
            });
        }
        let generators = lab
            .hosts
            .iter()
            .filter(|&&n| {
                !lab.destinations(n).is_empty() || lab.traffic.pairs.iter().any(|p| p.1 == n)
            })
            .map(|&n| GeneratorPlan {
                node: n,
                args: generator_args(lab, n, at),
            })
            .collect();
        Ok(LabPlan {
            switches,
            generators,
        })
    }

    /// The sink's topology file: links by switch ID, with names and the labels a topology
    /// file gave (so that the sink's page shows `6 (Denver)` as the report does).
    pub fn topology_toml(lab: &Lab) -> String {
        let mut s = format!("name = \"{}\"\nlinks = [", lab.name);
        let mut first = true;
        for a in 0..lab.topology.len() as u32 {
            for &b in lab.topology.neighbours(a) {
                if a < b {
                    if !first {
                        s.push_str(", ");
                    }
                    first = false;
                    let _ = write!(s, "[{}, {}]", lab.switch_id(a), lab.switch_id(b));
                }
            }
        }
        s.push_str("]\n[names]\n");
        for n in 0..lab.topology.len() as u32 {
            let _ = writeln!(s, "{} = {}", lab.switch_id(n), toml_string(lab.name(n)));
        }
        if lab.topology.labels.iter().any(Option::is_some) {
            s.push_str("[labels]\n");
            for (n, label) in lab.topology.labels.iter().enumerate() {
                if let Some(l) = label {
                    let _ = writeln!(s, "{} = {}", lab.switch_id(n as u32), toml_string(l));
                }
            }
        }
        s
    }

    /// Writes every switch's configuration into the run directory.
    pub fn write(&self) -> std::io::Result<()> {
        for s in &self.switches {
            std::fs::write(&s.config, &s.text)?;
        }
        Ok(())
    }

    /// Writes the sink's topology file into `dir`; returns its path.
    pub fn write_topology(lab: &Lab, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join("topology.toml");
        std::fs::write(&path, LabPlan::topology_toml(lab))?;
        Ok(path)
    }
}

/// pint-sink's arguments: the endpoints, the topology file (`topology.toml` in the run
/// directory), the sensitivity, event and flow lines in the run directory, and the lab's
/// own sink flags.
pub fn sink_args(lab: &Lab, at: &Endpoints) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--listen".into(),
        at.sink_listen.to_string(),
        "--http".into(),
        at.sink_http.to_string(),
        "--topology".into(),
        at.dir.join("topology.toml").display().to_string(),
        "--sensitivity".into(),
        lab.sensitivity.clone(),
        "--event-lines".into(),
        at.dir.join("events.jsonl").display().to_string(),
        "--json-lines".into(),
        at.dir.join("flows.jsonl").display().to_string(),
        "--decode-threads".into(),
        "1".into(),
    ];
    // The sink forgets a flow after `--idle-timeout` without news (30 s by default); a lab
    // keeps every flow until it reads the sink's view, whenever that is (`--hold`, or a sink
    // that falls behind on a busy machine), unless its `sink.args` say otherwise.
    let given = |flag: &str| {
        lab.sink_args
            .iter()
            .any(|x| x == flag || x.starts_with(&format!("{flag}=")))
    };
    if !given("--idle-timeout") {
        a.extend(["--idle-timeout".into(), LAB_FLOW_IDLE_TIMEOUT_S.to_string()]);
    }
    a.extend(lab.sink_args.iter().cloned());
    a
}

/// The sink's `--idle-timeout` in a lab, in seconds: a day, longer than any lab runs.
pub const LAB_FLOW_IDLE_TIMEOUT_S: u64 = 86_400;

/// `text` as a TOML string, quoted and escaped whatever it holds.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The longest idle sleep of a switch that no traffic reaches (`idle_sleep_max_us`): a
/// quarter of an epoch (so that it still closes every epoch within it), at least the
/// switch's default, at most 100 ms. Such a switch wakes tens of times a second instead of a
/// thousand, so that labs of many switches, most of them quiet, fit on few cores.
pub fn quiet_idle_sleep_max_us(epoch_ms: u64) -> u64 {
    (epoch_ms * 1000 / 4).clamp(control::config::DEFAULT_IDLE_SLEEP_MAX_US, 100_000)
}

/// Node `n`'s configuration; `quiet`: no traffic reaches it.
fn switch_config(lab: &Lab, n: u32, tables: &Tables, at: &Endpoints, quiet: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by pint-lab for lab `{}`: switch `{}`.\nswitch_id = {}\n",
        lab.name,
        lab.name(n).escape_debug(),
        lab.switch_id(n)
    );
    let _ = writeln!(s, "[eal]\nmain_lcore = {}\n", at.main_lcore);
    let _ = writeln!(
        s,
        "[dataplane]\nidle = \"{}\"\necmp_seed = {}\n",
        match lab.idle {
            Idle::Poll => "poll",
            Idle::Sleep => "sleep",
        },
        tables.ecmp_seed
    );
    if quiet && lab.idle == Idle::Sleep {
        let _ = writeln!(
            s,
            "# No route between the lab's hosts crosses this switch: it sleeps longer when idle.\n\
             idle_sleep_max_us = {}\n",
            quiet_idle_sleep_max_us(lab.epoch_ms)
        );
    }
    let _ = writeln!(s, "[stats]\ninterval_ms = 1000\n");
    for (p, spec) in tables.ports.iter().enumerate() {
        let device = if p == 0 {
            if lab.hosts.contains(&n) {
                memif(0, true, &host_socket(&at.dir, n))
            } else {
                // No hosts: a port that never receives and discards what it is sent.
                format!("net_null{n},no-rx=1")
            }
        } else {
            let v = lab.topology.neighbours(n)[p - 1];
            memif(p, n < v, &link_socket(&at.dir, n, v))
        };
        let _ = writeln!(
            s,
            "[[ports]]\nname = \"{}\"\ndevice = {}\nrole = \"{}\"\nmac = \"{}\"\nmtu = {}\ncapacity = \"{}\"\nrx_descriptors = 256\ntx_descriptors = 256",
            port_name(lab, n, p as u16),
            toml_string(&device),
            match spec.role {
                PortRole::Edge => "edge",
                PortRole::Fabric => "fabric",
            },
            spec.mac,
            spec.mtu,
            lab.capacity,
        );
        if p > 0 {
            let v = lab.topology.neighbours(n)[p - 1];
            if let Some(i) = lab.impair.iter().find(|i| (i.from, i.to) == (n, v)) {
                let mut t = vec![];
                if i.loss > 0.0 {
                    t.push(format!("loss = {}", i.loss));
                }
                if i.delay_us > 0 {
                    t.push(format!("delay_us = {}", i.delay_us));
                }
                if i.jitter_us > 0 {
                    t.push(format!("jitter_us = {}", i.jitter_us));
                }
                if i.reorder > 0.0 {
                    t.push(format!("reorder = {}", i.reorder));
                }
                t.push(format!("from_s = {}", i.from_s));
                if let Some(u) = i.until_s {
                    t.push(format!("until_s = {u}"));
                }
                let _ = writeln!(s, "impair = {{ {} }}", t.join(", "));
            }
        }
        s.push('\n');
    }
    let rx: Vec<String> = (0..tables.ports.len())
        .map(|p| format!("\"{}\"", port_name(lab, n, p as u16)))
        .collect();
    let _ = writeln!(
        s,
        "[[workers]]\nlcore = {}\nrx = [{}]\n",
        at.worker_lcores[n as usize % at.worker_lcores.len().max(1)],
        rx.join(", ")
    );
    for r in &tables.routes {
        let hops: Vec<String> = r
            .next_hops
            .iter()
            .map(|h| {
                format!(
                    "{{ port = \"{}\", mac = \"{}\" }}",
                    port_name(lab, n, h.port),
                    h.mac
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "[[routes]]\nprefix = \"{}/{}\"\nnext_hops = [{}]\n",
            std::net::Ipv4Addr::from(r.addr),
            r.len,
            hops.join(", ")
        );
    }
    s.push_str("[telemetry]\n");
    // The path-length bound covers the longest route (the query file's default, 10, for
    // shorter ones), unless the query file gives its own.
    let _ = writeln!(s, "path_length_bound = {}", lab.longest_route().max(10));
    if let Some(q) = &lab.queries {
        let _ = writeln!(s, "queries = {}", toml_string(&q.display().to_string()));
    }
    let _ = writeln!(
        s,
        "sink = \"{}\"\nepoch_ms = {}\n\n[telemetry.flowradar]\nexpected_flows = {}",
        at.sink_listen, lab.epoch_ms, lab.expected_flows
    );
    s
}

/// How long a generator keeps its link after its traffic, at most, waiting for its switch
/// to stop (the lab's hold comes on top).
pub const GENERATOR_LINGER_S: f64 = 60.0;

/// pint-gen's arguments for the hosts behind node `n`.
fn generator_args(lab: &Lab, n: u32, at: &Endpoints) -> Vec<String> {
    let t = &lab.traffic;
    let dsts = lab.destinations(n);
    let (net, len) = host_prefix(n);
    let mut a: Vec<String> = vec![
        "--port".into(),
        memif(0, false, &host_socket(&at.dir, n)),
        "--mode".into(),
        if dsts.is_empty() { "receive" } else { "both" }.into(),
        "--json".into(),
        "--linger".into(),
        format!("{GENERATOR_LINGER_S}"),
        "--until-idle".into(),
        "2".into(),
        "--idle-sleep-us".into(),
        "100".into(),
        "--src-mac".into(),
        host_mac(n).to_string(),
        "--dst-mac".into(),
        port_mac(n, 0).to_string(),
        // Enough TTL for the longest route (a host's usual 64 where that is enough).
        "--ttl".into(),
        if lab.longest_route() < 64 {
            "64"
        } else {
            "255"
        }
        .into(),
    ];
    if !dsts.is_empty() {
        a.extend([
            "--rate".into(),
            format!("{}pps", t.rate_pps),
            "--duration".into(),
            lab.duration_s.to_string(),
            "--flows".into(),
            t.flows.to_string(),
            "--packet-size".into(),
            t.packet_size.clone(),
            "--tcp-share".into(),
            t.tcp_share.to_string(),
            "--seed".into(),
            lab.switch_id(n).to_string(),
            "--src-net".into(),
            format!("{}/{len}", std::net::Ipv4Addr::from(net)),
        ]);
        if t.probes > 0 {
            a.extend([
                "--probes".into(),
                t.probes.to_string(),
                "--probe-hz".into(),
                t.probe_hz.to_string(),
            ]);
        }
        for d in dsts {
            let (net, len) = host_prefix(d);
            a.push("--dst-net".into());
            a.push(format!("{}/{len}", std::net::Ipv4Addr::from(net)));
        }
    }
    a.extend([
        "--".into(),
        "-l".into(),
        at.main_lcore.to_string(),
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        "--no-shconf".into(),
        "--no-pci".into(),
        "--no-telemetry".into(),
        "--log-level".into(),
        "error".into(),
        "--file-prefix".into(),
        format!("pint-lab-gen-{n}-{}", std::process::id()),
    ]);
    a
}

/// The nodes a flow's packets cross, as the switches choose (the same longest-prefix match
/// and ECMP hash as the pipeline with telemetry on). None when the source or destination is
/// outside the lab's addressing or a switch has no route.
pub fn route(lab: &Lab, fwd: &[Forwarder], key: &FlowKey) -> Option<Vec<u32>> {
    let mut n = fabric::node_of(key.src)?;
    if n as usize >= fwd.len() {
        return None;
    }
    let w0 = (u64::from(key.src) << 32) | u64::from(key.dst);
    let w1 =
        (u64::from(key.protocol) << 32) | (u64::from(key.src_port) << 16) | u64::from(key.dst_port);
    let f = key_hash(w0, w1);
    let mut path = vec![n];
    for _ in 0..=lab.topology.len() {
        let hop = fwd[n as usize].route_hashed(key.dst, f).ok()?;
        if hop.port == 0 {
            return Some(path);
        }
        n = lab.topology.neighbours(n)[usize::from(hop.port) - 1];
        path.push(n);
    }
    None
}

/// Every switch's forwarder, by node.
pub fn forwarders(plan: &LabPlan) -> anyhow::Result<Vec<Forwarder>> {
    plan.switches
        .iter()
        .map(|s| Forwarder::new(&s.tables).map_err(|e| anyhow::anyhow!("{e:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> Lab {
        Lab::parse(
            "[topology]\nkind = \"leaf-spine\"\nspines = 2\nleaves = 3\n[[impair]]\nlink = [\"spine1\", \"leaf3\"]\nloss = 0.05\nfrom_s = 2\n",
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/labs")),
            "t",
        )
        .unwrap()
    }

    fn at() -> Endpoints {
        Endpoints {
            dir: PathBuf::from("/run/lab"),
            sink_listen: "127.0.0.1:7300".parse().unwrap(),
            sink_http: "127.0.0.1:7380".parse().unwrap(),
            main_lcore: 0,
            worker_lcores: vec![1],
        }
    }

    /// A run directory too long for the memif sockets in it is refused before anything
    /// starts, naming the longest socket.
    #[test]
    fn a_run_directory_too_long_for_its_sockets_is_refused() {
        let lab = lab();
        let mut at = at();
        // The lab's longest socket, `/link-3-4.sock`, adds 14 bytes to the directory.
        at.dir = PathBuf::from(format!("/{}", "d".repeat(MAX_SOCKET_PATH - 15)));
        assert!(LabPlan::new(&lab, &at).is_ok());
        at.dir = PathBuf::from(format!("/{}", "d".repeat(MAX_SOCKET_PATH - 14)));
        let Err(e) = LabPlan::new(&lab, &at) else {
            panic!("not refused")
        };
        let e = e.to_string();
        assert!(e.contains("link-3-4.sock is 108 bytes"), "{e}");
    }

    /// A run directory with a `,` or `=` (DPDK's device arguments split on them) is refused
    /// before anything starts.
    #[test]
    fn a_run_directory_that_device_arguments_cannot_hold_is_refused() {
        let lab = lab();
        let mut at = at();
        for dir in ["/tmp/lab,1", "/tmp/a=b"] {
            at.dir = PathBuf::from(dir);
            let Err(e) = LabPlan::new(&lab, &at) else {
                panic!("{dir} not refused")
            };
            assert!(e.to_string().contains("device arguments"), "{e}");
        }
    }

    /// Every lab shipped in `configs/labs` reads, plans, and impairs a link that flows
    /// between its hosts cross (on a shortest path, the routes' kind).
    #[test]
    fn the_shipped_labs_plan_and_impair_links_their_traffic_crosses() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/labs"));
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let lab = Lab::from_file(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            LabPlan::new(&lab, &at()).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let idle = lab.warnings();
            assert!(idle.is_empty(), "{path:?}: {idle:?}");
            seen += 1;
        }
        assert!(seen >= 4, "{seen} labs");
    }

    #[test]
    fn the_sink_keeps_flows_for_the_whole_lab_unless_told_otherwise() {
        let mut lab = lab();
        let a = sink_args(&lab, &at());
        let at_flag = a.iter().position(|x| x == "--idle-timeout").unwrap();
        assert_eq!(a[at_flag + 1], LAB_FLOW_IDLE_TIMEOUT_S.to_string());
        for given in [
            vec!["--idle-timeout".to_owned(), "5".to_owned()],
            vec!["--idle-timeout=5".to_owned()],
        ] {
            lab.sink_args = given.clone();
            let a = sink_args(&lab, &at());
            assert_eq!(
                a.iter().filter(|x| x.starts_with("--idle-timeout")).count(),
                1
            );
            assert!(a.ends_with(&given), "{a:?}");
        }
    }

    #[test]
    fn switches_no_traffic_reaches_sleep_longer() {
        // Hosts at a and c of a - b - c, with d hanging off b: d carries nothing.
        let lab = Lab::parse(
            "[topology]\nkind = \"links\"\nlinks = [[\"a\", \"b\"], [\"b\", \"c\"], [\"b\", \"d\"]]\n\
             hosts = [\"a\", \"c\"]\n[switches]\nepoch_ms = 100\n",
            Path::new("/labs"),
            "t",
        )
        .unwrap();
        let plan = LabPlan::new(&lab, &at()).unwrap();
        let max: Vec<u64> = plan
            .switches
            .iter()
            .map(|s| {
                control::Config::from_toml(&s.text)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", s.name, s.text))
                    .dataplane
                    .idle_sleep_max_us
            })
            .collect();
        let default = control::config::DEFAULT_IDLE_SLEEP_MAX_US;
        assert_eq!(max, [default, default, default, 25_000]);
        assert_eq!(
            [1, 10, 100, 1000, 60_000].map(quiet_idle_sleep_max_us),
            [default, 2500, 25_000, 100_000, 100_000]
        );
    }

    #[test]
    fn every_switch_config_is_a_valid_config_with_the_tables() {
        let lab = lab();
        let plan = LabPlan::new(&lab, &at()).unwrap();
        assert_eq!(plan.switches.len(), 5);
        assert_eq!(plan.generators.len(), 3);
        // Routes of 3 switches: the hosts' usual TTL, the query file's default bound.
        for g in &plan.generators {
            let at = g.args.iter().position(|a| a == "--ttl").unwrap();
            assert_eq!(g.args[at + 1], "64");
        }
        for s in &plan.switches {
            let c = control::Config::from_toml(&s.text)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", s.name, s.text));
            assert_eq!(c.tables(), s.tables, "{}", s.name);
            assert!(c.telemetry.enabled && c.telemetry.sink.is_some());
            assert_eq!(c.telemetry.path_length_bound, Some(10));
            // Fabric ports leave room for the longest shim: hosts' largest packets carry
            // telemetry too.
            assert!(c.shim_room_warnings(14).is_empty(), "{}", s.name);
        }
        // spine1 (node 0) impairs its port towards leaf3 (node 4) only.
        let spine1 = control::Config::from_toml(&plan.switches[0].text).unwrap();
        let impaired: Vec<&str> = spine1
            .ports
            .iter()
            .filter(|p| p.impair.is_some())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(impaired, vec!["to-leaf3"]);
        assert!(spine1.ports[0].device.starts_with("net_null"));
        // A link's two ends share a socket, one server and one client.
        let leaf1 = control::Config::from_toml(&plan.switches[2].text).unwrap();
        let up = &leaf1.ports[1];
        assert_eq!(up.name, "to-spine1");
        assert!(up.device.contains("role=client") && up.device.contains("link-0-2.sock"));
        assert!(spine1.ports[1].device.contains("role=server"));
        assert!(spine1.ports[1].device.contains("link-0-2.sock"));
    }

    /// Switch names as topology files give them (city names, any characters): port and file
    /// names keep what they can and stay distinct, and every configuration is valid, also in a
    /// run directory whose path needs quoting in TOML.
    #[test]
    fn any_switch_name_gives_valid_configs() {
        let dir = crate::scratch::Scratch::new("lab-names").unwrap();
        let long = "n".repeat(300);
        let nodes = [
            "New York",
            "São Paulo",
            "a:b",
            "a_b",
            "x/y &quot;q&quot;",
            &long,
        ];
        let mut g = String::from(
            "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\"><graph edgedefault=\"undirected\">",
        );
        for n in nodes {
            g += &format!("<node id=\"{n}\"/>");
        }
        for w in nodes.windows(2) {
            g += &format!("<edge source=\"{}\" target=\"{}\"/>", w[0], w[1]);
        }
        g += "</graph></graphml>";
        std::fs::write(dir.path("odd.graphml"), g).unwrap();
        let lab = Lab::parse(
            "[topology]\nkind = \"file\"\npath = \"odd.graphml\"\n[[impair]]\nlink = [\"a:b\", \"a_b\"]\nloss = 0.1\n",
            dir.dir(),
            "t",
        )
        .unwrap();
        let mut at = at();
        at.dir = PathBuf::from("/run/my \"lab\" dir");
        let plan = LabPlan::new(&lab, &at).unwrap();
        let files: Vec<String> = plan
            .switches
            .iter()
            .map(|s| s.config.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            files,
            [
                "switch-New_York~1.toml",
                "switch-São_Paulo~2.toml",
                "switch-a_b~3.toml",
                "switch-a_b.toml",
                "switch-x_y__q_~5.toml",
                &format!("switch-{}~6.toml", "n".repeat(100)),
            ]
        );
        for s in &plan.switches {
            let c = control::Config::from_toml(&s.text)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", s.name, s.text));
            assert_eq!(c.tables(), s.tables, "{}", s.name);
            assert!(c.ports[1].device.contains("/run/my \"lab\" dir/link-"));
        }
        let ab = control::Config::from_toml(&plan.switches[2].text).unwrap();
        let names: Vec<&str> = ab.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["hosts", "to-São_Paulo~2", "to-a_b"]);
        assert!(ab.ports[2].impair.is_some());
        let topology =
            telemetry::topology::Topology::parse_toml("t", &LabPlan::topology_toml(&lab)).unwrap();
        assert_eq!(topology.names, lab.topology.names);
    }

    #[test]
    fn routes_follow_the_tables_and_spread_over_the_spines() {
        let lab = lab();
        let plan = LabPlan::new(&lab, &at()).unwrap();
        let fwd = forwarders(&plan).unwrap();
        let mut via = [0u32; 2];
        for sport in 0..200u16 {
            let key = FlowKey {
                src: fabric::host_addr(2, 1),
                dst: fabric::host_addr(4, 7),
                src_port: 1000 + sport,
                dst_port: 9000,
                protocol: 17,
            };
            let r = route(&lab, &fwd, &key).unwrap();
            assert_eq!(r.len(), 3, "{r:?}");
            assert_eq!((r[0], r[2]), (2, 4));
            via[r[1] as usize] += 1;
        }
        assert!(via[0] > 50 && via[1] > 50, "{via:?}");
        let local = FlowKey {
            src: fabric::host_addr(2, 1),
            dst: fabric::host_addr(2, 9),
            src_port: 1,
            dst_port: 2,
            protocol: 17,
        };
        assert_eq!(route(&lab, &fwd, &local), Some(vec![2]));
    }
}

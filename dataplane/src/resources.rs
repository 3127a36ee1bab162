//! Start-up sizing and the EAL command line, worked out from the configuration before EAL
//! starts: CPU checks, mbuf counts (including captures that virtual devices hold in memory),
//! memory, and the generated EAL arguments.

use std::path::Path;

use control::Config;

use crate::dpdk::BURST_SIZE;
use crate::replay::{CaptureScan, scan};

/// The largest mbuf data room (the pool's element size is a u16, headroom included).
pub const MAX_DATA_ROOM: usize = u16::MAX as usize - 256;

/// Mbuf data room: enough for a 9600-byte MTU frame would need chaining, so the room
/// follows the largest configured MTU (plus Ethernet, two VLAN tags and the telemetry shim),
/// and the longest frame of a capture replayed from memory (`infinite_rx` keeps each frame
/// in one mbuf).
pub fn data_room(config: &Config, captures: &CaptureScan) -> u16 {
    let max_mtu = config.ports.iter().map(|p| p.mtu).max().unwrap_or(1500);
    let need = (usize::from(max_mtu) + 14 + 8 + 64).max(captures.largest);
    need.clamp(2048, MAX_DATA_ROOM) as u16
}

/// What a device argument string says about a pcap capture it will hold in memory (the
/// driver's `infinite_rx`: any number above 0).
fn infinite_rx_captures(device: &str) -> Vec<String> {
    let mut parts = device.split(',');
    let driver = parts.next().unwrap_or("");
    if !driver.starts_with("net_pcap") {
        return Vec::new();
    }
    let kv: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
    let on = |v: &str| v.trim().parse::<i64>().is_ok_and(|n| n > 0);
    if !kv.iter().any(|(k, v)| *k == "infinite_rx" && on(v)) {
        return Vec::new();
    }
    kv.iter()
        .filter(|(k, _)| *k == "rx_pcap")
        .map(|(_, v)| (*v).to_owned())
        .collect()
}

/// What the capture files of a configuration hold, as far as start-up needs to know.
#[derive(Debug, Clone, Default)]
pub struct Captures {
    /// What `infinite_rx` devices replay from memory (all their files together).
    pub held: CaptureScan,
    /// What the operator should hear before the switch starts (captures whose frames are
    /// not Ethernet, were cut by a snap length, or that libpcap stops reading before their
    /// end), each naming its config key.
    pub warnings: Vec<String>,
}

/// Checks that capture files named by `rx_pcap=` exist and that libpcap (which the driver
/// reads them with) can read them, so a typo or a bad file gets a message that names the key
/// rather than a driver error; that the captures `infinite_rx` devices replay from memory fit
/// an mbuf a frame; and notes captures whose frames are not Ethernet or were cut by a snap
/// length, and those libpcap stops reading before their end.
pub fn check_captures(config: &Config) -> anyhow::Result<Captures> {
    let mut out = Captures::default();
    for (i, p) in config.ports.iter().enumerate() {
        let infinite = infinite_rx_captures(&p.device);
        for part in p.device.split(',').skip(1) {
            if let Some(("rx_pcap", file)) = part.split_once('=') {
                let key = format!("config key `ports[{i}].device`: rx_pcap file `{file}`");
                crate::device_checks::readable_file(file)
                    .map_err(|e| anyhow::anyhow!("{key} {e}"))?;
                let cannot = |e: anyhow::Error| anyhow::anyhow!("{key} cannot be read: {e}");
                let scan = scan(Path::new(file)).map_err(cannot)?;
                if let Some(link) = &scan.foreign_link {
                    out.warnings.push(format!(
                        "{key} holds frames of link type {link}, not Ethernet: the switch reads them as Ethernet frames and drops most of them (counted)"
                    ));
                }
                if scan.cut_frames > 0 {
                    out.warnings.push(format!(
                        "{key}: {} of its {} frames were captured shorter than they were on the wire (a snap length): the switch drops those whose IPv4 packet was cut as `truncated`",
                        scan.cut_frames, scan.frames
                    ));
                }
                let infinite = infinite.iter().any(|f| f == file);
                if let Some(why) = &scan.stopped {
                    out.warnings.push(if infinite {
                        format!(
                            "{key}: libpcap stops reading it after {} frames ({why}): only those are replayed",
                            scan.frames
                        )
                    } else {
                        format!(
                            "{key}: libpcap stops reading it after {} frames ({why}); the device reads on past the fault, and what it finds there depends on it (later frames, or bytes taken for frames)",
                            scan.frames
                        )
                    });
                }
                if infinite {
                    if scan.largest > MAX_DATA_ROOM {
                        anyhow::bail!(
                            "{key} holds a frame of {} bytes; with infinite_rx each frame must fit one mbuf, at most {MAX_DATA_ROOM} bytes",
                            scan.largest
                        );
                    }
                    if scan.frames == 0 {
                        // DPDK's pcap driver takes a burst of mbufs from the pool on every
                        // poll of such a port and gives none back: the pool runs dry.
                        let why = scan
                            .stopped
                            .as_ref()
                            .map_or(String::new(), |w| format!(" libpcap can read ({w})"));
                        anyhow::bail!(
                            "{key} holds no frames{why}: with infinite_rx there is nothing to replay (drop infinite_rx=1 to run with an empty capture)"
                        );
                    }
                    out.held.frames += scan.frames;
                    out.held.largest = out.held.largest.max(scan.largest);
                }
            }
        }
    }
    Ok(out)
}

/// What a preflight is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preflighting {
    /// A start: everything it needs must be there. `own_eal_args`: EAL arguments given
    /// on the command line, which say for themselves whether hugepages are used.
    Start {
        /// Whether the command line gave its own EAL arguments.
        own_eal_args: bool,
    },
    /// `--check-config`: the configuration is checked; what this user on this machine
    /// lacks (privileges, free hugepages) is a warning.
    Check,
}

/// Refuses outputs that would overwrite the switch's inputs or each other: a summary or a
/// `tx_pcap` capture written over the config file (`config_file`), its routes or query
/// file, or a capture it replays (`rx_pcap`), or two outputs in one file. Devices such as
/// /dev/null take any number.
pub fn outputs_apart(
    config: &Config,
    config_file: Option<&Path>,
    summary: Option<&Path>,
) -> anyhow::Result<()> {
    use crate::device_checks::file_identity;
    let device_files = |key: &'static str| {
        config.ports.iter().enumerate().flat_map(move |(i, p)| {
            crate::dpdk::port::devarg_pairs(&p.device)
                .filter(move |(k, _)| *k == key)
                .map(move |(_, v)| {
                    (
                        format!("config key `ports[{i}].device`: {key} file `{v}`"),
                        std::path::PathBuf::from(v),
                    )
                })
        })
    };
    let named = |what: String, p: Option<&Path>| p.map(|p| (what, p.to_path_buf()));
    let inputs: Vec<(String, std::path::PathBuf)> = [
        named("the config file".into(), config_file),
        named(
            "config key `routes_file`".into(),
            config.routes_file.as_deref(),
        ),
        named(
            "config key `telemetry.queries`".into(),
            config.telemetry.queries.as_deref(),
        ),
    ]
    .into_iter()
    .flatten()
    .chain(device_files("rx_pcap"))
    .collect();
    let outputs = named(
        format!(
            "--summary-json {}",
            summary.map_or(String::new(), |p| p.display().to_string())
        ),
        summary,
    )
    .into_iter()
    .chain(device_files("tx_pcap"));
    let mut written: Vec<(String, _)> = Vec::new();
    for (what, path) in outputs {
        let Some(id) = file_identity(&path) else {
            continue;
        };
        // Inputs that exist (one that does not is said by the checks of inputs).
        let input = inputs.iter().find(|(_, p)| {
            matches!(file_identity(p), Some(i @ crate::device_checks::FileIdentity::Inode(..)) if i == id)
        });
        if let Some((other, _)) = input {
            anyhow::bail!("{what} is {other}: writing it would destroy it");
        }
        if let Some((other, _)) = written.iter().find(|(_, w)| *w == id) {
            anyhow::bail!("{what} is {other} too: two writers would garble it");
        }
        written.push((what, id));
    }
    Ok(())
}

/// Mbufs the pool needs: every rx and tx descriptor, per-worker caches and bursts, packets
/// held by capture-replaying devices and by impaired ports' delay lines, and headroom. Rounded to 2^n - 1 (DPDK's best size).
pub fn auto_mbufs(config: &Config, held_by_captures: u64) -> u32 {
    let workers = config.workers.len() as u64;
    let ports = config.ports.len() as u64;
    let mut n: u64 = 0;
    for p in &config.ports {
        n += u64::from(p.rx_queues) * u64::from(p.rx_descriptors);
        n += workers * u64::from(p.tx_descriptors);
    }
    n += workers
        * (u64::from(config.dataplane.mbuf_cache) * 3 / 2 + BURST_SIZE as u64 * (ports + 2));
    n += held_by_captures + 4096;
    n += delay_line_mbufs(config);
    let rounded = (n + 1).next_power_of_two() - 1;
    rounded.min(u64::from(u32::MAX)) as u32
}

/// The fewest mbufs that let the workers run at all: packets held by capture-replaying
/// devices, plus what per-lcore caches can keep and a few bursts per worker.
pub fn minimum_mbufs(config: &Config, held_by_captures: u64) -> u64 {
    let workers = config.workers.len() as u64 + 1;
    held_by_captures
        + workers * (u64::from(config.dataplane.mbuf_cache) * 3 / 2 + 2 * BURST_SIZE as u64)
        + BURST_SIZE as u64
}

/// What impaired ports' delay lines may hold together: each worker's line up to its port's
/// `impair.limit`.
fn delay_line_mbufs(config: &Config) -> u64 {
    config.workers.len() as u64
        * config
            .ports
            .iter()
            .filter_map(|p| p.impair.as_ref())
            .map(|i| u64::from(i.limit))
            .sum::<u64>()
}

/// A warning when a configured pool leaves less room than impaired ports' delay lines may
/// take (each worker's line holds up to its `limit`): a full line would leave the ports'
/// receive without mbufs. The automatic size counts the lines in.
pub fn delay_line_warning(config: &Config, held_by_captures: u64) -> Option<String> {
    let mbufs = u64::from(config.dataplane.mbufs?);
    let lines = delay_line_mbufs(config);
    let free = mbufs.saturating_sub(minimum_mbufs(config, held_by_captures));
    (lines > free).then(|| {
        format!(
            "config key `dataplane.mbufs`: {mbufs} mbufs leave {free} for the impaired ports' delay lines, which may hold {lines} (each worker's up to its port's `impair.limit`): full lines would leave the ports' receive without mbufs (rx_nombuf); raise mbufs, lower the limits, or leave mbufs out to size it with them"
        )
    })
}

/// EAL memory in MiB for `mbufs` mbufs of `data_room` bytes, plus a base for DPDK itself.
/// Without hugepages the pool's memory comes in 4 KiB pages that no mbuf straddles, so
/// each mbuf takes whole pages.
pub fn auto_memory_mb(mbufs: u32, data_room: u16, hugepages: bool) -> u32 {
    let object = u64::from(data_room) + 128 + 128 + 64;
    let per_mbuf = if hugepages {
        object
    } else {
        object.div_ceil(4096) * 4096
    };
    let mb = (u64::from(mbufs) * per_mbuf) / (1 << 20);
    let total = 256 + mb * 5 / 4;
    (total.div_ceil(64) * 64) as u32
}

/// What the switch takes of the machine, worked out and checked from its config before
/// DPDK starts: `--check-config` runs the same checks as a start, so a config it passes does
/// not fail on them, except what it says as warnings (capabilities and free hugepages, which
/// only the user and the machine of the start decide).
#[derive(Debug)]
pub struct Preflight {
    /// The control thread's lcore.
    pub main_lcore: u32,
    /// Mbufs in the pool.
    pub mbufs: u32,
    /// Each mbuf's data room, bytes.
    pub room: u16,
    /// EAL memory, MiB.
    pub memory_mb: u32,
}

impl Preflight {
    /// What a start works out where `config` leaves it out, as TOML comments naming the
    /// keys that would fix each (`--check-config` prints them after the config).
    pub fn worked_out(&self, config: &Config) -> String {
        let mut lines = Vec::new();
        // With eal.args, the EAL takes what they say.
        if config.eal.main_lcore.is_none() && config.eal.args.is_none() {
            lines.push(format!("# [eal] main_lcore = {}", self.main_lcore));
        }
        if config.eal.memory_mb.is_none() && config.eal.args.is_none() {
            lines.push(format!("# [eal] memory_mb = {}", self.memory_mb));
        }
        if config.dataplane.mbufs.is_none() {
            lines.push(format!("# [dataplane] mbufs = {}", self.mbufs));
        }
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\n# Worked out for this machine and these captures (left out above; to fix one, set it in its table):\n{}\n",
            lines.join("\n")
        )
    }
}

/// Checks `config` against this machine (capture files, lcores, mbufs for the captures held
/// in memory) and sizes the pool and EAL memory. Warnings (the captures', the config's)
/// are printed first: they often explain an error that follows.
pub fn preflight(config: &Config, mode: Preflighting) -> anyhow::Result<Preflight> {
    // What this user on this machine lacks: fatal for a start, said by a check.
    let lacking = |what: String| -> anyhow::Result<()> {
        match mode {
            Preflighting::Start { .. } => Err(anyhow::anyhow!("{what}")),
            Preflighting::Check => {
                control::say_err!(
                    "pint-switch: warning: {what} (a start as this user on this machine would fail)"
                );
                Ok(())
            }
        }
    };
    for (i, p) in config.ports.iter().enumerate() {
        let key = format!("config key `ports[{i}].device` (port `{}`)", p.name);
        crate::device_checks::check_device(&p.device).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
        if let Some(why) = crate::device_checks::privileges_missing(&p.device) {
            lacking(format!("{key}: {why}"))?;
        }
    }
    // EAL arguments of the operator's own say for themselves whether hugepages are used.
    let own_eal_args = matches!(mode, Preflighting::Start { own_eal_args: true });
    if config.eal.hugepages
        && config.eal.args.is_none()
        && !own_eal_args
        && let Some(why) = crate::device_checks::hugepages_missing()
    {
        lacking(format!("config key `eal.hugepages`: {why}"))?;
    }
    let Captures {
        held: captures,
        warnings,
    } = check_captures(config)?;
    for w in warnings.iter().chain(&config.warnings()) {
        control::say_err!("pint-switch: warning: {w}");
    }
    let main_lcore = check_lcores(config, &available_cpus())?;
    let held = captures.frames;
    let auto_mbufs = auto_mbufs(config, held);
    let mbufs = config.dataplane.mbufs.unwrap_or(auto_mbufs);
    let minimum = minimum_mbufs(config, held);
    if u64::from(mbufs) < minimum {
        let held_by = if held > 0 {
            format!("infinite_rx captures keep {held} packets in memory and ")
        } else {
            String::new()
        };
        let need = if held > 0 {
            format!(
                "{} more to run (at least {minimum} in all; ",
                minimum - held
            )
        } else {
            format!("{minimum} to run (")
        };
        anyhow::bail!(
            "config key `dataplane.mbufs`: {mbufs} mbufs are too few: {held_by}the workers need {need}{auto_mbufs} recommended; leave the key out to size it automatically)"
        );
    }
    if let Some(w) = delay_line_warning(config, held) {
        control::say_err!("pint-switch: warning: {w}");
    }
    let room = data_room(config, &captures);
    let memory_mb = config
        .eal
        .memory_mb
        .unwrap_or_else(|| auto_memory_mb(mbufs, room, config.eal.hugepages));
    Ok(Preflight {
        main_lcore,
        mbufs,
        room,
        memory_mb,
    })
}

/// The CPUs this process may run on.
pub fn available_cpus() -> Vec<u32> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id as u32)
        .collect()
}

/// Formats a CPU list compactly (`0-3,6`).
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Checks every worker's lcore exists here, and picks the control thread's lcore: the
/// configured one, or the lowest CPU no worker uses (sharing the lowest CPU if all are used).
pub fn check_lcores(config: &Config, cpus: &[u32]) -> anyhow::Result<u32> {
    for (i, w) in config.workers.iter().enumerate() {
        if !cpus.contains(&w.lcore) {
            anyhow::bail!(
                "config key `workers[{i}].lcore`: lcore {} does not exist or is not available to this process (available: {})",
                w.lcore,
                cpu_list(cpus)
            );
        }
    }
    if let Some(m) = config.eal.main_lcore {
        if !cpus.contains(&m) {
            anyhow::bail!(
                "config key `eal.main_lcore`: lcore {m} is not available (available: {})",
                cpu_list(cpus)
            );
        }
        return Ok(m);
    }
    let free = cpus
        .iter()
        .copied()
        .find(|c| !config.workers.iter().any(|w| w.lcore == *c));
    Ok(free.or_else(|| cpus.first().copied()).unwrap_or(0))
}

/// The generated EAL arguments (used unless `eal.args` or the command line gives them).
pub fn eal_args(config: &Config, main_lcore: u32, memory_mb: u32, pid: u32) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-l".into(),
        main_lcore.to_string(),
        "--file-prefix".into(),
        format!("pint-switch-{}-{pid}", config.switch_id),
        "--log-level".into(),
        "notice".into(),
        "--no-telemetry".into(),
    ];
    // --in-memory (hugepages) and --no-shconf (no hugepages) leave no files behind.
    if config.eal.hugepages {
        a.extend([
            "--in-memory".into(),
            "--socket-mem".into(),
            memory_mb.to_string(),
        ]);
    } else {
        a.extend([
            "--no-shconf".into(),
            "--no-huge".into(),
            "-m".into(),
            memory_mb.to_string(),
        ]);
    }
    let pci: Vec<&str> = config
        .ports
        .iter()
        .filter(|p| p.is_pci())
        .map(|p| p.device.as_str())
        .collect();
    if pci.is_empty() {
        a.push("--no-pci".into());
    } else {
        for dev in pci {
            a.extend(["-a".into(), dev.to_owned()]);
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        Config::from_toml(&format!(
            r#"switch_id = 3
{extra}
[[ports]]
name = "a"
device = "net_null0"
role = "edge"
mac = "02:00:00:00:00:01"
[[ports]]
name = "b"
device = "0000:01:00.0,rxq_cqe_comp_en=0"
role = "fabric"
mac = "02:00:00:00:00:02"
mtu = 9000
[[workers]]
lcore = 1
rx = ["a", "b"]
"#
        ))
        .unwrap()
    }

    #[test]
    fn generated_eal_arguments() {
        let c = config("");
        let a = eal_args(&c, 0, 512, 42);
        let s = a.join(" ");
        assert!(s.starts_with("-l 0 --file-prefix pint-switch-3-42"), "{s}");
        assert!(s.contains("--no-shconf --no-huge -m 512"), "{s}");
        assert!(s.contains("-a 0000:01:00.0,rxq_cqe_comp_en=0"), "{s}");
        assert!(!s.contains("--no-pci"));
        let h = config("[eal]\nhugepages = true\n");
        assert!(
            eal_args(&h, 0, 1024, 1)
                .join(" ")
                .contains("--socket-mem 1024")
        );
    }

    /// A configured pool smaller than the delay lines may fill is warned about; the
    /// automatic size, and a pool with room for them, are not.
    #[test]
    fn a_pool_the_delay_lines_could_fill_is_warned_about() {
        let impaired = |mbufs: &str| {
            config(&format!("[dataplane]\n{mbufs}\n"))
                .to_toml()
                .replacen(
                    "name = \"a\"",
                    "name = \"a\"\nimpair = { delay_us = 1000, limit = 100000 }",
                    1,
                )
        };
        let c = Config::from_toml(&impaired("mbufs = 4096")).unwrap();
        let w = delay_line_warning(&c, 0).expect("4096 mbufs cannot hold 100000 delayed");
        assert!(
            w.starts_with("config key `dataplane.mbufs`: 4096 mbufs leave "),
            "{w}"
        );
        assert!(w.contains("which may hold 100000"), "{w}");
        let roomy = Config::from_toml(&impaired("mbufs = 200000")).unwrap();
        assert_eq!(delay_line_warning(&roomy, 0), None);
        let auto = Config::from_toml(&impaired("")).unwrap();
        assert_eq!(delay_line_warning(&auto, 0), None);
        // Captures held in memory take their share first.
        assert!(delay_line_warning(&roomy, 150_000).is_some());
    }

    #[test]
    fn lcores_are_checked() {
        let c = config("");
        assert_eq!(check_lcores(&c, &[0, 1]).unwrap(), 0);
        assert_eq!(check_lcores(&c, &[1, 2]).unwrap(), 2);
        assert_eq!(check_lcores(&c, &[1]).unwrap(), 1);
        let e = check_lcores(&c, &[0]).unwrap_err().to_string();
        assert!(
            e.contains("workers[0].lcore") && e.contains("available: 0"),
            "{e}"
        );
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn sizing() {
        let c = config("");
        let none = CaptureScan::default();
        assert!(data_room(&c, &none) >= 9000 + 14);
        let jumbo = CaptureScan {
            frames: 1,
            largest: 30_000,
            ..CaptureScan::default()
        };
        assert_eq!(data_room(&c, &jumbo), 30_000);
        let huge = CaptureScan {
            frames: 1,
            largest: 70_000,
            ..CaptureScan::default()
        };
        assert_eq!(usize::from(data_room(&c, &huge)), MAX_DATA_ROOM);
        let n = auto_mbufs(&c, 10_000);
        assert!(n >= 2 * 1024 + 2 * 1024 + 10_000 + 4096, "{n}");
        assert!((n + 1).is_power_of_two());
        assert!(auto_memory_mb(n, 2048, true) >= 256);
        // 262143 mbufs of 2048 bytes: about 600 MiB in hugepages, a 4 KiB page each without.
        assert!(auto_memory_mb(262_143, 2048, true) <= 1024);
        assert!(auto_memory_mb(262_143, 2048, false) >= 1024 + 256);
        assert_eq!(
            infinite_rx_captures("net_pcap0,rx_pcap=a.pcap,infinite_rx=1,tx_pcap=b.pcap"),
            vec!["a.pcap"]
        );
        assert!(infinite_rx_captures("net_pcap0,rx_pcap=a.pcap").is_empty());
        // The driver holds the capture for any number above 0.
        for on in ["01", "2"] {
            assert_eq!(
                infinite_rx_captures(&format!("net_pcap0,rx_pcap=a.pcap,infinite_rx={on}")),
                vec!["a.pcap"]
            );
        }
        assert!(infinite_rx_captures("net_pcap0,rx_pcap=a.pcap,infinite_rx=0").is_empty());
        let missing = Config::from_toml(
            "switch_id = 1\n[[ports]]\nname = \"a\"\ndevice = \"net_pcap0,rx_pcap=/nonexistent/x.pcap\"\nrole = \"edge\"\nmac = \"02:00:00:00:00:01\"\n[[workers]]\nlcore = 0\nrx = [\"a\"]\n",
        )
        .unwrap();
        let e = check_captures(&missing).unwrap_err().to_string();
        assert!(
            e.contains("ports[0].device") && e.contains("does not exist"),
            "{e}"
        );
    }

    /// An output over an input, or two outputs in one file, is refused before anything is
    /// written; a device takes any number.
    #[test]
    fn outputs_that_would_overwrite_inputs_are_refused() {
        let dir = crate::temp_dir::private_temp_dir("pint-outputs").unwrap();
        let input = dir.join("in.pcap");
        std::fs::write(&input, b"").unwrap();
        let two = |a: &str, b: &str| {
            Config::from_toml(&format!(
                "switch_id = 1\n[[ports]]\nname = \"a\"\ndevice = \"net_pcap0,{a}\"\nrole = \"edge\"\nmac = \"02:00:00:00:00:01\"\n[[ports]]\nname = \"b\"\ndevice = \"net_pcap1,{b}\"\nrole = \"edge\"\nmac = \"02:00:00:00:00:02\"\n[[workers]]\nlcore = 0\nrx = [\"a\"]\n"
            ))
            .unwrap()
        };
        let (i, o) = (input.display(), dir.join("out.pcap"));
        let o = o.display();
        let apart = |c: &Config, file: Option<&Path>, summary: Option<&Path>| {
            outputs_apart(c, file, summary).map_err(|e| e.to_string())
        };
        let over = two(
            &format!("rx_pcap={i}"),
            &format!("tx_pcap={}/./in.pcap", dir.display()),
        );
        let e = apart(&over, None, None).unwrap_err();
        assert!(
            e.contains("ports[1].device`: tx_pcap file")
                && e.contains("is config key `ports[0].device`: rx_pcap file"),
            "{e}"
        );
        let twice = two(&format!("tx_pcap={o}"), &format!("tx_pcap={o}"));
        let e = apart(&twice, None, None).unwrap_err();
        assert!(e.contains("too: two writers"), "{e}");
        let fine = two(&format!("rx_pcap={i},tx_pcap={o}"), "tx_pcap=/dev/null");
        assert_eq!(apart(&fine, None, None), Ok(()));
        let e = apart(&fine, Some(&input), Some(&input)).unwrap_err();
        assert!(e.contains("is the config file"), "{e}");
        let nulls = two("tx_pcap=/dev/null", "tx_pcap=/dev/null");
        assert_eq!(apart(&nulls, None, Some(Path::new("/dev/null"))), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

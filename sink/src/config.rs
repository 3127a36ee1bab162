//! The sink's settings, checked before anything starts: a bad value names its flag and why.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the sink listens for switches by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7300";
/// Where the HTTP API (and `/metrics`) listens by default.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7380";

/// Everything the sink is told.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Where switches connect (TCP).
    pub listen: SocketAddr,
    /// The HTTP API and `/metrics` (None: off).
    pub http: Option<SocketAddr>,
    /// Topology file for path candidates (GraphML, GML or TOML adjacency); None: the switch IDs
    /// the sink has heard from.
    pub topology: Option<PathBuf>,
    /// Decode threads (flows are sharded over them by flow hash).
    pub decode_threads: usize,
    /// Most flows tracked at once (over all threads).
    pub max_flows: usize,
    /// A flow not heard of for this long is exported (IPFIX, JSON lines) and forgotten.
    pub idle_timeout: Duration,
    /// How long an epoch waits for flowsets from every connected switch before it is
    /// decoded with the ones that came.
    pub epoch_grace: Duration,
    /// IPFIX collector (UDP).
    pub ipfix: Option<SocketAddr>,
    /// A long-lived flow's counters are exported this often.
    pub active_timeout: Duration,
    /// IPFIX templates are sent again this often.
    pub template_interval: Duration,
    /// Most IPFIX messages sent a second (0: as fast as the socket takes them): a burst of
    /// records (a sweep, the stop) otherwise overflows a collector's receive buffer.
    pub ipfix_rate: u32,
    /// Largest IPFIX message, bytes: the path to the collector's MTU less its IP and UDP
    /// headers (RFC 7011 wants messages that need no fragments).
    pub ipfix_message_bytes: usize,
    /// The same records as JSON lines.
    pub json_lines: Option<PathBuf>,
    /// Largest flowset (in memory) a switch may declare.
    pub max_flowset_bytes: usize,
    /// Most switch connections open at once.
    pub max_connections: usize,
    /// Most switch IDs kept (their counters and plans in force, for the sink's life).
    pub max_switches: usize,
    /// Most memory the flowsets received and not yet decoded may take together (a
    /// flowset beyond it is dropped and counted, before it takes any).
    pub flowset_memory_bytes: usize,
    /// Batches of digests waiting per decode thread before new ones are dropped (counted).
    pub queue_batches: usize,
    /// How eager online detection is.
    pub sensitivity: crate::detect::Sensitivity,
    /// Detected events as JSON lines.
    pub event_lines: Option<PathBuf>,
    /// Asks the JSON-lines files to be opened again at their paths (log rotation; the
    /// command line's SIGHUP).
    pub reopen: crate::lines::Reopen,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            listen: DEFAULT_LISTEN.parse().expect("address"),
            http: Some(DEFAULT_HTTP.parse().expect("address")),
            topology: None,
            decode_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_DECODE_THREADS),
            max_flows: 1_000_000,
            idle_timeout: Duration::from_secs(30),
            epoch_grace: Duration::from_millis(100),
            ipfix: None,
            active_timeout: Duration::from_secs(60),
            template_interval: Duration::from_secs(30),
            ipfix_rate: crate::ipfix::DEFAULT_RATE,
            ipfix_message_bytes: crate::ipfix::MAX_MESSAGE,
            json_lines: None,
            max_flowset_bytes: 256 << 20,
            max_connections: 1024,
            max_switches: crate::registry::DEFAULT_MAX_SWITCHES,
            flowset_memory_bytes: 1 << 30,
            queue_batches: 1024,
            sensitivity: crate::detect::Sensitivity::MEDIUM,
            event_lines: None,
            reopen: crate::lines::Reopen::default(),
        }
    }
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {reason}")]
pub struct ConfigError {
    /// The flag.
    pub flag: &'static str,
    /// Why.
    pub reason: String,
}

/// Most decode threads.
pub const MAX_DECODE_THREADS: usize = 256;

/// Most digest batches queued per decode thread.
pub const MAX_QUEUE_BATCHES: usize = 1 << 16;

impl SinkConfig {
    /// Checks every value; the first bad one is the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |flag, reason: &str| {
            Err(ConfigError {
                flag,
                reason: reason.to_owned(),
            })
        };
        if !(1..=MAX_DECODE_THREADS).contains(&self.decode_threads) {
            return bad("decode-threads", "must be 1 to 256");
        }
        if self.max_flows < self.decode_threads {
            return bad("max-flows", "must be at least one per decode thread");
        }
        if self.idle_timeout.is_zero() {
            return bad("idle-timeout", "must be above zero");
        }
        if self.active_timeout.is_zero() {
            return bad("active-timeout", "must be above zero");
        }
        if self.template_interval.is_zero() {
            return bad("template-interval", "must be above zero");
        }
        if !(crate::ipfix::MIN_MAX_MESSAGE..=crate::ipfix::MAX_MAX_MESSAGE)
            .contains(&self.ipfix_message_bytes)
        {
            return bad(
                "ipfix-message-bytes",
                &format!(
                    "must be {} to {} (a UDP datagram)",
                    crate::ipfix::MIN_MAX_MESSAGE,
                    crate::ipfix::MAX_MAX_MESSAGE
                ),
            );
        }
        if self.epoch_grace.is_zero() || self.epoch_grace > Duration::from_secs(60) {
            return bad("epoch-grace-ms", "must be 1 ms to 60 s");
        }
        if self.max_flowset_bytes < 1 << 20 {
            return bad("max-flowset-mb", "must be at least 1");
        }
        if self.flowset_memory_bytes < self.max_flowset_bytes {
            return bad("flowset-memory-mb", "must be at least --max-flowset-mb");
        }
        if self.max_connections == 0 {
            return bad("max-connections", "must be at least 1");
        }
        if self.max_switches == 0 {
            return bad("max-switches", "must be at least 1");
        }
        if !(1..=MAX_QUEUE_BATCHES).contains(&self.queue_batches) {
            // Each slot of a queue is made at the start.
            return bad("queue-batches", "must be 1 to 65536");
        }
        if self.ipfix.is_some_and(|a| a.port() == 0) {
            return bad("ipfix", "port 0 is no collector's");
        }
        if let (Some(j), Some(e)) = (&self.json_lines, &self.event_lines)
            && same_place(j, e)
        {
            return bad(
                "event-lines",
                "is the --json-lines file (two writers would interleave their lines)",
            );
        }
        if let (Some(h), l) = (self.http, self.listen)
            && h == l
            && h.port() != 0
        {
            return bad("http", "is the same address as --listen");
        }
        Ok(())
    }
}

/// Whether two paths name one regular file, made yet or not (a device such as /dev/null
/// takes any number of writers).
fn same_place(a: &Path, b: &Path) -> bool {
    use crate::lines::is_stdout;
    if is_stdout(a) || is_stdout(b) {
        return is_stdout(a) && is_stdout(b);
    }
    let device = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_file());
    if device(a) || device(b) {
        return false;
    }
    a == b || resolved(a).is_some_and(|a| resolved(b) == Some(a))
}

/// Where a file is or would be made: its canonical path, or for one not made yet its
/// directory's canonical path and its name.
fn resolved(p: &Path) -> Option<std::path::PathBuf> {
    p.canonicalize().ok().or_else(|| {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_flag() {
        SinkConfig::default().validate().unwrap();
        let cases: [(&str, SinkConfig); 10] = [
            (
                "queue-batches",
                SinkConfig {
                    queue_batches: MAX_QUEUE_BATCHES + 1,
                    ..Default::default()
                },
            ),
            (
                "ipfix",
                SinkConfig {
                    ipfix: Some("127.0.0.1:0".parse().unwrap()),
                    ..Default::default()
                },
            ),
            (
                "event-lines",
                SinkConfig {
                    json_lines: Some("out/lines.jsonl".into()),
                    event_lines: Some("out/lines.jsonl".into()),
                    ..Default::default()
                },
            ),
            (
                "ipfix-message-bytes",
                SinkConfig {
                    ipfix_message_bytes: 511,
                    ..Default::default()
                },
            ),
            (
                "ipfix-message-bytes",
                SinkConfig {
                    ipfix_message_bytes: 65_508,
                    ..Default::default()
                },
            ),
            (
                "flowset-memory-mb",
                SinkConfig {
                    flowset_memory_bytes: 128 << 20,
                    ..Default::default()
                },
            ),
            (
                "decode-threads",
                SinkConfig {
                    decode_threads: 0,
                    ..Default::default()
                },
            ),
            (
                "idle-timeout",
                SinkConfig {
                    idle_timeout: Duration::ZERO,
                    ..Default::default()
                },
            ),
            (
                "epoch-grace-ms",
                SinkConfig {
                    epoch_grace: Duration::from_secs(120),
                    ..Default::default()
                },
            ),
            (
                "http",
                SinkConfig {
                    http: Some(DEFAULT_LISTEN.parse().unwrap()),
                    ..Default::default()
                },
            ),
        ];
        for (flag, c) in cases {
            let e = c.validate().unwrap_err();
            assert_eq!(e.flag, flag);
            assert!(e.to_string().starts_with(&format!("--{flag}: ")));
        }
    }

    /// One file named two ways is one file, made yet or not; a device is no file.
    #[test]
    fn one_lines_file_named_two_ways_is_one() {
        let here = std::env::current_dir().unwrap();
        let made = |name: &str| {
            std::path::PathBuf::from(format!("pint-sink-same-{name}-{}", std::process::id()))
        };
        let (a, b) = (made("a"), made("b"));
        assert!(super::same_place(&a, &here.join(&a)), "not made yet");
        assert!(super::same_place(&a, &here.join(".").join(&a)));
        assert!(!super::same_place(&a, &b));
        std::fs::write(&a, b"").unwrap();
        assert!(super::same_place(&here.join(&a), &a), "made");
        std::fs::remove_file(&a).unwrap();
        let null = std::path::Path::new("/dev/null");
        assert!(!super::same_place(null, null));
        let (stdout, dash_file) = (std::path::Path::new("-"), std::path::Path::new("./-"));
        assert!(super::same_place(stdout, stdout), "standard output twice");
        assert!(!super::same_place(stdout, dash_file), "a file named -");
        assert!(!super::same_place(dash_file, stdout));
    }
}

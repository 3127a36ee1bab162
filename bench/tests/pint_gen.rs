//! `pint-gen --write-pcap`: the capture, read back by tshark, holds exactly the traffic the
//! summary reports, with valid checksums and the probes' sequence numbers.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};

use common::tshark;

fn generate(dir: &Path, name: &str, args: &[&str]) -> (std::path::PathBuf, serde_json::Value) {
    let pcap = dir.join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(args)
        .arg("--write-pcap")
        .arg(&pcap)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (pcap, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn capture_holds_the_flows_and_sizes_asked_for() {
    let dir = std::env::temp_dir().join(format!("pint-gen-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pcap, summary) = generate(
        &dir,
        "mix.pcap",
        &[
            "--flows",
            "40",
            "--count",
            "3000",
            "--packet-size",
            "imix",
            "--tcp-share",
            "0.5",
            "--probes",
            "3",
            "--probe-hz",
            "50000",
            "--rate",
            "1Mpps",
        ],
    );
    let rows = tshark(
        &pcap,
        &[
            "-T",
            "fields",
            "-e",
            "frame.len",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "ip.proto",
            "-e",
            "tcp.srcport",
            "-e",
            "udp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "udp.dstport",
        ],
    );
    let lines: Vec<Vec<&str>> = rows.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len() as u64, summary["packets"].as_u64().unwrap());
    assert_eq!(lines.len(), 3000);
    let bytes: u64 = lines.iter().map(|l| l[0].parse::<u64>().unwrap()).sum();
    assert_eq!(bytes, summary["bytes"].as_u64().unwrap());
    let sizes: BTreeSet<&str> = lines.iter().map(|l| l[0]).collect();
    // IMIX frames, and 74-byte probes.
    assert_eq!(sizes, BTreeSet::from(["60", "590", "1514", "74"]));
    let flows: BTreeSet<Vec<&str>> = lines.iter().map(|l| l[1..].to_vec()).collect();
    assert_eq!(flows.len(), 43, "40 flows and 3 probe streams");
    assert_eq!(summary["flows_used"].as_u64(), Some(40), "{summary}");
    assert_eq!(summary["probe_streams_used"].as_u64(), Some(3), "{summary}");
    let tcp = flows.iter().filter(|f| f[2] == "6").count();
    assert!((8..=32).contains(&tcp), "about half TCP: {tcp}");
    // Every checksum verifies.
    let bad = tshark(
        &pcap,
        &[
            "-Y",
            "ip.checksum.status == 0 || tcp.checksum.status == 0 || udp.checksum.status == 0",
        ],
    );
    assert_eq!(bad.lines().count(), 0, "bad checksums:\n{bad}");
    // Probes: 3000 packets at 1 Mpps are 3 ms: 150 per stream at 50 kHz, numbered from 0.
    let probes = tshark(
        &pcap,
        &[
            "-Y",
            "udp.dstport == 20564",
            "-T",
            "fields",
            "-e",
            "udp.srcport",
            "-e",
            "data.data",
        ],
    );
    let mut per_stream: HashMap<&str, Vec<u64>> = HashMap::new();
    for l in probes.lines() {
        let (port, data) = l.split_once('\t').unwrap();
        assert!(
            data.starts_with("50494e5450524231"),
            "magic PINTPRB1: {data}"
        );
        let seq = u64::from_str_radix(&data[32..48], 16).unwrap();
        per_stream.entry(port).or_default().push(seq);
    }
    assert_eq!(per_stream.len(), 3);
    let total: usize = per_stream.values().map(Vec::len).sum();
    assert_eq!(total as u64, summary["probes"].as_u64().unwrap());
    for seqs in per_stream.values() {
        assert_eq!(*seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
        assert!((149..=151).contains(&seqs.len()), "{}", seqs.len());
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A paced capture's rate is the rate asked for: two packets a millisecond apart are 1000
/// packets per second, not 2000.
#[test]
fn a_paced_captures_rate_is_the_one_asked_for() {
    let dir = std::env::temp_dir().join(format!("pint-gen-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for count in ["2", "100"] {
        let (_, summary) = generate(
            &dir,
            "rate.pcap",
            &[
                "--rate",
                "1000pps",
                "--count",
                count,
                "--packet-size",
                "100",
            ],
        );
        let pps = summary["pps"].as_f64().unwrap();
        assert!((pps - 1000.0).abs() < 1e-6, "{count} packets: {summary}");
        let wire = summary["wire_bps"].as_f64().unwrap();
        assert!((wire - 1000.0 * 8.0 * 124.0).abs() < 1e-3, "{summary}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn fixed_size_flows_are_cut_into_packets() {
    let dir = std::env::temp_dir().join(format!("pint-gen-test-f-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 3000-byte flows in 1514-byte frames of UDP (the frame size flows of --flow-sizes
    // take unless told otherwise): 1472 + 1472 + 56 payload bytes.
    let (pcap, summary) = generate(
        &dir,
        "flows.pcap",
        &[
            "--flows",
            "100000",
            "--flow-sizes",
            "fixed:3000",
            "--load",
            "0.5",
            "--duration",
            "0.01",
        ],
    );
    let rows = tshark(&pcap, &["-T", "fields", "-e", "frame.len"]);
    let mut count: HashMap<&str, u64> = HashMap::new();
    for l in rows.lines() {
        *count.entry(l).or_default() += 1;
    }
    assert_eq!(
        count.keys().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["1514", "98"])
    );
    let (full, tail) = (count["1514"], count["98"]);
    // Flows still in progress at the end account for the difference.
    assert!(
        full >= 2 * tail && full <= 2 * tail + 2 * 50,
        "{full} full, {tail} tails"
    );
    assert_eq!(full + tail, summary["packets"].as_u64().unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

fn eal(prefix: &str, lcore: &str) -> Vec<String> {
    [
        "--",
        "-l",
        lcore,
        "--no-huge",
        "-m",
        "512",
        "--no-shconf",
        "--no-pci",
        "--no-telemetry",
        "--log-level",
        "error",
        "--file-prefix",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("{prefix}-{}", std::process::id())])
    .collect()
}

/// The memif device on socket `sock` in `role`.
fn memif_dev(sock: &Path, role: &str) -> String {
    format!(
        "net_memif0,role={role},socket={},socket-abstract=no",
        sock.display()
    )
}

/// A sending pint-gen (memif client on `sock`, JSON summary, with `args`), to be run.
fn start_sender(sock: &Path, tag: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pint-gen"));
    c.args(["--port", &memif_dev(sock, "client"), "--json"])
        .args(args)
        .args(eal(&format!("{tag}-tx"), "1"));
    c
}

/// Starts a receiving pint-gen (memif server on `sock`, with `args`) and waits for its
/// socket (a client connects to it).
fn start_receiver(sock: &Path, tag: &str, args: &[&str]) -> std::process::Child {
    let receiver = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", &memif_dev(sock, "server"), "--mode", "receive"])
        .args(args)
        .args(eal(&format!("{tag}-rx"), "0"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed().as_secs() < 30,
            "the receiver never created its socket"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    receiver
}

/// A child whose output is collected on a thread of its own, so that a test can act on
/// other processes meanwhile and still bound the wait.
struct Collecting {
    pid: u32,
    output: std::thread::JoinHandle<std::process::Output>,
}

impl Collecting {
    fn new(child: std::process::Child) -> Collecting {
        Collecting {
            pid: child.id(),
            output: std::thread::spawn(move || child.wait_with_output().unwrap()),
        }
    }

    /// Sends it `signal`.
    fn signal(&self, signal: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid as i32, signal) };
    }

    /// Its output once it has exited, or None when it had not within `limit` (it is
    /// killed then).
    fn output_within(self, limit: std::time::Duration) -> Option<std::process::Output> {
        let t0 = std::time::Instant::now();
        while !self.output.is_finished() && t0.elapsed() < limit {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let finished = self.output.is_finished();
        if !finished {
            self.signal(libc::SIGKILL);
        }
        let out = self.output.join().unwrap();
        finished.then_some(out)
    }
}

/// A sender whose port stops taking packets mid-run (its peer stops reading) gives up after
/// a while, with a --duration or with a --count it can no longer reach, with what the port
/// never took left out of what it sent (it waited for the port for good, until Ctrl-C), and
/// exits with an error saying why (it exited 0, as if it had sent all it was asked to). The
/// peer is stopped rather than killed: DPDK's memif can fault in a process whose peer
/// leaves while it polls (`docs/config.md`, memif peers that leave).
#[test]
fn a_sender_whose_port_stops_taking_gives_up() {
    for (case, until) in [
        ("dur", ["--duration", "4"]),
        ("cnt", ["--count", "4000000000"]),
    ] {
        let dir = std::env::temp_dir().join(format!("pint-gen-gone-{case}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("memif.sock");
        let tag = format!("gone-{case}");
        let mut receiver = start_receiver(&sock, &tag, &["--until-idle", "60"]);
        let sender = Collecting::new(
            start_sender(
                &sock,
                &tag,
                &[&["--linger", "0", "--rate", "max"], &until[..]].concat(),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(receiver.id() as i32, libc::SIGSTOP) };
        // Bounded: a sender that never stops is killed and the test fails.
        let out = sender.output_within(std::time::Duration::from_secs(120));
        receiver.kill().unwrap();
        receiver.wait().unwrap();
        // Killed, it leaves EAL's runtime directory behind.
        let prefix = format!("{tag}-rx-{}", std::process::id());
        let _ = std::fs::remove_dir_all(bench::testpmd::eal_runtime_dir(&prefix));
        let out = out.unwrap_or_else(|| {
            panic!("{case}: the sender did not give up on a port that takes nothing")
        });
        // It says so, and fails: a script cannot take it for a whole run.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{case}: {}: {err}", out.status);
        assert!(err.contains("sending stopped after"), "{case}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sent = v["sent"]["packets"].as_u64().unwrap();
        assert!(sent > 0 && sent < 4_000_000_000, "{case}: {v}");
        let why = v["sent"]["cut_short"].as_str().unwrap_or_default();
        assert!(why.contains("took nothing"), "{case}: {v}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// Runs a receiving pint-gen (memif server) and a sending one (client, with `send_args`);
/// returns their JSON summaries (sender, receiver).
fn memif_pair(tag: &str, send_args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!("pint-gen-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let capture = dir.join("rx.pcap");
    let receiver = start_receiver(
        &sock,
        tag,
        &[
            // Generous: on a busy 2-core machine the sender may stall for a moment.
            "--until-idle",
            "5",
            "--json",
            "--capture",
            capture.to_str().unwrap(),
        ],
    );
    // The receiver leaves first (after its idle time); the sender waits for that.
    let sender = start_sender(&sock, tag, &[&["--linger", "30"], send_args].concat())
        .output()
        .unwrap();
    assert!(
        sender.status.success(),
        "{}",
        String::from_utf8_lossy(&sender.stderr)
    );
    let rx = receiver.wait_with_output().unwrap();
    assert!(
        rx.status.success(),
        "receiver: {}: {}{}",
        rx.status,
        String::from_utf8_lossy(&rx.stdout),
        String::from_utf8_lossy(&rx.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&rx.stdout).unwrap();
    // The receiver's capture holds every frame it received, stamped in Unix time.
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&capture).unwrap()).unwrap();
    assert_eq!(
        r.header().ts_resolution,
        pcap_file::TsResolution::NanoSecond
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let mut frames = 0u64;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        if frames == 0 {
            let age = now.saturating_sub(p.timestamp);
            assert!(
                age.as_secs() < 600,
                "stamped {:?}, now {now:?}",
                p.timestamp
            );
        }
        frames += 1;
    }
    assert_eq!(Some(frames), got["received"]["packets"].as_u64());
    std::fs::remove_dir_all(&dir).ok();
    (serde_json::from_slice(&sender.stdout).unwrap(), got)
}

/// The receiver's counts equal the sender's, and every probe arrived once, in order.
fn assert_all_arrived(sent: &serde_json::Value, got: &serde_json::Value, min_probes: u64) {
    let (s, r) = (&sent["sent"], &got["received"]);
    assert_eq!(r["packets"], s["packets"]);
    assert_eq!(r["bytes"], s["bytes"]);
    let probes = &r["probes"];
    assert!(s["probes"].as_u64().unwrap() >= min_probes, "{s}");
    assert_eq!(probes["received"], s["probes"]);
    assert_eq!(
        (&probes["lost"], &probes["reordered"], &probes["duplicates"]),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(0)
        )
    );
    // Data packets carry flow tags: nothing missing or late in any flow.
    let flows = &r["flows"];
    assert_eq!(
        (
            &flows["lost"],
            &flows["late"],
            &flows["duplicates"],
            &flows["foreign"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(0)
        ),
        "{flows}"
    );
    assert!(
        flows["tagged"].as_u64().unwrap()
            <= s["packets"].as_u64().unwrap() - s["probes"].as_u64().unwrap()
    );
}

/// Two pint-gens over memif, paced: what one sends, the other receives, exactly: packet and
/// byte counts, and every probe in order.
#[test]
fn memif_receiver_counts_exactly_what_was_sent() {
    let (sent, got) = memif_pair(
        "pg-paced",
        &[
            "--count",
            "300000",
            "--packet-size",
            "imix",
            "--tcp-share",
            "0.3",
            "--probes",
            "4",
            "--probe-hz",
            "20000",
            "--rate",
            "2Mpps",
        ],
    );
    assert_eq!(sent["sent"]["packets"].as_u64(), Some(300_000));
    assert_all_arrived(&sent, &got, 100);
}

/// The same at full rate (the replayed cycle, probes built live on the wall clock).
#[test]
fn memif_full_rate_with_live_probes() {
    let (sent, got) = memif_pair(
        "pg-max",
        &[
            "--duration",
            "1",
            "--flows",
            "5000",
            "--probes",
            "2",
            "--probe-hz",
            "200",
        ],
    );
    assert!(
        sent["sent"]["packets"].as_u64().unwrap() > 100_000,
        "{sent}"
    );
    assert_all_arrived(&sent, &got, 100);
    // 60-byte UDP frames all carry a tag; the replayed cycle (65536 frames) wrapped, and the
    // sequence numbers set as they were sent still run on without a gap.
    let s = &sent["sent"];
    let flows = &got["received"]["flows"];
    assert_eq!(
        flows["tagged"].as_u64().unwrap(),
        s["packets"].as_u64().unwrap() - s["probes"].as_u64().unwrap()
    );
    assert_eq!(flows["flows"].as_u64(), Some(5000));
}

/// The switch routing everything back out of the memif it came in on.
fn loop_switch_config(sock: &Path) -> String {
    format!(
        r#"switch_id = 1
[eal]
main_lcore = 0
hugepages = false
[stats]
interval_ms = 1000
[[ports]]
name = "gen"
device = "net_memif0,role=server,socket={},socket-abstract=no"
role = "edge"
mac = "02:00:00:00:00:01"
[[workers]]
lcore = 1
rx = ["gen"]
[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{{ port = "gen", mac = "02:00:00:00:aa:01" }}]
"#,
        sock.display()
    )
}

/// Runs pint-gen (memif client, `args`) through a pint-switch of its own that routes
/// everything back; returns pint-gen's report and the switch's summary. pint-gen prints its
/// report and lingers without polling; the switch is stopped then, so that the side that
/// leaves is never the one a polling thread depends on (DPDK 22.11's memif driver unmaps a
/// departed peer's rings under the poller).
fn through_switch(tag: &str, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("pint-gen-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("loop.sock");
    let cfg = dir.join("switch.toml");
    std::fs::write(&cfg, loop_switch_config(&sock)).unwrap();
    let summary = dir.join("summary.json");
    let mut switch = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", "120", "--summary-json"])
        .arg(&summary)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The switch prints its routes once its ports are started: connect after that.
    let stdout = switch.stdout.take().unwrap();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let log = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("routes:") {
                let _ = ready_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if ready
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_err()
    {
        let _ = switch.kill();
        panic!("the switch did not start: {}", log.join().unwrap());
    }
    let dev = format!(
        "net_memif0,role=client,socket={},socket-abstract=no",
        sock.display()
    );
    let mut generator = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", &dev, "--json", "--linger", "60"])
        .args(args)
        .args(eal(tag, "0"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let report =
        bench::sender::read_json_report(std::io::BufReader::new(generator.stdout.take().unwrap()));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(switch.id() as i32, libc::SIGINT) };
    let out = switch.wait_with_output().unwrap();
    let log = log.join().unwrap();
    assert!(
        out.status.success(),
        "switch: {}: {log}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let gen_out = generator.wait_with_output().unwrap();
    if !gen_out.status.success() {
        let err = String::from_utf8_lossy(&gen_out.stderr);
        panic!(
            "pint-gen {tag}: {}: {}",
            gen_out.status,
            &err[err.len().saturating_sub(1500)..]
        );
    }
    let sw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    (serde_json::from_str(&report).unwrap(), sw)
}

/// What the switch dropped, for any reason.
fn switch_dropped(sw: &serde_json::Value) -> u64 {
    sw["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum::<u64>()
        + sw["tx_full_drops"].as_u64().unwrap()
}

/// pint-gen sending and receiving through pint-switch over one memif: every packet sent is
/// accounted for by the switch's counters (received there; sent back, or dropped and
/// counted), and what the switch sent back all arrived.
#[test]
fn loop_through_the_switch() {
    let (run, sw) = through_switch(
        "loop-both",
        &[
            "--mode",
            "both",
            "--rate",
            "200Kpps",
            "--duration",
            "1",
            "--packet-size",
            "imix",
            "--tcp-share",
            "0.3",
            "--probes",
            "4",
            "--probe-hz",
            "1000",
        ],
    );
    let u = |v: &serde_json::Value| v.as_u64().unwrap();
    let (sent, received, lost) = (
        u(&run["sent"]["packets"]),
        u(&run["received"]["packets"]),
        u(&run["lost"]),
    );
    assert_eq!(sent, 200_000);
    assert_eq!(lost, sent - received);
    // The switch received all that was sent, and what it sent back arrived.
    assert_eq!(u(&sw["rx_packets"]), sent, "{sw}");
    assert_eq!(u(&sw["tx_packets"]), received, "{sw}");
    assert_eq!(lost, switch_dropped(&sw), "{sw}");
    assert_eq!(u(&sw["drops"]["ttl_expired"]), 0);
    // Whatever the switch dropped (a loaded machine may make it drop a few), nothing came
    // late, and what pint-gen found lost by flow tags and probe numbers is among it.
    let (f, p) = (&run["received"]["flows"], &run["received"]["probes"]);
    assert_eq!(u(&f["late"]), 0, "{f}");
    assert!(u(&f["tagged"]) > 100_000, "{f}");
    assert!(u(&f["lost"]) + u(&p["lost"]) <= lost, "{f}\n{p}");
    let probes_sent = u(&run["sent"]["probes"]);
    assert!(probes_sent > 0);
    assert!(u(&p["received"]) + u(&p["lost"]) <= probes_sent, "{p}");
    if lost == 0 {
        assert_eq!(u(&f["lost"]), 0, "{f}");
        assert_eq!(u(&p["received"]), probes_sent, "{p}");
    }
}

/// The zero-loss search through pint-switch: each trial's loss counted exactly (the switch's
/// counters agree), a trial passes on zero loss, and the trials halve the bracket.
#[test]
fn zero_loss_search_through_the_switch() {
    let (search, sw) = through_switch(
        "loop-search",
        &[
            "--zero-loss",
            "--rate",
            "300Kpps",
            "--trial-seconds",
            "0.3",
            "--max-trials",
            "4",
            "--precision",
            "0.05",
        ],
    );
    let u = |v: &serde_json::Value| v.as_u64().unwrap();
    let trials = search["trials"].as_array().unwrap();
    let sent: u64 = trials.iter().map(|t| u(&t["sent"])).sum();
    let received: u64 = trials.iter().map(|t| u(&t["received"])).sum();
    assert_eq!(u(&sw["rx_packets"]), sent, "{sw}");
    assert_eq!(u(&sw["tx_packets"]), received, "{sw}");
    assert_eq!(sent - received, switch_dropped(&sw), "{sw}");
    let (mut lo, mut hi) = (0.0f64, trials[0]["sent_pps"].as_f64().unwrap());
    let mut best = 0.0f64;
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(u(&t["lost"]), u(&t["sent"]) - u(&t["received"]));
        let passed = t["passed"].as_bool().unwrap();
        assert_eq!(passed, u(&t["lost"]) == 0, "{t}");
        let rate = if i == 0 {
            assert_eq!(t["offered_pps"].as_f64(), Some(300_000.0));
            hi
        } else {
            let mid = (lo + hi) / 2.0;
            let offered = t["offered_pps"].as_f64().unwrap();
            assert!(
                (offered - mid).abs() < 1e-6 * mid,
                "trial {i}: {offered} vs {mid}"
            );
            mid
        };
        if passed {
            lo = rate;
            best = t["sent_pps"].as_f64().unwrap();
        } else {
            hi = rate;
        }
        if i == 0 && passed {
            assert_eq!(trials.len(), 1, "nothing above the top rate to search");
        }
    }
    assert!(trials.len() <= 4);
    assert_eq!(search["zero_loss_pps"].as_f64(), Some(best));
    // A bracket wider than --precision when the trials ran out is said, with its ends.
    let settled = trials[0]["passed"].as_bool().unwrap() || hi - lo <= 0.05 * hi;
    match search["unsettled_pps"].as_array() {
        Some(b) => {
            assert!(!settled, "{search}");
            assert_eq!(b[0].as_f64(), Some(lo));
            assert_eq!(b[1].as_f64(), Some(hi));
        }
        None => assert!(settled, "{search}"),
    }
}

/// `pint-bench throughput` with the generator topologies: every variant is there with a
/// rate and its ratio to the reference of its topology from the same run, and each loop
/// device gets its lost packets and a zero-loss rate.
#[test]
fn throughput_harness_reports_every_variant() {
    let out = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
        .args([
            "throughput",
            "--seconds",
            "3",
            "--rounds",
            "1",
            "--flows",
            "1000",
        ])
        .args(["--topologies", "null,loop", "--zero-loss", "0.3", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let variants = r["variants"].as_array().unwrap();
    let names: Vec<(String, String)> = variants
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_owned(),
                v["topology"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expect = [
        ("dpdk-testpmd txonly", "null"),
        ("pint-gen --rate max", "null"),
        ("dpdk-testpmd 5tswap", "loop"),
        ("pint-switch (forwarding)", "loop"),
    ];
    assert_eq!(
        names,
        expect.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
    );
    for v in variants {
        let mpps = v["mpps"].as_f64().unwrap();
        assert!(mpps > 0.0, "{v}");
        let reference = variants
            .iter()
            .find(|x| x["name"] == v["reference"] && x["topology"] == v["topology"])
            .unwrap_or_else(|| panic!("no reference for {v}"));
        let ratio = v["ratio"].as_f64().unwrap();
        assert!(
            (ratio - mpps / reference["mpps"].as_f64().unwrap()).abs() < 1e-9,
            "{v}"
        );
        if v["topology"] == "loop" {
            assert!(v["lost"].as_u64().is_some(), "{v}");
            let z = v["zero_loss_mpps"].as_f64().unwrap();
            assert!(z >= 0.0, "{v}");
        } else {
            assert!(v["zero_loss_mpps"].is_null(), "{v}");
        }
    }
}

/// Arguments that cannot work are refused before anything starts, naming the flag.
#[test]
fn bad_arguments_name_their_flag() {
    let dir = std::env::temp_dir().join(format!("pint-gen-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("x.pcap");
    let pcap = pcap.to_str().unwrap();
    for (args, want) in [
        (
            vec![
                "--port",
                "net_null0",
                "--mode",
                "receive",
                "--until-idle",
                "0",
            ],
            "--until-idle 0",
        ),
        // A capture of receive mode would grow until the disk is full.
        (
            vec!["--write-pcap", pcap, "--mode", "receive"],
            "--mode: only with --port",
        ),
        (vec!["--write-pcap", pcap], "say how much"),
        // Neither a capture nor a port: both named.
        (
            vec!["--count", "5"],
            "<--write-pcap <WRITE_PCAP>|--port <PORT>>",
        ),
        // Options the run would ignore (they were taken without a word).
        (
            vec!["--write-pcap", pcap, "--count", "5", "--capture", pcap],
            "--capture: only with --port",
        ),
        (
            vec!["--port", "net_null0", "--mode", "receive", "--count", "5"],
            "--count: a receiver",
        ),
        (
            vec![
                "--port",
                "net_null0",
                "--mode",
                "receive",
                "--duration",
                "5",
            ],
            "--duration: a receiver",
        ),
        // A capture it cannot make is said before the port is tried (once its link was up:
        // up to half a minute on memif).
        (
            vec![
                "--port",
                "net_nothing0",
                "--mode",
                "receive",
                "--capture",
                "/nonexistent-dir/x.pcap",
            ],
            "creating capture /nonexistent-dir/x.pcap",
        ),
        (
            vec!["--port", "net_null0", "--count", "5", "--precision", "0.1"],
            "--precision: only with --zero-loss",
        ),
        // Pace flags the run would not use.
        (
            vec![
                "--write-pcap",
                pcap,
                "--count",
                "5",
                "--flow-sizes",
                "hadoop",
                "--rate",
                "1Kpps",
            ],
            "--rate: not with --flow-sizes",
        ),
        (
            vec!["--write-pcap", pcap, "--count", "5", "--load", "0.1"],
            "--load: only with --flow-sizes",
        ),
        (
            vec!["--write-pcap", pcap, "--count", "5", "--probe-hz", "0"],
            "--probe-hz: only with --probes",
        ),
        // Values out of range name their flag.
        (
            vec!["--write-pcap", pcap, "--count", "5", "--tcp-share", "1.5"],
            "--tcp-share 1.5: must be from 0 to 1",
        ),
        (
            vec!["--write-pcap", pcap, "--count", "5", "--flows", "0"],
            "'0' for '--flows <FLOWS>': 0 is not in 1..=4194304",
        ),
        (
            vec!["--write-pcap", pcap, "--count", "5", "--ttl", "0"],
            "'0' for '--ttl <TTL>': 0 is not in 1..=255",
        ),
        (
            vec!["--write-pcap", pcap, "--count", "0"],
            "'0' for '--count <COUNT>'",
        ),
        (
            vec![
                "--write-pcap",
                pcap,
                "--count",
                "5",
                "--src-mac",
                "01:00:5e:00:00:01",
            ],
            "--src-mac 01:00:5e:00:00:01: a group",
        ),
        (
            vec!["--port", "net_null0", "--count", "5", "--start-at", "100"],
            "--start-at 100: must be a Unix time in seconds within a day of now",
        ),
        (
            vec!["--port", "net_null0", "--zero-loss", "--until-idle", "0"],
            "--until-idle 0",
        ),
        // Probes that would take every packet's place.
        (
            vec![
                "--write-pcap",
                pcap,
                "--count",
                "5",
                "--rate",
                "1pps",
                "--probes",
                "1",
                "--probe-hz",
                "10",
            ],
            "no room for data",
        ),
        (
            vec!["--write-pcap", pcap, "--rate", "0", "--count", "5"],
            "--rate",
        ),
        // Times beyond any clock, and a start in milliseconds, are refused (they panicked,
        // or waited for ages).
        (
            vec!["--port", "net_null0", "--count", "5", "--linger", "1e20"],
            "--linger 100000000000000000000",
        ),
        (
            vec!["--port", "net_null0", "--count", "5", "--until-idle=-1"],
            "--until-idle -1",
        ),
        (
            vec!["--port", "net_null0", "--count", "5", "--start-at", "1e19"],
            "--start-at",
        ),
        (
            vec![
                "--port",
                "net_null0",
                "--count",
                "5",
                "--start-at",
                "1764950000000",
            ],
            "--start-at",
        ),
        (
            vec!["--port", "net_null0", "--count", "5", "--start-at", "NaN"],
            "--start-at",
        ),
        // A sleep no signal could end (the run hung after its last packet).
        (
            vec![
                "--port",
                "net_null0",
                "--count",
                "5",
                "--idle-sleep-us",
                "1000001",
            ],
            "--idle-sleep-us",
        ),
        // A probe period that is no time made every packet a probe.
        (
            vec![
                "--write-pcap",
                pcap,
                "--count",
                "5",
                "--probes",
                "1",
                "--probe-hz",
                "1e-300",
            ],
            "0.000001 Hz",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(!dir.join("x.pcap").exists(), "nothing written");
    std::fs::remove_dir_all(&dir).ok();
}

/// A sender run with EAL arguments of its own, DPDK's telemetry left on (its sockets are
/// unlinked only at exit), leaves no runtime directory behind.
#[test]
fn a_sender_leaves_no_runtime_directory() {
    let prefix = format!("pg-rundir-{}", std::process::id());
    let dir = bench::testpmd::eal_runtime_dir(&prefix);
    let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", "net_null0", "--rate", "1kpps", "--count", "100"])
        .args([
            "--",
            "-l",
            "1",
            "--no-huge",
            "-m",
            "512",
            "--no-shconf",
            "--no-pci",
            "--log-level",
            "error",
            "--file-prefix",
            &prefix,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = dir.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!left, "{} left behind", dir.display());
}

/// A sender stopped by SIGTERM before its time is up says so in its report (it read as a
/// whole run of what it had sent), and exits cleanly: the stop was asked for. One that ran
/// its course says nothing of it.
#[test]
fn a_sender_stopped_by_a_signal_says_so() {
    for (duration, signal) in [("60", true), ("0.3", false)] {
        let child = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
            .args(["--port", "net_null0", "--rate", "1kpps", "--json"])
            .args(["--duration", duration])
            .args(eal("pg-signal", "1"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if signal {
            // Its handlers are in place at once; 4 s lets it start sending.
            std::thread::sleep(std::time::Duration::from_secs(4));
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sent = &report["sent"];
        assert!(sent["packets"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(
            sent["interrupted"].as_bool().unwrap_or(false),
            signal,
            "{report}"
        );
    }
}

/// A switch started before its memif server waits for it, and one whose server leaves and
/// comes back (a neighbour restarted) connects again by itself: DPDK's memif client connects
/// only when its port starts, and the switch starts the port again once a second until the
/// server is there, its workers kept off the port meanwhile. The server is pint-gen, run
/// twice; the switch loops its traffic back.
#[test]
fn a_switch_connects_again_when_its_memif_server_comes_back() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("pint-gen-recon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("loop.sock");
    let cfg = dir.join("switch.toml");
    let config = loop_switch_config(&sock)
        .replace("role=server", "role=client")
        .replace("[[ports]]", "[dataplane]\nidle = \"sleep\"\n[[ports]]");
    std::fs::write(&cfg, config).unwrap();
    let summary = dir.join("summary.json");
    let server = |run: &str| {
        Command::new(env!("CARGO_BIN_EXE_pint-gen"))
            .args(["--port", &memif_dev(&sock, "server"), "--json"])
            .args(["--mode", "both", "--rate", "100Kpps", "--duration", "1"])
            // The first run leaves while the switch runs (as a restarted neighbour does:
            // DPDK's memif driver may then fault in a switch whose worker is inside a call
            // on the port, which its idle naps make unlikely: docs/config.md); the second
            // waits for the switch to stop.
            .args(["--linger", if run == "1" { "0" } else { "60" }])
            .args(eal(&format!("recon{run}"), "0"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    };
    /// Kills the processes still running when the test fails.
    struct Reap(Vec<u32>);
    impl Drop for Reap {
        fn drop(&mut self) {
            for &pid in &self.0 {
                // SAFETY: signalling a child of ours that may still run.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
    let mut reap = Reap(Vec::new());
    let report = |g: &mut std::process::Child| -> serde_json::Value {
        let out =
            bench::sender::read_json_report(std::io::BufReader::new(g.stdout.as_mut().unwrap()));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let arrived = |r: &serde_json::Value| {
        let sent = r["sent"]["packets"].as_u64().unwrap();
        assert!(sent > 50_000, "{r}");
        assert_eq!(r["received"]["packets"].as_u64(), Some(sent), "{r}");
        sent
    };
    let mut switch = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", "120", "--summary-json"])
        .arg(&summary)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    reap.0.push(switch.id());
    // Its stderr read as it comes: a full pipe would stop the switch.
    let stderr = switch.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut s);
        s
    });
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = switch.stdout.take().unwrap();
    let log = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = String::new();
    let mut wait_for = |what: &str| {
        let t0 = Instant::now();
        while !seen.contains(what) {
            let left = Duration::from_secs(60).saturating_sub(t0.elapsed());
            match lines.recv_timeout(left) {
                Ok(l) => {
                    seen.push_str(&l);
                    seen.push('\n');
                }
                Err(_) => panic!("the switch never said `{what}`:\n{seen}"),
            }
        }
    };
    wait_for("its memif server is not there yet");
    let mut first = server("1");
    reap.0.push(first.id());
    wait_for("connected to its memif server\n");
    let sent1 = arrived(&report(&mut first));
    assert!(first.wait().unwrap().success());
    // The server is gone: the switch tries to connect again, and says it cannot yet.
    wait_for("its memif server is not back yet");
    let mut second = server("2");
    reap.0.push(second.id());
    wait_for("connected to its memif server again");
    let sent2 = arrived(&report(&mut second));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(switch.id() as i32, libc::SIGINT) };
    let status = switch.wait().unwrap();
    log.join().unwrap();
    let stderr = errors.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert!(second.wait().unwrap().success());
    reap.0.clear();
    // No worker called the port while it was stopped (DPDK says so when one does).
    assert!(!stderr.contains("not ready port"), "{stderr}");
    let sw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(sw["rx_packets"].as_u64(), Some(sent1 + sent2), "{sw}");
    assert_eq!(sw["tx_packets"].as_u64(), Some(sent1 + sent2), "{sw}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A sender told to (`--reconnect`) goes on through its peer's restart: its memif client
/// port connects to the new server, the run's clock stands still while the link is down,
/// and it sends the whole run, exiting 0 with the outage in its report (without the flag it
/// stops there, cut short: `a_sender_whose_port_stops_taking_gives_up`).
#[test]
fn a_sender_goes_on_through_its_peers_restart() {
    use std::time::Duration;
    let dir = std::env::temp_dir().join(format!("pint-gen-rejoin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let report = |out: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let first = start_receiver(
        &sock,
        "rejoin1",
        &["--until-idle", "60", "--json", "--linger", "0"],
    );
    let sender = start_sender(
        &sock,
        "rejoin",
        &[
            "--rate",
            "100Kpps",
            "--duration",
            "3",
            "--idle-sleep-us",
            "100",
            "--linger",
            "0",
            "--reconnect",
            "60",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let sender = Collecting::new(sender);
    std::thread::sleep(Duration::from_secs(2));
    // The first receiver leaves mid-run (its report printed); a second takes its place a
    // second later.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let first = first.wait_with_output().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let second = start_receiver(
        &sock,
        "rejoin2",
        &["--until-idle", "3", "--json", "--linger", "0"],
    );
    let sent = sender
        .output_within(Duration::from_secs(120))
        .expect("the sender ends");
    let second = second.wait_with_output().unwrap();
    assert!(
        sent.status.success(),
        "{}: {}",
        sent.status,
        String::from_utf8_lossy(&sent.stderr)
    );
    let (s, r1, r2) = (report(&sent), report(&first), report(&second));
    assert_eq!(s["outages"]["count"].as_u64(), Some(1), "{s}");
    let down = s["outages"]["seconds"].as_f64().unwrap();
    assert!(down > 0.5, "{s}");
    // The whole run was sent, its time without the outage.
    let packets = s["sent"]["packets"].as_u64().unwrap();
    let seconds = s["sent"]["seconds"].as_f64().unwrap();
    assert!(s["sent"]["cut_short"].is_null(), "{s}");
    assert!((2.9..3.5).contains(&seconds), "{s}");
    assert!(packets >= 290_000, "{s}");
    // Both receivers got traffic; what the first had in its rings as it left is all that
    // may be missing.
    let got1 = r1["received"]["packets"].as_u64().unwrap();
    let got2 = r2["received"]["packets"].as_u64().unwrap();
    assert!(got1 > 50_000 && got2 > 50_000, "{r1} {r2}");
    assert!(
        got1 + got2 <= packets && got1 + got2 + 2048 >= packets,
        "{s} {r1} {r2}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A capture the disk cannot hold fails the run, naming the file and the cause, whether
/// written from a traffic model (`--write-pcap`) or from what a port receives
/// (`--capture`, which keeps receiving and prints its report first): both wrote a capture
/// cut short (or nothing) and exited 0.
#[test]
fn a_capture_the_disk_cannot_hold_fails_the_run() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--write-pcap", "/dev/full", "--count", "10"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("writing /dev/full: No space left"), "{err}");
    let dir = std::env::temp_dir().join(format!("pint-gen-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let receiver = start_receiver(
        &sock,
        "full",
        &["--until-idle", "2", "--json", "--capture", "/dev/full"],
    );
    let sender = start_sender(&sock, "full", &["--count", "20000", "--linger", "30"])
        .output()
        .unwrap();
    assert!(sender.status.success());
    let rx = receiver.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&rx.stderr);
    assert_eq!(rx.status.code(), Some(1), "{err}");
    assert!(
        err.contains("writing /dev/full: No space left") && err.contains("receiving goes on"),
        "{err}"
    );
    // Everything that arrived is counted in the report all the same.
    let got: serde_json::Value = serde_json::from_slice(&rx.stdout).unwrap();
    assert_eq!(got["received"]["packets"].as_u64(), Some(20_000), "{got}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A sender told to wait for its link (`--reconnect`) gives up once the wait is over,
/// saying so and failing, with no more calls on its port (a memif client's is stopped
/// then); a signal during the wait stops it cleanly, as one at any other time does.
#[test]
fn a_sender_waits_for_its_link_no_longer_than_asked() {
    use std::time::Duration;
    for case in ["gone", "signal"] {
        let dir = std::env::temp_dir().join(format!("pint-gen-wait-{case}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("memif.sock");
        let tag = format!("wait-{case}");
        let receiver = start_receiver(&sock, &tag, &["--until-idle", "60", "--linger", "0"]);
        let sender = start_sender(
            &sock,
            &tag,
            &[
                "--rate",
                "50Kpps",
                "--duration",
                "30",
                "--idle-sleep-us",
                "100",
                "--linger",
                "0",
                "--reconnect",
                "3",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let sender = Collecting::new(sender);
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(receiver.id() as i32, libc::SIGINT) };
        receiver.wait_with_output().unwrap();
        if case == "signal" {
            std::thread::sleep(Duration::from_millis(500));
            sender.signal(libc::SIGINT);
        }
        let out = sender
            .output_within(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{case}: the sender did not end"));
        let err = String::from_utf8_lossy(&out.stderr);
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{case}: {e}: {err}"));
        assert!(!err.contains("not ready port"), "{case}: {err}");
        if case == "gone" {
            assert_eq!(out.status.code(), Some(1), "{case}: {err}");
            let why = v["sent"]["cut_short"].as_str().unwrap_or_default();
            assert!(why.contains("did not come back within 3 s"), "{v}");
            assert_eq!(v["outages"]["gave_up"].as_bool(), Some(true), "{v}");
            assert!(err.contains("did not come back"), "{err}");
        } else {
            assert!(out.status.success(), "{case}: {err}");
            assert_eq!(v["sent"]["interrupted"].as_bool(), Some(true), "{v}");
            assert!(v["sent"]["cut_short"].is_null(), "{v}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A memif client whose server is not there says, within seconds, what it waits for (a
/// silent terminal for 30 s reads as a hung program), and stops when asked.
#[test]
fn a_client_without_its_server_says_what_it_waits_for() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("pint-gen-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sender = start_sender(&dir.join("nobody.sock"), "wait", &["--duration", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = sender.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let t0 = Instant::now();
    let mut seen = String::new();
    let said = loop {
        let left = Duration::from_secs(25).saturating_sub(t0.elapsed());
        match lines.recv_timeout(left) {
            Ok(l) if l.starts_with("pint-gen: waiting up to 30 s for the link of net_memif0") => {
                break Some(l);
            }
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
            }
            Err(_) => break None,
        }
    };
    // SAFETY: signalling our own child.
    unsafe { libc::kill(sender.id() as i32, libc::SIGINT) };
    let t1 = Instant::now();
    while sender.try_wait().unwrap().is_none() {
        if t1.elapsed() > Duration::from_secs(20) {
            let _ = sender.kill();
            panic!("pint-gen did not stop when asked while it waited");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let said = said.unwrap_or_else(|| panic!("no word of the wait:\n{seen}"));
    assert!(said.contains("its memif server (the switch)"), "{said}");
}

/// A paced run that this core cannot keep up with says so (on stderr, JSON or not) and how
/// far behind it went; one at a pace it keeps says nothing of the kind.
#[test]
fn a_pace_the_sender_cannot_keep_is_said() {
    let run = |rate: &str, duration: &str, tag: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
            .args(["--port", "net_null0", "--json", "--linger", "0"])
            .args(["--rate", rate, "--duration", duration])
            .args(eal(tag, "0"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (json["sent"]["behind_s"].as_f64(), err)
    };
    // 200 million packets a second (10 million in 0.05 s): no core sends them.
    let (behind, err) = run("200Mpps", "0.05", "behind");
    assert!(behind.is_some_and(|b| b > 0.1), "{behind:?} {err}");
    assert!(err.contains("pint-gen: warning: sending fell"), "{err}");
    // A thousand a second: any core does (a stall of this machine of a second would be
    // needed to fall that far behind); the warning goes with how far behind it went.
    let (behind, err) = run("1Kpps", "0.5", "kept");
    let behind = behind.unwrap_or_else(|| panic!("{err}"));
    assert!(behind < 1.0, "{behind} {err}");
    assert_eq!(err.contains("fell"), behind > 0.1, "{behind} {err}");
}

/// A receiver stopped by a signal before its quiet time passed says so: it may have missed
/// packets on their way.
#[test]
fn a_receiver_stopped_by_a_signal_says_so() {
    use std::time::{Duration, Instant};
    let receiver = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", "net_null0,no-rx=1", "--mode", "receive", "--json"])
        .args(["--until-idle", "60", "--linger", "0"])
        .args(eal("rx-int", "0"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up (EAL and the port) well within this; a signal before would stop it as well.
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(receiver.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let out = receiver.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{err}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(json["received"]["interrupted"], true, "{json}");
}

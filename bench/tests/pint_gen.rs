//! `pint-gen --write-pcap`: the capture, read back by tshark, holds exactly the traffic the
//! summary reports, with valid checksums and the probes' sequence numbers.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

fn tshark(pcap: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args(args)
        .output()
        .expect("tshark runs (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

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
    assert_eq!(flows.len() as u64, summary["flows_used"].as_u64().unwrap());
    assert_eq!(flows.len(), 43, "40 flows and 3 probe streams");
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

#[test]
fn fixed_size_flows_are_cut_into_packets() {
    let dir = std::env::temp_dir().join(format!("pint-gen-test-f-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 3000-byte flows in 1514-byte frames of UDP: 1472 + 1472 + 56 payload bytes.
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
            "--packet-size",
            "1514",
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

/// Runs a receiving pint-gen (memif server) and a sending one (client, with `send_args`);
/// returns their JSON summaries (sender, receiver).
fn memif_pair(tag: &str, send_args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!("pint-gen-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let dev = |role: &str| {
        format!(
            "net_memif0,role={role},socket={},socket-abstract=no",
            sock.display()
        )
    };
    let receiver = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args([
            "--port",
            &dev("server"),
            "--mode",
            "receive",
            // Generous: on a busy 2-core machine the sender may stall for a moment.
            "--until-idle",
            "5",
            "--json",
        ])
        .args(eal(&format!("{tag}-rx"), "0"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The client connects to the server's socket: wait for it.
    let t0 = std::time::Instant::now();
    while !sock.exists() {
        assert!(
            t0.elapsed().as_secs() < 30,
            "the receiver never created its socket"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sender = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", &dev("client"), "--json"])
        .args(send_args)
        .args(eal(&format!("{tag}-tx"), "1"))
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
    std::fs::remove_dir_all(&dir).ok();
    (
        serde_json::from_slice(&sender.stdout).unwrap(),
        serde_json::from_slice(&rx.stdout).unwrap(),
    )
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
}

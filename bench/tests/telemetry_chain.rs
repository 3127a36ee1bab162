//! Telemetry on the wire, with the real binaries: pint-gen sends through three pint-switch
//! processes chained over memif (edge, transit, edge) to a second pint-gen, every switch
//! exporting to a sink stand-in on loopback. What hosts receive, what the digests decode to,
//! what the flowsets count, plan reloads, a sink that goes away, two workers, and the
//! metrics endpoint, each checked against an independent truth.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bench::collector::{Collected, Collector};
use bench::generator::{FlowTag, Transport, flow_key_of};
use bench::scratch::Scratch;
use control::summary::{Interval, Summary};
use telemetry::flowradar::{FlowKey, single_decode};
use telemetry::pint::path_decoder::Space;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;
use telemetry::pint::recording::FlowRecorder;

const PAPER: &str = include_str!("../../configs/queries/paper.toml");
/// The receiving pint-gen's MAC (the last switch's next hop towards the hosts).
const HOST_MAC: &str = "02:00:00:00:aa:02";
/// The last switch's host-facing port.
const S3_HOSTS_MAC: [u8; 6] = [2, 0, 0, 0, 3, 1];

/// The tests here run one at a time: each already runs several DPDK processes on the
/// machine's cores, and some of them assert on forwarding rates.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A switch process with its output collected by a thread.
struct Switch {
    child: Child,
    log: std::thread::JoinHandle<String>,
    summary: PathBuf,
    /// Told when the switch says it holds (SIGUSR1).
    held: mpsc::Receiver<()>,
}

fn start_switch(dir: &Scratch, name: &str, config: &str) -> Switch {
    let cfg = dir.path(&format!("{name}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let summary = dir.path(&format!("{name}.json"));
    // `pint-bench switch` is pint-switch's own code (the test cannot name another crate's
    // binary).
    let mut child = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", "300", "--summary-json"])
        .arg(&summary)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ready_tx, ready) = mpsc::channel();
    let (held_tx, held) = mpsc::channel();
    let log = std::thread::spawn(move || {
        let mut all = String::new();
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::BufReader::new(stderr).read_to_string(&mut s);
            s
        });
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("routes:") {
                let _ = ready_tx.send(());
            }
            if line.starts_with("holding (SIGUSR1)") {
                let _ = held_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all.push_str(&err.join().unwrap_or_default());
        all
    });
    if ready.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("{name} did not start:\n{}", log.join().unwrap());
    }
    Switch {
        child,
        log,
        summary,
        held,
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

impl Switch {
    /// Asks it to hold (every port closed to its workers) and waits until it says so.
    fn hold(&self) {
        signal(&self.child, libc::SIGUSR1);
        assert!(
            self.held.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the switch did not hold"
        );
    }

    fn stop(self) -> (Summary, String) {
        signal(&self.child, libc::SIGINT);
        let out = self.child.wait_with_output().unwrap();
        let log = self.log.join().unwrap();
        assert!(
            out.status.success(),
            "switch failed ({}):\n{log}",
            out.status
        );
        let s = Summary::from_json(&std::fs::read_to_string(&self.summary).unwrap())
            .unwrap_or_else(|e| panic!("summary: {e}\n{log}"));
        (s, log)
    }
}

fn eal(prefix: &str, lcore: u32) -> Vec<String> {
    [
        "--",
        "-l",
        &lcore.to_string(),
        "--no-huge",
        "-m",
        "512",
        "--no-shconf",
        "--no-pci",
        "--no-telemetry",
        "--log-level",
        "error",
        "--file-prefix",
        prefix,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A memif device with rings of 4096 (the default 1024 holds an eighth of a second of this
/// file's 8 Kpps: a machine that stalls the processes longer, other work at a higher
/// priority, would overflow them and fail the zero-loss checks for a reason not ours).
fn memif(id: u32, role: &str, sock: &Path) -> String {
    format!(
        "net_memif{id},role={role},socket={},socket-abstract=no,rsize=12",
        sock.display()
    )
}

/// One switch of the chain: `in` and `out` ports, everything to 10.1.0.0/16 out of `out`.
#[allow(clippy::too_many_arguments)]
fn chain_switch(
    id: u32,
    worker: u32,
    in_dev: &str,
    in_role: &str,
    out_dev: &str,
    out_role: &str,
    next_hop: &str,
    telemetry: &str,
) -> String {
    format!(
        r#"switch_id = {id}
[eal]
main_lcore = {main}
[dataplane]
idle = "sleep"
[stats]
interval_ms = 500
[[ports]]
name = "in"
device = "{in_dev}"
role = "{in_role}"
mac = "02:00:00:00:0{id}:00"
[[ports]]
name = "out"
device = "{out_dev}"
role = "{out_role}"
mac = "02:00:00:00:0{id}:01"
[[workers]]
lcore = {worker}
rx = ["in"]
[[routes]]
prefix = "10.1.0.0/16"
next_hops = [{{ port = "out", mac = "{next_hop}" }}]
{telemetry}
"#,
        main = 1 - worker
    )
}

/// The traffic both pint-gens agree on, and the capture of it that gives the truth.
const TRAFFIC: &[&str] = &[
    "--flows",
    "60",
    "--rate",
    "8Kpps",
    "--duration",
    "5",
    "--packet-size",
    "imix",
    "--tcp-share",
    "0.3",
    "--seed",
    "11",
    "--dst-mac",
    "02:00:00:00:01:00",
];

/// Per flow (5-tuple): packets and IPv4 bytes; per (flow, IPv4 identification): the frame.
struct Truth {
    flows: HashMap<FlowKey, (u64, u64)>,
    frames: HashMap<(FlowKey, u16), Vec<u8>>,
}

fn truth(dir: &Scratch) -> Truth {
    let pcap = dir.path("traffic.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(TRAFFIC)
        .arg("--write-pcap")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut flows: HashMap<FlowKey, (u64, u64)> = HashMap::new();
    let mut frames = HashMap::new();
    for f in dataplane::capture::read_pcap(&pcap).unwrap() {
        let (key, bytes) = flow_key_of(&f).expect("pint-gen sends IPv4");
        let e = flows.entry(key).or_default();
        e.0 += 1;
        e.1 += u64::from(bytes);
        let old = frames.insert((key, ident(&f)), f);
        assert!(old.is_none(), "a flow's identifications are distinct");
    }
    Truth { flows, frames }
}

fn ident(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[18], f[19]])
}

fn tag_of(f: &[u8]) -> Option<FlowTag> {
    let t = Transport::parse(f)?;
    FlowTag::decode(&f[t.payload_at..])
}

/// What plain forwarding over three hops makes of `sent`: TTL down by three (checksum
/// updated), the last hop's MACs.
fn plainly_forwarded(sent: &[u8]) -> Vec<u8> {
    let mut f = sent.to_vec();
    f[..6].copy_from_slice(&HOST_MAC.parse::<telemetry::wire::MacAddr>().unwrap().0);
    f[6..12].copy_from_slice(&S3_HOSTS_MAC);
    f[22] -= 3;
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f[24..26].copy_from_slice(&[0, 0]);
    let sum = telemetry::wire::checksum::checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

fn generator(args: &[&str], port: &str, prefix: &str, lcore: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pint-gen"))
        .args(["--port", port, "--json", "--linger", "120"])
        .args(args)
        .args(eal(prefix, lcore))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads a generator's JSON report in a thread (it lingers after printing it).
fn report_of(g: &mut Child) -> mpsc::Receiver<serde_json::Value> {
    let out = g.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let text = bench::sender::read_json_report(std::io::BufReader::new(out));
        let _ = tx.send(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null));
    });
    rx
}

fn finish_generator(mut g: Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if g.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = g.kill();
    let _ = g.wait();
}

/// Per flow and plan, the path every digest of the flow decodes to, with the plan each one
/// names; and the decoded latency and utilisation values.
fn check_digests(c: &Collected, plans: &HashMap<u32, Plan>) -> (usize, usize) {
    let line = telemetry::topology::Topology::line(3);
    let mut by_flow: HashMap<(FlowKey, u32), Vec<(u32, u64)>> = HashMap::new();
    for d in &c.digests {
        assert_eq!(d.hops, 3, "every digest crossed three switches: {d:?}");
        assert!(
            plans.contains_key(&d.plan_version),
            "a digest names plan {:08x}, which no switch declared",
            d.plan_version
        );
        by_flow
            .entry((d.key, d.plan_version))
            .or_default()
            .push((d.pid, d.digest));
    }
    let mut decoded = 0;
    for ((key, version), digests) in &by_flow {
        let plan = &plans[version];
        let mut rec = FlowRecorder::new(plan, 3, Space::Topology(&line), Some(3));
        for (pid, digest) in digests {
            rec.record(*pid, *digest);
        }
        let path = rec.path(plan.query_index("path").unwrap()).unwrap();
        if digests.len() >= 60 {
            assert_eq!(
                path.path(),
                Some(vec![1, 2, 3]),
                "flow {key} under plan {version:08x}: {} digests",
                digests.len()
            );
            decoded += 1;
        } else {
            // Fewer packets may leave hops open, never a wrong switch.
            for i in 1..=3 {
                if let Some(s) = path.hop(i) {
                    assert_eq!(s, i as u32, "flow {key} hop {i}");
                }
            }
        }
        if let Some(sk) = rec.sketches(plan.query_index("latency").unwrap()) {
            for hop in 1..=3 {
                // From a burst's receipt to its send through memif: more than 10 ns, and
                // at most what the code carries (about 66 µs).
                if let Some(m) = sk.quantile(hop, 0.5) {
                    assert!(
                        (10.0..=sk.top_value()).contains(&m),
                        "flow {key} hop {hop}: median latency {m} ns"
                    );
                }
            }
        }
        let u = rec
            .aggregate(plan.query_index("utilization").unwrap())
            .unwrap();
        if u.count > 0 {
            assert!(
                u.max > 0.0 && u.max < 4.0,
                "flow {key}: utilisation {}",
                u.max
            );
        }
    }
    (by_flow.len(), decoded)
}

/// pint-gen -> edge switch -> transit switch -> edge switch -> pint-gen, every switch with
/// the paper's plan and FlowRadar, exporting to a sink stand-in; halfway through, a new
/// query file and a SIGHUP, then an invalid one and another SIGHUP.
#[test]
fn three_switches_carry_decode_and_count_telemetry() {
    let _serial = serial();
    let dir = Scratch::new("tel-chain").unwrap();
    let truth = truth(&dir);
    let sink = Collector::start(true).unwrap();
    let queries = dir.path("queries.toml");
    std::fs::write(&queries, PAPER).unwrap();
    let telemetry = format!(
        "[telemetry]\nqueries = \"{}\"\nsink = \"{}\"\nepoch_ms = 10\n[telemetry.flowradar]\nexpected_flows = 200\n",
        queries.display(),
        sink.addr()
    );
    let (gen_in, s12, s23, gen_out) = (
        dir.path("gin.sock"),
        dir.path("s12.sock"),
        dir.path("s23.sock"),
        dir.path("gout.sock"),
    );
    let s1 = start_switch(
        &dir,
        "s1",
        &chain_switch(
            1,
            1,
            &memif(0, "server", &gen_in),
            "edge",
            &memif(1, "server", &s12),
            "fabric",
            "02:00:00:00:02:00",
            &telemetry,
        ),
    );
    let s2 = start_switch(
        &dir,
        "s2",
        &chain_switch(
            2,
            0,
            &memif(0, "client", &s12),
            "fabric",
            &memif(1, "server", &s23),
            "fabric",
            "02:00:00:00:03:00",
            &telemetry,
        ),
    );
    let s3 = start_switch(
        &dir,
        "s3",
        &chain_switch(
            3,
            1,
            &memif(0, "client", &s23),
            "fabric",
            &memif(1, "server", &gen_out),
            "edge",
            HOST_MAC,
            &telemetry,
        ),
    );
    let recv_pcap = dir.path("received.pcap");
    let mut receiver = generator(
        &[
            "--mode",
            "receive",
            "--until-idle",
            "3",
            "--capture",
            recv_pcap.to_str().unwrap(),
            "--src-mac",
            HOST_MAC,
        ],
        &memif(0, "client", &gen_out),
        &format!("pint-tel-rx-{}", std::process::id()),
        0,
    );
    let received = report_of(&mut receiver);
    std::thread::sleep(Duration::from_millis(500));
    let mut sender = generator(
        &[&["--mode", "send"], TRAFFIC].concat(),
        &memif(0, "client", &gen_in),
        &format!("pint-tel-tx-{}", std::process::id()),
        1,
    );
    let sent = report_of(&mut sender);

    // A new plan halfway through, then an invalid query file.
    std::thread::sleep(Duration::from_millis(2200));
    let new_text = PAPER
        .replace("frequency = \"15/16\"", "frequency = \"7/8\"")
        .replace("frequency = \"1/16\"", "frequency = \"1/8\"");
    std::fs::write(&queries, &new_text).unwrap();
    for s in [&s1, &s2, &s3] {
        signal(&s.child, libc::SIGHUP);
    }
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(&queries, "global_bits = 16\n[[queries]]\nname = \"x\"\n").unwrap();
    for s in [&s1, &s2, &s3] {
        signal(&s.child, libc::SIGHUP);
    }

    let sent = sent
        .recv_timeout(Duration::from_secs(60))
        .expect("sender report");
    let received = received
        .recv_timeout(Duration::from_secs(60))
        .expect("receiver report");
    // Every switch holds, so that none can be caught in a call on a memif port whose peer
    // leaves; then servers leave before their memif clients (see docs/config.md).
    for s in [&s1, &s2, &s3] {
        s.hold();
    }
    let (sum1, log1) = s1.stop();
    let (sum2, log2) = s2.stop();
    let (sum3, log3) = s3.stop();
    finish_generator(sender);
    finish_generator(receiver);
    let got = sink.stop();
    assert!(
        got.errors.is_empty(),
        "the sink rejected frames: {:?}",
        got.errors
    );

    // Everything sent arrived, and every frame is what plain forwarding would have made of
    // it: no shim, TTL down by three, the last hop's MACs, nothing else changed.
    let n = sent["sent"]["packets"].as_u64().unwrap();
    assert_eq!(n, truth.flows.values().map(|v| v.0).sum::<u64>(), "{sent}");
    assert_eq!(
        received["received"]["packets"].as_u64(),
        Some(n),
        "{received}"
    );
    assert_eq!(received["received"]["flows"]["lost"].as_u64(), Some(0));
    let frames = dataplane::capture::read_pcap(&recv_pcap).unwrap();
    assert_eq!(frames.len() as u64, n);
    let mut seen = std::collections::HashSet::new();
    for f in &frames {
        let key = (flow_key_of(f).expect("IPv4").0, ident(f));
        let orig = &truth.frames[&key];
        assert_eq!(
            f,
            &plainly_forwarded(orig),
            "flow {} ident {}",
            key.0,
            key.1
        );
        assert!(seen.insert(key), "flow {} ident {} twice", key.0, key.1);
    }
    assert_eq!(seen.len(), truth.frames.len());
    assert!(frames.iter().filter_map(|f| tag_of(f)).count() > frames.len() / 2);

    // The plans: the first, then the new one; the invalid file changed nothing.
    let v1 = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let v2 = Plan::compile(&QueryFile::from_toml(&new_text).unwrap()).unwrap();
    for (s, log) in [(&sum1, &log1), (&sum2, &log2), (&sum3, &log3)] {
        let t = &s.telemetry;
        assert_eq!(
            t.plans_installed,
            vec![format!("{:08x}", v1.version), format!("{:08x}", v2.version)],
            "{log}"
        );
        assert_eq!(t.reloads_rejected, 1);
        assert_eq!(t.digests_dropped, 0);
        assert_eq!(t.flowsets_dropped, 0);
        assert_eq!(s.dropped(), 0);
    }
    assert!(
        log3.contains("plan reload rejected, nothing changed"),
        "{log3}"
    );

    // The digests decode with the plan each names, to the configured path.
    let plans: HashMap<u32, Plan> = [(v1.version, v1), (v2.version, v2)].into_iter().collect();
    assert_eq!(
        got.digest_count,
        sum3.telemetry
            .events
            .get(pipeline::TelemetryEvent::DigestRecorded)
    );
    let versions: std::collections::BTreeSet<u32> =
        got.digests.iter().map(|d| d.plan_version).collect();
    assert_eq!(versions.len(), 2, "digests under both plans");
    let (flows, decoded) = check_digests(&got, &plans);
    assert!(
        decoded >= flows / 2,
        "{decoded} of {flows} (flow, plan) pairs decoded"
    );

    // The flowsets: at every switch, each flow's counters over the epochs are exactly the
    // packets and bytes pint-gen sent.
    let mut counted: HashMap<(u32, FlowKey), (u64, u64)> = HashMap::new();
    for f in &got.flowsets {
        let d = single_decode(&f.flowset.flowset);
        assert!(
            d.complete,
            "switch {} epoch {}",
            f.flowset.switch_id, f.flowset.epoch
        );
        for fl in d.flows {
            let e = counted.entry((f.flowset.switch_id, fl.key)).or_default();
            e.0 += fl.packets;
            e.1 += fl.bytes;
        }
    }
    for s in 1..=3u32 {
        for (key, want) in &truth.flows {
            assert_eq!(
                counted.get(&(s, *key)),
                Some(want),
                "flow {key} at switch {s}"
            );
        }
        let theirs = counted.keys().filter(|(sw, _)| *sw == s).count();
        assert_eq!(
            theirs,
            truth.flows.len(),
            "no flow counted that was not sent"
        );
    }
}

/// One switch with one edge port (a memif server at `sock`) that sends everything back out
/// of it: pint-gen sends and receives through it.
fn loop_switch(id: u32, sock: &Path, sink: std::net::SocketAddr, port_extra: &str) -> String {
    format!(
        r#"switch_id = {id}
[eal]
main_lcore = 0
[stats]
interval_ms = 500
[[ports]]
name = "gen"
device = "{}"
role = "edge"
mac = "02:00:00:00:00:01"
{port_extra}
[[workers]]
lcore = 1
rx = ["gen"]
[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{{ port = "gen", mac = "02:00:00:00:aa:01" }}]
[telemetry]
sink = "{sink}"
"#,
        memif(0, "server", sock)
    )
}

/// A switch keeps forwarding at full pace while its sink is gone, and reconnects when the
/// sink comes back (pint-gen sending and receiving through one switch).
#[test]
fn a_sink_that_goes_away_does_not_disturb_forwarding() {
    let _serial = serial();
    let dir = Scratch::new("tel-outage").unwrap();
    let sink = Collector::start(false).unwrap();
    let addr = sink.addr();
    let sock = dir.path("loop.sock");
    let config = loop_switch(5, &sock, addr, "");
    let switch = start_switch(&dir, "loop", &config);
    let mut g = generator(
        &[
            "--mode",
            "both",
            "--rate",
            "40Kpps",
            "--duration",
            "6",
            "--flows",
            "100",
        ],
        &memif(0, "client", &sock),
        &format!("pint-tel-loop-{}", std::process::id()),
        0,
    );
    let report = report_of(&mut g);
    std::thread::sleep(Duration::from_millis(1500));
    let before = sink.stop();
    assert!(before.digest_count > 0, "digests arrived before the outage");
    std::thread::sleep(Duration::from_millis(2000));
    let back = Collector::bind(addr, false).unwrap();
    let run = report
        .recv_timeout(Duration::from_secs(60))
        .expect("pint-gen report");
    let after = back.stop();
    let (sum, log) = switch.stop();
    finish_generator(g);

    let sent = run["sent"]["packets"].as_u64().unwrap();
    assert_eq!(sent, 240_000);
    assert_eq!(
        run["lost"].as_u64(),
        Some(0),
        "nothing lost while the sink was gone"
    );
    // Every two seconds of the traffic (but its first and last interval) forwarded at the
    // offered rate: windows as long as the outage, so that a machine that stalls the
    // generator or the switch for a moment (packets late by a tenth of a second, then
    // caught up: nothing lost) does not count as a slowdown, while one that lasts as long
    // as the outage does.
    let rates: Vec<f64> = sum.intervals.iter().map(|i| i.rx_mpps).collect();
    let active: Vec<&Interval> = sum.intervals.iter().filter(|i| i.rx_mpps > 0.0).collect();
    assert!(active.len() >= 8, "{rates:?}");
    let full = &active[1..active.len() - 1];
    let slow: Vec<(f64, f64)> = (0..full.len())
        .filter_map(|start| {
            // Millions of packets in the intervals from `full[start]` on, and the seconds
            // they span, until they span two.
            let begin = active[start].t;
            let mut packets = 0.0;
            for (prev, i) in active[start..].iter().zip(&full[start..]) {
                packets += i.rx_mpps * (i.t - prev.t);
                let seconds = i.t - begin;
                if seconds >= 2.0 {
                    return Some((begin, packets / seconds));
                }
            }
            None
        })
        .filter(|&(_, mpps)| mpps <= 0.036)
        .collect();
    assert!(
        slow.is_empty(),
        "forwarding slowed down (from t, Mpps over two seconds): {slow:?}; intervals {rates:?}\n{log}"
    );
    assert!(
        after.hellos.len() == 1 && after.digest_count > 0,
        "reconnected: {after:?}"
    );
    let t = &sum.telemetry;
    assert!(t.sink_connections >= 2, "{t:?}");
    assert_eq!(t.sink, Some(addr.to_string()), "{t:?}");
    assert!(log.contains(&format!("| sink {addr}: ")), "{log}");
    assert!(
        t.digests_dropped > 0,
        "digests during the outage were dropped and counted"
    );
    assert_eq!(sum.dropped(), 0);
}

/// Two workers, each with its own rx queue of one port (as RSS spreads flows): each worker's
/// flowsets decode on their own, and together they count every flow exactly.
#[test]
fn two_workers_export_flowsets_that_decode_exactly() {
    let _serial = serial();
    let dir = Scratch::new("tel-rss").unwrap();
    let sink = Collector::start(true).unwrap();
    // Flows split over two captures by a hash of the 5-tuple, one per rx queue.
    let frames = dataplane::capture::demo_mix(3000, telemetry::wire::MacAddr([2, 0, 0, 0, 0, 1]));
    let mut queues: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut truth: HashMap<FlowKey, (u64, u64)> = HashMap::new();
    for f in frames {
        let forwarded = f.len() >= 42
            && f[12..14] == [0x08, 0x00]
            && f[22] > 1
            && telemetry::wire::checksum::ones_complement_sum(&f[14..34]) == 0xffff;
        if f.len() < 42 || f[12..14] != [0x08, 0x00] {
            queues[0].push(f);
            continue;
        }
        let parsed = flow_key_of(&f);
        if forwarded
            && let Some((key, bytes)) = parsed
            && key.dst >> 16 == 0x0a01
        {
            let e = truth.entry(key).or_default();
            e.0 += 1;
            e.1 += u64::from(bytes);
        }
        let src = parsed.map_or_else(
            || u32::from_be_bytes(f[26..30].try_into().unwrap()),
            |(k, _)| k.src,
        );
        queues[(telemetry::hash::mix64(u64::from(src)) & 1) as usize].push(f);
    }
    let (q0, q1) = (dir.path("q0.pcap"), dir.path("q1.pcap"));
    dataplane::capture::write_pcap(&q0, queues[0].iter().map(Vec::as_slice)).unwrap();
    dataplane::capture::write_pcap(&q1, queues[1].iter().map(Vec::as_slice)).unwrap();
    let config = format!(
        r#"switch_id = 7
[stats]
interval_ms = 0
[[ports]]
name = "in"
device = "net_pcap0,rx_pcap={},rx_pcap={}"
role = "edge"
mac = "02:00:00:00:00:01"
[[ports]]
name = "out"
device = "net_null0,no-rx=1"
role = "fabric"
mac = "02:00:00:00:01:00"
[[workers]]
lcore = 0
rx = ["in:0"]
[[workers]]
lcore = 1
rx = ["in:1"]
[[routes]]
prefix = "10.1.0.0/16"
next_hops = [{{ port = "out", mac = "02:00:00:00:02:00" }}]
[telemetry]
sink = "{}"
epoch_ms = 5
[telemetry.flowradar]
expected_flows = 2000
"#,
        q0.display(),
        q1.display(),
        sink.addr()
    );
    let cfg = dir.path("rss.toml");
    std::fs::write(&cfg, config).unwrap();
    let summary = dir.path("rss.json");
    let out = Command::new(env!("CARGO_BIN_EXE_pint-bench"))
        .args(["switch", "--config"])
        .arg(&cfg)
        .args(["--duration", "120", "--until-idle", "500", "--summary-json"])
        .arg(&summary)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    std::thread::sleep(Duration::from_millis(300));
    let got = sink.stop();
    let sum = Summary::from_json(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert!(
        sum.worker_rx_packets.iter().all(|n| *n > 0),
        "both workers received: {:?}",
        sum.worker_rx_packets
    );
    assert_eq!(sum.workers.len(), 2);
    assert_eq!(
        sum.workers.iter().map(|w| w.rx_packets).sum::<u64>(),
        sum.rx_packets
    );
    assert_eq!(
        sum.workers.iter().map(|w| w.tx_packets).sum::<u64>(),
        sum.tx_packets
    );
    assert!(
        sum.workers.iter().all(|w| w.epochs_closed > 0),
        "{:?}",
        sum.workers
    );
    let hello = &got.hellos[0];
    assert_eq!(hello.table_seeds.len(), 2);
    assert_ne!(
        hello.table_seeds[0], hello.table_seeds[1],
        "a seed per worker"
    );
    let mut counted: HashMap<FlowKey, (u64, u64)> = HashMap::new();
    let mut workers = std::collections::BTreeSet::new();
    for f in &got.flowsets {
        workers.insert(f.worker);
        let d = single_decode(&f.flowset.flowset);
        assert!(d.complete, "worker {} epoch {}", f.worker, f.flowset.epoch);
        for fl in d.flows {
            let e = counted.entry(fl.key).or_default();
            e.0 += fl.packets;
            e.1 += fl.bytes;
        }
    }
    assert_eq!(workers.len(), 2, "flowsets from both workers");
    assert_eq!(sum.telemetry.flowsets_dropped, 0, "{log}");
    for (key, want) in &truth {
        assert_eq!(counted.get(key), Some(want), "flow {key}");
    }
    assert_eq!(counted.len(), truth.len(), "{log}");
}

/// A switch (ID 9) that replays the demo's traffic mix from its edge port `hosts` to its
/// fabric port `up` (a null device), over and over; `extra` is the rest of its config
/// (tables: it comes last).
fn replay_switch(dir: &Scratch, extra: &str) -> String {
    let frames = dataplane::capture::demo_mix(500, telemetry::wire::MacAddr([2, 0, 0, 0, 0, 1]));
    let pcap = dir.path("in.pcap");
    dataplane::capture::write_pcap(&pcap, frames.iter().map(Vec::as_slice)).unwrap();
    format!(
        r#"switch_id = 9
[[ports]]
name = "hosts"
device = "net_pcap0,rx_pcap={},infinite_rx=1"
role = "edge"
mac = "02:00:00:00:00:01"
[[ports]]
name = "up"
device = "net_null0,no-rx=1"
role = "fabric"
mac = "02:00:00:00:01:00"
[[workers]]
lcore = 1
rx = ["hosts"]
[[routes]]
prefix = "10.0.0.0/8"
next_hops = [{{ port = "up", mac = "02:00:00:00:02:00" }}]
{extra}"#,
        pcap.display()
    )
}

/// The metrics endpoint serves what promtool accepts, with the switch's counters in it.
#[test]
fn metrics_pass_promtool() {
    let _serial = serial();
    let dir = Scratch::new("tel-metrics").unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = replay_switch(
        &dir,
        &format!(
            "[stats]\ninterval_ms = 200\n[telemetry]\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"
        ),
    );
    let switch = start_switch(&dir, "metrics", &config);
    std::thread::sleep(Duration::from_millis(1500));
    let resp = bench::lab::http::get(([127, 0, 0, 1], port).into(), "/metrics");
    let (_, log) = switch.stop();
    let (status, body) = resp.unwrap();
    assert_eq!(status, 200, "{body}\n{log}");
    for want in [
        "pint_switch_rx_packets_total{port=\"hosts\",worker=\"0\"}",
        "pint_switch_dropped_packets_total{reason=\"ttl_expired\",worker=\"0\"}",
        "pint_switch_telemetry_events_total{event=\"shim_inserted\",worker=\"0\"}",
        "pint_switch_plan_info{version=",
        "pint_switch_tsc_hertz ",
        "pint_switch_port_rx_missed_packets_total{port=\"hosts\"} 0",
        "pint_switch_port_tx_errors_total{port=\"up\"} 0",
        "pint_switch_tx_full_dropped_packets_total{port=\"up\",worker=\"0\"} 0",
        // No sink: flowsets are made and dropped, none exported.
        "pint_switch_flowsets_exported_total 0",
        "pint_switch_digests_exported_total 0",
    ] {
        assert!(body.contains(want), "{want} missing:\n{body}");
    }
    let dropped = body
        .lines()
        .find_map(|l| l.strip_prefix("pint_switch_export_dropped_flowsets_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(dropped.is_some_and(|n| n > 0), "{body}");
    if let Err(e) = bench::promtool::check_metrics(&body) {
        panic!("promtool check metrics:\n{e}\n{body}");
    }
}

/// A sink that refuses the switch (closes its connections just after the hello) is said
/// once, and the connection that then lasts is said too.
#[test]
fn a_refusing_sink_and_the_connection_that_lasts_are_said() {
    let _serial = serial();
    let dir = Scratch::new("tel-refused").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Two connections taken and closed at once, then a sink that keeps them.
    let refuser = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut c, _) = listener.accept().unwrap();
            let mut hello = [0u8; 64];
            let _ = c.read(&mut hello);
        }
        drop(listener);
        Collector::bind(addr, false).unwrap()
    });
    let config = replay_switch(&dir, &format!("[telemetry]\nsink = \"{addr}\"\n"));
    let switch = start_switch(&dir, "refused", &config);
    let sink = refuser.join().unwrap();
    // The connection that lasts is said after two writes 2 s or more after its hello.
    let t0 = std::time::Instant::now();
    while sink.snapshot().flowset_count < 10 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(4));
    let got = sink.stop();
    let (_, log) = switch.stop();
    assert_eq!(got.connections, 1, "{log}");
    let refused = log
        .find("ms after the hello")
        .unwrap_or_else(|| panic!("no refusal said:\n{log}"));
    let kept = log
        .find("connected, and the sink keeps the connection")
        .unwrap_or_else(|| panic!("the lasting connection not said:\n{log}"));
    assert!(refused < kept, "{log}");
    assert_eq!(log.matches("sink keeps the connection").count(), 1, "{log}");
}

/// The edge switch reports the probes that leave the network through it: every probe
/// pint-gen received back was reported to the sink once, with its stream, sequence number
/// and send time, and a departure time after it was sent.
#[test]
fn the_edge_switch_exports_probe_arrivals() {
    let _serial = serial();
    let dir = Scratch::new("tel-probes").unwrap();
    let sink = Collector::start(true).unwrap();
    let sock = dir.path("probe.sock");
    let config = loop_switch(9, &sock, sink.addr(), "");
    let switch = start_switch(&dir, "probes", &config);
    let mut g = generator(
        &[
            "--mode",
            "both",
            "--rate",
            "5Kpps",
            "--duration",
            "2",
            "--flows",
            "20",
            "--probes",
            "3",
            "--probe-hz",
            "100",
        ],
        &memif(0, "client", &sock),
        &format!("pint-tel-probe-{}", std::process::id()),
        0,
    );
    let report = report_of(&mut g)
        .recv_timeout(Duration::from_secs(60))
        .expect("pint-gen report");
    let (sum, log) = switch.stop();
    finish_generator(g);
    let got = sink.stop();
    assert!(got.errors.is_empty(), "{:?}", got.errors);

    let received = &report["received"]["probes"];
    let n = received["received"].as_u64().unwrap();
    assert!(n >= 3 * 150, "{report}");
    assert_eq!(received["lost"].as_u64(), Some(0), "{report}");
    assert_eq!(got.probes.len() as u64, n, "{log}");
    let mut per_stream: HashMap<u32, Vec<u64>> = HashMap::new();
    for p in &got.probes {
        assert_eq!(
            p.key.dst_port,
            bench::generator::traffic::PROBE_PORT,
            "{p:?}"
        );
        assert!(
            p.recv_ns >= p.sent_ns && p.recv_ns - p.sent_ns < 1_000_000_000,
            "{p:?}"
        );
        per_stream.entry(p.stream).or_default().push(p.seq);
    }
    assert_eq!(per_stream.len(), 3);
    for seqs in per_stream.values_mut() {
        seqs.sort_unstable();
        let want: Vec<u64> = (0..seqs.len() as u64).collect();
        assert_eq!(*seqs, want, "each probe once, none missing");
    }
    assert_eq!(sum.dropped(), 0);
}

/// Runs pint-gen sending and receiving 20K packets a second (with `args`) through switch
/// `id`, whose one port has the impairment `impair`; returns pint-gen's report and the
/// switch's summary and output.
fn through_impairment(
    id: u32,
    tag: &str,
    impair: &str,
    args: &[&str],
) -> (serde_json::Value, Summary, String) {
    let _serial = serial();
    let dir = Scratch::new(&format!("tel-{tag}")).unwrap();
    let sink = Collector::start(false).unwrap();
    let sock = dir.path("impair.sock");
    let config = loop_switch(id, &sock, sink.addr(), &format!("impair = {{ {impair} }}"));
    let switch = start_switch(&dir, tag, &config);
    let mut all = vec!["--mode", "both", "--rate", "20Kpps"];
    all.extend_from_slice(args);
    let mut g = generator(
        &all,
        &memif(0, "client", &sock),
        &format!("pint-tel-{tag}-{}", std::process::id()),
        0,
    );
    let run = report_of(&mut g)
        .recv_timeout(Duration::from_secs(60))
        .expect("pint-gen report");
    let (sum, log) = switch.stop();
    finish_generator(g);
    drop(sink.stop());
    (run, sum, log)
}

/// A port's impairment drops, delays and reorders what it sends, and the switch counts what
/// it dropped: exactly what pint-gen found missing.
#[test]
fn an_impaired_port_loses_delays_and_reorders_and_counts_it() {
    let (run, sum, log) = through_impairment(
        11,
        "impair",
        "loss = 0.05, delay_us = 5000, jitter_us = 1000, reorder = 0.02",
        &[
            "--duration",
            "3",
            "--flows",
            "50",
            "--probes",
            "2",
            "--probe-hz",
            "500",
        ],
    );

    let sent = run["sent"]["packets"].as_u64().unwrap();
    let lost = run["lost"].as_u64().unwrap();
    let dropped = sum.drops.get(pipeline::DropReason::ImpairLoss);
    assert_eq!(
        lost, dropped,
        "pint-gen's missing packets are the impairment's\n{log}"
    );
    // Counted on the port whose impairment dropped them too.
    let port = sum.ports.iter().find(|p| p.name == "gen").unwrap();
    assert_eq!(port.impair_lost, dropped, "{sum:?}");
    assert_eq!(sum.drops.get(pipeline::DropReason::ImpairOverflow), 0);
    // A packet counts as sent when it leaves the delay line for the device: everything
    // received is sent or dropped and counted, and what was sent arrived.
    assert_eq!(
        sum.rx_packets,
        sum.tx_packets + sum.drops.total() + sum.tx_full_drops,
        "{sum:?}"
    );
    assert_eq!(
        sum.tx_packets,
        run["received"]["packets"].as_u64().unwrap(),
        "{sum:?}\n{run}"
    );
    let share = lost as f64 / sent as f64;
    assert!((0.035..0.065).contains(&share), "{lost} of {sent}");
    assert!(sum.impair_delayed > sent / 2, "{sum:?}");
    assert!(sum.impair_reordered > 0, "{sum:?}");
    let probes = &run["received"]["probes"];
    let lat = probes["latency_ns"].as_array().unwrap();
    let median = lat[1].as_u64().unwrap();
    // Most probes wait in the delay line (5 ms +- 1 ms, order kept: a packet waits at
    // least as long as the one before it); the reordered ones overtake it and arrive out
    // of order. (Lower bounds only: a loaded machine adds to latency.)
    assert!(median >= 4_000_000, "{probes}");
    assert!(probes["reordered"].as_u64().unwrap() > 0, "{probes}");
}

/// A delay line over its limit drops what does not fit, counted under its reason and on its
/// port: together with the impairment's loss, what pint-gen found missing.
#[test]
fn an_overflowing_delay_line_is_counted_on_its_port() {
    // 20K packets a second held 5 ms: about 100 in the line, where 20 fit.
    let (run, sum, log) = through_impairment(
        12,
        "overflow",
        "loss = 0.05, delay_us = 5000, limit = 20",
        &["--duration", "2", "--flows", "20"],
    );

    let lost = sum.drops.get(pipeline::DropReason::ImpairLoss);
    let over = sum.drops.get(pipeline::DropReason::ImpairOverflow);
    assert!(lost > 0 && over > 0, "{sum:?}\n{log}");
    let port = sum.ports.iter().find(|p| p.name == "gen").unwrap();
    assert_eq!(
        (port.impair_lost, port.impair_overflow),
        (lost, over),
        "{sum:?}"
    );
    assert_eq!(run["lost"].as_u64().unwrap(), lost + over, "{run}\n{log}");
    assert_eq!(
        sum.rx_packets,
        sum.tx_packets + sum.drops.total() + sum.tx_full_drops,
        "{sum:?}"
    );
}

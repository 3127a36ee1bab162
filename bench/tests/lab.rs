//! The lab with the real binaries: pint-lab starts pint-sink, pint-switch processes linked
//! over memif and pint-gen hosts, impairs a link, and reports. Checked against the traffic's
//! own truth (the generators' traffic written to captures): every flow's decoded path is its
//! route, FlowRadar's counts are exact at every switch, the loss found on the impaired link
//! is what its impairment dropped and none is found elsewhere, the delay event points at the
//! impaired link; the report and the sink's live page render in headless Chromium; a switch
//! that dies stops the lab with its last output and leaves nothing behind.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bench::lab::plan::{Endpoints, LabPlan};
use bench::lab::{Lab, LabReport};
use bench::scratch::Scratch;
use telemetry::flowradar::FlowKey;

/// Labs use memif sockets and both CPUs: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The leaf-spine lab, shortened: traffic for 12 s, the impairment from 3 s to 9 s.
const LEAF_SPINE: &str = r#"
name = "leaf-spine-test"
duration_s = 12
queries = "QUERIES"
[topology]
kind = "leaf-spine"
spines = 2
leaves = 3
[traffic]
rate_pps = 1500
flows = 12
packet_size = "imix"
tcp_share = 0.3
probes = 6
probe_hz = 50
[[impair]]
link = ["spine1", "leaf3"]
loss = 0.05
delay_us = 20000
jitter_us = 10000
from_s = 3
until_s = 9
"#;

fn write_lab(dir: &Scratch, name: &str, text: &str) -> PathBuf {
    let queries = repo().join("configs/queries/paper.toml");
    let path = dir.path(name);
    std::fs::write(
        &path,
        text.replace("QUERIES", &queries.display().to_string()),
    )
    .unwrap();
    path
}

fn pint_lab(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pint-lab"));
    c.args(args).stdin(Stdio::null());
    c
}

/// Processes whose command line mentions `dir` (a lab's processes all do).
fn left_behind(dir: &Path) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-a", "-f"])
        .arg(dir.display().to_string())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// memif sockets left in a run directory.
fn sockets_left(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default()
}

/// No lab process and no memif socket left behind.
fn assert_nothing_left(run_dir: &Path) {
    assert!(
        left_behind(run_dir).is_empty(),
        "{:?}",
        left_behind(run_dir)
    );
    assert!(
        sockets_left(run_dir).is_empty(),
        "{:?}",
        sockets_left(run_dir)
    );
}

/// Per flow: (packets, IPv4 bytes) the generators send, from their traffic written to a
/// capture with the same arguments.
fn truth(dir: &Scratch, plan: &LabPlan) -> HashMap<FlowKey, (u64, u64)> {
    let mut flows: HashMap<FlowKey, (u64, u64)> = HashMap::new();
    for g in &plan.generators {
        if !g.args.iter().any(|a| a == "both") {
            continue;
        }
        // The traffic options only: no port, no EAL.
        let mut args = Vec::new();
        let mut it = g.args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--" => break,
                "--port" | "--mode" | "--linger" | "--until-idle" | "--idle-sleep-us" => {
                    it.next();
                }
                "--json" => {}
                _ => args.push(a.clone()),
            }
        }
        let pcap = dir.path(&format!("truth-{}.pcap", g.node));
        let out = Command::new(env!("CARGO_BIN_EXE_pint-gen"))
            .args(&args)
            .arg("--write-pcap")
            .arg(&pcap)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for f in dataplane::capture::read_pcap(&pcap).unwrap() {
            let (key, bytes) = bench::generator::flow_key_of(&f).expect("pint-gen sends IPv4");
            let e = flows.entry(key).or_default();
            e.0 += 1;
            e.1 += u64::from(bytes);
        }
    }
    flows
}

fn key_of(label: &str) -> FlowKey {
    // `10.0.2.1:1024 > 10.0.3.7:9000 udp`
    let mut parts = label.split_whitespace();
    let (src, sport) = parts.next().unwrap().split_once(':').unwrap();
    parts.next();
    let (dst, dport) = parts.next().unwrap().split_once(':').unwrap();
    let proto = match parts.next().unwrap() {
        "tcp" => 6,
        "udp" => 17,
        other => panic!("{other}"),
    };
    FlowKey {
        src: u32::from(src.parse::<std::net::Ipv4Addr>().unwrap()),
        dst: u32::from(dst.parse::<std::net::Ipv4Addr>().unwrap()),
        src_port: sport.parse().unwrap(),
        dst_port: dport.parse().unwrap(),
        protocol: proto,
    }
}

/// Headless Chromium: (screenshot bytes, the DOM after load).
fn chromium(url: &str, dir: &Scratch, name: &str) -> (u64, String) {
    let shot = dir.path(&format!("{name}.png"));
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1200,1600",
    ];
    let user = dir.path(&format!("chromium-{name}"));
    let out = Command::new("chromium")
        .args(common)
        .arg(format!("--user-data-dir={}", user.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .output()
        .expect("chromium (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    let dom = Command::new("chromium")
        .args(common)
        .arg(format!("--user-data-dir={}", user.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    (size, String::from_utf8_lossy(&dom.stdout).into_owned())
}

/// Headless Chromium's DOM of `url` after `ms` of the page's own (virtual) time: its timers
/// run, so the live page's refresh does.
fn chromium_after(url: &str, dir: &Scratch, name: &str, ms: u32) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path(&format!("chromium-{name}")).display()
        ))
        .arg(format!("--virtual-time-budget={ms}"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium (scripts/setup.sh installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The live page refreshes itself in place, and keeps its last view, saying since when,
/// once the sink stops answering (a reload showed the browser's error page, and stopped).
#[test]
fn the_live_page_keeps_its_last_view_when_the_sink_stops_answering() {
    let dir = Scratch::new("live-page").unwrap();
    let sink = sink::Sink::start(sink::SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: Some("127.0.0.1:0".parse().unwrap()),
        ..sink::SinkConfig::default()
    })
    .unwrap();
    let http = sink.http_addr().unwrap();
    let url = format!("http://{http}/");
    // Two refreshes with the sink up: the view is the sink's, no line about it.
    let up = chromium_after(&url, &dir, "up", 7000);
    assert!(up.contains("id=\"title\""), "{up}");
    assert!(!up.contains("id=\"unreachable\""), "{up}");
    // The same page where nothing answers its refresh (the sink gone).
    let (status, body) = bench::lab::http::get(http, "/").unwrap();
    assert_eq!(status, 200);
    sink.stop();
    let saved = dir.path("live.html");
    std::fs::write(&saved, body).unwrap();
    let down = chromium_after(&format!("file://{}", saved.display()), &dir, "down", 7000);
    assert!(down.contains("id=\"title\""), "the last view stays: {down}");
    assert!(
        down.contains("id=\"unreachable\"") && down.contains("The sink has not answered since"),
        "{down}"
    );
    // Said in the tab's title too, once (a tab in the background shows nothing else).
    assert!(
        down.contains("<title>(not answering) pint-sink</title>"),
        "{down}"
    );
    assert!(up.contains("<title>pint-sink</title>"), "{up}");
}

#[test]
fn the_leaf_spine_lab_finds_its_impaired_link() {
    let _serial = serial();
    let dir = Scratch::new("lab-ls").unwrap();
    let lab_file = write_lab(&dir, "leaf-spine.toml", LEAF_SPINE);
    let run_dir = dir.path("run");
    let mut child = pint_lab(&["run", "--top", "1000", "--hold", "30", "--out"])
        .arg(&run_dir)
        .arg(&lab_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs: the sink's live page.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line
                .strip_prefix("pint-lab: traffic done")
                .and_then(|l| l.split_once("live page http://"))
            {
                let _ = tx.send(rest.split('/').next().unwrap().to_owned());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Once the traffic is over (Chromium's own load would disturb the delays measured),
    // while the lab is still up.
    let http = rx
        .recv_timeout(Duration::from_secs(300))
        .expect("the sink's address");
    let (live_png, live_dom) = chromium(&format!("http://{http}/"), &dir, "live");
    // SAFETY: signalling our own child: the lab stops now rather than at the end of --hold.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stdout = reader.join().unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(&run_dir);
    assert!(
        live_png > 20_000,
        "live page screenshot of {live_png} bytes"
    );
    assert!(live_dom.contains("id=\"topology\""), "{live_dom}");
    assert_eq!(
        live_dom.matches("class=\"switch\"").count(),
        5,
        "{live_dom}"
    );
    assert!(
        live_dom.contains("class=\"decoded"),
        "a flow's path: {live_dom}"
    );

    let report: LabReport =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
            .unwrap();
    assert!(report.all_ok(), "{}", report.text());
    // Every flow's decoded path is its route.
    assert!(report.flows_total >= 3 * 12, "{}", report.text());
    assert_eq!(
        report.flows_decoded,
        report.flows_total,
        "{}",
        report.text()
    );
    assert_eq!(
        report.flows_matching, report.flows_decoded,
        "{:?}",
        report.mismatches
    );
    for f in &report.flows {
        assert_eq!(f.decoded.as_ref(), Some(&f.route), "{}", f.flow);
    }

    // Counts: exact at every switch before the impaired link; after it, short by what the
    // impairment dropped, which is the loss found on that link and nowhere else.
    let lab = Lab::from_file(&lab_file).unwrap();
    let at = Endpoints {
        dir: run_dir.clone(),
        sink_listen: "127.0.0.1:1".parse().unwrap(),
        sink_http: "127.0.0.1:2".parse().unwrap(),
        main_lcore: 0,
        worker_lcores: vec![1],
    };
    let plan = LabPlan::new(&lab, &at).unwrap();
    let truth = truth(&dir, &plan);
    // The fabric's MTU leaves room for the shim: IMIX's 1500-byte packets carry telemetry
    // like the others, and only packets sent without one (never here) cross without.
    for s in &plan.switches {
        let summary: control::summary::Summary = serde_json::from_str(
            &std::fs::read_to_string(run_dir.join(format!("switch-{}.json", s.file_name))).unwrap(),
        )
        .unwrap();
        let events = &summary.telemetry.events;
        assert_eq!(
            events.get(pipeline::TelemetryEvent::NoTelemetryMtu),
            0,
            "{}: {events:?}",
            s.name
        );
        assert!(summary.rx_packets > 0, "{}", s.name);
    }
    assert_eq!(report.flows.len(), truth.len(), "every flow sent was seen");
    let mut short = 0;
    for f in &report.flows {
        let key = key_of(&f.flow);
        // Probes go out on the wall clock (the capture's count may differ by one per
        // stream): their counts are checked along the path, from the first switch's.
        let probe = key.dst_port == bench::generator::traffic::PROBE_PORT;
        let first = f
            .counters
            .iter()
            .find(|(s, _, _)| *s == f.route[0])
            .map(|(_, p, b)| (*p, *b))
            .unwrap_or_default();
        let want = if probe { first } else { truth[&key] };
        let crosses = f.route.windows(2).position(|w| w == ["spine1", "leaf3"]);
        for (i, sw) in f.route.iter().enumerate() {
            let got = f
                .counters
                .iter()
                .find(|(s, _, _)| s == sw)
                .map(|(_, p, b)| (*p, *b))
                .unwrap_or_else(|| panic!("{} not counted at {sw}", f.flow));
            if crosses.is_some_and(|c| i > c) {
                assert!(got.0 <= want.0, "{} at {sw}: {got:?} of {want:?}", f.flow);
                short += want.0 - got.0;
            } else {
                assert_eq!(got, want, "{} at {sw}", f.flow);
            }
        }
    }
    let link = report
        .links
        .iter()
        .find(|l| l.from == "spine1" && l.to == "leaf3")
        .unwrap();
    let dropped = link.impair_dropped.unwrap();
    // What the hosts counted: each hears two generators that number their flows and probe
    // streams alike, kept apart by sender. Only leaf3's traffic crosses the impaired link.
    for h in &report.hosts {
        if h.name == "leaf3" {
            assert!(h.lost + h.probes_lost > 0, "{h:?}");
        } else {
            assert_eq!((h.lost, h.late, h.probes_lost), (0, 0, 0), "{h:?}");
        }
    }
    let probes_sent: u64 = report.hosts.iter().map(|h| h.probes_sent).sum();
    let probes_heard: u64 = report
        .hosts
        .iter()
        .map(|h| h.probes_received + h.probes_lost)
        .sum();
    assert!(probes_sent > 0);
    assert_eq!(probes_heard, probes_sent, "{:?}", report.hosts);
    assert!(dropped > 20, "{}", report.text());
    assert_eq!(short, dropped, "{}", report.text());
    assert_eq!(link.lost_packets, dropped as i64);
    assert!(
        report
            .links
            .iter()
            .filter(|l| !(l.from == "spine1" && l.to == "leaf3"))
            .all(|l| l.lost_packets == 0)
    );
    // The delay events of the flows whose route crosses the impaired link point at it, and
    // start when the impairment does. Those the detector puts down to end-host noise alone
    // (isolated spikes: on this shared machine, scheduling) point at no link, as
    // docs/lab.md says. Flows whose route does not cross it carry no impairment: a delay
    // event on one of them is the machine's (its stalls delay every path, the switches all
    // share its cores), and the impaired flows' events may then run on past the
    // impairment, merged with the stalls after it; else they end with it.
    let impaired = |flow: &str| {
        report
            .flows
            .iter()
            .find(|f| f.flow == flow)
            .map(|f| f.route.windows(2).any(|w| w == ["spine1", "leaf3"]))
    };
    let delays: Vec<_> = report
        .events
        .iter()
        .filter(|e| e.kind == "delay" && !e.end_host_noise())
        .collect();
    let (on_path, stalls): (Vec<_>, Vec<_>) = delays.into_iter().partition(|e| {
        impaired(&e.flow).unwrap_or_else(|| panic!("{} is not a flow of the report", e.flow))
    });
    assert!(!on_path.is_empty(), "{}", report.text());
    for e in &on_path {
        assert_eq!(
            e.link,
            Some(("spine1".to_owned(), "leaf3".to_owned())),
            "{}",
            report.text()
        );
        assert!(e.start_s > 2.5 && e.start_s < 4.0, "{e:?}");
        assert!(e.end_s > 8.0, "{e:?}");
        if stalls.is_empty() {
            assert!(e.end_s < 10.0, "{e:?}");
        }
    }
    if !stalls.is_empty() {
        eprintln!(
            "the machine stalled the lab: {} delay events on flows without an impaired link",
            stalls.len()
        );
    }

    // The report renders: the topology with every switch, a flow's path.
    let html = run_dir.join("report.html");
    let (png, dom) = chromium(&format!("file://{}", html.display()), &dir, "report");
    assert!(png > 50_000, "report screenshot of {png} bytes");
    assert_eq!(dom.matches("class=\"switch\"").count(), 5);
    assert!(
        dom.contains("spine1 → leaf3") || dom.contains("leaf1 → spine1"),
        "a path"
    );
    assert!(
        stdout.contains("[ok] decoded paths equal routes"),
        "{stdout}"
    );
    // Every switch held (all its ports closed to its workers) before it was stopped; the
    // lab waits for all to hold before it stops the first, so that no worker is inside a
    // call on a memif port when its peer leaves.
    let mut held = 0;
    for entry in std::fs::read_dir(&run_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("switch-") && name.ends_with(".log") {
            let log = std::fs::read_to_string(&path).unwrap();
            let hold = log.find("holding (SIGUSR1)");
            assert!(
                hold.is_some_and(|h| log.find("stopping on signal") > Some(h)),
                "{name}: {log}"
            );
            held += 1;
        }
    }
    assert_eq!(held, 5);
}

#[test]
fn the_chain_and_the_fat_tree_labs_run() {
    let _serial = serial();
    let dir = Scratch::new("lab-more").unwrap();
    for (file, seconds, switches) in [("chain.toml", "8", 3), ("fat-tree.toml", "10", 20)] {
        let text = std::fs::read_to_string(repo().join("configs/labs").join(file))
            .unwrap()
            .replace("from_s = 5", "from_s = 2")
            .replace("until_s = 15", "until_s = 8")
            .replace("from_s = 3", "from_s = 2")
            .replace("until_s = 13", "until_s = 7");
        let lab_file = write_lab(&dir, file, &text);
        let run_dir = dir.path(&format!("run-{file}"));
        let t0 = Instant::now();
        let out = pint_lab(&["run", "--quiet", "--strict", "--duration", seconds, "--out"])
            .arg(&run_dir)
            .arg(&lab_file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{file}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_nothing_left(&run_dir);
        let report: LabReport =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report.switches.len(), switches);
        assert!(report.flows_decoded > 0 && report.flows_matching == report.flows_decoded);
        // Every switch's ports' driver counts add up to what it received, those of memif
        // ports whose peer left before it stopped too.
        let mut checked = 0;
        for entry in std::fs::read_dir(&run_dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !(name.starts_with("switch-") && name.ends_with(".json")) {
                continue;
            }
            let summary: control::summary::Summary =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let by_ports: u64 = summary.ports.iter().map(|p| p.stats.rx_packets).sum();
            assert_eq!(by_ports, summary.rx_packets, "{file}: {name}");
            assert!(summary.rx_packets > 0, "{file}: {name}");
            checked += 1;
        }
        assert_eq!(checked, switches, "{file}: every switch's summary");
        eprintln!("{file}: {:.0} s\n{stdout}", t0.elapsed().as_secs_f64());
    }
}

/// The chain lab started with 60 s of traffic (its output piped), and its run directory.
fn start_chain_lab(dir: &Scratch) -> (std::process::Child, PathBuf) {
    let text = std::fs::read_to_string(repo().join("configs/labs/chain.toml")).unwrap();
    let lab_file = write_lab(dir, "chain.toml", &text);
    let run_dir = dir.path("run");
    let child = pint_lab(&["run", "--quiet", "--duration", "60", "--out"])
        .arg(&run_dir)
        .arg(&lab_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, run_dir)
}

/// A Ctrl-C while the traffic runs stops it: the generators report what they sent, the
/// lab stops in order and writes its report, which says the run was cut short.
#[test]
fn a_ctrl_c_during_the_traffic_stops_the_lab_with_a_report() {
    let _serial = serial();
    let dir = Scratch::new("lab-ctrl-c").unwrap();
    let (child, run_dir) = start_chain_lab(&dir);
    let t0 = Instant::now();
    while !run_dir.join("gen-s3.log").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the generators never started"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A few seconds into the traffic.
    std::thread::sleep(Duration::from_secs(8));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("s into the traffic: stopping it"),
        "{stdout}"
    );
    // Its traffic had more than 50 s to go.
    assert!(
        signalled.elapsed() < Duration::from_secs(40),
        "the lab stopped at once, not when its traffic ended"
    );
    assert_nothing_left(&run_dir);
    let report: LabReport =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
            .unwrap();
    let cut = report
        .checks
        .iter()
        .find(|c| c.name == "the traffic ran its course")
        .expect("the report says the run was cut short");
    assert!(!cut.ok && cut.detail.contains("interrupted"), "{cut:?}");
    // Its time of traffic is what ran, not the 60 s asked for.
    assert!(
        report.planned_s == 60.0 && report.duration_s < 60.0,
        "{} of {} s",
        report.duration_s,
        report.planned_s
    );
    assert!(stdout.contains(" s planned) of traffic,"), "{stdout}");
    // The generators reported what they sent; the switches ended cleanly.
    let processes = report
        .checks
        .iter()
        .find(|c| c.name == "every process ended cleanly")
        .unwrap();
    assert!(processes.ok, "{processes:?}");
    assert!(report.flows_decoded > 0, "the traffic sent was decoded");
}

#[test]
fn a_switch_that_dies_stops_the_lab_and_nothing_is_left_behind() {
    let _serial = serial();
    let dir = Scratch::new("lab-dies").unwrap();
    let (child, run_dir) = start_chain_lab(&dir);
    // Once the traffic runs, kill the middle switch.
    let config = run_dir.join("switch-s2.toml");
    let t0 = Instant::now();
    let pid = loop {
        assert!(t0.elapsed() < Duration::from_secs(120), "s2 never started");
        let out = Command::new("pgrep")
            .args(["-f", &config.display().to_string()])
            .output()
            .unwrap();
        if let Some(p) = String::from_utf8_lossy(&out.stdout).lines().next()
            && run_dir.join("gen-s3.log").exists()
        {
            break p.trim().parse::<i32>().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_secs(5));
    // SAFETY: a process this test's lab started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("switch s2 died"), "{stderr}");
    assert!(stderr.contains("signal: 9"), "{stderr}");
    assert!(stderr.contains("pint-switch"), "its last output: {stderr}");
    assert_nothing_left(&run_dir);
    assert!(
        !run_dir.join("report.json").exists(),
        "no report of a lab cut short"
    );
    // Killed, the switch could not remove its DPDK runtime directory: the lab did.
    let rundir = bench::testpmd::eal_runtime_dir(&format!("pint-switch-2-{pid}"));
    let left = rundir.exists();
    let _ = std::fs::remove_dir(&rundir);
    assert!(!left, "{} left behind", rundir.display());
}

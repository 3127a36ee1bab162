//! The sink against an exact truth. An emulated fabric (the switches' own pipeline over real
//! frames) sends its traffic; each switch's exports go through the switch's own exporter
//! (`control::export`: hello, queue, TCP) to a real sink; the sink's HTTP API, metrics,
//! JSON lines and IPFIX (read back by Debian's nfcapd/nfdump) are checked against what the
//! fabric really did: routes, hop latencies, per-switch counts per epoch, packets lost on a
//! lossy link.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use bench::fabric_traffic::{
    Export, TrafficSpec, Truth, emulator, flowset_of, hello, plan_flows, route_of, run,
};
use bench::scratch::Scratch;
use control::export::{Announcement, Exporter, Outgoing};
use serde_json::Value;
use sink::{Sink, SinkConfig};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;

const PAPER: &str = include_str!("../../configs/queries/paper.toml");

/// GET `path`; (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    bench::lab::http::get(addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn json(addr: SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Digest batches each decode thread may have waiting. The emulator sends a run's minutes
/// of traffic in seconds, in thousands of small batches: on a machine busy with other work
/// the decode threads fall behind and the default queue (1024) would drop some (counted, as
/// designed). Sized to hold a whole run, so that the checks see every digest.
const QUEUE_BATCHES: usize = 1 << 16;

/// The topology in the sink's TOML adjacency form.
fn topology_toml(t: &Topology) -> String {
    let mut links = Vec::new();
    for a in 0..t.len() as u32 {
        for &b in t.neighbours(a) {
            if a < b {
                links.push(format!("[{}, {}]", t.switch_id(a), t.switch_id(b)));
            }
        }
    }
    format!("name = \"{}\"\nlinks = [{}]\n", t.name, links.join(", "))
}

/// Runs `spec` on `topology` into `sink`, through one exporter per switch, once the sink
/// knows every switch; the emulated clock starts at `start_ns` (Unix ns), or (None) once
/// the switches have said hello, as a real network's traffic would (counts of epochs
/// before a switch's hello are never asked of it).
fn drive(
    topology: &Topology,
    edges: &[u32],
    spec: &TrafficSpec,
    sink: &Sink,
    start_ns: Option<u64>,
) -> Truth {
    let known = || sink.shared().registry.switches().len() == topology.len();
    let sink = sink.listen_addr();
    let mut emu = emulator(topology.clone(), spec, start_ns.unwrap_or_else(unix_ns));
    let plan = SwitchPlan::compile(&spec.plan, 1).unwrap();
    let exporters: Vec<Exporter> = (0..topology.len() as u32)
        .map(|n| {
            let h = hello(&emu, n, &plan, &flowset_of(&emu, n));
            Exporter::start(
                sink.to_string(),
                Announcement {
                    hello: h,
                    older_plans: Vec::new(),
                },
                256 << 20,
            )
        })
        .collect();
    let t0 = Instant::now();
    while !exporters
        .iter()
        .all(|e| e.stats.connected.load(std::sync::atomic::Ordering::Relaxed))
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "switches connect");
        std::thread::sleep(Duration::from_millis(10));
    }
    while !known() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the sink knows every switch"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    if start_ns.is_none() {
        emu = emulator(topology.clone(), spec, unix_ns());
    }
    let truth = run(&mut emu, edges, spec, |e: Export| {
        let sent = exporters[e.node as usize].send(Outgoing {
            ty: e.ty,
            payload: e.payload,
            digests: 0,
            flowsets: 0,
            probes: 0,
        });
        assert!(sent, "the exporter's queue takes everything");
    });
    for e in exporters {
        e.finish(Duration::from_secs(30));
    }
    truth
}

/// Waits until the sink has every digest and flowset and no epoch is pending.
fn settle(sink: &Sink, truth: &Truth) {
    let shared = sink.shared();
    let t0 = Instant::now();
    loop {
        let digests: u64 = shared
            .shards
            .iter()
            .map(|s| s.table.lock().unwrap().stats.digests)
            .sum();
        let flowsets = shared
            .epochs
            .counters
            .flowsets
            .load(std::sync::atomic::Ordering::Relaxed);
        // Everything received; the last epochs' counters reach the decode threads once the
        // grace time passed: the health's backlog says when all of it is applied (the exact
        // counts and losses checked next would miss any part it left out).
        // Received is not applied: the last epochs' counters reach the decode threads once
        // the grace time passed, and the exact counts checked next would miss any left out.
        let b = shared.backlog();
        if digests == truth.digests
            && flowsets == truth.flowsets
            && (b.flowsets, b.decode_messages) == (0, 0)
        {
            return;
        }
        let sum = |f: fn(&sink::registry::SwitchCounters) -> &std::sync::atomic::AtomicU64| {
            shared
                .registry
                .switches()
                .iter()
                .map(|e| f(&e.counters).load(std::sync::atomic::Ordering::Relaxed))
                .sum::<u64>()
        };
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the sink took {digests} of {} digests ({} received, {} dropped, {} of an \
             unknown plan), {flowsets} of {} flowsets ({} received, {} dropped); frames: {} \
             received, {} rejected, {} sequence gaps, {} connections",
            truth.digests,
            sum(|c| &c.digests),
            sum(|c| &c.digests_dropped),
            sum(|c| &c.digests_unknown_plan),
            truth.flowsets,
            sum(|c| &c.flowsets),
            sum(|c| &c.flowsets_dropped),
            sum(|c| &c.frames),
            sum(|c| &c.rejected),
            sum(|c| &c.sequence_gaps),
            sum(|c| &c.connections),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn flow_path(t: &bench::fabric_traffic::FlowTruth) -> String {
    format!(
        "/api/flow?src={}&dst={}&sport={}&dport={}&proto={}",
        std::net::Ipv4Addr::from(t.key.src),
        std::net::Ipv4Addr::from(t.key.dst),
        t.key.src_port,
        t.key.dst_port,
        t.key.protocol
    )
}

/// A K = 4 fat tree, the paper's plan, 40 flows of 1000 packets, 10% loss on one link: every
/// flow's path decodes to its route, hop latency medians come out within the sketches'
/// documented error, every flow's counts at every switch are exact and counted in the right
/// number of epochs, the lossy link's loss is found exactly and no other link shows any, the
/// API and metrics say so, and the JSON lines hold every packet.
#[test]
fn the_sink_decodes_paths_latency_counters_and_loss() {
    let dir = Scratch::new("sink-e2e").unwrap();
    let topology = Topology::fat_tree(4);
    let edges = Topology::fat_tree_edges(4);
    let topo_file = dir.path("fabric.toml");
    std::fs::write(&topo_file, topology_toml(&topology)).unwrap();
    let mut spec = TrafficSpec {
        batch: 500,
        seed: 5,
        ..TrafficSpec::new(PAPER, 40, 1000)
    };
    // The lossy link: the second link of the first flow that crosses the core.
    let flows = plan_flows(&spec, &edges);
    let route = flows
        .iter()
        .map(|(src, _, p)| route_of(&topology, &spec, *src, p))
        .find(|r| r.len() == 5)
        .expect("some flow crosses the core");
    let lossy = (route[1], route[2]);
    spec.lossy_link = Some((lossy, 0.1));

    let json_lines = dir.path("flows.jsonl");
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: Some("127.0.0.1:0".parse().unwrap()),
        topology: Some(topo_file),
        decode_threads: 2,
        queue_batches: QUEUE_BATCHES,
        epoch_grace: Duration::from_secs(1),
        json_lines: Some(json_lines.clone()),
        ..SinkConfig::default()
    })
    .unwrap();
    let http = sink.http_addr().unwrap();
    let truth = drive(&topology, &edges, &spec, &sink, None);
    settle(&sink, &truth);
    let id = |n: u32| topology.switch_id(n);

    // Switches: all there, nothing refused or dropped.
    let switches = json(http, "/api/switches");
    let switches = switches.as_array().unwrap();
    assert_eq!(switches.len(), topology.len());
    let digests: u64 = switches
        .iter()
        .map(|s| s["digests"].as_u64().unwrap())
        .sum();
    assert_eq!(digests, truth.digests);
    for s in switches {
        assert_eq!(s["rejected"], 0, "{s}");
        assert_eq!(s["digests_dropped"], 0, "{s}");
        assert_eq!(s["flowsets_dropped"], 0, "{s}");
        assert_eq!(s["digests_unknown_plan"], 0, "{s}");
        // The session as 16 hex digits (a 64-bit number loses digits in JavaScript).
        let session = s["session"].as_str().unwrap_or_default();
        assert!(
            session.len() == 16 && u64::from_str_radix(session, 16).is_ok(),
            "{s}"
        );
        // The plan in force, as /api/plans names plans.
        let plan = s["plan"].as_str().unwrap_or_default();
        assert!(
            json(http, "/api/plans")
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["version"] == plan),
            "{s}"
        );
    }
    // Epochs: every one complete, decoded switch by switch (no burst here).
    let epochs = json(http, "/api/epochs?n=500");
    assert!(epochs["epochs"].as_u64().unwrap() >= 10, "{epochs}");
    assert_eq!(epochs["incomplete"], 0, "{epochs}");
    // Newest first, by start.
    let starts: Vec<u128> = epochs["latest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            u128::from(r["epoch"].as_u64().unwrap()) * u128::from(r["epoch_ns"].as_u64().unwrap())
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] >= w[1]), "{starts:?}");
    for r in epochs["latest"].as_array().unwrap() {
        assert_eq!(r["complete"], true, "{r}");
        // A flowset that came after its epoch was finished is decoded on its own.
        if r["late"] == false {
            assert_eq!(
                r["switches"].as_array().unwrap().len(),
                topology.len(),
                "{r}"
            );
        }
    }

    let mut lost_flows = 0;
    for t in &truth.flows {
        let f = json(http, &flow_path(t));
        // The path.
        let want: Vec<u64> = t.route.iter().map(|&n| u64::from(id(n))).collect();
        let got: Vec<u64> = f["path"]
            .as_array()
            .unwrap_or_else(|| panic!("flow {} not decoded: {f}", t.key))
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(got, want, "flow {}", t.key);
        assert_eq!(
            f["digests"].as_u64().unwrap(),
            t.delivered,
            "flow {}",
            t.key
        );
        // Counters: exact at every switch the flow crossed, in as many epochs as it was
        // counted there, nowhere else.
        let counters = f["counters"].as_array().unwrap();
        assert_eq!(counters.len(), t.counted.len(), "flow {}: {f}", t.key);
        for c in counters {
            let node = topology.node(c["switch"].as_u64().unwrap() as u32).unwrap();
            let (p, b) = t.counted[&node];
            assert_eq!(
                c["packets"].as_u64().unwrap(),
                p,
                "flow {} at {node}",
                t.key
            );
            assert_eq!(c["bytes"].as_u64().unwrap(), b, "flow {} at {node}", t.key);
            assert_eq!(
                c["epochs"].as_u64().unwrap(),
                t.epochs[&node].len() as u64,
                "flow {} at {node}: epochs",
                t.key
            );
        }
        // Latency: hop h holds packets uniformly in [0.5, 1.5] x h x 2 us, median h x 2 us.
        let lat = &f["latency"][0];
        let rank_error = lat["rank_error"].as_f64().unwrap();
        let hops = lat["hops"].as_array().unwrap();
        assert_eq!(hops.len(), t.route.len(), "flow {}: {lat}", t.key);
        for h in hops {
            let hop = h["hop"].as_u64().unwrap() as f64;
            let n = h["samples"].as_u64().unwrap() as f64;
            assert!(n >= 50.0, "flow {}: {h}", t.key);
            let median = h["quantiles"][0][1].as_f64().unwrap();
            let want = hop * 2_000.0;
            let tolerance = 2.0 * rank_error + 3.0 * 0.5 / n.sqrt() + 0.045;
            assert!(
                (median - want).abs() / want < tolerance,
                "flow {} hop {hop}: median {median} ns, truth {want} (tolerance {tolerance})",
                t.key
            );
            assert_eq!(
                h["switch"].as_u64(),
                Some(got[hop as usize - 1]),
                "flow {}",
                t.key
            );
        }
        if t.route.windows(2).any(|w| (w[0], w[1]) == lossy) && t.sent > t.delivered {
            lost_flows += 1;
            let loss = f["loss"].as_array().unwrap();
            let on = loss
                .iter()
                .find(|l| {
                    (l["from"].as_u64().unwrap(), l["to"].as_u64().unwrap())
                        == (u64::from(id(lossy.0)), u64::from(id(lossy.1)))
                })
                .unwrap();
            assert_eq!(on["lost_packets"].as_u64().unwrap(), t.sent - t.delivered);
        }
    }
    assert!(lost_flows > 0, "some flows crossed the lossy link");

    // Links: exactly the packets lost, on exactly that link.
    let links = json(http, "/api/links");
    let mut found = HashMap::new();
    for l in links.as_array().unwrap() {
        let k = (
            l["from"].as_u64().unwrap() as u32,
            l["to"].as_u64().unwrap() as u32,
        );
        found.insert(k, l["lost_packets"].as_i64().unwrap());
    }
    let lost = truth.lost[&lossy];
    assert!(lost > 100, "the link lost packets: {lost}");
    assert_eq!(found.get(&(id(lossy.0), id(lossy.1))), Some(&(lost as i64)));
    for (k, v) in &found {
        if *k != (id(lossy.0), id(lossy.1)) {
            assert_eq!(*v, 0, "link {k:?}");
        }
    }
    let health = json(http, "/api/health");
    assert_eq!(health["switches_connected"], 0);
    assert_eq!(
        health["backlog"],
        serde_json::json!({"flowsets": 0, "decode_messages": 0})
    );
    let flows = json(http, "/api/flows?top=5&by=packets");
    assert_eq!(flows.as_array().unwrap().len(), 5);
    let (status, body) = get(http, "/api/flows?by=colour");
    assert_eq!(status, 400, "{body}");
    let (status, _) = get(
        http,
        "/api/flow?src=1.2.3.4&dst=1.2.3.5&sport=1&dport=2&proto=6",
    );
    assert_eq!(status, 404);

    // Metrics: promtool-clean, with the link's loss and the switches' latency.
    let (status, metrics) = get(http, "/metrics");
    assert_eq!(status, 200);
    if let Err(e) = bench::promtool::check_metrics(&metrics) {
        panic!("promtool check metrics:\n{e}\n{metrics}");
    }
    let link_line = format!(
        "pint_sink_link_lost_packets{{from=\"{}\",to=\"{}\"}} {lost}",
        id(lossy.0),
        id(lossy.1)
    );
    assert!(
        metrics.contains(&link_line),
        "{link_line} missing:\n{metrics}"
    );
    assert!(metrics.contains("pint_sink_hop_latency_seconds{switch="));
    // Every kind of event with each label it can have from the start, at 0 until counted (a
    // series that first appears at 2 shows no increase to an alert).
    let event_series = metrics
        .lines()
        .filter(|l| l.starts_with("pint_sink_events_total{"))
        .count();
    assert_eq!(event_series, 15);
    // Everything applied: no backlog.
    for line in [
        "pint_sink_backlog_flowsets 0\n",
        "pint_sink_backlog_decode_messages 0\n",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }

    // JSON lines: at the stop every flow's remaining counts are written.
    sink.stop();
    let mut written: HashMap<(String, u64), u64> = HashMap::new();
    for line in std::fs::read_to_string(&json_lines).unwrap().lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let k = (
            format!("{}:{}", r["key"]["src"], r["key"]["src_port"]),
            r["switch"].as_u64().unwrap(),
        );
        *written.entry(k).or_default() += r["packets"].as_u64().unwrap();
    }
    for t in &truth.flows {
        for (node, (p, _)) in &t.counted {
            let k = (
                format!(
                    "\"{}\":{}",
                    std::net::Ipv4Addr::from(t.key.src),
                    t.key.src_port
                ),
                u64::from(id(*node)),
            );
            assert_eq!(written.get(&k), Some(p), "flow {} at {node}", t.key);
        }
    }
}

/// IPFIX to a real collector: Debian's nfcapd receives the sink's records and nfdump reads
/// back, for every flow, exactly the packets and bytes counted at every switch.
#[test]
fn ipfix_records_reach_nfcapd_exactly() {
    let dir = Scratch::new("sink-ipfix").unwrap();
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut nfcapd = Command::new("nfcapd")
        .arg("-w")
        .arg(dir.dir())
        .args(["-p", &port.to_string(), "-b", "127.0.0.1", "-t", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nfcapd runs (scripts/setup.sh installs Debian's nfdump)");
    // nfcapd binds at once; give it a moment before anything is sent.
    std::thread::sleep(Duration::from_millis(500));
    let topology = Topology::line(3);
    let spec = TrafficSpec {
        batch: 200,
        seed: 9,
        ..TrafficSpec::new(PAPER, 12, 200)
    };
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: None,
        decode_threads: 2,
        queue_batches: QUEUE_BATCHES,
        epoch_grace: Duration::from_millis(500),
        ipfix: Some(format!("127.0.0.1:{port}").parse().unwrap()),
        active_timeout: Duration::from_secs(1),
        ..SinkConfig::default()
    })
    .unwrap();
    let truth = drive(&topology, &[0, 2], &spec, &sink, None);
    settle(&sink, &truth);
    sink.stop();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(nfcapd.id() as i32, libc::SIGTERM) };
    nfcapd.wait().unwrap();
    let out = Command::new("nfdump")
        .arg("-R")
        .arg(dir.dir())
        .args(["-q", "-N", "-o", "fmt:%sa %da %sp %dp %pr %pkt %byt"])
        .output()
        .expect("nfdump runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut got: HashMap<(String, u64), (u64, u64)> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 7, "{line}");
        let e = got
            .entry((f[0].to_owned(), f[2].parse().unwrap()))
            .or_default();
        e.0 += f[5].parse::<u64>().unwrap();
        e.1 += f[6].parse::<u64>().unwrap();
    }
    assert_eq!(got.len(), truth.flows.len(), "{text}");
    for t in &truth.flows {
        // Every switch on the path exported the flow's counts (one observation domain each).
        let want = t
            .counted
            .values()
            .fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
        let key = (
            std::net::Ipv4Addr::from(t.key.src).to_string(),
            u64::from(t.key.src_port),
        );
        assert_eq!(got.get(&key), Some(&want), "flow {}", t.key);
    }
}

/// A plan that also sums hop latency: each digest carries its packet's end-to-end latency.
const LATENCY_PLAN: &str = r#"
global_bits = 24
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
[[queries]]
name = "e2e_latency"
value = "hop_latency"
aggregation = "sum"
bits = 16
unit = 1000.0
"#;

/// Online detection: on a line of three switches, the middle one holds packets 20 to 40 ms
/// longer from 20 s to 35 s, and the first link loses 30% of its frames from 50 s to 55 s.
/// The sink raises a delay event for both flows (from their end-to-end latency) with the
/// spell's start and end, and a loss event for the flow crossing the lossy link (from its
/// counters at its first and last switch); the API, the metrics and the event lines say so.
#[test]
fn the_sink_detects_delay_and_loss_as_they_happen() {
    let dir = Scratch::new("sink-detect").unwrap();
    let topology = Topology::line(3);
    let spec = TrafficSpec {
        gap_ns: 5_000_000,
        lossy_link: Some(((0, 1), 0.3)),
        lossy_during: Some((50.0, 55.0)),
        slow: Some(bench::fabric_traffic::Slow {
            node: 1,
            from_s: 20.0,
            to_s: 35.0,
            extra_ns: 20_000_000,
        }),
        batch: 200,
        probe_flows: 1,
        ..TrafficSpec::new(LATENCY_PLAN, 2, 8000)
    };
    let event_lines = dir.path("events.jsonl");
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: Some("127.0.0.1:0".parse().unwrap()),
        decode_threads: 2,
        queue_batches: QUEUE_BATCHES,
        epoch_grace: Duration::from_millis(500),
        event_lines: Some(event_lines.clone()),
        ..SinkConfig::default()
    })
    .unwrap();
    let http = sink.http_addr().unwrap();
    // The emulated network runs faster than time: its clock starts far enough back that
    // its 60 s stay behind the sink's (a sample more than a minute ahead of the sink's clock
    // is left out of detection).
    let start_ns = unix_ns() - 120_000_000_000;
    let truth = drive(&topology, &[0, 2], &spec, &sink, Some(start_ns));
    settle(&sink, &truth);
    let t0 = start_ns as f64 / 1e9;
    // An event is raised once the window after it closes, which the decode threads reach
    // when they get to the flows' last counts: on a busy machine, a while after the last
    // frame arrived. Waits (boundedly) until every flow has its events, then checks them.
    let crosses = |f: &bench::fabric_traffic::FlowTruth| f.route.windows(2).any(|w| w == [0, 1]);
    let has = |events: &Value, f: &bench::fabric_traffic::FlowTruth, kind: &str, series: &str| {
        events.as_array().unwrap().iter().any(|e| {
            e["flow"]["src_port"] == f.key.src_port && e["kind"] == kind && e["series"] == series
        })
    };
    let waited = Instant::now();
    let events = loop {
        let events = json(http, "/api/events?n=100");
        let all = truth.flows.iter().all(|f| {
            has(&events, f, "delay", "latency")
                && (!crosses(f) || has(&events, f, "loss", "counters"))
        }) && has(&events, &truth.flows[0], "delay", "probes");
        if all || waited.elapsed() > Duration::from_secs(30) {
            break events;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let events = events.as_array().unwrap();
    // The health view counts them, each once however many labels it has (pint-lab's
    // status line reads it there): between the events kept before and after it is read.
    let before = json(http, "/api/events?n=10000").as_array().unwrap().len() as u64;
    let found = json(http, "/api/health")["events"].as_u64().unwrap();
    let after = json(http, "/api/events?n=10000").as_array().unwrap().len() as u64;
    assert!(after < 10_000, "fewer events than the sink keeps");
    assert!(
        (before..=after).contains(&found),
        "{found} events counted, {before} to {after} kept"
    );
    let of_series = |flow: &bench::fabric_traffic::FlowTruth, kind: &str, series: &str| {
        events
            .iter()
            .filter(|e| {
                e["flow"]["src_port"] == flow.key.src_port
                    && e["kind"] == kind
                    && e["series"] == series
            })
            .collect::<Vec<&Value>>()
    };
    let of = |flow: &bench::fabric_traffic::FlowTruth, kind: &str| {
        of_series(
            flow,
            kind,
            if kind == "delay" {
                "latency"
            } else {
                "counters"
            },
        )
    };
    for src in &truth.flows {
        let delay = of(src, "delay");
        assert_eq!(delay.len(), 1, "flow {}: {events:?}", src.key);
        let e = delay[0];
        assert_eq!(e["series"], "latency");
        let (s, end) = (
            e["start"].as_f64().unwrap() - t0,
            e["end"].as_f64().unwrap() - t0,
        );
        assert!((s - 20.0).abs() < 0.2, "flow {}: start {s}: {e}", src.key);
        assert!((end - 35.0).abs() < 0.2, "flow {}: end {end}: {e}", src.key);
        assert!(e["peak_ms"].as_f64().unwrap() > 20.0, "{e}");
        assert!(e["baseline_ms"].as_f64().unwrap() < 1.0, "{e}");
    }
    let mut lossy_flows = 0;
    for f in &truth.flows {
        let loss = of(f, "loss");
        if !crosses(f) {
            assert!(loss.is_empty(), "flow {}: {events:?}", f.key);
            continue;
        }
        lossy_flows += 1;
        assert_eq!(loss.len(), 1, "flow {}: {events:?}", f.key);
        let e = loss[0];
        assert_eq!(e["series"], "counters");
        let (s, end) = (
            e["start"].as_f64().unwrap() - t0,
            e["end"].as_f64().unwrap() - t0,
        );
        // The loss is counted per 5 s window (windows start with the flow's first counts):
        // the event is the one or two windows over the lossy spell.
        assert!(
            (s - 50.0).abs() <= 5.1 && (end - 55.0).abs() <= 5.1 && end > 52.0 && s < 53.0,
            "{s}..{end}: {e}"
        );
        let rate = e["loss_rate"].as_f64().unwrap();
        assert!((0.1..0.4).contains(&rate), "{e}");
    }
    assert!(lossy_flows > 0, "a flow crossed the lossy link");
    // The probe stream (flow 0): its one-way delay and its sequence numbers say the same.
    let probe_flow = &truth.flows[0];
    let delay = of_series(probe_flow, "delay", "probes");
    assert_eq!(delay.len(), 1, "{events:?}");
    let (s, end) = (
        delay[0]["start"].as_f64().unwrap() - t0,
        delay[0]["end"].as_f64().unwrap() - t0,
    );
    assert!(
        (s - 20.0).abs() < 0.2 && (end - 35.0).abs() < 0.2,
        "{s}..{end}"
    );
    assert!(crosses(probe_flow), "the probe flow crosses the lossy link");
    {
        let loss = of_series(probe_flow, "loss", "probes");
        assert_eq!(loss.len(), 1, "{events:?}");
        let (s, end) = (
            loss[0]["start"].as_f64().unwrap() - t0,
            loss[0]["end"].as_f64().unwrap() - t0,
        );
        // From the lost probes' own send times.
        assert!(
            (50.0..51.0).contains(&s) && (54.0..55.1).contains(&end),
            "{s}..{end}"
        );
        let rate = loss[0]["loss_rate"].as_f64().unwrap();
        assert!((0.1..0.5).contains(&rate), "{}", loss[0]);
        lossy_flows += 1;
    }
    lossy_flows += 1; // the probe stream's delay event
    // The flow's own view, the metrics, the lines.
    let f = json(
        http,
        &format!(
            "/api/flow?src={}&dst={}&sport=1000&dport=4791&proto=17",
            std::net::Ipv4Addr::from(pipeline::fabric::host_addr(0, 1)),
            std::net::Ipv4Addr::from(pipeline::fabric::host_addr(2, 1))
        ),
    );
    assert!(f["events"].as_array().unwrap().len() >= 2, "{f}");
    let _ = truth;
    let (_, metrics) = get(http, "/metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("pint_sink_events_total{kind=\"delay\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) >= Some(1.0)),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l == "pint_sink_samples_ahead_total 0"),
        "no sample left out: {metrics}"
    );
    if let Err(e) = bench::promtool::check_metrics(&metrics) {
        panic!("promtool check metrics:\n{e}\n{metrics}");
    }
    let (status, _) = get(http, "/api/events?kind=weather");
    assert_eq!(status, 400);
    sink.stop();
    let lines = std::fs::read_to_string(&event_lines).unwrap();
    assert_eq!(
        lines.lines().count(),
        truth.flows.len() + lossy_flows,
        "{lines}"
    );
}

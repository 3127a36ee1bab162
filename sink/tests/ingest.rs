//! The sink's ingest with hand-made switches: bad frames close only their own connection and
//! are counted; a switch that reconnects is followed; digests of a plan the sink cannot use
//! are counted, not guessed at; the pint-sink binary starts, answers and stops.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};

use sink::{Sink, SinkConfig};
use telemetry::flowradar::flowset::FILTER_SEED;
use telemetry::flowradar::wire::Shape;
use telemetry::flowradar::{FlowKey, FlowSet, FlowSetConfig};
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;
use telemetry::protocol::{
    DigestEncoder, FrameType, Hello, PlanText, PortInfo, Stats, WireDigest, encode_digests,
    encode_flowset, encode_frame,
};
use telemetry::wire::MacAddr;

const PAPER: &str = include_str!("../../configs/queries/paper.toml");

fn sink() -> Sink {
    Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: Some("127.0.0.1:0".parse().unwrap()),
        decode_threads: 2,
        epoch_grace: Duration::from_millis(200),
        ..SinkConfig::default()
    })
    .unwrap()
}

fn flowset(switch_id: u32) -> FlowSet {
    FlowSet::new(&FlowSetConfig::for_flows(100, switch_id))
}

fn hello(switch_id: u32, plan: Option<PlanText>) -> Hello {
    let fs = flowset(switch_id);
    Hello {
        switch_id,
        session: 1,
        epoch_ns: 10_000_000,
        shim_ethertype: 0x88b5,
        shape: Shape::of(&fs),
        filter_seed: FILTER_SEED,
        table_seeds: vec![fs.table_seed()],
        max_digests: 1024,
        ports: vec![PortInfo {
            name: "hosts".into(),
            edge: true,
            capacity_bps: 10_000_000_000,
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
        }],
        plan,
    }
}

fn paper() -> PlanText {
    PlanText {
        version: Plan::compile(&QueryFile::from_toml(PAPER).unwrap())
            .unwrap()
            .version,
        digest_bytes: 2,
        text: PAPER.to_owned(),
    }
}

/// A switch stand-in: numbers its frames as a switch does.
struct FakeSwitch {
    s: TcpStream,
    seq: u64,
}

impl FakeSwitch {
    fn connect(sink: SocketAddr, h: &Hello) -> FakeSwitch {
        let mut s = TcpStream::connect(sink).unwrap();
        s.write_all(&encode_frame(FrameType::Hello, 0, &h.payload()))
            .unwrap();
        FakeSwitch { s, seq: 0 }
    }

    fn send(&mut self, ty: FrameType, payload: &[u8]) {
        self.seq += 1;
        self.s
            .write_all(&encode_frame(ty, self.seq, payload))
            .unwrap();
    }
}

fn digest(plan: u32, i: u32) -> WireDigest {
    WireDigest {
        key: FlowKey {
            src: 0x0a00_0001,
            dst: 0x0a00_0102,
            src_port: 1000 + (i % 10) as u16,
            dst_port: 80,
            protocol: 6,
        },
        ingress_port: 0,
        egress_port: 0,
        pid: i.wrapping_mul(2_654_435_761),
        hops: 1,
        plan_version: plan,
        digest: u64::from(i & 0xffff),
        time_ns: 1_700_000_000_000_000_000 + u64::from(i),
    }
}

/// Digests the sink's decode threads have recorded.
fn recorded(shared: &sink::Shared) -> u64 {
    shared
        .shards
        .iter()
        .map(|s| s.table.lock().unwrap().stats.digests)
        .sum()
}

/// The whole response to a GET of `path` from the HTTP server at `http`.
fn http_get(http: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(http).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

/// The sink's `/api/switches`, if it answered with JSON.
fn switches_view(http: SocketAddr) -> Option<serde_json::Value> {
    let resp = http_get(http, "/api/switches");
    serde_json::from_str(resp.split("\r\n\r\n").nth(1)?).ok()
}

/// The switch and HTTP addresses of the sink's `listening on A (http B)` line.
fn addresses(line: &str) -> (SocketAddr, SocketAddr) {
    let addr = |label: &str| -> SocketAddr {
        line.split(label)
            .nth(1)
            .and_then(|r| r.split([' ', ')', '\n']).next())
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap()
    };
    (addr("listening on "), addr("(http "))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A switch that sends garbage loses its connection with the reason counted; a switch that
/// never said hello is counted too; the well-behaved switch next to them loses nothing.
#[test]
fn a_bad_frame_closes_only_its_own_connection() {
    let sink = sink();
    let shared = sink.shared().clone();
    let plan = paper();
    let mut good = FakeSwitch::connect(sink.listen_addr(), &hello(1, Some(plan.clone())));
    let mut bad = FakeSwitch::connect(sink.listen_addr(), &hello(2, Some(plan.clone())));
    wait_for("both switches", || shared.registry.switches().len() == 2);
    // A frame of an unknown type from switch 2.
    bad.seq += 1;
    let mut f = encode_frame(FrameType::Stats, bad.seq, &[0, 0]);
    f[4] = 99;
    bad.s.write_all(&f).unwrap();
    // Bytes before any hello from a third connection.
    let mut anon = TcpStream::connect(sink.listen_addr()).unwrap();
    anon.write_all(&encode_frame(FrameType::Stats, 1, &[0, 0]))
        .unwrap();
    // Switch 1 goes on.
    let digests: Vec<WireDigest> = (0..500).map(|i| digest(plan.version, i)).collect();
    good.send(
        FrameType::Digests,
        &encode_digests(0, &digests, |_| plan.digest_bytes),
    );
    let s2 = shared.registry.switch(2).unwrap();
    wait_for("switch 2 rejected", || {
        s2.counters.rejected.load(Relaxed) == 1
    });
    assert!(!s2.counters.connected.load(Relaxed));
    assert_eq!(
        s2.reject_reasons.lock().unwrap().get("unknown_type"),
        Some(&1)
    );
    assert!(
        s2.info
            .lock()
            .unwrap()
            .last_error
            .as_deref()
            .unwrap()
            .contains("unknown frame type 99")
    );
    wait_for("anonymous reject", || {
        shared.registry.anonymous_rejects().values().sum::<u64>() == 1
    });
    // The connection really is closed: reading gives end of file.
    bad.s
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut b = [0u8; 1];
    assert_eq!(bad.s.read(&mut b).unwrap(), 0);
    let s1 = shared.registry.switch(1).unwrap();
    wait_for("switch 1's digests", || recorded(&shared) == 500);
    assert!(s1.counters.connected.load(Relaxed));
    assert_eq!(s1.counters.rejected.load(Relaxed), 0);
    assert_eq!(s1.counters.digests.load(Relaxed), 500);
    let flows: usize = shared
        .shards
        .iter()
        .map(|s| s.table.lock().unwrap().len())
        .sum();
    assert_eq!(flows, 10);
}

/// A switch that disconnects and comes back (as after a restart) is the same switch to the
/// sink: its counters go on, its flows keep their state, and a sequence gap (frames the
/// switch dropped while the sink was away) is counted.
#[test]
fn a_switch_that_reconnects_is_followed() {
    let sink = sink();
    let shared = sink.shared().clone();
    let plan = paper();
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(7, Some(plan.clone())));
    let first: Vec<WireDigest> = (0..100).map(|i| digest(plan.version, i)).collect();
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &first, |_| plan.digest_bytes),
    );
    let e = {
        wait_for("switch 7", || shared.registry.switch(7).is_some());
        shared.registry.switch(7).unwrap()
    };
    wait_for("first digests", || e.counters.digests.load(Relaxed) == 100);
    drop(sw);
    wait_for("disconnect", || !e.counters.connected.load(Relaxed));
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(7, Some(plan.clone())));
    sw.seq = 4; // the next frame is 5: frames 1 to 4 never came
    let second: Vec<WireDigest> = (100..300).map(|i| digest(plan.version, i)).collect();
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &second, |_| plan.digest_bytes),
    );
    wait_for("second digests", || e.counters.digests.load(Relaxed) == 300);
    assert!(e.counters.connected.load(Relaxed));
    assert_eq!(e.counters.connections.load(Relaxed), 2);
    assert_eq!(e.counters.sequence_gaps.load(Relaxed), 4);
    assert_eq!(shared.registry.switches().len(), 1);
    wait_for("all recorded", || recorded(&shared) == 300);
    let digests_per_flow: Vec<u64> = shared
        .shards
        .iter()
        .flat_map(|s| {
            s.table
                .lock()
                .unwrap()
                .iter()
                .map(|f| f.digests)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(digests_per_flow.len(), 10);
    assert!(
        digests_per_flow.iter().all(|&d| d == 30),
        "{digests_per_flow:?}"
    );
}

/// A batch that names flow slots its connection never defined (a switch that encoded it
/// for the connection before) has those digests counted as of an unknown flow, not
/// attributed; once the switch defines its flows again, its digests count as usual.
#[test]
fn digests_of_undefined_flow_slots_are_counted_not_attributed() {
    let sink = sink();
    let shared = sink.shared().clone();
    let plan = paper();
    let mut enc = DigestEncoder::default();
    let batch: Vec<WireDigest> = (0..100).map(|i| digest(plan.version, i)).collect();
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(8, Some(plan.clone())));
    sw.send(
        FrameType::Digests,
        &enc.encode(0, &batch, |_| plan.digest_bytes),
    );
    wait_for("switch 8", || shared.registry.switch(8).is_some());
    let e = shared.registry.switch(8).unwrap();
    wait_for("first digests", || e.counters.digests.load(Relaxed) == 100);
    drop(sw);
    wait_for("disconnect", || !e.counters.connected.load(Relaxed));
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(8, Some(plan.clone())));
    // Encoded as if for the old connection: slots only, no definitions.
    sw.send(
        FrameType::Digests,
        &enc.encode(0, &batch, |_| plan.digest_bytes),
    );
    wait_for("unknown flows counted", || {
        e.counters.digests_unknown_flow.load(Relaxed) == 100
    });
    enc.reset();
    sw.send(
        FrameType::Digests,
        &enc.encode(0, &batch, |_| plan.digest_bytes),
    );
    wait_for("digests again", || e.counters.digests.load(Relaxed) == 200);
    assert!(e.counters.connected.load(Relaxed));
    assert_eq!(e.counters.rejected.load(Relaxed), 0);
    wait_for("all recorded", || recorded(&shared) == 200);
}

/// A plan whose text does not compile to its version here is not used: its digests are
/// counted as of an unknown plan. A hello whose flowsets are too large is refused.
#[test]
fn unusable_plans_and_oversized_flowsets_are_refused() {
    let sink = sink();
    let shared = sink.shared().clone();
    let mut wrong = paper();
    wrong.version ^= 0x10;
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(3, Some(wrong.clone())));
    let digests: Vec<WireDigest> = (0..50).map(|i| digest(wrong.version, i)).collect();
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &digests, |_| wrong.digest_bytes),
    );
    wait_for("switch 3", || shared.registry.switch(3).is_some());
    let e = shared.registry.switch(3).unwrap();
    wait_for("unknown plan counted", || {
        e.counters.digests_unknown_plan.load(Relaxed) == 50
    });
    assert!(shared.registry.plan(wrong.version).is_none());

    // Beyond what the protocol carries: the hello does not decode; within it but above
    // --max-flowset-mb: refused. Neither switch was seen before: both are counted apart
    // from the switches, by reason.
    let mut big = hello(4, None);
    big.shape.cells_per_table = 1 << 23;
    let _sw = FakeSwitch::connect(sink.listen_addr(), &big);
    wait_for("switch 4 refused", || {
        shared.registry.anonymous_rejects().get("over_limit") == Some(&1)
    });
    let mut large = hello(6, None);
    large.shape.cells_per_table =
        (telemetry::flowradar::wire::MAX_CELLS / usize::from(large.shape.hashes)) as u32;
    large.shape.filter_blocks = telemetry::flowradar::wire::MAX_FILTER_BLOCKS as u32;
    let _sw6 = FakeSwitch::connect(sink.listen_addr(), &large);
    wait_for("switch 6 refused", || {
        shared.registry.anonymous_rejects().get("refused") == Some(&1)
    });
    assert!(shared.registry.switch(4).is_none());
    assert!(shared.registry.switch(6).is_none());

    // A flowset frame of a declared worker that holds the right shape is taken.
    let mut fs = flowset(3);
    fs.update(&digest(0, 1).key, 100);
    sw.send(FrameType::FlowSet, &encode_flowset(0, 1, 3, 42, &fs));
    wait_for("flowset", || e.counters.flowsets.load(Acquire) == 1);
    assert_eq!(e.counters.rejected.load(Relaxed), 0);
    // Epoch 42 of 10 ms ended in 1970: a clock that far behind shows as the lag.
    let now_ms = sink::registry::unix_ms() as i64;
    let lag = e.counters.flowset_lag.get().expect("a flowset came");
    assert!(
        lag > now_ms - 1000 && lag <= now_ms,
        "{lag} against {now_ms}"
    );
    // One whose epoch is an hour ahead of the sink's clock lags by about minus an hour.
    let ahead = (now_ms as u64 + 3_600_000) / 10;
    sw.send(FrameType::FlowSet, &encode_flowset(0, 1, 3, ahead, &fs));
    wait_for("second flowset", || e.counters.flowsets.load(Acquire) == 2);
    let lag = e.counters.flowset_lag.get().unwrap();
    assert!((-3_600_010..-3_500_000).contains(&lag), "{lag}");
}

/// The binary: starts on free ports, says where, serves the API, stops on SIGTERM; a bad flag
/// is an error that names it.
#[test]
fn pint_sink_runs_and_stops() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let http: SocketAddr = line
        .split("(http ")
        .nth(1)
        .and_then(|r| r.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    let get = |path: &str| http_get(http, path);
    let resp = get("/api/health");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"status\":\"ok\""), "{resp}");
    // A flow asked for by the names /api/flows gives its key's fields: unknown, not refused.
    let flow = get("/api/flow?src=10.0.0.1&dst=10.0.0.2&src_port=1&dst_port=2&protocol=6");
    assert!(flow.starts_with("HTTP/1.1 404"), "{flow}");
    // A query string that does not parse is a 400 in the API's JSON error form.
    for (path, names) in [
        ("/api/flows?top=abc", "top"),
        ("/api/epochs?n=-1", "n"),
        ("/api/events?n=many", "n"),
        // Misspelt or misplaced parameters are refused, not ignored.
        ("/api/flows?limit=5", "limit"),
        ("/api/events?type=loss", "type"),
        ("/api/epochs?top=5", "top"),
        (
            "/api/flow?src=1.2.3&dst=1.2.3.4&sport=1&dport=2&proto=6",
            "src",
        ),
    ] {
        let resp = get(path);
        assert!(resp.starts_with("HTTP/1.1 400"), "{path}: {resp}");
        assert!(
            resp.contains("content-type: application/json"),
            "{path}: {resp}"
        );
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {resp}"));
        let error = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {body}"));
        assert!(error.contains(names), "{path}: {error}");
    }
    // A hang-up (log rotation) opens the line files again; it does not stop the sink.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "a SIGHUP stopped the sink"
    );
    assert!(get("/api/health").starts_with("HTTP/1.1 200"));
    // Two SIGTERMs close together (a parent that dies sends one per thread its child is
    // handed to): one orderly stop, not the exit at once a second Ctrl-C asks for.
    for _ in 0..2 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        // Apart enough to be two signals (one pending signal takes the next in).
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");

    let out = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .args(["--listen", "127.0.0.1:0", "--decode-threads", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--decode-threads"), "{err}");
}

/// Flowsets take at most the sink's memory for them (`--flowset-memory-mb`), however fast
/// they come: one beyond it is dropped before it is decoded and counted, the connection goes
/// on without a gap, and once the held ones are done with, new ones are taken again.
#[test]
fn flowsets_beyond_the_memory_limit_are_dropped_undecoded() {
    // Worker 1 never sends, so each epoch waits the grace time with its flowset held.
    let workers: Vec<FlowSet> = (0..2)
        .map(|w| FlowSet::new(&FlowSetConfig::for_flows(9000, 50 + w)))
        .collect();
    let bytes = workers[0].memory_bytes();
    assert!(
        (256 << 10..512 << 10).contains(&bytes),
        "a flowset of {bytes} bytes: two fit in 1 MiB"
    );
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: None,
        decode_threads: 1,
        epoch_grace: Duration::from_millis(300),
        max_flowset_bytes: 1 << 20,
        flowset_memory_bytes: 1 << 20,
        ..SinkConfig::default()
    })
    .unwrap();
    let shared = sink.shared().clone();
    let mut h = hello(5, Some(paper()));
    h.shape = Shape::of(&workers[0]);
    h.table_seeds = workers.iter().map(|w| w.table_seed()).collect();
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &h);
    let epoch = 170_000_000_000u64;
    for i in 0..20 {
        sw.send(
            FrameType::FlowSet,
            &encode_flowset(0, 1, 5, epoch + i, &workers[0]),
        );
    }
    wait_for("switch 5", || shared.registry.switch(5).is_some());
    let e = shared.registry.switch(5).unwrap();
    // Acquire: a flowset counted has its drop counted before it.
    wait_for("20 flowsets", || e.counters.flowsets.load(Acquire) == 20);
    let dropped = e.counters.flowsets_dropped.load(Relaxed);
    // Two fit; a third only if a held one was let go meanwhile (a slow machine).
    assert!(
        (10..=18).contains(&dropped),
        "about two held at once: {dropped} of 20 dropped"
    );
    // The grace time passes, the held flowsets are decoded and let go: room again.
    std::thread::sleep(Duration::from_millis(800));
    sw.send(
        FrameType::FlowSet,
        &encode_flowset(0, 1, 5, epoch + 100, &workers[0]),
    );
    let plan = paper();
    let digests: Vec<WireDigest> = (0..10).map(|i| digest(plan.version, i)).collect();
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &digests, |_| plan.digest_bytes),
    );
    wait_for("digests after the flowsets", || {
        e.counters.digests.load(Relaxed) == 10
    });
    assert_eq!(e.counters.flowsets.load(Relaxed), 21);
    assert_eq!(e.counters.flowsets_dropped.load(Relaxed), dropped);
    assert_eq!(e.counters.sequence_gaps.load(Relaxed), 0);
    assert_eq!(e.counters.rejected.load(Relaxed), 0);
}

/// Whether the sink closed `s` (end of stream or a reset) within 5 s; a read that times
/// out is a connection still open.
fn closed_by_sink(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// A second process saying hello with a switch ID whose connection is alive is refused
/// and counted at that switch (two switches configured with one ID would otherwise mix
/// their counts); the same process reconnecting takes over, and the connection it left
/// ending later does not mark the switch disconnected.
#[test]
fn a_switch_id_belongs_to_one_live_connection() {
    let sink = sink();
    let registry = std::sync::Arc::clone(&sink.shared().registry);
    let stats = Stats::default().payload();
    let mut a = FakeSwitch::connect(sink.listen_addr(), &hello(5, None));
    a.send(FrameType::Stats, &stats);
    wait_for("switch 5", || {
        registry
            .switch(5)
            .is_some_and(|e| e.counters.frames.load(Relaxed) == 2)
    });
    let e = registry.switch(5).unwrap();
    let a_peer = e.info.lock().unwrap().peer.clone();

    let other = Hello {
        session: 2,
        ..hello(5, None)
    };
    let mut b = FakeSwitch::connect(sink.listen_addr(), &other);
    assert!(closed_by_sink(&mut b.s), "the second process is refused");
    let reasons = e.reject_reasons.lock().unwrap().clone();
    assert_eq!(reasons.get("duplicate_switch_id"), Some(&1), "{reasons:?}");
    assert!(e.counters.connected.load(Relaxed));
    assert_eq!(
        e.info.lock().unwrap().peer,
        a_peer,
        "the first keeps the ID"
    );

    // Switch 5's process reconnects (its old connection is not closed yet).
    let mut c = FakeSwitch::connect(sink.listen_addr(), &hello(5, None));
    c.send(FrameType::Stats, &stats);
    wait_for("the new connection", || {
        e.counters.generation.load(Relaxed) == 2
    });
    drop(a);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        e.counters.connected.load(Relaxed),
        "the old connection ending leaves the switch connected"
    );
    c.send(FrameType::Stats, &stats);
    drop(c);
    wait_for("disconnected", || !e.counters.connected.load(Relaxed));
    sink.stop();
}

/// A switch's stats frame reaches the live page: its rx and tx, and the digests and flowsets
/// it says it exported beside those the sink received (the page showed 0 exported).
#[test]
fn a_switchs_stats_reach_the_live_page() {
    let sink = sink();
    let shared = sink.shared().clone();
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(9, Some(paper())));
    let counters = [
        ("rx_packets", 1000),
        ("tx_packets", 990),
        ("tx_full_drops", 4),
        ("digests_exported", 700),
        ("flowsets_exported", 12),
        ("drop_no_route", 6),
    ];
    let stats = Stats {
        counters: counters
            .iter()
            .map(|(n, v)| ((*n).to_owned(), *v))
            .collect(),
    };
    sw.send(FrameType::Stats, &stats.payload());
    wait_for("stats", || {
        sink::live::page(&shared)
            .switches
            .iter()
            .any(|s| s.id == 9 && s.rx_packets == 1000)
    });
    let page = sink::live::page(&shared);
    let row = page.switches.iter().find(|s| s.id == 9).unwrap();
    assert_eq!(
        (
            row.tx_packets,
            row.tx_full_drops,
            row.digests_exported,
            row.flowsets_exported
        ),
        (990, 4, 700, 12)
    );
    assert_eq!(
        row.drops.iter().collect::<Vec<_>>(),
        vec![(&"no_route".to_owned(), &6)]
    );
    // A flowset the switch dropped, said at once in a frame of its own: the others stay,
    // and the sink knows something of this switch's was lost (a missing flowset of it is
    // then no loss on its links).
    let e = shared.registry.switch(9).unwrap();
    assert!(e.lost_at.lock().unwrap().is_none());
    let dropped = Stats {
        counters: vec![("flowsets_dropped".to_owned(), 1)],
    };
    sw.send(FrameType::Stats, &dropped.payload());
    wait_for("the drop", || e.lost_at.lock().unwrap().is_some());
    // Probe records it dropped: a break in its probe records, as its hello was. The first
    // count of a connection is no break of its own (the hello was).
    let breaks = e.counters.probe_breaks.load(Relaxed);
    assert!(breaks >= 1, "the hello is one");
    let probes_dropped = |n| Stats {
        counters: vec![("probes_dropped".to_owned(), n)],
    };
    sw.send(FrameType::Stats, &probes_dropped(2).payload());
    sw.send(FrameType::Stats, &probes_dropped(5).payload());
    wait_for("a break", || {
        e.counters.probe_breaks.load(Relaxed) == breaks + 1
    });
    sw.send(FrameType::Stats, &probes_dropped(5).payload());
    sw.send(FrameType::Stats, &probes_dropped(9).payload());
    wait_for("another", || {
        e.counters.probe_breaks.load(Relaxed) >= breaks + 2
    });
    // The same count again was no break (frames are taken in order: the last is in).
    assert_eq!(e.counters.probe_breaks.load(Relaxed), breaks + 2);
    let page = sink::live::page(&shared);
    let row = page.switches.iter().find(|s| s.id == 9).unwrap();
    assert_eq!((row.rx_packets, row.digests_exported), (1000, 700));
    // Its edge port has carried no packet into or out of the network: not drawn as a
    // switch with hosts until one did.
    assert!(!row.hosts);
    let edge = Stats {
        counters: vec![("shim_stripped".to_owned(), 3)],
    };
    sw.send(FrameType::Stats, &edge.payload());
    wait_for("hosts", || {
        sink::live::page(&shared)
            .switches
            .iter()
            .any(|s| s.id == 9 && s.hosts)
    });
}

/// Connections beyond `--max-connections` are closed at once and counted (each took a
/// thread, without end); once one of those open closes, a new one is taken again.
#[test]
fn connections_beyond_the_limit_are_closed_and_counted() {
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: None,
        decode_threads: 1,
        max_connections: 2,
        ..SinkConfig::default()
    })
    .unwrap();
    let shared = sink.shared().clone();
    let a = FakeSwitch::connect(sink.listen_addr(), &hello(21, Some(paper())));
    let _b = FakeSwitch::connect(sink.listen_addr(), &hello(22, Some(paper())));
    wait_for("two switches", || {
        shared.registry.switch(21).is_some() && shared.registry.switch(22).is_some()
    });
    let mut third = TcpStream::connect(sink.listen_addr()).unwrap();
    assert!(closed_by_sink(&mut third), "a third connection is closed");
    wait_for("counted", || {
        shared
            .registry
            .anonymous_rejects()
            .get("too_many_connections")
            == Some(&1)
    });
    drop(a);
    wait_for("switch 21 gone", || {
        !shared
            .registry
            .switch(21)
            .unwrap()
            .counters
            .connected
            .load(Relaxed)
    });
    // Its thread ends just after: a connection at that moment may still find no room.
    let mut kept = Vec::new();
    wait_for("a new switch taken", || {
        if let Ok(mut s) = TcpStream::connect(sink.listen_addr()) {
            let h = hello(23, Some(paper()));
            let _ = s.write_all(&encode_frame(FrameType::Hello, 0, &h.payload()));
            kept.push(s);
        }
        std::thread::sleep(Duration::from_millis(100));
        shared.registry.switch(23).is_some()
    });
}

/// Switch IDs beyond `--max-switches` are refused and counted (any peer may say hello
/// under any ID, and each ID kept its entry and plan for good), also once one has gone; a
/// known switch comes back.
#[test]
fn switch_ids_beyond_the_limit_are_refused() {
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        http: None,
        decode_threads: 1,
        max_switches: 1,
        ..SinkConfig::default()
    })
    .unwrap();
    let shared = sink.shared().clone();
    let a = FakeSwitch::connect(sink.listen_addr(), &hello(31, Some(paper())));
    wait_for("switch 31", || shared.registry.switch(31).is_some());
    let refused = |n: u64| {
        let mut b = TcpStream::connect(sink.listen_addr()).unwrap();
        let h = hello(32, Some(paper()));
        b.write_all(&encode_frame(FrameType::Hello, 0, &h.payload()))
            .unwrap();
        assert!(closed_by_sink(&mut b), "a second switch is refused");
        wait_for("counted", || {
            shared.registry.anonymous_rejects().get("too_many_switches") == Some(&n)
        });
    };
    refused(1);
    drop(a);
    let e = shared.registry.switch(31).unwrap();
    wait_for("switch 31 gone", || !e.counters.connected.load(Relaxed));
    refused(2);
    assert!(shared.registry.switch(32).is_none());
    let _a = FakeSwitch::connect(sink.listen_addr(), &hello(31, Some(paper())));
    wait_for("switch 31 back", || {
        e.counters.connections.load(Relaxed) == 2
    });
}

/// A plan declared with digests of another length than the plan's (a hello's or a plan
/// frame's) closes the connection and is counted: its digests would be cut at that length
/// and misread as paths and values.
#[test]
fn a_plan_declared_with_the_wrong_digest_length_is_refused() {
    let sink = sink();
    let shared = sink.shared().clone();
    let mut wide = paper();
    wide.digest_bytes = 3;
    let mut a = TcpStream::connect(sink.listen_addr()).unwrap();
    a.write_all(&encode_frame(
        FrameType::Hello,
        0,
        &hello(41, Some(wide.clone())).payload(),
    ))
    .unwrap();
    assert!(closed_by_sink(&mut a), "the hello is refused");
    let e41 = loop {
        match shared.registry.switch(41) {
            Some(e) => break e,
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    wait_for("counted at the switch", || {
        e41.reject_reasons.lock().unwrap().get("refused") == Some(&1)
    });
    assert!(!e41.counters.connected.load(Relaxed));
    // A switch that declared its plan rightly, then declares it again with another length.
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(42, Some(paper())));
    wait_for("switch 42", || shared.registry.switch(42).is_some());
    sw.send(FrameType::Plan, &wide.payload());
    assert!(closed_by_sink(&mut sw.s), "the plan frame closes it");
    let e = shared.registry.switch(42).unwrap();
    wait_for("counted at the switch", || {
        e.reject_reasons.lock().unwrap().get("refused") == Some(&1)
    });
    wait_for("disconnected", || !e.counters.connected.load(Relaxed));
}

/// A topology file without a link between its switches is refused at the start, naming the
/// option and the file (the sink decodes paths along links).
#[test]
fn a_topology_without_links_is_refused() {
    let path =
        std::env::temp_dir().join(format!("pint-sink-nolinks-{}.graphml", std::process::id()));
    std::fs::write(
        &path,
        r#"<graphml><graph edgedefault="undirected"><node id="a"/><node id="b"/><node id="c"/></graph></graphml>"#,
    )
    .unwrap();
    let e = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        topology: Some(path.clone()),
        ..SinkConfig::default()
    })
    .map(|_| ())
    .unwrap_err()
    .to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        e.starts_with("--topology: ") && e.contains("no links between its 3 switches"),
        "{e}"
    );
}

/// The plan in force is the last one declared: after a reconnection a switch sends its
/// older plans, oldest first, then the hello's again; a reload is the next plan frame, also
/// right after those (it was taken for an older plan there).
#[test]
fn the_last_plan_declared_is_in_force() {
    let sink = sink();
    let shared = sink.shared().clone();
    let now = paper();
    let plan = |low: &str, high: &str| {
        let text = PAPER
            .replace("frequency = \"1/16\"", &format!("frequency = \"{low}\""))
            .replace("frequency = \"15/16\"", &format!("frequency = \"{high}\""));
        PlanText {
            version: Plan::compile(&QueryFile::from_toml(&text).unwrap())
                .unwrap()
                .version,
            digest_bytes: 2,
            text,
        }
    };
    let (older, reload) = (plan("1/8", "7/8"), plan("1/4", "3/4"));
    let in_force = |sw: &mut FakeSwitch, n: u32| {
        // A frame after the plans, so that they have all been read.
        let d: Vec<WireDigest> = (0..10).map(|i| digest(now.version, i)).collect();
        sw.send(FrameType::Digests, &encode_digests(0, &d, |_| 2));
        wait_for("switch 9", || shared.registry.switch(9).is_some());
        let e = shared.registry.switch(9).unwrap();
        wait_for("digests", || {
            e.counters.digests.load(Relaxed) == 10 * u64::from(n)
        });
        e.info.lock().unwrap().plan
    };
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(9, Some(now.clone())));
    sw.send(FrameType::Plan, &older.payload());
    sw.send(FrameType::Plan, &now.payload());
    assert_eq!(in_force(&mut sw, 1), Some(now.version));
    drop(sw);
    let mut sw = FakeSwitch::connect(sink.listen_addr(), &hello(9, Some(now.clone())));
    sw.send(FrameType::Plan, &older.payload());
    sw.send(FrameType::Plan, &now.payload());
    sw.send(FrameType::Plan, &reload.payload());
    assert_eq!(in_force(&mut sw, 2), Some(reload.version));
}

/// A sink whose address space (`ulimit -v`) cannot hold a flowset its budget allows drops
/// that flowset, counted, and goes on with the connection: it does not abort, and the
/// switch's next frames are taken.
#[test]
fn a_flowset_there_is_no_memory_for_is_dropped_not_fatal() {
    const LIMIT: u64 = 320 << 20;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pint-sink"));
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--decode-threads",
        "1",
        "--max-flowset-mb",
        "1024",
        "--flowset-memory-mb",
        "1024",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let lim = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (listen, http) = addresses(&line);
    // A flowset shape of 2^24 cells: 384 MiB decoded, more than the whole address space.
    let small = flowset(9);
    let mut h = hello(9, Some(paper()));
    h.shape = Shape {
        hashes: 4,
        cells_per_table: 1 << 22,
        filter_blocks: 1024,
    };
    h.table_seeds = vec![small.table_seed()];
    let mut sw = FakeSwitch::connect(listen, &h);
    // An empty flowset of that shape: the small one's bytes with the shape's sizes.
    let mut payload = encode_flowset(0, 1, 9, 170_000_000_000, &small);
    payload[22] = 4;
    payload[26..30].copy_from_slice(&(1u32 << 22).to_be_bytes());
    payload[46..50].copy_from_slice(&1024u32.to_be_bytes());
    sw.send(FrameType::FlowSet, &payload);
    let plan = paper();
    let digests: Vec<WireDigest> = (0..10).map(|i| digest(plan.version, i)).collect();
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &digests, |_| plan.digest_bytes),
    );
    let get = |path: &str| {
        let resp = http_get(http, path);
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
        serde_json::from_str::<serde_json::Value>(&body).unwrap_or_else(|e| panic!("{e}: {resp}"))
    };
    let mut view = serde_json::Value::Null;
    wait_for("the digests after the flowset", || {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("the sink died ({status}): {err}");
        }
        view = get("/api/switches")[0].clone();
        view["digests"] == 10
    });
    assert_eq!(view["flowsets"], 1, "{view}");
    assert_eq!(view["flowsets_dropped"], 1, "{view}");
    assert_eq!(view["rejected"], 0, "{view}");
    assert_eq!(view["sequence_gaps"], 0, "{view}");
    assert_eq!(view["connected"], true, "{view}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("address-space limit (ulimit -v) is 320 MiB"),
        "{err}"
    );
    assert!(err.contains("no memory for a flowset table"), "{err}");
}

/// `--json-lines -` writes the flow records to standard output, every line there one JSON
/// object (the address line goes to stderr instead); both outputs `-` are refused.
#[test]
fn json_lines_go_to_standard_output_for_a_dash() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--json-lines",
            "-",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        BufReader::new(stdout).read_to_string(&mut text).unwrap();
        text
    });
    // stderr read in a thread of its own, so that a sink that never says its address on
    // stderr fails the test instead of hanging it.
    let err = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    let logs = std::thread::spawn(move || {
        let mut rest = String::new();
        for l in BufReader::new(err).lines() {
            let l = l.unwrap();
            if l.contains("listening on ") {
                let _ = lines_tx.send(l);
            } else {
                rest.push_str(&l);
                rest.push('\n');
            }
        }
        rest
    });
    let line = match lines_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) => l,
        Err(_) => {
            child.kill().unwrap();
            panic!("no address line on stderr: {}", logs.join().unwrap());
        }
    };
    let (listen, http) = addresses(&line);
    let plan = paper();
    let mut sw = FakeSwitch::connect(listen, &hello(12, Some(plan.clone())));
    let digests: Vec<WireDigest> = (0..10).map(|i| digest(plan.version, i)).collect();
    let mut counted = flowset(12);
    for d in &digests {
        counted.add(&d.key, 3, 300);
    }
    sw.send(
        FrameType::FlowSet,
        &encode_flowset(0, 1, 12, 170_000_000_000, &counted),
    );
    sw.send(
        FrameType::Digests,
        &encode_digests(0, &digests, |_| plan.digest_bytes),
    );
    wait_for("the digests and the flowset", || {
        switches_view(http).is_some_and(|v| v[0]["digests"] == 10 && v[0]["flowsets"] == 1)
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let rest = logs.join().unwrap();
    assert!(status.success(), "{status}: {rest}");
    let text = reader.join().unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let ports: std::collections::BTreeSet<u64> = records
        .iter()
        .map(|r| {
            assert_eq!(
                (&r["packets"], &r["bytes"]),
                (&3.into(), &300.into()),
                "{r}"
            );
            r["key"]["src_port"]
                .as_u64()
                .unwrap_or_else(|| panic!("{r}"))
        })
        .collect();
    assert_eq!(ports, (1000..1010).collect(), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .args(["--listen", "127.0.0.1:0", "--json-lines", "-"])
        .args(["--event-lines", "-"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--event-lines"), "{err}");
}

/// A switch whose ID is not in the sink's `--topology` is warned of when it connects (its
/// paths could never be decoded, and nothing else said so); a second process under a
/// connected switch's ID is said once, however often it tries (each try counted); the stop
/// line counts.
#[test]
fn a_switch_not_in_the_topology_is_said() {
    let dir = std::env::temp_dir().join(format!("pint-sink-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("net.toml");
    std::fs::write(&topo, "links = [[1, 2], [2, 3]]\n[names]\n2 = \"spine\"\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pint-sink"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--topology",
        ])
        .arg(&topo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (listen, http) = addresses(&line);
    let _known = FakeSwitch::connect(listen, &hello(2, Some(paper())));
    let _stranger = FakeSwitch::connect(listen, &hello(7, Some(paper())));
    wait_for("both switches", || {
        switches_view(http).is_some_and(|v| v.as_array().is_some_and(|a| a.len() == 2))
    });
    for session in 2..5 {
        // Another process (another session) under switch 2's ID.
        let other = Hello {
            session,
            ..hello(2, Some(paper()))
        };
        let mut again = FakeSwitch::connect(listen, &other);
        assert!(closed_by_sink(&mut again.s), "refused");
    }
    wait_for("three refusals", || {
        switches_view(http).is_some_and(|v| {
            v.as_array()
                .is_some_and(|a| a.iter().any(|s| s["id"] == 2 && s["rejected"] == 3))
        })
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("switch 7 is not in the --topology given (net, switch IDs 1-3)"),
        "{err}"
    );
    assert!(!err.contains("switch 2 is not in"), "{err}");
    // A switch of the topology is named by it where the log says it connected.
    assert!(
        err.lines()
            .any(|l| l.contains("switch=2 name=spine") && l.contains("switch connected")),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.contains("switch=7 ")
            && !l.contains("name=")
            && l.contains("switch connected")),
        "{err}"
    );
    assert!(err.contains("stopped: 2 switches known, 0 flows"), "{err}");
    assert!(!err.contains("IPFIX"), "no IPFIX asked for: {err}");
    assert_eq!(err.matches("is already connected").count(), 1, "{err}");
}

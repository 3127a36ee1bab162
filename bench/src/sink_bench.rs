//! `pint-bench sink`: how fast the sink takes what switches send.
//!
//! - Ingest: an emulated K = 4 fat tree's exports (the paper's plan) are recorded once, then
//!   replayed by switch stand-ins over loopback TCP into a sink with 1 and 2 decode threads;
//!   digests per second (wall) and per CPU second of the sink's own threads (connection
//!   threads: parse; decode threads: decode and record), read from the kernel's per-thread
//!   accounting. Every digest must be recorded (none dropped) for a run to count.
//! - FlowRadar: what the sink does with each flowset (wire decode, SingleDecode, per-flow
//!   counters) timed on one core, as flowsets of N flows per 10 ms epoch.
//! - Memory per tracked flow after the ingest run.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde::Serialize;
use std::sync::Arc;

use sink::detect::Params;
use sink::events::EventLog;
use sink::flows::{FlowTable, ShardContext};
use sink::registry::Registry;
use sink::{Sink, SinkConfig};
use telemetry::flowradar::decode::SingleDecoder;
use telemetry::flowradar::wire::{Shape, decode_shaped, encode_parts};
use telemetry::flowradar::{FlowKey, FlowSet, FlowSetConfig};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::protocol::{DigestOrder, Frame, FrameType, Session, encode_frame};
use telemetry::topology::Topology;

use crate::fabric_traffic::{Export, TrafficSpec, emulator, flowset_of, hello, run};

const PAPER: &str = include_str!("../../configs/queries/paper.toml");

/// What to run.
#[derive(Debug, Clone)]
pub struct SinkBenchOptions {
    /// Flows in the recorded traffic.
    pub flows: u32,
    /// Packets per flow.
    pub packets: u32,
    /// Times the recording is replayed per run.
    pub rounds: u32,
    /// Decode threads to run with.
    pub threads: Vec<usize>,
    /// Flows per flowset for the FlowRadar part.
    pub flowset_flows: Vec<u32>,
    /// Flows in the table of the sweep part (0: left out).
    pub sweep_flows: u32,
}

/// One ingest run.
#[derive(Debug, Clone, Serialize)]
pub struct IngestRow {
    /// Decode threads.
    pub threads: usize,
    /// Digests replayed (and recorded).
    pub digests: u64,
    /// Wall time, s.
    pub seconds: f64,
    /// Digests per second.
    pub digests_per_second: f64,
    /// CPU seconds of the sink's connection threads (frame parsing).
    pub parse_cpu_seconds: f64,
    /// CPU seconds of its decode threads (decoding and recording).
    pub decode_cpu_seconds: f64,
    /// Digests per CPU second of both (per core).
    pub digests_per_cpu_second: f64,
    /// Digests dropped at a full queue (the run does not count if any).
    pub dropped: u64,
    /// Flows tracked at the end.
    pub flows: usize,
    /// Bytes per tracked flow (the flow table over its flows).
    pub bytes_per_flow: f64,
}

/// One FlowRadar size.
#[derive(Debug, Clone, Serialize)]
pub struct FlowsetRow {
    /// Flows in each flowset.
    pub flows: u32,
    /// Bytes on the wire.
    pub wire_bytes: usize,
    /// Time per flowset (wire decode, SingleDecode, per-flow counters), µs.
    pub micros: f64,
    /// Flowsets of this size one core decodes within one 10 ms epoch.
    pub per_epoch: f64,
}

/// The sink's own work on one core: what a connection thread and a decode thread do with
/// each frame (frame decode, then recording), run back to back on the benchmark's thread,
/// with no socket, queue or other thread sharing the core.
#[derive(Debug, Clone, Serialize)]
pub struct OneCoreRow {
    /// Whether each batch was taken grouped by flow (as the sink does) or as recorded.
    pub by_flow: bool,
    /// Digests recorded.
    pub digests: u64,
    /// CPU seconds of the thread doing it.
    pub cpu_seconds: f64,
    /// Of which frame decoding.
    pub parse_seconds: f64,
    /// Digests per CPU second.
    pub digests_per_cpu_second: f64,
    /// Nanoseconds per digest.
    pub ns_per_digest: f64,
}

/// The results.
#[derive(Debug, Clone, Serialize)]
pub struct SinkBenchResult {
    /// Digest frames' bytes per digest in the recording.
    pub wire_bytes_per_digest: f64,
    /// Digests in one replay.
    pub digests_per_round: u64,
    /// Ingest runs.
    pub ingest: Vec<IngestRow>,
    /// The sink's work on one core, without the transport: as the sink does it (batches
    /// grouped by flow), and with batches taken as recorded.
    pub one_core: Vec<OneCoreRow>,
    /// FlowRadar sizes.
    pub flowsets: Vec<FlowsetRow>,
    /// A decode thread's sweeps.
    pub sweeps: Vec<crate::sink_sweep::SweepRow>,
}

/// CPU seconds so far of this process's threads whose name starts with `prefix`.
fn thread_cpu(prefix: &str) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let ut: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0);
        let st: u64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
        total += ut + st;
    }
    total as f64 / tick
}

struct Recording {
    /// Per switch: its hello payload and its digest frames' payloads.
    switches: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    digests: u64,
    digest_bytes: u64,
}

fn record(opts: &SinkBenchOptions) -> Recording {
    let topology = Topology::fat_tree(4);
    let edges = Topology::fat_tree_edges(4);
    let spec = TrafficSpec {
        batch: 4096,
        seed: 3,
        ..TrafficSpec::new(PAPER, opts.flows, opts.packets)
    };
    let mut emu = emulator(topology.clone(), &spec, 1_700_000_000_000_000_000);
    let plan = SwitchPlan::compile(PAPER, 1).expect("the paper's plan compiles");
    let mut switches: Vec<(Vec<u8>, Vec<Vec<u8>>)> = (0..topology.len() as u32)
        .map(|n| {
            (
                hello(&emu, n, &plan, &flowset_of(&emu, n)).payload(),
                Vec::new(),
            )
        })
        .collect();
    let mut digest_bytes = 0u64;
    let truth = run(&mut emu, &edges, &spec, |e: Export| {
        if e.ty == FrameType::Digests {
            digest_bytes += e.payload.len() as u64 + 16;
            switches[e.node as usize].1.push(e.payload);
        }
    });
    // Every switch says hello (the sink takes path candidates from them), though only the
    // edge switches report digests.
    Recording {
        switches,
        digests: truth.digests,
        digest_bytes,
    }
}

fn ingest(rec: &Recording, threads: usize, rounds: u32) -> anyhow::Result<IngestRow> {
    let sink = Sink::start(SinkConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        http: None,
        decode_threads: threads,
        queue_batches: 1 << 16,
        idle_timeout: Duration::from_secs(3600),
        ..SinkConfig::default()
    })?;
    let addr: SocketAddr = sink.listen_addr();
    let shared = sink.shared().clone();
    let recorded = || -> u64 {
        shared
            .shards
            .iter()
            .map(|s| s.table.lock().expect("flow table lock").stats.digests)
            .sum()
    };
    let dropped = || -> u64 {
        shared
            .registry
            .switches()
            .iter()
            .map(|e| e.counters.digests_dropped.load(Relaxed))
            .sum()
    };
    // Connect every stand-in and let the sink learn the plan before timing.
    let mut conns: Vec<TcpStream> = Vec::new();
    for (h, _) in &rec.switches {
        let mut s = TcpStream::connect(addr)?;
        s.write_all(&encode_frame(FrameType::Hello, 0, h))?;
        conns.push(s);
    }
    let t0 = Instant::now();
    while shared.registry.switches().len() < rec.switches.len() {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(10), "stand-ins connect");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Frames with their sequence numbers, ready to write.
    let streams: Vec<Vec<u8>> = rec
        .switches
        .iter()
        .map(|(_, frames)| {
            let mut out = Vec::new();
            let mut seq = 0u64;
            for _ in 0..rounds {
                for f in frames {
                    seq += 1;
                    out.extend_from_slice(&encode_frame(FrameType::Digests, seq, f));
                }
            }
            out
        })
        .collect();
    let total = rec.digests * u64::from(rounds);
    let (parse0, decode0) = (thread_cpu("switch"), thread_cpu("decode-"));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (s, bytes) in conns.iter_mut().zip(&streams) {
            if !bytes.is_empty() {
                scope.spawn(move || s.write_all(bytes));
            }
        }
    });
    while recorded() + dropped() < total {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(600),
            "the sink recorded {} of {total} digests",
            recorded()
        );
        std::thread::sleep(Duration::from_micros(500));
    }
    let seconds = start.elapsed().as_secs_f64();
    let (parse, decode) = (
        thread_cpu("switch") - parse0,
        thread_cpu("decode-") - decode0,
    );
    let (flows, memory): (usize, usize) = shared
        .shards
        .iter()
        .map(|s| {
            let t = s.table.lock().expect("flow table lock");
            (t.len(), t.memory_bytes())
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let row = IngestRow {
        threads,
        digests: total,
        seconds,
        digests_per_second: total as f64 / seconds,
        parse_cpu_seconds: parse,
        decode_cpu_seconds: decode,
        digests_per_cpu_second: total as f64 / (parse + decode).max(0.01),
        dropped: dropped(),
        flows,
        bytes_per_flow: memory as f64 / flows.max(1) as f64,
    };
    drop(conns);
    sink.stop();
    Ok(row)
}

/// CPU time of the calling thread, s.
fn own_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Frame decoding and recording of `rounds` replays on this thread (the switches' frames
/// interleaved as they would arrive), as the sink's connection and decode threads do them.
/// Out of line so that a profiler can count it alone
/// (`valgrind --tool=callgrind --toggle-collect=bench::sink_bench::one_core`).
#[inline(never)]
fn one_core(rec: &Recording, rounds: u32, by_flow: bool) -> anyhow::Result<OneCoreRow> {
    let registry = Arc::new(Registry::default());
    let mut sessions: Vec<(Session, u32)> = Vec::new();
    for (h, _) in &rec.switches {
        let mut s = Session::new(if by_flow {
            DigestOrder::ByFlow
        } else {
            DigestOrder::Recorded
        });
        let Frame::Hello(hello) = s.decode(&encode_frame(FrameType::Hello, 0, h))? else {
            anyhow::bail!("a hello decodes as one");
        };
        registry
            .connect(&hello, "bench", 0)
            .expect("a switch ID of its own");
        if let Some(p) = &hello.plan {
            registry
                .add_plan(p.version, &p.text)
                .map_err(|e| anyhow::anyhow!("the plan: {e}"))?;
        }
        sessions.push((s, hello.switch_id));
    }
    let cx = ShardContext {
        registry,
        topology: None,
        events: Arc::new(EventLog::default()),
        detection: Params::default(),
        unfit_said_ms: Arc::default(),
    };
    let mut table = FlowTable::new(1 << 20);
    let frames: Vec<Vec<Vec<u8>>> = rec
        .switches
        .iter()
        .map(|(_, fs)| {
            let mut seq = 0u64;
            (0..rounds)
                .flat_map(|_| fs.iter())
                .map(|f| {
                    seq += 1;
                    encode_frame(FrameType::Digests, seq, f)
                })
                .collect()
        })
        .collect();
    let longest = frames.iter().map(Vec::len).max().unwrap_or(0);
    let (mut parse, mut digests) = (0.0, 0u64);
    let start = own_cpu();
    for j in 0..longest {
        for ((session, switch), fs) in sessions.iter_mut().zip(&frames) {
            let Some(f) = fs.get(j) else { continue };
            let t = own_cpu();
            let Frame::Digests(b) = session.decode(f)? else {
                anyhow::bail!("a digest frame decodes as one");
            };
            parse += own_cpu() - t;
            table.add_digests(&cx, *switch, &b.digests, &b.by_flow);
            digests += b.digests.len() as u64;
            session.recycle(b.digests, b.by_flow);
        }
    }
    let cpu = own_cpu() - start;
    anyhow::ensure!(
        table.stats.digests == digests,
        "recorded {} of {digests} digests",
        table.stats.digests
    );
    Ok(OneCoreRow {
        by_flow,
        digests,
        cpu_seconds: cpu,
        parse_seconds: parse,
        digests_per_cpu_second: digests as f64 / cpu.max(1e-9),
        ns_per_digest: cpu * 1e9 / digests.max(1) as f64,
    })
}

fn flowsets(flows: u32) -> anyhow::Result<FlowsetRow> {
    let mut fs = FlowSet::new(&FlowSetConfig::for_flows(flows, 7));
    for f in 0..flows {
        let k = FlowKey {
            src: 0x0a00_0000 | f,
            dst: 0x0b00_0000 | (f >> 3),
            src_port: f as u16,
            dst_port: 443,
            protocol: 6,
        };
        for p in 0..(1 + f % 20) {
            fs.update(&k, 64 + p * 50);
        }
    }
    let shape = Shape::of(&fs);
    let wire = encode_parts(7, 1, &fs);
    let mut d = SingleDecoder::default();
    let mut counts: Vec<(FlowKey, u32, u64, u64)> = Vec::with_capacity(flows as usize);
    // A flowset that does not decode whole would time a failed decode, not a decode.
    let first = d.decode(&decode_shaped(&wire, Some(shape))?.flowset);
    if !first.complete {
        anyhow::bail!(
            "--flowset-flows {flows}: a flowset sized for {flows} flows, filled with them, \
             decoded {} of them, not all (the sizing's margin is too small for so few flows: \
             take more)",
            first.flows.len()
        );
    }
    let reps = (2_000_000 / flows.max(1)).clamp(3, 200);
    let t = Instant::now();
    for _ in 0..reps {
        let e = decode_shaped(&wire, Some(shape)).expect("a flowset");
        let r = d.decode(&e.flowset);
        assert!(r.complete, "decoded whole before");
        counts.clear();
        counts.extend(r.flows.iter().map(|f| (f.key, 7, f.packets, f.bytes)));
        std::hint::black_box(&counts);
    }
    let micros = t.elapsed().as_secs_f64() * 1e6 / f64::from(reps);
    Ok(FlowsetRow {
        flows,
        wire_bytes: wire.len(),
        micros,
        per_epoch: 10_000.0 / micros,
    })
}

/// Runs the benchmark.
pub fn run_bench(opts: &SinkBenchOptions) -> anyhow::Result<SinkBenchResult> {
    // First: a size that cannot be measured is said before the long parts run.
    let flowset_rows = opts
        .flowset_flows
        .iter()
        .map(|&f| flowsets(f))
        .collect::<anyhow::Result<_>>()?;
    let rec = record(opts);
    let mut ingest_rows = Vec::new();
    for &t in &opts.threads {
        ingest_rows.push(ingest(&rec, t, opts.rounds)?);
    }
    Ok(SinkBenchResult {
        wire_bytes_per_digest: rec.digest_bytes as f64 / rec.digests.max(1) as f64,
        digests_per_round: rec.digests,
        ingest: ingest_rows,
        one_core: vec![
            one_core(&rec, opts.rounds, true)?,
            one_core(&rec, opts.rounds, false)?,
        ],
        flowsets: flowset_rows,
        sweeps: match opts.sweep_flows {
            0 => Vec::new(),
            n => crate::sink_sweep::sweeps(n)?,
        },
    })
}

/// Prints the results.
pub fn print_table(r: &SinkBenchResult) {
    println!(
        "ingest: the paper's plan, {} digests per replay ({:.1} bytes per digest on the wire)",
        r.digests_per_round, r.wire_bytes_per_digest
    );
    println!(
        "{:>7} {:>10} {:>8} {:>12} {:>9} {:>10} {:>13} {:>8} {:>7} {:>10}",
        "threads",
        "digests",
        "seconds",
        "digests/s",
        "parse s",
        "decode s",
        "per CPU s",
        "dropped",
        "flows",
        "bytes/flow"
    );
    for x in &r.ingest {
        println!(
            "{:>7} {:>10} {:>8.2} {:>12.0} {:>9.2} {:>10.2} {:>13.0} {:>8} {:>7} {:>10.0}",
            x.threads,
            x.digests,
            x.seconds,
            x.digests_per_second,
            x.parse_cpu_seconds,
            x.decode_cpu_seconds,
            x.digests_per_cpu_second,
            x.dropped,
            x.flows,
            x.bytes_per_flow
        );
    }
    println!(
        "one core, no transport (frame decode + recording, the switches' batches interleaved):"
    );
    println!(
        "{:>10} {:>10} {:>8} {:>9} {:>13} {:>13}",
        "batches", "digests", "CPU s", "parse s", "per CPU s", "ns per digest"
    );
    for o in &r.one_core {
        println!(
            "{:>10} {:>10} {:>8.2} {:>9.2} {:>13.0} {:>13.1}",
            if o.by_flow { "by flow" } else { "as sent" },
            o.digests,
            o.cpu_seconds,
            o.parse_seconds,
            o.digests_per_cpu_second,
            o.ns_per_digest
        );
    }
    println!("FlowRadar at the sink, one core (wire decode + SingleDecode + per-flow counters):");
    println!(
        "{:>8} {:>11} {:>12} {:>22}",
        "flows", "wire bytes", "µs each", "flowsets per 10 ms"
    );
    for x in &r.flowsets {
        println!(
            "{:>8} {:>11} {:>12.0} {:>22.1}",
            x.flows, x.wire_bytes, x.micros, x.per_epoch
        );
    }
    if !r.sweeps.is_empty() {
        crate::sink_sweep::print_table(&r.sweeps);
    }
}

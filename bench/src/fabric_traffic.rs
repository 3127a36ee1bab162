//! Traffic through an emulated fabric (the switches' own pipeline over real frames, no DPDK)
//! turned into what each switch sends its sink: hellos, digest batches and flowsets, in the
//! protocol's frames. With it the sink is tested and benchmarked against an exact truth:
//! every flow's route, every hop's latency, every switch's per-flow counts per epoch, every
//! packet lost on a lossy link.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use pipeline::PortRole;
use pipeline::capture::PacketSpec;
use pipeline::emulator::{Emulator, EmulatorConfig, Outcome};
use pipeline::fabric::{host_addr, host_mac, port_mac};
use telemetry::flowradar::flowset::FILTER_SEED;
use telemetry::flowradar::wire::Shape;
use telemetry::flowradar::{FlowKey, FlowSet, FlowSetConfig};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::protocol::{
    FrameType, Hello, PlanText, PortInfo, WireDigest, WireProbe, encode_digests, encode_flowset,
    encode_probes,
};
use telemetry::sim_rng::SimRng;
use telemetry::topology::Topology;

/// What traffic to send.
#[derive(Debug, Clone)]
pub struct TrafficSpec {
    /// The query file every switch runs.
    pub plan: String,
    /// Flows, between random edge switches.
    pub flows: u32,
    /// Packets per flow.
    pub packets: u32,
    /// A link (node numbers, from -> to) that loses this share of the frames crossing it.
    pub lossy_link: Option<((u32, u32), f64)>,
    /// Mean hop latency at hop 1, ns; hop `h` holds a packet uniformly between 0.5 and 1.5
    /// times `h` times this.
    pub hop_ns: u64,
    /// FlowRadar epoch, ns.
    pub epoch_ns: u64,
    /// Digests per batch.
    pub batch: usize,
    /// Seed.
    pub seed: u64,
    /// Time between two packets sent (all flows together), ns.
    pub gap_ns: u64,
    /// The lossy link loses frames only between these times (s since the start), if given.
    pub lossy_during: Option<(f64, f64)>,
    /// A switch that holds packets longer for a while.
    pub slow: Option<Slow>,
    /// The first this many flows are probe streams: their packets carry a probe payload
    /// (`telemetry::wire::probe`: stream, sequence number, send time).
    pub probe_flows: u32,
}

/// A switch holding packets longer for a while: `extra_ns` to twice that on top of its
/// usual time, between `from_s` and `to_s` (s since the start).
#[derive(Debug, Clone, Copy)]
pub struct Slow {
    /// The switch (node number).
    pub node: u32,
    /// From, s.
    pub from_s: f64,
    /// To, s.
    pub to_s: f64,
    /// Extra holding time, ns.
    pub extra_ns: u64,
}

impl TrafficSpec {
    /// `flows` x `packets` of the plan `plan`, back to back (1 µs apart), with the usual
    /// hop times (2 µs at hop 1), 10 ms epochs, 500 digests per batch, no loss, no slow
    /// switch.
    pub fn new(plan: &str, flows: u32, packets: u32) -> TrafficSpec {
        TrafficSpec {
            plan: plan.to_owned(),
            flows,
            packets,
            lossy_link: None,
            hop_ns: 2_000,
            epoch_ns: 10_000_000,
            batch: 500,
            seed: 5,
            gap_ns: 1_000,
            lossy_during: None,
            slow: None,
            probe_flows: 0,
        }
    }
}

/// One flow's truth.
#[derive(Debug, Clone)]
pub struct FlowTruth {
    /// The flow.
    pub key: FlowKey,
    /// Its route (node numbers), as the switches forwarded it.
    pub route: Vec<u32>,
    /// Packets sent.
    pub sent: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Per node: (packets, bytes) counted there.
    pub counted: HashMap<u32, (u64, u64)>,
    /// Per node: epochs in which it counted the flow.
    pub epochs: HashMap<u32, Vec<u64>>,
}

/// Everything that happened.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// The flows.
    pub flows: Vec<FlowTruth>,
    /// Packets lost per link (node numbers).
    pub lost: HashMap<(u32, u32), u64>,
    /// Digests produced.
    pub digests: u64,
    /// Flowsets produced.
    pub flowsets: u64,
}

/// A frame for a switch's sink: its type and payload.
#[derive(Debug, Clone)]
pub struct Export {
    /// The switch's node number.
    pub node: u32,
    /// Frame type.
    pub ty: FrameType,
    /// Payload.
    pub payload: Vec<u8>,
}

/// The hello node `n` of `emu` sends (one worker; `plan` its query file).
pub fn hello(emu: &Emulator, n: u32, plan: &SwitchPlan, flowset: &FlowSet) -> Hello {
    let node = &emu.nodes[n as usize];
    Hello {
        switch_id: emu.topology.switch_id(n),
        session: 0x5e55_1000 + u64::from(n),
        epoch_ns: emu.config.epoch_ns,
        shim_ethertype: emu.config.shim_ethertype,
        shape: Shape::of(flowset),
        filter_seed: FILTER_SEED,
        table_seeds: vec![flowset.table_seed()],
        max_digests: 1 << 16,
        ports: node
            .tables
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortInfo {
                name: format!("p{i}"),
                edge: p.role == PortRole::Edge,
                capacity_bps: p.capacity_bps,
                mac: p.mac,
            })
            .collect(),
        plan: Some(PlanText {
            version: plan.version(),
            digest_bytes: plan.digest_bytes() as u8,
            text: plan.text.clone(),
        }),
    }
}

/// An empty flowset as the emulator's switch `n` sizes and seeds it (for its hello).
pub fn flowset_of(emu: &Emulator, n: u32) -> FlowSet {
    FlowSet::new(&FlowSetConfig::for_flows(
        emu.config.expected_flows,
        emu.topology.switch_id(n),
    ))
}

/// An emulator on `topology` for `spec`, its clock at `start_ns` (Unix time, so that epochs
/// are numbered as a real switch numbers them).
pub fn emulator(topology: Topology, spec: &TrafficSpec, start_ns: u64) -> Emulator {
    let mut emu = Emulator::new(
        topology,
        EmulatorConfig {
            plan: Some(spec.plan.clone()),
            expected_flows: (spec.flows * 2).max(64),
            epoch_ns: spec.epoch_ns,
            ring: 1 << 20,
            ..Default::default()
        },
    )
    .expect("the fabric builds");
    emu.advance_to(start_ns);
    // The first epochs close at once (from epoch 0 to now); drop them.
    for n in 0..emu.nodes.len() as u32 {
        emu.flowsets(n);
    }
    emu
}

/// The flows of `spec`: (source node, destination node, first packet), between random edge
/// switches `edges`.
pub fn plan_flows(spec: &TrafficSpec, edges: &[u32]) -> Vec<(u32, u32, PacketSpec)> {
    let mut rng = SimRng::new(spec.seed);
    (0..spec.flows)
        .map(|f| {
            let src = edges[rng.below(edges.len() as u64) as usize];
            let mut dst = edges[rng.below(edges.len() as u64) as usize];
            if dst == src {
                dst = edges
                    [(edges.iter().position(|&e| e == src).expect("an edge") + 1) % edges.len()];
            }
            let mut p = PacketSpec::udp(
                Ipv4Addr::from(host_addr(src, 1)),
                Ipv4Addr::from(host_addr(dst, 1)),
                1000 + f as u16,
                4791,
            );
            p.dst_mac = port_mac(src, 0);
            p.src_mac = host_mac(src);
            p.payload_len = 40 + (f as usize % 9) * 100;
            (src, dst, p)
        })
        .collect()
}

/// The route (node numbers) a flow's packets take through a fabric like `emu`'s, found with
/// a scratch copy of it (nothing is counted in `emu`).
pub fn route_of(
    topology: &Topology,
    spec: &TrafficSpec,
    src: u32,
    packet: &PacketSpec,
) -> Vec<u32> {
    let mut scratch = emulator(topology.clone(), spec, 0);
    match scratch.send(src, &packet.build(), |_| 1_000) {
        Outcome::Delivered { path, .. } => path,
        other => panic!("{other:?}"),
    }
}

/// Sends `spec`'s traffic through `emu` (edge switches: `edges`), handing every frame a
/// switch would send its sink to `out` as it would send it. Returns the truth.
pub fn run(
    emu: &mut Emulator,
    edges: &[u32],
    spec: &TrafficSpec,
    mut out: impl FnMut(Export),
) -> Truth {
    let mut rng = SimRng::new(spec.seed ^ 0x7472_6166);
    let plan = SwitchPlan::compile(&spec.plan, 1).expect("the plan compiles");
    let digest_bytes = plan.digest_bytes() as u8;
    let nodes = emu.nodes.len() as u32;
    let mut truth = Truth::default();
    let mut flows = plan_flows(spec, edges);
    for (f, (src, dst, _)) in flows.iter().enumerate() {
        let sport = 1000 + f as u16;
        truth.flows.push(FlowTruth {
            key: FlowKey {
                src: host_addr(*src, 1),
                dst: host_addr(*dst, 1),
                src_port: sport,
                dst_port: 4791,
                protocol: 17,
            },
            route: Vec::new(),
            sent: 0,
            delivered: 0,
            counted: HashMap::new(),
            epochs: HashMap::new(),
        });
    }
    let mut pending: Vec<Vec<WireDigest>> = vec![Vec::new(); nodes as usize];
    let flush = |emu: &mut Emulator,
                 pending: &mut Vec<Vec<WireDigest>>,
                 truth: &mut Truth,
                 all: bool,
                 out: &mut dyn FnMut(Export)| {
        for n in 0..nodes {
            let records = emu.digests(n);
            // Probe arrivals go in a frame of their own, as the control thread sends them.
            let probes: Vec<WireProbe> = emu
                .probes(n)
                .iter()
                .map(|p| WireProbe {
                    key: p.key,
                    stream: p.probe.stream,
                    seq: p.probe.seq,
                    sent_ns: p.probe.sent_ns,
                    recv_ns: p.tsc,
                })
                .collect();
            if !probes.is_empty() {
                out(Export {
                    node: n,
                    ty: FrameType::Probes,
                    payload: encode_probes(0, &probes),
                });
            }
            pending[n as usize].extend(records.iter().map(|r| r.to_wire(r.tsc)));
            let p = &mut pending[n as usize];
            while p.len() >= spec.batch || (all && !p.is_empty()) {
                let take = p.len().min(spec.batch);
                let batch: Vec<WireDigest> = p.drain(..take).collect();
                truth.digests += batch.len() as u64;
                out(Export {
                    node: n,
                    ty: FrameType::Digests,
                    payload: encode_digests(0, &batch, |_| digest_bytes),
                });
            }
            for c in emu.flowsets(n) {
                truth.flowsets += 1;
                out(Export {
                    node: n,
                    ty: FrameType::FlowSet,
                    payload: encode_flowset(
                        c.worker,
                        c.epochs,
                        emu.topology.switch_id(n),
                        c.epoch,
                        &c.flowset,
                    ),
                });
            }
        }
    };
    let total = u64::from(spec.flows) * u64::from(spec.packets);
    let begin = emu.now_ns;
    let mut last_flush = begin;
    for i in 0..total {
        let since = (emu.now_ns - begin) as f64 / 1e9;
        let fi = (i % u64::from(spec.flows)) as usize;
        let (src, _, p) = &mut flows[fi];
        p.ident = (i / u64::from(spec.flows)) as u16;
        let mut frame = p.build();
        if (fi as u32) < spec.probe_flows {
            // A probe: its payload after the UDP header (untagged frame, no IP options), the
            // UDP checksum left out (zero: allowed over IPv4).
            let probe = telemetry::wire::probe::ProbePayload {
                stream: fi as u32,
                seq: truth.flows[fi].sent,
                sent_ns: emu.now_ns,
            };
            frame[42..42 + telemetry::wire::probe::PROBE_LEN].copy_from_slice(&probe.encode());
            frame[40..42].fill(0);
        }
        let bytes = (frame.len() - 14) as u64;
        // Hop h holds the packet uniformly between 0.5 and 1.5 times h x hop_ns; the frame
        // crosses the lossy link (at most once) and is lost there with its share.
        let holds: Vec<f64> = (0..16).map(|_| 0.5 + rng.unit()).collect();
        let lose_u = rng.unit();
        let start = emu.now_ns;
        let mut at: Vec<(u32, u64)> = Vec::new();
        let mut elapsed = 0u64;
        let lossy = spec.lossy_link.filter(|_| {
            spec.lossy_during
                .is_none_or(|(a, b)| (a..b).contains(&since))
        });
        let slow = spec.slow.filter(|s| (s.from_s..s.to_s).contains(&since));
        let extra = slow.map_or(0, |s| s.extra_ns + (s.extra_ns as f64 * rng.unit()) as u64);
        let out_come = emu.send_lossy(
            *src,
            &frame,
            |n| {
                let h = at.len();
                at.push((n, start + elapsed));
                let mut d = (spec.hop_ns as f64 * (h + 1) as f64 * holds[h.min(15)]) as u64;
                if slow.is_some_and(|s| s.node == n) {
                    d += extra;
                }
                elapsed += d;
                d
            },
            |a, b| matches!(lossy, Some((l, share)) if l == (a, b) && lose_u < share),
        );
        let t = &mut truth.flows[fi];
        t.sent += 1;
        let (path, delivered) = match out_come {
            Outcome::Delivered { path, .. } => (path, true),
            Outcome::Lost { path, after, to } => {
                *truth.lost.entry((after, to)).or_default() += 1;
                (path, false)
            }
            Outcome::Dropped { node, reason } => {
                panic!("switch {node} dropped a frame: {reason:?}")
            }
        };
        if delivered {
            t.delivered += 1;
            t.route = path.clone();
        }
        debug_assert_eq!(path.len(), at.len());
        for (n, rx) in at {
            let c = t.counted.entry(n).or_default();
            c.0 += 1;
            c.1 += bytes;
            let epoch = rx / spec.epoch_ns;
            let e = t.epochs.entry(n).or_default();
            if e.last() != Some(&epoch) {
                e.push(epoch);
            }
        }
        // Every switch keeps time, as a real one does between packets.
        emu.advance_to(emu.now_ns.max(start + spec.gap_ns));
        // What the control thread does: drain the rings and collect flowsets often (every
        // epoch at least, so that every worker has a flowset to count into).
        if i % 256 == 255 || emu.now_ns - last_flush >= spec.epoch_ns / 2 {
            flush(emu, &mut pending, &mut truth, false, &mut out);
            last_flush = emu.now_ns;
        }
    }
    // Let every epoch end (time moving as it does on a switch, a little at a time), then
    // send what is left.
    for _ in 0..8 {
        emu.advance_to(emu.now_ns + spec.epoch_ns / 2);
        flush(emu, &mut pending, &mut truth, true, &mut out);
    }
    truth
}

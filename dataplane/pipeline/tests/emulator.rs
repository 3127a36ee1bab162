//! The pipeline with its telemetry stages, switch after switch over real frame bytes: what
//! hosts receive, what the digests decode to, what the flowsets count, and how the stages
//! treat frames that are not what they expect.

mod common;

use std::collections::HashMap;
use std::net::Ipv4Addr;

use pipeline::capture::{L4, PacketSpec};
use pipeline::emulator::{Emulator, EmulatorConfig, Outcome};
use pipeline::fabric::{host_addr, host_mac, port_mac};
use pipeline::{DropReason, TelemetryEvent};
use telemetry::flowradar::{FlowKey, single_decode};
use telemetry::pint::path_decoder::Space;
use telemetry::pint::plan::Plan;
use telemetry::pint::query::QueryFile;
use telemetry::pint::recording::FlowRecorder;
use telemetry::sim_rng::SimRng;
use telemetry::topology::Topology;

const PAPER: &str = include_str!("../../../configs/queries/paper.toml");

fn packet(src: u32, dst: u32, sport: u16, ident: u16, ttl: u8) -> PacketSpec {
    let mut p = PacketSpec::udp(
        Ipv4Addr::from(host_addr(src, 1)),
        Ipv4Addr::from(host_addr(dst, 1)),
        sport,
        4791,
    );
    p.ident = ident;
    p.ttl = ttl;
    p.dst_mac = port_mac(src, 0);
    p.src_mac = host_mac(src);
    p.payload_len = 40 + usize::from(sport % 7) * 100;
    p
}

/// An emulator of `t` running the paper's plan, its other settings the defaults.
fn paper_emulator(t: &Topology) -> Emulator {
    Emulator::new(
        t.clone(),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// What plain forwarding over `k` hops delivers: TTL down by `k`, MACs of the last hop.
fn plainly_forwarded(p: &PacketSpec, last: u32, k: usize) -> Vec<u8> {
    let mut q = p.clone();
    q.ttl -= k as u8;
    q.dst_mac = host_mac(last);
    q.src_mac = port_mac(last, 0);
    q.build()
}

/// The paper's plan on a K = 8 fat tree: hosts get exactly the bytes plain forwarding gives,
/// every flow's path decodes from the last hop's digests, per-hop latency medians come out
/// near the truth, utilisation is in range, and the flowsets count every flow exactly.
#[test]
fn paper_plan_end_to_end_on_a_fat_tree() {
    let t = Topology::fat_tree(8);
    let plan = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let mut emu = Emulator::new(
        t.clone(),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            expected_flows: 200,
            epoch_ns: 50_000_000,
            ..Default::default()
        },
    )
    .unwrap();
    let path_q = plan.query_index("path").unwrap();
    let lat_q = plan.query_index("latency").unwrap();
    let util_q = plan.query_index("utilization").unwrap();
    let edges = Topology::fat_tree_edges(8);
    let mut rng = SimRng::new(11);
    let packets = 2000u16;
    let mut truth: HashMap<FlowKey, (u64, u64)> = HashMap::new();
    let mut flows = Vec::new();
    for f in 0..30u16 {
        let src = edges[rng.below(32) as usize];
        let mut dst = edges[rng.below(32) as usize];
        if dst == src {
            dst = edges[(edges.iter().position(|&e| e == src).unwrap() + 1) % 32];
        }
        let sport = 1000 + f;
        let mut path = None;
        for ident in 0..packets {
            let p = packet(src, dst, sport, ident, 64);
            let bytes = p.build();
            let mut hop = 0u64;
            let out = emu.send(src, &bytes, |_| {
                hop += 1;
                // Hop h holds a packet around 2000 h ns.
                (2000.0 * hop as f64 * (0.5 + rng.unit())) as u64
            });
            let Outcome::Delivered {
                node,
                frame,
                path: p_nodes,
            } = out
            else {
                panic!("flow {f}: {out:?}");
            };
            assert_eq!(node, dst);
            assert_eq!(
                frame,
                plainly_forwarded(&p, dst, p_nodes.len()),
                "flow {f} packet {ident}: hosts get plain forwarding's bytes"
            );
            let e = truth
                .entry(FlowKey {
                    src: host_addr(src, 1),
                    dst: host_addr(dst, 1),
                    src_port: sport,
                    dst_port: 4791,
                    protocol: 17,
                })
                .or_default();
            e.0 += 1;
            e.1 += (bytes.len() - 14) as u64;
            path = Some(p_nodes);
        }
        flows.push((src, dst, sport, path.unwrap()));
    }
    // Digests: decode at the sink side, per flow.
    let mut by_flow: HashMap<u16, Vec<_>> = HashMap::new();
    for n in 0..t.len() as u32 {
        for r in emu.digests(n) {
            assert_eq!(r.plan_version, plan.version);
            by_flow.entry(r.key.src_port).or_default().push(r);
        }
    }
    for (src, dst, sport, path) in &flows {
        let k = path.len();
        let records = &by_flow[sport];
        assert_eq!(records.len(), usize::from(packets), "one record per packet");
        let mut rec = FlowRecorder::new(&plan, k, Space::Topology(&t), Some(t.switch_id(*dst)));
        for r in records {
            assert_eq!(usize::from(r.hops), k);
            assert_eq!(r.key.src, host_addr(*src, 1));
            rec.record(r.pid, r.digest);
        }
        let ids: Vec<u32> = path.iter().map(|&n| t.switch_id(n)).collect();
        assert_eq!(
            rec.path(path_q).unwrap().path(),
            Some(ids),
            "flow {sport}: decoded path"
        );
        let sk = rec.sketches(lat_q).unwrap();
        for hop in 1..=k {
            let m = sk.quantile(hop, 0.5).unwrap();
            let want = 2000.0 * hop as f64;
            // Latency is uniform on [want / 2, 3 want / 2], so a rank error r moves the median
            // by r x want: the sketch's rank error (doubled), the sample's own spread (three
            // standard deviations of a median of n uniform samples) and one compression step.
            let n = sk.samples(hop) as f64;
            let tolerance = 2.0 * sk.rank_error() + 3.0 * 0.5 / n.sqrt() + 0.045;
            assert!(
                (m - want).abs() / want < tolerance,
                "flow {sport} hop {hop}: median {m} vs {want} (tolerance {tolerance}, {n} samples, K {})",
                sk.kll_k()
            );
        }
        let u = rec.aggregate(util_q).unwrap();
        assert!(
            u.count > 60 && u.count < 200,
            "utilisation on about 1/16 of 2000 packets: {}",
            u.count
        );
        assert!(u.max > 0.0 && u.max < 2.0, "utilisation {}", u.max);
    }
    // Flowsets: every switch's epochs add up to every flow's exact packets and bytes.
    let mut counted: HashMap<(u32, FlowKey), (u64, u64)> = HashMap::new();
    // Two rounds: a switch whose spare flowsets were all waiting for collection keeps the
    // active one going (a late epoch) until one comes back.
    let mut closed = Vec::new();
    for _ in 0..2 {
        emu.advance_to(emu.now_ns + 1_000_000_000);
        for n in 0..t.len() as u32 {
            closed.extend(emu.flowsets(n).into_iter().map(|c| (n, c)));
        }
    }
    for (n, c) in closed {
        {
            let d = single_decode(&c.flowset);
            assert!(d.complete, "switch {n} epoch {}", c.epoch);
            for f in d.flows {
                let e = counted.entry((n, f.key)).or_default();
                e.0 += f.packets;
                e.1 += f.bytes;
            }
        }
    }
    for (src, dst, sport, path) in &flows {
        let key = FlowKey {
            src: host_addr(*src, 1),
            dst: host_addr(*dst, 1),
            src_port: *sport,
            dst_port: 4791,
            protocol: 17,
        };
        for n in path {
            assert_eq!(
                counted.get(&(*n, key)),
                truth.get(&key),
                "flow {sport} at {n}"
            );
        }
    }
    let c = emu.counters(flows[0].0);
    assert!(c.telemetry.get(TelemetryEvent::ShimInserted) >= u64::from(packets));
    assert_eq!(c.telemetry.get(TelemetryEvent::DigestDropped), 0);
}

/// Hop indices count from the first PINT hop whatever TTL packets arrive with there (a
/// replayed capture's TTLs are what they were where it was taken, routers before the
/// fabric take some off): every digest record gives the path's true length and every
/// flow's path decodes.
#[test]
fn paths_decode_whatever_ttl_packets_arrive_with() {
    let t = Topology::line(5);
    let plan = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let mut emu = paper_emulator(&t);
    let path_q = plan.query_index("path").unwrap();
    let ttls = [64u8, 57, 31, 65, 100, 128, 129, 200, 250, 255, 6];
    for (f, &ttl) in ttls.iter().enumerate() {
        let (src, dst) = if f % 2 == 0 { (0, 4) } else { (4, 0) };
        let sport = 2000 + f as u16;
        for ident in 0..400u16 {
            let p = packet(src, dst, sport, ident, ttl);
            let out = emu.send(src, &p.build(), |_| 1000);
            let Outcome::Delivered { frame, path, .. } = out else {
                panic!("TTL {ttl}: {out:?}");
            };
            assert_eq!(frame, plainly_forwarded(&p, dst, path.len()), "TTL {ttl}");
        }
    }
    let mut by_flow: HashMap<u16, Vec<_>> = HashMap::new();
    for n in [0, 4] {
        for r in emu.digests(n) {
            by_flow.entry(r.key.src_port).or_default().push(r);
        }
    }
    for (f, &ttl) in ttls.iter().enumerate() {
        let (src, dst) = if f % 2 == 0 { (0u32, 4u32) } else { (4, 0) };
        let records = &by_flow[&(2000 + f as u16)];
        assert_eq!(records.len(), 400);
        let mut rec = FlowRecorder::new(&plan, 5, Space::Topology(&t), Some(t.switch_id(dst)));
        for r in records {
            assert_eq!(r.hops, 5, "TTL {ttl}: the path's length");
            rec.record(r.pid, r.digest);
        }
        let want: Vec<u32> = if src == 0 {
            (0..5).map(|n| t.switch_id(n)).collect()
        } else {
            (0..5).rev().map(|n| t.switch_id(n)).collect()
        };
        assert_eq!(rec.path(path_q).unwrap().path(), Some(want), "TTL {ttl}");
    }
}

/// A line of three switches with hosts behind the ends: the shim shows between the hops,
/// not at the ends; VLAN tags survive; frames the stages must not trust are counted.
#[test]
fn shims_appear_only_inside_the_fabric() {
    let t = Topology::line(3);
    let plan = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let mut emu = paper_emulator(&t);
    // With VLAN tags and TCP.
    let mut p = packet(0, 2, 5000, 9, 64);
    p.vlans = vec![100, 200];
    p.l4 = L4::Tcp {
        sport: 5000,
        dport: 80,
        seq: 77,
    };
    let out = emu.send(0, &p.build(), |_| 500);
    let Outcome::Delivered { frame, path, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(frame, plainly_forwarded(&p, 2, 3));
    assert_eq!(path, vec![0, 1, 2]);
    assert_eq!(
        emu.counters(0).telemetry.get(TelemetryEvent::ShimInserted),
        1
    );
    assert_eq!(
        emu.counters(1)
            .telemetry
            .get(TelemetryEvent::TransitEncoded),
        1
    );
    assert_eq!(
        emu.counters(2).telemetry.get(TelemetryEvent::ShimStripped),
        1
    );
    let r = emu.digests(2);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].hops, r[0].plan_version), (3, plan.version));

    // Hosts behind one switch: reported, never shimmed.
    let q = packet(1, 1, 6000, 1, 64);
    let out = emu.send(1, &q.build(), |_| 500);
    assert!(matches!(out, Outcome::Delivered { ref path, .. } if path == &vec![1]));
    assert_eq!(emu.counters(1).telemetry.get(TelemetryEvent::OneHop), 1);
    assert_eq!(emu.digests(1)[0].hops, 1);

    // A host that sends a shim is dropped at the edge.
    let mut forged = packet(0, 2, 5001, 1, 64).build();
    forged.splice(14..14, [0x12u8, 0, 0, 0, 0, 0, 0x08, 0x00]);
    forged[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    let out = emu.send(0, &forged, |_| 1);
    assert_eq!(
        out,
        Outcome::Dropped {
            node: 0,
            reason: DropReason::ShimFromHost
        }
    );
}

/// Packet `p` as probe `seq` of stream 5: the probe payload at the start of its UDP payload.
fn probe_frame(p: &PacketSpec, seq: u64) -> Vec<u8> {
    let mut p = p.clone();
    p.payload_len = p.payload_len.max(telemetry::wire::probe::PROBE_LEN);
    let mut frame = p.build();
    let probe = telemetry::wire::probe::ProbePayload {
        stream: 5,
        seq,
        sent_ns: 1_000 + seq,
    }
    .encode();
    frame[42..42 + probe.len()].copy_from_slice(&probe);
    frame
}

/// A hot reload in the middle of a flow: packets tagged with either plan decode with their
/// own plan, and a switch that does not know a tag passes the packet without encoding. A
/// probe whose digest is not reported (its plan unknown at the last hop, or its digest left
/// incomplete) is still reported as arrived: its stream shows no loss.
#[test]
fn plans_change_between_bursts_without_mixing() {
    let t = Topology::line(4);
    let mut emu = paper_emulator(&t);
    let old = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let new_text = PAPER
        .replace("frequency = \"1/16\"", "frequency = \"1/8\"")
        .replace("frequency = \"15/16\"", "frequency = \"7/8\"");
    let new = Plan::compile(&QueryFile::from_toml(&new_text).unwrap()).unwrap();
    assert_ne!(old.version, new.version);
    for n in 0..4u32 {
        let sp = telemetry::pint::encoder::SwitchPlan::compile(&new_text, t.switch_id(n)).unwrap();
        // Only the first switch takes the new plan at first: packets it tags go through
        // switches that still hold the old plan as current.
        if n == 0 {
            emu.nodes[0].plans.install(std::sync::Arc::new(sp));
        }
    }
    for ident in 0..200u16 {
        let p = packet(0, 3, 7000, ident, 64);
        assert!(matches!(
            emu.send(0, &probe_frame(&p, u64::from(ident)), |_| 100),
            Outcome::Delivered { .. }
        ));
    }
    let seqs =
        |emu: &mut Emulator| -> Vec<u64> { emu.probes(3).iter().map(|r| r.probe.seq).collect() };
    assert_eq!(seqs(&mut emu), (0..200).collect::<Vec<_>>());
    // The other switches do not know the new plan's tag: forwarded untouched, stripped at
    // the last hop without a digest record.
    assert_eq!(
        emu.counters(1).telemetry.get(TelemetryEvent::UnknownPlan),
        200
    );
    assert_eq!(
        emu.counters(3).telemetry.get(TelemetryEvent::UnknownPlan),
        200
    );
    assert!(emu.digests(3).is_empty());
    // The last switch takes the new plan too, the middle ones not yet (a rolling change):
    // the middle ones mark the packets they pass on without encoding, and the last one
    // reports no incomplete digest.
    let sp = telemetry::pint::encoder::SwitchPlan::compile(&new_text, t.switch_id(3)).unwrap();
    emu.nodes[3].plans.install(std::sync::Arc::new(sp));
    for ident in 200..300u16 {
        let p = packet(0, 3, 7000, ident, 64);
        assert!(matches!(
            emu.send(0, &probe_frame(&p, u64::from(ident)), |_| 100),
            Outcome::Delivered { .. }
        ));
    }
    assert_eq!(seqs(&mut emu), (200..300).collect::<Vec<_>>());
    assert_eq!(
        emu.counters(3)
            .telemetry
            .get(TelemetryEvent::DigestIncomplete),
        100
    );
    assert!(emu.digests(3).is_empty());
    // Now everyone reloads; the first switch's previous plan is the old one.
    for n in 1..3u32 {
        let sp = telemetry::pint::encoder::SwitchPlan::compile(&new_text, t.switch_id(n)).unwrap();
        emu.nodes[n as usize].plans.install(std::sync::Arc::new(sp));
    }
    let mut rec = FlowRecorder::new(&new, 4, Space::Topology(&t), Some(4));
    for ident in 0..400u16 {
        let p = packet(0, 3, 7001, ident, 64);
        assert!(matches!(
            emu.send(0, &p.build(), |_| 100),
            Outcome::Delivered { .. }
        ));
    }
    for r in emu.digests(3) {
        assert_eq!(r.plan_version, new.version, "every digest names its plan");
        rec.record(r.pid, r.digest);
    }
    assert_eq!(
        rec.path(new.query_index("path").unwrap()).unwrap().path(),
        Some(vec![1, 2, 3, 4])
    );
}

/// The shim counts against the MTU: a packet that would not fit goes without telemetry.
#[test]
fn packets_the_shim_would_push_past_the_mtu_go_without_telemetry() {
    let mut emu = Emulator::new(
        Topology::line(2),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            mtu: 600,
            fabric_mtu: Some(600),
            ..Default::default()
        },
    )
    .unwrap();
    let mut p = packet(0, 1, 1, 1, 64);
    p.payload_len = 600 - 20 - 8; // exactly the MTU
    let out = emu.send(0, &p.build(), |_| 10);
    let Outcome::Delivered { frame, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(frame, plainly_forwarded(&p, 1, 2));
    assert_eq!(
        emu.counters(0)
            .telemetry
            .get(TelemetryEvent::NoTelemetryMtu),
        1
    );
    assert_eq!(emu.counters(1).telemetry.get(TelemetryEvent::NoShim), 1);
    assert!(emu.digests(1).is_empty());
}

/// Fabric ports left room for the shim (the emulator's and the lab's default): a packet as
/// large as the hosts' MTU carries telemetry across every hop and still reaches its host
/// as plain forwarding would deliver it.
#[test]
fn packets_as_large_as_the_edge_mtu_carry_telemetry_through_a_fabric_with_room() {
    let mut emu = Emulator::new(
        Topology::line(3),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            ..Default::default()
        },
    )
    .unwrap();
    let ports = &emu.nodes[1].tables.ports;
    assert_eq!(ports[0].mtu, 1500, "the hosts' port");
    assert!(
        ports[1..]
            .iter()
            .all(|p| p.mtu == 1500 + pipeline::fabric::SHIM_ROOM),
        "the fabric ports have room for the shim"
    );
    let mut p = packet(0, 2, 1, 1, 64);
    p.payload_len = 1500 - 20 - 8; // exactly the edge MTU
    let out = emu.send(0, &p.build(), |_| 10);
    let Outcome::Delivered { frame, path, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(path, vec![0, 1, 2]);
    assert_eq!(frame, plainly_forwarded(&p, 2, 3));
    for n in 0..3 {
        let t = &emu.counters(n).telemetry;
        assert_eq!(t.get(TelemetryEvent::NoTelemetryMtu), 0, "switch {n}");
        assert_eq!(t.get(TelemetryEvent::NoShim), 0, "switch {n}");
    }
    assert_eq!(emu.digests(2).len(), 1, "the last hop reports the digest");
}

/// A switch with as many neighbours as a switch has ports (the hub of a star of 31 leaves):
/// one burst from its hosts to every leaf leaves by every port and encodes exactly as the
/// same packets do one burst each; a flow between the two last leaves decodes to its path
/// through the hub; one neighbour more is refused.
#[test]
fn a_hub_drives_every_port() {
    use pipeline::fabric::{FabricError, port_towards};
    use pipeline::{BurstVerdicts, PacketBuf, VecFrame};

    let star = |leaves: u32| {
        let edges: Vec<(u32, u32)> = (1..=leaves).map(|l| (0, l)).collect();
        let names = (0..=leaves).map(|n| format!("s{n}")).collect();
        Topology::from_edges("star", names, &edges)
    };
    let config = || EmulatorConfig {
        plan: Some(PAPER.to_owned()),
        expected_flows: 256,
        ..Default::default()
    };
    let leaves = pipeline::MAX_PORTS as u32 - 1;
    let t = star(leaves);
    let (mut together, mut apart) = (
        Emulator::new(t.clone(), config()).unwrap(),
        Emulator::new(t.clone(), config()).unwrap(),
    );
    let frames: Vec<Vec<u8>> = (1..=leaves)
        .map(|l| packet(0, l, 2000 + l as u16, l as u16, 64).build())
        .collect();
    let tsc = (1_000u64, 80_000u64);
    let mut burst: Vec<VecFrame> = frames.iter().map(|f| VecFrame::new(f)).collect();
    let mut out = BurstVerdicts::default();
    together.nodes[0]
        .pipeline
        .process_burst(0, &mut burst, tsc.0, || tsc.1, &mut out);
    for (l, (v, f)) in (1..=leaves).zip(out.verdicts.iter().zip(&burst)) {
        assert_eq!(Some(*v), port_towards(&t, 0, l), "the packet to leaf {l}");
        let mut one = [VecFrame::new(&frames[l as usize - 1])];
        let mut single = BurstVerdicts::default();
        apart.nodes[0]
            .pipeline
            .process_burst(0, &mut one, tsc.0, || tsc.1, &mut single);
        assert_eq!(single.verdicts[0], *v);
        assert_eq!(
            one[0].data(),
            f.data(),
            "the packet to leaf {l}, shim and all"
        );
    }
    let c = together.counters(0);
    assert_eq!(
        c.telemetry.get(TelemetryEvent::ShimInserted),
        u64::from(leaves)
    );
    for p in 1..=leaves as usize {
        assert_eq!(c.ports[p].tx_packets, 1, "port {p}");
    }
    let diff = common::difference(&mut together, &mut apart, 0, 1_000_000_000);
    assert!(diff.is_none(), "{}", diff.unwrap_or_default());

    // Leaf to leaf through the hub's last two ports: every frame arrives as plain
    // forwarding gives it, and the digests decode to the path.
    let plan = Plan::compile(&QueryFile::from_toml(PAPER).unwrap()).unwrap();
    let path_q = plan.query_index("path").unwrap();
    let (src, dst) = (leaves - 1, leaves);
    for ident in 0..400u16 {
        let p = packet(src, dst, 7000, ident, 64);
        let out = together.send(src, &p.build(), |_| 1500);
        let Outcome::Delivered { frame, path, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(path, vec![src, 0, dst]);
        assert_eq!(frame, plainly_forwarded(&p, dst, 3));
    }
    let mut rec = FlowRecorder::new(&plan, 3, Space::Topology(&t), Some(t.switch_id(dst)));
    for r in together.digests(dst) {
        assert_eq!(r.hops, 3);
        rec.record(r.pid, r.digest);
    }
    let ids: Vec<u32> = [src, 0, dst].iter().map(|&n| t.switch_id(n)).collect();
    assert_eq!(rec.path(path_q).unwrap().path(), Some(ids));
    // The hub's values are the ones of its egress port: its hop latency comes out, as the
    // leaves' do.
    let sk = rec.sketches(plan.query_index("latency").unwrap()).unwrap();
    for hop in 1..=3 {
        let m = sk.quantile(hop, 0.5).unwrap();
        assert!(
            (m - 1500.0).abs() < 150.0,
            "hop {hop}: median latency {m} ns"
        );
    }

    assert_eq!(
        Emulator::new(star(leaves + 1), config()).err(),
        Some(FabricError::TooManyNeighbours {
            switch: 0,
            neighbours: leaves as usize + 1
        })
    );
}

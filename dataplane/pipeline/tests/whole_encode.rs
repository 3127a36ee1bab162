//! A burst whose packets all leave by one port with one plan is encoded whole in the draw
//! stage (eight packets at a time where the CPU allows); every other burst is drawn there
//! and applied packet by packet. Both give the same verdicts, bytes, counters, digest
//! records and FlowRadar counts, burst after burst, on every role a switch plays and for
//! bursts that mix flows, protocols, egress ports and plans.

mod common;

use std::net::Ipv4Addr;

use pipeline::capture::{L4, PacketSpec, with_shim};
use pipeline::emulator::{Emulator, EmulatorConfig};
use pipeline::fabric::{host_addr, host_mac, port_mac, port_towards};
use pipeline::{BurstVerdicts, PacketBuf, VecFrame};
use proptest::prelude::*;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;
use telemetry::wire::shim::DEFAULT_ETHERTYPE;

const PAPER: &str = include_str!("../../../configs/queries/paper.toml");

/// A plan with a min and a product, merges the paper's plan lacks.
const MERGES: &str = include_str!("../../../telemetry/tests/plans/min_product.toml");

/// A four-switch line with `plan`; `whole` says whether uniform bursts are encoded whole.
fn line(plan: &str, whole: bool) -> Emulator {
    let mut emu = Emulator::new(
        Topology::line(4),
        EmulatorConfig {
            plan: Some(plan.to_owned()),
            expected_flows: 256,
            ring: 1 << 12,
            ..Default::default()
        },
    )
    .unwrap();
    for n in &mut emu.nodes {
        n.pipeline.inband_mut().unwrap().set_whole_encode(whole);
    }
    emu
}

/// Packet `i` of a burst as switch `at` receives it on `port` (0: from its host, else from
/// the switch before it), to the hosts of node `dst`, of flow `flow`: UDP or TCP by `kind`
/// (0, 1), or a UDP packet the switch drops (2: TTL 1, 3: no route).
fn frame(at: u32, port: usize, dst: u32, flow: u32, kind: u8, tag: u16) -> Vec<u8> {
    let mut p = PacketSpec::udp(
        Ipv4Addr::from(host_addr(0, 1) + flow % 7),
        Ipv4Addr::from(host_addr(dst, 1)),
        1000 + (flow % 500) as u16,
        4791,
    );
    if kind == 1 {
        p.l4 = L4::Tcp {
            sport: 5000 + flow as u16,
            dport: 80,
            seq: flow.wrapping_mul(0x9e37_79b9),
        };
    }
    p.ident = flow as u16 ^ 0x5a5a;
    p.payload_len = 18 + (flow as usize % 5) * 40;
    p.ttl = if kind == 2 { 1 } else { 64 - at as u8 };
    if kind == 3 {
        p.dst = Ipv4Addr::new(192, 0, 2, 1);
    }
    p.dst_mac = port_mac(at, port as u16);
    p.src_mac = if port == 0 {
        host_mac(0)
    } else {
        port_mac(at - 1, 1)
    };
    let plain = p.build();
    if port == 0 {
        plain
    } else {
        with_shim(
            &plain,
            DEFAULT_ETHERTYPE,
            tag,
            2,
            u64::from(flow.wrapping_mul(2_654_435_761) & 0xffff),
        )
    }
}

/// Runs one burst through switch `at`'s `port`: the verdicts and the bytes after it (and
/// checks the burst's `all_same`).
fn run(
    emu: &mut Emulator,
    at: u32,
    port: usize,
    frames: &[Vec<u8>],
    tsc: (u64, u64),
) -> (Vec<u16>, Vec<Vec<u8>>) {
    let mut burst: Vec<VecFrame> = frames.iter().map(|f| VecFrame::new(f)).collect();
    let mut out = BurstVerdicts::default();
    let p = &mut emu.nodes[at as usize].pipeline;
    p.process_burst(port, &mut burst, tsc.0, || tsc.1, &mut out);
    let verdicts = &out.verdicts[..frames.len()];
    assert_eq!(
        out.all_same,
        verdicts.iter().all(|&v| Some(&v) == verdicts.first()),
        "all_same against the verdicts {verdicts:?}"
    );
    (
        verdicts.to_vec(),
        burst.iter().map(|b| b.data().to_vec()).collect(),
    )
}

/// One burst to send: at which switch, on which port, and each packet's (destination node,
/// flow, protocol).
#[derive(Debug, Clone)]
struct Burst {
    at: u32,
    packets: Vec<(u32, u32, u8)>,
    latency: u64,
}

fn bursts() -> impl Strategy<Value = Vec<Burst>> {
    let burst = (
        0u32..4,
        // Mostly one destination (a uniform burst), sometimes several.
        any::<bool>(),
        proptest::collection::vec(
            (0u32..4, 0u32..2000, prop_oneof![12 => 0u8..2, 1 => 2u8..4]),
            1..=32,
        ),
        0u64..2_000_000,
    )
        .prop_map(|(at, uniform, packets, latency)| Burst {
            at,
            packets: packets
                .into_iter()
                .map(|(d, f, k)| (if uniform { 3 } else { d.max(at) }, f, k))
                .collect(),
            latency,
        });
    proptest::collection::vec(burst, 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn whole_bursts_encode_as_packet_by_packet_does(
        merges in any::<bool>(),
        bursts in bursts(),
    ) {
        let text = if merges { MERGES } else { PAPER };
        let tag = SwitchPlan::compile(text, 1).unwrap().tag();
        let (mut whole, mut each) = (line(text, true), line(text, false));
        let t = Topology::line(4);
        let mut clock = 1_000u64;
        for b in &bursts {
            let port = if b.at == 0 {
                0
            } else {
                usize::from(port_towards(&t, b.at, b.at - 1).unwrap())
            };
            let frames: Vec<Vec<u8>> = b
                .packets
                .iter()
                .map(|&(dst, flow, kind)| frame(b.at, port, dst, flow, kind, tag))
                .collect();
            let tsc = (clock, clock + b.latency);
            clock += b.latency + 10_000;
            prop_assert_eq!(
                run(&mut whole, b.at, port, &frames, tsc),
                run(&mut each, b.at, port, &frames, tsc)
            );
        }
        for at in 0..4 {
            let diff = common::difference(&mut whole, &mut each, at, 1_000_000_000);
            prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        }
    }
}

/// The bursts the property sends are encoded, so that it compares real encoding, not drops:
/// a uniform burst at each role (ingress, transit twice, egress) counts one telemetry event
/// per packet, and a recorded digest per packet at the egress.
#[test]
fn uniform_bursts_are_encoded() {
    let tag = SwitchPlan::compile(PAPER, 1).unwrap().tag();
    let t = Topology::line(4);
    for at in 0..4u32 {
        let mut emu = line(PAPER, true);
        let port = if at == 0 {
            0
        } else {
            usize::from(port_towards(&t, at, at - 1).unwrap())
        };
        let frames: Vec<Vec<u8>> = (0..32).map(|f| frame(at, port, 3, f, 0, tag)).collect();
        let (v, _) = run(&mut emu, at, port, &frames, (1_000, 50_000));
        assert!(v.iter().all(|&v| v & pipeline::DROPPED == 0), "{v:?}");
        let t = &emu.counters(at).telemetry;
        let recorded = t.get(pipeline::TelemetryEvent::DigestRecorded);
        assert_eq!(recorded, if at == 3 { 32 } else { 0 }, "at {at}: {t:?}");
        assert_eq!(t.total() - recorded, 32, "at {at}: {t:?}");
    }
}

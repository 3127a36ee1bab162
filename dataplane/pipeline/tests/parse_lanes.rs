//! The telemetry stages' fast parse (untagged IPv4 with or without the current plan's shim)
//! and their general parse give the same verdicts, bytes, counters, digest records and
//! FlowRadar counts for any frame: common frames, and the same frames with random bytes
//! changed or cut short, on every role a switch plays.

mod common;

use std::net::Ipv4Addr;

use pipeline::capture::{L4, PacketSpec, with_shim};
use pipeline::emulator::{Emulator, EmulatorConfig};
use pipeline::fabric::{host_addr, host_mac, port_mac, port_towards};
use pipeline::{BurstVerdicts, PacketBuf, VecFrame};
use proptest::prelude::*;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;
use telemetry::wire::shim::{DEFAULT_ETHERTYPE, FLAG_INCOMPLETE};

const PAPER: &str = include_str!("../../../configs/queries/paper.toml");

/// A three-switch line with the paper's plan; `fast` says whether the fast parse is on.
fn line(fast: bool) -> Emulator {
    let mut emu = Emulator::new(
        Topology::line(3),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            expected_flows: 64,
            ring: 1024,
            ..Default::default()
        },
    )
    .unwrap();
    for n in &mut emu.nodes {
        n.pipeline.inband_mut().unwrap().set_fast_parse(fast);
    }
    emu
}

/// A frame as switch `at` receives it on `port` from its host (port 0) or its neighbour:
/// UDP, TCP, ICMP or a fragment from node 0's hosts to node 2's, with the shim of the plan
/// (tag `tag`) when it comes from the fabric.
fn base(kind: u8, at: u32, tag: u16, incomplete: bool) -> (usize, Vec<u8>) {
    let t = Topology::line(3);
    let mut p = PacketSpec::udp(
        Ipv4Addr::from(host_addr(0, 1)),
        Ipv4Addr::from(host_addr(2, 1)),
        1000 + u16::from(kind),
        4791,
    );
    p.ident = 77;
    p.payload_len = 18 + usize::from(kind) * 5;
    match kind % 4 {
        1 => {
            p.l4 = L4::Tcp {
                sport: 5000,
                dport: 80,
                seq: 0xdead_beef,
            }
        }
        2 => p.l4 = L4::Icmp { id: 3, seq: 9 },
        3 => p.more_frags = true,
        _ => {}
    }
    let (port, shimmed) = if at == 0 {
        (0usize, false)
    } else {
        (usize::from(port_towards(&t, at, at - 1).unwrap()), true)
    };
    p.ttl = 64 - at as u8;
    p.dst_mac = port_mac(at, port as u16);
    p.src_mac = if at == 0 {
        host_mac(0)
    } else {
        port_mac(at - 1, 1)
    };
    let plain = p.build();
    if !shimmed {
        return (port, plain);
    }
    let mut f = with_shim(&plain, DEFAULT_ETHERTYPE, tag, 2, 0x1234);
    if incomplete {
        f[15] |= FLAG_INCOMPLETE;
    }
    (port, f)
}

/// Runs `frame` through switch `at`'s `port` of `emu`: (verdict, bytes after the pipeline).
fn run(emu: &mut Emulator, at: u32, port: usize, frame: &[u8]) -> (u16, Vec<u8>) {
    let mut burst = [VecFrame::new(frame)];
    let mut out = BurstVerdicts::default();
    let p = &mut emu.nodes[at as usize].pipeline;
    p.process_burst(port, &mut burst, 1_000, || 3_500, &mut out);
    (out.verdicts[0], burst[0].data().to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn fast_parse_gives_what_the_general_parse_gives(
        kind in 0u8..8,
        at in 0u32..3,
        wrong_tag in any::<bool>(),
        incomplete in any::<bool>(),
        edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
        cut in proptest::option::of(0usize..80),
    ) {
        let (mut fast, mut general) = (line(true), line(false));
        let plan = SwitchPlan::compile(PAPER, 1).unwrap();
        let tag = if wrong_tag { plan.tag() ^ 1 } else { plan.tag() };
        let (port, mut frame) = base(kind, at, tag, incomplete);
        for (i, b) in edits {
            if let Some(x) = frame.get_mut(i) {
                *x = b;
            }
        }
        if let Some(c) = cut {
            frame.truncate(c);
        }
        // Twice, so that a packet counted in a flow that is no longer new takes part.
        for _ in 0..2 {
            prop_assert_eq!(run(&mut fast, at, port, &frame), run(&mut general, at, port, &frame));
        }
        let diff = common::difference(&mut fast, &mut general, at, 1_000_000_000);
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
    }
}

/// The frames the property starts from are the common ones: each is forwarded with
/// telemetry through the fast parse (so the property compares real work, not two drops).
#[test]
fn base_frames_are_forwarded() {
    let plan = SwitchPlan::compile(PAPER, 1).unwrap();
    for at in 0..3u32 {
        for kind in 0..8u8 {
            let mut emu = line(true);
            let (port, frame) = base(kind, at, plan.tag(), false);
            let (v, _) = run(&mut emu, at, port, &frame);
            assert!(v & pipeline::DROPPED == 0, "kind {kind} at {at}: {v:#x}");
            let t = &emu.counters(at).telemetry;
            let recorded = t.get(pipeline::TelemetryEvent::DigestRecorded);
            assert_eq!(recorded, u64::from(at == 2), "kind {kind} at {at}: {t:?}");
            assert_eq!(
                t.total() - recorded,
                1,
                "one shim event: kind {kind} at {at}: {t:?}"
            );
        }
    }
}

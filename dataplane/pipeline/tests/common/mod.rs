//! What the equivalence tests (and the pipeline's fuzz target, which includes this file)
//! share: a line of switches with the paper's plan, the common frames they receive, and
//! comparing the state two emulators ended in.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::net::Ipv4Addr;

use pipeline::capture::{L4, PacketSpec, with_shim};
use pipeline::emulator::{Emulator, EmulatorConfig};
use pipeline::fabric::{host_addr, host_mac, port_mac, port_towards};
use telemetry::topology::Topology;
use telemetry::wire::shim::{DEFAULT_ETHERTYPE, FLAG_INCOMPLETE};

/// The paper's plan.
pub const PAPER: &str = include_str!("../../../../configs/queries/paper.toml");

/// A three-switch line with the paper's plan; `fast` says whether the fast parse is on,
/// `whole` whether uniform bursts are encoded whole.
pub fn line(fast: bool, whole: bool) -> Emulator {
    line_with_mtu(fast, whole, 1500)
}

/// [`line`] with every port's MTU `mtu`.
pub fn line_with_mtu(fast: bool, whole: bool, mtu: u16) -> Emulator {
    let mut emu = Emulator::new(
        Topology::line(3),
        EmulatorConfig {
            plan: Some(PAPER.to_owned()),
            expected_flows: 64,
            ring: 1024,
            mtu,
            fabric_mtu: Some(mtu),
            ..Default::default()
        },
    )
    .unwrap();
    for n in &mut emu.nodes {
        let t = n.pipeline.inband_mut().unwrap();
        t.set_fast_parse(fast);
        t.set_whole_encode(whole);
    }
    emu
}

/// A frame as switch `at` receives it on `port` from its host (port 0) or its neighbour:
/// UDP, TCP, ICMP or a fragment from node 0's hosts to node 2's, with the shim of the plan
/// (tag `tag`) when it comes from the fabric.
pub fn arriving(kind: u8, at: u32, tag: u16, incomplete: bool) -> (usize, Vec<u8>) {
    arriving_as(kind, at, (at != 0).then_some((tag, incomplete)))
}

/// [`arriving`] with the shim given: `Some((tag, incomplete))`, or none (also from the
/// fabric, where the frame then arrives without the telemetry it should carry).
pub fn arriving_as(kind: u8, at: u32, shim: Option<(u16, bool)>) -> (usize, Vec<u8>) {
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
    let port = if at == 0 {
        0usize
    } else {
        usize::from(port_towards(&t, at, at - 1).unwrap())
    };
    p.ttl = 64 - at as u8;
    p.dst_mac = port_mac(at, port as u16);
    p.src_mac = if at == 0 {
        host_mac(0)
    } else {
        port_mac(at - 1, 1)
    };
    let plain = p.build();
    let Some((tag, incomplete)) = shim else {
        return (port, plain);
    };
    let mut f = with_shim(&plain, DEFAULT_ETHERTYPE, tag, 2, 0x1234);
    if incomplete {
        f[15] |= FLAG_INCOMPLETE;
    }
    (port, f)
}

/// The first difference between what `a` and `b` hold at switch `at`: counters, digest
/// records, and (once both are advanced to `ns`, which closes their epochs) each flowset cell
/// for cell. Takes the records and flowsets off both.
pub fn difference(a: &mut Emulator, b: &mut Emulator, at: u32, ns: u64) -> Option<String> {
    if a.counters(at) != b.counters(at) {
        return Some(format!(
            "counters at {at}: {:?} vs {:?}",
            a.counters(at),
            b.counters(at)
        ));
    }
    let (x, y) = (a.digests(at), b.digests(at));
    if x != y {
        return Some(format!("digests at {at}: {x:?} vs {y:?}"));
    }
    a.advance_to(ns);
    b.advance_to(ns);
    let (x, y) = (a.flowsets(at), b.flowsets(at));
    if x.len() != y.len() {
        return Some(format!("{} vs {} flowsets at {at}", x.len(), y.len()));
    }
    x.iter()
        .zip(&y)
        .position(|(x, y)| x.flowset.cells() != y.flowset.cells())
        .map(|i| format!("flowset {i} at {at} differs"))
}

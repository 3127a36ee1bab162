use std::net::Ipv4Addr;

use etherparse::{NetSlice, SlicedPacket};
use telemetry::wire::{EtherType, MacAddr};

use crate::capture::{L4, PacketSpec, frame};
use crate::forward::Forwarder;
use crate::tables::{NextHopSpec, PortRole, PortSpec, RouteSpec, Tables};
use crate::{DropReason, Verdict};

fn port(mac: [u8; 6], role: PortRole, mtu: u16, promiscuous: bool) -> PortSpec {
    PortSpec {
        mac: MacAddr(mac),
        promiscuous,
        role,
        mtu,
        capacity_bps: 10_000_000_000,
    }
}

fn route(net: [u8; 4], len: u8, hops: &[(u16, [u8; 6])]) -> RouteSpec {
    RouteSpec {
        addr: u32::from(Ipv4Addr::from(net)),
        len,
        next_hops: hops
            .iter()
            .map(|&(port, mac)| NextHopSpec {
                port,
                mac: MacAddr(mac),
            })
            .collect(),
    }
}

/// Ports `in` (0), `a` (1), `b` (2, MTU 576) and `strict` (3, not promiscuous); routes
/// 10.1.0.0/16 via a, 10.2.0.0/16 via a or b (ECMP), 10.1.5.0/24 via b.
fn tables() -> Tables {
    let a_hop = [2, 0, 0, 0, 1, 0xa];
    let b_hop = [2, 0, 0, 0, 1, 0xb];
    Tables {
        ports: vec![
            port([2, 0, 0, 0, 0, 1], PortRole::Edge, 1500, true),
            port([2, 0, 0, 0, 0, 0xa], PortRole::Fabric, 1500, true),
            port([2, 0, 0, 0, 0, 0xb], PortRole::Fabric, 576, true),
            port([2, 0, 0, 0, 0, 1], PortRole::Edge, 1500, false),
        ],
        routes: vec![
            route([10, 1, 0, 0], 16, &[(1, a_hop)]),
            route([10, 2, 0, 0], 16, &[(1, a_hop), (2, b_hop)]),
            route([10, 1, 5, 0], 24, &[(2, b_hop)]),
        ],
        ecmp_seed: 0x5049_4e54_4543_4d50,
    }
}

fn forwarder() -> Forwarder {
    Forwarder::new(&tables()).unwrap()
}

const IN_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

fn spec(dst: [u8; 4]) -> PacketSpec {
    let mut p = PacketSpec::udp(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::from(dst), 1000, 2000);
    p.dst_mac = IN_MAC;
    p
}

/// Runs a frame through the forwarder as received on port `in` (promiscuous, fast path
/// eligible) and on port `strict` (not promiscuous: always the general path), checks both
/// agree, and returns the verdict and bytes.
fn run(f: &Forwarder, bytes: Vec<u8>) -> (Verdict, Vec<u8>) {
    let len = bytes.len();
    let mut fast = bytes.clone();
    let v = f.process(0, &mut fast, len);
    let mut general = bytes;
    let g = f.process(3, &mut general, len);
    assert_eq!(v, g, "fast and general paths disagree");
    assert_eq!(
        fast, general,
        "fast and general paths wrote different bytes"
    );
    (v, fast)
}

/// Checks a forwarded frame against its input: TTL one lower, checksum valid, MACs as given,
/// every other byte unchanged.
fn check_forwarded(input: &[u8], output: &[u8], dst_mac: [u8; 6], src_mac: [u8; 6]) {
    assert_eq!(input.len(), output.len());
    assert_eq!(&output[0..6], &dst_mac);
    assert_eq!(&output[6..12], &src_mac);
    let pin = SlicedPacket::from_ethernet(input).unwrap();
    let pout = SlicedPacket::from_ethernet(output).unwrap();
    let (Some(NetSlice::Ipv4(a)), Some(NetSlice::Ipv4(b))) = (pin.net, pout.net) else {
        panic!("not ipv4")
    };
    assert_eq!(b.header().ttl(), a.header().ttl() - 1);
    let h = b.header().to_header();
    assert_eq!(
        h.calc_header_checksum(),
        h.header_checksum,
        "checksum must verify"
    );
    let l3 = input.len() - a.header().slice().len() - a.payload().payload.len();
    for i in 12..output.len() {
        if i == l3 + 8 || i == l3 + 10 || i == l3 + 11 {
            continue;
        }
        assert_eq!(input[i], output[i], "byte {i} changed");
    }
}

#[test]
fn forwards_udp_tcp_icmp() {
    let f = forwarder();
    for l4 in [
        L4::Udp { sport: 1, dport: 2 },
        L4::Tcp {
            sport: 3,
            dport: 4,
            seq: 99,
        },
        L4::Icmp { id: 5, seq: 6 },
    ] {
        let mut p = spec([10, 1, 2, 3]);
        p.l4 = l4;
        let input = p.build();
        let (v, out) = run(&f, input.clone());
        assert_eq!(v, Verdict::Forward(1), "{l4:?}");
        check_forwarded(&input, &out, [2, 0, 0, 0, 1, 0x0a], [2, 0, 0, 0, 0, 0x0a]);
    }
}

#[test]
fn longest_prefix_wins() {
    let f = forwarder();
    let input = spec([10, 1, 5, 7]).build();
    let (v, out) = run(&f, input.clone());
    assert_eq!(v, Verdict::Forward(2));
    check_forwarded(&input, &out, [2, 0, 0, 0, 1, 0x0b], [2, 0, 0, 0, 0, 0x0b]);
}

#[test]
fn vlan_tags_and_options_are_kept() {
    let f = forwarder();
    for vlans in [vec![7], vec![100, 200]] {
        let mut p = spec([10, 1, 9, 9]);
        p.vlans = vlans.clone();
        p.ip_options = vec![0x94, 0x04, 0, 0, 1, 1, 1, 0]; // router alert + NOPs + end
        let input = p.build();
        let (v, out) = run(&f, input.clone());
        assert_eq!(v, Verdict::Forward(1), "{vlans:?}");
        check_forwarded(&input, &out, [2, 0, 0, 0, 1, 0x0a], [2, 0, 0, 0, 0, 0x0a]);
    }
}

#[test]
fn ecmp_keeps_flows_together_and_spreads_them() {
    let f = forwarder();
    let mut per_port = [0u32; 3];
    for i in 0..2000u16 {
        let mut p = spec([10, 2, (i >> 8) as u8, i as u8]);
        p.l4 = L4::Udp {
            sport: 1000 + i,
            dport: 80,
        };
        let first = run(&f, p.build()).0;
        p.ident = 999;
        p.payload_len = 100;
        assert_eq!(run(&f, p.build()).0, first, "same flow, same next hop");
        let Verdict::Forward(port) = first else {
            panic!("{first:?}")
        };
        per_port[usize::from(port)] += 1;
    }
    assert_eq!(per_port[0], 0);
    assert!(per_port[1] > 850 && per_port[2] > 850, "{per_port:?}");
}

#[test]
fn fragments_of_a_datagram_take_one_path() {
    let f = forwarder();
    for i in 0..200u16 {
        let mut first = spec([10, 2, 0, i as u8]);
        first.ident = i;
        first.more_frags = true;
        let mut later = first.clone();
        later.frag_offset = 185;
        later.more_frags = false;
        later.l4 = L4::Udp {
            sport: 0xdead,
            dport: 0xbeef,
        }; // payload bytes, not ports
        assert_eq!(run(&f, first.build()).0, run(&f, later.build()).0);
    }
}

#[test]
fn drops_are_counted_by_reason() {
    let f = forwarder();
    let good = spec([10, 1, 2, 3]);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (good.build()[..13].to_vec(), DropReason::Truncated),
        (good.build()[..30].to_vec(), DropReason::Truncated),
        (
            {
                let mut v = good.clone();
                v.vlans = vec![5];
                v.build()[..16].to_vec()
            },
            DropReason::Truncated,
        ),
        (
            {
                let mut b = good.build();
                b[14] = 0x65;
                b
            },
            DropReason::Malformed,
        ),
        (
            {
                let mut b = good.build();
                b[14] = 0x44;
                b
            },
            DropReason::Malformed,
        ),
        (
            {
                let mut b = good.build();
                b[16] = 0;
                b[17] = 10;
                b
            },
            DropReason::Malformed,
        ),
        (
            {
                let mut b = good.build();
                b[16] = 0x05;
                b
            },
            DropReason::Truncated,
        ),
        (
            {
                let mut b = good.build();
                b[24] ^= 1;
                b
            },
            DropReason::BadChecksum,
        ),
        (
            {
                let mut v = good.clone();
                v.ttl = 1;
                v.build()
            },
            DropReason::TtlExpired,
        ),
        (
            {
                let mut v = good.clone();
                v.ttl = 0;
                v.build()
            },
            DropReason::TtlExpired,
        ),
        (spec([192, 0, 2, 1]).build(), DropReason::NoRoute),
        (
            {
                let mut v = spec([10, 1, 5, 1]);
                v.payload_len = 600;
                v.build()
            },
            DropReason::MtuExceeded,
        ),
        (
            frame(IN_MAC, MacAddr([2; 6]), &[], EtherType::ARP, &[0; 28]),
            DropReason::Arp,
        ),
        (
            frame(IN_MAC, MacAddr([2; 6]), &[3], EtherType::IPV6, &[0x60; 40]),
            DropReason::Ipv6,
        ),
        (
            frame(IN_MAC, MacAddr([2; 6]), &[], 0x88cc, &[0; 46]),
            DropReason::OtherEthertype,
        ),
        (
            frame(
                IN_MAC,
                MacAddr([2; 6]),
                &[1, 2, 3],
                EtherType::IPV4,
                &[0x45; 40],
            ),
            DropReason::Malformed,
        ),
    ];
    for (i, (bytes, reason)) in cases.into_iter().enumerate() {
        let (v, out) = run(&f, bytes.clone());
        assert_eq!(v, Verdict::Drop(reason), "case {i}");
        assert_eq!(out, bytes, "case {i}: a dropped frame is unchanged");
    }
}

/// Destinations a router does not forward are dropped as `martian`, a default route
/// notwithstanding; a route configured for one of their prefixes, or a longer one inside,
/// still carries it.
#[test]
fn martian_destinations_are_not_forwarded_by_a_default_route() {
    let a_hop = [2, 0, 0, 0, 1, 0xa];
    let mut t = tables();
    t.routes.push(route([0, 0, 0, 0], 0, &[(1, a_hop)]));
    let f = Forwarder::new(&t).unwrap();
    for dst in [
        [224, 0, 0, 251],
        [239, 255, 255, 250],
        [255, 255, 255, 255],
        [240, 1, 2, 3],
        [127, 0, 0, 1],
        [0, 1, 2, 3],
    ] {
        assert_eq!(
            run(&f, spec(dst).build()).0,
            Verdict::Drop(DropReason::Martian),
            "{dst:?}"
        );
    }
    for dst in [
        [192, 0, 2, 1],
        [223, 255, 255, 254],
        [126, 1, 1, 1],
        [1, 0, 0, 1],
    ] {
        assert_eq!(run(&f, spec(dst).build()).0, Verdict::Forward(1), "{dst:?}");
    }
    // Without a default route a martian is still named as one.
    assert_eq!(
        run(&forwarder(), spec([224, 0, 0, 1]).build()).0,
        Verdict::Drop(DropReason::Martian)
    );
    t.routes.push(route([239, 1, 0, 0], 16, &[(2, a_hop)]));
    let f = Forwarder::new(&t).unwrap();
    assert_eq!(run(&f, spec([239, 1, 2, 3]).build()).0, Verdict::Forward(2));
    // A route for 240/4 (used as address space) carries it, but not the limited broadcast;
    // one for 224/3 covers multicast and 240/4 without carrying them.
    t.routes.push(route([240, 0, 0, 0], 4, &[(2, a_hop)]));
    t.routes.push(route([224, 0, 0, 0], 3, &[(1, a_hop)]));
    let f = Forwarder::new(&t).unwrap();
    assert_eq!(run(&f, spec([240, 1, 2, 3]).build()).0, Verdict::Forward(2));
    assert_eq!(
        run(&f, spec([255, 255, 255, 254]).build()).0,
        Verdict::Forward(2)
    );
    for dst in [[255, 255, 255, 255], [224, 0, 0, 1]] {
        assert_eq!(
            run(&f, spec(dst).build()).0,
            Verdict::Drop(DropReason::Martian),
            "{dst:?}"
        );
    }
}

/// Routes with the same next-hop group share its entries in the table: a full table's
/// routes over a few groups take a few entries, and route as before.
#[test]
fn routes_share_their_next_hop_groups() {
    let (a, b) = ([2, 0, 0, 0, 1, 0xc], [2, 0, 0, 0, 1, 0xd]);
    let mut t = tables();
    for i in 0..1000u32 {
        let group: &[(u16, [u8; 6])] = if i % 2 == 0 {
            &[(1, a), (2, b)]
        } else {
            &[(2, b)]
        };
        t.routes
            .push(route([11, (i >> 8) as u8, i as u8, 0], 24, group));
    }
    let groups: Vec<&[NextHopSpec]> = t.routes.iter().map(|r| &r.next_hops[..]).collect();
    let before = crate::fib::next_hop_entries(groups[..groups.len() - 1000].iter().copied());
    assert_eq!(
        crate::fib::next_hop_entries(groups.iter().copied()),
        before + 3
    );
    let f = Forwarder::new(&t).unwrap();
    assert_eq!(f.fib().next_hop_entries(), before + 3);
    assert_eq!(run(&f, spec([11, 3, 7, 1]).build()).0, Verdict::Forward(2));
    let hops = f.fib().lookup(u32::from_be_bytes([11, 3, 6, 1])).unwrap();
    assert_eq!(hops.iter().map(|h| h.port).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn ethernet_padding_is_not_truncation() {
    let f = forwarder();
    let mut p = spec([10, 1, 2, 3]);
    p.payload_len = 0;
    let mut b = p.build();
    b.resize(60, 0);
    let (v, _) = run(&f, b);
    assert_eq!(v, Verdict::Forward(1));
}

#[test]
fn strict_port_accepts_only_its_mac() {
    let f = forwarder();
    let mut p = spec([10, 1, 2, 3]);
    p.dst_mac = MacAddr([2, 9, 9, 9, 9, 9]);
    let mut b = p.build();
    let len = b.len();
    assert_eq!(
        f.process(3, &mut b, len),
        Verdict::Drop(DropReason::NotForUs)
    );
    assert_eq!(
        f.process(0, &mut b, len),
        Verdict::Forward(1),
        "a promiscuous port takes any MAC"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The fast path and the general path agree on every frame: valid ones and ones with
        /// random bytes changed or cut.
        #[test]
        fn fast_path_equals_general_path(
            dst in proptest::array::uniform4(any::<u8>()),
            ttl in any::<u8>(),
            payload in 0usize..64,
            edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            cut in proptest::option::of(0usize..80),
            dst_net in 0u8..4,
        ) {
            let f = forwarder();
            let mut p = spec([10, dst_net, dst[2], dst[3]]);
            p.ttl = ttl;
            p.payload_len = payload;
            let mut b = p.build();
            for (at, v) in edits {
                if at < b.len() {
                    b[at] = v;
                }
            }
            if let Some(c) = cut {
                b.truncate(c.min(b.len()));
            }
            let len = b.len();
            let mut fast = b.clone();
            let mut general = b.clone();
            prop_assert_eq!(f.process(0, &mut fast, len), f.process_general(0, &mut general, len));
            prop_assert_eq!(fast, general);
        }
    }
}

mod ttl_checksum {
    use super::super::forward::ttl_decrement_checksum;
    use proptest::prelude::*;
    use telemetry::wire::checksum::update_word;

    proptest! {
        /// The specialised update equals RFC 1624's general form for every checksum, TTL
        /// above 0 and protocol.
        #[test]
        fn equals_the_general_update(hc in any::<u16>(), ttl in 1u8..=255, proto in any::<u8>()) {
            let old = u16::from_be_bytes([ttl, proto]);
            let new = u16::from_be_bytes([ttl - 1, proto]);
            prop_assert_eq!(ttl_decrement_checksum(hc), update_word(hc, old, new));
        }
    }
}

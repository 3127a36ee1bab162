//! Runs the real `pint-switch` on `net_pcap` devices with a generated capture of every case
//! the pipeline distinguishes, then checks every output packet with an independent parser
//! (etherparse) and every drop against its expected reason.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::time::Duration;

use common::{Scratch, run_switch, text, worker_lcore, write};
use dataplane::capture::{L4, PacketSpec, frame, read_pcap, write_pcap};
use etherparse::{NetSlice, SlicedPacket};
use telemetry::wire::{EtherType, MacAddr};

const IN_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
/// (port name, port MAC, next-hop MAC)
const OUT: [(&str, [u8; 6], [u8; 6]); 3] = [
    ("a", [2, 0, 0, 0, 1, 0xa], [2, 0, 0, 0, 2, 0xa]),
    ("b", [2, 0, 0, 0, 1, 0xb], [2, 0, 0, 0, 2, 0xb]),
    ("c", [2, 0, 0, 0, 1, 0xc], [2, 0, 0, 0, 2, 0xc]),
];

/// What should happen to a packet.
#[derive(Debug, Clone, PartialEq)]
enum Fate {
    /// Out of one of these ports (an ECMP group lists several), as part of flow `flow`.
    Forward {
        ports: Vec<usize>,
        flow: u32,
    },
    Drop(&'static str),
}

struct Case {
    bytes: Vec<u8>,
    ident: Option<u16>,
    fate: Fate,
}

fn config(dir: &Scratch) -> String {
    let p = |n: &str| dir.path(n).display().to_string();
    format!(
        r#"switch_id = 9
[stats]
interval_ms = 0
[[ports]]
name = "in"
device = "net_pcap0,rx_pcap={input},tx_pcap={in_tx}"
role = "edge"
mac = "{IN_MAC}"
[[ports]]
name = "a"
device = "net_pcap1,tx_pcap={a}"
role = "fabric"
mac = "02:00:00:00:01:0a"
[[ports]]
name = "b"
device = "net_pcap2,tx_pcap={b}"
role = "fabric"
mac = "02:00:00:00:01:0b"
[[ports]]
name = "c"
device = "net_pcap3,tx_pcap={c}"
role = "fabric"
mac = "02:00:00:00:01:0c"
mtu = 576
[[workers]]
lcore = {lcore}
rx = ["in"]
[[routes]]
prefix = "10.1.0.0/16"
next_hops = [{{ port = "a", mac = "02:00:00:00:02:0a" }}]
[[routes]]
prefix = "10.1.200.0/24"
next_hops = [{{ port = "c", mac = "02:00:00:00:02:0c" }}]
[[routes]]
prefix = "10.2.0.0/16"
next_hops = [{{ port = "b", mac = "02:00:00:00:02:0b" }}, {{ port = "c", mac = "02:00:00:00:02:0c" }}]
"#,
        input = p("in.pcap"),
        in_tx = p("in_tx.pcap"),
        a = p("a.pcap"),
        b = p("b.pcap"),
        c = p("c.pcap"),
        lcore = worker_lcore(),
    )
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut ident = 1u16;
    let mut flow = 0u32;
    let mut next = |mut p: PacketSpec| {
        p.dst_mac = IN_MAC;
        p.ident = ident;
        ident += 1;
        p
    };
    let udp =
        |dst: [u8; 4]| PacketSpec::udp(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::from(dst), 1000, 2000);
    let fwd = |ports: Vec<usize>, flow: u32| Fate::Forward { ports, flow };

    // Plain UDP, TCP, ICMP to the /16 and to the longer /24 inside it.
    for (i, l4) in [
        L4::Udp { sport: 5, dport: 6 },
        L4::Tcp {
            sport: 7,
            dport: 8,
            seq: 0x0102_0304,
        },
        L4::Icmp { id: 9, seq: 10 },
    ]
    .into_iter()
    .enumerate()
    {
        for (dst, port) in [([10, 1, 3, i as u8], 0), ([10, 1, 200, i as u8], 2)] {
            let mut p = next(udp(dst));
            p.l4 = l4;
            p.payload_len = 40;
            flow += 1;
            out.push(Case {
                ident: Some(p.ident),
                bytes: p.build(),
                fate: fwd(vec![port], flow),
            });
        }
    }
    // One and two VLAN tags; IPv4 options; TTL 2 (leaves with TTL 1); a padded short frame.
    for vlans in [vec![10], vec![20, 30]] {
        let mut p = next(udp([10, 1, 4, 4]));
        p.vlans = vlans;
        flow += 1;
        out.push(Case {
            ident: Some(p.ident),
            bytes: p.build(),
            fate: fwd(vec![0], flow),
        });
    }
    for opts in [
        vec![1, 1, 1, 0],
        vec![0x94, 4, 0, 0, 7, 11, 4, 0, 0, 0, 0, 0],
    ] {
        let mut p = next(udp([10, 1, 5, 5]));
        p.ip_options = opts;
        flow += 1;
        out.push(Case {
            ident: Some(p.ident),
            bytes: p.build(),
            fate: fwd(vec![0], flow),
        });
    }
    {
        let mut p = next(udp([10, 1, 6, 6]));
        p.ttl = 2;
        flow += 1;
        out.push(Case {
            ident: Some(p.ident),
            bytes: p.build(),
            fate: fwd(vec![0], flow),
        });
        let mut p = next(udp([10, 1, 6, 7]));
        p.payload_len = 0;
        let mut b = p.build();
        b.resize(60, 0);
        flow += 1;
        out.push(Case {
            ident: Some(p.ident),
            bytes: b,
            fate: fwd(vec![0], flow),
        });
    }
    // ECMP: 120 flows, two packets each (different payloads); and fragments of datagrams.
    for f in 0..120u16 {
        flow += 1;
        for k in 0..2u8 {
            let mut p = next(udp([10, 2, (f >> 8) as u8, f as u8]));
            p.l4 = if f % 2 == 0 {
                L4::Udp {
                    sport: 3000 + f,
                    dport: 53,
                }
            } else {
                L4::Tcp {
                    sport: 3000 + f,
                    dport: 80,
                    seq: u32::from(k),
                }
            };
            p.payload_len = 10 + usize::from(k) * 30;
            out.push(Case {
                ident: Some(p.ident),
                bytes: p.build(),
                fate: fwd(vec![1, 2], flow),
            });
        }
    }
    for f in 0..20u16 {
        flow += 1;
        let mut first = next(udp([10, 2, 9, f as u8]));
        first.more_frags = true;
        first.payload_len = 64;
        out.push(Case {
            ident: Some(first.ident),
            bytes: first.build(),
            fate: fwd(vec![1, 2], flow),
        });
        let mut later = first.clone();
        later.ident = first.ident; // fragments share the identification
        later.more_frags = false;
        later.frag_offset = 9;
        later.l4 = L4::Udp {
            sport: 0xffff - f,
            dport: 0x1234,
        };
        let mut b = later.build();
        // Make the second fragment distinguishable in the output: a different TTL.
        b[22] = 63;
        let fix = {
            let mut ip = etherparse::Ipv4HeaderSlice::from_slice(&b[14..])
                .unwrap()
                .to_header();
            ip.header_checksum = ip.calc_header_checksum();
            ip.header_checksum
        };
        b[24..26].copy_from_slice(&fix.to_be_bytes());
        out.push(Case {
            ident: None,
            bytes: b,
            fate: fwd(vec![1, 2], flow),
        });
    }
    // Drops, by reason.
    let drop = |bytes: Vec<u8>, why| Case {
        ident: None,
        bytes,
        fate: Fate::Drop(why),
    };
    for ttl in [1, 0] {
        let mut p = next(udp([10, 1, 1, 1]));
        p.ttl = ttl;
        out.push(drop(p.build(), "ttl_expired"));
    }
    let good = next(udp([10, 1, 1, 2])).build();
    let mut bad_sum = good.clone();
    bad_sum[25] ^= 0x40;
    out.push(drop(bad_sum, "bad_checksum"));
    out.push(drop(good[..10].to_vec(), "truncated"));
    out.push(drop(good[..24].to_vec(), "truncated"));
    let mut long_total = good.clone();
    long_total.truncate(40);
    out.push(drop(long_total, "truncated"));
    let mut bad_version = good.clone();
    bad_version[14] = 0x55;
    out.push(drop(bad_version, "malformed"));
    out.push(drop(
        frame(
            IN_MAC,
            MacAddr([2; 6]),
            &[1, 2, 3],
            EtherType::IPV4,
            &good[14..],
        ),
        "malformed",
    ));
    out.push(drop(next(udp([192, 0, 2, 1])).build(), "no_route"));
    let mut big = next(udp([10, 1, 200, 9]));
    big.payload_len = 1000;
    out.push(drop(big.build(), "mtu_exceeded"));
    out.push(drop(
        frame(
            MacAddr::BROADCAST,
            MacAddr([2; 6]),
            &[],
            EtherType::ARP,
            &[0; 28],
        ),
        "arp",
    ));
    out.push(drop(
        frame(IN_MAC, MacAddr([2; 6]), &[], EtherType::IPV6, &[0x60; 48]),
        "ipv6",
    ));
    out.push(drop(
        frame(IN_MAC, MacAddr([2; 6]), &[7], EtherType::IPV6, &[0x60; 48]),
        "ipv6",
    ));
    out.push(drop(
        frame(
            MacAddr([1, 0x80, 0xc2, 0, 0, 0xe]),
            MacAddr([2; 6]),
            &[],
            0x88cc,
            &[0; 46],
        ),
        "other_ethertype",
    ));
    out
}

/// Where the IPv4 header starts, found by etherparse.
fn l3_offset(bytes: &[u8]) -> usize {
    let p = SlicedPacket::from_ethernet(bytes).unwrap();
    let Some(NetSlice::Ipv4(ip)) = p.net else {
        panic!("not IPv4")
    };
    ip.header().slice().as_ptr() as usize - bytes.as_ptr() as usize
}

#[test]
fn forwards_and_drops_every_case_correctly() {
    let dir = Scratch::new("pcapfwd");
    let cases = cases();
    write_pcap(
        &dir.path("in.pcap"),
        cases.iter().map(|c| c.bytes.as_slice()),
    )
    .unwrap();
    write(&dir.path("switch.toml"), &config(&dir));
    let summary = dir.path("summary.json");
    let out = run_switch(
        &[
            "--config",
            dir.path("switch.toml").to_str().unwrap(),
            "--until-idle",
            "1500",
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "switch failed:\n{}", text(&out));

    // Every dropped packet is counted under its reason, and nothing else is dropped.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let mut expected_drops: BTreeMap<String, u64> = BTreeMap::new();
    for c in &cases {
        if let Fate::Drop(why) = c.fate {
            *expected_drops.entry(why.to_owned()).or_default() += 1;
        }
    }
    for (reason, count) in s["drops"].as_object().unwrap() {
        assert_eq!(
            count.as_u64().unwrap(),
            expected_drops.get(reason).copied().unwrap_or(0),
            "drops for {reason}:\n{}",
            text(&out)
        );
    }
    let forwarded = cases
        .iter()
        .filter(|c| matches!(c.fate, Fate::Forward { .. }))
        .count() as u64;
    assert_eq!(s["rx_packets"].as_u64().unwrap(), cases.len() as u64);
    assert_eq!(s["tx_packets"].as_u64().unwrap(), forwarded);

    // Every output packet: right port, TTL one lower, checksum valid, MACs rewritten, all
    // other bytes unchanged; every expected packet appears once; flows keep one port.
    let mut remaining: HashMap<Vec<u8>, usize> = HashMap::new();
    for (i, c) in cases.iter().enumerate() {
        if matches!(c.fate, Fate::Forward { .. }) {
            remaining.insert(c.bytes.clone(), i);
        }
    }
    let mut flow_port: HashMap<u32, usize> = HashMap::new();
    let mut per_port = [0usize; 3];
    assert!(
        read_pcap(&dir.path("in_tx.pcap")).unwrap().is_empty(),
        "nothing goes back to the edge port"
    );
    for (port, (name, port_mac, hop_mac)) in OUT.iter().enumerate() {
        for pkt in read_pcap(&dir.path(&format!("{name}.pcap"))).unwrap() {
            let parsed = SlicedPacket::from_ethernet(&pkt).expect("output parses");
            let Some(NetSlice::Ipv4(ip)) = &parsed.net else {
                panic!("output is not IPv4")
            };
            let h = ip.header().to_header();
            assert_eq!(
                h.calc_header_checksum(),
                h.header_checksum,
                "checksum valid on {name}"
            );
            assert_eq!(&pkt[0..6], hop_mac, "destination MAC is the next hop's");
            assert_eq!(&pkt[6..12], port_mac, "source MAC is the egress port's");
            // Rebuild the input: restore MACs, TTL + 1 and the input checksum.
            let l3 = l3_offset(&pkt);
            let mut original = pkt.clone();
            original[0..6].copy_from_slice(&IN_MAC.0);
            original[6..12].copy_from_slice(
                &PacketSpec::udp(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED, 0, 0)
                    .src_mac
                    .0,
            );
            original[l3 + 8] += 1;
            let mut ih = etherparse::Ipv4HeaderSlice::from_slice(&original[l3..])
                .unwrap()
                .to_header();
            ih.header_checksum = ih.calc_header_checksum();
            original[l3 + 10..l3 + 12].copy_from_slice(&ih.header_checksum.to_be_bytes());
            let Some(i) = remaining.remove(&original) else {
                panic!(
                    "output packet on {name} matches no input packet (or appears twice): {pkt:02x?}"
                )
            };
            let Fate::Forward { ports, flow } = &cases[i].fate else {
                unreachable!()
            };
            assert!(
                ports.contains(&port),
                "case {i} left on {name}, expected one of {ports:?}"
            );
            if let Some(first) = flow_port.insert(*flow, port) {
                assert_eq!(first, port, "flow {flow} took two paths");
            }
            if let Some(id) = cases[i].ident {
                assert_eq!(h.identification, id);
            }
            per_port[port] += 1;
        }
    }
    assert!(
        remaining.is_empty(),
        "{} forwarded packets never came out: cases {:?}",
        remaining.len(),
        remaining.values().collect::<Vec<_>>()
    );
    assert!(
        per_port[1] > 40 && per_port[2] > 40,
        "ECMP spreads flows: {per_port:?}"
    );
}

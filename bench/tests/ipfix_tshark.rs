//! The sink's IPFIX export read by a second, independent decoder: Wireshark's IPFIX
//! dissector (`tshark`, installed by scripts/setup.sh) decodes the exporter's real
//! datagrams, wrapped in UDP to port 4739 in a capture, to the records that went in, with no
//! malformed or undecoded part.

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::tshark;
use etherparse::PacketBuilder;
use sink::flows::{EndReason, FlowExport};
use sink::ipfix::IpfixExporter;
use telemetry::flowradar::FlowKey;

/// Record `i` of switch `switch`.
fn record(switch: u32, i: u32) -> FlowExport {
    FlowExport {
        key: FlowKey {
            src: 0x0a00_0001 + i,
            dst: 0x0a01_0001,
            src_port: 1000 + i as u16,
            dst_port: 4791,
            protocol: if i.is_multiple_of(2) { 17 } else { 6 },
        },
        switch,
        packets: 10 + u64::from(i),
        bytes: 5_000_000_000 + u64::from(i) * 1000,
        start_ms: 1_796_000_000_000 + u64::from(i),
        end_ms: 1_796_000_001_000 + u64::from(i),
        // Switch 3 is the flows' last hop (their ports known there), switch 9 is not.
        ingress: (switch == 3).then_some(1),
        egress: (switch == 3).then_some(2 + i as u16),
        ended: i.is_multiple_of(3),
        end_reason: if i.is_multiple_of(3) {
            EndReason::IdleTimeout
        } else {
            EndReason::ActiveTimeout
        },
    }
}

/// `fields` of every message with records, one line per message; a field's values in a
/// message are joined by `;`, one per record.
fn record_fields(pcap: &std::path::Path, fields: &[&str]) -> String {
    let mut args = vec!["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"];
    for f in fields {
        args.extend(["-e", f]);
    }
    args.extend(["-Y", "cflow.srcaddr"]);
    tshark(pcap, &args)
}

#[test]
fn wireshark_decodes_the_exported_records() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut ex = IpfixExporter::new(rx.local_addr().unwrap(), Duration::from_secs(60)).unwrap();
    // Two switches (observation domains); enough records for switch 3 to take two messages.
    let mut sent = Vec::new();
    for (switch, n) in [(3, 40), (9, 2)] {
        for i in 0..n {
            let r = record(switch, i);
            sent.push(r);
            ex.add(r);
        }
    }
    ex.flush();
    let mut frames = Vec::new();
    let mut buf = [0u8; 2048];
    for _ in 0..ex.messages {
        let n = rx.recv(&mut buf).unwrap();
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 1], 64)
            .udp(40000, 4739)
            .write(&mut f, &buf[..n])
            .unwrap();
        frames.push(f);
    }
    assert!(frames.len() >= 4, "templates and data for two domains");
    let dir = std::env::temp_dir().join(format!("pint-ipfix-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("ipfix.pcap");
    pipeline::capture::write_pcap(&pcap, frames.iter().map(Vec::as_slice)).unwrap();

    // Nothing malformed, and every data record decoded with its template (Wireshark marks
    // data it has no template for).
    let bad = tshark(
        &pcap,
        &["-Y", "_ws.malformed || _ws.expert.severity >= warning"],
    );
    assert!(bad.trim().is_empty(), "tshark flags: {bad}");
    let out = record_fields(
        &pcap,
        &[
            "cflow.od_id",
            "cflow.srcaddr",
            "cflow.dstaddr",
            "cflow.srcport",
            "cflow.dstport",
            "cflow.protocol",
            "cflow.octets",
            "cflow.packets",
            "cflow.flow_end_reason",
        ],
    );
    let mut got = Vec::new();
    for line in out.lines() {
        let cols: Vec<Vec<&str>> = line.split('\t').map(|c| c.split(';').collect()).collect();
        // One domain per message; the other columns hold one value per record.
        let domain: u32 = cols[0][0].parse().unwrap();
        for j in 0..cols[1].len() {
            let record: Vec<&str> = cols[1..].iter().map(|c| c[j]).collect();
            got.push(format!("{domain} {}", record.join(" ")));
        }
    }
    let want: Vec<String> = sent
        .iter()
        .map(|r| {
            let ip = |a: u32| std::net::Ipv4Addr::from(a).to_string();
            format!(
                "{} {} {} {} {} {} {} {} {}",
                r.switch,
                ip(r.key.src),
                ip(r.key.dst),
                r.key.src_port,
                r.key.dst_port,
                r.key.protocol,
                r.bytes,
                r.packets,
                r.end_reason as u8,
            )
        })
        .collect();
    assert_eq!(got, want);
    // The ports, in the records of the template that has them (switch 3's).
    let ports = record_fields(&pcap, &["cflow.od_id", "cflow.inputint", "cflow.outputint"]);
    let mut got_ports = Vec::new();
    for line in ports.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols[1].is_empty() {
            assert_eq!(cols[0], "9", "only switch 9's records lack ports: {line}");
            continue;
        }
        for (i, o) in cols[1].split(';').zip(cols[2].split(';')) {
            got_ports.push(format!("{} {i} {o}", cols[0]));
        }
    }
    let want_ports: Vec<String> = sent
        .iter()
        // Interfaces from 1: the port ID + 1.
        .filter_map(|r| Some(format!("{} {} {}", r.switch, r.ingress? + 1, r.egress? + 1)))
        .collect();
    assert_eq!(got_ports, want_ports);
    // Flow start and end of every record, in milliseconds since the epoch as Wireshark
    // shows them (UTC): the records start in the second 1796000000 (Nov 30, 2026 00:53:20)
    // and end in the next.
    let shown = |ms: u64| {
        let second = match ms / 1000 {
            1_796_000_000 => "Nov 30, 2026 00:53:20",
            1_796_000_001 => "Nov 30, 2026 00:53:21",
            other => panic!("a record's time outside the test's two seconds: {other}"),
        };
        format!("{second}.{:03}000000 UTC", ms % 1000)
    };
    let times = record_fields(
        &pcap,
        &["cflow.od_id", "cflow.abstimestart", "cflow.abstimeend"],
    );
    let mut got_times = Vec::new();
    for line in times.lines() {
        let cols: Vec<Vec<&str>> = line.split('\t').map(|c| c.split(';').collect()).collect();
        for (start, end) in cols[1].iter().zip(&cols[2]) {
            got_times.push(format!("{} {start} {end}", cols[0][0]));
        }
    }
    let want_times: Vec<String> = sent
        .iter()
        .map(|r| format!("{} {} {}", r.switch, shown(r.start_ms), shown(r.end_ms)))
        .collect();
    assert_eq!(got_times, want_times);
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Captures as users bring them: pcapng as well as pcap, and frames longer than the default
//! mbuf, replayed from memory (`infinite_rx`) by the real `pint-switch`.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use common::{Scratch, capture_config, run_for_summary, worker_lcore, write};
use control::summary::Summary;
use dataplane::capture::{PacketSpec, write_pcap, write_pcapng};

/// Runs the switch for a second, replaying `capture` on a port of the default MTU (1500)
/// into a null port with MTU `mtu`; returns its output and summary.
fn run(dir: &Scratch, capture: &Path, mtu: u16) -> (String, Summary) {
    let cfg = dir.path("switch.toml");
    let out_keys = format!("mtu = {mtu}");
    write(
        &cfg,
        &capture_config(capture, "", "net_null0,no-rx=1", &out_keys, worker_lcore()),
    );
    run_for_summary(dir, &["--config", cfg.to_str().unwrap(), "--duration", "1"])
}

/// Two short UDP frames and one of `payload` bytes, all to 10.1.0.1.
fn frames(payload: usize) -> Vec<Vec<u8>> {
    [18, 18, payload]
        .into_iter()
        .map(|len| {
            let mut p = PacketSpec::udp(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 1, 0, 1),
                1000,
                2000,
            );
            p.payload_len = len;
            p.build()
        })
        .collect()
}

#[test]
fn a_pcapng_capture_replays_like_the_same_pcap() {
    let dir = Scratch::new("pcapng");
    let f = frames(100);
    let (pcap, ng) = (dir.path("in.pcap"), dir.path("in.pcapng"));
    write_pcap(&pcap, f.iter().map(Vec::as_slice)).unwrap();
    write_pcapng(&ng, f.iter().map(Vec::as_slice)).unwrap();
    for capture in [&pcap, &ng] {
        let (t, s) = run(&dir, capture, 1500);
        assert!(s.rx_packets > 0, "{t}");
        assert_eq!(s.tx_packets, s.rx_packets, "every frame is forwarded: {t}");
    }
}

#[test]
fn jumbo_frames_in_a_replayed_capture_get_mbufs_that_hold_them() {
    let dir = Scratch::new("jumbo");
    // 8 + 20 + 14 bytes of headers: a 9000-byte IPv4 packet, longer than a 2048-byte mbuf.
    let f = frames(9000 - 28);
    assert_eq!(f[2].len(), 9014);
    let cap = dir.path("in.pcap");
    write_pcap(&cap, f.iter().map(Vec::as_slice)).unwrap();
    // A 9000-byte egress MTU forwards all of them.
    let (t, s) = run(&dir, &cap, 9000);
    assert!(
        t.contains("mbufs of 9"),
        "the pool's mbufs fit the jumbo frame: {t}"
    );
    assert!(s.rx_packets > 0 && s.tx_packets == s.rx_packets, "{t}");
    // A 1500-byte one drops the jumbo frame (a third of what arrives) and counts why.
    let (t, s) = run(&dir, &cap, 1500);
    let dropped = s.drops.get(pipeline::DropReason::MtuExceeded);
    assert!(dropped > 0, "{t}");
    assert_eq!(dropped + s.tx_packets, s.rx_packets, "{t}");
    assert!(s.tx_packets.abs_diff(2 * dropped) <= 3, "{t}");
}

#[test]
fn a_capture_that_is_not_ethernet_is_named_at_start_and_its_frames_are_counted() {
    let dir = Scratch::new("cooked");
    // A Linux cooked capture (`tcpdump -i any`): a 16-byte header where Ethernet has 14.
    let cap = dir.path("in.pcap");
    let header = pcap_file::pcap::PcapHeader {
        datalink: pcap_file::DataLink::LINUX_SLL,
        ..Default::default()
    };
    let file = std::io::BufWriter::new(std::fs::File::create(&cap).unwrap());
    let mut w = pcap_file::pcap::PcapWriter::with_header(file, header).unwrap();
    for f in frames(18) {
        let mut cooked = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 8, 0];
        cooked.extend_from_slice(&f[14..]);
        w.write_packet(&pcap_file::pcap::PcapPacket::new(
            Duration::ZERO,
            cooked.len() as u32,
            &cooked,
        ))
        .unwrap();
    }
    drop(w);
    let (t, s) = run(&dir, &cap, 1500);
    assert!(
        t.contains("warning: config key `ports[0].device`")
            && t.contains("link type LINUX_SLL (113), not Ethernet"),
        "{t}"
    );
    assert!(s.rx_packets > 0, "{t}");
    assert_eq!(s.drops.total(), s.rx_packets, "none is forwarded: {t}");
}

#[test]
fn a_capture_cut_short_replays_the_frames_before_the_cut_with_a_warning() {
    let dir = Scratch::new("cutshort");
    let f = frames(100);
    let whole = dir.path("whole.pcap");
    write_pcap(&whole, f.iter().map(Vec::as_slice)).unwrap();
    // The last record loses its final bytes, as when tcpdump is killed mid-write.
    let bytes = std::fs::read(&whole).unwrap();
    let cap = dir.path("in.pcap");
    std::fs::write(&cap, &bytes[..bytes.len() - 10]).unwrap();
    let (t, s) = run(&dir, &cap, 1500);
    assert!(
        t.contains("libpcap stops reading it after 2 frames") && t.contains("only those"),
        "{t}"
    );
    assert!(s.rx_packets > 0 && s.tx_packets == s.rx_packets, "{t}");
}

/// A capture taken with a snap length (`tcpdump -s 96`: each record holds the start of a
/// frame and says how long it was on the wire) replays, as libpcap reads it, with a
/// warning that its cut frames are dropped as `truncated`.
#[test]
fn a_capture_taken_with_a_snap_length_replays_with_a_warning() {
    let dir = Scratch::new("snaplen");
    let cap = dir.path("in.pcap");
    let header = pcap_file::pcap::PcapHeader {
        snaplen: 60,
        ..Default::default()
    };
    let file = std::fs::File::create(&cap).unwrap();
    let mut w = pcap_file::pcap::PcapWriter::with_header(file, header).unwrap();
    for f in frames(1000) {
        let kept = &f[..f.len().min(60)];
        w.write_packet(&pcap_file::pcap::PcapPacket::new(
            Duration::ZERO,
            f.len() as u32,
            kept,
        ))
        .unwrap();
    }
    drop(w);
    let (t, s) = run(&dir, &cap, 1500);
    assert!(
        t.contains("1 of its 3 frames were captured shorter") && t.contains("`truncated`"),
        "{t}"
    );
    assert!(s.rx_packets > 0, "{t}");
    assert!(s.tx_packets > 0, "the whole frames are forwarded: {t}");
    // One frame in three was cut: each replay of it is dropped as `truncated`.
    let truncated = s.drops.get(pipeline::DropReason::Truncated);
    assert_eq!(truncated + s.tx_packets, s.rx_packets, "{t}");
    let share = truncated as f64 / s.rx_packets as f64;
    assert!(
        (share - 1.0 / 3.0).abs() < 0.01,
        "{truncated} of {}: {t}",
        s.rx_packets
    );
}

//! The bytes of a generated packet, written straight into a buffer (an mbuf's data room or
//! a capture record): Ethernet II, IPv4 without options, then UDP or TCP, then the payload
//! (a probe's fields, then zeros). Checksums are computed, so every frame is valid on the
//! wire and in a capture.
//!
//! Layout (offsets in bytes): Ethernet 0..14 (destination, source, EtherType 0x0800);
//! IPv4 14..34 (version 4, IHL 5, DSCP 0, total length, identification, no flags, TTL,
//! protocol, checksum, source, destination); UDP 34..42 (ports, length, checksum) or TCP
//! 34..54 (ports, sequence number, acknowledgment 0, data offset 5, flags PSH+ACK, window
//! 65535, checksum, urgent 0); payload after that.

use std::net::Ipv4Addr;

use telemetry::wire::MacAddr;
use telemetry::wire::checksum::{checksum, fold, ones_complement_sum};
use telemetry::wire::probe::{PROBE_LEN, ProbePayload};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const IP_AT: usize = ETH_LEN;
const L4_AT: usize = ETH_LEN + IP_LEN;
/// UDP header length.
pub const UDP_LEN: usize = 8;
/// TCP header length (no options).
pub const TCP_LEN: usize = 20;

/// A flow's addresses, ports and protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// TCP (else UDP).
    pub tcp: bool,
}

impl FlowTuple {
    /// Bytes of Ethernet, IPv4 and transport headers.
    pub fn header_len(&self) -> usize {
        L4_AT + if self.tcp { TCP_LEN } else { UDP_LEN }
    }
}

/// What varies per packet.
#[derive(Debug, Clone, Copy)]
pub struct PacketFields<'a> {
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Frame length without FCS (at least 60 and the headers plus `payload`).
    pub frame_len: usize,
    /// IPv4 time to live.
    pub ttl: u8,
    /// IPv4 identification.
    pub ident: u16,
    /// TCP sequence number (ignored for UDP).
    pub tcp_seq: u32,
    /// The payload's first bytes; the rest is zeros.
    pub payload: &'a [u8],
}

/// Writes the frame into `buf` and returns its length, or None if `buf` is too short or the
/// frame cannot hold the headers and the payload.
pub fn emit_frame(buf: &mut [u8], flow: &FlowTuple, p: &PacketFields<'_>) -> Option<usize> {
    let len = p.frame_len;
    let payload_at = flow.header_len();
    if len < 60 || len < payload_at + p.payload.len() || len > buf.len() || len - ETH_LEN > 65535 {
        return None;
    }
    let f = &mut buf[..len];
    f[0..6].copy_from_slice(&p.dst_mac.0);
    f[6..12].copy_from_slice(&p.src_mac.0);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_total = (len - ETH_LEN) as u16;
    let proto: u8 = if flow.tcp { 6 } else { 17 };
    {
        let ip = &mut f[IP_AT..L4_AT];
        ip[0] = 0x45;
        ip[1] = 0;
        ip[2..4].copy_from_slice(&ip_total.to_be_bytes());
        ip[4..6].copy_from_slice(&p.ident.to_be_bytes());
        ip[6..8].copy_from_slice(&[0, 0]);
        ip[8] = p.ttl;
        ip[9] = proto;
        ip[10..12].copy_from_slice(&[0, 0]);
        ip[12..16].copy_from_slice(&flow.src.octets());
        ip[16..20].copy_from_slice(&flow.dst.octets());
        let c = checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let l4_len = len - L4_AT;
    {
        let l4 = &mut f[L4_AT..];
        l4[0..2].copy_from_slice(&flow.sport.to_be_bytes());
        l4[2..4].copy_from_slice(&flow.dport.to_be_bytes());
        if flow.tcp {
            l4[4..8].copy_from_slice(&p.tcp_seq.to_be_bytes());
            l4[8..12].copy_from_slice(&[0, 0, 0, 0]);
            l4[12] = 5 << 4;
            l4[13] = 0x18;
            l4[14..16].copy_from_slice(&65535u16.to_be_bytes());
            l4[16..20].copy_from_slice(&[0, 0, 0, 0]);
        } else {
            l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l4[6..8].copy_from_slice(&[0, 0]);
        }
    }
    f[payload_at..payload_at + p.payload.len()].copy_from_slice(p.payload);
    f[payload_at + p.payload.len()..].fill(0);
    set_transport_checksum(f, flow.tcp);
    Some(len)
}

/// Writes the transport checksum of a frame laid out as [`emit_frame`] writes them, over
/// the pseudo-header (addresses from its IPv4 header) and the segment.
fn set_transport_checksum(f: &mut [u8], tcp: bool) {
    let at = L4_AT + if tcp { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&[0, 0]);
    let l4_len = f.len() - L4_AT;
    let mut sum = u64::from(ones_complement_sum(&f[L4_AT..]));
    sum += u64::from(ones_complement_sum(&f[IP_AT + 12..IP_AT + 20]));
    sum += u64::from(if tcp { 6u8 } else { 17 }) + l4_len as u64;
    let mut c = !fold(sum);
    if !tcp && c == 0 {
        c = 0xffff; // UDP: zero means "no checksum"
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Gives the probe in a frame [`emit_frame`] built (UDP, the probe at the payload's start)
/// a new send time, its checksum with it: a probe built before a link's outage and sent
/// after it would otherwise show the outage as its latency. False when the frame holds no
/// probe.
pub fn restamp_probe(f: &mut [u8], sent_ns: u64) -> bool {
    let at = L4_AT + UDP_LEN;
    if f.len() < at + PROBE_LEN || f.get(IP_AT + 9) != Some(&17) {
        return false;
    }
    let Some(mut probe) = ProbePayload::decode(&f[at..]) else {
        return false;
    };
    probe.sent_ns = sent_ns;
    f[at..at + PROBE_LEN].copy_from_slice(&probe.encode());
    set_transport_checksum(f, false);
    true
}

/// The flow key a switch counts an untagged Ethernet + IPv4 frame under (ports only for
/// unfragmented TCP and UDP), and the IPv4 total length it counts as bytes; None for other
/// frames.
pub fn flow_key_of(frame: &[u8]) -> Option<(telemetry::flowradar::FlowKey, u16)> {
    use telemetry::wire::ipv4::Ipv4Packet;
    use telemetry::wire::transport::TransportPorts;
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = Ipv4Packet::new_checked(frame.get(14..)?).ok()?;
    let proto = ip.protocol();
    let (mut src_port, mut dst_port) = (0, 0);
    if matches!(proto, 6 | 17)
        && !ip.is_fragment()
        && let Ok(p) = TransportPorts::new_checked(&frame[14 + ip.header_len()..])
    {
        (src_port, dst_port) = (p.src_port(), p.dst_port());
    }
    Some((
        telemetry::flowradar::FlowKey {
            src: ip.src_u32(),
            dst: ip.dst_u32(),
            src_port,
            dst_port,
            protocol: proto,
        },
        ip.total_len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{SlicedPacket, TransportSlice};

    fn fields(frame_len: usize, payload: &[u8]) -> PacketFields<'_> {
        PacketFields {
            dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            frame_len,
            ttl: 17,
            ident: 0x1234,
            tcp_seq: 99,
            payload,
        }
    }

    #[test]
    fn frames_parse_with_valid_checksums() {
        let mut buf = [0xeeu8; 1600];
        for tcp in [false, true] {
            for len in [60usize, 61, 64, 128, 590, 1514] {
                let flow = FlowTuple {
                    src: Ipv4Addr::new(10, 0, 1, 2),
                    dst: Ipv4Addr::new(10, 1, 3, 4),
                    sport: 4000,
                    dport: 80,
                    tcp,
                };
                let n = emit_frame(&mut buf, &flow, &fields(len, &[1, 2, 3])).unwrap();
                assert_eq!(n, len);
                let (key, bytes) = flow_key_of(&buf[..n]).unwrap();
                assert_eq!(
                    (key.src, key.dst, key.src_port, key.dst_port, key.protocol),
                    (0x0a00_0102, 0x0a01_0304, 4000, 80, if tcp { 6 } else { 17 })
                );
                assert_eq!(usize::from(bytes), len - 14);
                let pkt = SlicedPacket::from_ethernet(&buf[..n]).unwrap();
                let Some(etherparse::NetSlice::Ipv4(ip)) = pkt.net else {
                    panic!("IPv4")
                };
                let h = ip.header().to_header();
                assert_eq!(h.header_checksum, h.calc_header_checksum());
                assert_eq!(usize::from(h.total_len), len - 14);
                assert_eq!((h.time_to_live, h.identification), (17, 0x1234));
                let payload = match pkt.transport.unwrap() {
                    TransportSlice::Udp(u) => {
                        assert!(!tcp);
                        let uh = u.to_header();
                        assert_eq!(uh.checksum, uh.calc_checksum_ipv4(&h, u.payload()).unwrap());
                        u.payload().to_vec()
                    }
                    TransportSlice::Tcp(t) => {
                        assert!(tcp);
                        let th = t.to_header();
                        assert_eq!(th.checksum, th.calc_checksum_ipv4(&h, t.payload()).unwrap());
                        assert_eq!(th.sequence_number, 99);
                        t.payload().to_vec()
                    }
                    _ => panic!("transport"),
                };
                assert_eq!(&payload[..3], &[1, 2, 3]);
                assert!(payload[3..].iter().all(|&b| b == 0));
            }
        }
    }

    /// A probe given a new send time keeps a valid checksum; a frame without a probe is
    /// left alone.
    #[test]
    fn a_restamped_probe_keeps_a_valid_checksum() {
        let flow = FlowTuple {
            src: Ipv4Addr::new(10, 2, 0, 1),
            dst: Ipv4Addr::new(10, 3, 0, 1),
            sport: 50000,
            dport: 7,
            tcp: false,
        };
        let probe = ProbePayload {
            stream: 3,
            seq: 41,
            sent_ns: 1_000,
        };
        let mut buf = [0u8; 128];
        let n = emit_frame(&mut buf, &flow, &fields(80, &probe.encode())).unwrap();
        let f = &mut buf[..n];
        assert!(restamp_probe(f, 0x0123_4567_89ab_cdef));
        let pkt = SlicedPacket::from_ethernet(f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = pkt.net else {
            panic!("IPv4")
        };
        let Some(TransportSlice::Udp(u)) = pkt.transport else {
            panic!("UDP")
        };
        let (h, uh) = (ip.header().to_header(), u.to_header());
        assert_eq!(uh.checksum, uh.calc_checksum_ipv4(&h, u.payload()).unwrap());
        let again = ProbePayload::decode(u.payload()).unwrap();
        assert_eq!(
            (again.stream, again.seq, again.sent_ns),
            (3, 41, 0x0123_4567_89ab_cdef)
        );
        let n = emit_frame(&mut buf, &flow, &fields(80, &[1, 2, 3])).unwrap();
        let before = buf[..n].to_vec();
        assert!(!restamp_probe(&mut buf[..n], 5));
        assert_eq!(buf[..n], before[..]);
    }

    #[test]
    fn only_ipv4_frames_have_a_flow_key() {
        let mut buf = [0u8; 60];
        buf[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert!(flow_key_of(&buf).is_none());
        buf[12..14].copy_from_slice(&[0x08, 0x00]);
        assert!(flow_key_of(&buf).is_none(), "version 0");
        assert!(flow_key_of(&buf[..10]).is_none());
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let mut buf = [0u8; 100];
        let flow = FlowTuple {
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            sport: 1,
            dport: 2,
            tcp: true,
        };
        assert!(emit_frame(&mut buf, &flow, &fields(59, &[])).is_none());
        assert!(emit_frame(&mut buf, &flow, &fields(101, &[])).is_none());
        assert!(emit_frame(&mut buf, &flow, &fields(60, &[0; 7])).is_none());
    }
}

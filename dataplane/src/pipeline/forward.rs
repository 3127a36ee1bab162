//! The per-packet forwarding step: parse Ethernet (up to two VLAN tags) and IPv4, validate,
//! route (LPM, ECMP by flow hash), decrement the TTL with an incremental checksum update,
//! and rewrite the MACs. Plain Rust over packet bytes: no DPDK, no allocation.

use control::Config;
use telemetry::hash::flow_hash;
use telemetry::wire::checksum::ones_complement_sum;
use telemetry::wire::ipv4::protocol;
use telemetry::wire::{EtherType, EthernetFrame, Ipv4Packet, MacAddr, TransportPorts};

use super::counters::DropReason;
use super::fib::{Fib, NextHop};
use super::lpm::LpmError;

/// What the forwarder needs to know about each port.
#[derive(Debug, Clone, Copy)]
pub struct PortView {
    /// The port's own MAC (source of frames it sends; destination of frames it accepts).
    pub mac: MacAddr,
    /// Largest IPv4 packet it sends.
    pub mtu: u16,
    /// Whether it accepts frames for any destination MAC.
    pub promiscuous: bool,
}

/// The outcome for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send on this port (index into the configuration's ports); the frame was rewritten.
    Forward(u16),
    /// Drop, counted under this reason; the frame is unchanged.
    Drop(DropReason),
}

/// Where the headers of an accepted IPv4 packet sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Offsets {
    /// Offset of the IPv4 header from the start of the frame.
    pub l3: usize,
    /// IPv4 header length in bytes.
    pub header_len: usize,
}

/// The forwarding state shared read-only by all workers.
pub struct Forwarder {
    fib: Fib,
    ports: Vec<PortView>,
    ecmp_seed: u64,
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl Forwarder {
    /// Builds the forwarder from a validated configuration.
    pub fn from_config(config: &Config) -> Result<Forwarder, LpmError> {
        let ports = config.ports.iter().map(|p| PortView { mac: p.mac, mtu: p.mtu, promiscuous: p.promiscuous }).collect();
        Ok(Forwarder { fib: Fib::from_config(config)?, ports, ecmp_seed: config.dataplane.ecmp_seed })
    }

    /// The forwarding table.
    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// Finds and validates the IPv4 header of a frame received on `rx_port`. `frame` is the
    /// first segment's bytes; `frame_len` the whole packet's length.
    #[inline(always)]
    pub fn parse(&self, rx_port: usize, frame: &[u8], frame_len: usize) -> Result<Ipv4Offsets, DropReason> {
        let seg = frame.len();
        let eth = EthernetFrame::new_checked(frame).map_err(|_| DropReason::Truncated)?;
        let port = &self.ports[rx_port];
        if !port.promiscuous && eth.dst() != port.mac {
            return Err(DropReason::NotForUs);
        }
        let mut ty = eth.ethertype();
        let mut l3 = EthernetFrame::<&[u8]>::HEADER_LEN;
        let mut tags = 0;
        while EtherType::is_vlan(ty) {
            tags += 1;
            if tags > 2 {
                return Err(DropReason::Malformed);
            }
            if seg < l3 + 4 {
                return Err(DropReason::Truncated);
            }
            ty = be16(frame, l3 + 2);
            l3 += 4;
        }
        match ty {
            EtherType::IPV4 => {}
            EtherType::ARP => return Err(DropReason::Arp),
            EtherType::IPV6 => return Err(DropReason::Ipv6),
            _ => return Err(DropReason::OtherEthertype),
        }
        let ip_bytes = &frame[l3..];
        if ip_bytes.len() < Ipv4Packet::<&[u8]>::MIN_HEADER_LEN {
            return Err(DropReason::Truncated);
        }
        let ip = Ipv4Packet::new_unchecked(ip_bytes);
        let header_len = ip.header_len();
        if ip.version() != 4 || header_len < Ipv4Packet::<&[u8]>::MIN_HEADER_LEN {
            return Err(DropReason::Malformed);
        }
        if header_len > ip_bytes.len() {
            return Err(DropReason::Truncated);
        }
        let total = usize::from(ip.total_len());
        if total < header_len {
            return Err(DropReason::Malformed);
        }
        if total > frame_len - l3 {
            return Err(DropReason::Truncated);
        }
        if ones_complement_sum(&ip_bytes[..header_len]) != 0xffff {
            return Err(DropReason::BadChecksum);
        }
        Ok(Ipv4Offsets { l3, header_len })
    }

    /// Picks the next hop for a validated packet: longest prefix match, then a flow hash over
    /// the 5-tuple when the route has several next hops.
    #[inline(always)]
    pub fn route(&self, frame: &[u8], at: Ipv4Offsets) -> Result<NextHop, DropReason> {
        let ip = Ipv4Packet::new_unchecked(&frame[at.l3..]);
        let dst = ip.dst_u32();
        let hops = self.fib.lookup(dst).ok_or(DropReason::NoRoute)?;
        if hops.len() == 1 {
            return Ok(hops[0]);
        }
        let proto = ip.protocol();
        let (mut sport, mut dport) = (0, 0);
        if (proto == protocol::TCP || proto == protocol::UDP) && !ip.is_fragment() {
            let l4 = &frame[at.l3 + at.header_len..];
            if let Ok(p) = TransportPorts::new_checked(l4) {
                (sport, dport) = (p.src_port(), p.dst_port());
            }
        }
        let h = flow_hash(self.ecmp_seed, ip.src_u32(), dst, proto, sport, dport);
        let i = ((u64::from(h) * hops.len() as u64) >> 32) as usize;
        Ok(hops[i])
    }

    /// Forwards one frame received on `rx_port`: validates, routes, decrements the TTL and
    /// rewrites the MACs. A dropped frame is left unchanged.
    #[inline(always)]
    pub fn process(&self, rx_port: usize, frame: &mut [u8], frame_len: usize) -> Verdict {
        let at = match self.parse(rx_port, frame, frame_len) {
            Ok(at) => at,
            Err(r) => return Verdict::Drop(r),
        };
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[at.l3..]);
        if ip.ttl() <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        let total = ip.total_len();
        let hop = match self.route(frame, at) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(r),
        };
        let egress = &self.ports[usize::from(hop.port)];
        if total > egress.mtu {
            return Verdict::Drop(DropReason::MtuExceeded);
        }
        ip = Ipv4Packet::new_unchecked(&mut frame[at.l3..]);
        ip.decrement_ttl();
        let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
        eth.set_dst(hop.mac);
        eth.set_src(egress.mac);
        Verdict::Forward(hop.port)
    }
}

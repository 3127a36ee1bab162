//! The per-packet forwarding step: parse Ethernet (up to two VLAN tags) and IPv4, validate,
//! route (LPM, ECMP by flow hash), decrement the TTL with an incremental checksum update,
//! and rewrite the MACs. Plain Rust over packet bytes: no DPDK, no allocation.
//!
//! The common case (untagged Ethernet, IPv4 without options) has a fast path with one bounds
//! check; everything else takes the general path. Both give the same verdict and bytes for
//! every input (a property test checks this).

use telemetry::hash::{ecmp_hash, flow_hash};
use telemetry::wire::checksum::ones_complement_sum;
use telemetry::wire::ipv4::protocol;
use telemetry::wire::{EtherType, EthernetFrame, Ipv4Packet, MacAddr, TransportPorts};

use crate::counters::DropReason;
use crate::fib::{Fib, NextHop, unroutable};
use crate::lpm::LpmError;
use crate::tables::Tables;

/// What the forwarder needs to know about each port.
#[derive(Debug, Clone, Copy)]
pub struct PortView {
    /// The port's own MAC (destination of frames it accepts when not promiscuous).
    pub mac: MacAddr,
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
    /// Bit `i` set: port `i` is not promiscuous (checked on the fast path without indexing).
    strict_ports: u32,
    ecmp_seed: u64,
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The header checksum after the TTL drops by one: RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`,
/// where the word `m = TTL << 8 | protocol` becomes `m' = m - 0x100`, so `~m + m'` is the
/// constant 0xfeff and one end-around carry suffices.
#[inline(always)]
pub fn ttl_decrement_checksum(hc: u16) -> u16 {
    let sum = u32::from(!hc) + 0xfeff;
    !(((sum & 0xffff) + (sum >> 16)) as u16)
}

/// Bytes of an untagged Ethernet header plus an IPv4 header without options.
const FAST_LEN: usize = 14 + 20;

/// Whether a 20-byte IPv4 header's checksum is right (its one's-complement sum is 0xffff),
/// from five 32-bit loads and no folding. The sum is byte-order independent in the sense of
/// RFC 1071 section 2(B), and a 32-bit word `hi << 16 | lo` is `hi + lo` modulo 0xffff, so
/// the folded sum is 0xffff exactly when the plain sum of the words is a nonzero multiple of
/// 0xffff (folding keeps the value modulo 0xffff and gives 1 to 0xffff for a nonzero sum).
#[inline(always)]
pub(crate) fn header20_checksum_ok(h: &[u8; 20]) -> bool {
    let w = |i: usize| u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let s = w(0) + w(4) + w(8) + w(12) + w(16);
    s != 0 && s % 0xffff == 0
}

impl Forwarder {
    /// Builds the forwarder from the switch's tables.
    pub fn new(tables: &Tables) -> Result<Forwarder, LpmError> {
        let ports: Vec<PortView> = tables
            .ports
            .iter()
            .map(|p| PortView {
                mac: p.mac,
                promiscuous: p.promiscuous,
            })
            .collect();
        let strict_ports = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.promiscuous)
            .fold(0u32, |m, (i, _)| m | (1 << i));
        Ok(Forwarder {
            fib: Fib::new(tables)?,
            ports,
            strict_ports,
            ecmp_seed: tables.ecmp_seed,
        })
    }

    /// The forwarding table.
    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// Checks a frame's Ethernet header against the port and walks up to two VLAN tags:
    /// returns the offset of the innermost EtherType field.
    #[inline]
    pub fn parse_l2(&self, rx_port: usize, frame: &[u8]) -> Result<usize, DropReason> {
        let seg = frame.len();
        let eth = EthernetFrame::new_checked(frame).map_err(|_| DropReason::Truncated)?;
        let port = &self.ports[rx_port];
        if !port.promiscuous && eth.dst() != port.mac {
            return Err(DropReason::NotForUs);
        }
        let mut at = 12;
        let mut tags = 0;
        while EtherType::is_vlan(be16(frame, at)) {
            tags += 1;
            if tags > 2 {
                return Err(DropReason::Malformed);
            }
            if seg < at + 6 {
                return Err(DropReason::Truncated);
            }
            at += 4;
        }
        Ok(at)
    }

    /// The MAC a frame received on `rx_port` must be addressed to (the check
    /// [`Forwarder::parse_l2`] makes, for fast paths that read the header themselves); None
    /// when the port takes any (or does not exist: see [`Forwarder::has_port`]).
    pub fn required_mac(&self, rx_port: usize) -> Option<MacAddr> {
        let strict = self.strict_ports & (1 << (rx_port & 31)) != 0;
        self.ports.get(rx_port).filter(|_| strict).map(|p| p.mac)
    }

    /// Whether `port` is one of the switch's ports.
    pub fn has_port(&self, port: usize) -> bool {
        port < self.ports.len()
    }

    /// The drop reason of a frame whose EtherType is not IPv4 (or the shim's).
    #[inline]
    pub fn non_ipv4(ty: u16) -> DropReason {
        match ty {
            EtherType::ARP => DropReason::Arp,
            EtherType::IPV6 => DropReason::Ipv6,
            _ => DropReason::OtherEthertype,
        }
    }

    /// Validates the IPv4 header at `l3`: returns its length.
    #[inline]
    pub fn parse_ipv4(frame: &[u8], l3: usize, frame_len: usize) -> Result<usize, DropReason> {
        let ip_bytes = frame.get(l3..).ok_or(DropReason::Truncated)?;
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
        let ok = match ip_bytes.first_chunk::<20>() {
            Some(h) if header_len == 20 => header20_checksum_ok(h),
            _ => ones_complement_sum(&ip_bytes[..header_len]) == 0xffff,
        };
        if !ok {
            return Err(DropReason::BadChecksum);
        }
        Ok(header_len)
    }

    /// Finds and validates the IPv4 header of a frame received on `rx_port`. `frame` is the
    /// first segment's bytes; `frame_len` the whole packet's length.
    #[inline]
    pub fn parse(
        &self,
        rx_port: usize,
        frame: &[u8],
        frame_len: usize,
    ) -> Result<Ipv4Offsets, DropReason> {
        let at = self.parse_l2(rx_port, frame)?;
        let ty = be16(frame, at);
        if ty != EtherType::IPV4 {
            return Err(Self::non_ipv4(ty));
        }
        let l3 = at + 2;
        let header_len = Self::parse_ipv4(frame, l3, frame_len)?;
        Ok(Ipv4Offsets { l3, header_len })
    }

    /// Picks the next hop for a validated packet: longest prefix match, then a flow hash over
    /// the 5-tuple when the route has several next hops.
    #[inline(always)]
    pub fn route(&self, frame: &[u8], at: Ipv4Offsets) -> Result<&NextHop, DropReason> {
        let ip = Ipv4Packet::new_unchecked(&frame[at.l3..]);
        let dst = ip.dst_u32();
        let hops = self.fib.lookup(dst).ok_or_else(|| unroutable(dst))?;
        if hops.len() == 1 {
            return Ok(&hops[0]);
        }
        Ok(&hops[self.ecmp_index(frame, at, hops.len())])
    }

    /// Picks the next hop of a packet to `dst` whose flow has key hash `f`
    /// ([`telemetry::hash::key_hash`]): the same choice [`Forwarder::route`] makes.
    #[inline(always)]
    pub fn route_hashed(&self, dst: u32, f: u64) -> Result<&NextHop, DropReason> {
        let hops = self.fib.lookup(dst).ok_or_else(|| unroutable(dst))?;
        if hops.len() == 1 {
            return Ok(&hops[0]);
        }
        let h = ecmp_hash(self.ecmp_seed, f);
        Ok(&hops[((u64::from(h) * hops.len() as u64) >> 32) as usize])
    }

    #[inline(never)]
    fn ecmp_index(&self, frame: &[u8], at: Ipv4Offsets, n: usize) -> usize {
        let ip = Ipv4Packet::new_unchecked(&frame[at.l3..]);
        let proto = ip.protocol();
        let (mut sport, mut dport) = (0, 0);
        // The transport header within the IP packet's total length: bytes after it are
        // the frame's padding, not ports.
        let l4 = frame
            .get(at.l3 + at.header_len..at.l3 + usize::from(ip.total_len()))
            .unwrap_or(&[]);
        if (proto == protocol::TCP || proto == protocol::UDP)
            && !ip.is_fragment()
            && let Ok(p) = TransportPorts::new_checked(l4)
        {
            (sport, dport) = (p.src_port(), p.dst_port());
        }
        let h = flow_hash(
            self.ecmp_seed,
            ip.src_u32(),
            ip.dst_u32(),
            proto,
            sport,
            dport,
        );
        ((u64::from(h) * n as u64) >> 32) as usize
    }

    /// Forwards one frame received on `rx_port`: validates, routes, decrements the TTL and
    /// rewrites the MACs. A dropped frame is left unchanged.
    #[inline(always)]
    pub fn process(&self, rx_port: usize, frame: &mut [u8], frame_len: usize) -> Verdict {
        if let Some(head) = frame.first_chunk_mut::<FAST_LEN>() {
            // Fast path: untagged IPv4, IHL 5, promiscuous port.
            if head[12..14] == EtherType::IPV4.to_be_bytes()
                && head[14] == 0x45
                && self.strict_ports & (1 << (rx_port & 31)) == 0
            {
                let ip: &mut [u8; 20] = (&mut head[14..]).try_into().expect("20 bytes");
                let total = u16::from_be_bytes([ip[2], ip[3]]);
                if total >= 20 && usize::from(total) <= frame_len - 14 && header20_checksum_ok(ip) {
                    if ip[8] <= 1 {
                        return Verdict::Drop(DropReason::TtlExpired);
                    }
                    let at = Ipv4Offsets {
                        l3: 14,
                        header_len: 20,
                    };
                    let hop = match self.route(frame, at) {
                        Ok(h) => h,
                        Err(r) => return Verdict::Drop(r),
                    };
                    return Self::rewrite(frame, at, total, hop);
                }
            }
        }
        self.process_general(rx_port, frame, frame_len)
    }

    /// The general path of [`Forwarder::process`], for any frame.
    #[inline(never)]
    pub fn process_general(&self, rx_port: usize, frame: &mut [u8], frame_len: usize) -> Verdict {
        let at = match self.parse(rx_port, frame, frame_len) {
            Ok(at) => at,
            Err(r) => return Verdict::Drop(r),
        };
        let ip = Ipv4Packet::new_unchecked(&frame[at.l3..]);
        if ip.ttl() <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        let total = ip.total_len();
        let hop = match self.route(frame, at) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(r),
        };
        Self::rewrite(frame, at, total, hop)
    }

    /// Checks the egress MTU, decrements the TTL (RFC 1624 update) and writes the MACs.
    #[inline(always)]
    pub(crate) fn rewrite(frame: &mut [u8], at: Ipv4Offsets, total: u16, hop: &NextHop) -> Verdict {
        if total > hop.mtu {
            return Verdict::Drop(DropReason::MtuExceeded);
        }
        let ip = &mut frame[at.l3..at.l3 + 12];
        let sum = ttl_decrement_checksum(u16::from_be_bytes([ip[10], ip[11]]));
        ip[8] -= 1;
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        frame[..12].copy_from_slice(&hop.macs);
        Verdict::Forward(hop.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The checksum check against the folded sum, on a header whose checksum field is set
    /// right and then on the same header as given.
    fn agrees(mut h: [u8; 20]) {
        let folded_ok = |h: &[u8; 20]| ones_complement_sum(h) == 0xffff;
        assert_eq!(header20_checksum_ok(&h), folded_ok(&h), "{h:02x?}");
        h[10..12].copy_from_slice(&[0, 0]);
        let c = telemetry::wire::checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(header20_checksum_ok(&h), "{h:02x?}");
        assert!(folded_ok(&h));
    }

    #[test]
    fn header_checksum_edge_cases() {
        assert!(!header20_checksum_ok(&[0; 20]));
        assert!(header20_checksum_ok(&[0xff; 20]));
        // A real header (RFC 1071 style example from a capture): 192.168.0.1 -> 192.168.0.199.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert!(header20_checksum_ok(&h));
        let mut bad = h;
        bad[11] ^= 1;
        assert!(!header20_checksum_ok(&bad));
        for b in [0x00u8, 0x01, 0x7f, 0x80, 0xfe, 0xff] {
            agrees([b; 20]);
        }
    }

    proptest! {
        #[test]
        fn header_checksum_check_matches_the_folded_sum(h in any::<[u8; 20]>()) {
            agrees(h);
        }
    }
}

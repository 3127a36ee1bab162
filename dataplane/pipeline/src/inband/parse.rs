//! Stage 1 (parse): each frame's headers found and validated once, and the fields routing
//! and telemetry need read into its [`Meta`]: a straight-line parse with fixed offsets for
//! the common frame, the general parse for the rest (VLAN tags, IPv4 options, fragments,
//! other protocols, and every frame that must be dropped, with its reason).

use telemetry::packet_id::{HOP_OF_TTL, hop_after_first};
use telemetry::wire::EtherType;
use telemetry::wire::ipv4::protocol;
use telemetry::wire::shim::{FIRST_TTL_SHIFT, FLAG_INCOMPLETE, FORMAT, MAX_DIGEST_BYTES, shim_len};

use super::route::Routed;
use super::{FastShim, Meta, NO_PLAN, Scratch, State, be16};
use crate::burst::BurstVerdicts;
use crate::counters::{DropReason, LocalCounters};
use crate::fib::unroutable;
use crate::forward::{Forwarder, Ipv4Offsets, header20_checksum_ok};
use crate::frame::PacketBuf;

/// The words of a packet the hashes read ([`telemetry::hash::burst::BurstHashes`]).
#[derive(Debug, Clone, Copy)]
struct Words {
    /// `src << 32 | dst`.
    w0: u64,
    /// `protocol << 32 | src_port << 16 | dst_port`.
    w1: u64,
    /// `ident << 32 | tcp_seq`.
    w2: u64,
    /// The digest the packet arrived with (right-aligned; 0 without a shim).
    digest: u64,
}

/// What the fast parse knows of the port a burst arrived on.
#[derive(Debug, Clone, Copy)]
struct FastRx {
    /// Whether the fast parse is tried.
    on: bool,
    /// Whether the port is an edge port (hosts behind it: this switch is their packets'
    /// first PINT hop).
    edge: bool,
    /// The MAC frames must be addressed to (None: the port is promiscuous).
    mac: Option<[u8; 6]>,
    /// The shim the port takes (its `l3` 0 when it takes none: an edge port, or no plan).
    shim: FastShim,
}

impl FastRx {
    fn of(s: &State, fwd: &Forwarder, rx_port: usize) -> FastRx {
        let mut shim = s.fast_shim;
        let edge = s.is_edge(rx_port);
        if edge {
            shim.l3 = 0;
        }
        FastRx {
            on: s.try_fast_parse && fwd.has_port(rx_port),
            edge,
            mac: fwd.required_mac(rx_port).map(|m| m.0),
            shim,
        }
    }
}

/// The hop index of a packet received with TTL `ttl`: 1 from a host (an edge port), counted
/// from the first hop's TTL that a shim carries (`flags`), and from the TTL alone for a
/// packet that came from the fabric without one.
#[inline(always)]
fn hop_of(edge: bool, shim_flags: Option<u8>, ttl: u8) -> u8 {
    match shim_flags {
        Some(f) => hop_after_first(f >> FIRST_TTL_SHIFT, ttl),
        None if edge => 1,
        None => HOP_OF_TTL[usize::from(ttl)],
    }
}

/// Where the headers of an accepted frame sit.
#[derive(Debug, Clone, Copy)]
struct Headers {
    /// Offset of the EtherType field before the shim (or IPv4).
    eth_at: usize,
    /// Offset of the shim (0: none).
    shim_at: usize,
    /// Digest bytes of the shim.
    shim_digest: usize,
    /// The IPv4 header.
    ip: Ipv4Offsets,
}

impl State {
    /// Parses a burst: every packet's [`Meta`] and hash inputs (its lane of `hashes`), or
    /// its drop verdict (counted) in `out`; routes each packet whose route has one next hop
    /// (into `s.routed`). Returns the bytes received.
    #[inline(never)]
    pub(super) fn parse_stage<B: PacketBuf>(
        &mut self,
        fwd: &Forwarder,
        rx_port: usize,
        pkts: &mut [B],
        s: &mut Scratch,
        out: &mut BurstVerdicts,
        c: &mut LocalCounters,
    ) -> u64 {
        let Scratch {
            meta: metas,
            hashes,
            lanes,
            routed,
            ..
        } = s;
        *routed = Routed::new();
        let rx = FastRx::of(self, fwd, rx_port);
        let mut rx_bytes = 0u64;
        for (i, ((m, meta), v)) in pkts
            .iter_mut()
            .zip(metas)
            .zip(out.verdicts.iter_mut())
            .enumerate()
            .take(hashes.w0.len())
        {
            meta.counted = false;
            meta.action = super::Action::None;
            let len = m.pkt_len();
            rx_bytes += len as u64;
            let frame = m.data_mut();
            if crate::burst::chained(len, frame) {
                *v = c.dropped_verdict(DropReason::MtuExceeded);
                continue;
            }
            *v = match self.parse(fwd, (rx_port, &rx), frame, len, meta) {
                Ok(w) => {
                    hashes.w0[i] = w.w0;
                    hashes.w1[i] = w.w1;
                    hashes.w2[i] = w.w2;
                    hashes.hop[i] = u64::from(meta.hop);
                    lanes.digest[i] = w.digest;
                    // Routed now unless the route has several next hops: then the key
                    // hash picks one (stage 3).
                    match fwd.fib().lookup(meta.dst) {
                        Some([hop]) => {
                            self.route_to(rx_port, (i, frame, len), meta, hop, routed, c)
                        }
                        Some([]) | None => c.dropped_verdict(unroutable(meta.dst)),
                        Some(_) => {
                            routed.ecmp |= 1 << i;
                            0
                        }
                    }
                }
                Err(r) => c.dropped_verdict(r),
            };
        }
        rx_bytes
    }

    /// Pass 1a for one packet: parse and validate the headers, read the shim and the
    /// fields routing and telemetry need (into `meta`).
    #[inline(always)]
    fn parse(
        &mut self,
        fwd: &Forwarder,
        (rx_port, rx): (usize, &FastRx),
        frame: &mut [u8],
        frame_len: usize,
        meta: &mut Meta,
    ) -> Result<Words, DropReason> {
        if rx.on
            && let Some(w) = self.fast_parse(rx, frame, frame_len, meta)
        {
            return Ok(w);
        }
        let h = self.headers(fwd, rx_port, frame, frame_len)?;
        let Headers {
            eth_at,
            shim_at,
            shim_digest: n,
            ip: Ipv4Offsets { l3, header_len },
        } = h;
        meta.eth_at = eth_at as u8;
        meta.shim_len = 0;
        let mut digest = 0;
        meta.plan = 0;
        meta.shim_plan = NO_PLAN;
        meta.incomplete = false;
        let mut shim_flags = None;
        // The shim, if any: its plan, digest and length.
        if shim_at != 0 {
            let shim = frame
                .get_mut(shim_at..shim_at + 4 + MAX_DIGEST_BYTES)
                .ok_or(DropReason::Truncated)?;
            let tag = be16(shim, 2);
            let raw = u64::from_be_bytes(shim[4..12].try_into().expect("8 bytes"));
            digest = raw >> (64 - 8 * n as u32);
            meta.shim_plan = if self.tags[0] == Some((tag, n)) {
                0
            } else if self.tags[1] == Some((tag, n)) {
                1
            } else {
                // Passed on without encoding: whoever reports the digest must know.
                shim[1] |= FLAG_INCOMPLETE;
                NO_PLAN
            };
            meta.incomplete = shim[1] & FLAG_INCOMPLETE != 0;
            shim_flags = Some(shim[1]);
            meta.shim_len = shim_len(n) as u8;
        }
        let ip: &[u8; 20] = frame
            .get(l3..l3 + 20)
            .and_then(|b| b.try_into().ok())
            .ok_or(DropReason::Truncated)?;
        let ttl = ip[8];
        if ttl <= 1 {
            return Err(DropReason::TtlExpired);
        }
        let proto = ip[9];
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let ident = u16::from_be_bytes([ip[4], ip[5]]);
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
        meta.ip_len = u16::from_be_bytes([ip[2], ip[3]]);
        let (mut sport, mut dport, mut seq) = (0u16, 0u16, 0u32);
        meta.udp_payload_at = 0;
        if (proto == protocol::TCP || proto == protocol::UDP) && !fragment {
            // Within the IP packet's total length: bytes after it are the frame's padding,
            // not ports or a sequence number.
            let l4 = frame
                .get(l3 + header_len..l3 + usize::from(meta.ip_len))
                .unwrap_or(&[]);
            if let Some(ports) = l4.first_chunk::<4>() {
                sport = u16::from_be_bytes([ports[0], ports[1]]);
                dport = u16::from_be_bytes([ports[2], ports[3]]);
                if let Some(t) = l4.first_chunk::<8>() {
                    if proto == protocol::UDP {
                        meta.udp_payload_at = (l3 + header_len + 8) as u16;
                    } else {
                        seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
                    }
                }
            }
        }
        meta.dst = dst;
        meta.ttl = ttl;
        meta.hop = hop_of(rx.edge, shim_flags, ttl);
        meta.l3 = l3 as u8;
        meta.hl = header_len as u8;
        Ok(Words {
            w0: (u64::from(src) << 32) | u64::from(dst),
            w1: (u64::from(proto) << 32) | (u64::from(sport) << 16) | u64::from(dport),
            w2: (u64::from(ident) << 32) | u64::from(seq),
            digest,
        })
    }

    /// [`State::parse`] for the common frame, in straight-line code with fixed offsets:
    /// untagged Ethernet, no shim (from an edge port) or a complete shim of the current plan
    /// (from a fabric port), IPv4 without options or fragmentation carrying UDP or TCP, TTL
    /// above 1. Fills `meta` exactly as the general parse would and returns the words;
    /// returns None, changing nothing, for every other frame.
    #[inline(always)]
    fn fast_parse(
        &self,
        rx: &FastRx,
        frame: &mut [u8],
        frame_len: usize,
        meta: &mut Meta,
    ) -> Option<Words> {
        let head = frame.first_chunk::<14>()?;
        if rx.mac.is_some_and(|mac| head[..6] != mac) {
            return None;
        }
        let ty = u16::from_be_bytes([head[12], head[13]]);
        let shim = rx.shim;
        let (l3, shimmed) = if ty == EtherType::IPV4 {
            (14, false)
        } else if ty == self.shim_ethertype && shim.l3 != 0 {
            (shim.l3, true)
        } else {
            return None;
        };
        // The IPv4 header and the first 8 bytes of UDP or TCP.
        let b = frame.get(..l3 + 28)?;
        let ip: &[u8; 28] = b[l3..].try_into().expect("28 bytes");
        let total = u16::from_be_bytes([ip[2], ip[3]]);
        let proto = ip[9];
        // Version 4 with no options, and neither a fragment nor one to come (MF and the
        // offset zero), in one masked compare of the header's first eight bytes.
        let first = u64::from_le_bytes(ip[..8].try_into().expect("8 bytes"));
        const FIRST_MASK: u64 = 0xff | 0x3f << 48 | 0xff << 56;
        // The frame holds the header and 8 more bytes, so `frame_len - l3 - 28` is no
        // underflow; a total below 28 (a transport header cut short: the bytes read as its
        // ports would be padding) wraps to a value no frame reaches.
        if first & FIRST_MASK != 0x45
            || ip[8] <= 1
            || (proto != protocol::UDP && proto != protocol::TCP)
            || usize::from(total).wrapping_sub(28) > frame_len - l3 - 28
            || !header20_checksum_ok(ip[..20].try_into().expect("20 bytes"))
        {
            return None;
        }
        let mut digest = 0;
        let mut shim_flags = None;
        if shimmed {
            // Format, flags (not incomplete), tag and the next EtherType, as the current plan
            // writes them; anything else takes the general parse.
            let fixed = u32::from_le_bytes(b[14..18].try_into().expect("4 bytes"));
            if fixed & shim.fixed_mask != shim.fixed
                || b[l3 - 2..l3] != EtherType::IPV4.to_be_bytes()
            {
                return None;
            }
            let raw = u64::from_be_bytes(b[18..26].try_into().expect("8 bytes"));
            digest = raw >> (64 - 8 * shim.digest_bytes as u32);
            shim_flags = Some(b[15]);
        }
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let ports = u32::from_be_bytes([ip[20], ip[21], ip[22], ip[23]]);
        let seq = if proto == protocol::TCP {
            u32::from_be_bytes([ip[24], ip[25], ip[26], ip[27]])
        } else {
            0
        };
        meta.eth_at = 12;
        meta.shim_len = if shimmed { (l3 - 14) as u8 } else { 0 };
        meta.plan = 0;
        meta.shim_plan = if shimmed { 0 } else { NO_PLAN };
        meta.incomplete = false;
        meta.ip_len = total;
        meta.udp_payload_at = if proto == protocol::UDP {
            (l3 + 28) as u16
        } else {
            0
        };
        meta.dst = dst;
        meta.ttl = ip[8];
        meta.hop = hop_of(rx.edge, shim_flags, ip[8]);
        meta.l3 = l3 as u8;
        meta.hl = 20;
        Some(Words {
            w0: (u64::from(src) << 32) | u64::from(dst),
            w1: (u64::from(proto) << 32) | u64::from(ports),
            w2: (u64::from(u16::from_be_bytes([ip[4], ip[5]])) << 32) | u64::from(seq),
            digest,
        })
    }

    /// The general parse: Ethernet with up to two VLAN tags, the shim, IPv4 with options;
    /// every malformed frame gets its drop reason.
    #[inline(never)]
    fn headers(
        &self,
        fwd: &Forwarder,
        rx_port: usize,
        frame: &[u8],
        frame_len: usize,
    ) -> Result<Headers, DropReason> {
        let eth_at = fwd.parse_l2(rx_port, frame)?;
        let ty = be16(frame, eth_at);
        let (shim_at, n, l3) = if ty == self.shim_ethertype {
            if self.is_edge(rx_port) {
                return Err(DropReason::ShimFromHost);
            }
            let at = eth_at + 2;
            let &format = frame.get(at).ok_or(DropReason::Truncated)?;
            let n = usize::from(format & 0x0f);
            if format >> 4 != FORMAT || n == 0 || n > MAX_DIGEST_BYTES {
                return Err(DropReason::BadShim);
            }
            let len = shim_len(n);
            if frame.len() < at + len {
                return Err(DropReason::Truncated);
            }
            if be16(frame, at + len - 2) != EtherType::IPV4 {
                return Err(DropReason::BadShim);
            }
            (at, n, at + len)
        } else if ty == EtherType::IPV4 {
            (0, 0, eth_at + 2)
        } else {
            return Err(Forwarder::non_ipv4(ty));
        };
        let header_len = Forwarder::parse_ipv4(frame, l3, frame_len)?;
        Ok(Headers {
            eth_at,
            shim_at,
            shim_digest: n,
            ip: Ipv4Offsets { l3, header_len },
        })
    }
}

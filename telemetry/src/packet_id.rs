//! The packet ID and the hop index: what every hop and the sink compute identically from a
//! packet's headers (`docs/architecture.md`, "Packet ID and hop index").

use crate::hash::{flow_words, key_hash, packet_id};

/// The header fields the packet ID covers: none of them is modified by any switch on the
/// path, so every hop and the sink compute the same ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PacketFields {
    /// IPv4 source (host order).
    pub src: u32,
    /// IPv4 destination (host order).
    pub dst: u32,
    /// IP protocol.
    pub protocol: u8,
    /// Transport source port (0 for fragments and protocols without ports).
    pub src_port: u16,
    /// Transport destination port (as above).
    pub dst_port: u16,
    /// IPv4 identification.
    pub ident: u16,
    /// TCP sequence number (0 for other protocols and for fragments).
    pub tcp_seq: u32,
}

impl PacketFields {
    /// The 32-bit packet ID: [`packet_id`] of the 5-tuple's [`key_hash`] and the word
    /// `ident << 32 | tcp_seq` (see [`crate::hash`]).
    #[inline(always)]
    pub fn packet_id(&self) -> u32 {
        packet_id(self.key_hash(), self.id_word())
    }

    /// The 5-tuple's key hash `F`.
    #[inline(always)]
    pub fn key_hash(&self) -> u64 {
        let [w0, w1] = flow_words(
            self.src,
            self.dst,
            self.protocol,
            self.src_port,
            self.dst_port,
        );
        key_hash(w0, w1)
    }

    /// The word `ident << 32 | tcp_seq`.
    #[inline(always)]
    pub fn id_word(&self) -> u64 {
        (u64::from(self.ident) << 32) | u64::from(self.tcp_seq)
    }
}

/// The longest path a hop index counts: [`hop_index`] and [`hop_after_first`] are at most
/// this, so a digest's path length is too.
pub const MAX_PATH_LENGTH: u8 = 128;

/// The hop index of a switch that receives a packet with TTL `ttl`: `I(ttl) - ttl + 1`,
/// where `I(t)` is the smallest of the common initial TTLs {64, 128, 255} that is >= t. The
/// first switch after a host that sends with TTL 64 is hop 1; the last hop's index is the
/// path length. Returns None for TTL 0 (such a packet is never forwarded).
#[inline(always)]
pub const fn hop_index(ttl: u8) -> Option<u8> {
    let initial: u16 = match ttl {
        0 => return None,
        1..=64 => 64,
        65..=128 => 128,
        _ => 255,
    };
    Some((initial - ttl as u16 + 1) as u8)
}

/// The hop index of a switch that receives a packet with TTL `ttl` when the packet's first
/// PINT hop received it with a TTL of `first_ttl` modulo 128 (which the shim carries:
/// `docs/protocol.md`): 1 there, one more at each hop after. Unlike [`hop_index`] it does
/// not assume the sender's TTL was 64, 128 or 255, nor that no router came before the
/// first PINT hop (a replayed capture's TTLs are whatever they were where it was taken);
/// for those TTLs the two agree. Exact for paths of up to 128 hops.
#[inline(always)]
pub const fn hop_after_first(first_ttl: u8, ttl: u8) -> u8 {
    (first_ttl.wrapping_sub(ttl) & 0x7f) + 1
}

/// [`hop_index`] of every TTL, 0 for TTL 0: one load per packet instead of the comparisons.
pub const HOP_OF_TTL: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut ttl = 1;
    while ttl < 256 {
        t[ttl] = match hop_index(ttl as u8) {
            Some(h) => h,
            None => 0,
        };
        ttl += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_table_is_hop_index() {
        for ttl in 0..=255u8 {
            assert_eq!(HOP_OF_TTL[usize::from(ttl)], hop_index(ttl).unwrap_or(0));
        }
        assert_eq!(HOP_OF_TTL[63], 2);
    }

    /// Counted from the first PINT hop's TTL, whatever it was; the same as [`hop_index`]
    /// for a path that starts at a common initial TTL.
    #[test]
    fn hop_after_the_first_from_its_ttl() {
        for first in 2..=255u8 {
            for hop in 1..=first.min(128) {
                let ttl = first - (hop - 1);
                assert_eq!(hop_after_first(first & 0x7f, ttl), hop, "{first} {ttl}");
            }
        }
        for first in [64u8, 128, 255] {
            for ttl in first.saturating_sub(60)..=first {
                assert_eq!(Some(hop_after_first(first & 0x7f, ttl)), hop_index(ttl));
            }
        }
        // A capture taken two routers from its sender: TTL 62 at the first PINT hop.
        assert_eq!(hop_after_first(62, 62), 1);
        assert_eq!(hop_after_first(62, 58), 5);
        assert_eq!(hop_index(58), Some(7));
    }

    /// No TTL gives a hop index past the longest path the protocol carries.
    #[test]
    fn every_hop_index_is_within_the_longest_path() {
        for ttl in 0..=255u8 {
            assert!(hop_index(ttl).unwrap_or(1) <= MAX_PATH_LENGTH);
            for first in 0..=255u8 {
                assert!((1..=MAX_PATH_LENGTH).contains(&hop_after_first(first, ttl)));
            }
        }
        assert_eq!(hop_after_first(0, 1), MAX_PATH_LENGTH);
    }

    #[test]
    fn hop_index_from_ttl() {
        assert_eq!(hop_index(64), Some(1));
        assert_eq!(hop_index(63), Some(2));
        assert_eq!(hop_index(1), Some(64));
        assert_eq!(hop_index(128), Some(1));
        assert_eq!(hop_index(65), Some(64));
        assert_eq!(hop_index(255), Some(1));
        assert_eq!(hop_index(200), Some(56));
        assert_eq!(hop_index(0), None);
    }

    #[test]
    fn packet_id_depends_on_every_field() {
        let base = PacketFields {
            src: 1,
            dst: 2,
            protocol: 6,
            src_port: 3,
            dst_port: 4,
            ident: 5,
            tcp_seq: 6,
        };
        let id = base.packet_id();
        let variants = [
            PacketFields { src: 9, ..base },
            PacketFields { dst: 9, ..base },
            PacketFields {
                protocol: 17,
                ..base
            },
            PacketFields {
                src_port: 9,
                ..base
            },
            PacketFields {
                dst_port: 9,
                ..base
            },
            PacketFields { ident: 9, ..base },
            PacketFields { tcp_seq: 9, ..base },
        ];
        for v in variants {
            assert_ne!(v.packet_id(), id, "{v:?}");
        }
        // A literal vector: the packet ID is part of the switch-to-sink contract.
        assert_eq!(id, 0x4483_f7ea);
    }
}

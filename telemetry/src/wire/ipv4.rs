//! IPv4 headers (RFC 791).
//!
//! Layout (offsets in bytes): `0` version (high nibble) and IHL in 32-bit words (low nibble),
//! `1` DSCP/ECN, `[2..4)` total length, `[4..6)` identification, `[6..8)` flags (3 bits:
//! reserved, DF, MF) and fragment offset (13 bits, in 8-byte units), `8` TTL, `9` protocol,
//! `[10..12)` header checksum, `[12..16)` source, `[16..20)` destination, then
//! `IHL * 4 - 20` bytes of options.

pub use core::net::Ipv4Addr;

use super::checksum;
use super::{Result, WireError};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// IP protocol numbers the switch looks at.
pub mod protocol {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
}

/// A read/write view of an IPv4 header at the start of a buffer.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps a buffer without checks; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after checking that it holds a well-formed header: at least 20 bytes,
    /// version 4, IHL >= 5, the options inside the buffer, and a total length that covers
    /// the header and does not exceed the buffer. The checksum is checked separately
    /// ([`Ipv4Packet::verify_checksum`]).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv4Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks of [`Ipv4Packet::new_checked`] on an existing view.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Self::MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 {
            return Err(WireError::Malformed);
        }
        let hlen = self.header_len();
        if hlen < Self::MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if hlen > len {
            return Err(WireError::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hlen {
            return Err(WireError::Malformed);
        }
        if total > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (4 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP and ECN byte.
    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Total length of header and payload in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TOTAL_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Identification field.
    #[inline]
    pub fn ident(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::IDENT];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG.start] & 0x40 != 0
    }

    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS_FRAG.start] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::FLAGS_FRAG];
        (u16::from_be_bytes([b[0], b[1]]) & 0x1fff) * 8
    }

    /// Whether this packet is a fragment (first, middle or last) of a larger datagram.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        let b = &self.buffer.as_ref()[field::FLAGS_FRAG];
        u16::from_be_bytes([b[0], b[1]]) & 0x3fff != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum as carried.
    #[inline]
    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Source address as a host-order integer.
    #[inline]
    pub fn src_u32(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::SRC];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Destination address as a host-order integer.
    #[inline]
    pub fn dst_u32(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::DST];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src_u32())
    }

    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.dst_u32())
    }

    /// Whether the header checksum (over `header_len` bytes, options included) is valid.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        let hlen = self.header_len();
        checksum::ones_complement_sum(&self.buffer.as_ref()[..hlen]) == 0xffff
    }

    /// The header bytes, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The payload bytes (from the end of the header to the total length).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the TTL without touching the checksum.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hlen = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hlen]);
        self.set_checksum(c);
    }

    /// Decrements the TTL by one and updates the checksum incrementally (RFC 1624), as a
    /// router does on forwarding. The caller checks that the TTL is above 1.
    #[inline]
    pub fn decrement_ttl(&mut self) {
        let ttl = self.ttl();
        let proto = self.protocol();
        let old = u16::from_be_bytes([ttl, proto]);
        let new = u16::from_be_bytes([ttl.wrapping_sub(1), proto]);
        let c = checksum::update_word(self.checksum(), old, new);
        self.set_ttl(ttl.wrapping_sub(1));
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ihl: u8, total: u16) -> Vec<u8> {
        let mut h = vec![0u8; usize::from(total).max(20)];
        h[0] = 0x40 | ihl;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[8] = 64;
        h[9] = protocol::UDP;
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h[16..20].copy_from_slice(&[10, 0, 0, 2]);
        if usize::from(ihl) * 4 <= h.len() {
            Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
        }
        h
    }

    #[test]
    fn checked_rejects_bad_headers() {
        let good = header(5, 28);
        let p = Ipv4Packet::new_checked(&good[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.payload().len(), 8);
        assert_eq!(
            Ipv4Packet::new_checked(&good[..19]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&good[..27]).unwrap_err(),
            WireError::Truncated
        );
        let mut v6 = good.clone();
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            WireError::Malformed
        );
        let short_ihl = header(4, 28);
        assert_eq!(
            Ipv4Packet::new_checked(&short_ihl[..]).unwrap_err(),
            WireError::Malformed
        );
        let opts_past_end = header(15, 28);
        assert_eq!(
            Ipv4Packet::new_checked(&opts_past_end[..]).unwrap_err(),
            WireError::Truncated
        );
        let total_below_header = {
            let mut h = header(5, 28);
            h[2..4].copy_from_slice(&10u16.to_be_bytes());
            h
        };
        assert_eq!(
            Ipv4Packet::new_checked(&total_below_header[..]).unwrap_err(),
            WireError::Malformed
        );
    }

    #[test]
    fn decrement_keeps_checksum_valid() {
        let mut h = header(6, 40);
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        p.decrement_ttl();
        assert_eq!(p.ttl(), 63);
        assert!(p.verify_checksum());
    }

    #[test]
    fn fragment_fields() {
        let mut h = header(5, 28);
        h[6] = 0x20 | 0x01; // MF, offset 256 units
        h[7] = 0x00;
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert!(p.more_frags());
        assert!(!p.dont_frag());
        assert_eq!(p.frag_offset(), 2048);
        assert!(p.is_fragment());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// RFC 1624's incremental update after a TTL decrement equals a full
            /// recomputation, for any header (with or without options) and any TTL above 0.
            #[test]
            fn incremental_checksum_equals_recomputation(
                words in proptest::collection::vec(any::<u8>(), 60),
                ihl in 5u8..=15,
                ttl in 1u8..=255,
            ) {
                let mut h = words;
                h[0] = 0x40 | ihl;
                h[8] = ttl;
                let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
                p.fill_checksum();
                p.decrement_ttl();
                let incremental = p.checksum();
                p.fill_checksum();
                prop_assert_eq!(incremental, p.checksum());
                prop_assert!(p.verify_checksum());
            }

            /// The same holds for any 16-bit word change, not only the TTL's.
            #[test]
            fn update_word_equals_recomputation(mut data in proptest::collection::vec(any::<u8>(), 2..64), at in 0usize..32, new in any::<u16>()) {
                if data.len() % 2 == 1 { data.pop(); }
                let i = (at * 2) % data.len();
                let old = u16::from_be_bytes([data[i], data[i + 1]]);
                let before = checksum::checksum(&data);
                data[i..i + 2].copy_from_slice(&new.to_be_bytes());
                let after = checksum::checksum(&data);
                let inc = checksum::update_word(before, old, new);
                // 0x0000 and 0xffff are the same one's-complement value (RFC 1624 section 3).
                prop_assert!(inc == after || (inc == 0xffff && after == 0) || (inc == 0 && after == 0xffff), "{} vs {}", inc, after);
            }
        }
    }
}

//! The PINT shim header: where a packet's digest travels between the first and the last PINT
//! hop (`docs/protocol.md`, "The shim").
//!
//! The shim sits between the Ethernet header (after any VLAN tags) and IPv4; the EtherType
//! before it is the shim's (default 0x88b5, IEEE local experimental). Layout, `N` the digest
//! length in bytes (1 to 8, `ceil(global_bits / 8)` of the plan):
//!
//! ```text
//! offset  size  field
//! 0       1     format: high nibble 1 (this layout), low nibble N
//! 1       1     flags: bit 0 [`FLAG_INCOMPLETE`]; bits 1-7 the TTL the packet had at its
//!               first PINT hop, modulo 128 (each hop's index is counted from it:
//!               [`crate::packet_id::hop_after_first`])
//! 2       2     plan tag: the low 16 bits of the plan version, big-endian
//! 4       N     digest, big-endian
//! 4+N     2     EtherType of what follows (IPv4)
//! ```
//!
//! The digest is the plan's `g` (`global_bits`) bits right-aligned in its `N = ceil(g / 8)`
//! big-endian bytes (the first `8N - g` bits zero). Its bits are numbered from its most
//! significant bit: a query at bit offset `o` with `b` bits occupies bits `o .. o + b` of
//! that `g`-bit string.

use super::{Result, WireError};

/// Largest digest, in bytes.
pub const MAX_DIGEST_BYTES: usize = 8;
/// The format nibble of this layout.
pub const FORMAT: u8 = 1;
/// Flag: a hop forwarded the packet without encoding its values (it did not hold the
/// packet's plan), so the digest is incomplete and must not be reported.
pub const FLAG_INCOMPLETE: u8 = 0x01;
/// Where the first PINT hop's TTL (modulo 128) sits in the flags byte.
pub const FIRST_TTL_SHIFT: u32 = 1;

/// The flags byte of a shim inserted by a hop that received the packet with TTL `ttl`.
#[inline(always)]
pub const fn first_flags(ttl: u8) -> u8 {
    ttl << FIRST_TTL_SHIFT
}

/// Bytes of the shim besides the digest.
pub const FIXED_LEN: usize = 6;
/// The default EtherType of the shim (IEEE 802 local experimental EtherType 1).
pub const DEFAULT_ETHERTYPE: u16 = 0x88b5;

/// The shim's length for a digest of `digest_len` bytes.
pub const fn shim_len(digest_len: usize) -> usize {
    FIXED_LEN + digest_len
}

/// A view of a shim header.
#[derive(Debug, Clone)]
pub struct ShimHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ShimHeader<T> {
    /// Wraps a buffer that starts with a shim: the format must be this layout's, the digest
    /// 1 to 8 bytes, and the buffer long enough for all of it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        let Some(&format) = b.first() else {
            return Err(WireError::Truncated);
        };
        let n = usize::from(format & 0x0f);
        if format >> 4 != FORMAT || n == 0 || n > MAX_DIGEST_BYTES {
            return Err(WireError::Malformed);
        }
        if b.len() < shim_len(n) {
            return Err(WireError::Truncated);
        }
        Ok(ShimHeader { buffer })
    }

    /// Wraps a buffer without checks (the caller has checked, or is about to write the
    /// format byte first).
    pub fn new_unchecked(buffer: T) -> Self {
        ShimHeader { buffer }
    }

    /// Digest length in bytes.
    #[inline(always)]
    pub fn digest_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x0f)
    }

    /// Length of the shim in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        shim_len(self.digest_len())
    }

    /// Always false: a shim holds at least its fixed fields.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Whether a hop passed the packet on without encoding (the digest is incomplete).
    pub fn incomplete(&self) -> bool {
        self.flags() & FLAG_INCOMPLETE != 0
    }

    /// The TTL the packet had at its first PINT hop, modulo 128.
    #[inline(always)]
    pub fn first_ttl(&self) -> u8 {
        self.flags() >> FIRST_TTL_SHIFT
    }

    /// The plan tag.
    #[inline(always)]
    pub fn plan_tag(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }

    /// The digest as an integer: its bytes big-endian, right-aligned in a u64.
    #[inline(always)]
    pub fn digest(&self) -> u64 {
        let mut v = 0u64;
        for &b in &self.buffer.as_ref()[4..4 + self.digest_len()] {
            v = (v << 8) | u64::from(b);
        }
        v
    }

    /// The EtherType of what follows the shim (the original packet's, e.g. IPv4).
    #[inline(always)]
    pub fn next_ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        let at = 4 + self.digest_len();
        u16::from_be_bytes([b[at], b[at + 1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ShimHeader<T> {
    /// Writes the format byte for a `digest_len`-byte digest (1 to 8) and clears the flags.
    #[inline(always)]
    pub fn set_format(&mut self, digest_len: usize) {
        let b = self.buffer.as_mut();
        b[0] = (FORMAT << 4) | (digest_len as u8 & 0x0f);
        b[1] = 0;
    }

    /// Writes the flags: whether the digest is incomplete, and the first PINT hop's TTL
    /// (its low 7 bits).
    pub fn set_flags(&mut self, incomplete: bool, first_ttl: u8) {
        self.buffer.as_mut()[1] = first_flags(first_ttl) | u8::from(incomplete);
    }

    /// Writes the plan tag.
    #[inline(always)]
    pub fn set_plan_tag(&mut self, tag: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&tag.to_be_bytes());
    }

    /// Writes the digest (the low `8 * digest_len` bits of `v`, big-endian).
    #[inline(always)]
    pub fn set_digest(&mut self, v: u64) {
        let n = self.digest_len();
        let bytes = v.to_be_bytes();
        self.buffer.as_mut()[4..4 + n].copy_from_slice(&bytes[8 - n..]);
    }

    /// Writes the EtherType of what follows.
    #[inline(always)]
    pub fn set_next_ethertype(&mut self, ty: u16) {
        let at = 4 + self.digest_len();
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&ty.to_be_bytes());
    }
}

/// A parsed shim header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShimRepr {
    /// Digest length in bytes (1 to 8).
    pub digest_len: u8,
    /// A hop passed the packet on without encoding.
    pub incomplete: bool,
    /// The TTL the packet had at its first PINT hop, modulo 128.
    pub first_ttl: u8,
    /// The plan tag.
    pub plan_tag: u16,
    /// The digest, right-aligned.
    pub digest: u64,
    /// EtherType of what follows the shim.
    pub next_ethertype: u16,
}

impl ShimRepr {
    /// Parses a checked shim.
    pub fn parse<T: AsRef<[u8]>>(shim: &ShimHeader<T>) -> ShimRepr {
        ShimRepr {
            digest_len: shim.digest_len() as u8,
            incomplete: shim.incomplete(),
            first_ttl: shim.first_ttl(),
            plan_tag: shim.plan_tag(),
            digest: shim.digest(),
            next_ethertype: shim.next_ethertype(),
        }
    }

    /// Bytes [`ShimRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        shim_len(usize::from(self.digest_len))
    }

    /// Writes the shim at the start of `buf` (at least [`ShimRepr::buffer_len`] bytes).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, shim: &mut ShimHeader<T>) {
        shim.set_format(usize::from(self.digest_len));
        shim.set_flags(self.incomplete, self.first_ttl);
        shim.set_plan_tag(self.plan_tag);
        shim.set_digest(self.digest);
        shim.set_next_ethertype(self.next_ethertype);
    }
}

/// Digest bytes for a global budget of `bits` bits (1 to 64).
pub fn digest_bytes(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// Reads `width` bits at `offset` (from the most significant bit) of a `total_bits`-bit
/// digest held right-aligned in `digest`.
#[inline(always)]
pub fn get_bits(digest: u64, total_bits: u32, offset: u32, width: u32) -> u64 {
    debug_assert!(offset + width <= total_bits && width <= 64 && total_bits <= 64);
    let shift = total_bits - offset - width;
    (digest >> shift) & mask(width)
}

/// Writes `value` (its low `width` bits) at `offset` of a `total_bits`-bit digest.
#[inline(always)]
pub fn set_bits(digest: u64, total_bits: u32, offset: u32, width: u32, value: u64) -> u64 {
    debug_assert!(offset + width <= total_bits && width <= 64 && total_bits <= 64);
    let shift = total_bits - offset - width;
    let m = mask(width) << shift;
    (digest & !m) | ((value << shift) & m)
}

/// The low `width` bits set.
#[inline(always)]
pub fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let mut buf = [0u8; 10];
        let repr = ShimRepr {
            digest_len: 4,
            incomplete: false,
            first_ttl: 62,
            plan_tag: 0x1234,
            digest: 0xdead_beef,
            next_ethertype: 0x0800,
        };
        repr.emit(&mut ShimHeader::new_unchecked(&mut buf[..]));
        assert_eq!(
            buf,
            [
                0x14,
                62 << 1,
                0x12,
                0x34,
                0xde,
                0xad,
                0xbe,
                0xef,
                0x08,
                0x00
            ]
        );
        let v = ShimHeader::new_checked(&buf[..]).unwrap();
        assert_eq!(ShimRepr::parse(&v), repr);
        let mut incomplete = buf;
        incomplete[1] |= FLAG_INCOMPLETE;
        let v2 = ShimHeader::new_checked(&incomplete[..]).unwrap();
        assert!(v2.incomplete());
        assert_eq!(v2.first_ttl(), 62);
        assert_eq!((v.len(), repr.buffer_len()), (10, 10));
        assert_eq!(
            ShimHeader::new_checked(&buf[..9]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            ShimHeader::new_checked(&[][..]).unwrap_err(),
            WireError::Truncated
        );
        for bad in [0x10u8, 0x19, 0x24, 0x04] {
            let mut b = buf;
            b[0] = bad;
            assert_eq!(
                ShimHeader::new_checked(&b[..]).unwrap_err(),
                WireError::Malformed,
                "{bad:#x}"
            );
        }
        assert_eq!(digest_bytes(16), 2);
        assert_eq!(digest_bytes(17), 3);
        assert_eq!(shim_len(2), 8);
    }

    #[test]
    fn bit_fields_from_the_top() {
        // A 16-bit digest: path (8 bits) at offset 0, latency (8 bits) at offset 8.
        let d = set_bits(0, 16, 0, 8, 0xab);
        let d = set_bits(d, 16, 8, 8, 0xcd);
        assert_eq!(d, 0xabcd);
        assert_eq!(get_bits(d, 16, 0, 8), 0xab);
        assert_eq!(get_bits(d, 16, 8, 8), 0xcd);
        assert_eq!(get_bits(d, 16, 4, 4), 0xb);
        let d = set_bits(d, 16, 4, 4, 0x1f);
        assert_eq!(
            d, 0xafcd,
            "a value wider than its field is cut to the field"
        );
        assert_eq!(set_bits(0, 64, 0, 64, u64::MAX), u64::MAX);
    }
}

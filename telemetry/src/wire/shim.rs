//! The PINT shim header: where a packet's digest travels between the first and the last PINT
//! hop (DESIGN.md decision 2).
//!
//! The shim sits between the Ethernet header (after any VLAN tags) and IPv4. The EtherType
//! before it is the shim's (default 0x88b5, IEEE local experimental); the shim is
//! `[digest: N bytes][next EtherType: 2 bytes]` with `N = ceil(global_bits / 8)` (1 to 8).
//! The digest's bits are numbered from the most significant bit of its first byte: a query
//! at bit offset `o` with `b` bits occupies bits `o .. o + b` of that big-endian bit string.

use super::{Result, WireError};

/// Largest digest, in bytes.
pub const MAX_DIGEST_BYTES: usize = 8;

/// A view of a shim header whose digest is `digest_len` bytes.
#[derive(Debug, Clone)]
pub struct ShimHeader<T: AsRef<[u8]>> {
    buffer: T,
    digest_len: usize,
}

impl<T: AsRef<[u8]>> ShimHeader<T> {
    /// Wraps a buffer that holds a shim with a `digest_len`-byte digest (1 to 8).
    pub fn new_checked(buffer: T, digest_len: usize) -> Result<Self> {
        if digest_len == 0 || digest_len > MAX_DIGEST_BYTES {
            return Err(WireError::Malformed);
        }
        if buffer.as_ref().len() < digest_len + 2 {
            return Err(WireError::Truncated);
        }
        Ok(ShimHeader { buffer, digest_len })
    }

    /// Length of the shim in bytes.
    pub fn len(&self) -> usize {
        self.digest_len + 2
    }

    /// Always false: a shim holds at least one digest byte and the EtherType.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The digest as an integer: its bytes big-endian, right-aligned in a u64.
    #[inline(always)]
    pub fn digest(&self) -> u64 {
        let mut v = 0u64;
        for &b in &self.buffer.as_ref()[..self.digest_len] {
            v = (v << 8) | u64::from(b);
        }
        v
    }

    /// The EtherType of what follows the shim (the original packet's, e.g. IPv4).
    #[inline(always)]
    pub fn next_ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[self.digest_len], b[self.digest_len + 1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ShimHeader<T> {
    /// Writes the digest (the low `8 * digest_len` bits of `v`, big-endian).
    #[inline(always)]
    pub fn set_digest(&mut self, v: u64) {
        let n = self.digest_len;
        let bytes = v.to_be_bytes();
        self.buffer.as_mut()[..n].copy_from_slice(&bytes[8 - n..]);
    }

    /// Writes the EtherType of what follows.
    #[inline(always)]
    pub fn set_next_ethertype(&mut self, ty: u16) {
        let n = self.digest_len;
        self.buffer.as_mut()[n..n + 2].copy_from_slice(&ty.to_be_bytes());
    }
}

/// A parsed shim header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShimRepr {
    /// Digest length in bytes (1 to 8).
    pub digest_len: u8,
    /// The digest, right-aligned.
    pub digest: u64,
    /// EtherType of what follows the shim.
    pub next_ethertype: u16,
}

impl ShimRepr {
    /// Parses a shim with a `digest_len`-byte digest.
    pub fn parse<T: AsRef<[u8]>>(shim: &ShimHeader<T>) -> ShimRepr {
        ShimRepr {
            digest_len: shim.digest_len as u8,
            digest: shim.digest(),
            next_ethertype: shim.next_ethertype(),
        }
    }

    /// Bytes [`ShimRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        usize::from(self.digest_len) + 2
    }

    /// Writes the shim into a view of the same digest length.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, shim: &mut ShimHeader<T>) {
        debug_assert_eq!(shim.digest_len, usize::from(self.digest_len));
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
        let mut buf = [0u8; 6];
        let repr = ShimRepr {
            digest_len: 4,
            digest: 0xdead_beef,
            next_ethertype: 0x0800,
        };
        let mut v = ShimHeader::new_checked(&mut buf[..], 4).unwrap();
        repr.emit(&mut v);
        assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef, 0x08, 0x00]);
        let v = ShimHeader::new_checked(&buf[..], 4).unwrap();
        assert_eq!(ShimRepr::parse(&v), repr);
        assert_eq!(v.len(), 6);
        assert_eq!(
            ShimHeader::new_checked(&buf[..5], 4).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            ShimHeader::new_checked(&buf[..], 0).unwrap_err(),
            WireError::Malformed
        );
        assert_eq!(
            ShimHeader::new_checked(&buf[..], 9).unwrap_err(),
            WireError::Malformed
        );
        assert_eq!(digest_bytes(16), 2);
        assert_eq!(digest_bytes(17), 3);
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

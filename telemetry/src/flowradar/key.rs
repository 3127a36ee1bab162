//! The flow key FlowRadar counts by: the IPv4 5-tuple, 13 bytes.
//!
//! Byte layout (the order of the wire form and of the XOR value): source address (4,
//! big-endian), destination address (4), source port (2), destination port (2), protocol (1).
//! As an integer (for FlowXor) the 13 bytes are read big-endian into the low 104 bits of a
//! u128.

use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address (host order).
    pub src: u32,
    /// Destination address (host order).
    pub dst: u32,
    /// Source port (0 when the protocol has none).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol.
    pub protocol: u8,
}

impl FlowKey {
    /// Bytes of the key on the wire.
    pub const BYTES: usize = 13;

    /// The key's 13 bytes.
    pub fn to_bytes(&self) -> [u8; 13] {
        let mut b = [0u8; 13];
        b[0..4].copy_from_slice(&self.src.to_be_bytes());
        b[4..8].copy_from_slice(&self.dst.to_be_bytes());
        b[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        b[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        b[12] = self.protocol;
        b
    }

    /// The key from its 13 bytes.
    pub fn from_bytes(b: &[u8; 13]) -> FlowKey {
        FlowKey {
            src: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            dst: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            src_port: u16::from_be_bytes([b[8], b[9]]),
            dst_port: u16::from_be_bytes([b[10], b[11]]),
            protocol: b[12],
        }
    }

    /// The key as a 104-bit integer (for XOR).
    #[inline(always)]
    pub fn to_u128(&self) -> u128 {
        (u128::from(self.src) << 72)
            | (u128::from(self.dst) << 40)
            | (u128::from(self.src_port) << 24)
            | (u128::from(self.dst_port) << 8)
            | u128::from(self.protocol)
    }

    /// The key from a 104-bit integer; None if higher bits are set.
    #[inline(always)]
    pub fn from_u128(v: u128) -> Option<FlowKey> {
        if v >> 104 != 0 {
            return None;
        }
        Some(FlowKey {
            src: (v >> 72) as u32,
            dst: (v >> 40) as u32,
            src_port: (v >> 24) as u16,
            dst_port: (v >> 8) as u16,
            protocol: v as u8,
        })
    }

    /// The two 64-bit words the hash family reads: `src << 32 | dst` and
    /// `protocol << 32 | src_port << 16 | dst_port`.
    #[inline(always)]
    pub fn words(&self) -> [u64; 2] {
        [
            (u64::from(self.src) << 32) | u64::from(self.dst),
            (u64::from(self.protocol) << 32)
                | (u64::from(self.src_port) << 16)
                | u64::from(self.dst_port),
        ]
    }
}

/// Hashed as its two words (two hasher rounds rather than one per field: collectors look
/// a flow up per digest).
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [w0, w1] = self.words();
        state.write_u64(w0);
        state.write_u64(w1);
    }
}

impl FlowKey {
    /// The key of two words as [`FlowKey::words`] gives them (bits beyond the 5-tuple's are
    /// ignored).
    #[inline(always)]
    pub fn from_words(w0: u64, w1: u64) -> FlowKey {
        FlowKey {
            src: (w0 >> 32) as u32,
            dst: w0 as u32,
            protocol: (w1 >> 32) as u8,
            src_port: (w1 >> 16) as u16,
            dst_port: w1 as u16,
        }
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} > {}:{} proto {}",
            Ipv4Addr::from(self.src),
            self.src_port,
            Ipv4Addr::from(self.dst),
            self.dst_port,
            self.protocol
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip() {
        let k = FlowKey {
            src: 0x0a00_0001,
            dst: 0xc0a8_0102,
            src_port: 1234,
            dst_port: 80,
            protocol: 6,
        };
        assert_eq!(FlowKey::from_bytes(&k.to_bytes()), k);
        assert_eq!(FlowKey::from_u128(k.to_u128()), Some(k));
        let [w0, w1] = k.words();
        assert_eq!(FlowKey::from_words(w0, w1 | 1 << 63), k);
        assert_eq!(
            k.to_bytes(),
            [10, 0, 0, 1, 192, 168, 1, 2, 0x04, 0xd2, 0, 80, 6]
        );
        assert_eq!(
            k.to_u128(),
            u128::from_be_bytes({
                let mut b = [0u8; 16];
                b[3..].copy_from_slice(&k.to_bytes());
                b
            })
        );
        assert_eq!(FlowKey::from_u128(1 << 104), None);
        assert_eq!(k.to_string(), "10.0.0.1:1234 > 192.168.1.2:80 proto 6");
    }
}

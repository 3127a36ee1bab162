//! The parts of TCP and UDP headers the switch and the telemetry read: ports (the first four
//! bytes of both) and the TCP sequence number.
//!
//! Layout: `[0..2)` source port, `[2..4)` destination port; TCP `[4..8)` sequence number.

use super::{Result, WireError};

/// A view of the source and destination ports at the start of a TCP or UDP header.
#[derive(Debug, Clone)]
pub struct TransportPorts<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TransportPorts<T> {
    /// Bytes needed to read both ports.
    pub const LEN: usize = 4;

    /// Wraps a buffer that holds at least both ports.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        Ok(TransportPorts { buffer })
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }
}

/// A view of the fixed part of a TCP header (the fields the telemetry reads).
#[derive(Debug, Clone)]
pub struct TcpHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpHeader<T> {
    /// Bytes needed to read up to the sequence number.
    pub const SEQ_END: usize = 8;

    /// Wraps a buffer that holds at least the ports and the sequence number.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < Self::SEQ_END {
            return Err(WireError::Truncated);
        }
        Ok(TcpHeader { buffer })
    }

    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_seq() {
        let b = [0x04, 0xd2, 0x00, 0x50, 0xde, 0xad, 0xbe, 0xef];
        let p = TransportPorts::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (1234, 80));
        assert_eq!(TcpHeader::new_checked(&b[..]).unwrap().seq(), 0xdeadbeef);
        assert!(TcpHeader::new_checked(&b[..7]).is_err());
        assert!(TransportPorts::new_checked(&b[..3]).is_err());
    }
}

//! Probe packets: UDP packets whose payload starts with a magic value, the probe stream, a
//! sequence number and the send time (Unix ns), so that a receiver, or the last switch on the
//! way, can measure per-stream loss (sequence gaps), reordering and one-way latency.
//! `pint-gen` sends them; the edge switch reports their arrivals to the sink.
//!
//! Payload layout (big-endian): magic `PINTPRB1` (8 bytes), stream (4), reserved zero (4),
//! sequence number (8), send time in nanoseconds (8): 32 bytes.

/// Bytes of a probe payload.
pub const PROBE_LEN: usize = 32;
/// The magic value a probe payload starts with.
pub const MAGIC: [u8; 8] = *b"PINTPRB1";

/// A probe's payload fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbePayload {
    /// Probe stream (one per path probed).
    pub stream: u32,
    /// Sequence number in the stream, from 0.
    pub seq: u64,
    /// Send time, nanoseconds on the sender's clock (Unix time).
    pub sent_ns: u64,
}

impl ProbePayload {
    /// The payload bytes.
    pub fn encode(&self) -> [u8; PROBE_LEN] {
        let mut b = [0u8; PROBE_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.stream.to_be_bytes());
        b[16..24].copy_from_slice(&self.seq.to_be_bytes());
        b[24..32].copy_from_slice(&self.sent_ns.to_be_bytes());
        b
    }

    /// The fields, if `payload` starts with a probe.
    #[inline]
    pub fn decode(payload: &[u8]) -> Option<ProbePayload> {
        let b: &[u8; PROBE_LEN] = payload.first_chunk()?;
        if b[0..8] != MAGIC {
            return None;
        }
        Some(ProbePayload {
            stream: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            seq: u64::from_be_bytes(b[16..24].try_into().ok()?),
            sent_ns: u64::from_be_bytes(b[24..32].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let p = ProbePayload {
            stream: 7,
            seq: 0x0102_0304_0506_0708,
            sent_ns: 1_700_000_000_123_456_789,
        };
        let b = p.encode();
        assert_eq!(&b[..8], b"PINTPRB1");
        assert_eq!(&b[8..12], &[0, 0, 0, 7]);
        assert_eq!(&b[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ProbePayload::decode(&b), Some(p));
        assert_eq!(ProbePayload::decode(&b[..31]), None);
        let mut other = b;
        other[0] = b'X';
        assert_eq!(ProbePayload::decode(&other), None);
    }
}

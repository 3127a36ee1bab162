//! Probe arrivals: the probes (`crate::wire::probe`) that left the network at this switch's
//! edge, with their arrival time, so that the sink can watch each probe stream's loss,
//! reordering and one-way delay.
//!
//! ```text
//! u16   worker
//! u32   probes N (1 .. the hello's max_digests)
//! u64   base time, Unix ns
//! N x   13-byte flow key, u32 stream, u64 sequence number, u64 send time (Unix ns, the
//!       sender's), zigzag varint: arrival ns since the previous arrival (the first: since
//!       the base time)
//! ```

use crate::flowradar::FlowKey;
use crate::wire::bytes::{Reader, put_varint};

use super::digests::{unzigzag, zigzag};
use super::{Hello, MAX_BATCH, ProtocolError};

/// One probe as it left the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireProbe {
    /// Its flow.
    pub key: FlowKey,
    /// Its stream.
    pub stream: u32,
    /// Its sequence number.
    pub seq: u64,
    /// When it was sent, Unix ns (the sender's clock).
    pub sent_ns: u64,
    /// When it left the last switch, Unix ns (the switch's clock).
    pub recv_ns: u64,
}

/// A decoded batch of probe arrivals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeBatch {
    /// The worker that saw them.
    pub worker: u16,
    /// The probes, in arrival order.
    pub probes: Vec<WireProbe>,
}

/// Bytes a probe takes at least.
const MIN_PROBE: usize = 13 + 4 + 8 + 8 + 1;

/// The probes frame's payload (at most [`MAX_BATCH`] probes).
pub fn encode_probes(worker: u16, probes: &[WireProbe]) -> Vec<u8> {
    assert!(!probes.is_empty() && probes.len() <= MAX_BATCH as usize);
    let base = probes[0].recv_ns;
    let mut out = Vec::with_capacity(14 + probes.len() * (MIN_PROBE + 2));
    out.extend_from_slice(&worker.to_be_bytes());
    out.extend_from_slice(&(probes.len() as u32).to_be_bytes());
    out.extend_from_slice(&base.to_be_bytes());
    let mut prev = base;
    for p in probes {
        out.extend_from_slice(&p.key.to_bytes());
        out.extend_from_slice(&p.stream.to_be_bytes());
        out.extend_from_slice(&p.seq.to_be_bytes());
        out.extend_from_slice(&p.sent_ns.to_be_bytes());
        put_varint(&mut out, zigzag(p.recv_ns.wrapping_sub(prev) as i64));
        prev = p.recv_ns;
    }
    out
}

impl ProbeBatch {
    pub(crate) fn decode(payload: &[u8], hello: &Hello) -> Result<ProbeBatch, ProtocolError> {
        let mut r = Reader::new(payload);
        let worker = r.u16()?;
        if usize::from(worker) >= hello.table_seeds.len() {
            return Err(ProtocolError::BadField("worker"));
        }
        let n = r.u32()?;
        if n == 0 || n > hello.max_digests.min(MAX_BATCH) {
            return Err(ProtocolError::OverLimit("probes in a batch"));
        }
        let base = r.u64()?;
        if r.remaining() < n as usize * MIN_PROBE {
            return Err(ProtocolError::Truncated);
        }
        let mut probes = Vec::with_capacity(n as usize);
        let mut time = base;
        for _ in 0..n {
            let key = FlowKey::from_bytes(r.take(13)?.try_into().expect("13 bytes"));
            let stream = r.u32()?;
            let seq = r.u64()?;
            let sent_ns = r.u64()?;
            time = time.wrapping_add(unzigzag(r.varint()?) as u64);
            probes.push(WireProbe {
                key,
                stream,
                seq,
                sent_ns,
                recv_ns: time,
            });
        }
        if r.remaining() != 0 {
            return Err(ProtocolError::TrailingBytes);
        }
        Ok(ProbeBatch { worker, probes })
    }
}

//! The switch-to-sink protocol: what a switch sends its sink over TCP, byte for byte
//! (`docs/protocol.md`). A connection is a sequence of length-prefixed frames; the first is a
//! hello that declares everything later frames may contain (the switch, its plan, its
//! FlowRadar flowset shape, its ports), and the decoder bounds every allocation by the hello
//! and by hard caps, so a bad frame is an error, never a crash or a giant allocation.
//!
//! Frame header (16 bytes, big-endian):
//!
//! ```text
//! offset  size  field
//! 0       4     length of the rest of the frame (12 .. MAX_FRAME)
//! 4       1     type: 1 hello, 2 plan, 3 digests, 4 flowset, 5 stats, 6 probes
//! 5       1     protocol version (3)
//! 6       2     reserved, zero
//! 8       8     sequence number: 0 for the hello, then +1 per frame; a gap means the
//!               switch dropped frames it could not send
//! 16      ...   payload
//! ```

mod digests;
mod frames;
mod probes;

pub use digests::{
    DigestBatch, DigestEncoder, DigestOrder, FLOW_SLOTS, FlowRuns, MAX_PLANS_PER_BATCH, WireDigest,
    encode_digests,
};
use digests::{FlowTable, Grouping};
pub use frames::{FlowSetFrame, Hello, PlanText, PortInfo, Stats, encode_flowset};
pub use probes::{ProbeBatch, WireProbe, encode_probes};

use crate::flowradar::wire::{FlowSetWireError, Shape};
use crate::wire::bytes::{ReadError, Reader};

/// The protocol version this code speaks (3: flowsets' checks are sums modulo a prime,
/// [`crate::flowradar::check`]; 2 summed them modulo 2^16).
pub const VERSION: u8 = 3;
/// Bytes of the frame header.
pub const HEADER_LEN: usize = 16;
/// Largest frame (length field included), whatever the hello says.
pub const MAX_FRAME: usize = 64 << 20;
/// Largest plan text.
pub const MAX_PLAN_TEXT: usize = 64 << 10;
/// Most digests in one batch.
pub const MAX_BATCH: u32 = 1 << 16;
/// Most ports a hello lists.
pub const MAX_PORTS: usize = 64;
/// Most workers a hello lists.
pub const MAX_WORKERS: usize = 256;
/// Most counters in a stats frame.
pub const MAX_STATS: usize = 1024;
/// The stats counter of flowsets a switch dropped at its export queue: the sink reads it
/// (a flowset dropped there is short counts, not lost packets).
pub const FLOWSETS_DROPPED: &str = "flowsets_dropped";
/// The stats counter of probe records a switch dropped (its export queue full, or no sink
/// connected): the sink reads it (a probe whose record was dropped arrived, it was not lost).
pub const PROBES_DROPPED: &str = "probes_dropped";
/// Longest epoch a hello may declare, ns (a minute, as `telemetry.epoch_ms` allows).
pub const MAX_EPOCH_NS: u64 = 60_000_000_000;
/// Most epochs one flowset may cover (a worker whose finished flowset was not taken for
/// that long keeps counting into it).
pub const MAX_EPOCHS: u32 = 1_000_000;
/// Plans a connection keeps declared: a plan frame beyond lets go of the one declared
/// longest ago (a switch keeps far fewer alive; the digests of a plan let go are refused).
pub const SESSION_PLANS: usize = 16;
/// Longest hello frame: its plan text, seeds and port names at their caps fit well within.
pub const MAX_HELLO_FRAME: usize = 1 << 20;

/// Frame types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    /// The switch introduces itself.
    Hello = 1,
    /// A new plan is in force.
    Plan = 2,
    /// A batch of digests.
    Digests = 3,
    /// One worker's flowset of an epoch.
    FlowSet = 4,
    /// The switch's counters.
    Stats = 5,
    /// Probe arrivals.
    Probes = 6,
}

impl FrameType {
    fn from_u8(v: u8) -> Option<FrameType> {
        Some(match v {
            1 => FrameType::Hello,
            2 => FrameType::Plan,
            3 => FrameType::Digests,
            4 => FrameType::FlowSet,
            5 => FrameType::Stats,
            6 => FrameType::Probes,
            _ => return None,
        })
    }
}

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The frame ends before a field it announces.
    #[error("frame ends early")]
    Truncated,
    /// The length field is below the header or above the cap.
    #[error("a frame of {0} bytes, its length field included, is out of range")]
    BadLength(usize),
    /// An unknown frame type.
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    /// A protocol version this code does not speak.
    #[error("protocol version {0} is not supported (this speaks version {VERSION})")]
    UnsupportedVersion(u8),
    /// The first frame was not a hello, or a hello came twice.
    #[error("a connection starts with exactly one hello")]
    HelloOrder,
    /// A sequence number that goes backwards.
    #[error("sequence number {got} after {after}")]
    BadSequence {
        /// The previous one.
        after: u64,
        /// This one.
        got: u64,
    },
    /// A field out of range.
    #[error("field {0} is out of range")]
    BadField(&'static str),
    /// A text field that is not UTF-8.
    #[error("field {0} is not UTF-8")]
    NotUtf8(&'static str),
    /// More items than the hello or the caps allow.
    #[error("{0} exceeds what the hello declared or the protocol allows")]
    OverLimit(&'static str),
    /// A digest names a plan the switch never declared.
    #[error("plan {0:08x} was not declared by the switch")]
    UnknownPlan(u32),
    /// The flowset inside the frame is malformed.
    #[error("flowset: {0}")]
    FlowSet(#[from] FlowSetWireError),
    /// Bytes left over inside a frame.
    #[error("trailing bytes in a frame")]
    TrailingBytes,
    /// A well-formed flowset the reader had no memory to decode: passed over as
    /// [`Session::skip`] passes a frame over (checked, its sequence number counted), so the
    /// session goes on without it.
    #[error("no memory for a flowset table of {0} bytes: the flowset was passed over")]
    FlowSetNoMemory(usize),
}

impl ProtocolError {
    /// Whether the frame was passed over and the session can go on (every other error
    /// leaves the connection's byte stream untrustworthy).
    pub fn passed_over(&self) -> bool {
        matches!(self, ProtocolError::FlowSetNoMemory(_))
    }
}

impl From<ReadError> for ProtocolError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Truncated => ProtocolError::Truncated,
            ReadError::BadVarint => ProtocolError::BadField("varint"),
        }
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A hello.
    Hello(Hello),
    /// A plan change.
    Plan(PlanText),
    /// Digests.
    Digests(DigestBatch),
    /// A flowset.
    FlowSet(FlowSetFrame),
    /// Counters.
    Stats(Stats),
    /// Probe arrivals.
    Probes(ProbeBatch),
}

/// Writes a frame of `ty` with `payload` and sequence number `seq`.
pub fn encode_frame(ty: FrameType, seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&((payload.len() + HEADER_LEN - 4) as u32).to_be_bytes());
    out.push(ty as u8);
    out.push(VERSION);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The length of the first frame in `buf` (header included) once its length field has
/// arrived: None while fewer than 4 bytes are there.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    let Some(head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*head) as usize;
    if len < HEADER_LEN - 4 || len + 4 > MAX_FRAME {
        return Err(ProtocolError::BadLength(len + 4));
    }
    Ok(Some(len + 4))
}

/// A connection's decoding state: what the hello declared, and the last sequence number.
#[derive(Debug, Clone, Default)]
pub struct Session {
    hello: Option<Hello>,
    /// Plans the switch declared on this connection: (version, digest bytes).
    plans: Vec<(u32, u8)>,
    last_seq: Option<u64>,
    /// Frames whose sequence numbers were skipped (the switch dropped them).
    pub gaps: u64,
    /// Buffers the next digest frame decodes into (see [`Session::recycle`]).
    spare: (Vec<WireDigest>, FlowRuns),
    /// The order digests come out in.
    order: DigestOrder,
    /// Scratch for grouping digests by flow.
    grouping: Grouping,
    /// The flow slots the connection's digest batches defined.
    flows: FlowTable,
}

impl Session {
    /// A session that gives each batch's digests in `order`.
    pub fn new(order: DigestOrder) -> Session {
        Session {
            order,
            ..Session::default()
        }
    }

    /// The hello, once received.
    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    /// Hands back a digest batch's buffers (its digests and their grouping) once its
    /// digests are used: the next digest frame decodes into them instead of new
    /// allocations. One pair is kept (the one with the larger digest buffer).
    pub fn recycle(&mut self, mut digests: Vec<WireDigest>, mut by_flow: FlowRuns) {
        if digests.capacity() > self.spare.0.capacity() {
            digests.clear();
            by_flow.clear();
            self.spare = (digests, by_flow);
        }
    }

    /// Whether recycled buffers are waiting for the next digest frame.
    pub fn has_spare(&self) -> bool {
        self.spare.0.capacity() > 0
    }

    /// Passes over one whole frame without keeping its payload, as if it had been decoded
    /// (its header and sequence number checked and counted, a flowset checked as decoding
    /// would check it, without allocating its table): for a frame the reader has no room
    /// for, so that dropping it is not a gap and a malformed one is still refused. Returns
    /// its type.
    pub fn skip(&mut self, frame: &[u8]) -> Result<FrameType, ProtocolError> {
        let (ty, seq) = self.header(frame)?;
        match (ty, &self.hello) {
            // A hello defines the session: it is never passed over.
            (FrameType::Hello, _) => return Err(ProtocolError::HelloOrder),
            (FrameType::FlowSet, Some(h)) => FlowSetFrame::check(&frame[HEADER_LEN..], h)?,
            _ => {}
        }
        self.last_seq = Some(seq);
        Ok(ty)
    }

    /// The type of a whole frame, from its header alone (None: not a known type, or too
    /// short to say).
    pub fn peek_type(frame: &[u8]) -> Option<FrameType> {
        frame.get(4).copied().and_then(FrameType::from_u8)
    }

    /// Checks a frame's header and sequence number against the session (counting a gap);
    /// returns its type and sequence number.
    fn header(&mut self, frame: &[u8]) -> Result<(FrameType, u64), ProtocolError> {
        let len = frame_len(frame)?.ok_or(ProtocolError::Truncated)?;
        if frame.len() != len {
            return Err(ProtocolError::BadLength(frame.len()));
        }
        let mut r = Reader::new(&frame[4..]);
        let ty = r.u8()?;
        let ty = FrameType::from_u8(ty).ok_or(ProtocolError::UnknownType(ty))?;
        let version = r.u8()?;
        if version != VERSION {
            return Err(ProtocolError::UnsupportedVersion(version));
        }
        if r.u16()? != 0 {
            return Err(ProtocolError::BadField("reserved"));
        }
        let seq = r.u64()?;
        match (&self.hello, ty) {
            (None, FrameType::Hello) => {
                if seq != 0 {
                    return Err(ProtocolError::BadSequence { after: 0, got: seq });
                }
            }
            (None, _) | (Some(_), FrameType::Hello) => return Err(ProtocolError::HelloOrder),
            (Some(_), _) => {
                let last = self.last_seq.unwrap_or(0);
                if seq <= last {
                    return Err(ProtocolError::BadSequence {
                        after: last,
                        got: seq,
                    });
                }
                if seq - last > 1 {
                    self.gaps += seq - last - 1;
                    // A lost frame may have redefined any slot.
                    self.flows.clear();
                }
            }
        }
        Ok((ty, seq))
    }

    /// Decodes one whole frame (as [`frame_len`] measured it).
    pub fn decode(&mut self, frame: &[u8]) -> Result<Frame, ProtocolError> {
        let (ty, seq) = self.header(frame)?;
        let payload = &frame[HEADER_LEN..];
        let out = match ty {
            FrameType::Hello => {
                let h = Hello::decode(payload)?;
                self.plans = h.plan.iter().map(|p| (p.version, p.digest_bytes)).collect();
                self.hello = Some(h.clone());
                Frame::Hello(h)
            }
            FrameType::Plan => {
                let p = PlanText::decode(&mut Reader::new(payload), true)?;
                // A switch keeps a handful of plans alive at most: the one declared longest
                // ago goes first, and a plan declared again (a reload back to it) is the
                // newest again.
                if let Some(at) = self.plans.iter().position(|(v, _)| *v == p.version) {
                    self.plans.remove(at);
                } else if self.plans.len() >= SESSION_PLANS {
                    self.plans.remove(0);
                }
                self.plans.push((p.version, p.digest_bytes));
                Frame::Plan(p)
            }
            FrameType::Digests => {
                let h = self.hello.as_ref().expect("checked above");
                let buf = std::mem::take(&mut self.spare);
                let grouping = match self.order {
                    DigestOrder::Recorded => None,
                    DigestOrder::ByFlow => Some(&mut self.grouping),
                };
                Frame::Digests(DigestBatch::decode(
                    payload,
                    h,
                    &self.plans,
                    &mut self.flows,
                    buf,
                    grouping,
                )?)
            }
            FrameType::FlowSet => {
                let h = self.hello.as_ref().expect("checked above");
                match FlowSetFrame::decode(payload, h) {
                    Ok(f) => Frame::FlowSet(f),
                    Err(ProtocolError::FlowSet(FlowSetWireError::NoMemory(bytes))) => {
                        FlowSetFrame::check(payload, h)?;
                        self.last_seq = Some(seq);
                        return Err(ProtocolError::FlowSetNoMemory(bytes));
                    }
                    Err(e) => return Err(e),
                }
            }
            FrameType::Stats => Frame::Stats(Stats::decode(payload)?),
            FrameType::Probes => {
                let h = self.hello.as_ref().expect("checked above");
                Frame::Probes(ProbeBatch::decode(payload, h)?)
            }
        };
        self.last_seq = Some(seq);
        Ok(out)
    }

    /// The flowset shape the hello declared.
    pub fn shape(&self) -> Option<Shape> {
        self.hello.as_ref().map(|h| h.shape)
    }
}

#[cfg(test)]
mod tests;

//! `pint-gen`'s traffic: what a tester asks for (flows, popularity, flow sizes, arrivals,
//! packet sizes, rate, probes) turned into a deterministic sequence of timed packets, and
//! the packets' bytes. DPDK-free, so the same traffic can be written to a capture.

pub mod dist;
pub mod frame;
pub mod probe;
pub mod senders;
pub mod tag;
pub mod traffic;

pub use dist::{FlowSizes, PacketSizes, Popularity};
pub use frame::{FlowTuple, emit_frame, flow_key_of};
pub use probe::{ProbePayload, ProbeReceiver, ProbeReport};
pub use tag::{FlowLoss, FlowLossCounter, FlowLossReport, FlowTag, TagPatch, Transport};
pub use traffic::{GenPacket, Payload, Rate, Traffic, TrafficSpec};

//! FlowRadar: per-switch encoded flowsets (flow filter + counting table) updated on every
//! packet, and the collector's decoders (SingleDecode, network-wide FlowDecode and
//! CounterDecode), with loss analyses and a fat-tree simulation.

pub mod analysis;
pub mod decode;
pub mod filter;
pub mod flowset;
pub mod key;
pub mod network;
pub mod sim;
pub mod wire;

pub use decode::{DecodeResult, DecodedFlow, SingleDecoder, single_decode};
pub use flowset::{Cell, FlowSet, FlowSetConfig};
pub use key::FlowKey;
pub use network::{NetworkResult, network_decode};

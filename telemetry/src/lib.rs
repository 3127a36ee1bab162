//! DPDK-free core shared by the PINT switch and the sink: typed views over packet headers,
//! the global hash family, PINT's encoders and decoders, FlowRadar, topologies, the
//! switch-to-sink protocol, how every binary stops on a signal, and the order of their
//! Prometheus text.
//!
//! Nothing here depends on DPDK, so the logic is testable with plain `cargo test` and usable
//! by the sink, which never links DPDK.

#![warn(missing_docs)]

pub mod exposition;
pub mod flowradar;
pub mod hash;
pub mod packet_id;
pub mod pint;
pub mod protocol;
pub mod signals;
pub mod sim_rng;
pub mod topology;
pub mod wire;

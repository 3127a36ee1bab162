//! The PINT switch's per-packet pipeline as plain Rust over packet bytes: forwarding (parse,
//! longest-prefix match, ECMP, TTL and MAC rewrite) and the telemetry stages, with the state
//! each worker owns. No DPDK: the switch's poll loop and the multi-hop emulator run this same
//! code, one over mbufs, the other over vectors. See `docs/architecture.md`.

#![warn(missing_docs)]

pub mod burst;
pub mod capture;
pub mod clock;
pub mod counters;
pub mod digest;
pub mod emulator;
pub mod epochs;
pub mod fabric;
pub mod fib;
pub mod forward;
pub mod frame;
pub mod impair;
pub mod inband;
pub mod load;
pub mod lpm;
pub mod plans;
pub mod stages;
pub mod tables;

pub use burst::{BurstVerdicts, DROPPED, MAX_BURST, Pipeline};
pub use counters::{
    DropCounts, DropReason, LocalCounters, PortCounters, SharedCounters, TelemetryCounts,
    TelemetryEvent,
};
pub use fib::{Fib, NextHop};
pub use forward::{Forwarder, PortView, Verdict};
pub use frame::{PacketBuf, VecFrame};
pub use tables::{MAX_PORTS, NextHopSpec, PortRole, PortSpec, RouteSpec, Tables};

#[cfg(test)]
mod tests;

//! The per-packet pipeline as plain Rust over packet bytes (no DPDK types), so the same
//! code runs in the poll loop and in DPDK-free tests and emulators.

pub mod counters;
pub mod fib;
pub mod forward;
pub mod lpm;

pub use counters::{DropReason, LocalCounters, SharedCounters};
pub use fib::{Fib, NextHop};
pub use forward::{Forwarder, PortView, Verdict};

#[cfg(test)]
mod tests;

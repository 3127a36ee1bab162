//! The PINT switch's data plane: a safe DPDK layer ([`dpdk`]), the per-packet pipeline as
//! plain Rust over packet bytes ([`pipeline`]), and the per-core poll loop.

#![warn(missing_docs)]

pub mod capture;
pub mod demo;
pub mod dpdk;
pub mod pipeline;
pub mod resources;
pub mod switch;
pub mod worker;

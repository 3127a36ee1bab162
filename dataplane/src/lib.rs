//! The PINT switch's data plane: a safe DPDK layer ([`dpdk`]), the per-core poll loop that
//! runs the per-packet pipeline (the DPDK-free `pipeline` crate) over mbufs, and the
//! `pint-switch` binary. See `docs/architecture.md`.

#![warn(missing_docs)]

pub mod demo;
pub mod device_checks;
pub mod dpdk;
pub mod gate;
pub mod reconnect;
pub mod replay;
pub mod resources;
pub mod switch;
pub mod temp_dir;
pub mod worker;

pub use pipeline::capture;

// A switch's ports are DPDK ports: the pipeline's port arrays cover every one DPDK can have.
const _: () = assert!(pipeline::MAX_PORTS <= dpdk_sys::RTE_MAX_ETHPORTS as usize);

//! Benchmarks and reproductions behind `pint-bench`.

#![warn(missing_docs)]

pub use control::{say, say_err, say_inline};
pub mod collector;
pub mod detect_bench;
pub mod fabric_traffic;
pub mod flowradar;
pub mod forward;
pub mod generator;
pub mod lab;
pub mod pint_hpcc;
pub mod pint_latency;
pub mod pint_path;
pub mod pipeline_roles;
pub mod promtool;
pub mod scratch;
pub mod sender;
pub mod sink_bench;
pub mod sink_sweep;
pub mod stats;
pub mod switch_cmd;
pub mod testpmd;
pub mod throughput;

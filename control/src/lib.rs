//! The switch's control side, free of DPDK: the configuration file (parse, validate, resolve
//! defaults), the tables built from it, the control thread (statistics, epochs, plan
//! installation, digest draining, export to the sink, metrics) and the run summary.
//! See `docs/architecture.md`.

#![warn(missing_docs)]

pub mod config;
pub mod export;
pub mod inband;
pub mod metrics;
pub mod metrics_http;
pub mod output;
pub mod runtime;
pub mod summary;

pub use config::{Config, ConfigError};

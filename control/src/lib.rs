//! The switch's control side, free of DPDK: the configuration file (parse, validate, resolve
//! defaults) and, as the roadmap proceeds, plan installation, epochs and export.

#![warn(missing_docs)]

pub mod config;

pub use config::{Config, ConfigError};

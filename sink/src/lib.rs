//! pint-sink: the process the switches export to. It decodes their digests and flowsets into
//! what an operator asks: each flow's path, per-hop latency quantiles, bottleneck
//! utilisation, exact packet and byte counts at every switch every epoch, and loss per link;
//! and serves them over HTTP/JSON, Prometheus, IPFIX and JSON lines
//! (`docs/architecture.md`, "The sink"; `docs/api.md`).
//!
//! Threads: ingest (one per switch connection), decode threads (flows sharded by flow hash),
//! the epoch assembler (FlowRadar decoding), the export thread and the HTTP server; bounded
//! queues between them, with drops counted.

#![warn(missing_docs)]

pub mod api;
pub mod app;
pub mod cli;
pub mod clock_leads;
pub mod config;
pub mod detect;
pub mod epochs;
pub mod events;
pub mod export;
pub mod flows;
pub mod http;
pub mod ingest;
pub mod ipfix;
pub mod layout;
pub mod limits;
pub mod lines;
pub mod live;
pub mod metrics;
pub mod page;
pub mod registry;
pub mod schedule;
pub mod shard;
pub mod summary;
pub mod transport;

pub use app::{Backlog, Shared, Sink};
pub use config::SinkConfig;

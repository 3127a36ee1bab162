//! PINT: probabilistic in-band network telemetry. Queries and execution plans, value
//! compression, the per-hop encoders, and the sink's decoders and recording.

pub mod coding;
pub mod compress;
pub mod encoder;
pub mod hpcc;
pub mod path_decoder;
pub mod plan;
pub mod query;
pub mod recording;
pub mod tape;

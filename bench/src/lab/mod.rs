//! Labs: a small network of `pint-switch` processes on virtual devices (memif links), with
//! `pint-gen` traffic between hosts, impairments on chosen links, and `pint-sink` decoding
//! it all; run by `pint-lab run LAB`, which ends with a report (text, JSON and HTML).

pub mod http;
pub mod plan;
pub mod proc;
pub mod report;
pub mod run;
pub mod spec;

pub use report::LabReport;
pub use run::{Programs, RunOptions};
pub use spec::{Lab, LabError};

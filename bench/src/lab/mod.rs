//! Labs: a small network of `pint-switch` processes on virtual devices (memif links), with
//! `pint-gen` traffic between hosts, impairments on chosen links, and `pint-sink` decoding
//! it all; run by `pint-lab run LAB`, which ends with a report (text, JSON and HTML).

/// `println!` that ignores a failed write: a lab's terminal closed (SIGHUP) or its reader
/// gone (`pint-lab run ... | head`) must not abort it (a panic aborts in release builds)
/// while it stops its processes in order and writes its report.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` (flushed) that ignores a failed write, as [`say!`].
#[macro_export]
macro_rules! say_inline {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout();
        let _ = write!(out, $($t)*);
        let _ = out.flush();
    }};
}

/// `eprintln!` that ignores a failed write, as [`say!`].
#[macro_export]
macro_rules! say_err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod http;
pub mod plan;
pub mod proc;
pub mod report;
pub mod run;
pub mod spec;

pub use report::LabReport;
pub use run::{Programs, RunOptions};
pub use spec::{Lab, LabError};

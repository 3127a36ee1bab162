//! `pint-sink`: receives the switches' exports and serves what they say (see `docs/api.md`).

use std::process::ExitCode;

/// mimalloc (without transparent huge pages): the decode threads allocate and free small
/// buffers at a high rate (every latency sketch's compactions), which it does faster than
/// the system allocator (measured in `docs/benchmarks.md`, "The sink").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Errors are one line with their causes, as the other tools print them (not a `Debug`
/// dump, which `RUST_BACKTRACE` would follow with a backtrace).
fn main() -> ExitCode {
    match sink::cli::main_with(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pint-sink: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

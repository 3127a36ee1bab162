//! `pint-sink`: receives the switches' exports and serves what they say (see `docs/api.md`).

/// mimalloc (without transparent huge pages): the decode threads allocate and free small
/// buffers at a high rate (every latency sketch's compactions), which it does faster than
/// the system allocator (measured in `docs/benchmarks.md`, "The sink").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    sink::cli::main_with(std::env::args_os())
}

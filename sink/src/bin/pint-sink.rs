//! `pint-sink`: receives the switches' exports and serves what they say (see `docs/api.md`).

fn main() -> anyhow::Result<()> {
    sink::cli::main_with(std::env::args_os())
}

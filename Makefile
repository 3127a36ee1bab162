# The two commands of the README, and the checks CI runs.
.PHONY: setup demo test lint bench

# Installs what the project needs (idempotent; hugepages optional: HUGEPAGES=1024 make setup).
setup:
	@scripts/setup.sh $(if $(HUGEPAGES),--hugepages $(HUGEPAGES))

# The main job on an embedded default: the switch forwarding a generated capture through
# virtual devices (no NIC, no hugepages), printing its counters and rate.
demo: setup
	cargo run --release -p dataplane --bin pint-switch -- --demo

# All tests.
test: setup
	cargo test --workspace

# Formatting and lints (CI fails on either).
lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# The forwarding benchmark against dpdk-testpmd.
bench: setup
	cargo run --release -p bench --bin pint-bench -- forward --rounds 3

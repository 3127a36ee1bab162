# The two commands of the README, and the checks CI runs.
.PHONY: setup demo switch-demo test lint bench install

# Where rustup puts cargo (scripts/setup.sh installs Rust there when there is none).
export PATH := $(HOME)/.cargo/bin:$(PATH)

# Installs what the project needs (idempotent; hugepages optional: HUGEPAGES=1024 make setup).
setup:
	@scripts/setup.sh $(if $(HUGEPAGES),--hugepages $(HUGEPAGES))

# The main job on an embedded default: the leaf-spine lab (five switches linked over memif,
# traffic between three hosts, one impaired link, the sink decoding it all) for 20 seconds,
# ending with a summary and the report's path. No NIC, no hugepages.
demo: setup
	cargo build --release -p dataplane -p sink -p bench
	cargo run --release -p bench --bin pint-lab -- run configs/labs/leaf-spine.toml

# The single-switch demo: one switch forwarding a generated capture through virtual devices.
switch-demo: setup
	cargo run --release -p dataplane --bin pint-switch -- --demo

# All tests.
test: setup
	cargo test --workspace

# Formatting, lints and the API docs' links (CI fails on any).
lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The forwarding benchmark against dpdk-testpmd.
bench: setup
	cargo run --release -p bench --bin pint-bench -- forward --rounds 3

# The five programs into $(PREFIX)/bin (they find each other there: pint-lab runs the
# pint-switch, pint-sink and pint-gen beside it), the shipped configs and topologies into
# $(PREFIX)/share/pint-switch (a lab file finds its topology at ../../data, as in the
# repository). DESTDIR stages it for a package. Builds first (after `make setup`).
PREFIX ?= /usr/local
SHARE = $(DESTDIR)$(PREFIX)/share/pint-switch
install:
	cargo build --release -p dataplane -p sink -p bench
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE)
	install -m 755 $(addprefix target/release/,pint-switch pint-sink pint-gen pint-lab pint-bench) $(DESTDIR)$(PREFIX)/bin/
	cp -R configs data $(SHARE)/

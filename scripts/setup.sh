#!/usr/bin/env bash
# One idempotent set-up step for a fresh Debian 12 machine: installs the Debian packages the
# project needs (DPDK 22.11, bindgen's libclang, pkg-config, test tools), Rust by rustup when
# there is no cargo or it is older than the project's 1.88 (Debian 12's is), and, only when asked,
# hugepages. Hugepages are never required: everything runs with --no-huge.
#
#   scripts/setup.sh                 # packages only
#   scripts/setup.sh --hugepages 1024  # also reserve 1024 x 2 MiB hugepages (root)
set -euo pipefail

PACKAGES=(libdpdk-dev dpdk-dev pkg-config clang libclang-dev libpcap-dev tshark prometheus nfdump chromium iputils-ping iproute2 make gcc)
HUGEPAGES=0
while [ $# -gt 0 ]; do
  case "$1" in
    --hugepages) HUGEPAGES="${2:?--hugepages needs a count}"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# Root, or sudo, only for what needs it (missing packages, hugepages).
SUDO=""
NO_ROOT=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else NO_ROOT=1; fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && [ -n "$NO_ROOT" ]; then
  echo "setup.sh: not root and no sudo; install these as root, then run again: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if [ "$HUGEPAGES" -gt 0 ] && [ -n "$NO_ROOT" ]; then
  echo "setup.sh: reserving hugepages needs root (or sudo): run it as root" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! pkg-config --atleast-version=22.11 libdpdk; then
  echo "setup.sh: libdpdk >= 22.11 is still not visible to pkg-config" >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
# The oldest Rust that builds the project (Cargo.toml's rust-version).
RUST_MIN=1.88
rust_too_old() {
  local have
  have=$(rustc --version 2>/dev/null | awk '{print $2}' | cut -d- -f1)
  [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$RUST_MIN" "$have" | sort -V | head -n1)" != "$RUST_MIN" ]
}
if command -v cargo >/dev/null 2>&1 && rust_too_old; then
  if command -v rustup >/dev/null 2>&1; then
    echo "setup.sh: Rust $(rustc --version | awk '{print $2}') is older than $RUST_MIN: rustup update stable"
    rustup update stable >/dev/null
    rustup default stable >/dev/null
  else
    echo "setup.sh: Rust $(rustc --version | awk '{print $2}') is older than $RUST_MIN: installing a newer one with rustup into ~/.cargo"
    NEED_RUSTUP=1
  fi
fi
if ! command -v cargo >/dev/null 2>&1 || [ "${NEED_RUSTUP:-0}" = 1 ]; then
  echo "setup.sh: installing Rust with rustup (https://rustup.rs) into ~/.cargo"
  for p in curl ca-certificates; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
    if [ -n "$NO_ROOT" ]; then
      echo "setup.sh: not root and no sudo; install $p as root, then run again" >&2
      exit 1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null
  done
  if ! curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
      sh -s -- -y --profile minimal --component rustfmt,clippy >/dev/null; then
    echo "setup.sh: installing Rust failed; install it (https://rustup.rs) and run again" >&2
    exit 1
  fi
  export PATH="$HOME/.cargo/bin:$PATH"
fi

if [ "$HUGEPAGES" -gt 0 ]; then
  echo "$HUGEPAGES" | $SUDO tee /proc/sys/vm/nr_hugepages >/dev/null
  if ! mount | grep -q "type hugetlbfs"; then
    $SUDO mkdir -p /dev/hugepages
    $SUDO mount -t hugetlbfs nodev /dev/hugepages
  fi
  echo "setup.sh: $(grep HugePages_Total /proc/meminfo)"
fi
echo "setup.sh: ready (DPDK $(pkg-config --modversion libdpdk))"

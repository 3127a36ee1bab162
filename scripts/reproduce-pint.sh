#!/usr/bin/env bash
# Runs the PINT reproductions behind docs/results.md and prints their tables.
# Usage: scripts/reproduce-pint.sh [RUNS]   (runs per path; the docs used the defaults below)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000}
cargo build --release -p bench --bin pint-bench >/dev/null
B=target/release/pint-bench
KDL=data/topologies/Kdl.graphml
US=data/topologies/UsCarrier.graphml

echo "## line of 25 hops, coding scheme alone (no topology, raw values)"
$B pint-path --topology line:25 --scheme baseline --no-topology --runs 10000 --paths 1
$B pint-path --topology line:25 --scheme interleaved --no-topology --runs 10000 --paths 1

for T in $KDL $US; do
  echo "## $T"
  $B pint-path --topology $T --scheme interleaved --bits 8 --instances 2 --runs "$RUNS" --paths 5
  $B pint-path --topology $T --scheme interleaved --bits 8 --instances 2 --runs "$RUNS" --paths 5 --first-hop-known
  $B pint-path --topology $T --scheme interleaved --bits 4 --runs "$RUNS" --paths 5
  $B pint-path --topology $T --scheme interleaved --bits 1 --runs "$((RUNS / 5))" --paths 5
  $B pint-path --topology $T --scheme interleaved --bits 1 --runs "$((RUNS / 5))" --paths 5 --first-hop-known
  for S in ppm ams2-m5 ams2-m6; do
    $B pint-path --topology $T --scheme $S --runs "$((RUNS / 5))" --paths 5
  done
done

echo "## $KDL: shortest and walk routes"
for R in shortest walk; do
  $B pint-path --topology $KDL --bits 8 --instances 2 --runs "$RUNS" --paths 5 --lengths 5,10,20,30,40,50,59 --routes $R
  $B pint-path --topology $KDL --bits 8 --instances 2 --runs "$RUNS" --paths 5 --lengths 5,10,20,30,40,50,59 --routes $R --first-hop-known
done

echo "## fat tree K=8"
for BITS in "8 --instances 2" "4" "1"; do
  $B pint-path --topology fattree:8 --scheme interleaved --bits $BITS --runs "$RUNS" --paths 5
done
for S in ppm ams2-m5 ams2-m6; do
  $B pint-path --topology fattree:8 --scheme $S --runs "$RUNS" --paths 5
done

echo "## latency quantiles"
$B pint-latency --runs 100
$B pint-latency --runs 100 --sketch-items 400
echo "## HPCC utilization"
$B pint-hpcc

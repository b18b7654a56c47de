#!/usr/bin/env bash
# bench/rank.sh — teammem's BM25 index against the `bm25` crate on one
# generated 1,000-page wiki, in the same process: build time, warm query
# p50/p99 and precision at 1 for two-word topic queries (crate in
# `bench/rank/`). Prints CPU stolen during the run.
# Usage: bench/rank.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cargo build --release --quiet --manifest-path "$here/rank/Cargo.toml"
steal() { awk '/^cpu / {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
before="$(steal)"
"$here/rank/target/release/teammem-rank-bench"
after="$(steal)"
read -r s0 t0 <<< "$before"
read -r s1 t1 <<< "$after"
echo "CPU stolen during the run: $(( 100 * (s1 - s0) / (t1 - t0 > 0 ? t1 - t0 : 1) )) %, load average: $(cut -d' ' -f1 /proc/loadavg)"

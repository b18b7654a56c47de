#!/usr/bin/env bash
# Queue benchmark (DESIGN §11, issue 2 "Performance"): builds the bench crate
# in bench/queue/ in release mode and runs teammem's queue and apalis-sqlite
# on the same workload in one run, printing jobs/s, claim latency and ratios.
# Extra arguments go to the bench: --jobs N --workers N --destinations N.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cargo build --release --quiet --manifest-path "$here/queue/Cargo.toml"
exec "$here/queue/target/release/teammem-queue-bench" "$@"

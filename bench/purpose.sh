#!/usr/bin/env bash
# bench/purpose.sh — how many source files get a purpose (src/purpose/) on
# two generated trees shaped like the projects replayed in issue 36: a Python
# web framework (modules under license headers and encoding lines, docstrings
# in old and new styles, tests mostly without docstrings, `.rst` docs) and a
# Rust web framework (crates with `//!` docs and `include_str!` READMEs,
# examples whose doc is only "Run with"). Every generated file carries the
# purpose a reader would name, or none.
#
# Prints, per tree: source files, how many state a purpose, how many got one
# (coverage), how many got the right one, and the files wrong or missed.
#
# Invariant: the run fails if any file's purpose differs from the reader's
# (the unit test purpose::coverage asserts it; this script only shows it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --quiet --lib purpose::coverage::coverage_on_generated_trees -- --nocapture --exact 2>&1 \
    | grep -E 'framework:|wrong:|test result'

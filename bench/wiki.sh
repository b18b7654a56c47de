#!/usr/bin/env bash
# Wiki round-trip benchmark: snapshot + one-page patch + publish over loopback
# smart HTTP (git http-backend), teammem (warm and cold mirror) vs the git CLI
# (clone --depth 1; kept clone) vs Dulwich, side by side in one run, on a
# 1,000-page and a 10,000-page wiki made with the git CLI. Prints medians and
# ratios. Usage: bench/wiki.sh [iterations]   (default 9, at least 7)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
iterations="${1:-9}"
if [ "$iterations" -lt 7 ]; then
  echo "use at least 7 iterations" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== building the wikis with the git CLI" >&2
for pages in 1000 10000; do
  name="wiki-${pages}.git"
  git init --quiet --bare --initial-branch=master "$work/$name"
  python3 "$here/wiki/make_wiki.py" "$pages" | git -C "$work/$name" fast-import --quiet
  git -C "$work/$name" gc --quiet
done

echo "== installing Dulwich into a throwaway virtualenv" >&2
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check dulwich >&2
"$work/venv/bin/python" -c 'import dulwich; print("dulwich", dulwich.__version__)' >&2

echo "== building the benchmark driver (release)" >&2
cargo build --quiet --release --manifest-path "$repo/Cargo.toml" --features bench --example wiki_bench

echo "== running ($iterations iterations per contender)" >&2
"$repo/target/release/examples/wiki_bench" \
  --root "$work" \
  --repos wiki-1000.git,wiki-10000.git \
  --iterations "$iterations" \
  --python "$work/venv/bin/python" \
  --dulwich "$here/wiki/dulwich_roundtrip.py"

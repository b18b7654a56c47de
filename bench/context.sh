#!/usr/bin/env bash
# bench/context.sh — get_context and org search through the real `teammem mcp`
# (stdio), and the token economy of get_context on a history the real daemon
# and builtin agent recorded (issue #37). Three phases:
#
# 1. latency: wikis of ~1,000 and ~10,000 pages shaped like the builtin
#    agent's (bench/wiki/make_wiki.py PAGES agent, via git fast-import):
#    get_context naming 5 paths spread over the areas; the cold first call
#    (index build) and warm p50/p99 (targets p50 < 10 ms, p99 < 50 ms).
# 2. org search: 100 configured sources, each with a ~100-page wiki of the
#    same shape; search_wiki without repository: cold, warm p50/p99 (target
#    p99 < 100 ms).
# 3. economy (bench/context/economy.py): a generated source of PRS squash-
#    merged pull requests (SHAPE=real: files and diffs sized after a real
#    package; SHAPE=small: ~210-line files, few-line PRs), each range
#    dispatched to `teammem serve` (local forge, builtin agent) and followed
#    to its end, then 50 "I am about to change these files" tasks with ground
#    truth from git (the PRs that touched the files, their titles and why,
#    the files' purposes, the stale facts, the test command): recall of one
#    get_context call at the default budget (a PR counts when named by
#    number and title; those with their why are counted apart), and the
#    tokens of (a) that call, (b) search_wiki per path plus reading whole the
#    pages it names, (c) reading the files and their `git log -p`, in both
#    shapes (targets: recall >= 0.9, (a) <= (b) / 5 and <= (c) / 30); also
#    the recall and tokens at max_tokens 16,000 with detail full (the most
#    an answer says). The default answer is get_context's text form, scored
#    as an agent reads it; its JSON form is sized beside it. ANSWERS=FILE
#    appends both, with the paths and how many PRs touched them, to FILE as
#    JSON lines.
#    With REAL_REPO (a git directory, read in place, never changed) and
#    REPLAY=N, the economy is measured on that repository instead
#    (bench/context/real.py): its last N first-parent merges replayed
#    through `teammem serve` as bench/history.sh replays them (bench/lib.sh),
#    50 tasks of its files under REAL_FOLDER, ground truth from git within
#    the replayed window, and (c) over the window (the ratio's) and over the
#    whole history.
# Tokens are get_context's documented estimate: the result's JSON bytes / 4
# (the text form inside its JSON string), rounded up. The economy also
# counts (a), (b) and (c) in tiktoken's o200k_base and cl100k_base
# (bench/context/bpe.py, through the count_tokens example built here in
# release with the bench feature) and prints its ratios counted that way.
# Prints the cores, load and CPU stolen over the run.
# Usage: [TEAMMEM_BIN=path] [ITERATIONS=300] [PRS=300] [PHASES="latency org economy"]
#        [SHAPE=real|small] [ANSWERS=file] [REAL_REPO=git-dir REPLAY=N [REAL_FOLDER=prefix] [REAL_NAME=owner/name]] bench/context.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ITERATIONS="${ITERATIONS:-300}"
PRS="${PRS:-300}"
PHASES="${PHASES:-latency org economy}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 TEAMMEM_BENCH_SECRET=unused PYTHONDONTWRITEBYTECODE=1
DRIVER="$ROOT/bench/context/driver.py"

steal() { awk '/^cpu / {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
STEAL_BEFORE="$(steal)"

# WIKI PAGES: a bare wiki at WIKI of about PAGES agent-shaped pages.
make_wiki() {
    git init -q --bare -b master "$1"
    python3 "$ROOT/bench/wiki/make_wiki.py" "$2" agent | git -C "$1" fast-import --quiet
}
# source_entry NAME WIKI: one [[sources]] entry (an empty source repository).
source_entry() {
    git init -q -b main "$WORK/src-$1"
    printf '\n[[sources]]\nrepository = "bench/%s"\nlocal_path = "%s"\nlocal_wiki_path = "%s"\nwebhook_secret_env = "TEAMMEM_BENCH_SECRET"\n' \
        "$1" "$WORK/src-$1" "$2"
}

# 1. latency on ~1,000 and ~10,000 pages.
for pages in 1000 10000; do
    [[ " $PHASES " == *" latency "* ]] || break
    make_wiki "$WORK/wiki-$pages.git" "$pages"
    mkdir -m 700 "$WORK/data-$pages"
    { printf '[server]\ndata_dir = "%s"\n' "$WORK/data-$pages"; source_entry "app$pages" "$WORK/wiki-$pages.git"; } > "$WORK/$pages.toml"
    areas=$((pages / 10))
    paths=()
    for k in 0 1 2 3 4; do paths+=("$(printf 'svc%04d/mod_%02d.py' $((k * (areas - 1) / 4)) $((k * 2)))"); done
    python3 "$DRIVER" context "$BIN" "$WORK/$pages.toml" "bench/app$pages" \
        "a $(git -C "$WORK/wiki-$pages.git" ls-tree -r master | wc -l)-page wiki ($(du -sh "$WORK/wiki-$pages.git" | cut -f1) packed)" \
        "$ITERATIONS" "${paths[@]}"
done

# 2. org search over 100 wikis.
if [[ " $PHASES " == *" org "* ]]; then
mkdir -m 700 "$WORK/data-org"
{
    printf '[server]\ndata_dir = "%s"\n' "$WORK/data-org"
    for n in $(seq -w 1 100); do
        make_wiki "$WORK/org-$n.git" 100
        source_entry "org$n" "$WORK/org-$n.git"
    done
} > "$WORK/org.toml"
python3 "$DRIVER" org "$BIN" "$WORK/org.toml" "$ITERATIONS"
fi

# 3. the token economy on a recorded history.
if [[ " $PHASES " == *" economy "* ]]; then
    echo "building the tokenizer check (release, bench feature)" >&2
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" --features bench --example count_tokens
    export COUNT_TOKENS="$ROOT/target/release/examples/count_tokens"
    if [ -n "${REAL_REPO:-}" ]; then
        [ "${REPLAY:-0}" -gt 0 ] || { echo "REAL_REPO needs REPLAY=N (the last N first-parent merges to replay)" >&2; exit 2; }
        git -C "$REAL_REPO" rev-parse --verify -q HEAD >/dev/null || { echo "REAL_REPO=$REAL_REPO is not a git repository with a HEAD" >&2; exit 2; }
        first_parent_pushes "$REAL_REPO" "$WORK/pushes.txt"
        keep_last_merges "$WORK/pushes.txt" "$REPLAY"
        python3 "$ROOT/bench/context/real.py" "$BIN" "$WORK/economy" "$(cd "$REAL_REPO" && pwd)" "$WORK/pushes.txt"
    else
        python3 "$ROOT/bench/context/economy.py" "$BIN" "$ROOT" "$WORK/economy" "$PRS"
    fi
fi

STEAL_AFTER="$(steal)"
python3 - "$STEAL_BEFORE" "$STEAL_AFTER" "$BIN" <<'PY'
import os, sys
(s0, t0), (s1, t1) = (map(int, a.split()) for a in sys.argv[1:3])
print(f"conditions: {os.cpu_count()} cores, CPU stolen during the run {100 * (s1 - s0) / max(1, t1 - t0):.1f} %, "
      f"load average {open('/proc/loadavg').read().split()[0]}, binary {sys.argv[3]}")
PY

# shellcheck shell=bash
# bench/lib.sh: what the benchmark scripts share. Sourced, not run:
#   . "$ROOT/bench/lib.sh"

# Sets BIN to the teammem binary to measure: $TEAMMEM_BIN when set (e.g. a
# debug build), else a release build of this checkout (built here).
# shellcheck disable=SC2034 # BIN is the caller's
teammem_bin() {
    if [ -n "${TEAMMEM_BIN:-}" ]; then
        BIN="$TEAMMEM_BIN"
    else
        echo "building teammem (release)" >&2
        cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
        BIN="$ROOT/target/release/teammem"
    fi
}

# wait_healthy PORT LOG: waits up to 10 s for the daemon on PORT to answer
# /healthz; if it never does, prints its LOG and exits the script.
wait_healthy() {
    local port="$1" log="$2"
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$log"; exit 1; }
}

# relax_limits BIN CONFIG: lets the bench's own token poll as fast as it
# likes (a [limits] section), when BIN knows the section (a baseline build
# may not: then CONFIG stays as it was).
relax_limits() {
    local bin="$1" config="$2"
    cp "$config" "$config.strict"
    printf '\n[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\n' >> "$config"
    if "$bin" check-config --config "$config" >/dev/null 2>&1; then
        rm -f "$config.strict"
    else
        mv "$config.strict" "$config"
    fi
}


# first_parent_pushes SRC OUT: writes to OUT one line "BEFORE AFTER 1" per
# first-parent merge of SRC's HEAD (a commit with two or more parents, or
# whose subject names a PR: `Merge pull request #N from …`, `Title (#N)`),
# oldest first; a direct commit rides in the next merge's range. SRC is read
# in place, never changed. Used by bench/history.sh and bench/context.sh
# (REPLAY).
first_parent_pushes() {
    local src="$1" out="$2"
    git -C "$src" log --first-parent --reverse --format='%H%x09%P%x09%s' HEAD | python3 -c '
import re, sys
# As teammem reads a subject (src/forge/pull_subject.rs): a number above 0,
# a title before ` (#N)`.
pr = re.compile(r"^Merge pull request #0*[1-9][0-9]* from |^.*\S.* \(#0*[1-9][0-9]*\)\s*$")
prev = None
for line in sys.stdin:
    sha, parents, subject = line.rstrip("\n").split("\t", 2)
    parents = parents.split()
    if prev is not None and (len(parents) > 1 or pr.search(subject)):
        print(prev, sha, 1)
        prev = sha
    elif prev is None:
        prev = sha
' > "$out"
}

# keep_last_merges PUSHES N: keeps in the file PUSHES ("BEFORE AFTER MERGES"
# lines, oldest first) only the pushes that hold the last N merges.
keep_last_merges() {
    python3 - "$1" "$2" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
pushes = [l.split() for l in open(path) if l.strip()]
kept, merges = [], 0
for p in reversed(pushes):
    if merges >= n:
        break
    kept.append(p)
    merges += int(p[2])
open(path, "w").write("".join(" ".join(p) + "\n" for p in reversed(kept)))
PY
}

#!/usr/bin/env bash
# bench/tree.sh — what the builtin agent's current-state pages (What is here,
# Dependencies.md) cost on a large source tree: two `teammem serve` daemons
# with the builtin agent on the local forge, one on a source of FILES files
# (20 top-level areas, each file a Python module with a docstring, plus a
# pyproject.toml), one on a source of the same shape with one file per area.
# Both sources get the same PRS squash-merged pull requests, each touching one
# file in every area, so every job re-derives all 20 area pages and
# Dependencies.md. Each PR's range is dispatched to both daemons in turn (the
# order alternates, so host noise falls on both alike) and each job is
# followed to its end.
#
# Prints, per daemon, the p50 and max of the job's run time (`started_at` →
# `finished_at`: claim, evidence, the agent's reads and plan, the wiki
# commit and its receipt check), the difference of the p50s (what the
# large tree adds: listing it and reading the heads of the files listed),
# the cores and the CPU stolen during the run.
#
# Invariant: the run fails unless every job succeeded and each large-tree
# area page's "What is here" says how many files it did not list.
# Usage: [TEAMMEM_BIN=path] bench/tree.sh [FILES] [PRS]   (defaults 10000 and 9)
set -euo pipefail

FILES="${1:-10000}"
PRS="${2:-9}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill ${PIDS:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

# A source: FILES modules over 20 areas and a manifest at the root, then PRS
# squash merges each changing one module per area.
make_source() { # DIR FILES
    git init -q -b main "$1"
    python3 - "$1" "$2" "$PRS" <<'PY'
import subprocess, sys
repo, files, prs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
areas = 20
per_area = max(1, files // areas)
def module(area, i, version):
    return (f'"""Module {i} of area {area}: reads the records of kind {i} and writes their summaries."""\n\n'
            f"VERSION = {version}\n")
def blob(path, text):
    return f"M 100644 inline {path}\ndata {len(text.encode())}\n{text}\n"
def commit(i, message, changes):
    head = (f"commit refs/heads/main\nauthor Dev{i % 7} <dev@example.org> {1767225600 + i} +0000\n"
            f"committer B <b@example.org> {1767225600 + i} +0000\ndata {len(message.encode())}\n{message}\n")
    return head + "".join(changes)
manifest = '[project]\nname = "app"\ndependencies = [\n  "flask>=3.0",\n  "pydantic>=2.5",\n  "requests==2.32.3",\n]\n'
parts = [commit(0, "The tree\n", [blob("pyproject.toml", manifest)] +
                [blob(f"area{a:02}/module_{i:05}.py", module(a, i, 0))
                 for a in range(areas) for i in range(per_area)])]
for n in range(1, prs + 1):
    parts.append(commit(n, f"Change {n} of every area (#{n})\n\nWhy change {n} was needed.\n",
                        [blob(f"area{a:02}/module_{n % per_area:05}.py", module(a, n % per_area, n))
                         for a in range(areas)]))
subprocess.run(["git", "-C", repo, "fast-import", "--quiet", "--force"], input="".join(parts).encode(), check=True)
PY
    git -C "$1" commit-graph write --reachable
}
make_source "$WORK/large" "$FILES"
make_source "$WORK/small" 20

SECRET="bench-secret-$(od -An -tx8 -N16 /dev/urandom | tr -d ' \n')"
export TEAMMEM_BENCH_SECRET="$SECRET"
start_daemon() { # NAME -> appends "NAME:PORT:TOKEN" to DAEMONS, PID to PIDS
    local name="$1" port token
    port="$(bash "$ROOT/bench/listen-port.sh")"
    bash "$ROOT/bench/seed-wiki.sh" "$WORK/wiki-$name.git"
    cat > "$WORK/$name.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
data_dir = "$WORK/data-$name"

[[sources]]
repository = "bench/app"
local_path = "$WORK/$name"
local_wiki_path = "$WORK/wiki-$name.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"
TOML
    relax_limits "$BIN" "$WORK/$name.toml"
    token="$("$BIN" tokens create --name bench --config "$WORK/$name.toml" 2>/dev/null | tail -n 1)"
    TEAMMEM_LOG="${TEAMMEM_LOG:-warn}" "$BIN" serve --config "$WORK/$name.toml" > "$WORK/$name.log" 2>&1 &
    PIDS="${PIDS:-} $!"
    wait_healthy "$port" "$WORK/$name.log"
    DAEMONS="${DAEMONS:-} $name:$port:$token"
}
start_daemon large
start_daemon small

steal() { awk '/^cpu / {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
STEAL_BEFORE="$(steal)"
# shellcheck disable=SC2086 # one argument per daemon
python3 - "$WORK" "$SECRET" "$FILES" $DAEMONS <<'PY'
import hashlib, hmac, json, subprocess, sys, time, urllib.request, uuid
work, secret, files = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
daemons = [dict(zip(("name", "port", "token"), d.split(":", 2))) for d in sys.argv[4:]]
for d in daemons:
    d["shas"] = subprocess.check_output(["git", "-C", f"{work}/{d['name']}", "rev-list", "--reverse", "main"]).decode().split()
    d["runs"] = []

def call(d, method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{d['port']}" + path, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())

def run(d, i):
    body = json.dumps({"source_repository": "bench/app", "kind": "range",
                       "push_before": d["shas"][i - 1], "push_after": d["shas"][i]}).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    answer = call(d, "POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                  "X-Hub-Signature-256": sig, "X-TeamMem-Delivery": str(uuid.uuid4())})
    job_id = answer["job_id"]
    while True:
        job = call(d, "GET", f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {d['token']}"})["job"]
        if job["state"] not in ("queued", "running"):
            break
        time.sleep(0.005)
    if job["state"] != "succeeded":
        sys.exit(f"ERROR: {d['name']} job {job_id} ended {job['state']}: {job.get('last_error')}")
    d["runs"].append(job["finished_at"] - job["started_at"])

for i in range(1, len(daemons[0]["shas"])):
    for d in (daemons if i % 2 else daemons[::-1]):
        run(d, i)

for d in daemons:
    runs = sorted(d["runs"])
    d["p50"] = runs[len(runs) // 2]
    print(f"[{d['name']}] {len(runs)} jobs, each re-deriving 20 area pages and Dependencies.md: run time p50 {d['p50']:.0f} ms, max {runs[-1]:.0f} ms")
large, small = daemons
print(f"current-state pages on a {files}-file tree: p50 {large['p50']:.0f} ms per job, "
      f"{large['p50'] - small['p50']:.0f} ms more than on a 20-file tree ({large['p50'] / small['p50']:.2f}x)")
for area in range(20):
    page = subprocess.check_output(["git", "-C", f"{work}/wiki-large.git", "show", f"master:Area-area{area:02}.md"]).decode()
    if files // 20 > 200 and "more files are not listed" not in page:
        sys.exit(f"ERROR: Area-area{area:02}.md does not say how many files it left out")
PY
STEAL_AFTER="$(steal)"
python3 - "$STEAL_BEFORE" "$STEAL_AFTER" <<'PY'
import sys
(s0, t0), (s1, t1) = (map(int, a.split()) for a in sys.argv[1:3])
print(f"cores: {__import__('os').cpu_count()}, CPU stolen during the run: {100 * (s1 - s0) / max(1, t1 - t0):.1f} %, load average: {open('/proc/loadavg').read().split()[0]}")
PY

#!/usr/bin/env bash
# bench/e2e.sh — dispatch → wiki commit, end to end, on the local forge with
# the builtin agent: a real `teammem serve`, a local source with COUNT
# squash-merged pull requests (one per commit, spread over 8 areas) and a bare
# wiki. Each dispatch names one merged PR's range; the driver signs it, sends
# it, and follows the job to its end. Prints p50/p99 dispatch → wiki-commit
# latency and wiki commits/s.
#
# Invariants: every dispatch is distinct and correctly signed; latency is
# measured from just before the request is sent to the job's `finished_at`
# (the daemon's clock, same machine), which comes after the wiki commit and
# its receipt check, so it is an upper bound on dispatch → wiki commit; the run
# fails unless every PR's full merge sha ends up in Changelog.md exactly once.
#
# Modes: RATE=0 (default) dispatches the next PR when the previous job ended
# (isolated latency); RATE=N sends N dispatches/s open-loop (queueing and
# coalescing of contiguous queued ranges show up in the latency).
#
# Prints the daemon's resident memory after the run too (bench/startup.sh
# measures it idle).
#
# Then the `command`-agent phase: two more daemons on the same source, each
# with its own wiki, run a small scripted agent (Python: snapshot, evidence,
# one write, receipt) through `teammem mcp --connect`; one with the kernel
# sandbox (`agent.sandbox = "on"`), one with `agent.sandbox = "off"`. The
# first CMD_COUNT PR ranges are dispatched to both, alternating, one job at a
# time; it prints each p50 and the ratio (target: sandboxed ≤ 1.2× unsandboxed).
#
# With BASELINE_REF=<commit> (or BASELINE_BIN=path) the builtin phase runs the
# previous build too, on its own daemon and wiki, each PR's range dispatched
# to both in turn, and prints the ratio of the p50s (target for a richer
# builtin agent: current ≤ 1.5× baseline).
# Usage: [TEAMMEM_BIN=path] [BASELINE_REF=rev | BASELINE_BIN=path] [RATE=0] [CMD_COUNT=30] bench/e2e.sh [COUNT]
set -euo pipefail

COUNT="${1:-200}"
RATE="${RATE:-0}"
CMD_COUNT="${CMD_COUNT:-30}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
# shellcheck disable=SC2086 # BUILTIN_PIDS is a list
trap 'kill ${BUILTIN_PIDS:-} "${ON_PID:-}" "${OFF_PID:-}" 2>/dev/null || true; [ -n "${BASELINE_TREE:-}" ] && git -C "$ROOT" worktree remove --force "$BASELINE_TREE"; rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin

# The previous build, measured in the same run: BASELINE_BIN (a binary) or
# BASELINE_REF (a commit, built in a temporary worktree; its own target
# directory under target/, so later runs build only what changed).
BASELINE="${BASELINE_BIN:-}"
if [ -z "$BASELINE" ] && [ -n "${BASELINE_REF:-}" ]; then
    BASELINE_TREE="$WORK/baseline-tree"
    git -C "$ROOT" worktree add --quiet --detach "$BASELINE_TREE" "$BASELINE_REF"
    echo "building the baseline $BASELINE_REF (release)" >&2
    CARGO_TARGET_DIR="$ROOT/target/baseline" cargo build --release --quiet --manifest-path "$BASELINE_TREE/Cargo.toml"
    BASELINE="$ROOT/target/baseline/release/teammem"
fi

export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

# The source: a root commit, then COUNT squash merges "Change i (#i)".
git init -q -b main "$WORK/src"
git -C "$WORK/src" -c user.name=b -c user.email=b@example.org commit -q --allow-empty -m root
python3 - "$WORK/src" "$COUNT" <<'PY'
import subprocess, sys
repo, count = sys.argv[1], int(sys.argv[2])
parent = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"]).decode().strip()
parts = []
for i in range(1, count + 1):
    msg = f"Change {i} of the benchmark (#{i})\n\nBody of pull request {i}.\n"
    parts.append(f"commit refs/heads/main\nauthor Dev{i % 7} <dev@example.org> {1767225600 + i} +0000\n"
                 f"committer B <b@example.org> {1767225600 + i} +0000\ndata {len(msg.encode())}\n{msg}\n")
    if i == 1:
        parts.append(f"from {parent}\n")
    body = f"line {i}\n"
    parts.append(f"M 100644 inline area{i % 8}/file{i}.txt\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "-C", repo, "fast-import", "--quiet", "--force"], input="".join(parts).encode(), check=True)
PY
git -C "$WORK/src" commit-graph write --reachable

SECRET="bench-secret-$(od -An -tx8 -N16 /dev/urandom | tr -d ' \n')"
export TEAMMEM_BENCH_SECRET="$SECRET"

# One daemon per binary under test, each with its own wiki (a bare repository
# whose first commit holds Home.md) and data directory, on the same source.
start_builtin_daemon() { # NAME BINARY -> appends "NAME:PORT:TOKEN" to DAEMONS, PID to BUILTIN_PIDS
    local name="$1" bin="$2" port token
    port="$(bash "$ROOT/bench/listen-port.sh")"
    bash "$ROOT/bench/seed-wiki.sh" "$WORK/wiki-$name.git"
    cat > "$WORK/$name.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
data_dir = "$WORK/data-$name"

[[sources]]
repository = "bench/app"
local_path = "$WORK/src"
local_wiki_path = "$WORK/wiki-$name.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[queue]
workers = 2
TOML
    relax_limits "$bin" "$WORK/$name.toml"
    token="$("$bin" tokens create --name bench --config "$WORK/$name.toml" 2>/dev/null | tail -n 1)"
    TEAMMEM_LOG="${TEAMMEM_LOG:-warn}" "$bin" serve --config "$WORK/$name.toml" > "$WORK/$name.log" 2>&1 &
    BUILTIN_PIDS="${BUILTIN_PIDS:-} $!"
    wait_healthy "$port" "$WORK/$name.log"
    DAEMONS="${DAEMONS:-} $name:$port:$token"
}
if [ -n "$BASELINE" ]; then
    start_builtin_daemon baseline "$BASELINE"
fi
start_builtin_daemon current "$BIN"
DAEMON_PID="${BUILTIN_PIDS##* }"

# shellcheck disable=SC2086 # one argument per daemon
python3 - "$WORK" "$SECRET" "$RATE" $DAEMONS <<'PY'
import hashlib, hmac, json, subprocess, sys, time, urllib.request, uuid
work, secret, rate = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3])
daemons = [dict(zip(("name", "port", "token"), d.split(":", 2))) for d in sys.argv[4:]]
shas = subprocess.check_output(["git", "-C", f"{work}/src", "rev-list", "--reverse", "main"]).decode().split()
for d in daemons:
    d["wiki"] = f"{work}/wiki-{d['name']}.git"
    d["wiki_start"] = int(subprocess.check_output(["git", "-C", d["wiki"], "rev-list", "--count", "master"]))
    d["sent"] = []

def call(d, method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{d['port']}" + path, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())

def dispatch(d, before, after):
    body = json.dumps({"source_repository": "bench/app", "kind": "range",
                       "push_before": before, "push_after": after}).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    sent = time.time() * 1000
    answer = call(d, "POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                  "X-Hub-Signature-256": sig, "X-TeamMem-Delivery": str(uuid.uuid4())})
    return sent, answer.get("coalesced_into") or answer["job_id"]

def job(d, job_id):
    return call(d, "GET", f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {d['token']}"})["job"]

def wait(d, job_id):
    while True:
        j = job(d, job_id)
        if j["state"] not in ("queued", "running"):
            return j
        time.sleep(0.005)

# With two daemons each PR's range goes to both in turn (alternating which
# goes first), so host noise falls on both alike.
began = time.time() * 1000
for i in range(1, len(shas)):
    order = daemons if i % 2 else daemons[::-1]
    for d in order:
        d["sent"].append(dispatch(d, shas[i - 1], shas[i]))
        if rate <= 0:
            wait(d, d["sent"][-1][1])
    if rate > 0:
        time.sleep(max(0.0, began / 1000 + i / rate - time.time()))

mode = "sequential (next dispatch after the previous job ended)" if rate <= 0 else f"open loop at {rate:g} dispatches/s"
failed = []
for d in daemons:
    latencies, states = [], {}
    for at, job_id in d["sent"]:
        j = wait(d, job_id)
        states[j["state"]] = states.get(j["state"], 0) + 1
        latencies.append(j["finished_at"] - at)
    ended = max(at + l for (at, _), l in zip(d["sent"], latencies))
    latencies.sort()
    pct = lambda p: latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))]
    d["p50"] = pct(50)
    commits = int(subprocess.check_output(["git", "-C", d["wiki"], "rev-list", "--count", "master"])) - d["wiki_start"]
    changelog = subprocess.check_output(["git", "-C", d["wiki"], "show", "master:Changelog.md"]).decode()
    missing = [s for s in shas[1:] if changelog.count(f"<!-- teammem:{s} -->") != 1]
    seconds = (ended - began) / 1000
    print(f"[{d['name']}] dispatches: {len(d['sent'])}, mode: {mode}, job states: {states}")
    print(f"[{d['name']}] dispatch -> wiki commit latency (ms, upper bound: job finished_at): p50 {pct(50):.0f}, p99 {pct(99):.0f}, max {latencies[-1]:.0f}")
    print(f"[{d['name']}] wiki commits: {commits} in {seconds:.2f} s = {commits / seconds:.1f} commits/s ({len(d['sent']) / seconds:.1f} dispatches/s)")
    if commits != len(d["sent"]) and rate <= 0:
        failed.append(f"{d['name']}: {commits} wiki commits for {len(d['sent'])} jobs (one commit per job)")
    if missing:
        failed.append(f"{d['name']}: {len(missing)} merge shas are not in Changelog.md exactly once (first: {missing[0]})")
if len(daemons) == 2:
    base, cur = daemons
    print(f"current / baseline p50: {cur['p50'] / base['p50']:.2f}x (target: <= 1.5x)")
if failed:
    sys.exit("ERROR: " + "; ".join(failed))
PY
echo "daemon RSS after the run: $(awk '/VmRSS/ {print $2 " " $3}' /proc/$DAEMON_PID/status), peak $(awk '/VmHWM/ {print $2 " " $3}' /proc/$DAEMON_PID/status)"
# shellcheck disable=SC2086
kill $BUILTIN_PIDS; wait 2>/dev/null || true

# --- the command-agent phase: sandbox on against off ------------------------
# CMD_COUNT=0 skips it.
[ "$CMD_COUNT" -gt 0 ] || exit 0
mkdir -p "$WORK/agent"
cp "$ROOT/tests/it/runner/mcp_client.py" "$WORK/agent/"
cat > "$WORK/agent/agent.py" <<'PY'
import json, sys
from mcp_client import Writer, receipt
config_path, receipt_path = sys.argv[1], sys.argv[2]
data = json.loads(sys.stdin.read().strip().splitlines()[-1])
writer = Writer(config_path)
repo = data["repository"]
snap = writer.result("get_wiki_snapshot", {"repository": repo})
prs = data["evidence"]["pull_requests"]
page = "Log-%d.md" % prs[0]["number"]
w = writer.result("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snap["wiki_repository"],
    "expected_base": snap["sha"], "message": "bench",
    "pages": [{"path": page, "content": "".join("- #%d %s\n" % (p["number"], p["merge_sha"]) for p in prs)}]})
json.dump(receipt(snap, w, prs, [page]), open(receipt_path, "w"))
writer.close()
PY
PYTHON="$(python3 -c 'import sys; print(sys.executable)')"
PYPREFIX="$(python3 -c 'import sys; print(sys.base_prefix)')"
start_agent_daemon() { # NAME SANDBOX -> sets PORT_<NAME>, <NAME>_PID
    local name="$1" sandbox="$2" port
    port="$(bash "$ROOT/bench/listen-port.sh")"
    bash "$ROOT/bench/seed-wiki.sh" "$WORK/wiki-$name.git"
    cat > "$WORK/$name.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
data_dir = "$WORK/data-$name"

[[sources]]
repository = "bench/app"
local_path = "$WORK/src"
local_wiki_path = "$WORK/wiki-$name.git"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[queue]
workers = 1

[agent]
kind = "command"
argv = ["$PYTHON", "$WORK/agent/agent.py", "{mcp_config}", "{receipt}"]
timeout_seconds = 60
sandbox = "$sandbox"
read_paths = ["$PYPREFIX", "$WORK/agent"]
TOML
    relax_limits "$BIN" "$WORK/$name.toml"
    "$BIN" tokens create --name bench --config "$WORK/$name.toml" 2>/dev/null | tail -n 1 > "$WORK/$name.token"
    TEAMMEM_LOG="${TEAMMEM_LOG:-warn}" "$BIN" serve --config "$WORK/$name.toml" > "$WORK/daemon-$name.log" 2>&1 &
    echo "$!" > "$WORK/$name.pid"
    echo "$port" > "$WORK/$name.port"
    wait_healthy "$port" "$WORK/daemon-$name.log"
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$WORK/daemon-$name.log"; curl -sS "http://127.0.0.1:$port/readyz"; exit 1; }
}
start_agent_daemon on on
start_agent_daemon off off
ON_PID="$(cat "$WORK/on.pid")" OFF_PID="$(cat "$WORK/off.pid")"

python3 - "$WORK" "$SECRET" "$CMD_COUNT" <<'PY'
import hashlib, hmac, json, subprocess, sys, time, urllib.request, uuid
work, secret, count = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
shas = subprocess.check_output(["git", "-C", f"{work}/src", "rev-list", "--reverse", "main"]).decode().split()
count = min(count, len(shas) - 1)
daemons = {n: (open(f"{work}/{n}.port").read().strip(), open(f"{work}/{n}.token").read().strip()) for n in ("on", "off")}

def call(name, method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{daemons[name][0]}{path}", data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())

def run(name, before, after):
    body = json.dumps({"source_repository": "bench/app", "kind": "range", "push_before": before, "push_after": after}).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    sent = time.time() * 1000
    job_id = call(name, "POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                  "X-Hub-Signature-256": sig, "X-TeamMem-Delivery": str(uuid.uuid4())})["job_id"]
    while True:
        j = call(name, "GET", f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {daemons[name][1]}"})["job"]
        if j["state"] not in ("queued", "running"):
            break
        time.sleep(0.005)
    if j["state"] != "succeeded":
        sys.exit(f"ERROR: the {name} job {job_id} ended {j['state']}: {j.get('last_error')}")
    return j["finished_at"] - sent

def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)

lat = {"on": [], "off": []}
s0, t0 = steal()
for i in range(1, count + 1):
    order = ("on", "off") if i % 2 else ("off", "on")
    for name in order:
        lat[name].append(run(name, shas[i - 1], shas[i]))
s1, t1 = steal()
p50 = lambda xs: sorted(xs)[len(xs) // 2]
on, off = p50(lat["on"]), p50(lat["off"])
print(f"command agent, {count} jobs each, alternating (host CPU stolen {100 * (s1 - s0) / max(1, t1 - t0):.1f}%):")
print(f"  sandbox on : p50 {on:.0f} ms, max {max(lat['on']):.0f} ms")
print(f"  sandbox off: p50 {off:.0f} ms, max {max(lat['off']):.0f} ms")
print(f"  ratio on/off: {on / off:.2f} (target <= 1.2: {'met' if on / off <= 1.2 else 'NOT met'})")
PY

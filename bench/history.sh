#!/usr/bin/env bash
# bench/history.sh — a long history through the real daemon: replays the last
# N first-parent merges of a local git repository through `teammem serve`
# (release build, local forge, builtin agent, two workers), one signed range
# dispatch per push, each push's job let out of `queued` before the next push
# is sent (so jobs stay one per push, as pushes minutes apart would be), then
# waits for the queue to drain and prints:
#   jobs by state; PRs recorded of PRs expected; job run time (claimed →
#   finished) p50/p99 for the first and the last third of the jobs and the
#   ratio of their p50s; the wiki's size and page count; the daemon's peak RSS
#   (VmHWM); CPU stolen during the replay;
# and pass/fail for each target: 0 failed jobs; last-third p50 ≤ 1.5×
# first-third p50 (a job's cost must not grow with history); peak RSS < 100 MB.
#
# REPO_PATH defaults to the generated 1,500-PR history (bench/history/'s
# gen-history, the same generator as tests/it/history.rs; HISTORY_PRS and
# HISTORY_SEED change it), whose pushes (some bring several merges) are
# replayed as generated. Any other repository is replayed one dispatch per
# first-parent merge (a commit with two or more parents, or whose subject
# names a PR: `Merge pull request #N from …`, `Title (#N)`); it is read in
# place, never changed.
#
# PRs expected: the distinct numbers the commit subjects of the replayed
# ranges name (first-parent and merged-in commits alike); recorded: those
# whose merge commit's entry (`<!-- teammem:SHA -->`) is on a Changelog page
# (current or quarter archive).
#
# Usage: [TEAMMEM_BIN=path] [HISTORY_PRS=1500] [HISTORY_SEED=36] bench/history.sh [REPO_PATH|-] [N]
set -euo pipefail

REPO="${1:--}"
N="${2:-0}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill "${DAEMON_PID:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
teammem_bin
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

PUSHES="$WORK/pushes.txt"
if [ "$REPO" = "-" ]; then
    echo "building gen-history (release)" >&2
    cargo build --release --quiet --manifest-path "$ROOT/bench/history/Cargo.toml"
    SRC="$WORK/src"
    started=$(date +%s%N)
    "$ROOT/bench/history/target/release/gen-history" "$SRC" "${HISTORY_PRS:-1500}" "${HISTORY_SEED:-36}" > "$WORK/generated.txt"
    grep '^push ' "$WORK/generated.txt" | cut -d' ' -f2- > "$PUSHES"
    echo "generated ${HISTORY_PRS:-1500} PRs in $(( ($(date +%s%N) - started) / 1000000 )) ms at $SRC" >&2
else
    SRC="$(cd "$REPO" && pwd)"
    git -C "$SRC" rev-parse --verify -q HEAD >/dev/null || { echo "$REPO is not a git repository with a HEAD" >&2; exit 2; }
    first_parent_pushes "$SRC" "$PUSHES"
fi
[ "$N" -le 0 ] || keep_last_merges "$PUSHES" "$N"
[ -s "$PUSHES" ] || { echo "no merges to replay in $SRC" >&2; exit 2; }

SECRET="bench-secret-$(od -An -tx8 -N16 /dev/urandom | tr -d ' \n')"
export TEAMMEM_BENCH_SECRET="$SECRET"
PORT="$(bash "$ROOT/bench/listen-port.sh")"
WIKI="$WORK/wiki.git"
bash "$ROOT/bench/seed-wiki.sh" "$WIKI"
cat > "$WORK/teammem.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"
data_dir = "$WORK/data"

[[sources]]
repository = "bench/history"
local_path = "$SRC"
local_wiki_path = "$WIKI"
webhook_secret_env = "TEAMMEM_BENCH_SECRET"

[queue]
workers = 2
TOML
relax_limits "$BIN" "$WORK/teammem.toml"
TOKEN="$("$BIN" tokens create --name bench --config "$WORK/teammem.toml" 2>/dev/null | tail -n 1)"
TEAMMEM_LOG="${TEAMMEM_LOG:-warn}" "$BIN" serve --config "$WORK/teammem.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_healthy "$PORT" "$WORK/daemon.log"

python3 - "$PORT" "$TOKEN" "$SECRET" "$PUSHES" "$SRC" "$WIKI" "$DAEMON_PID" <<'PY'
import hashlib, hmac, json, re, subprocess, sys, time, urllib.error, urllib.request, uuid
port, token, secret, pushes_path, src, wiki, pid = sys.argv[1:8]
secret = secret.encode()
pushes = [l.split() for l in open(pushes_path) if l.strip()]

def call(method, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")

def job(job_id):
    return call("GET", f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})[1]["job"]

def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)

s0, t0 = steal()
began = time.time()
ids, refused = [], []
for k, (before, after, _) in enumerate(pushes):
    body = json.dumps({"source_repository": "bench/history", "kind": "range",
                       "source_run_id": 100000 + k, "source_run_attempt": 1,
                       "push_before": before, "push_after": after}).encode()
    sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    status, answer = call("POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                          "X-Hub-Signature-256": sig, "X-TeamMem-Delivery": str(uuid.uuid4())})
    if status not in (200, 202):
        refused.append(f"{before[:10]}..{after[:10]}: {status} {answer}")
        continue
    job_id = answer.get("coalesced_into") or answer["job_id"]
    if not ids or ids[-1] != job_id:
        ids.append(job_id)
    while job(job_id)["state"] == "queued":
        time.sleep(0.005)
jobs = {}
for job_id in ids:
    while True:
        j = job(job_id)
        if j["state"] not in ("queued", "running"):
            jobs[job_id] = j
            break
        time.sleep(0.01)
elapsed = time.time() - began
s1, t1 = steal()
with open(f"/proc/{pid}/status") as f:
    hwm_kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))

states = {}
for j in jobs.values():
    states[j["state"]] = states.get(j["state"], 0) + 1

# PRs expected: subjects naming a PR in the replayed ranges.
# As teammem reads a subject (src/forge/pull_subject.rs).
pr = re.compile(r"^Merge pull request #(0*[1-9][0-9]*) from |^.*\S.* \(#(0*[1-9][0-9]*)\)\s*$")
expected = {}
for before, after, _ in pushes:
    log = subprocess.run(["git", "-C", src, "log", "--format=%H%x09%s", f"{before}..{after}"],
                         capture_output=True, check=True).stdout.decode("utf-8", "replace")
    for line in log.splitlines():
        sha, _, subject = line.partition("\t")
        m = pr.search(subject)
        if m:
            expected.setdefault(int(m.group(1) or m.group(2)), set()).add(sha)
names = subprocess.run(["git", "-C", wiki, "ls-tree", "-r", "-z", "--name-only", "master"],
                       capture_output=True, check=True).stdout.split(b"\0")
pages = [n.decode("utf-8", "replace") for n in names if n.endswith(b".md")]
batch = subprocess.run(["git", "-C", wiki, "cat-file", "--batch"], capture_output=True, check=True,
                       input="".join(f"master:{p}\n" for p in pages).encode()).stdout
texts, rest, size_bytes = {}, batch, 0
for p in pages:
    header, _, rest = rest.partition(b"\n")
    n = int(header.split()[-1])
    texts[p], rest = rest[:n].decode("utf-8", "replace"), rest[n + 1:]
    size_bytes += n
changelog = "".join(t for p, t in texts.items() if p.startswith("Changelog"))
recorded = sum(1 for shas in expected.values() if any(f"<!-- teammem:{s} -->" in changelog for s in shas))
objects = dict(l.split(": ") for l in subprocess.run(["git", "-C", wiki, "count-objects", "-v"],
               capture_output=True, check=True, text=True).stdout.splitlines())
wiki_kib = int(objects["size"]) + int(objects["size-pack"])
wiki_commits = int(subprocess.run(["git", "-C", wiki, "rev-list", "--count", "master"],
                                  capture_output=True, check=True, text=True).stdout)

runs = [(j["id"], j["finished_at"] - j["started_at"]) for j in sorted(jobs.values(), key=lambda j: j["id"])
        if j.get("started_at") and j.get("finished_at")]
third = max(1, len(runs) // 3)
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")
first = [r for _, r in runs[:third]]
last = [r for _, r in runs[-third:]]
ratio = pct(last, 50) / max(1e-9, pct(first, 50))
failed = states.get("failed", 0)
merges = sum(int(p[2]) for p in pushes)

print(f"source: {src}; {len(pushes)} pushes bringing {merges} first-parent merges, replayed in {elapsed:.1f} s")
print(f"jobs: {len(jobs)} by state {dict(sorted(states.items()))}; dispatches refused: {len(refused)}")
for r in refused[:5]:
    print(f"  refused: {r}")
for j in [j for j in jobs.values() if j["state"] == "failed"][:5]:
    print(f"  failed job {j['id']}: {(j.get('last_error') or '')[:300]}")
print(f"PRs recorded on the Changelog pages: {recorded} of {len(expected)} expected")
print(f"job run time (claimed -> finished, ms): first third ({len(first)} jobs) p50 {pct(first, 50):.0f}, p99 {pct(first, 99):.0f}; "
      f"last third ({len(last)} jobs) p50 {pct(last, 50):.0f}, p99 {pct(last, 99):.0f}; last/first p50 {ratio:.2f}x")
print(f"wiki: {len(pages)} pages, {size_bytes / 1024:.0f} KiB of pages at the tip, {wiki_kib} KiB on disk, {wiki_commits} commits")
print(f"daemon peak RSS (VmHWM): {hwm_kb / 1024:.1f} MB")
print(f"CPU stolen during the replay: {100 * (s1 - s0) / max(1, t1 - t0):.1f}%")
verdict = lambda ok: "pass" if ok else "FAIL"
print("targets:")
print(f"  0 failed jobs: {failed} failed -> {verdict(failed == 0 and not refused)}")
print(f"  last-third p50 <= 1.5x first-third p50: {ratio:.2f}x -> {verdict(ratio <= 1.5)}")
print(f"  peak RSS < 100 MB: {hwm_kb / 1024:.1f} MB -> {verdict(hwm_kb < 100 * 1024)}")
PY

# --- backfill ----------------------------------------------------------------
# Adoption: a fresh daemon and wiki over the same source, `teammem backfill
# --last N` (N = the replay's first-parent merges), timed until the queue has
# drained; target: 1,500 PRs in under 5 minutes on this 2-core machine.
kill "$DAEMON_PID" 2>/dev/null || true
wait "$DAEMON_PID" 2>/dev/null || true
BF="$WORK/backfill"
mkdir -p "$BF"
bash "$ROOT/bench/seed-wiki.sh" "$BF/wiki.git"
sed -e "s|$WORK/data|$BF/data|" -e "s|$WIKI|$BF/wiki.git|" "$WORK/teammem.toml" > "$BF/teammem.toml"
TEAMMEM_LOG="${TEAMMEM_LOG:-warn}" "$BIN" serve --config "$BF/teammem.toml" > "$BF/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_healthy "$PORT" "$BF/daemon.log"
MERGES="$(awk '{n += $3} END {print n}' "$PUSHES")"
started=$(date +%s%N)
"$BIN" backfill --config "$BF/teammem.toml" --repository bench/history --last "$MERGES" > "$BF/backfill.txt" 2>&1 ||
    { cat "$BF/backfill.txt"; exit 1; }
python3 - "$BF/data/teammem.db" "$BF/wiki.git" "$SRC" "$started" "$MERGES" <<'PY'
import sqlite3, subprocess, sys, time
db, wiki, src, started, merges = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
deadline = time.time() + 3600
while True:
    left = con.execute("select count(*) from jobs where state in ('queued', 'running')").fetchone()[0]
    if left == 0 or time.time() > deadline:
        break
    time.sleep(0.5)
wall = (time.time_ns() - started) / 1e9
states = dict(con.execute("select state, count(*) from jobs group by state").fetchall())
pages = subprocess.run(["git", "--git-dir", wiki, "ls-tree", "-r", "--name-only", "master"],
                       capture_output=True, text=True).stdout.split()
text = "".join(subprocess.run(["git", "--git-dir", wiki, "show", f"master:{p}"], capture_output=True,
                              text=True).stdout for p in pages if p.startswith("Changelog"))
import re
recorded = len(set(re.findall(r"<!-- teammem:([0-9a-f]{40}) -->", text)))
print(f"backfill of {merges} first-parent merges: {sum(states.values())} jobs {states}; "
      f"{recorded} PR entries on the Changelog pages; drained in {wall:.1f} s")
for job_id, error in con.execute("select id, last_error from jobs where state = 'failed' limit 5"):
    print(f"  failed backfill job {job_id}: {(error or '')[:600]}")
ok = wall < 300 and states.get("failed", 0) == 0 and left == 0
print(f"  backfill under 5 minutes, no job failed: {'pass' if ok else 'FAIL'}")
PY

#!/usr/bin/env bash
# Product checks against a real daemon with a job in it (`teammem demo`):
#   - `promtool check metrics` (Debian's prometheus package) on a /metrics scrape;
#   - headless Chromium (Debian's chromium) screenshots of the sources page, the
#     jobs list and the job's page, kept as CI artifacts in target/ci-artifacts/;
#   - DOM checks (--dump-dom): the job's row is in the jobs table, and the
#     sources page shows the demo's source as up to date.
# Runs on a clean clone as root; installs what it needs with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== product checks (promtool, the dashboard in headless Chromium)"

artifacts=target/ci-artifacts
mkdir -p "$artifacts"

browser=""
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then browser=$candidate; break; fi
done
if [ -z "$browser" ] || ! command -v promtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  echo "installing prometheus (promtool), chromium and curl with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    prometheus chromium fonts-dejavu-core curl ca-certificates >/dev/null
  browser=chromium
fi

cargo build --quiet --bin teammem
work=$(mktemp -d "${TMPDIR:-/tmp}/teammem-product-checks.XXXXXX")
demo_pid=""
cleanup() {
  if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -INT "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== teammem demo (the daemon for these checks)"
target/debug/teammem demo --port 0 --data-dir "$work/demo" >"$work/demo.out" 2>"$work/demo.err" &
demo_pid=$!
for _ in $(seq 1 1200); do
  if grep -q '^serving until Ctrl-C' "$work/demo.out"; then break; fi
  if ! kill -0 "$demo_pid" 2>/dev/null; then
    echo "teammem demo stopped early:" >&2
    cat "$work/demo.out" "$work/demo.err" >&2
    exit 1
  fi
  sleep 0.1
done
grep -q '^demo ok' "$work/demo.out" || { cat "$work/demo.out" "$work/demo.err" >&2; exit 1; }
url=$(sed -n 's/^dashboard: \(http:[^ ]*\)\/ .*/\1/p' "$work/demo.out")
[ -n "$url" ] || { echo "no dashboard URL in the demo's output" >&2; exit 1; }
echo "daemon at $url"

echo "== promtool check metrics"
curl -fsS "$url/metrics" >"$artifacts/metrics.txt"
promtool check metrics <"$artifacts/metrics.txt"
grep -q '^teammem_jobs{state="succeeded"} 1$' "$artifacts/metrics.txt" ||
  { echo "the scrape does not count the demo's succeeded job" >&2; exit 1; }
echo "metrics: ok"

echo "== dashboard in headless Chromium"
chrome() {
  "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/chrome-profile" --window-size=1280,900 "$@" 2>>"$work/chrome.log"
}
chrome --screenshot="$PWD/$artifacts/sources.png" "$url/"
chrome --screenshot="$PWD/$artifacts/dashboard.png" "$url/jobs"
chrome --screenshot="$PWD/$artifacts/job.png" "$url/jobs/1"
chrome --dump-dom "$url/jobs" >"$artifacts/dashboard.html"
chrome --dump-dom "$url/" >"$artifacts/sources.html"
for png in sources dashboard job; do
  [ -s "$artifacts/$png.png" ] || { echo "no $png screenshot; Chromium said:" >&2; cat "$work/chrome.log" >&2; exit 1; }
done
python3 - "$artifacts/dashboard.html" <<'PY'
import sys
from html.parser import HTMLParser

class Rows(HTMLParser):
    """Collects the cells of each row in the jobs table's body."""
    def __init__(self):
        super().__init__()
        self.in_body = False
        self.rows = []
        self.cell = None
    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag == "td":
            self.cell = ""
        elif self.in_body and tag == "a" and self.rows:
            self.rows[-1].append(("href", dict(attrs).get("href", "")))
    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None
    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

parser = Rows()
parser.feed(open(sys.argv[1], encoding="utf-8").read())
jobs = [r for r in parser.rows if ("href", "/jobs/1") in r]
if not jobs:
    sys.exit(f"the dashboard's DOM has no row for job 1 (rows: {parser.rows})")
row = jobs[0]
for expected in ("succeeded", "demo/todo"):
    if expected not in row:
        sys.exit(f"job 1's row lacks {expected!r}: {row}")
print(f"dashboard DOM: {len(parser.rows)} job row(s); job 1 is {row}")
PY
python3 - "$artifacts/sources.html" <<'PY'
import sys
from html.parser import HTMLParser

class Sources(HTMLParser):
    """The data-attention of each source row of the sources table."""
    def __init__(self):
        super().__init__()
        self.attention = {}
    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-source" in attrs:
            self.attention[attrs["data-source"]] = attrs.get("data-attention")

parser = Sources()
parser.feed(open(sys.argv[1], encoding="utf-8").read())
if parser.attention.get("demo/todo") != "up to date":
    sys.exit(f"the sources page does not show demo/todo as up to date: {parser.attention}")
print(f"sources DOM: {parser.attention}")
PY
echo "dashboard: ok (screenshots in $artifacts/)"

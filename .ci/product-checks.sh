#!/usr/bin/env bash
# Product checks against a real daemon with a job in it (`teammem demo`):
#   - `promtool check metrics` (Debian's prometheus package) on a /metrics scrape;
#   - headless Chromium (Debian's chromium) screenshots of the sources page, the
#     jobs list, the job's page and the 24-hour chart, kept as CI artifacts in
#     target/ci-artifacts/;
#   - the retry and cancel buttons pressed in the browser (.ci/click.py, over
#     the DevTools pipe), changing a real job's state;
#   - DOM checks (--dump-dom): the job's row is in the jobs table, and the
#     sources page shows the demo's source as up to date, and the job page
#     shows the wiki diff with PR #1's entry;
#   - the wiki rendered (.ci/wiki_render.py): headings, no marker shown, links
#     between pages with and without .md, and a hostile page whose script and
#     handlers never run.
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
grep -qE '^teammem_jobs\{node="[^"]+",state="succeeded"\} 2$' "$artifacts/metrics.txt" ||
  { echo "the scrape does not count the demo's two succeeded jobs" >&2; exit 1; }
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

echo "== the chart, and the job page's diff"
python3 - "$artifacts/sources.html" "$artifacts/chart.svg" <<'PY'
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
svg = re.search(r"<svg class=\"?chart\"?.*?</svg>", page, re.S)
if not svg:
    sys.exit("the sources page has no chart (<svg class=chart>)")
open(sys.argv[2], "w", encoding="utf-8").write(svg.group(0))
PY
chrome --screenshot="$PWD/$artifacts/chart.png" --window-size=760,200 "file://$PWD/$artifacts/chart.svg"
[ -s "$artifacts/chart.png" ] || { echo "no chart screenshot; Chromium said:" >&2; cat "$work/chrome.log" >&2; exit 1; }
chrome --dump-dom "$url/jobs/1" >"$artifacts/job.html"
python3 - "$artifacts/job.html" <<'PY'
import sys
from html.parser import HTMLParser

class Diff(HTMLParser):
    """The text of the job page's wiki diff (<pre class=diff>)."""
    def __init__(self):
        super().__init__()
        self.depth = 0
        self.text = ""
    def handle_starttag(self, tag, attrs):
        if tag == "pre" and "diff" in (dict(attrs).get("class") or "").split():
            self.depth = 1
        elif self.depth:
            self.depth += 1
            if tag == "span":
                self.text += "\n"  # each diff line is a block <span>, with no newline between
    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
    def handle_data(self, data):
        if self.depth:
            self.text += data

parser = Diff()
parser.feed(open(sys.argv[1], encoding="utf-8").read())
lines = parser.text.splitlines()
if not any(l.startswith("diff --git a/Changelog.md") for l in lines):
    sys.exit(f"job 1's page shows no diff of Changelog.md: {lines[:20]}")
added = [l for l in lines if l.startswith("+") and "Store to-dos in SQLite" in l]
if not added:
    sys.exit("job 1's diff does not add the entry of PR #1 (Store to-dos in SQLite)")
print(f"job page DOM: the diff has {len(lines)} lines; PR #1's entry is added: {added[0][:80]}")
PY

echo "== the cancel and retry buttons, pressed in the browser"
# A job that cannot finish yet: the wiki is moved away, so its attempts fail
# and wait (retryable); the operator cancels it, puts the wiki back, retries.
token=$(target/debug/teammem tokens create --config "$work/demo/teammem-demo.toml" --name product-checks | tail -1)
wiki="$work/demo/repos/todo.wiki.git"
mv "$wiki" "$wiki.away"
answer=$(curl -fsS -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"repository":"demo/todo","pull_number":2}' "$url/v1/requests")
job=$(printf '%s' "$answer" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
python3 .ci/click.py "$browser" "$work/click-profile" "$url/jobs/$job" "Cancel job" cancelled
mv "$wiki.away" "$wiki"
python3 .ci/click.py "$browser" "$work/click-profile" "$url/jobs/$job" "Retry job" queued,running,succeeded,no_change
state=""
for _ in $(seq 1 300); do
  state=$(curl -fsS -H "Authorization: Bearer $token" "$url/v1/jobs/$job" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])')
  case "$state" in succeeded|no_change) break ;; esac
  sleep 0.1
done
case "$state" in
  succeeded|no_change) echo "job $job, cancelled and retried through the buttons, ended $state" ;;
  *) echo "job $job did not finish after the retry button (state: $state)" >&2; exit 1 ;;
esac

echo "== the wiki rendered, in the browser"
# A person adds a hostile page to the demo's wiki (a script, an image with an
# onerror handler, javascript: and data: links, a tracking image, a stale
# fact); .ci/wiki_render.py reads the index, the demo's Home page, the hostile
# page and the pages its links open, as Chromium holds them after loading.
git clone -q "$wiki" "$work/wiki-edit"
a=$(printf 'a%.0s' $(seq 40))
b=$(printf 'b%.0s' $(seq 40))
cat >"$work/wiki-edit/Hostile.md" <<MD
# Hostile page

Links: [by name](Home), [with md](Changelog.md), [[Area-api]].

- A fresh fact. <!-- teammem:evidence api/routes.py@$a#L1 -->
- An old fact. <!-- teammem:evidence api/routes.py@$a#L2 stale=$b -->

<script>document.title='pwned'</script>

<img src=x onerror="document.title='pwned'">

Inline <img src=x onerror="document.body.dataset.pwned='1'"> and <b onmouseover="document.title='pwned'">bold</b>.

[click me](javascript:document.title='pwned') and [data](data:text/html,<script>alert(1)</script>)

![pixel](https://tracker.invalid/p.gif)
MD
git -C "$work/wiki-edit" add Hostile.md
git -C "$work/wiki-edit" -c user.name=Mallory -c user.email=mallory@example.invalid commit -qm "A hostile page"
git -C "$work/wiki-edit" push -q origin HEAD
python3 .ci/wiki_render.py "$browser" "$work/wiki-profile" "$url"
chrome --screenshot="$PWD/$artifacts/wiki-page.png" "$url/wiki/demo/todo/Area-api"
chrome --screenshot="$PWD/$artifacts/wiki-hostile.png" "$url/wiki/demo/todo/Hostile"
for png in wiki-page wiki-hostile; do
  [ -s "$artifacts/$png.png" ] || { echo "no $png screenshot; Chromium said:" >&2; cat "$work/chrome.log" >&2; exit 1; }
done
echo "dashboard: ok (screenshots in $artifacts/)"

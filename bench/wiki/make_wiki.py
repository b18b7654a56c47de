"""Writes a `git fast-import` stream for a benchmark wiki of about PAGES
Markdown pages, created in one commit and then edited by 51 more commits, so
the history looks like a maintained wiki (52 commits).

Usage: make_wiki.py PAGES [plain|agent]
- plain (the default; bench/wiki.sh, bench/search.sh): PAGES pages of prose
  in 20 section folders.
- agent (bench/context.sh): pages shaped like the builtin agent's, so
  `get_context` has what it reads: PAGES // 10 area pages (`Area-svcNNNN.md`,
  "What is here" items with evidence markers `<!-- teammem:evidence
  path@sha#Lx -->`, "Who knows this area", a note citing a file (every other
  one stale, `stale=<sha>`), "Recent changes" entries ending
  `<!-- teammem:<sha> -->`), nine quarter pages per area holding older
  entries, and Changelog.md, Home.md, Dependencies.md, How-to-work-here.md:
  10 * (PAGES // 10) + 4 pages. Area `svcNNNN/` holds `svcNNNN/mod_KK.py`
  (K < 12); entry numbers are unique; shas are derived, not real commits.
"""

import hashlib
import sys

pages = int(sys.argv[1])
shape = sys.argv[2] if len(sys.argv) > 2 else "plain"
if shape not in ("plain", "agent"):
    sys.exit(f"make_wiki.py: unknown shape {shape!r}; use plain or agent")
out = sys.stdout.buffer
mark = 0


def blob(data: bytes) -> int:
    global mark
    mark += 1
    out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
    out.write(data + b"\n")
    return mark


def plain_path(i: int) -> bytes:
    return b"section-%02d/page-%04d.md" % (i % 20, i)


def plain_text(i: int, revision: int) -> bytes:
    body = b"".join(b"Line %d of page %d: notes about component %d.\n" % (n, i, i * 7 % 97) for n in range(25))
    return b"# Page %d\n\nRevision %d\n\n%s" % (i, revision, body)


# --- agent-shaped pages ------------------------------------------------------
AREAS = pages // 10
FILES = 12
QUARTERS = ["2024-Q%d" % q for q in range(1, 5)] + ["2025-Q%d" % q for q in range(1, 5)] + ["2026-Q1"]
AUTHORS = ["Alice", "Bob", "Carol", "Dmitri", "Esther", "Farid", "Grace", "Hiro"]
RECENT = 8
PER_QUARTER = 6
PER_AREA = RECENT + PER_QUARTER * len(QUARTERS)


def sha(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def area_file(area: int, k: int) -> str:
    return "svc%04d/mod_%02d.py" % (area, k)


def entry(area: int, n: int, with_paths: bool) -> str:
    """Entry n (0 = newest) of an area, as the area page or the Changelog writes it."""
    number = area * PER_AREA + (PER_AREA - n)
    merge = sha("merge", area, n)
    author = AUTHORS[(area + n) % len(AUTHORS)]
    date = "2026-%02d-%02d" % (3 - min(n, 2), 28 - n % 28) if n < RECENT else "2025-%02d-%02d" % (12 - n % 12, 1 + n % 28)
    title = "Retry the svc%04d export when the queue is full, step %d" % (area, n)
    why = "Exports from svc%04d failed under load; now they retry with backoff (closes #%d)." % (area, number + 1000)
    if not with_paths:
        return "- %s — #%d %s (by %s) — %s — merge commit `%s` <!-- teammem:%s -->" % (date, number, title, author, why, merge, merge)
    files = ", ".join(area_file(area, (n + j) % FILES).replace("_", "\\_") for j in range(1 + n % 3))
    return "- #%d %s (by %s, %s) — %s — merge commit `%s` — %s <!-- teammem:%s -->" % (
        number, title, author, date, why, merge, files, merge)


def area_page(area: int, revision: int) -> str:
    tip = sha("tip", revision)
    lines = [
        "# Area: svc%04d" % area, "",
        "Pull requests that changed files under `svc%04d/` (kept by teammem)." % area, "",
        "## What is here", "",
        "The files under `svc%04d/` at commit `%s`, each with the purpose its first lines state (kept by teammem). <!-- teammem:what-is-here -->" % (area, tip),
    ]
    for k in range(FILES):
        path = area_file(area, k)
        lines.append("- %s — Reads the svc%04d records of kind %d and writes their summaries. <!-- teammem:evidence %s@%s#L1 -->"
                     % (path.replace("_", "\\_"), area, k, path, tip))
    lines += ["<!-- teammem:what-is-here-end -->", "", "## Who knows this area", "",
              "The authors of the pull requests teammem recorded here, most first (kept by teammem). <!-- teammem:who-knows -->"]
    for j in range(3):
        name = AUTHORS[(area + j) % len(AUTHORS)]
        count = PER_AREA // 3 - j
        lines.append("- %s — %d pull requests <!-- teammem:author %d %s -->" % (name, count, count, name.encode().hex()))
    lines += ["<!-- teammem:who-knows-end -->", "", "## Notes", ""]
    for k in (0, 1):
        path = area_file(area, k)
        stale = " stale=%s" % sha("merge", area, k) if k == 0 else ""
        lines.append("The export batch size of `%s` is 500 rows (revision %d). <!-- teammem:evidence %s@%s#L5-L7%s -->"
                     % (path, revision, path, sha("cited", area), stale))
    lines += ["", "## Recent changes", "", "Every entry is also kept on the page of its quarter. <!-- teammem:archives -->", "",
              "<!-- teammem:recent-changes -->"]
    lines += [entry(area, n, True) for n in range(RECENT)]
    return "\n".join(lines) + "\n"


def quarter_page(area: int, q: int) -> str:
    lines = ["# Area: svc%04d, %s" % (area, QUARTERS[q]), "",
             "Pull requests of %s that changed files under `svc%04d/` (kept by teammem)." % (QUARTERS[q], area), ""]
    first = RECENT + PER_QUARTER * (len(QUARTERS) - 1 - q)
    lines += [entry(area, n, True) for n in range(first, first + PER_QUARTER)]
    return "\n".join(lines) + "\n"


def special(name: str, revision: int) -> str:
    tip = sha("tip", revision)
    if name == "Changelog.md":
        lines = ["# Changelog", "", "Merged pull requests, newest first (kept by teammem).", "", "<!-- teammem:changelog -->"]
        lines += [entry(area, n, False) for n in range(2) for area in range(min(AREAS, 40))]
    elif name == "Home.md":
        lines = ["# Welcome", "", "The team memory of the benchmark: %d areas." % AREAS]
    elif name == "Dependencies.md":
        lines = ["# Dependencies", "", "At commit `%s` (kept by teammem). <!-- teammem:dependencies -->" % tip,
                 "### pyproject.toml (Python) <!-- teammem:manifest -->",
                 "- flask — >=3.0 <!-- teammem:evidence pyproject.toml@%s#L4 -->" % tip,
                 "- pydantic — >=2.5 <!-- teammem:evidence pyproject.toml@%s#L5 -->" % tip,
                 "<!-- teammem:dependencies-end -->"]
    else:
        lines = ["# How to work here", "", "## Commands", "",
                 "As the files say (kept by teammem). <!-- teammem:how-to-work -->",
                 "### Test <!-- teammem:how-to-topic -->",
                 "- `make test` — Makefile target <!-- teammem:evidence Makefile@%s#L1-L2 -->" % tip,
                 "### Build <!-- teammem:how-to-topic -->",
                 "- `make build` — Makefile target <!-- teammem:evidence Makefile@%s#L4-L5 -->" % tip,
                 "<!-- teammem:how-to-work-end -->"]
    return "\n".join(lines) + "\n"


SPECIAL = ["Changelog.md", "Home.md", "Dependencies.md", "How-to-work-here.md"]


def agent_path(i: int) -> bytes:
    if i >= AREAS * 10:
        return SPECIAL[i - AREAS * 10].encode()
    area, part = divmod(i, 10)
    if part == 0:
        return b"Area-svc%04d.md" % area
    return b"Area-svc%04d-%s.md" % (area, QUARTERS[part - 1].encode())


def agent_text(i: int, revision: int) -> bytes:
    if i >= AREAS * 10:
        return special(SPECIAL[i - AREAS * 10], revision).encode()
    area, part = divmod(i, 10)
    return (area_page(area, revision) if part == 0 else quarter_page(area, part - 1)).encode()


if shape == "agent":
    pages = AREAS * 10 + len(SPECIAL)
    page_path, page_text = agent_path, agent_text
else:
    page_path, page_text = plain_path, plain_text

when = 1_700_000_000
parent = None
for commit in range(52):
    if commit == 0:
        touched = range(pages)
    else:
        touched = [(commit * 37 + k * 11) % pages for k in range(5)]
    marks = [(page_path(i), blob(page_text(i, commit))) for i in touched]
    mark += 1
    commit_mark = mark
    message = b"Commit %d\n" % commit
    out.write(b"commit refs/heads/master\nmark :%d\n" % commit_mark)
    out.write(b"committer Fixture <fixture@example.org> %d +0000\n" % (when + commit * 60))
    out.write(b"data %d\n%s" % (len(message), message))
    if parent is not None:
        out.write(b"from :%d\n" % parent)
    for path, blob_mark in marks:
        out.write(b"M 100644 :%d %s\n" % (blob_mark, path))
    out.write(b"\n")
    parent = commit_mark

"""Writes a `git fast-import` stream for a benchmark wiki: PAGES Markdown pages
in 20 section folders, created in one commit and then edited by 51 more
commits, so the history looks like a maintained wiki (52 commits)."""

import sys

pages = int(sys.argv[1])
out = sys.stdout.buffer
mark = 0


def blob(data: bytes) -> int:
    global mark
    mark += 1
    out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
    out.write(data + b"\n")
    return mark


def page_path(i: int) -> bytes:
    return b"section-%02d/page-%04d.md" % (i % 20, i)


def page_text(i: int, revision: int) -> bytes:
    body = b"".join(b"Line %d of page %d: notes about component %d.\n" % (n, i, i * 7 % 97) for n in range(25))
    return b"# Page %d\n\nRevision %d\n\n%s" % (i, revision, body)


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

"""The token economy of get_context on a real repository's history
(bench/context.sh, phase 3 with REAL_REPO and REPLAY). Python 3 stdlib only.

  [REAL_FOLDER=prefix] [REAL_NAME=owner/name] real.py BIN WORK GIT_DIR PUSHES

1. The window: PUSHES ("BEFORE AFTER MERGES" lines, oldest first, from
   bench/lib.sh's first_parent_pushes and keep_last_merges: the last N
   first-parent merges of GIT_DIR's HEAD) runs from the first push's BEFORE
   (START) to the last push's AFTER (TIP). GIT_DIR is read in place, never
   changed.
2. `teammem serve` (local forge, builtin agent) records every push on a wiki
   seeded with Home.md only (record.py; a job that fails ends the run).
3. 50 tasks, "I am about to change these files", picked as economy.py picks
   them: an area (a directory) drawn by its files' popularity, then 1-3 of
   its files by popularity; the files are those at TIP under REAL_FOLDER
   with a source extension, a file's popularity the number of the window's
   PRs that touched it (files no such PR touched are not drawn). Ground
   truth from git, restricted to the window:
   - the PRs: every commit in START..TIP whose subject names one (`Merge
     pull request #N from …`, whose title is the body's first line, or
     `Title (#N)`), whether on the first-parent line or merged in through
     another branch, touching a task's file in its diff against its first
     parent (`--diff-merges=first-parent`); its title and description (the
     why);
   - the files' purposes as the wiki can know them: what a Python file's
     module docstring states at TIP (its first paragraph, past an RST
     heading), for files that have one (other files state none the bench
     reads, and count nothing);
   - the test command, when the repository has one: the first `run:` step
     of TIP's `.github/workflows/*.yml` (workflows named for tests first)
     that runs pytest, tox, nox or a `test` script.
   No person's notes are seeded, so there are no stale facts to find.
   Prints recall and the tokens of (a) and (b) as scoring.py measures them
   for the generated source, and (c) the files at TIP and their `git log -p`
   twice: over the window (START..TIP: what the wiki was built from, and the
   one the ratio uses) and over the whole history up to TIP; all of them
   also in two BPE encodings (bpe.py).

Exits non-zero when a job fails or teammem answers with an error; missed
targets are printed, not exits."""

import os
import random
import re
import sys

import bpe
from mcp_client import Mcp
from record import git, record, seed_wiki
from scoring import measure

binary, work, real, pushes_path = sys.argv[1:5]
folder = os.environ.get("REAL_FOLDER", "")
name = os.environ.get("REAL_NAME", os.path.basename(os.path.abspath(real)))
os.makedirs(work)
pushes = [line.split() for line in open(pushes_path) if line.strip()]
if not pushes:
    sys.exit("no first-parent merges to replay in %s" % real)
start, tip = pushes[0][0], pushes[-1][1]
merges = sum(int(p[2]) for p in pushes)
PULL = re.compile(r"^Merge pull request #(\d+) from (.*)$|^(.*) \(#(\d+)\)\s*$")
SOURCE_EXTENSIONS = (".py", ".rs", ".go", ".js", ".ts", ".java", ".rb", ".c")


def day(sha):
    return git("log", "-1", "--format=%cs", sha, repo=real).strip()


# 1. The window's PRs and the files each touched.
prs = {}  # number -> {"title", "why", "files"}
log = git("log", "--format=%x1e%H%x00%s%x00%b%x00", "--name-only", "--diff-merges=first-parent",
          "%s..%s" % (start, tip), repo=real)
for record_text in log.split("\x1e")[1:]:
    sha, subject, body, names = record_text.split("\x00", 3)
    match = PULL.match(subject)
    if not match:
        continue
    if match.group(1):
        number = int(match.group(1))
        title, _, why = body.strip().partition("\n")
        title = title.strip() or match.group(2).strip()
    else:
        number, title, why = int(match.group(4)), match.group(3).strip(), body
    entry = prs.setdefault(number, {"title": title, "why": why.strip(), "files": set()})  # newest first: keep it
    entry["files"].update(n for n in names.split("\n") if n)
print("economy on %s: the last %d first-parent merges (%d pushes), %s..%s (%s to %s), %d PRs named in the window"
      % (name, merges, len(pushes), start[:7], tip[:7], day(start), day(tip), len(prs)))

# 2. The daemon records the window.
wiki = os.path.join(work, "wiki.git")
seed_wiki(work, wiki, {"Home.md": "# Welcome\n\nThe team memory of the benchmark.\n"})
config, env, run_times, states, elapsed = record(binary, work, "bench/real", real, wiki, [(p[0], p[1]) for p in pushes])
pages = git("ls-tree", "-r", "--name-only", "master", repo=wiki).split()
print("  recorded by teammem serve (builtin agent, local forge) in %.0f s: jobs %s; job run time p50 %.0f ms, max %.0f ms; the wiki: %d pages"
      % (elapsed, dict(sorted(states.items())), run_times[len(run_times) // 2], run_times[-1], len(pages)))

# 3. Tasks and their ground truth.
candidates = [p for p in git("ls-tree", "-r", "--name-only", tip, repo=real).split("\n")
              if p.startswith(folder) and p.endswith(SOURCE_EXTENSIONS)]
popularity = {p: sum(1 for pr in prs.values() if p in pr["files"]) for p in candidates}
candidates = [p for p in candidates if popularity[p] > 0]
if not candidates:
    sys.exit("no file under %r at %s was touched by a PR of the window" % (folder, tip[:7]))
areas = sorted({os.path.dirname(p) for p in candidates})


def docstring(path):
    """The first paragraph of a Python file's module docstring at TIP, or None."""
    if not path.endswith(".py"):
        return None
    lines = git("show", "%s:%s" % (tip, path), repo=real).split("\n")
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    if not lines:
        return None
    first = lines[0].strip()
    match = re.match(r'^[rRuU]?("""|\'\'\')', first)
    if not match:
        return None
    quote = match.group(1)
    text = "\n".join([first[match.end():]] + lines[1:])
    kept = text.split(quote, 1)[0].strip().split("\n")
    # An RST heading (a line underlined with one punctuation mark) is a
    # title, not what the file is for: the paragraph after it is.
    while len(kept) > 1 and re.fullmatch(r"([=~\-^*#+`'\".])\1{2,}", kept[1].strip()):
        kept = kept[2:]
    paragraph = "\n".join(kept).strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split()) or None


def test_command():
    """The first `run:` step of TIP's workflows that runs the tests, or None."""
    workflows = [p for p in git("ls-tree", "-r", "--name-only", tip, "--", ".github/workflows", repo=real).split("\n")
                 if p.endswith((".yml", ".yaml"))]
    workflows.sort(key=lambda p: ("test" not in os.path.basename(p), p))
    for path in workflows:
        for line in git("show", "%s:%s" % (tip, path), repo=real).split("\n"):
            match = re.match(r"^\s*(?:-\s*)?run:\s*(.+?)\s*$", line)
            if not match or match.group(1) in ("|", ">", "|-", ">-"):
                continue
            command = match.group(1).strip("'\"")
            if re.search(r"\b(pytest|tox|nox)\b|(^|[/ ])test\b", command):
                return command
    return None


test = test_command()
pick = random.Random(37)
tasks, truths = [], []
for _ in range(50):
    area = pick.choices(areas, [sum(popularity[p] for p in candidates if os.path.dirname(p) == a) for a in areas])[0]
    in_area = [p for p in candidates if os.path.dirname(p) == area]
    chosen = []
    for _ in range(pick.choice([1, 2, 2, 3])):
        path = pick.choices(in_area, [popularity[p] for p in in_area])[0]
        if path not in chosen:
            chosen.append(path)
    chosen.sort()
    truth = {"prs": {}, "purposes": {}, "stale": [], "test": test}
    for number, pr in prs.items():
        if pr["files"].intersection(chosen):
            truth["prs"][number] = (pr["title"], pr["why"])
    for path in chosen:
        stated = docstring(path)
        if stated:
            truth["purposes"][path] = stated
    tasks.append(chosen)
    truths.append(truth)
print("  tasks: 50 of 1-3 files of one directory from %d files under %r touched in the window (%d directories); files stating a purpose: %d of %d;"
      " test command: %s"
      % (len(candidates), folder, len(areas), len({p for t in truths for p in t["purposes"]}), len({p for t in tasks for p in t}),
         repr(test) if test else "none found"))

mcp = Mcp(binary, config, env)
a, b, rate, _ = measure(mcp, "bench/real", tasks, truths)
mcp.close()

# (c) each file at TIP and its `git log -p`, over the window and over the whole history.
cost = {}
for path in {p for t in tasks for p in t}:
    text = git("show", "%s:%s" % (tip, path), repo=real)
    cost[path] = (bpe.count(text + git("log", "-p", "%s..%s" % (start, tip), "--", path, repo=real)),
                  bpe.count(text + git("log", "-p", tip, "--", path, repo=real)))
c_window = sum(bpe.add("c", cost[p][0]) for t in tasks for p in t)
c_whole = sum(bpe.add("c over the whole history", cost[p][1]) for t in tasks for p in t)
commits_whole = sum(len(git("rev-list", tip, "--", *t, repo=real).split()) for t in tasks) / 50
print("  (c) files + git log -p over the window %d (%.0f a task); over the whole history to %s %d (%.0f a task, %.0f commits touched a task's files on average)"
      % (c_window, c_window / 50, tip[:7], c_whole, c_whole / 50, commits_whole))
print("  ratios: (a)/(b) = 1/%.1f (target <= 1/5: %s), (a)/(c) over the window = 1/%.1f (target <= 1/30: %s; this is the fair one: the wiki"
      " was built from the window only), over the whole history 1/%.1f; recall target >= 0.9: %s"
      % (b / max(1, a), "met" if 5 * a <= b else "MISSED", c_window / max(1, a), "met" if 30 * a <= c_window else "MISSED",
         c_whole / max(1, a), "met" if rate >= 0.9 else "MISSED"))
bpe.report(len(tasks), others=("b", "c", "c over the whole history"))

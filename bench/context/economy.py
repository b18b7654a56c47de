"""The token economy of get_context on a history the real daemon recorded
(bench/context.sh, phase 3). Python 3 stdlib only.

  [SHAPE=real|small] economy.py BIN ROOT WORK PRS

1. A generated source (git fast-import): 12 areas of 10 Python modules
   (a docstring stating the file's purpose, ten settings lines, functions), a
   Makefile whose `test` target is the test command, then PRS squash-merged
   pull requests (`Title (#n)`, the body says why), each changing 1-3 files
   of one area; files are picked with a skewed popularity, so some files
   have long histories, as in a real repository. Two shapes of the same PRs
   (see generate()): "small", ~210-line files and PRs of a few lines, and
   "real" (the default, SHAPE), sized after a real package's files and
   commits. The measured shape is replayed; the other is only read for (c).
   A wiki seeded with Home.md and Design-notes.md, a page a person wrote:
   one fact per module citing one of its settings lines at the first commit
   (`<!-- teammem:evidence path@sha#Lk -->`).
2. `teammem serve` (local forge, builtin agent) gets each PR's range by a
   signed dispatch; every job is followed to its end and must succeed
   (record.py).
3. 50 tasks, "I am about to change these files" (1-3 files of one area,
   picked with the same popularity), each with ground truth from git: every
   PR that touched the files (its number, title and why, `git log`), each
   file's purpose (its docstring at the tip), each Design-notes fact whose
   cited line a later commit changed (`git diff -U0 FIRST main`), and the
   test command (`make test`, the Makefile's target). Prints the recall of
   one get_context call at the default budget (a PR counts when the answer
   names it by number and title, whole or in brief; how many carry their
   why is printed apart, and the recall if only those counted), and the
   tokens of (a) that call, (b) search_wiki for each path plus reading
   whole (folded content) each page its hits name, (c) reading each file
   and its `git log -p`, in both shapes; tokens as get_context estimates
   them (JSON or text bytes / 4, rounded up) and, in the measured shape,
   in two BPE encodings (bpe.py); the rules are scoring.py's.
   A real repository's history is measured by real.py (REPLAY).

Exits non-zero when a job fails or teammem answers with an error; missed
targets are printed, not exits."""

import os
import random
import re
import sys

import bpe
from mcp_client import Mcp, tokens_of_text
from record import git, record, seed_wiki
from scoring import measure

binary, root, work, prs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.makedirs(work)
rng = random.Random(37)
AREAS = ["api", "billing", "storage", "auth", "search", "jobs", "mail", "web", "reports", "cache", "config", "metrics"]
NAMES = ["routes", "models", "client", "export", "import", "retry", "schema", "views", "rules", "totals"]
SETTINGS = ["BATCH_SIZE", "RETRY_LIMIT", "TIMEOUT_SECONDS", "PAGE_SIZE", "MAX_WORKERS",
            "BACKOFF_MS", "CACHE_TTL", "QUEUE_DEPTH", "ROUND_TO", "MAX_ROWS"]
VERBS = ["reads", "validates", "exports", "retries", "caches", "renders", "totals", "schedules", "indexes", "imports"]
OBJECTS = ["invoices", "sessions", "reports", "records", "messages", "orders", "events", "accounts", "pages", "rows"]
DEVS = ["Alice", "Bob", "Carol", "Dmitri", "Esther", "Farid", "Grace", "Hiro", "Ines"]
FILES = ["%s/%s.py" % (a, n) for a in AREAS for n in NAMES]
# Skewed popularity: a few hot files, a long tail.
WEIGHTS = [1 / (rank + 1) ** 0.9 for rank in range(len(FILES))]
rng.shuffle(WEIGHTS)
FUNCTIONS = 25


def purpose(path, version):
    area, name = path[:-3].split("/")
    i = FILES.index(path)
    verb, obj = VERBS[(i + version) % len(VERBS)], OBJECTS[(i * 3 + version) % len(OBJECTS)]
    return "The %s %s module: %s the %s of %s and writes their summaries" % (area, name, verb, obj, area)


def render(state):
    head = ['"""%s."""' % state["purpose"], ""]
    head += ["%s = %d" % (s, v) for s, v in zip(SETTINGS, state["settings"])]
    body = []
    for f, factor in enumerate(state["factors"]):
        r = state["revisions"][f]
        if r == 0:
            body += ["", "", "def step_%d(records):" % f, '    """Step %d of the pipeline."""' % f, "    total = 0",
                     "    for record in records:", '        total += record.get("v%d", 0) * %d' % (f, factor), "    return total"]
        else:  # a rewritten function: every line but its name differs
            body += ["", "", "def step_%d(records):" % f, '    """Step %d of the pipeline, revision %d."""' % (f, r),
                     "    total = %d" % (r % 7), "    for record in records[%d:]:" % (r % 3),
                     '        total += record.get("v%d_%d", 0) * %d' % (f, r, factor), "    return total + %d" % r]
    return "\n".join(head + body) + "\n"


def blob(path, text):
    data = text.encode()
    return b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data)


def commit(n, author, message, changes):
    when = 1767225600 + n * 36000
    message = message.encode()
    return (b"commit refs/heads/main\nauthor %s <%s@example.org> %d +0000\ncommitter %s <%s@example.org> %d +0000\ndata %d\n%s\n"
            % (author.encode(), author.lower().encode(), when, author.encode(), author.lower().encode(), when, len(message), message)
            + b"".join(changes))


# 1. The source and its history, in two shapes that differ only in the code's
# size and how much of it each PR changes (the PRs, their files, titles, whys,
# authors, settings and purposes are the same: everything else draws from a
# separate random stream):
# - "small": 25 functions a file (~210 lines); a PR changes 1-2 settings and
#   1-3 factor lines of each file it touches (median 8 lines added+deleted).
# - "real": shaped after a real repository's Python package (encode/httpx at
#   ae1b9f6, its 23 httpx/*.py files: median 248 lines, the two hottest
#   2,019 and 1,277; lines added+deleted per file a commit touches: median 7,
#   mean 29): a file's size grows with how often it changes (25 + 160 x its
#   popularity functions: ~210 lines to ~1,500), and besides the same small
#   edits a PR rewrites whole functions (none in 60 %, 1-3 in 30 %, 5-15 in
#   10 %: mean ~35 lines added+deleted per file).
SHAPE = os.environ.get("SHAPE", "real")
if SHAPE not in ("real", "small"):
    sys.exit("SHAPE must be real or small, got %r" % SHAPE)
drawn = rng.getstate()


def generate(shape):
    """The fast-import stream of the source in this shape."""
    rng.setstate(drawn)
    extra = random.Random(3737)
    states = {}
    for p in FILES:
        states[p] = {"purpose": purpose(p, 0), "settings": [rng.randrange(2, 500) for _ in SETTINGS],
                     "factors": [rng.randrange(1, 9) for _ in range(FUNCTIONS)]}
        if shape == "real":
            more = round(160 * WEIGHTS[FILES.index(p)] / max(WEIGHTS))
            states[p]["factors"] += [extra.randrange(1, 9) for _ in range(more)]
        states[p]["revisions"] = [0] * len(states[p]["factors"])
    makefile = "test:\n\tpython -m pytest -q tests\n\nbuild:\n\tpython -m build\n"
    pyproject = '[project]\nname = "app"\nversion = "1.0.0"\ndependencies = [\n  "flask>=3.0",\n  "requests==2.32.3",\n]\n'
    stream = [commit(0, "Alice", "Initial commit\n", [blob("Makefile", makefile), blob("pyproject.toml", pyproject),
                                                      blob("README.md", "# app\n\nThe benchmark's service.\n")]
                     + [blob(p, render(states[p])) for p in FILES])]
    for n in range(1, prs + 1):
        first = rng.choices(FILES, WEIGHTS)[0]
        area = first.split("/")[0]
        touched = [first]
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            other = rng.choices([p for p in FILES if p.startswith(area + "/")],
                                [w for p, w in zip(FILES, WEIGHTS) if p.startswith(area + "/")])[0]
            if other not in touched:
                touched.append(other)
        changes = []
        for path in touched:
            state = states[path]
            for _ in range(rng.choice([1, 2])):
                k = rng.randrange(len(SETTINGS))
                state["settings"][k] += rng.randrange(1, 50)
            for _ in range(rng.randrange(1, 4)):
                f = rng.randrange(FUNCTIONS)
                state["factors"][f] = state["factors"][f] % 9 + 1
            if shape == "real":
                roll = extra.random()
                rewrites = 0 if roll < 0.6 else extra.randint(1, 3) if roll < 0.9 else extra.randint(5, 15)
                for f in extra.sample(range(len(state["factors"])), min(rewrites, len(state["factors"]))):
                    state["revisions"][f] = n
            if rng.random() < 0.05:
                state["purpose"] = purpose(path, n)
            changes.append(blob(path, render(state)))
        setting = SETTINGS[n % len(SETTINGS)].lower().replace("_", " ")
        title = "Tune the %s of %s (#%d)" % (setting, touched[0][:-3].replace("/", " "), n)
        why = ("Under the load of week %d the %s of %s was wrong; the new values keep %s within budget."
               % (n, setting, ", ".join(touched), OBJECTS[n % len(OBJECTS)]))
        stream.append(commit(n, rng.choices(DEVS, [9, 7, 6, 4, 3, 2, 2, 1, 1])[0], "%s\n\n%s\n" % (title, why), changes))
    return b"".join(stream)


def shape_of(repo):
    """Lines per file (median, max) and lines added+deleted per file a PR touched (median, mean)."""
    sizes = sorted(len(git("show", "main:" + p, repo=repo).splitlines()) for p in FILES)
    root = git("rev-list", "--max-parents=0", "main", repo=repo).split()[0]
    changed = sorted(int(a) + int(d) for a, d, _ in (line.split("\t") for line in
                     git("log", "--numstat", "--format=", root + "..main", repo=repo).splitlines() if line.strip()))
    return "lines per file median %d, max %d; lines added+deleted per file a PR touched median %d, mean %.0f" % (
        sizes[len(sizes) // 2], sizes[-1], changed[len(changed) // 2], sum(changed) / len(changed))


other_shape = "small" if SHAPE == "real" else "real"
sources = {}
for shape in (other_shape, SHAPE):  # the measured shape last: the tasks draw on after it
    sources[shape] = os.path.join(work, "source-" + shape)
    git("init", "-q", "-b", "main", sources[shape])
    git("fast-import", "--quiet", repo=sources[shape], data=generate(shape))
source = sources[SHAPE]
shas = git("rev-list", "--reverse", "main", repo=source).split()
first_sha = shas[0]
touches = sorted(len(git("rev-list", shas[0] + "..main", "--", p, repo=source).split()) for p in FILES)
print("economy: a source of %d files, %d PRs; PRs per file: median %d, max %d; measured shape %s (SHAPE=real|small)"
      % (len(FILES), prs, touches[len(touches) // 2], touches[-1], SHAPE))
for shape in (SHAPE, other_shape):
    print("  shape %s: %s" % (shape, shape_of(sources[shape])))

# The wiki: Home.md and a person's Design-notes.md citing the first commit.
wiki = os.path.join(work, "wiki.git")
notes = ["# Design notes", "", "What the team decided about each module's settings (written by people)."]
facts = []
for i, path in enumerate(FILES):
    k = i % len(SETTINGS)
    line = 3 + k
    value = git("show", "%s:%s" % (first_sha, path), repo=source).splitlines()[line - 1]
    text = "In `%s`, %s was chosen after the incident review of that module." % (path, value)
    facts.append((path, line, text))
    notes.append("- %s <!-- teammem:evidence %s@%s#L%d -->" % (text, path, first_sha, line))
seed_wiki(work, wiki, {"Home.md": "# Welcome\n\nThe team memory of the benchmark's service.\n",
                       "Design-notes.md": "\n".join(notes) + "\n"})

# 2. The daemon records every PR.
config, env, run_times, _, elapsed = record(binary, work, "bench/app", source, wiki, list(zip(shas, shas[1:])))
print("  %d PRs over %d files recorded by teammem serve (builtin agent, local forge) in %.0f s; job run time p50 %.0f ms, max %.0f ms"
      % (prs, len(FILES), elapsed, run_times[len(run_times) // 2], run_times[-1]))
pages = git("ls-tree", "-r", "--name-only", "master", repo=wiki).split()
stale_total = len(re.findall(r"stale=[0-9a-f]{40}", git("show", "master:Design-notes.md", repo=wiki)))
print("  the wiki: %d pages, %d of %d design-notes facts marked stale" % (len(pages), stale_total, len(facts)))


# 3. Tasks and their ground truth from git.
def prs_of(path):
    out = git("log", "--format=%s%x00%b%x1e", "main", "--", path, repo=source)
    found = {}
    for record in out.split("\x1e"):
        if "\x00" not in record:
            continue
        subject, body = record.strip("\n").split("\x00", 1)
        match = re.search(r" \(#(\d+)\)$", subject)
        if match:
            found[int(match.group(1))] = (subject[:match.start()], " ".join(body.split()))
    return found


def stale_lines(path):
    changed = set()
    for match in re.finditer(r"^@@ -(\d+)(?:,(\d+))? ", git("diff", "-U0", first_sha, "main", "--", path, repo=source), re.M):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        changed.update(range(start, start + count))
    return changed


test_command = "make " + re.search(r"^(test):", git("show", "main:Makefile", repo=source), re.M).group(1)
tasks, truths = [], []
for _ in range(50):
    area = rng.choices(AREAS, [sum(w for p, w in zip(FILES, WEIGHTS) if p.startswith(a + "/")) for a in AREAS])[0]
    in_area = [p for p in FILES if p.startswith(area + "/")]
    chosen = []
    for _ in range(rng.choice([1, 2, 2, 3])):
        path = rng.choices(in_area, [WEIGHTS[FILES.index(p)] for p in in_area])[0]
        if path not in chosen:
            chosen.append(path)
    chosen.sort()
    truth = {"prs": {}, "purposes": {}, "stale": [], "test": test_command}
    for path in chosen:
        truth["prs"].update(prs_of(path))
        truth["purposes"][path] = git("show", "main:" + path, repo=source).splitlines()[0].strip('"')
        changed = stale_lines(path)
        truth["stale"] += [(path, text) for fact_path, line, text in facts if fact_path == path and line in changed]
    tasks.append(chosen)
    truths.append(truth)

mcp = Mcp(binary, config, env)
a, b, rate, _ = measure(mcp, "bench/app", tasks, truths)
mcp.close()
# (c) read each file and its history, in the measured shape (counted both
# ways, bpe.py) and the other (by the estimate).
c = {shape: 0 for shape in sources}
for shape, repo in sources.items():
    for files in tasks:
        for path in files:
            read = git("show", "main:" + path, repo=repo) + git("log", "-p", "main", "--", path, repo=repo)
            c[shape] += bpe.add("c", bpe.count(read)) if shape == SHAPE else tokens_of_text(read)
print("  (c) files + git log -p %d (%.0f a task; %.0f a task in the %s shape)" % (c[SHAPE], c[SHAPE] / 50, c[other_shape] / 50, other_shape))
print("  ratios: (a)/(b) = 1/%.1f (target <= 1/5: %s), (a)/(c) = 1/%.1f (target <= 1/30: %s; 1/%.1f in the %s shape); recall target >= 0.9: %s"
      % (b / max(1, a), "met" if 5 * a <= b else "MISSED", c[SHAPE] / max(1, a), "met" if 30 * a <= c[SHAPE] else "MISSED",
         c[other_shape] / max(1, a), other_shape, "met" if rate >= 0.9 else "MISSED"))
bpe.report(len(tasks))

"""The token economy of get_context on a history the real daemon recorded
(bench/context.sh, phase 3). Python 3 stdlib only.

  [SHAPE=real|small] [REAL_REPO=git-dir REAL_FOLDER=prefix REAL_NAME=name] economy.py BIN ROOT WORK PRS

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
   signed dispatch; every job is followed to its end and must succeed.
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
   them (JSON or text bytes / 4, rounded up). With REAL_REPO, also (c) for
   50 tasks of the same kind on that repository's files under REAL_FOLDER.

Exits non-zero when a job fails or teammem answers with an error; missed
targets are printed, not exits."""

import hashlib
import hmac
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

from mcp_client import Mcp, tokens, tokens_of_text

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


def git(*args, repo=None, data=None):
    command = ["git"] + (["-C", repo] if repo else []) + list(args)
    done = subprocess.run(command, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit("git %s failed: %s" % (" ".join(args[:3]), done.stderr.decode().strip()))
    return done.stdout.decode()


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
git("init", "-q", "--bare", "-b", "master", wiki)
seed = os.path.join(work, "seed")
git("clone", "-q", wiki, seed)
notes = ["# Design notes", "", "What the team decided about each module's settings (written by people)."]
facts = []
for i, path in enumerate(FILES):
    k = i % len(SETTINGS)
    line = 3 + k
    value = git("show", "%s:%s" % (first_sha, path), repo=source).splitlines()[line - 1]
    text = "In `%s`, %s was chosen after the incident review of that module." % (path, value)
    facts.append((path, line, text))
    notes.append("- %s <!-- teammem:evidence %s@%s#L%d -->" % (text, path, first_sha, line))
with open(os.path.join(seed, "Home.md"), "w") as f:
    f.write("# Welcome\n\nThe team memory of the benchmark's service.\n")
with open(os.path.join(seed, "Design-notes.md"), "w") as f:
    f.write("\n".join(notes) + "\n")
git("checkout", "-q", "-b", "master", repo=seed)
git("add", "-A", repo=seed)
git("-c", "user.name=b", "-c", "user.email=b@example.org", "commit", "-q", "-m", "Home and design notes", repo=seed)
git("push", "-q", "origin", "master", repo=seed)

# 2. The daemon records every PR.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
secret = "bench-%s" % uuid.uuid4().hex
config = os.path.join(work, "teammem.toml")
os.makedirs(os.path.join(work, "data"), mode=0o700)
with open(config, "w") as f:
    f.write('[server]\nlisten = "127.0.0.1:%d"\ndata_dir = "%s"\n\n[[sources]]\nrepository = "bench/app"\n'
            'local_path = "%s"\nlocal_wiki_path = "%s"\nwebhook_secret_env = "TEAMMEM_BENCH_SECRET"\n\n'
            '[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\n' % (port, os.path.join(work, "data"), source, wiki))
env = dict(os.environ, TEAMMEM_BENCH_SECRET=secret, TEAMMEM_LOG=os.environ.get("TEAMMEM_LOG", "warn"))
token = subprocess.run([binary, "tokens", "create", "--name", "bench", "--config", config], env=env, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().split()[-1]
log = open(os.path.join(work, "serve.log"), "w")
daemon = subprocess.Popen([binary, "serve", "--config", config], env=env, stdout=log, stderr=log)


def http(method, path, body=None, headers=None):
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


try:
    for _ in range(200):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    started = time.perf_counter()
    run_times = []
    for i in range(1, len(shas)):
        body = json.dumps({"source_repository": "bench/app", "kind": "range",
                           "push_before": shas[i - 1], "push_after": shas[i]}).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        job_id = http("POST", "/v1/dispatch", body, {"Content-Type": "application/json", "X-Hub-Signature-256": signature,
                                                     "X-TeamMem-Delivery": str(uuid.uuid4())})["job_id"]
        while True:
            job = http("GET", "/v1/jobs/%s" % job_id, headers={"Authorization": "Bearer " + token})["job"]
            if job["state"] not in ("queued", "running"):
                break
            time.sleep(0.005)
        if job["state"] != "succeeded":
            sys.exit("ERROR: job %s (PR %d) ended %s: %s" % (job_id, i, job["state"], job.get("last_error")))
        run_times.append(job["finished_at"] - job["started_at"])
    run_times.sort()
    print("  %d PRs over %d files recorded by teammem serve (builtin agent, local forge) in %.0f s; job run time p50 %.0f ms, max %.0f ms"
          % (prs, len(FILES), time.perf_counter() - started, run_times[len(run_times) // 2], run_times[-1]))
finally:
    daemon.terminate()
    daemon.wait(timeout=30)
    log.close()
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
tasks = []
for _ in range(50):
    area = rng.choices(AREAS, [sum(w for p, w in zip(FILES, WEIGHTS) if p.startswith(a + "/")) for a in AREAS])[0]
    in_area = [p for p in FILES if p.startswith(area + "/")]
    chosen = []
    for _ in range(rng.choice([1, 2, 2, 3])):
        path = rng.choices(in_area, [WEIGHTS[FILES.index(p)] for p in in_area])[0]
        if path not in chosen:
            chosen.append(path)
    tasks.append(sorted(chosen))

def score(items, files, truth_prs, found):
    """Adds to found[kind] = [found, total] what items hold of the task's ground truth.

    A PR counts as recalled when the answer names it by number and title,
    whole (a change item) or in brief (a line `#NUMBER TITLE (AUTHOR, DATE)`
    of earlier_changes): an agent then knows it exists and what it was.
    found["why"] counts apart the PRs whose why the answer carries too, whole
    (a change item whose why holds the commit body) or in brief (a line
    ending ` — WHY`, the body whole)."""
    whole = {item["number"]: item for item in items if item["kind"] == "change"}
    brief = set()
    for item in items:
        if item["kind"] == "earlier_changes":
            brief.update(item["changes"])
    for number, (title, why) in truth_prs.items():
        found["pr"][1] += 1
        found["why"][1] += 1
        named = number in whole and whole[number]["title"] == title
        named = named or any(line.startswith("#%d %s (" % (number, title)) for line in brief)
        found["pr"][0] += named
        in_brief = any(line.startswith("#%d %s (" % (number, title)) and line.endswith(" — " + why) for line in brief)
        found["why"][0] += why != "" and (in_brief or (number in whole and why in " ".join(whole[number].get("why", "").split())))
    for path in files:
        docstring = git("show", "main:" + path, repo=source).splitlines()[0].strip('"').rstrip(".")
        found["purpose"][1] += 1
        found["purpose"][0] += any(item["kind"] == "purpose" and item["path"] == path and item["text"].rstrip(".") == docstring
                                   for item in items)
        changed = stale_lines(path)
        for fact_path, line, text in facts:
            if fact_path == path and line in changed:
                found["stale"][1] += 1
                found["stale"][0] += any(item["kind"] == "fact" and item["path"] == path and item["status"] == "stale"
                                         and item["text"].lstrip("- ") == text.replace("`", "") for item in items)
    found["test"][1] += 1
    found["test"][0] += any(item["kind"] == "how_to" and item["topic"] == "Test" and test_command in item["text"] for item in items)


def recall(found, pr="pr"):
    """Recall over PRs (named, or with their why when pr="why"), purposes, stale facts and the test command."""
    counted = {k: v for k, v in found.items() if k not in ("pr", "why") or k == pr}
    hit, total = sum(f for f, _ in counted.values()), sum(t for _, t in counted.values())
    names = {"pr": "PRs named", "why": "PRs with their why"}
    return hit / max(1, total), "%d/%d: %s" % (hit, total, ", ".join("%s %d/%d" % (names.get(k, k), f, t) for k, (f, t) in counted.items()))


mcp = Mcp(binary, config, env)
totals = {"a": 0, "b": 0, "c": 0, "c_other": 0, "max": 0}
found = {"pr": [0, 0], "why": [0, 0], "purpose": [0, 0], "stale": [0, 0], "test": [0, 0]}
found_max = {"pr": [0, 0], "why": [0, 0], "purpose": [0, 0], "stale": [0, 0], "test": [0, 0]}
over_budget = 0
change_costs, line_costs, why_line_costs, answer_costs = [], [], [], []
for files in tasks:
    truth_prs = {}
    for path in files:
        truth_prs.update(prs_of(path))
    answer = mcp.tool("get_context", {"repository": "bench/app", "paths": files})
    totals["a"] += tokens(answer)
    answer_costs.append(tokens(answer))
    over_budget += answer["left_out"]["items"] > 0
    score(answer["items"], files, truth_prs, found)
    change_costs += [tokens(item) for item in answer["items"] if item["kind"] == "change"]
    for item in answer["items"]:
        for line in item["changes"] if item["kind"] == "earlier_changes" else []:
            (why_line_costs if " — " in line else line_costs).append(tokens(line))
    # The same at the largest budget: what the default budget's cut costs.
    largest = mcp.tool("get_context", {"repository": "bench/app", "paths": files, "max_tokens": 16000})
    totals["max"] += tokens(largest)
    score(largest["items"], files, truth_prs, found_max)
    # (b) search the wiki for each path, then read each page its hits name.
    read = set()
    for path in files:
        result = mcp.tool("search_wiki", {"repository": "bench/app", "query": path})
        totals["b"] += tokens(result)
        for hit in result["hits"]:
            for page in hit.get("pages") or [hit["path"]]:
                if page not in read:
                    read.add(page)
                    totals["b"] += tokens_of_text(mcp.tool("get_wiki_page", {"repository": "bench/app", "path": page})["content"])
    # (c) read each file and its history, in the measured shape and the other.
    for path in files:
        for key, repo in (("c", source), ("c_other", sources[other_shape])):
            totals[key] += tokens_of_text(git("show", "main:" + path, repo=repo))
            totals[key] += tokens_of_text(git("log", "-p", "main", "--", path, repo=repo))
mcp.close()

rate, detail = recall(found)
rate_why, detail_why = recall(found, "why")
rate_max, detail_max = recall(found_max)
print("  recall rule: a PR counts when the answer names it by number and title, whole or as a line of earlier_changes;"
      " PRs with their why (whole, or a line ending ' — WHY') are counted apart")
print("  50 tasks (%d file paths, %d PRs touched them per task on average, at most %d): recall of one get_context at the default budget (2,000) %.3f (%s)"
      % (sum(map(len, tasks)), found["pr"][1] / 50, max(len(set().union(*(prs_of(p) for p in t))) for t in tasks), rate, detail))
print("  counting a PR only with its why: recall %.3f (%s)" % (rate_why, detail_why))
print("  answers that left items out for the budget: %d of 50 (a whole change item costs %.0f tokens on average, a line in brief %.1f, %.1f with its why);"
      " at max_tokens 16,000 recall %.3f (%s), %d tokens a task"
      % (over_budget, sum(change_costs) / max(1, len(change_costs)), sum(line_costs) / max(1, len(line_costs)),
         sum(why_line_costs) / max(1, len(why_line_costs)),
         rate_max, detail_max, totals["max"] / 50))
a, b, c, c_other = totals["a"], totals["b"], totals["c"], totals["c_other"]
print("  tokens (JSON or text bytes / 4, get_context's estimate): (a) get_context %d (%.0f a task, at most %d), (b) search_wiki + pages it names %d (%.0f a task),"
      " (c) files + git log -p %d (%.0f a task; %.0f a task in the %s shape)"
      % (a, a / 50, max(answer_costs), b, b / 50, c, c / 50, c_other / 50, other_shape))
print("  ratios: (a)/(b) = 1/%.1f (target <= 1/5: %s), (a)/(c) = 1/%.1f (target <= 1/30: %s; 1/%.1f in the %s shape); recall target >= 0.9: %s"
      % (b / max(1, a), "met" if 5 * a <= b else "MISSED", c / max(1, a), "met" if 30 * a <= c else "MISSED",
         c_other / max(1, a), other_shape, "met" if rate >= 0.9 else "MISSED"))

# (c) on a real repository's history, when REAL_REPO names a clone (and
# REAL_FOLDER its package folder): 50 tasks of 1-3 of its files picked by how
# often they changed, as above. get_context is not run on it (teammem has not
# recorded that history), so the ratio uses the most one answer cost here:
# its cap is the budget, whatever the history.
real = os.environ.get("REAL_REPO")
if real:
    folder = os.environ.get("REAL_FOLDER", "")
    head = git("rev-parse", "HEAD", repo=real).strip()
    candidates = [p for p in git("ls-tree", "-r", "--name-only", "HEAD", repo=real).split()
                  if p.startswith(folder) and p.endswith((".py", ".rs", ".go", ".js", ".ts", ".java", ".rb", ".c"))]
    changes = {p: len(git("log", "--format=%H", "HEAD", "--", p, repo=real).split()) for p in candidates}
    cost = {}
    pick = random.Random(37)
    real_c, real_prs = [], []
    for _ in range(50):
        chosen = sorted({pick.choices(candidates, [changes[p] for p in candidates])[0] for _ in range(pick.choice([1, 2, 2, 3]))})
        for p in chosen:
            if p not in cost:
                cost[p] = (tokens_of_text(git("show", "HEAD:" + p, repo=real))
                           + tokens_of_text(git("log", "-p", "HEAD", "--", p, repo=real)))
        real_c.append(sum(cost[p] for p in chosen))
        real_prs.append(len(git("log", "--format=%H", "HEAD", "--", *chosen, repo=real).split()))
    real_c.sort()
    print("  (c) on %s at %s (%d files under %r): %.0f tokens a task (median %d), %.0f commits touched a task's files on average;"
          " (a)/(c) = 1/%.1f with the costliest answer here (%d tokens)"
          % (os.environ.get("REAL_NAME", os.path.basename(os.path.abspath(real))), head[:7], len(candidates), folder, sum(real_c) / 50,
             real_c[25], sum(real_prs) / 50, sum(real_c) / 50 / max(answer_costs), max(answer_costs)))

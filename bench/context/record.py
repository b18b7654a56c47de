"""How the economy phase of bench/context.sh has the real daemon record a
history (Python 3 stdlib only): `teammem serve` on one source (local forge,
builtin agent), one signed range dispatch per push as bench/history.sh sends
them (the pushes from bench/lib.sh), each job (and every part of a split
range) followed to its end before the next push is sent (history.sh, which
times jobs, only waits for each to leave `queued`). Used by economy.py (the
generated source) and real.py (a real repository's last N first-parent
merges).

Invariant: a job that ends in any state but `succeeded` or `skipped`, or a
refused dispatch, ends the run (exit naming the push and the error): the
economy is never measured on a wiki that missed part of its history."""

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid


def git(*args, repo=None, data=None):
    """git's stdout as text; exits naming the command when git fails."""
    command = ["git"] + (["-C", repo] if repo else []) + list(args)
    done = subprocess.run(command, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit("git %s failed: %s" % (" ".join(args[:3]), done.stderr.decode().strip()))
    return done.stdout.decode("utf-8", "replace")


def seed_wiki(work, wiki, pages):
    """A bare wiki at `wiki` whose first commit on master holds `pages` ({name: text})."""
    git("init", "-q", "--bare", "-b", "master", wiki)
    seed = os.path.join(work, "seed")
    git("clone", "-q", wiki, seed)
    for name, text in pages.items():
        with open(os.path.join(seed, name), "w") as f:
            f.write(text)
    git("checkout", "-q", "-b", "master", repo=seed)
    git("add", "-A", repo=seed)
    git("-c", "user.name=b", "-c", "user.email=b@example.org", "commit", "-q", "-m", "Seed pages", repo=seed)
    git("push", "-q", "origin", "master", repo=seed)


def record(binary, work, repository, source, wiki, pushes):
    """Replays `pushes` ([(before, after)], oldest first) through `teammem
    serve`; returns (config path, environment for `teammem mcp`, job run
    times in ms, jobs by state, seconds taken)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = "bench-%s" % uuid.uuid4().hex
    config = os.path.join(work, "teammem.toml")
    os.makedirs(os.path.join(work, "data"), mode=0o700)
    with open(config, "w") as f:
        f.write('[server]\nlisten = "127.0.0.1:%d"\ndata_dir = "%s"\n\n[[sources]]\nrepository = "%s"\n'
                'local_path = "%s"\nlocal_wiki_path = "%s"\nwebhook_secret_env = "TEAMMEM_BENCH_SECRET"\n\n'
                '[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\n'
                % (port, os.path.join(work, "data"), repository, source, wiki))
    env = dict(os.environ, TEAMMEM_BENCH_SECRET=secret, TEAMMEM_LOG=os.environ.get("TEAMMEM_LOG", "warn"))
    token = subprocess.run([binary, "tokens", "create", "--name", "bench", "--config", config], env=env, check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().split()[-1]
    log = open(os.path.join(work, "serve.log"), "w")
    daemon = subprocess.Popen([binary, "serve", "--config", config], env=env, stdout=log, stderr=log)

    def http(method, path, body=None, headers=None):
        request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, method=method,
                                         headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            sys.exit("ERROR: %s %s answered %d: %s" % (method, path, e.code, e.read().decode("utf-8", "replace")[:500]))

    run_times, states = [], {}
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        started = time.perf_counter()
        for k, (before, after) in enumerate(pushes):
            body = json.dumps({"source_repository": repository, "kind": "range",
                               "push_before": before, "push_after": after}).encode()
            signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            answer = http("POST", "/v1/dispatch", body, {"Content-Type": "application/json",
                                                         "X-Hub-Signature-256": signature,
                                                         "X-TeamMem-Delivery": str(uuid.uuid4())})
            for job_id in answer.get("split_into") or [answer["job_id"]]:
                while True:
                    job = http("GET", "/v1/jobs/%s" % job_id, headers={"Authorization": "Bearer " + token})["job"]
                    if job["state"] not in ("queued", "running"):
                        break
                    time.sleep(0.005)
                states[job["state"]] = states.get(job["state"], 0) + 1
                if job["state"] not in ("succeeded", "skipped"):
                    sys.exit("ERROR: job %s (push %d, %s..%s) ended %s: %s"
                             % (job_id, k + 1, before[:10], after[:10], job["state"], job.get("last_error")))
                if job.get("started_at") and job.get("finished_at"):
                    run_times.append(job["finished_at"] - job["started_at"])
        elapsed = time.perf_counter() - started
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
    run_times.sort()
    return config, env, run_times, states, elapsed

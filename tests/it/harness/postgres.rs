//! A real PostgreSQL server for the tests: one per test process, started on
//! first use from the installed server binaries, each test on its own fresh
//! database; and, for a test that crashes its database, a server of its own.
//! Never a mock, and never skipped: without the binaries a test fails with
//! one line saying what to install.
//!
//! The server runs as an unprivileged user when the tests run as root
//! (`initdb` and `postgres` refuse root): `postgres` if that user exists, else
//! `nobody`. Its directory is a fresh temp directory that user owns; it listens
//! on 127.0.0.1 and a free port, with its Unix socket inside the data
//! directory, trusting every local connection as `teammem_test`.
//!
//! What never happens: a server outlives the test process, or is left unreaped.
//! A watchdog shell, run as the server's user, starts `postgres` as its own
//! background job (not through `pg_ctl`, which detaches the server and leaves
//! it to PID 1 to reap), copies the server's output to `server.log` and says
//! `ready` on stdout at the server's "ready to accept connections" line (no
//! polling). Then it reads its stdin, a pipe whose only write end this process
//! holds: `crash` and `start` lines crash and restart the server. The kernel closes
//! that end however the process ends (normal exit, panic, SIGKILL), the read
//! ends, and the watchdog stops the server
//! (SIGQUIT, an immediate shutdown), waits for it and removes the directory.
//! The watchdog ignores SIGINT/SIGTERM/SIGHUP, so a Ctrl-C that kills the test
//! binary's process group still leaves it to clean up. At a normal exit an
//! `atexit` hook closes the pipe and waits for the watchdog, so no server is
//! left once the test binary has returned.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use sqlx::Connection;

/// The role every test connects as; `initdb` makes it the superuser.
const ROLE: &str = "teammem_test";

/// The one line a test fails with when no server binaries are installed.
const MISSING_BINARIES: &str = "PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin, `pg_config --bindir` or PATH; install them with `apt-get install postgresql`";

/// The watchdog: in directory `$2`, `$1/initdb` makes a cluster whose
/// superuser is `$4` and `$1/postgres` serves it on port `$3` with
/// `synchronous_commit=$5`; the watchdog says `ready` once the server accepts
/// connections, crashes it at a `crash` line on its stdin (saying `down`)
/// and starts it again at a `start` line (saying `ready`), and at the end of
/// its stdin stops the server and removes `$2`. Its own errors and the output of initdb and the server go
/// to `$2/server.log`.
///
/// The stop signal goes out only after the server announced itself or died:
/// a background job starts with SIGQUIT ignored, and only once running does
/// the server install its own handler. SIGPIPE is ignored so that announcing
/// to a test process already gone fails instead of killing the watchdog.
const WATCHDOG: &str = r#"
trap '' INT TERM HUP PIPE
bin=$1 root=$2 port=$3 role=$4 sync=$5
data=$root/data log=$root/server.log output=$root/server.output ready=$root/ready
exec 3>&1 >/dev/null 2>>"$log"
server=
# Starts the server on $data and says on fd 3 `ready`, or an empty line when
# it died before accepting connections.
start() {
  state=
  rm -f "$output" "$ready"
  if mkfifo "$output" "$ready"; then
    (
      while IFS= read -r line; do
        printf '%s\n' "$line" >>"$log"
        case $line in
          *"database system is ready to accept connections"*) echo ready >&4; exec 4>&- ;;
        esac
      done
    ) <"$output" 4>"$ready" &
    "$bin/postgres" -D "$data" -h 127.0.0.1 -p "$port" \
      -c unix_socket_directories="$data,$root/sockets" -c logging_collector=off -c lc_messages=C -c max_connections=300 \
      -c fsync=off -c synchronous_commit="$sync" -c full_page_writes=off \
      </dev/null >"$output" 2>&1 &
    server=$!
    read -r state <"$ready"
  fi
  echo "$state" >&3
}
# A second socket directory anyone may reach, as a system's /run/postgresql:
# tests/it/sandbox.rs checks that an agent still cannot.
mkdir -p "$root/sockets" && chmod 711 "$root" && chmod 755 "$root/sockets"
if "$bin/initdb" --auth=trust --username="$role" --no-locale --encoding=UTF8 \
     --no-sync --pgdata="$data" >&2
then
  start
else
  echo >&3
fi
# `crash`: an immediate shutdown (what a crash leaves: recovery from the WAL
# at the next start), then `down` on fd 3; `start`: a new start on the same
# directory and port.
while IFS= read -r command; do
  case $command in
    crash) kill -QUIT "$server"; wait "$server"; echo down >&3 ;;
    start) start ;;
  esac
done
exec 3>&-
if [ -n "$server" ]; then kill -QUIT "$server"; fi
wait
rm -rf "$root"
"#;

static SERVER: OnceLock<PgServer> = OnceLock::new();

/// The test process's server, started on the first call. It acknowledges a
/// commit before writing it to the WAL (`synchronous_commit=off`): fast, and
/// nothing it is asked to do loses it.
pub fn server() -> &'static PgServer {
    SERVER.get_or_init(|| {
        let server = PgServer::start(Commits::Fast);
        // SAFETY: registers a plain `extern "C"` function with no arguments.
        let registered = unsafe { libc::atexit(stop_at_exit) };
        assert_eq!(registered, 0, "register the PostgreSQL stop hook");
        server
    })
}

/// A server of the calling test's own, which may crash and start again
/// ([`PgServer::crash`], [`PgServer::start_again`]) without troubling other tests. A commit
/// it acknowledged is in the WAL (`synchronous_commit=on`), so it survives
/// the server's crash, as on a production server (the WAL is not fsynced:
/// the machine does not crash, only the server). Stopped and removed when
/// dropped.
pub fn own_durable_server() -> PgServer {
    PgServer::start(Commits::Durable)
}

/// When a server acknowledges a commit.
#[derive(Clone, Copy)]
enum Commits {
    /// Before its WAL is written (`synchronous_commit=off`).
    Fast,
    /// Once its WAL is written (`synchronous_commit=on`).
    Durable,
}

/// A running server: the shared one, or a test's own.
pub struct PgServer {
    port: u16,
    /// The server's world-reachable Unix-socket directory.
    sockets: PathBuf,
    /// The watchdog, holding the write end of its stdin, until exit or drop.
    watchdog: Mutex<Option<Watchdog>>,
    databases_created: AtomicU64,
}

struct Watchdog {
    child: Child,
    /// Where it says `ready` (or an empty line) after each start.
    announcements: BufReader<ChildStdout>,
    root: PathBuf,
}

impl Watchdog {
    /// Reads the next announcement; panics with the server's log unless it
    /// is `expected`.
    fn expect(&mut self, expected: &str, what: &str) {
        let mut announcement = String::new();
        let read = self.announcements.read_line(&mut announcement);
        if read.is_err() || announcement.trim_end() != expected {
            let log = std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
            panic!("the PostgreSQL test server did not {what}: {log}");
        }
    }
}

impl PgServer {
    /// The loopback TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's Unix socket in a directory any local user may reach, as
    /// `/run/postgresql/.s.PGSQL.5432` on a system (trust authentication).
    pub fn socket_path(&self) -> PathBuf {
        self.sockets.join(format!(".s.PGSQL.{}", self.port))
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{ROLE}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new, empty database only the calling test uses and returns
    /// its URL.
    pub async fn fresh_database(&self) -> String {
        let n = self.databases_created.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("test_{n}");
        let mut admin = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connect to the test server's postgres database");
        // The name is `test_` and a number: nothing to escape.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("CREATE DATABASE");
        admin.close().await.expect("close the admin connection");
        self.url(&name)
    }

    /// Crashes the server (an immediate shutdown: every connection is cut,
    /// nothing is checkpointed); returns once it has exited. Blocks the
    /// calling thread for that long.
    pub fn crash(&self) {
        self.tell_watchdog("crash", "down", "crash");
    }

    /// Starts the server again after [`PgServer::crash`], on the same data and
    /// port; returns once it accepts connections, after its recovery from the
    /// WAL. Blocks the calling thread for that long.
    pub fn start_again(&self) {
        self.tell_watchdog("start", "ready", "start again after its crash");
    }

    /// Sends `command` to the watchdog and waits for its answer `expected`.
    fn tell_watchdog(&self, command: &str, expected: &str, what: &str) {
        let mut watchdog = self.watchdog.lock().expect("the watchdog lock");
        let watchdog = watchdog.as_mut().expect("the server is running");
        let stdin = watchdog.child.stdin.as_mut().expect("the watchdog's stdin");
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("tell the PostgreSQL watchdog to {command}: {e}"));
        watchdog.expect(expected, what);
    }

    fn start(commits: Commits) -> PgServer {
        let bin = server_binaries().unwrap_or_else(|| panic!("{MISSING_BINARIES}"));
        let owner = unprivileged_owner();
        let root = tempfile::Builder::new()
            .prefix("teammem-pg-")
            .tempdir()
            .expect("temp dir for the PostgreSQL server")
            .keep();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))
                .expect("hand the server's directory to its user");
        }
        let port = free_loopback_port();
        let synchronous_commit = match commits {
            Commits::Fast => "off",
            Commits::Durable => "on",
        };
        let mut child = server_command(Path::new("/bin/sh"), owner)
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(&bin)
            .arg(&root)
            .arg(port.to_string())
            .arg(ROLE)
            .arg(synchronous_commit)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the PostgreSQL watchdog shell");
        let announcements = BufReader::new(child.stdout.take().expect("watchdog stdout"));
        let sockets = root.join("sockets");
        let mut watchdog = Watchdog {
            child,
            announcements,
            root,
        };
        // On failure the panic reads the log before the watchdog, seeing
        // its stdin close as `watchdog` drops, removes it.
        watchdog.expect("ready", "start");
        PgServer {
            port,
            sockets,
            watchdog: Mutex::new(Some(watchdog)),
            databases_created: AtomicU64::new(0),
        }
    }

    /// Closes the watchdog's stdin and waits while it stops the server and
    /// removes its directory. Never panics.
    fn stop(&self) {
        if let Ok(mut watchdog) = self.watchdog.lock()
            && let Some(mut watchdog) = watchdog.take()
        {
            // `wait` closes the child's stdin first: that is the signal to stop.
            let _ = watchdog.child.wait();
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops the shared server at exit. Never panics: it runs inside `exit`.
extern "C" fn stop_at_exit() {
    if let Some(server) = SERVER.get() {
        server.stop();
    }
}

/// The directory holding `initdb` and `postgres`: the newest
/// `/usr/lib/postgresql/<major>/bin` (Debian's layout, not on PATH), else
/// `pg_config --bindir`, else the first PATH entry that has them.
fn server_binaries() -> Option<PathBuf> {
    let has_binaries = |dir: &Path| ["initdb", "postgres"].iter().all(|b| dir.join(b).is_file());
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse().ok()?;
            Some((major, entry.path().join("bin")))
        })
        .collect();
    debian.sort();
    let pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let path = std::env::var_os("PATH").unwrap_or_default();
    debian
        .into_iter()
        .rev()
        .map(|(_, dir)| dir)
        .chain(pg_config)
        .chain(std::env::split_paths(&path))
        .find(|dir| has_binaries(dir))
}

/// The (uid, gid) the server runs as: none unless this process is root, then
/// the `postgres` user if it exists, else `nobody`.
fn unprivileged_owner() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let owner = [c"postgres", c"nobody"].into_iter().find_map(|name| {
        // SAFETY: `name` is NUL-terminated; the static record is copied out
        // at once, before another getpw* call could overwrite it.
        let entry = unsafe { libc::getpwnam(name.as_ptr()) };
        // SAFETY: a non-null result points at a valid passwd record.
        (!entry.is_null()).then(|| unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
    });
    Some(owner.expect("neither a `postgres` nor a `nobody` user to run PostgreSQL as"))
}

/// `program` with a clean environment (no PG* variables or locale leak in),
/// as `owner` when given.
fn server_command(program: &Path, owner: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    command.env_clear().env("PATH", "/usr/bin:/bin");
    if let Some((uid, gid)) = owner {
        // Std drops the supplementary groups too when switching away from root.
        command.uid(uid).gid(gid);
    }
    command
}

/// A loopback port free right now (the kernel picks it; the server binds it
/// moments later).
fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

//! teammem keeps a repository's team memory (its wiki) in step with what merges
//! into the default branch. The modules are listed in reading order; ARCHITECTURE.md
//! is the code map with each module's invariants.

pub mod cli; // the command line: clap definitions and what each command does
pub mod stdout; // a command's stdout lines: a closed pipe ends the process quietly (141), never a panic
pub mod ids; // validated identifiers: Sha, PullNumber, RepoName, Scope (checked once, carried typed)
pub mod facts; // evidence markers on wiki pages: a fact's citation and staleness, parsed and written (pure text)
pub mod staleness; // whether a fact still holds: cited lines followed through diffs, marker rewrites, Stale.md (pure)
pub mod manifests; // the dependencies a manifest (Cargo.toml, package.json, pyproject.toml, go.mod, requirements*.txt) declares, with lines, and the diff of two versions (pure)
pub mod purpose; // a source file's one-line purpose from its first lines (doc comment, docstring, heading), with the line it came from (pure)
pub mod pull_text; // prose out of untrusted text: a PR's "why" (its first meaningful paragraph), sentence ends, code spans, bounded lines (pure)
pub mod config; // teammem.toml, validated once into typed config
pub mod daemon; // starts HTTP, workers and scheduler; owns graceful shutdown
pub mod demo; // `teammem demo`: sample repositories, the real daemon, two signed dispatches
pub mod db; // the SQLite pool (WAL, busy timeout) or the PostgreSQL pool, and migrations; nothing else
pub mod http; // the HTTP API: one router per resource, errors mapped in one place
pub mod ingest; // signed dispatches: HMAC, OIDC, parsing, verification, one error per check
pub mod forge; // where sources live: GitHub's REST API (App auth, verification) and local git
pub mod requests; // the PR-request service: authenticate, authorize, verify, enqueue; its own error type
pub mod secrets; // the GitHub App key (Key Vault or a 0600 file), secrets that never print
pub mod cluster; // several nodes on one PostgreSQL: the leader lock for the cluster's duties, job notifications
pub mod queue; // the durable job queue: the only SQL about jobs
pub mod worker; // the worker pool: claims jobs and runs them through a JobHandler
pub mod sandbox; // the kernel sandbox of the command agent: Landlock policy, the sandbox-exec trampoline, tree kill
pub mod runner; // runs one job: evidence bundle, writer child, agents, checked receipts
pub mod scheduler; // cron schedules for rescue, retention and sweep
pub mod sweep; // the sweep for missed pushes: cursor..tip of `sweep = true` sources
pub mod freshness; // how fresh each wiki is: cursor, lag behind the branch (cached, bounded), jobs in flight, urgency
pub mod wiki; // the team memory as git: mirrors, reads, checked writes, publish (the only gix user for wikis)
pub mod writer_contract; // the runner ↔ writer-child contract: environment, descriptors, trailers, broker wire
pub mod mcp; // MCP servers over the wiki (read tools, job-bound writer) and the `teammem wiki` functions
pub mod relay; // `teammem mcp --connect`: a command agent's stdio relay to its job's writer, holding nothing
pub mod tokens; // maintainer API tokens, stored as SHA-256 hashes
pub mod metrics; // process-wide Prometheus counters and histograms

//! The integration tests: one binary, one module per capability. Each module
//! starts real things (SQLite files, the `teammem` process, git servers) on
//! loopback and temp directories.

mod agents_setup; // `teammem agents setup`: each host's format, no secret, --write merges and settles, bad input changes nothing
mod architecture; // the layering rule: no import cycle among the crate's top-level modules
mod backfill; // issue 36 in the real daemon: the reconciled commit never moves back; `teammem backfill` cancellable, idempotent, ordered, each PR once beside dispatches
mod cluster; // several `teammem serve` nodes on one real PostgreSQL server: shared jobs, tokens, sessions
mod cli_pipes; // a command whose stdout reader goes away ends quietly (141), never with a panic
mod config; // teammem.toml validation: good files, and a table of bad ones
mod coordinator; // the coordinator MCP server via rmcp clients: /mcp in both eras, tasks across a restart, scope, Origin, stdio
mod daemon; // the real `teammem serve` process and the offline commands
mod dashboard; // the HTML dashboard: who may look, login, scopes, escaping
mod dashboard_hardening; // the dashboard attacked: another local user, proxies, framing and caching headers, per-session form tokens, POST logout, the session key on PostgreSQL
mod demo; // `teammem demo --once` as the real process, the git CLI as oracle; busy port, bad data dir
mod dispatch; // signed dispatch ingest against the fake GitHub: every answer code, forged runs, OIDC
mod dispatch_http; // POST /v1/dispatch over the real router and queue: replays, coalescing, rows unchanged on refusal
mod forge_github; // App auth: token cache keys, installation checks, key loading, Key Vault transport
mod forge_local; // the local forge's ancestry and pull-request checks on real git repositories
mod forge_merged_branches; // PRs that reach the default branch through a merged branch: both forges and the builtin agent, once each
mod hardening; // issue 34's smaller findings: /readyz bounded while PostgreSQL refuses or is silent, unreadable token scopes, short or shared dispatch secrets
mod harness; // starts real things: the daemon, git servers, the fake GitHub; the git CLI oracle helper
mod history; // a generated 400-PR history replayed through the real daemon: recorded once, reachable, bounded, one commit per job
mod http_limits; // the HTTP server attacked over raw TCP: slow heads, connection limit, body before auth, loopback Host trust
mod mcp_limits; // /mcp and the authenticated routes attacked by a token holder: streams, initialize floods, connection reserve, 429s, session binding and caps, stream lifetime
mod jobs_api; // /v1/jobs over HTTP, token scopes, graceful shutdown
mod private_wiki; // agents read a private GitHub wiki with the App's read-only token (/mcp and stdio), never seeing it
mod mcp; // the wiki MCP server through rmcp's client: modes, envelope, reads, the job-bound writer
mod postgres_harness; // the PostgreSQL harness: the shared server answers, fresh databases are isolated
mod postgres_db; // [database] on a real PostgreSQL server: migrate, the schema's own rules, newer migrations refused, an unreachable server
mod queue; // the durable job queue: enqueue, claim, leases, rescue, steering, retention
mod requests; // POST /v1/requests and `teammem request --wait` over real HTTP, local forge and the fake GitHub
mod sandbox; // the command agent's kernel sandbox via the real sandbox-exec: files, /proc, signals, ports, process trees, fail closed
mod runner; // the job runner: evidence, builtin agent, receipts, writer child
mod wiki; // the wiki engine against real git repositories, the git CLI as oracle
mod workflows; // the shipped workflows' run: scripts with bash against the real daemon: 202, 503 retried, 409, missing settings

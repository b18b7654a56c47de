//! The integration tests: one binary, one module per capability. Each module
//! starts real things (SQLite files, the `teammem` process, git servers) on
//! loopback and temp directories.

mod config; // teammem.toml validation: good files, and a table of bad ones
mod daemon; // the real `teammem serve` process and the offline commands
mod harness; // starts real things: the daemon, git servers, fakes
mod jobs_api; // /v1/jobs over HTTP, token scopes, graceful shutdown
mod runner; // the job runner: evidence, builtin agent, receipts, writer child

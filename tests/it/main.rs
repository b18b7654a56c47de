//! The integration tests: one binary, one module per capability. Each module
//! starts real things (SQLite files, the `teammem` process, git servers) on
//! loopback and temp directories.

mod config; // teammem.toml validation: good files, and a table of bad ones
mod harness; // loopback servers the tests drive: smart-HTTP git (git http-backend)
mod mcp; // the wiki MCP server through rmcp's client: modes, envelope, reads, the job-bound writer
mod wiki; // the wiki engine against real git repositories, the git CLI as oracle

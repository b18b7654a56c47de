//! The integration tests: one binary, one module per capability. Each module
//! starts real things (SQLite files, the `teammem` process, git servers) on
//! loopback and temp directories.

mod config; // teammem.toml validation: good files, and a table of bad ones
mod mcp; // the wiki MCP server through rmcp's client: modes, envelope, reads, the job-bound writer

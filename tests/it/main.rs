//! The integration tests: one binary, one module per capability. Each module
//! starts real things (SQLite files, the `teammem` process, git servers) on
//! loopback and temp directories.

mod config; // teammem.toml validation: good files, and a table of bad ones
mod dispatch; // signed dispatch ingest against the fake GitHub: every answer code, forged runs, OIDC
mod forge_github; // App auth: token cache keys, installation checks, key loading, Key Vault transport
mod forge_local; // the local forge's ancestry and pull-request checks on real git repositories
mod harness; // loopback servers the modules share (fake GitHub, ...)

//! teammem.toml.

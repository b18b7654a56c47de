//! Test harness: real things started on loopback and in temp directories.

pub mod daemon;
pub mod git_http;
pub mod inproc;

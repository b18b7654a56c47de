//! Test harness: real things started on loopback and in temp directories.

pub mod daemon;
pub mod inproc;

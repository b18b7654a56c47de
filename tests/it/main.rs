//! The integration tests: one binary, one module per capability.

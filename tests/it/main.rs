//! The integration tests: one binary, one module per capability.
mod queue; // the durable job queue: enqueue, claim, leases, rescue, steering, retention

-- 0001_queue: the durable job queue (jobs, their identities and deliveries,
-- the append-only audit trail, and the per-source reconciliation cursors).
--
-- Applied once by sqlx::migrate!(); never edit this file after it has shipped:
-- sqlx checks its checksum, so a change must be a new migration (0002+).
--
-- All times are INTEGER unix milliseconds taken from the queue's injectable
-- clock, so tests can move time without sleeping.

-- One row per unit of work. Every state change is a single guarded UPDATE in
-- src/queue/ (see the state diagram in src/queue/model.rs).
CREATE TABLE jobs (
    -- AUTOINCREMENT so an id is never reused after retention prunes old rows:
    -- ids are shown to maintainers and stored in deliveries and MCP tasks.
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT    NOT NULL,   -- owner/name of the source repository
    destination     TEXT    NOT NULL,   -- wiki destination id (one running job each)
    origin          TEXT    NOT NULL CHECK (origin IN ('dispatch', 'request', 'sweep', 'manual')),
    kind            TEXT    NOT NULL CHECK (kind IN ('range', 'pull_request')),
    push_before     TEXT,               -- range jobs: reconcile push_before..push_after
    push_after      TEXT,               -- moves forward when a later range coalesces in
    run_id          INTEGER,            -- range jobs from a dispatch: the Actions run
    run_attempt     INTEGER,
    pull_number     INTEGER,            -- pull_request jobs
    merge_sha       TEXT,
    state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded',
                        'no_change', 'skipped', 'failed', 'cancelled', 'rejected')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    INTEGER NOT NULL CHECK (max_attempts >= 1),
    run_after       INTEGER NOT NULL,   -- not claimable before this instant (backoff)
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    started_at      INTEGER,            -- last claim
    finished_at     INTEGER,            -- set when the job reaches a terminal state
    last_error      TEXT,
    receipt         TEXT,               -- JSON written by the runner on completion
    coalesced_count INTEGER NOT NULL DEFAULT 0,
    actor           TEXT    NOT NULL,   -- who enqueued it
    lease_owner     TEXT,               -- worker holding (or that last held) the lease
    lease_token     TEXT,               -- fence: every worker write must present it
    lease_until     INTEGER,            -- the rescuer requeues running jobs past this
    CHECK ((kind = 'range' AND push_before IS NOT NULL AND push_after IS NOT NULL
            AND pull_number IS NULL AND merge_sha IS NULL)
        OR (kind = 'pull_request' AND pull_number IS NOT NULL AND merge_sha IS NOT NULL
            AND push_before IS NULL AND push_after IS NULL)),
    -- a running job always holds a lease; no other state does
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL))
);

-- The claim scans queued jobs in (run_after, id) order.
CREATE INDEX jobs_claimable ON jobs (run_after, id) WHERE state = 'queued';

-- One running job per wiki destination, enforced by the database itself: the
-- claim statement skips busy destinations, and this index turns any mistake
-- there into an error instead of two writers on one wiki.
CREATE UNIQUE INDEX jobs_one_running_per_destination ON jobs (destination) WHERE state = 'running';

-- The rescuer looks for expired leases.
CREATE INDEX jobs_running_lease ON jobs (lease_until) WHERE state = 'running';

-- Coalescing looks for a queued range job of the source ending where a new one begins.
CREATE INDEX jobs_coalesce ON jobs (source, push_after) WHERE state = 'queued' AND kind = 'range';

-- Listing (newest first), filtered by source and/or state.
CREATE INDEX jobs_source_id ON jobs (source, id);
CREATE INDEX jobs_state_id ON jobs (state, id);

-- Retention finds old terminal jobs.
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- Idempotency: every identity a job answers for (several once ranges coalesce).
-- Keys look like "range:owner/name:run:123:1", "range:owner/name:<before>..<after>"
-- or "pr:owner/name:42:<merge sha>".
CREATE TABLE job_identities (
    identity   TEXT    PRIMARY KEY,
    job_id     INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
);
CREATE INDEX job_identities_job ON job_identities (job_id);

-- Replay protection: a delivery id (X-TeamMem-Delivery) seen before answers
-- with the job it created. Kept at least delivery_retention (>= 3 days).
CREATE TABLE deliveries (
    delivery_id TEXT    PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    received_at INTEGER NOT NULL
);
CREATE INDEX deliveries_job ON deliveries (job_id);
CREATE INDEX deliveries_received_at ON deliveries (received_at);

-- Audit trail: who or what moved a job, written in the same transaction as
-- the change it records. Rows are only ever inserted, and deleted together
-- with their job by retention.
CREATE TABLE job_events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    event  TEXT    NOT NULL,
    detail TEXT
);
CREATE INDEX job_events_job ON job_events (job_id, id);

CREATE TRIGGER job_events_append_only BEFORE UPDATE ON job_events
BEGIN
    SELECT RAISE(ABORT, 'job_events is append-only');
END;

-- Last reconciled commit per source, advanced when a range job succeeds; the
-- scheduler's sweep enqueues cursor..tip when a dispatch was lost.
CREATE TABLE source_cursors (
    source     TEXT    PRIMARY KEY,
    sha        TEXT    NOT NULL,
    job_id     INTEGER,               -- the job that advanced it (may be pruned since)
    updated_at INTEGER NOT NULL
);

-- 0001_queue (PostgreSQL): the durable job queue, shared by every teammem
-- node of a deployment. The same tables, constraints and meanings as
-- migrations/sqlite/0001_queue.sql, in PostgreSQL's types; the queue's
-- semantics are the same on both backends.
--
-- Applied once by sqlx's migrator (`teammem migrate`, or any node at start;
-- concurrent nodes are serialised by the migrator's advisory lock). Never edit
-- a shipped migration: sqlx checks its checksum, so a change is a new file.
--
-- All times are BIGINT unix milliseconds from the queue's injectable clock.

CREATE TABLE jobs (
    -- An identity never reuses an id after retention prunes old rows: ids are
    -- shown to maintainers and stored in deliveries and MCP tasks.
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source          TEXT    NOT NULL,   -- owner/name of the source repository
    destination     TEXT    NOT NULL,   -- wiki destination id (one running job each)
    origin          TEXT    NOT NULL CHECK (origin IN ('dispatch', 'request', 'sweep', 'manual')),
    kind            TEXT    NOT NULL CHECK (kind IN ('range', 'pull_request')),
    push_before     TEXT,               -- range jobs: reconcile push_before..push_after
    push_after      TEXT,               -- moves forward when a later range coalesces in
    run_id          BIGINT,             -- range jobs from a dispatch: the Actions run
    run_attempt     BIGINT,
    pull_number     BIGINT,             -- pull_request jobs
    merge_sha       TEXT,
    state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded',
                        'no_change', 'skipped', 'failed', 'cancelled', 'rejected')),
    attempts        BIGINT  NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    BIGINT  NOT NULL CHECK (max_attempts >= 1),
    run_after       BIGINT  NOT NULL,   -- not claimable before this instant (backoff)
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    started_at      BIGINT,             -- last claim
    finished_at     BIGINT,             -- set when the job reaches a terminal state
    last_error      TEXT,
    receipt         TEXT,               -- JSON written by the runner on completion
    coalesced_count BIGINT  NOT NULL DEFAULT 0,
    actor           TEXT    NOT NULL,   -- who enqueued it
    lease_owner     TEXT,               -- worker holding (or that last held) the lease
    lease_token     TEXT,               -- fence: every worker write must present it
    lease_until     BIGINT,             -- the rescuer requeues running jobs past this
    CHECK ((kind = 'range' AND push_before IS NOT NULL AND push_after IS NOT NULL
            AND pull_number IS NULL AND merge_sha IS NULL)
        OR (kind = 'pull_request' AND pull_number IS NOT NULL AND merge_sha IS NOT NULL
            AND push_before IS NULL AND push_after IS NULL)),
    -- a running job always holds a lease; no other state does
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL))
);

-- The claim scans queued jobs in (run_after, id) order.
CREATE INDEX jobs_claimable ON jobs (run_after, id) WHERE state = 'queued';

-- One running job per wiki destination across all nodes, enforced by the
-- database: two nodes claiming for one wiki at once cannot both succeed.
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
CREATE TABLE job_identities (
    identity   TEXT   PRIMARY KEY,
    job_id     BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL
);
CREATE INDEX job_identities_job ON job_identities (job_id);

-- Replay protection: a delivery id seen before answers with the job it created.
CREATE TABLE deliveries (
    delivery_id TEXT   PRIMARY KEY,
    job_id      BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    received_at BIGINT NOT NULL
);
CREATE INDEX deliveries_job ON deliveries (job_id);
CREATE INDEX deliveries_received_at ON deliveries (received_at);

-- Audit trail, written in the transaction of the change it records; rows are
-- only inserted, and deleted together with their job by retention.
CREATE TABLE job_events (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     BIGINT NOT NULL,
    actor  TEXT   NOT NULL,
    event  TEXT   NOT NULL,
    detail TEXT
);
CREATE INDEX job_events_job ON job_events (job_id, id);

CREATE FUNCTION job_events_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job_events is append-only';
END;
$$;

CREATE TRIGGER job_events_append_only BEFORE UPDATE ON job_events
    FOR EACH ROW EXECUTE FUNCTION job_events_refuse_update();

-- Last reconciled commit per source; the sweep enqueues cursor..tip when a
-- dispatch was lost.
CREATE TABLE source_cursors (
    source     TEXT   PRIMARY KEY,
    sha        TEXT   NOT NULL,
    job_id     BIGINT,               -- the job that advanced it (may be pruned since)
    updated_at BIGINT NOT NULL
);

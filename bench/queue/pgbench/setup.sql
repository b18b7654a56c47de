-- The server-side ceiling of "one claim per free worker" (bench/queue.sh):
-- teammem's jobs and job_events reduced to the columns its claim and
-- completion touch, with its claim index, and enough queued jobs over 64
-- destinations that the run never drains them.
CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    destination text NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    run_after bigint NOT NULL,
    lease_token text,
    updated_at bigint
);
CREATE INDEX jobs_claimable ON jobs (run_after, id) WHERE state = 'queued';
CREATE UNIQUE INDEX jobs_one_running_per_destination ON jobs (destination) WHERE state = 'running';
CREATE TABLE job_events (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    at bigint NOT NULL,
    actor text NOT NULL,
    event text NOT NULL,
    detail text
);
INSERT INTO jobs (destination, state, run_after)
SELECT 'wiki-' || (n % 64), 'queued', n FROM generate_series(1, 400000) AS n;
VACUUM ANALYZE jobs;

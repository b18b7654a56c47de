-- 0005_backfills: `teammem backfill`, a source's earlier history enqueued as
-- range jobs of the ordinary queue, oldest first (src/queue/backfill.rs).
-- A backfill's ranges are claimed in order (an earlier one still queued or
-- running holds the later ones back), never coalesced with other ranges, and
-- cancelled together (`teammem backfill --cancel`).

CREATE TABLE backfills (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    source     TEXT    NOT NULL,   -- owner/name of the source repository
    spec       TEXT    NOT NULL,   -- what was asked, e.g. "--last 500"
    first_sha  TEXT    NOT NULL,   -- the first range's start
    last_sha   TEXT    NOT NULL,   -- the last range's end
    ranges     INTEGER NOT NULL,   -- ranges this backfill enqueued (or queued again)
    actor      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX backfills_source ON backfills (source, id);

-- The range jobs of each backfill, by position (oldest first). A job belongs
-- to at most one backfill: a cancelled range queued again by a later backfill
-- moves to it. Pruned with its job.
CREATE TABLE backfill_ranges (
    job_id      INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    backfill_id INTEGER NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL
);
CREATE INDEX backfill_ranges_order ON backfill_ranges (backfill_id, position);

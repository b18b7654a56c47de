-- One worker's cycle as one transaction, with no client in the way: complete
-- the job it holds (:job, 0 at first) and claim the next (the claim statement
-- of src/queue/claim.rs), each with its event. pgbench runs one connection
-- per worker; the server flushes commits that arrive together at once.
BEGIN;
UPDATE jobs SET state = 'no_change', lease_token = NULL, updated_at = 1 WHERE id = :job AND state = 'running';
INSERT INTO job_events (job_id, at, actor, event) VALUES (:job, 1, 'worker', 'no_change');
UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = md5(random()::text), updated_at = 1 WHERE id = (SELECT candidate.id FROM jobs AS candidate WHERE candidate.state = 'queued' AND candidate.run_after <= 1000000000 AND NOT EXISTS (SELECT 1 FROM jobs AS busy WHERE busy.state = 'running' AND busy.destination = candidate.destination) ORDER BY candidate.run_after, candidate.id LIMIT 1 FOR UPDATE SKIP LOCKED) AND state = 'queued' RETURNING id AS job \gset
INSERT INTO job_events (job_id, at, actor, event, detail) VALUES (:job, 1, 'worker', 'claimed', 'attempt 1 of 5');
COMMIT;

-- Verify jobfence:event_retention on pg
-- Raises when the table holds more than its one row (jobs.prune recreates a missing one).
SELECT 1 / (count(*) <= 1)::integer FROM jobs.event_retention;
SELECT singleton, released_before, updated_at FROM jobs.event_retention WHERE false;

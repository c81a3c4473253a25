-- Revert jobfence:kind_limit_per_key from pg
BEGIN;
-- A kind limited per key only has no row under the older rule: it becomes unlimited.
DELETE FROM jobs.kind_slot AS s
 WHERE s.kind IN (SELECT l.kind FROM jobs.kind_limit AS l WHERE l.max_running IS NULL AND l.rate_limit IS NULL);
DELETE FROM jobs.kind_limit WHERE max_running IS NULL AND rate_limit IS NULL;
DROP INDEX jobs.kind_slot_by_key;
ALTER TABLE jobs.kind_slot DROP COLUMN concurrency_key;
ALTER TABLE jobs.kind_limit
    DROP CONSTRAINT kind_limit_something,
    DROP COLUMN max_running_per_key,
    ADD CONSTRAINT kind_limit_something CHECK (max_running IS NOT NULL OR rate_limit IS NOT NULL);
ALTER TABLE jobs.job_type DROP COLUMN max_running_per_key;
COMMIT;

-- Revert jobfence:submit_many from pg
BEGIN;
DROP FUNCTION jobs.submit_many(jsonb);
COMMIT;

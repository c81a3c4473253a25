-- Revert jobfence:finish_lease from pg
BEGIN;
DROP FUNCTION jobs.finish_lease(text, bigint, text, bigint, text, jsonb, text, uuid, interval);
COMMIT;

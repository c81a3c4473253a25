-- Revert jobfence:progress from pg
BEGIN;
DROP FUNCTION jobs.progress(bigint, text, bigint, jsonb, uuid);
COMMIT;

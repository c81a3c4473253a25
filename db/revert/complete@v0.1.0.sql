-- Revert jobfence:complete from pg
BEGIN;
DROP FUNCTION jobs.complete(bigint, text, bigint, jsonb);
COMMIT;

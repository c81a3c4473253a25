-- Revert jobfence:complete_with_token from pg
BEGIN;
DROP FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid);
COMMIT;

-- Revert jobfence:complete_many from pg
BEGIN;
DROP FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]);
COMMIT;

-- Revert jobfence:compensate from pg
BEGIN;
DROP FUNCTION jobs.compensate(bigint[], text[]);
COMMIT;

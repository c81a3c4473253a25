-- Revert jobfence:cancel from pg
BEGIN;
DROP FUNCTION jobs.cancel(bigint, text);
COMMIT;

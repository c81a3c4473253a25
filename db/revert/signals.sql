-- Revert jobfence:signals from pg
BEGIN;
DROP FUNCTION jobs.signals(bigint[]);
COMMIT;

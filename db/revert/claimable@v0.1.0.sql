-- Revert jobfence:claimable from pg
BEGIN;
DROP VIEW jobs.claimable;
COMMIT;

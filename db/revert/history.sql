-- Revert jobfence:history from pg
BEGIN;
DROP VIEW jobs.history;
COMMIT;

-- Revert jobfence:event from pg
BEGIN;
DROP TABLE jobs.event;
COMMIT;

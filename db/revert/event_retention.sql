-- Revert jobfence:event_retention from pg
BEGIN;
DROP TABLE jobs.event_retention;
COMMIT;

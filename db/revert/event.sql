-- Revert jobfence:event from pg
BEGIN;
-- Drops every partition with it.
DROP TABLE jobs.event;
COMMIT;

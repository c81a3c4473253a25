-- Revert jobfence:schedule_table from pg
BEGIN;
DROP TABLE jobs.schedule;
COMMIT;

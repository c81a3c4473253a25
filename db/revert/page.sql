-- Revert jobfence:page from pg
BEGIN;
DROP TABLE jobs.page;
COMMIT;

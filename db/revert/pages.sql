-- Revert jobfence:pages from pg
BEGIN;
DROP FUNCTION jobs.pages(boolean, integer);
COMMIT;

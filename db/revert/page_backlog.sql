-- Revert jobfence:page_backlog from pg
BEGIN;
DROP FUNCTION jobs.page_backlog();
COMMIT;

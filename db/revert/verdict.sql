-- Revert jobfence:verdict from pg
BEGIN;
DROP TYPE jobs.verdict;
COMMIT;

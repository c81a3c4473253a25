-- Revert jobfence:claim_pages from pg
BEGIN;
DROP FUNCTION jobs.claim_pages(integer, interval);
COMMIT;

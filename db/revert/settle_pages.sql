-- Revert jobfence:settle_pages from pg
BEGIN;
DROP FUNCTION jobs.settle_pages(bigint[], text[], interval, interval);
COMMIT;

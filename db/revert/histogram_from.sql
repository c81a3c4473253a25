-- Revert jobfence:histogram_from from pg
BEGIN;
DROP FUNCTION jobs.histogram_from(integer[], integer[]);
COMMIT;

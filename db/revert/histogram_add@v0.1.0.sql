-- Revert jobfence:histogram_add from pg
BEGIN;
DROP FUNCTION jobs.histogram_add(integer[], integer[]);
COMMIT;

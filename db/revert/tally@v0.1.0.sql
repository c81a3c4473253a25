-- Revert jobfence:tally from pg
BEGIN;
DROP FUNCTION jobs.tally(text[], text[], boolean[], double precision[], double precision[], double precision[], integer[], bigint[]);
COMMIT;

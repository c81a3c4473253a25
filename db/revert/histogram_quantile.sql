-- Revert jobfence:histogram_quantile from pg
BEGIN;
DROP FUNCTION jobs.histogram_quantile(bigint[], double precision);
COMMIT;

-- Revert jobfence:with_lease_tokens from pg
BEGIN;
DROP FUNCTION jobs.with_lease_tokens(jobs.lease[]);
COMMIT;

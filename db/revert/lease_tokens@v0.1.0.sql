-- Revert jobfence:lease_tokens from pg
BEGIN;
DROP FUNCTION jobs.lease_tokens(bigint[], bigint[]);
COMMIT;

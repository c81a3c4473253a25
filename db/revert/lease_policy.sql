-- Revert jobfence:lease_policy from pg
BEGIN;
DROP TABLE jobs.lease_policy;
COMMIT;

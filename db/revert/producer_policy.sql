-- Revert jobfence:producer_policy from pg
BEGIN;
DROP TABLE jobs.producer_policy;
COMMIT;

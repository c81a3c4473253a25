-- Revert jobfence:kind_limit from pg
BEGIN;
DROP TABLE jobs.kind_slot;
DROP TABLE jobs.kind_limit;
COMMIT;

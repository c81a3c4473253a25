-- Revert jobfence:outcome from pg
BEGIN;
DROP TYPE jobs.outcome;
COMMIT;

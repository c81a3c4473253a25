-- Revert jobfence:signal from pg
BEGIN;
DROP TYPE jobs.signal;
COMMIT;

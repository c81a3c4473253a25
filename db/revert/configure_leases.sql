-- Revert jobfence:configure_leases from pg
BEGIN;
DROP FUNCTION jobs.configure_leases(boolean, boolean);
COMMIT;

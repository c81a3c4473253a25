-- Revert jobfence:lease_grant from pg
BEGIN;
DROP TYPE jobs.lease_grant;
COMMIT;

-- Revert jobfence:hold_lease from pg
BEGIN;
DROP FUNCTION jobs.hold_lease(text, bigint, text, bigint, uuid);
COMMIT;

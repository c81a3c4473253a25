-- Revert jobfence:claim_next from pg
BEGIN;
DROP FUNCTION jobs.claim_next(text, text[], integer);
COMMIT;

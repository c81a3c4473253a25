-- Revert jobfence:claim_next_with_token from pg
BEGIN;
DROP FUNCTION jobs.claim_next_with_token(text, text[], integer);
COMMIT;

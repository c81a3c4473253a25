-- Revert jobfence:claim_with_token from pg
BEGIN;
DROP FUNCTION jobs.claim_with_token(bigint, text, text[]);
COMMIT;

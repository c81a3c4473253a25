-- Revert jobfence:claim_many_with_token from pg
BEGIN;
DROP FUNCTION jobs.claim_many_with_token(bigint[], text, text[]);
COMMIT;

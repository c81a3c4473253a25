-- Revert jobfence:claim_many from pg
BEGIN;
DROP FUNCTION jobs.claim_many(bigint[], text, text[]);
COMMIT;

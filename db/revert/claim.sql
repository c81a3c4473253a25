-- Revert jobfence:claim from pg
BEGIN;
DROP FUNCTION jobs.claim(bigint, text, text[]);
COMMIT;

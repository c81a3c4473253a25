-- Revert jobfence:end_unheld from pg
BEGIN;
DROP FUNCTION jobs.end_unheld(bigint[], text, text[]);
COMMIT;

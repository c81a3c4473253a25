-- Revert jobfence:repeat_differences from pg
BEGIN;
DROP FUNCTION jobs.repeat_differences(jsonb);
COMMIT;

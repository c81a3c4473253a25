-- Revert jobfence:fan_out from pg
BEGIN;
DROP FUNCTION jobs.fan_out(jsonb, jsonb);
COMMIT;

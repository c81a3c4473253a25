-- Revert jobfence:unknown_dependency from pg
BEGIN;
DROP FUNCTION jobs.unknown_dependency(jsonb);
COMMIT;

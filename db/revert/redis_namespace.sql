-- Revert jobfence:redis_namespace from pg
BEGIN;
DROP FUNCTION jobs.redis_namespace();
COMMIT;

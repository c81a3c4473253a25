-- Revert jobfence:configure_redis from pg
BEGIN;
DROP FUNCTION jobs.configure_redis(text);
COMMIT;

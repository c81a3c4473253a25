-- Revert jobfence:redis_settings from pg
BEGIN;
DROP TABLE jobs.redis_settings;
COMMIT;

-- Verify jobfence:redis_settings on pg
-- Raises unless the table holds exactly its one settings row.
SELECT 1 / (count(*) = 1)::integer FROM jobs.redis_settings WHERE singleton;
SELECT singleton, namespace, updated_at FROM jobs.redis_settings WHERE false;

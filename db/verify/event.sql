-- Verify jobfence:event on pg
SELECT id, job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error
  FROM jobs.event WHERE false;
-- Raises unless jobs.event is partitioned by range with its default partition.
SELECT 1 / count(*) FROM pg_catalog.pg_partitioned_table AS p
  JOIN pg_catalog.pg_class AS d ON d.oid = p.partdefid
 WHERE p.partrelid = 'jobs.event'::regclass AND p.partstrat = 'r' AND d.relname = 'event_default';

-- Verify jobfence:event_reason_dependencies on pg
-- Raises unless the reason check admits 'dependency_failed'.
SELECT 1 / count(*) FROM pg_catalog.pg_constraint
 WHERE conrelid = 'jobs.event'::regclass AND conname = 'event_reason_known'
   AND pg_get_constraintdef(oid) LIKE '%dependency_failed%';

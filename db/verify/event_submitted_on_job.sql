-- Verify jobfence:event_submitted_on_job on pg
-- Raises unless the reason check refuses 'submitted' (the job row records it).
SELECT 1 / count(*) FROM pg_catalog.pg_constraint
 WHERE conrelid = 'jobs.event'::regclass AND conname = 'event_reason_known'
   AND pg_get_constraintdef(oid) NOT LIKE '%submitted%';

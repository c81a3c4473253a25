-- Verify jobfence:schedule_table on pg
SELECT name, cron, kind, payload, timezone, missed, enabled, ticked_through, last_tick,
       last_job_id, next_tick, created_at, updated_at
  FROM jobs.schedule WHERE false;

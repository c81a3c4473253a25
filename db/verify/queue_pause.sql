-- Verify jobfence:queue_pause on pg
SELECT queue, paused_at, paused_by FROM jobs.queue_pause WHERE false;
SELECT id, queue, action, at, by_role FROM jobs.queue_pause_log WHERE false;

-- Verify jobfence:queue_depth on pg
SELECT queue, kind, queued_ready, queued_delayed, queued_blocked, processing, processing_expired,
       enqueue_failed, oldest_ready_age
  FROM jobs.queue_depth WHERE false;

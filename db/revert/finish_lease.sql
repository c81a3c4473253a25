-- Revert jobfence:finish_lease from pg: the jobs.verdict form goes; the released text form,
-- which the expand left in place, serves again.
BEGIN;
DROP FUNCTION jobs.finish_lease(text, bigint, text, bigint, jobs.verdict, jsonb, text, uuid, interval);
COMMIT;

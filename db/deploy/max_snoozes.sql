-- Deploy jobfence:max_snoozes to pg
-- requires: jobs
BEGIN;
-- How often one job may snooze (per submission or replay) before the next snooze fails it.
-- A snooze spends no retry budget, so without a bound a handler that always says "not now"
-- would keep its job queued for ever; past the bound the job becomes a dead letter, where
-- someone sees it. One function, so the rule and the documents read the same number.
CREATE OR REPLACE FUNCTION jobs.max_snoozes()
RETURNS integer
LANGUAGE sql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$ SELECT 100 $$;
COMMENT ON FUNCTION jobs.max_snoozes() IS
    'How many times one job may snooze (since its submission or last replay); the next snooze fails it (reason failed).';
REVOKE ALL ON FUNCTION jobs.max_snoozes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.max_snoozes() TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;

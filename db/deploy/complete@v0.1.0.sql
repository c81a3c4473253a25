-- Deploy jobfence:complete to pg
-- requires: complete_with_token
-- requires: outcome
-- requires: raise_lease_lost
-- requires: finish_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.complete(job_id bigint, worker text, lease_version bigint, result jsonb DEFAULT NULL)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The token form with no token: one body for both (docs/security.md).
    RETURN jobs.complete(job_id, worker, lease_version, result, NULL::uuid);
END $$;
COMMENT ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) IS
    'Finish a job with its result (processing -> done) if worker still holds lease_version under the session role that claimed it. JB001 otherwise (nothing written), JB002 for an unknown job, 22023 for a result over 1 MiB, 22003 for one holding a number beyond the IEEE-754 double range. wake lists jobs this made claimable.';
REVOKE ALL ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) TO jobs_worker, jobs_admin;
COMMIT;

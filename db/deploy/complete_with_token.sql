-- Deploy jobfence:complete_with_token to pg
-- requires: outcome
-- requires: finish_lease
-- requires: check_worker
BEGIN;
-- jobs.complete with the lease token the claim returned: the same call, and the token must
-- be the lease's (finish_leases checks it with the rest of the authority predicate).
CREATE OR REPLACE FUNCTION jobs.complete(job_id bigint, worker text, lease_version bigint, result jsonb, token uuid)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.complete', worker);
    RETURN jobs.finish_lease('jobs.complete', job_id, worker, lease_version, 'done', result, NULL, token);
END $$;
COMMENT ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) IS
    'jobs.complete presenting the lease token from claim_*_with_token: JB001 (nothing written) also when token is not the lease''s. 22023 for a result over 1 MiB, 22003 for one holding a number beyond the IEEE-754 double range.';
REVOKE ALL ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) TO jobs_worker, jobs_admin;
COMMIT;

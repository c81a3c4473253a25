-- Revert jobfence:complete from pg: back to v0.1.0's two forms, the token overload without
-- defaults (complete_with_token) and the token-less one (complete), as the release shipped them.
BEGIN;
DROP FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid);
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

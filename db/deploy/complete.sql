-- Deploy jobfence:complete to pg
-- requires: complete_with_token
-- requires: verdict
BEGIN;
-- One token convention (docs/design.md, "Lease tokens"): a write to a held lease takes
-- the token as its last parameter, DEFAULT NULL. The released token-less overload goes
-- in the same transaction as the default arrives, so a call without a token always
-- resolves, by position or by name, to this one body.
DROP FUNCTION jobs.complete(bigint, text, bigint, jsonb);
CREATE OR REPLACE FUNCTION jobs.complete(job_id bigint, worker text, lease_version bigint, result jsonb DEFAULT NULL, token uuid DEFAULT NULL)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.complete', worker);
    RETURN jobs.finish_lease('jobs.complete', job_id, worker, lease_version, 'done'::jobs.verdict, result, NULL, token);
END $$;
COMMENT ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) IS
    'Finish a job with its result (processing -> done) if worker still holds lease_version under the session role that claimed it. JB001 otherwise (nothing written), JB002 for an unknown job, 22023 for a result over 1 MiB, 22003 for one holding a number beyond the IEEE-754 double range. wake lists jobs this made claimable. token: the lease token from claim_*_with_token (NULL: none; required when jobs.configure_leases requires it): JB001 (nothing written) also when it is not the lease''s.';
REVOKE ALL ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete(bigint, text, bigint, jsonb, uuid) TO jobs_worker, jobs_admin;
COMMIT;

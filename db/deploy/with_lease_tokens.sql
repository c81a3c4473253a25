-- Deploy jobfence:with_lease_tokens to pg
-- requires: lease
-- requires: lease_grant
-- requires: lease_tokens
BEGIN;
-- Leases just granted, each with its lease token: the one place the three claim_*_with_token
-- functions hand tokens out (the tokens of a batch in one lease_tokens call), in input order.
CREATE OR REPLACE FUNCTION jobs.with_lease_tokens(leases jobs.lease[])
RETURNS SETOF jobs.lease_grant
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    tokens uuid[];
BEGIN
    IF coalesce(cardinality(leases), 0) = 0 THEN
        RETURN;
    END IF;
    tokens := jobs.lease_tokens(ARRAY(SELECT u.job_id FROM unnest(leases) WITH ORDINALITY AS u ORDER BY u.ordinality),
                                ARRAY(SELECT u.lease_version FROM unnest(leases) WITH ORDINALITY AS u ORDER BY u.ordinality));
    RETURN QUERY
    SELECT u.job_id, u.lease_version, u.kind, u.queue, u.payload, u.attempt, u.lease_expires_at, u.timeout_at,
           tokens[u.ordinality]
      FROM unnest(leases) WITH ORDINALITY AS u
     ORDER BY u.ordinality;
END $$;
COMMENT ON FUNCTION jobs.with_lease_tokens(jobs.lease[]) IS
    'Internal: the given leases as jobs.lease_grant, each with its lease token, in input order. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.with_lease_tokens(jobs.lease[]) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:extend_leases to pg
-- requires: job
-- requires: lease_policy
-- requires: lease_tokens
BEGIN;
-- The heartbeat's authority predicate and lease extension, for jobs.heartbeat and
-- jobs.heartbeat_many in every form: what finish_leases is to the exits from processing.
-- Item i is (job_ids[i], lease_versions[i], tokens[i]); tokens NULL (or an element NULL):
-- no token given. A lease is held by an item when the job is processing under worker and
-- lease_version, the session role is the one that claimed it (lease_policy.bind_session_role)
-- and the token, when given or required (require_lease_token), is the lease's. SKIP LOCKED:
-- a row locked elsewhere comes back with held = NULL and is not extended.
CREATE OR REPLACE FUNCTION jobs.extend_leases(job_ids bigint[], worker text, lease_versions bigint[], tokens uuid[])
RETURNS TABLE (job_id bigint, held boolean, alive boolean, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
#variable_conflict use_column
DECLARE
    n integer := cardinality(extend_leases.job_ids);
    refreshed bigint[];
    bind_role boolean;
    require_token boolean;
    me regrole := quote_ident(session_user)::regrole;
    expected uuid[];
    token_ok boolean[];
    inner_key bytea;
    outer_key bytea;
BEGIN
    SELECT p.bind_session_role, p.require_lease_token, p.token_key_inner, p.token_key_outer
      INTO bind_role, require_token, inner_key, outer_key
      FROM jobs.lease_policy AS p;
    -- The token check needs only the item: made once for the batch, and the tokens computed
    -- only when one is given. A token of the HMAC form that releases up to 0.1 handed out
    -- (HMAC-SHA256 under the same key) is still the lease's, so a lease claimed before an
    -- upgrade to one digest (lease_tokens) beats normally; that form is computed only for a
    -- token that is not of the current one (docs/security.md, "Lease tokens"). The same rule
    -- as finish_leases', which the pgTAP file lease_tokens.sql holds both to.
    IF EXISTS (SELECT 1 FROM unnest(extend_leases.tokens) AS t WHERE t IS NOT NULL) THEN
        expected := jobs.lease_tokens(extend_leases.job_ids, extend_leases.lease_versions);
        token_ok := ARRAY(
            SELECT CASE WHEN i.token IS NULL THEN NOT require_token
                        WHEN i.token = i.expected THEN true
                        ELSE i.token = encode(substring(sha256(outer_key || sha256(inner_key || int8send(i.id) || int8send(i.lease_version)))
                                                        FROM 1 FOR 16), 'hex')::uuid END
              FROM unnest(extend_leases.job_ids, extend_leases.lease_versions, extend_leases.tokens, expected)
                   WITH ORDINALITY AS i(id, lease_version, token, expected, ord)
             ORDER BY i.ord);
    ELSE
        token_ok := array_fill(NOT require_token, ARRAY[n]);
    END IF;
    WITH input AS (
        SELECT i.id, i.lease_version, i.token_ok
          FROM unnest(extend_leases.job_ids, extend_leases.lease_versions, token_ok) AS i(id, lease_version, token_ok)
    ), locked AS (
        -- One primary-key lookup per item (LATERAL with LIMIT keeps the items outside; IS
        -- NOT DISTINCT FROM proves no partial index's predicate: see jobs.claimable), in id
        -- order, so two keepers never lock in opposite orders.
        SELECT l.id
          FROM (SELECT DISTINCT i.id, i.lease_version FROM input AS i WHERE i.token_ok ORDER BY i.id) AS i
         CROSS JOIN LATERAL (
               SELECT j.id
                 FROM jobs.job AS j
                WHERE j.id = i.id
                  AND j.status IS NOT DISTINCT FROM 'processing'
                  AND j.owned_by = extend_leases.worker
                  AND j.lease_version = i.lease_version
                  AND (NOT bind_role OR j.claim_role = me)
                LIMIT 1
                  FOR UPDATE SKIP LOCKED) AS l
    ), beat AS (
        -- The lease grows by lease_timeout but never past claimed_at + timeout, and never
        -- shrinks. An expired lease nobody reaped yet still matches: nobody else holds it.
        UPDATE jobs.job AS j
           SET lease_expires_at = greatest(j.lease_expires_at, least(now() + j.lease_timeout, j.claimed_at + j.timeout)),
               updated_at = now()
          FROM locked AS l
         WHERE j.id = l.id
           AND j.id = ANY (extend_leases.job_ids)
        RETURNING j.id
    )
    SELECT coalesce(array_agg(b.id), '{}') INTO refreshed FROM beat AS b;

    -- A new statement sees the refreshed rows (held by this transaction until it ends).
    RETURN QUERY
    SELECT i.id, a.held,
           CASE WHEN a.held THEN now() < cur.claimed_at + cur.timeout END,
           CASE WHEN a.held THEN cur.cancel_requested_at IS NOT NULL END,
           CASE WHEN a.held THEN cur.lease_expires_at END
      FROM unnest(extend_leases.job_ids, extend_leases.lease_versions, token_ok)
           WITH ORDINALITY AS i(id, lease_version, token_ok, ord)
      LEFT JOIN LATERAL (SELECT j.* FROM jobs.job AS j WHERE j.id = i.id LIMIT 1) AS cur ON true
     CROSS JOIN LATERAL (
           SELECT CASE WHEN cur.status IS DISTINCT FROM 'processing' OR cur.owned_by IS DISTINCT FROM extend_leases.worker
                            OR cur.lease_version IS DISTINCT FROM i.lease_version
                            OR (bind_role AND cur.claim_role IS DISTINCT FROM me)
                            OR NOT i.token_ok
                            THEN false
                       WHEN i.id = ANY (refreshed) THEN true
                  END AS held) AS a
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.extend_leases(bigint[], text, bigint[], uuid[]) IS
    'Internal: the heartbeat authority predicate (worker, lease_version, claiming session role, lease token) and lease extension for a batch, never waiting on a row lock: held true (extended), false (not held by this caller), NULL (row locked elsewhere). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.extend_leases(bigint[], text, bigint[], uuid[]) FROM PUBLIC;
COMMIT;

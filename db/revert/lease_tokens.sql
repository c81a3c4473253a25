-- Revert jobfence:lease_tokens from pg: back to the body released in v0.1.0 (HMAC-SHA256)
BEGIN;
-- The lease token of (job_id, lease_version): the first 128 bits of HMAC-SHA256 under the
-- key in jobs.lease_policy, as a uuid. A pure function of the fence and a key no caller can
-- read, so it is unguessable, different for every lease (lease_version never repeats for a
-- job) and never stored. The one place the token is computed: the claims that hand it out
-- and the writes that check it both call this. One call per batch.
CREATE OR REPLACE FUNCTION jobs.lease_tokens(job_ids bigint[], lease_versions bigint[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    inner_key bytea;
    outer_key bytea;
BEGIN
    SELECT p.token_key_inner, p.token_key_outer INTO inner_key, outer_key FROM jobs.lease_policy AS p;
    RETURN ARRAY(
        SELECT CASE WHEN i.id IS NOT NULL AND i.lease_version IS NOT NULL THEN
                    encode(substring(sha256(outer_key || sha256(inner_key || int8send(i.id) || int8send(i.lease_version)))
                                     FROM 1 FOR 16), 'hex')::uuid END
          FROM unnest(job_ids, lease_versions) WITH ORDINALITY AS i(id, lease_version, ord)
         ORDER BY i.ord);
END $$;
COMMENT ON FUNCTION jobs.lease_tokens(bigint[], bigint[]) IS
    'Internal: the lease token of each (job_ids[i], lease_versions[i]) (HMAC-SHA256 under the lease_policy key, 128 bits as a uuid), in input order. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.lease_tokens(bigint[], bigint[]) FROM PUBLIC;
COMMIT;

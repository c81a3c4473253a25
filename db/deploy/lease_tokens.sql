-- Deploy jobfence:lease_tokens to pg
-- requires: lease_policy
BEGIN;
-- The lease token of (job_id, lease_version): the first 128 bits of SHA-256 over the key
-- block of jobs.lease_policy (64 bytes, one SHA-256 block no caller can read) followed by the
-- fence (the two bigints, 16 bytes), as a uuid. A pure function of the fence and the key, so
-- it is unguessable, different for every lease (lease_version never repeats for a job) and
-- never stored. Why one hash is enough where releases up to 0.1 took HMAC's two
-- (docs/security.md, "Lease tokens"): the secret block leaves SHA-256 keyed through its
-- chaining value, the assumption HMAC's own proof rests on, and HMAC's second hash only
-- stops a length extension, which needs a longer message than the 16 bytes every token
-- hashes and the 128 bits of the digest that are never shown. The single claims, claim_next
-- and the heartbeats call this, once per batch; the batch paths' claim_many_with_token and
-- finish_leases compute the same form in their own queries, per item, which costs fewer
-- instructions than an array in and out of this function, and lease_tokens.sql holds all
-- of them to one form. The writes also accept a token of the HMAC form releases up to 0.1
-- handed out, for a lease claimed before an upgrade (finish_leases and extend_leases).
CREATE OR REPLACE FUNCTION jobs.lease_tokens(job_ids bigint[], lease_versions bigint[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    key_block bytea;
BEGIN
    SELECT p.token_key_outer INTO key_block FROM jobs.lease_policy AS p;
    RETURN ARRAY(
        SELECT CASE WHEN i.id IS NOT NULL AND i.lease_version IS NOT NULL THEN
                    encode(substring(sha256(key_block || int8send(i.id) || int8send(i.lease_version)) FROM 1 FOR 16), 'hex')::uuid END
          FROM unnest(job_ids, lease_versions) WITH ORDINALITY AS i(id, lease_version, ord)
         ORDER BY i.ord);
END $$;
COMMENT ON FUNCTION jobs.lease_tokens(bigint[], bigint[]) IS
    'Internal: the lease token of each (job_ids[i], lease_versions[i]) (SHA-256 of the lease_policy key block and the fence, 128 bits as a uuid), in input order. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.lease_tokens(bigint[], bigint[]) FROM PUBLIC;
COMMIT;

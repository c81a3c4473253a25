-- Deploy jobfence:lease_policy to pg
-- requires: jobs
BEGIN;
-- One row of settings for who may write to a lease after its claim, and the key that makes
-- lease tokens unforgeable. A table the callers cannot read or write, not a GUC: any session
-- can SET a custom GUC, so a worker could switch a GUC-based rule off for itself. Changed only
-- through jobs.configure_leases (jobs_admin); the key is never returned by any function.
CREATE TABLE jobs.lease_policy (
    -- At most one row, so every reader sees the same setting.
    singleton           boolean PRIMARY KEY DEFAULT true CONSTRAINT lease_policy_one_row CHECK (singleton),
    -- On: heartbeat, complete and fail (and their batch forms) are accepted only from the
    -- session role (session_user) that claimed the lease. Off for deployments where several
    -- workers share one login role; lease_version still fences them.
    bind_session_role   boolean NOT NULL DEFAULT true,
    -- On: those writes must also present the lease token their claim returned.
    require_lease_token boolean NOT NULL DEFAULT false,
    -- HMAC-SHA256 of (job_id, lease_version) under a random key is the lease token: nothing
    -- per lease is stored, so no read path can reveal it. Kept as the key XOR the inner and
    -- outer pads (RFC 2104), which is all the computation needs.
    token_key_inner     bytea NOT NULL CONSTRAINT lease_policy_inner_key_64 CHECK (octet_length(token_key_inner) = 64),
    token_key_outer     bytea NOT NULL CONSTRAINT lease_policy_outer_key_64 CHECK (octet_length(token_key_outer) = 64),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobs.lease_policy IS
    'Lease binding settings (one row) and the lease-token key. Changed only by jobs.configure_leases; read by finish_leases, extend_leases and lease_tokens.';
COMMENT ON COLUMN jobs.lease_policy.bind_session_role IS
    'On (default): lease writes are accepted only from the session role that claimed the lease.';
COMMENT ON COLUMN jobs.lease_policy.require_lease_token IS
    'On: lease writes without the lease token are refused (JB001); off (default): a token is checked only when given.';
REVOKE ALL ON jobs.lease_policy FROM PUBLIC;

-- A 256-bit key from three version-4 UUIDs (122 random bits each), zero-padded to SHA-256's
-- 64-byte block, then XORed with 0x36 / 0x5c.
DO $$
DECLARE
    key bytea := sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
                 || '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    inner_key bytea := key;
    outer_key bytea := key;
BEGIN
    FOR i IN 0 .. 63 LOOP
        inner_key := set_byte(inner_key, i, get_byte(key, i) # 54);
        outer_key := set_byte(outer_key, i, get_byte(key, i) # 92);
    END LOOP;
    INSERT INTO jobs.lease_policy (token_key_inner, token_key_outer) VALUES (inner_key, outer_key);
END $$;
COMMIT;

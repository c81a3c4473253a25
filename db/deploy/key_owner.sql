-- Deploy jobfence:key_owner to pg
-- requires: own_jobs_only
BEGIN;
-- Whose namespace a new job's idempotency key is in (jobs.job.key_owner), for insert_jobs and
-- for enqueue_tick's lookup of a tick's job: with producer ownership on, a confined producer's
-- keys are its own (Stripe scopes keys to the account), so a repeated key can return only a
-- job the caller submitted; otherwise NULL, one namespace for all.
CREATE OR REPLACE FUNCTION jobs.key_owner()
RETURNS regrole
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN CASE WHEN jobs.own_jobs_only(false) THEN quote_ident(session_user)::regrole END;
END $$;
COMMENT ON FUNCTION jobs.key_owner() IS
    'Internal: the idempotency key namespace of the caller: its login role when producer ownership confines it, else NULL (shared). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.key_owner() FROM PUBLIC;
COMMIT;

-- Deploy jobfence:configure_producers to pg
-- requires: producer_policy
BEGIN;
-- The one way to change jobs.producer_policy, as jobs.configure_leases is for the lease
-- settings: an admin call, so no producer can switch ownership off for itself. NULL leaves
-- the setting as it is; no arguments reads it.
CREATE OR REPLACE FUNCTION jobs.configure_producers(ownership boolean DEFAULT NULL)
RETURNS TABLE (producer_ownership boolean, updated_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF configure_producers.ownership IS NOT NULL THEN
        UPDATE jobs.producer_policy AS p
           SET ownership = configure_producers.ownership, updated_at = now()
         WHERE p.singleton;
    END IF;
    RETURN QUERY SELECT p.ownership, p.updated_at FROM jobs.producer_policy AS p;
END $$;
COMMENT ON FUNCTION jobs.configure_producers(boolean) IS
    'Read or change producer ownership (default off; on: cancel, get and mark_enqueue_failed act only on jobs the caller''s login role submitted, unless it is in jobs_admin). NULL keeps the setting; returns the setting now in force. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.configure_producers(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.configure_producers(boolean) TO jobs_admin;
COMMIT;

-- Deploy jobfence:configure_leases to pg
-- requires: lease_policy
BEGIN;
-- The one way to change jobs.lease_policy: an admin call, so no worker can switch the binding
-- off for itself (a GUC could be SET by any session). NULL leaves a setting as it is; no
-- arguments reads them. The token key is never returned.
CREATE OR REPLACE FUNCTION jobs.configure_leases(bind_session_role boolean DEFAULT NULL,
                                                 require_lease_token boolean DEFAULT NULL)
RETURNS TABLE (session_role_bound boolean, lease_token_required boolean, updated_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF configure_leases.bind_session_role IS NOT NULL OR configure_leases.require_lease_token IS NOT NULL THEN
        UPDATE jobs.lease_policy AS p
           SET bind_session_role = coalesce(configure_leases.bind_session_role, p.bind_session_role),
               require_lease_token = coalesce(configure_leases.require_lease_token, p.require_lease_token),
               updated_at = now()
         WHERE p.singleton;
    END IF;
    RETURN QUERY SELECT p.bind_session_role, p.require_lease_token, p.updated_at FROM jobs.lease_policy AS p;
END $$;
COMMENT ON FUNCTION jobs.configure_leases(boolean, boolean) IS
    'Read or change the lease binding settings: bind_session_role (default on: lease writes only from the claiming session role), require_lease_token (default off). NULL keeps a setting; returns the settings now in force. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.configure_leases(boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.configure_leases(boolean, boolean) TO jobs_admin;
COMMIT;

-- Deploy jobfence:jobs_admin to pg
-- Roles are cluster-wide and may already exist (another database, an earlier deploy):
-- create only when missing so deploy stays idempotent.
BEGIN;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'jobs_admin') THEN
        CREATE ROLE jobs_admin NOLOGIN;
    END IF;
END $$;
COMMIT;

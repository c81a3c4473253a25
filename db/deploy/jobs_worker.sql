-- Deploy jobfence:jobs_worker to pg
-- Roles are cluster-wide and may already exist (another database, an earlier deploy):
-- create only when missing so deploy stays idempotent.
BEGIN;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'jobs_worker') THEN
        CREATE ROLE jobs_worker NOLOGIN;
    END IF;
END $$;
COMMIT;

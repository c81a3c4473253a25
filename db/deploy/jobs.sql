-- Deploy jobfence:jobs to pg
-- requires: jobs_producer
-- requires: jobs_worker
-- requires: jobs_admin
BEGIN;
CREATE SCHEMA jobs;
COMMENT ON SCHEMA jobs IS 'jobfence: durable async jobs. Call the functions; the tables are private.';
-- USAGE lets the roles resolve jobs.* names and composite types; table access stays with the owner.
REVOKE ALL ON SCHEMA jobs FROM PUBLIC;
GRANT USAGE ON SCHEMA jobs TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;

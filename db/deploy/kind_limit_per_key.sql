-- Deploy jobfence:kind_limit_per_key to pg
-- requires: kind_limit
-- requires: job_type
BEGIN;
-- A kind's bound on the running jobs of each concurrency key (jobs.define_type's
-- max_running_per_key), kept like max_running: declared on jobs.job_type, copied to
-- jobs.kind_limit, which the claims read, and counted in jobs.kind_slot, whose slots now
-- say which key they hold.
ALTER TABLE jobs.job_type
    ADD COLUMN max_running_per_key integer,
    ADD CONSTRAINT job_type_max_running_per_key_positive CHECK (max_running_per_key > 0);
COMMENT ON COLUMN jobs.job_type.max_running_per_key IS
    'At most this many jobs of the kind with one concurrency_key processing at once, over every worker (NULL: no bound per key).';
ALTER TABLE jobs.kind_limit
    ADD COLUMN max_running_per_key integer,
    DROP CONSTRAINT kind_limit_something,
    ADD CONSTRAINT kind_limit_something
        CHECK (max_running IS NOT NULL OR rate_limit IS NOT NULL OR max_running_per_key IS NOT NULL);
ALTER TABLE jobs.kind_slot ADD COLUMN concurrency_key text;
-- A key's running count is one index range (the claim holds the kind's row lock meanwhile).
CREATE INDEX kind_slot_by_key ON jobs.kind_slot (kind, concurrency_key) WHERE concurrency_key IS NOT NULL;
COMMIT;

-- Revert jobfence:job_unique_scope from pg
-- Fails (23505) while two jobs share a key, as scoped keys allow: the first release has no
-- way to hold both. Dead letters first: docs/upgrading.md.
BEGIN;
DROP INDEX jobs.job_idempotency_held_idx;
DROP INDEX jobs.job_idempotency_scope_idx;
DROP INDEX jobs.job_idempotency_key_idx;
CREATE UNIQUE INDEX job_idempotency_key_idx ON jobs.job (kind, idempotency_key, key_owner) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE jobs.job
    DROP CONSTRAINT job_unique_scope_keyed,
    DROP COLUMN unique_until,
    DROP COLUMN unique_states;
COMMIT;

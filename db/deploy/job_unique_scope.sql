-- Deploy jobfence:job_unique_scope to pg
-- requires: job
BEGIN;
-- Scoped idempotency keys (docs/sql-api.md, "Scoped keys and debounce"). A key is held by
-- its job while the job is in one of unique_states (NULL: in every state, for the row's
-- lifetime, as in the first release) and, when unique_until is set, until then. The unique
-- index holds a row only while it is in scope, so leaving the scope frees the key without
-- any bookkeeping in the transitions. A job that left its scope must not come back into it
-- (a retry or a replay going back to queued) beside the key's new holder: the submit that
-- takes the key releases every earlier scoped job of the key for good (unique_states '{}'),
-- as it releases one whose period ended (see jobs.insert_jobs).
ALTER TABLE jobs.job
    ADD COLUMN unique_states jobs.status[],
    ADD COLUMN unique_until  timestamptz,
    ADD CONSTRAINT job_unique_scope_keyed CHECK (
        idempotency_key IS NOT NULL OR (unique_states IS NULL AND unique_until IS NULL));
COMMENT ON COLUMN jobs.job.unique_states IS
    'The states in which this job holds its idempotency key; NULL: every state, for good (no scope). ''{}'': released.';
COMMENT ON COLUMN jobs.job.unique_until IS
    'When this job''s hold on its idempotency key ends (the submit''s unique_for); NULL: no end.';
-- The lookups of a key's job (a repeat's answer, jobs.repeat_differences, the ticker's tick
-- jobs) keep an index over every keyed row, in or out of scope: the old index, no longer
-- unique, under the same definition, so their plans do not change.
DROP INDEX jobs.job_idempotency_key_idx;
CREATE INDEX job_idempotency_key_idx ON jobs.job (kind, idempotency_key, key_owner)
    WHERE idempotency_key IS NOT NULL;
-- The rule itself: one job in scope per kind, key and key namespace (NULLS NOT DISTINCT:
-- the shared namespace, NULL, is one namespace). Only keyed rows in scope are in it.
CREATE UNIQUE INDEX job_idempotency_scope_idx ON jobs.job (kind, idempotency_key, key_owner) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL AND (unique_states IS NULL OR status = ANY (unique_states));
-- The scoped jobs of a key that may still hold it, for the submit that releases them: only
-- jobs submitted with a scope, and not yet released, so keys without a scope pay nothing
-- and a key used ten thousand times is not walked per submit.
CREATE INDEX job_idempotency_held_idx ON jobs.job (kind, idempotency_key, key_owner)
    WHERE idempotency_key IS NOT NULL AND unique_states IS NOT NULL AND unique_states <> '{}';
COMMIT;

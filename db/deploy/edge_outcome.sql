-- Deploy jobfence:edge_outcome to pg
-- requires: job_dependency
BEGIN;
-- The one rule of an edge of the job graph (docs/sql-api.md "Dependencies"): what the
-- status of the job depended on means for the dependent under the edge's on_failure policy.
-- jobs.insert_jobs judges a dependency that ended before the edge was written, and
-- jobs.release_dependents one that ends later, by this same rule.
CREATE OR REPLACE FUNCTION jobs.edge_outcome(parent_status jobs.status, on_failure text)
RETURNS text
LANGUAGE sql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    -- met: the edge is released and the dependent may run once its others are;
    -- fails: released, and the dependent fails with the dependency (under fail);
    -- NULL: the edge still holds the dependent back (the dependency has not ended, or it
    -- failed under wait, which a replay that succeeds releases).
    SELECT CASE WHEN parent_status = 'done' THEN 'met'
                WHEN parent_status = 'failed' AND on_failure = 'run' THEN 'met'
                WHEN parent_status = 'failed' AND on_failure = 'fail' THEN 'fails' END
$$;
COMMENT ON FUNCTION jobs.edge_outcome(jobs.status, text) IS
    'Internal: what a dependency''s status means for its dependent under on_failure: met (released), fails (released, the dependent fails: a failed dependency under fail) or NULL (still holding it back). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.edge_outcome(jobs.status, text) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:unknown_dependency to pg
-- requires: job
-- requires: own_jobs_only
BEGIN;
-- Internal: the first job id of a spec's depends_on (docs/sql-api.md "Dependencies") that
-- names no job the caller may see, or NULL. With producer ownership on, another role's job
-- is unknown, as jobs.get says of it: a dependency would tell its state by when this job runs.
CREATE OR REPLACE FUNCTION jobs.unknown_dependency(depends_on jsonb)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    confined boolean := jobs.own_jobs_only(reading => false);
BEGIN
    RETURN (SELECT d.id
              FROM (SELECT (x.v::text)::bigint AS id, x.o
                      FROM jsonb_array_elements(unknown_dependency.depends_on) WITH ORDINALITY AS x(v, o)
                     WHERE jsonb_typeof(x.v) = 'number') AS d
             WHERE NOT EXISTS (SELECT 1 FROM jobs.job AS j
                                WHERE j.id = d.id
                                  AND (NOT confined OR j.submitted_by = quote_ident(session_user)::regrole))
             ORDER BY d.o
             LIMIT 1);
END $$;
COMMENT ON FUNCTION jobs.unknown_dependency(jsonb) IS
    'Internal: the first job id of a depends_on list that names no job the caller may see (producer ownership), or NULL. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.unknown_dependency(jsonb) FROM PUBLIC;
COMMIT;

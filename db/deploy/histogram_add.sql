-- Deploy jobfence:histogram_add to pg
-- requires: jobs
BEGIN;
-- PL/pgSQL for a plan cached per session (see jobs.histogram); called by every upsert of
-- jobs.tally that meets an existing minute (jobs.metrics adds in SQL). A loop that touches
-- only the second histogram's non-zero buckets: a batch fills a handful of its 92, and the
-- set-based sum it replaces (unnest of both, ARRAY of the sums) cost three times as much
-- per call (docs/performance.md, "Instructions per job").
CREATE OR REPLACE FUNCTION jobs.histogram_add(a integer[], b integer[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    total integer[] := a;
BEGIN
    IF a IS NULL THEN
        RETURN b;
    ELSIF b IS NULL THEN
        RETURN a;
    END IF;
    -- A missing or NULL bucket counts as 0, on either side, as it always has.
    FOR i IN 1 .. greatest(cardinality(a), cardinality(b)) LOOP
        IF coalesce(b[i], 0) <> 0 OR a[i] IS NULL THEN
            total[i] := coalesce(a[i], 0) + coalesce(b[i], 0);
        END IF;
    END LOOP;
    RETURN total;
END $$;
COMMENT ON FUNCTION jobs.histogram_add(integer[], integer[]) IS
    'Internal: the element-wise sum of two latency histograms (NULL counts as empty).';
REVOKE ALL ON FUNCTION jobs.histogram_add(integer[], integer[]) FROM PUBLIC;
COMMIT;

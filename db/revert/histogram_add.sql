-- Revert jobfence:histogram_add from pg: back to the body released in v0.1.0
BEGIN;
-- PL/pgSQL for a plan cached per session (see jobs.histogram); called by every upsert of
-- jobs.tally that meets an existing minute, and by jobs.metrics never (it adds in SQL).
CREATE OR REPLACE FUNCTION jobs.histogram_add(a integer[], b integer[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF a IS NULL THEN
        RETURN b;
    ELSIF b IS NULL THEN
        RETURN a;
    END IF;
    RETURN ARRAY(SELECT coalesce(x, 0) + coalesce(y, 0) FROM unnest(a, b) AS u(x, y));
END $$;
COMMENT ON FUNCTION jobs.histogram_add(integer[], integer[]) IS
    'Internal: the element-wise sum of two latency histograms (NULL counts as empty).';
REVOKE ALL ON FUNCTION jobs.histogram_add(integer[], integer[]) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:histogram_quantile to pg
-- requires: jobs
BEGIN;
-- The q-quantile of a latency histogram (jobs.histogram's buckets): find the bucket that
-- holds the rank q * total and interpolate inside it, geometrically (the buckets are
-- logarithmic), linearly in the first bucket [0, 1 ms). The open last bucket answers its
-- lower bound. NULL for an empty histogram.
CREATE OR REPLACE FUNCTION jobs.histogram_quantile(hist bigint[], q double precision)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN (
    WITH b AS (
        SELECT u.k, u.n, sum(u.n) OVER (ORDER BY u.k) AS upto, sum(u.n) OVER () AS total
          FROM unnest(hist) WITH ORDINALITY AS u(n, k)
    ), hit AS (
        SELECT b.k, b.n, (q * b.total - (b.upto - b.n)) / nullif(b.n, 0) AS f
          FROM b
         WHERE b.total > 0 AND b.n > 0 AND b.upto >= q * b.total
         ORDER BY b.k
         LIMIT 1
    )
    SELECT CASE WHEN h.k = 1 THEN 0.001 * greatest(0, least(1, h.f))
                WHEN h.k >= 92 THEN 1e6
                ELSE 0.001 * power(10, (h.k - 2 + greatest(0, least(1, h.f))) / 10.0) END
      FROM hit AS h);
END $$;
COMMENT ON FUNCTION jobs.histogram_quantile(bigint[], double precision) IS
    'Internal: the q-quantile (seconds) of a latency histogram, interpolated inside its bucket; NULL when empty.';
REVOKE ALL ON FUNCTION jobs.histogram_quantile(bigint[], double precision) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:histogram_from to pg
-- requires: jobs
BEGIN;
-- Latency histograms have 92 buckets: [0, 1 ms), then ten per decade from 1 ms to 10^6 s
-- (bucket k >= 2 holds [10^((k-2)/10) ms, 10^((k-1)/10) ms)), then [10^6 s, infinity).
-- Fixed bounds make histograms of different minutes, kinds and shards addable element by
-- element, and a percentile read off them is within one bucket (a factor of 1.26).
-- jobs.tally computes each sample's bucket (the one place that formula lives) and counts
-- equal buckets in its GROUP BY; this turns (bucket, count) pairs into the dense array.
-- PL/pgSQL, STRICT: a batch without samples costs no call, and a loop over a few pairs is
-- cheaper than any set operation.
CREATE OR REPLACE FUNCTION jobs.histogram_from(buckets integer[], counts integer[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    hist integer[] := array_fill(0, ARRAY[92]);
BEGIN
    IF cardinality(buckets) = 0 THEN
        RETURN NULL;
    END IF;
    FOR i IN 1 .. cardinality(buckets) LOOP
        hist[buckets[i]] := hist[buckets[i]] + counts[i];
    END LOOP;
    RETURN hist;
END $$;
COMMENT ON FUNCTION jobs.histogram_from(integer[], integer[]) IS
    'Internal: the dense 92-bucket latency histogram of (bucket, count) pairs; NULL when there are none.';
REVOKE ALL ON FUNCTION jobs.histogram_from(integer[], integer[]) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:backoff_delay to pg
-- requires: jobs
BEGIN;
-- d = least(cap, base * 2^(retry_count - 1)); delay = d/2 + random() * d/2 ("equal jitter"):
-- retries spread out, yet never sooner than half the nominal delay.
CREATE OR REPLACE FUNCTION jobs.backoff_delay(retry_count integer, base interval, cap interval)
RETURNS interval
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    -- In float seconds: a large base times 2^k would overflow interval arithmetic before
    -- least() could cap it. The exponent is capped for the same reason.
    WITH d AS (
        SELECT least(extract(epoch FROM cap)::float8,
                     extract(epoch FROM base)::float8 * pg_catalog.power(2::float8, least(greatest(retry_count - 1, 0), 60)::float8)) AS nominal
    )
    SELECT pg_catalog.make_interval(secs => d.nominal / 2 + d.nominal / 2 * pg_catalog.random()) FROM d
$$;
COMMENT ON FUNCTION jobs.backoff_delay(integer, interval, interval) IS
    'Internal: retry delay after the retry_count-th failure: exponential with jitter, capped. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.backoff_delay(integer, interval, interval) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:backoff_delay to pg
-- requires: jobs
BEGIN;
-- d = least(cap, base * 2^(retry_count - 1)); delay = d/2 + random() * d/2 ("equal jitter"):
-- retries spread out, yet never sooner than half the nominal delay.
CREATE OR REPLACE FUNCTION jobs.backoff_delay(retry_count integer, base interval, cap interval)
RETURNS interval
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    -- The exponent is capped so a large retry_count cannot overflow the interval product.
    WITH d AS (
        SELECT least(cap, base * pg_catalog.power(2, least(greatest(retry_count - 1, 0), 40))::float8) AS nominal
    )
    SELECT d.nominal / 2 + d.nominal / 2 * pg_catalog.random() FROM d
$$;
COMMENT ON FUNCTION jobs.backoff_delay(integer, interval, interval) IS
    'Internal: retry delay after the retry_count-th failure: exponential with jitter, capped. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.backoff_delay(integer, interval, interval) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:settle_pages to pg
-- requires: page
-- requires: jobs_admin
BEGIN;
-- What became of the pages a forwarder claimed: errors[i] NULL means page_ids[i] was
-- delivered (a 2xx); otherwise it failed with that error and is due again after a backoff
-- that doubles per attempt from retry_base up to retry_max. Nothing is ever given up: a page
-- stays until delivered (jobfence pages lists what waits, and why). Settling a page that is
-- already delivered changes nothing. Returns the pages delivered by this call.
CREATE OR REPLACE FUNCTION jobs.settle_pages(page_ids bigint[], errors text[],
                                             retry_base interval DEFAULT '1 second',
                                             retry_max interval DEFAULT '5 minutes')
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    delivered integer;
BEGIN
    IF page_ids IS NULL OR errors IS NULL OR cardinality(page_ids) <> cardinality(errors)
       OR cardinality(page_ids) > 1000 THEN
        RAISE EXCEPTION 'jobs.settle_pages: page_ids and errors must be arrays of the same length, at most 1000'
            USING ERRCODE = '22023', HINT = 'One error per page id, NULL for a delivered page.';
    END IF;
    IF retry_base IS NULL OR retry_max IS NULL OR retry_base <= interval '0' OR retry_max < retry_base
       OR retry_max > interval '1 day' THEN
        RAISE EXCEPTION 'jobs.settle_pages: need 0 < retry_base <= retry_max <= 1 day, got % and %', retry_base, retry_max
            USING ERRCODE = '22023', HINT = 'E.g. retry_base => ''1 second'', retry_max => ''5 minutes''.';
    END IF;
    WITH settled AS (
        UPDATE jobs.page AS p
           SET delivered_at = CASE WHEN s.error IS NULL THEN now() END,
               last_error = coalesce(left(s.error, 2000), p.last_error),
               due_at = CASE WHEN s.error IS NULL THEN p.due_at
                             -- attempts counts this one: the first retry waits retry_base.
                             ELSE now() + least(retry_max, retry_base * power(2, least(p.attempts - 1, 30))) END
          FROM unnest(page_ids, errors) AS s(id, error)
         WHERE p.id = s.id AND p.delivered_at IS NULL
        RETURNING p.delivered_at
    )
    SELECT count(*) FILTER (WHERE delivered_at IS NOT NULL) INTO delivered FROM settled;
    RETURN delivered;
END $$;
COMMENT ON FUNCTION jobs.settle_pages(bigint[], text[], interval, interval) IS
    'Record delivery attempts of claimed pages: a NULL error is delivered, any other backs off (retry_base doubling to retry_max) and is retried; none is given up. Returns how many were delivered. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.settle_pages(bigint[], text[], interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.settle_pages(bigint[], text[], interval, interval) TO jobs_admin;
COMMIT;

-- Deploy jobfence:claim_pages to pg
-- requires: page
-- requires: jobs_admin
BEGIN;
-- A forwarder takes the pages due now, at most max_pages, and holds them for `hold` (its
-- webhook timeout and then some): another forwarder skips them meanwhile (SKIP LOCKED
-- while the claim runs, due_at after it commits), and if this one dies before it settles
-- them they are due again when the hold ends. Delivery is at least once: a page may be
-- posted twice (a forwarder killed after the POST, before jobs.settle_pages), always with
-- the same id.
CREATE OR REPLACE FUNCTION jobs.claim_pages(max_pages integer DEFAULT 10, hold interval DEFAULT '30 seconds')
RETURNS SETOF jobs.page
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF max_pages IS NULL OR max_pages < 1 OR max_pages > 1000 THEN
        RAISE EXCEPTION 'jobs.claim_pages: max_pages must be between 1 and 1000, got %', max_pages
            USING ERRCODE = '22023', HINT = 'The reaper''s forwarder claims 10 at a time.';
    END IF;
    IF hold IS NULL OR hold <= interval '0' OR hold > interval '1 day' THEN
        RAISE EXCEPTION 'jobs.claim_pages: hold must be a positive interval of at most a day, got %', hold
            USING ERRCODE = '22023', HINT = 'Longer than one delivery attempt takes.';
    END IF;
    RETURN QUERY
    UPDATE jobs.page AS p
       SET attempts = p.attempts + 1, last_attempt_at = now(), due_at = now() + hold
      FROM (SELECT d.id FROM jobs.page AS d
             WHERE d.delivered_at IS NULL AND d.due_at <= now()
             ORDER BY d.due_at, d.id
             LIMIT max_pages
               FOR UPDATE SKIP LOCKED) AS due
     WHERE p.id = due.id
    RETURNING p.*;
END $$;
COMMENT ON FUNCTION jobs.claim_pages(integer, interval) IS
    'The dead-letter forwarder''s claim: up to max_pages undelivered pages due now, each held for hold (skipped by other forwarders; due again if not settled). Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.claim_pages(integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_pages(integer, interval) TO jobs_admin;
COMMIT;

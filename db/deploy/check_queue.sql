-- Deploy jobfence:check_queue to pg
-- requires: jobs
BEGIN;
-- The queue-name rule of jobs.define_type, for the functions that name a queue on its own:
-- a queue no kind could have is a typo, and acting on it would silently do nothing.
CREATE OR REPLACE FUNCTION jobs.check_queue(caller text, queue text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION '%: queue % is malformed', caller, coalesce(quote_literal(queue), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'Queue names are 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit.';
    END IF;
END $$;
COMMENT ON FUNCTION jobs.check_queue(text, text) IS
    'Internal: raise 22023 (naming caller) unless queue is a name define_type accepts. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.check_queue(text, text) FROM PUBLIC;
COMMIT;

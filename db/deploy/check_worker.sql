-- Deploy jobfence:check_worker to pg
-- requires: jobs
BEGIN;
CREATE OR REPLACE FUNCTION jobs.check_worker(caller text, worker text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION '%: worker must be a non-empty string', caller
            USING ERRCODE = '22023', HINT = 'Pass a stable worker id, e.g. host:pid.';
    END IF;
    IF length(worker) > 200 THEN
        RAISE EXCEPTION '%: worker id is % characters long; the limit is 200', caller, length(worker)
            USING ERRCODE = '22023', HINT = 'Pass a short stable worker id, e.g. host:pid.';
    END IF;
END $$;
COMMENT ON FUNCTION jobs.check_worker(text, text) IS
    'Internal: raise 22023 unless worker is a usable worker id. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.check_worker(text, text) FROM PUBLIC;
COMMIT;

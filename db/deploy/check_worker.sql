-- Deploy jobfence:check_worker to pg
-- requires: jobs
BEGIN;
CREATE OR REPLACE FUNCTION jobs.check_worker(caller text, worker text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    bad_char text;
BEGIN
    IF worker IS NULL OR worker = '' THEN
        RAISE EXCEPTION '%: worker must be a non-empty string', caller
            USING ERRCODE = '22023', HINT = 'Pass a stable worker id, e.g. host:pid.';
    END IF;
    -- Before the pattern tests, so a huge id costs one length count.
    IF length(worker) > 200 THEN
        RAISE EXCEPTION '%: worker id is % characters long; the limit is 200', caller, length(worker)
            USING ERRCODE = '22023', HINT = 'Pass a short stable worker id, e.g. host:pid.';
    END IF;
    -- The id is stored as owned_by and shown in events, logs and dashboards: a control
    -- character (C0, C1), an invisible format character (soft hyphen, zero-width, BOM) or a
    -- bidi control (U+061C, U+200E/F, U+202A-E, U+2066-9) could hide or reorder what an
    -- operator reads there.
    bad_char := substring(worker from '[\u0001-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]');
    IF bad_char IS NOT NULL THEN
        RAISE EXCEPTION '%: worker id contains the control or format character U+%', caller, upper(lpad(to_hex(ascii(bad_char)), 4, '0'))
            USING ERRCODE = '22023', HINT = 'Use printable characters only, e.g. host:pid.';
    END IF;
    -- Not trimmed on the caller's behalf: owned_by must equal the id the worker passes again
    -- to heartbeat and complete, so " w " and "w" stay two different ids, and " w " is refused.
    IF worker ~ '^[\s\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]|[\s\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]$' THEN
        RAISE EXCEPTION '%: worker id % has leading or trailing whitespace', caller, quote_literal(worker)
            USING ERRCODE = '22023', HINT = 'Pass the id without surrounding whitespace, e.g. host:pid.';
    END IF;
END $$;
COMMENT ON FUNCTION jobs.check_worker(text, text) IS
    'Internal: raise 22023 unless worker is a usable worker id (1-200 characters, no control, format or bidi characters, no leading or trailing whitespace). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.check_worker(text, text) FROM PUBLIC;
COMMIT;

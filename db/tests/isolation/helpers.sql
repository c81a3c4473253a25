-- Helpers shared by the isolation specs (db/tests/isolation/specs), loaded once into the
-- database they run in, after the deploy (scripts/test). Schema iso, apart from the package.
-- Jobs are known by name: their ids change from one permutation to the next, and the expected
-- output must not. The set-up helpers are procedures, so a spec's setup block prints nothing.
CREATE SCHEMA iso;
CREATE TABLE iso.named (name text PRIMARY KEY, id bigint NOT NULL UNIQUE);

CREATE FUNCTION iso.id(name text) RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT n.id FROM iso.named AS n WHERE n.name = $1 $$;
CREATE FUNCTION iso.name(id bigint) RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT n.name FROM iso.named AS n WHERE n.id = $1 $$;
-- the ids of the named jobs, in the order given (an argument of the *_many functions)
CREATE FUNCTION iso.ids(VARIADIC names text[]) RETURNS bigint[] LANGUAGE sql STABLE
    AS $$ SELECT array_agg(iso.id(g.name) ORDER BY g.ord) FROM unnest($1) WITH ORDINALITY AS g(name, ord) $$;

-- A kind with the defaults the specs count on: a 15 s lease within a 30 s execution timeout,
-- so that a lease 16 s old has lost its heartbeats (reap: verdict expired, due again at once).
CREATE PROCEDURE iso.kind(kind text, max_retries integer DEFAULT 3, queue text DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM jobs.define_type(kind, queue => coalesce(queue, kind), lease_timeout => '15 seconds',
                             timeout => '30 seconds', max_retries => max_retries);
END $$;

CREATE PROCEDURE iso.submit(name text, kind text, concurrency_key text DEFAULT NULL)
LANGUAGE sql AS $$
    INSERT INTO iso.named
    SELECT name, (jobs.submit(kind, notify => false, concurrency_key => concurrency_key)).id
$$;

-- submitted and claimed by worker, as the session's role
CREATE PROCEDURE iso.running(name text, kind text, worker text)
LANGUAGE plpgsql AS $$
BEGIN
    CALL iso.submit(name, kind);
    IF NOT EXISTS (SELECT 1 FROM jobs.claim_many(ARRAY[iso.id(name)], worker)) THEN
        RAISE EXCEPTION 'iso.running: % was not claimed', name;
    END IF;
END $$;

-- Time passes for one job: every timestamp it carries moves back by the interval.
CREATE PROCEDURE iso.elapse(name text, by interval)
LANGUAGE sql AS $$
    UPDATE jobs.job AS j
       SET created_at = j.created_at - by, updated_at = j.updated_at - by,
           claimed_at = j.claimed_at - by, lease_expires_at = j.lease_expires_at - by,
           run_after = j.run_after - by, due_at = j.due_at - by, finished_at = j.finished_at - by,
           cancel_requested_at = j.cancel_requested_at - by
     WHERE j.id = iso.id(name)
$$;

-- The jobs of the last permutation go: jobs.reap takes every expired lease in the database,
-- so one left processing would show up in the next permutation's output.
CREATE PROCEDURE iso.forget()
LANGUAGE sql AS $$
    DELETE FROM jobs.job AS j WHERE j.id IN (SELECT n.id FROM iso.named AS n);
    DELETE FROM iso.named;
$$;

-- The statement's first value as text, or the SQLSTATE it raises: the error's message would
-- name a job id, which changes from one permutation to the next.
CREATE FUNCTION iso.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    EXECUTE stmt INTO answer;
    RETURN answer;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE;
END $$;

-- What a spec checks at the end: the row's fencing facts and its whole event history.
-- lease: live or expired while processing (the reaper takes an expired one), else NULL.
CREATE FUNCTION iso.state(VARIADIC names text[])
RETURNS TABLE (name text, status jobs.status, owner text, lv bigint, retries integer, cancel boolean,
               lease text, result jsonb, events text)
LANGUAGE sql STABLE AS $$
    SELECT g.name, j.status, j.owned_by, j.lease_version, j.retry_count, j.cancel_requested_at IS NOT NULL,
           CASE WHEN j.lease_expires_at <= now() THEN 'expired' WHEN j.lease_expires_at IS NOT NULL THEN 'live' END,
           j.result,
           (SELECT string_agg(e.reason, ' ' ORDER BY e.id) FROM jobs.history AS e WHERE e.job_id = j.id)
      FROM unnest($1) WITH ORDINALITY AS g(name, ord)
      JOIN jobs.job AS j ON j.id = iso.id(g.name)
     ORDER BY g.ord
$$;

-- Deploy jobfence:finish_leases to pg
-- requires: max_snoozes
-- requires: outcome
-- requires: event
-- requires: backoff_delay
-- requires: release_dependents
-- requires: tally
-- requires: lease_policy
-- requires: lease_tokens
-- requires: verdict
BEGIN;
-- The one exit from processing, the mirror of grant_leases. complete, complete_many, fail,
-- fail_many, snooze, snooze_many (the single forms through finish_lease) and reap are thin
-- callers: this function alone owns the authority predicate,
-- the next-state rule, the SET list, the event rows and the wake-ups (docs/sql-api.md,
-- "Leaving processing"). Item i is (job_ids[i], workers[i], lease_versions[i], verdicts[i],
-- results[i], errors[i]); verdicts (jobs.verdict): done (a result), retry (a failure that
-- may be retried), fatal (a failure no retry can fix), expired (the reaper took a lease whose
-- heartbeats stopped: due again at once), timeout (the reaper took a lease that reached its
-- execution timeout: a failure, retried after the kind's backoff), snooze (not now: queued
-- again after delays[i], the retry budget untouched, at most jobs.max_snoozes() times per
-- job; past that the job fails, so a job cannot snooze for ever unnoticed).
-- Returns one outcome per item, in input order; accepted = false (nothing written) where
-- the worker no longer holds that lease_version. A repeated id is applied once: the first
-- item that holds the current lease. tokens[i]: the lease token the caller presented (NULL:
-- none); caller: the public function, named in errors. An item holds its lease only from
-- the session role that claimed it (unless lease_policy.bind_session_role is off) and with
-- its lease token when one is given or required (lease_policy.require_lease_token). The one
-- bypass is the reaper's: expired and timeout end a lease whoever holds it (jobs.reap has
-- locked the expired rows), and only caller jobs.reap may pass them.
-- Expand and contract: this signature replaces the released text[] one, which stays until
-- its callers have moved (contract_text_verdicts drops it).
CREATE OR REPLACE FUNCTION jobs.finish_leases(job_ids bigint[], workers text[], lease_versions bigint[],
                                              verdicts jobs.verdict[], results jsonb[], errors text[],
                                              tokens uuid[], caller text, delays interval[] DEFAULT NULL)
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
DECLARE
    ended_ids bigint[] := '{}';
    applied_ords bigint[] := '{}';
    applied jobs.outcome[] := '{}';
    woken_by bigint[] := '{}';
    woken bigint[] := '{}';
    n integer := cardinality(job_ids);
    pending bigint[];          -- NULL: every item (the first round)
    round_ended bigint[];
    round_ords bigint[];
    round_outcomes jobs.outcome[];
    decided_count integer;
    tallied integer;
    rounds integer := 0;
    bind_role boolean;
    require_token boolean;
    me regrole := quote_ident(session_user)::regrole;
    inner_key bytea;
    tokens_ok boolean[];
    outer_key bytea;
    too_big record;
    snooze_limit integer := jobs.max_snoozes();
BEGIN
    IF caller IS NULL OR array_position(finish_leases.verdicts, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.finish_leases: every item needs a verdict, and the call a caller'
            USING ERRCODE = '22023', HINT = 'Pass the public function as caller and one jobs.verdict per item.';
    END IF;
    IF caller <> 'jobs.reap' AND ('expired' = ANY (finish_leases.verdicts) OR 'timeout' = ANY (finish_leases.verdicts)) THEN
        RAISE EXCEPTION '%: the verdicts expired and timeout are the reaper''s', caller
            USING ERRCODE = '22023', HINT = 'They skip the role and token checks: only jobs.reap, which has locked the expired leases, may pass them.';
    END IF;
    -- Caps on what an outcome may store, checked before anything is written. A number
    -- beyond the IEEE-754 double range would leave the result unreadable by the producer's
    -- JSON reader: refused as a payload's is (insert_jobs says why the text is tested first).
    -- Results have no depth cap, and an unbounded walk runs out of stack near 10,000 levels:
    -- it stops at 1000, deeper than any reader's parser goes (those fail on the depth alone).
    SELECT i.ord - 1 AS item, octet_length(r.result_text) AS result_bytes, octet_length(i.error) AS error_bytes,
           NOT coalesce(octet_length(r.result_text) > 1048576 OR octet_length(i.error) > 65536, false) AS unportable
      INTO too_big
      FROM unnest(finish_leases.results, finish_leases.errors) WITH ORDINALITY AS i(result, error, ord)
      CROSS JOIN LATERAL (SELECT i.result::text AS result_text OFFSET 0) AS r
     WHERE octet_length(r.result_text) > 1048576 OR octet_length(i.error) > 65536
        OR (octet_length(r.result_text) >= 309 AND r.result_text ~ '[0-9]{255}'
            AND jsonb_path_exists(i.result, 'strict $.**{0 to 1000} ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308))'))
     ORDER BY i.ord
     LIMIT 1;
    IF FOUND AND too_big.unportable THEN
        RAISE EXCEPTION '%: item %: the result holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)',
            caller, too_big.item
            USING ERRCODE = '22003',
                  HINT = 'JSON readers (JavaScript, Python, Go, ...) cannot decode it: return such a number as a string, e.g. {"n": "1e400"}. Items are numbered from 0.';
    ELSIF FOUND THEN
        RAISE EXCEPTION '%: item %: % is % bytes, over the limit of %', caller, too_big.item,
            CASE WHEN too_big.result_bytes > 1048576 THEN 'the result (as JSON text)' ELSE 'the error' END,
            CASE WHEN too_big.result_bytes > 1048576 THEN too_big.result_bytes ELSE too_big.error_bytes END,
            CASE WHEN too_big.result_bytes > 1048576 THEN '1048576 (1 MiB)' ELSE '65536 (64 KiB)' END
            USING ERRCODE = '22023',
                  HINT = 'Store large results elsewhere (an object-storage key) and return the reference; shorten the error. Items are numbered from 0.';
    END IF;
    -- A snooze's delay, checked once here for jobs.snooze and jobs.snooze_many alike; a
    -- batch without a snooze (every completion) skips the pass over its items.
    IF 'snooze' = ANY (finish_leases.verdicts) THEN
        SELECT i.ord - 1 AS item, i.delay INTO too_big
          FROM unnest(finish_leases.verdicts, coalesce(finish_leases.delays, array_fill(NULL::interval, ARRAY[n])))
               WITH ORDINALITY AS i(verdict, delay, ord)
         WHERE i.verdict = 'snooze' AND (i.delay IS NULL OR i.delay < interval '0' OR i.delay > interval '30 days')
         ORDER BY i.ord
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%: item %: the snooze delay % is out of range', caller, too_big.item, coalesce(too_big.delay::text, 'NULL')
                USING ERRCODE = '22023',
                      HINT = 'A snooze waits from 0 seconds to 30 days; for a later time, complete this job and submit another with run_after. Items are numbered from 0.';
        END IF;
    END IF;
    SELECT p.bind_session_role, p.require_lease_token, p.token_key_inner, p.token_key_outer
      INTO bind_role, require_token, inner_key, outer_key
      FROM jobs.lease_policy AS p;
    -- tokens_ok[i]: item i's token proves its lease (or none was given and none is required).
    -- The token is of jobs.lease_tokens' form, computed here per item (through lease_tokens,
    -- an array in and out, it cost 3 % more instructions per completed job;
    -- docs/performance.md, "The lease tokens in the batch calls' own queries");
    -- lease_tokens.sql holds the two to one form. A token of the HMAC form that releases up
    -- to 0.1 handed out (HMAC-SHA256 under the same key) is still the lease's, so a lease
    -- claimed before an upgrade to one digest ends normally; computed only for a token that
    -- is not of the current form, so the usual batch pays one digest per item
    -- (docs/security.md, "Lease tokens"). The same rules as extend_leases', which cannot
    -- call one helper with this function: this unreleased rework comes earlier in the plan
    -- than any new change, and would call it before an upgrade had deployed it. Computed
    -- once, for both statements below.
    tokens_ok := ARRAY(
        SELECT CASE WHEN i.token IS NULL THEN NOT require_token
                    WHEN i.token = encode(substring(sha256(outer_key || int8send(i.id) || int8send(i.lease_version)) FROM 1 FOR 16), 'hex')::uuid THEN true
                    ELSE i.token = encode(substring(sha256(outer_key || sha256(inner_key || int8send(i.id) || int8send(i.lease_version)))
                                                    FROM 1 FOR 16), 'hex')::uuid END
          FROM unnest(finish_leases.job_ids, finish_leases.lease_versions,
                      coalesce(finish_leases.tokens, array_fill(NULL::uuid, ARRAY[n])))
               WITH ORDINALITY AS i(id, lease_version, token, ord)
         ORDER BY i.ord);

    -- The usual call: a worker completing the leases it holds (every verdict done, leases
    -- bound to the claiming session role). The general statement below, specialised: done
    -- is the next state whatever the row says (a cancel request, the retry budget), so
    -- nothing is read before the UPDATE, whose WHERE is the authority predicate re-checked on
    -- the newest row version after a lock wait; and the claimant itself completing writes no
    -- jobs.event row (docs/design.md "What is recorded where"). One round, no lookup per item
    -- before it: a sixth of a completion's server instructions (docs/performance.md, "One
    -- statement for a worker's completions"). Of repeated items of one lease, the first
    -- applies, as below.
    IF bind_role AND 'done' = ALL (finish_leases.verdicts) THEN
        WITH held AS (
            SELECT DISTINCT ON (h.id, h.worker, h.lease_version) h.id, h.worker, h.lease_version, h.result, h.ord
              FROM unnest(finish_leases.job_ids, finish_leases.workers, finish_leases.lease_versions,
                          finish_leases.results, tokens_ok)
                   WITH ORDINALITY AS h(id, worker, lease_version, result, proven, ord)
             WHERE h.proven
             ORDER BY h.id, h.worker, h.lease_version, h.ord
        ), completed AS (
            UPDATE jobs.job AS j
               SET status = 'done', result = h.result, lease_expires_at = NULL, finished_at = now(), updated_at = now()
              FROM held AS h
             WHERE j.id = h.id
               AND j.id = ANY (finish_leases.job_ids)
               AND j.status IS NOT DISTINCT FROM 'processing'::jobs.status
               AND j.owned_by = h.worker
               AND j.lease_version = h.lease_version
               AND j.claim_role = me
            RETURNING j.id, j.status, j.run_after, j.parent_id, j.ordering_key, j.has_dependents, h.ord,
                      j.kind, j.due_at, j.claimed_at, j.retry_count
        )
        SELECT coalesce(array_agg(c.id) FILTER (WHERE c.parent_id IS NOT NULL OR c.ordering_key IS NOT NULL OR c.has_dependents), '{}'),
               coalesce(array_agg(c.ord ORDER BY c.ord), '{}'),
               coalesce(array_agg((c.id, true, c.status, c.run_after, '{}')::jobs.outcome ORDER BY c.ord), '{}'),
               jobs.tally(array_agg(c.kind), array_agg('completed'::text), NULL, NULL,
                          array_agg(date_part('epoch', now() - c.claimed_at)),
                          array_agg(date_part('epoch', now() - c.due_at)),
                          array_agg(c.retry_count), array_agg(c.id))
          INTO ended_ids, applied_ords, applied, tallied
          FROM completed AS c;
        rounds := 1;
    ELSE
        -- No explicit row locks: the UPDATE itself waits for a concurrent writer and then
        -- re-checks its WHERE on the newest row version. A row whose facts changed meanwhile (a
        -- cancel request, a reaper's requeue) is left alone by this round and decided again in
        -- the next one, from what it says then. Usually there is one round.
        LOOP
            rounds := rounds + 1;
            WITH input AS (
                SELECT i.id, i.worker, i.lease_version, i.verdict, i.result, i.error, i.ord, i.delay,
                       i.verdict IN ('expired', 'timeout') AS by_reaper,
                       i.verdict IN ('expired', 'timeout') OR i.token_ok AS token_ok
                  FROM unnest(finish_leases.job_ids, finish_leases.workers, finish_leases.lease_versions,
                              finish_leases.verdicts, finish_leases.results, finish_leases.errors, tokens_ok,
                              coalesce(finish_leases.delays, array_fill(NULL::interval, ARRAY[n])))
                       WITH ORDINALITY AS i(id, worker, lease_version, verdict, result, error, token_ok, delay, ord)
                 WHERE pending IS NULL OR i.ord = ANY (pending)
            ), decided AS (
                -- The authority predicate, and the next-state rule (reliability contract §4;
                -- docs/sql-api.md "Leaving processing") on what the row says now. A repeated id
                -- that holds the lease more than once is applied once (its first item). In id
                -- order, so concurrent batches update rows in the same order: no deadlock.
                SELECT DISTINCT ON (i.id) i.id, i.worker, i.lease_version, i.verdict, i.result, i.ord, i.delay,
                       CASE WHEN i.verdict = 'snooze' AND cur.snoozes >= snooze_limit
                            THEN format('snoozed %s times, the limit: failed so that it is noticed', cur.snoozes)
                            ELSE i.error END AS error,
                       cur.retry_count, cur.max_retries, cur.cancel_requested_at IS NOT NULL AS cancel_asked,
                       cur.claimed_at, cur.claim_role,
                       CASE WHEN i.verdict = 'done' THEN 'done'::jobs.status
                            WHEN i.verdict = 'snooze' AND cur.cancel_requested_at IS NULL AND cur.snoozes < snooze_limit
                              THEN 'queued'::jobs.status
                            WHEN cur.cancel_requested_at IS NOT NULL OR i.verdict IN ('fatal', 'snooze')
                              OR cur.retry_count + 1 > cur.max_retries THEN 'failed'::jobs.status
                            ELSE 'queued'::jobs.status END AS next_status,
                       CASE WHEN i.verdict = 'done' THEN 'completed'
                            WHEN cur.cancel_requested_at IS NOT NULL THEN 'cancelled'
                            WHEN i.verdict = 'snooze' AND cur.snoozes < snooze_limit THEN 'snoozed'
                            WHEN i.verdict IN ('fatal', 'snooze') THEN 'failed'
                            WHEN cur.retry_count + 1 > cur.max_retries THEN 'exhausted'
                            WHEN i.verdict = 'expired' THEN 'reaped'
                            WHEN i.verdict = 'timeout' THEN 'timed_out'
                            ELSE 'retried' END AS reason
                  FROM input AS i
                  -- One primary-key lookup per item, whatever the statistics say: LATERAL with
                  -- LIMIT keeps the items outside (a join could be turned round into a scan of
                  -- the table, or of a partial index, per item), and IS NOT DISTINCT FROM does
                  -- not prove a partial index's predicate (see jobs.claimable).
                 CROSS JOIN LATERAL (
                       SELECT j.retry_count, j.max_retries, j.cancel_requested_at, j.claimed_at, j.claim_role, j.snoozes
                         FROM jobs.job AS j
                        WHERE j.id = i.id
                          AND j.status IS NOT DISTINCT FROM 'processing'
                          AND j.owned_by = i.worker
                          AND j.lease_version = i.lease_version
                          -- Who may write: the claiming session role (one lease_version has one
                          -- claim, so the UPDATE's lease_version re-check covers it too).
                          AND (i.by_reaper OR NOT bind_role OR j.claim_role = me)
                        LIMIT 1) AS cur
                 WHERE i.token_ok
                 ORDER BY i.id, i.ord
            ), finished AS (
                UPDATE jobs.job AS j
                   SET status = d.next_status,
                       result = CASE WHEN d.verdict = 'done' THEN d.result END,
                       -- A snooze keeps the last attempt's error: the job has not failed again.
                       error = CASE WHEN d.verdict = 'done' OR d.reason = 'snoozed' THEN j.error ELSE d.error END,
                       -- A snooze is not a failed attempt: it spends no retry budget.
                       retry_count = j.retry_count + CASE WHEN d.verdict IN ('done', 'snooze') THEN 0 ELSE 1 END,
                       snoozes = j.snoozes + CASE WHEN d.reason = 'snoozed' THEN 1 ELSE 0 END,
                       -- done keeps who finished it and when it started; failed and requeued clear them.
                       owned_by = CASE WHEN d.verdict = 'done' THEN j.owned_by END,
                       claim_role = CASE WHEN d.verdict = 'done' THEN j.claim_role END,
                       claimed_at = CASE WHEN d.verdict = 'done' THEN j.claimed_at END,
                       lease_expires_at = NULL,
                       lease_version = j.lease_version + CASE WHEN d.next_status = 'queued' THEN 1 ELSE 0 END,
                       -- A reaped job is due at once; a failed attempt (a timeout too) waits for its kind's backoff
                       -- (looked up only then: completions, the common case, never need it).
                       run_after = CASE WHEN d.next_status <> 'queued' THEN j.run_after
                                        WHEN d.verdict = 'expired' THEN now()
                                        WHEN d.verdict = 'snooze' THEN now() + d.delay
                                        ELSE now() + (SELECT jobs.backoff_delay(j.retry_count + 1, t.backoff_base, t.backoff_max)
                                                        FROM jobs.job_type AS t WHERE t.kind = j.kind) END,
                       finished_at = CASE WHEN d.next_status = 'queued' THEN NULL ELSE now() END,
                       updated_at = now()
                  FROM decided AS d
                 -- Found through the primary key (id = ANY), joined by hash: the same plan on an
                 -- empty table as on a full one (docs/decisions.md, "planned the same on any table").
                 WHERE j.id = d.id
                   AND j.id = ANY (finish_leases.job_ids)
                   -- Re-checked on the newest version after a lock wait: the lease is still held...
                   AND j.status IS NOT DISTINCT FROM 'processing'
                   AND j.owned_by = d.worker
                   AND j.lease_version = d.lease_version
                   -- ...and the facts the next state was decided on still hold.
                   AND j.retry_count = d.retry_count
                   AND j.max_retries = d.max_retries
                   AND (j.cancel_requested_at IS NOT NULL) = d.cancel_asked
                RETURNING j.id, j.status, j.run_after, j.lease_version, j.parent_id, j.ordering_key, j.has_dependents,
                          d.worker, d.reason, d.verdict, d.error, d.ord,
                          j.kind, j.due_at, d.claimed_at, d.retry_count, d.lease_version AS claim_version, d.claim_role
            ), logged AS (
                -- What is recorded where (docs/design.md): a lease that ends in its claimant's
                -- completion is read from the job row alone (done keeps claimed_at, owned_by and
                -- claim_role), so the usual completion writes no row. Any other ending is a row,
                -- after the lease's claim as a row of its own (unless a cancel request wrote it
                -- already, or release 0.1 did): a requeue clears the claim from the job
                -- row. ORDER BY: a claim's row takes its id before its ending's. The same rule as
                -- jobs.cancel's, which cannot call one helper with this function: this unreleased
                -- rework comes earlier in the plan than any new change.
                INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error)
                SELECT e.job_id, e.at, e.from_status, e.to_status, e.lease_version, e.worker, e.session_role, e.reason, e.error
                  FROM finished AS f
                 CROSS JOIN LATERAL (VALUES
                       (1, f.id, f.claimed_at, 'queued'::jobs.status, 'processing'::jobs.status, f.claim_version, f.worker,
                        f.claim_role, 'claimed', NULL::text),
                       (2, f.id, now(), 'processing'::jobs.status, f.status, f.lease_version, f.worker, me, f.reason,
                        CASE WHEN f.verdict <> 'done' AND f.reason <> 'snoozed' THEN f.error END))
                       AS e(step, job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error)
                 WHERE NOT (f.reason = 'completed' AND f.claim_role IS NOT DISTINCT FROM me)
                   AND (e.step = 2 OR NOT EXISTS (SELECT 1 FROM jobs.event AS c
                                                   WHERE c.job_id = f.id AND c.reason = 'claimed'
                                                     AND c.lease_version = f.claim_version))
                 ORDER BY f.id, e.step
            )
            SELECT coalesce(array_agg(f.id) FILTER (WHERE f.status <> 'queued'
                                                      AND (f.parent_id IS NOT NULL OR f.ordering_key IS NOT NULL OR f.has_dependents)), '{}'),
                   coalesce(array_agg(f.ord ORDER BY f.ord), '{}'),
                   coalesce(array_agg((f.id, true, f.status, f.run_after, '{}')::jobs.outcome ORDER BY f.ord), '{}'),
                   (SELECT count(*) FROM decided),
                   jobs.tally(array_agg(f.kind), array_agg(f.reason), array_agg(f.verdict = 'expired'), NULL,
                              array_agg(date_part('epoch', now() - f.claimed_at)),
                              array_agg(CASE WHEN f.status <> 'queued' THEN date_part('epoch', now() - f.due_at) END),
                              array_agg(f.retry_count), array_agg(f.id))
              INTO round_ended, round_ords, round_outcomes, decided_count, tallied
              FROM finished AS f;

            ended_ids := ended_ids || round_ended;
            applied_ords := applied_ords || round_ords;
            applied := applied || round_outcomes;
            -- Every item that held its lease was applied: nothing is left to decide again.
            EXIT WHEN cardinality(round_ords) = decided_count OR rounds >= 10;
            pending := ARRAY(SELECT o FROM generate_series(1, n) AS o WHERE NOT (o = ANY (applied_ords)));
        END LOOP;
    END IF;

    -- Only a job with a coordinator, an ordering key or dependents (docs/sql-api.md
    -- "Dependencies") can have kept another one waiting.
    IF cardinality(ended_ids) > 0 THEN
        SELECT coalesce(array_agg(w.source_id), '{}'), coalesce(array_agg(w.woken_id), '{}')
          INTO woken_by, woken
          FROM jobs.release_dependents(ended_ids) AS w;
    END IF;

    IF cardinality(applied_ords) = n AND rounds = 1 AND cardinality(woken) = 0 THEN
        -- Every item applied, nothing woken (the common case): the outcomes are known.
        RETURN QUERY SELECT * FROM unnest(applied);
        RETURN;
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT i.id, i.ord, i.ord = ANY (applied_ords) AS applied
          FROM unnest(finish_leases.job_ids) WITH ORDINALITY AS i(id, ord)
    ), wake AS (
        SELECT w.source_id, array_agg(w.woken_id ORDER BY w.woken_id) AS ids
          FROM unnest(woken_by, woken) AS w(source_id, woken_id)
         GROUP BY w.source_id
    )
    SELECT i.id, i.applied, j.status, j.run_after,
           CASE WHEN i.applied THEN coalesce(wk.ids, '{}') ELSE '{}' END
      FROM input AS i
      LEFT JOIN jobs.job AS j ON j.id = i.id
      LEFT JOIN wake AS wk ON wk.source_id = i.id
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.finish_leases(bigint[], text[], bigint[], jobs.verdict[], jsonb[], text[], uuid[], text, interval[]) IS
    'Internal: the one exit from processing (done, retry with backoff, snoozed, exhausted, failed, cancelled, reaped) for items whose worker still holds the lease (from the claiming session role, with its lease token when given or required); one outcome per item. 22023 when a result exceeds 1 MiB or an error 64 KiB, a verdict or the caller is NULL, or a caller other than jobs.reap passes expired or timeout; 22003 when a result holds a number beyond the IEEE-754 double range. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.finish_leases(bigint[], text[], bigint[], jobs.verdict[], jsonb[], text[], uuid[], text, interval[]) FROM PUBLIC;
COMMIT;

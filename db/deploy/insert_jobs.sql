-- Deploy jobfence:insert_jobs to pg
-- requires: job
-- requires: event
-- requires: parse_timestamptz
-- requires: tally
-- requires: key_owner
-- requires: parse_interval
-- requires: job_unique_scope
-- requires: event_reason_debounced
-- requires: job_traceparent
-- requires: job_concurrency_key
-- requires: relay_feed
-- requires: job_dependency
-- requires: edge_outcome
-- requires: unknown_dependency
-- requires: end_unheld
BEGIN;
-- The (new) -> queued transition shared by submit, submit_many and fan_out: validates the
-- specs, honours idempotency keys (scoped, and debounced: docs/sql-api.md "Scoped keys and
-- debounce"), records the producer's trace context, serialises ordering keys, logs events and sends the outbox notifications
-- (delivered by PostgreSQL only if the caller's transaction commits).
-- Set-based: a batch of any size is a fixed number of statements, not two INSERTs per spec.
-- The jobs come back as arrays (one row, job_rows[i] and created[i] for specs[i]): a set
-- would be stored row by row by RETURN QUERY and read back by the caller, who, for
-- submit_many, stores it once more to return it (docs/performance.md, "A submit's rows, copied
-- fewer times"). jobs.insert_jobs, below, is the same call as a set, for callers of one job.
CREATE OR REPLACE FUNCTION jobs.insert_job_rows(caller text, specs jsonb, parent_id bigint, single boolean,
                                                OUT job_rows jobs.job[], OUT created boolean[])
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    n integer;
    bad record;
    at_ text;
    new_ids bigint[];
    created_ids bigint[];
    created_rows jobs.job[];
    created_kinds text[];
    wants_notify boolean;
    feed_source text;
    batch record;
    keyed boolean;
    held_ids bigint[];
    edge_jobs bigint[];
    edge_parents bigint[];
    edge_policies text[];
    doomed_ids bigint[];
    doomed_errors text[];
    debounced_rows jobs.job[] := '{}';
    -- Once per batch: every spec of one call is in the caller's key namespace.
    owner_ regrole := jobs.key_owner();
    -- The submitting session role, which the column's default would compute again for every
    -- row (a name quoted and looked up per job: 1.7 % of a submit's server instructions).
    submitter regrole := quote_ident(session_user)::regrole;
BEGIN
    IF specs IS NULL OR jsonb_typeof(specs) <> 'array' THEN
        RAISE EXCEPTION '%: expected a JSON array of job specs, got %', caller, coalesce(jsonb_typeof(specs), 'NULL')
            USING ERRCODE = '22023', HINT = 'Pass [{"kind": "...", "payload": {...}}, ...].';
    END IF;
    n := jsonb_array_length(specs);
    IF n = 0 THEN
        job_rows := '{}';
        created := '{}';
        RETURN;
    END IF;
    -- Bounded work per statement: 100,000 specs held a backend for tens of seconds and
    -- hundreds of MB. Checked before any spec is looked at.
    IF n > 10000 THEN
        RAISE EXCEPTION '%: % job specs in one call; the limit is 10000', caller, n
            USING ERRCODE = '22023',
                  HINT = 'Split the batch into calls of at most 10000 specs (in one transaction to keep it all or nothing).';
    END IF;

    -- Every rule a spec must pass, in the order they are reported: the first broken rule of
    -- the first bad spec (in spec order) is the error, and nothing is written.
    SELECT c.pos, c.spec, c.problem, c.limit_bytes INTO bad
      FROM (SELECT e.ord - 1 AS pos, e.spec, t.max_payload_bytes AS limit_bytes,
                   CASE
                       WHEN jsonb_typeof(e.spec) <> 'object' THEN 'not_object'
                       WHEN e.spec - '{kind,payload,idempotency_key,run_after,ordering_key,notify,priority,unique_while,unique_for,debounce,traceparent,depends_on,on_dependency_failure,concurrency_key}'::text[] <> '{}' THEN 'extra_keys'
                       WHEN jsonb_typeof(e.spec -> 'kind') IS DISTINCT FROM 'string' THEN 'kind_type'
                       -- A declared kind passed define_type's name check: the pattern only
                       -- needs testing on names that are not declared.
                       WHEN t.kind IS NULL AND (e.spec ->> 'kind') !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN 'kind_format'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'payload'), 'null') NOT IN ('object', 'null') THEN 'payload_type'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'idempotency_key'), 'null') NOT IN ('string', 'null')) THEN 'idempotency_key_type'
                       WHEN p.optional AND (e.spec ->> 'idempotency_key' = '' OR octet_length(e.spec ->> 'idempotency_key') > 1000) THEN 'idempotency_key_length'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'ordering_key'), 'null') NOT IN ('string', 'null')) THEN 'ordering_key_type'
                       WHEN p.optional AND (e.spec ->> 'ordering_key' = '' OR octet_length(e.spec ->> 'ordering_key') > 1000) THEN 'ordering_key_length'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'concurrency_key'), 'null') NOT IN ('string', 'null')
                         OR length(e.spec ->> 'concurrency_key') NOT BETWEEN 1 AND 200) THEN 'concurrency_key_value'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'run_after'), 'null') NOT IN ('string', 'null')) THEN 'run_after_type'
                       -- infinity would never come due; -infinity is merely in the past (now(), below).
                       -- The bound keeps run_after readable by every client: Python's datetime
                       -- ends at year 9999, and a reader's time zone (up to +15:59) may add a day.
                       WHEN p.optional AND (jsonb_typeof(e.spec -> 'run_after') = 'string'
                        AND coalesce(jobs.parse_timestamptz(e.spec ->> 'run_after') >= '9999-12-30T00:00:00Z', true)) THEN 'run_after_value'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'notify'), 'null') NOT IN ('boolean', 'null') THEN 'notify_type'
                       -- One Redis band per priority: the range is small on purpose.
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'priority'), 'null') NOT IN ('number', 'null')
                         OR (jsonb_typeof(e.spec -> 'priority') = 'number'
                             AND (e.spec ->> 'priority') NOT IN ('0', '1', '2', '3', '4', '5', '6', '7', '8', '9'))) THEN 'priority_value'
                       -- A key's scope: states that include queued (the key is taken at submit;
                       -- a scope without it would first meet a holder at claim, as a 23505
                       -- out of a worker's claim), and a period; both need a key to scope.
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'unique_while'), 'null') <> 'null'
                        AND NOT (jsonb_typeof(e.spec -> 'unique_while') = 'array'
                                 AND (e.spec -> 'unique_while') <@ '["queued", "processing", "enqueue_failed", "done", "failed"]'
                                 AND (e.spec -> 'unique_while') @> '["queued"]')) THEN 'unique_while_value'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'unique_for'), 'null') <> 'null'
                        AND NOT (jsonb_typeof(e.spec -> 'unique_for') = 'string'
                                 -- Judged as times, not as intervals: interval order counts a month
                                 -- as 30 days, so '1 month -30 days' compares positive yet ends
                                 -- before now() in a 31-day month.
                                 AND coalesce(now() + jobs.parse_interval(e.spec ->> 'unique_for') > now()
                                              AND now() + jobs.parse_interval(e.spec ->> 'unique_for') <= now() + interval '100 years', false)))
                       THEN 'unique_for_value'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'debounce'), 'null') <> 'null'
                        AND coalesce(e.spec ->> 'debounce' NOT IN ('payload', 'run_after', 'payload_and_run_after')
                                     OR jsonb_typeof(e.spec -> 'debounce') <> 'string', true)) THEN 'debounce_value'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'idempotency_key'), 'null') = 'null'
                        AND (coalesce(jsonb_typeof(e.spec -> 'unique_while'), 'null') <> 'null'
                             OR coalesce(jsonb_typeof(e.spec -> 'unique_for'), 'null') <> 'null'
                             OR coalesce(jsonb_typeof(e.spec -> 'debounce'), 'null') <> 'null')) THEN 'scope_without_key'
                       -- W3C Trace Context: version 00's layout, and neither id all zeros
                       -- (the format's "invalid"), so every span linked to it is valid.
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'traceparent'), 'null') <> 'null'
                        AND coalesce(NOT ((e.spec ->> 'traceparent') ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
                                          AND substr(e.spec ->> 'traceparent', 4, 32) <> repeat('0', 32)
                                          AND substr(e.spec ->> 'traceparent', 37, 16) <> repeat('0', 16)
                                          AND left(e.spec ->> 'traceparent', 2) <> 'ff')
                                     OR jsonb_typeof(e.spec -> 'traceparent') <> 'string', true)) THEN 'traceparent_value'
                       -- Dependencies (docs/sql-api.md "Dependencies"): ids of existing jobs, or
                       -- earlier specs of the call by position. Only earlier ones: a graph
                       -- built this way has no cycle, since every edge points at a job that
                       -- existed, or was created, before its dependent.
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'depends_on'), 'null') <> 'null'
                        AND NOT (jsonb_typeof(e.spec -> 'depends_on') = 'array'
                                 AND jsonb_array_length(e.spec -> 'depends_on') BETWEEN 1 AND 1000
                                 AND NOT EXISTS (
                                     SELECT 1 FROM jsonb_array_elements(e.spec -> 'depends_on') AS d(v)
                                      WHERE NOT coalesce(
                                            (jsonb_typeof(d.v) = 'number' AND d.v::text ~ '^[1-9][0-9]{0,17}$')
                                         OR (jsonb_typeof(d.v) = 'object' AND d.v - 'spec' = '{}'
                                             AND jsonb_typeof(d.v -> 'spec') = 'number'
                                             AND (d.v ->> 'spec') ~ '^(0|[1-9][0-9]{0,4})$'
                                             AND (d.v ->> 'spec')::integer < e.ord - 1), false))))
                       THEN 'depends_on_value'
                       WHEN p.optional AND (coalesce(jsonb_typeof(e.spec -> 'on_dependency_failure'), 'null') <> 'null'
                        AND (coalesce(jsonb_typeof(e.spec -> 'depends_on'), 'null') = 'null'
                             OR jsonb_typeof(e.spec -> 'on_dependency_failure') <> 'string'
                             OR (e.spec ->> 'on_dependency_failure') NOT IN ('fail', 'run', 'wait'))) THEN 'on_dependency_failure_value'
                       -- A CASE, not AND: the planner may evaluate the operands of an AND in
                       -- any order, and the lookup (a function call and its own query) would
                       -- then run for every spec, with dependencies or not.
                       WHEN p.optional AND (CASE WHEN jsonb_typeof(e.spec -> 'depends_on') = 'array'
                                 THEN jobs.unknown_dependency(e.spec -> 'depends_on') IS NOT NULL
                                 ELSE false END) THEN 'depends_on_unknown'
                       WHEN t.kind IS NULL THEN 'unknown_kind'
                       WHEN octet_length(p.payload_text) > t.max_payload_bytes THEN 'payload_size'
                       -- Clients parse payloads recursively (Python's json stops near 1000 levels).
                       -- Every nested object or array carries its own 4-byte header in jsonb, so
                       -- a spec holding more than 64 levels takes at least 260 bytes: smaller
                       -- specs (most) skip the walk, at the cost of reading a length. The walk
                       -- descends at most 64 levels, so it cannot hit PostgreSQL's stack limit
                       -- (54001) however deep the payload is.
                       WHEN pg_column_size(e.spec) >= 260
                        AND jsonb_path_exists(coalesce(nullif(e.spec -> 'payload', 'null'), '{}'),
                                              'strict $.**{64} ? (@.type() == "object" || @.type() == "array")')
                       THEN 'payload_depth'
                       -- Readers hold JSON numbers as IEEE-754 doubles (RFC 8259 §6) and
                       -- Python refuses integers over 4300 digits: a larger number would leave
                       -- the job unreadable by its worker, the API and the CLI. jsonb prints
                       -- numbers in full, so one beyond the range is a run of at least 309
                       -- digits in the text the size check made: a payload without a run of
                       -- 255 (the most a regex bound counts) skips the walk.
                       WHEN octet_length(p.payload_text) >= 309
                        AND p.payload_text ~ '[0-9]{255}'
                        AND jsonb_path_exists(coalesce(nullif(e.spec -> 'payload', 'null'), '{}'),
                                              'strict $.**{0 to 1000} ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308))')
                       THEN 'payload_number'
                   END AS problem
              FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
              -- OFFSET 0: the text is made once per spec, not once per test that reads it.
              CROSS JOIN LATERAL (SELECT coalesce(nullif(e.spec -> 'payload', 'null'), '{}')::text AS payload_text,
                                         -- Most specs hold a kind and a payload only: the rules
                                         -- about the optional keys, a lookup or two each, can fire
                                         -- only where one is present, so one test skips them all.
                                         e.spec ?| '{idempotency_key,ordering_key,concurrency_key,run_after,priority,unique_while,unique_for,debounce,traceparent,depends_on,on_dependency_failure}'::text[] AS optional
                                  OFFSET 0) AS p
              LEFT JOIN jobs.job_type AS t ON t.kind = e.spec ->> 'kind') AS c
     WHERE c.problem IS NOT NULL
     ORDER BY c.pos
     LIMIT 1;

    IF bad.problem IS NOT NULL THEN
        at_ := CASE WHEN single THEN caller ELSE format('%s: %s[%s]', caller,
                   CASE WHEN parent_id IS NULL THEN 'specs' ELSE 'children' END, bad.pos) END;
        IF bad.problem = 'unknown_kind' THEN
            RAISE EXCEPTION '%: unknown kind %', at_, quote_literal(bad.spec ->> 'kind')
                USING ERRCODE = 'JB005', HINT = 'Declare it first: SELECT jobs.define_type(''<kind>'', ...).';
        ELSIF bad.problem = 'payload_size' THEN
            RAISE EXCEPTION '%: payload of % bytes exceeds the % byte limit of kind %',
                at_, octet_length((bad.spec -> 'payload')::text), bad.limit_bytes, bad.spec ->> 'kind'
                USING ERRCODE = 'JB004',
                      HINT = 'Pass a reference (an id or an object-storage key) and load the data when the job runs.';
        ELSIF bad.problem = 'payload_depth' THEN
            RAISE EXCEPTION '%: payload is nested deeper than 64 levels', at_
                USING ERRCODE = 'JB004',
                      HINT = 'Flatten the payload, or pass a reference (an id or an object-storage key) and load the data when the job runs.';
        ELSIF bad.problem = 'payload_number' THEN
            RAISE EXCEPTION '%: payload holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)', at_
                USING ERRCODE = '22003',
                      HINT = 'JSON readers (JavaScript, Python, Go, ...) cannot decode it: send such a number as a string, e.g. {"n": "1e400"}.';
        ELSIF bad.problem = 'not_object' THEN
            RAISE EXCEPTION '%: a job spec must be a JSON object, got %', at_, jsonb_typeof(bad.spec)
                USING ERRCODE = '22023', HINT = 'Each element looks like {"kind": "...", "payload": {...}}.';
        ELSIF bad.problem = 'extra_keys' THEN
            RAISE EXCEPTION '%: unknown key(s) in job spec: %', at_,
                (SELECT string_agg(k, ', ' ORDER BY k) FROM jsonb_object_keys(bad.spec
                    - '{kind,payload,idempotency_key,run_after,ordering_key,notify,priority,unique_while,unique_for,debounce,traceparent,depends_on,on_dependency_failure,concurrency_key}'::text[]) AS k)
                USING ERRCODE = '22023',
                      HINT = 'Allowed keys: kind, payload, idempotency_key, run_after, ordering_key, notify, priority, unique_while, unique_for, debounce, traceparent, depends_on, on_dependency_failure, concurrency_key.';
        ELSIF bad.problem = 'kind_type' THEN
            RAISE EXCEPTION '%: kind must be a string', at_
                USING ERRCODE = '22023', HINT = 'Declare kinds with jobs.define_type and pass the name.';
        ELSIF bad.problem = 'kind_format' THEN
            RAISE EXCEPTION '%: kind % is malformed', at_, quote_literal(bad.spec ->> 'kind')
                USING ERRCODE = '22023',
                      HINT = 'Kind names are 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit.';
        ELSIF bad.problem = 'payload_type' THEN
            RAISE EXCEPTION '%: payload must be a JSON object, got %', at_, jsonb_typeof(bad.spec -> 'payload')
                USING ERRCODE = '22023', HINT = 'Wrap values in an object, e.g. {"invoice_id": 42}.';
        ELSIF bad.problem = 'idempotency_key_type' THEN
            RAISE EXCEPTION '%: idempotency_key must be a string or null', at_
                USING ERRCODE = '22023', HINT = 'Use a stable business key, e.g. "invoice:42:send".';
        ELSIF bad.problem = 'idempotency_key_length' THEN
            RAISE EXCEPTION '%: idempotency_key must be 1 to 1000 bytes long, got %', at_, octet_length(bad.spec ->> 'idempotency_key')
                USING ERRCODE = '22023', HINT = 'Pass null for no key; hash long keys, e.g. md5(...).';
        ELSIF bad.problem = 'concurrency_key_value' THEN
            RAISE EXCEPTION '%: concurrency_key must be a string of 1 to 200 characters or null, got %', at_, bad.spec -> 'concurrency_key'
                USING ERRCODE = '22023',
                      HINT = 'E.g. "tenant:42": the key the kind''s max_running_per_key counts running jobs by, and claim_next takes turns between.';
        ELSIF bad.problem = 'ordering_key_type' THEN
            RAISE EXCEPTION '%: ordering_key must be a string or null', at_
                USING ERRCODE = '22023', HINT = 'Use the entity id, e.g. "account:7".';
        ELSIF bad.problem = 'ordering_key_length' THEN
            RAISE EXCEPTION '%: ordering_key must be 1 to 1000 bytes long, got %', at_, octet_length(bad.spec ->> 'ordering_key')
                USING ERRCODE = '22023', HINT = 'Pass null for no ordering; use the entity id, e.g. "account:7".';
        ELSIF bad.problem = 'run_after_type' THEN
            RAISE EXCEPTION '%: run_after must be a timestamp string or null', at_
                USING ERRCODE = '22023', HINT = 'Use ISO 8601 with a zone, e.g. "2030-01-01T09:00:00Z".';
        ELSIF bad.problem = 'run_after_value' THEN
            RAISE EXCEPTION '%: run_after % is not a timestamp before 9999-12-30T00:00:00Z', at_, bad.spec -> 'run_after'
                USING ERRCODE = '22023',
                      HINT = 'Use ISO 8601 with a zone offset within +-15:59, e.g. "2030-01-01T09:00:00Z".';
        ELSIF bad.problem = 'priority_value' THEN
            RAISE EXCEPTION '%: priority must be an integer from 0 to 9 or null, got %', at_, bad.spec -> 'priority'
                USING ERRCODE = '22023', HINT = 'Lower runs first; null (or no key) takes the kind''s priority.';
        ELSIF bad.problem = 'unique_while_value' THEN
            RAISE EXCEPTION '%: unique_while must be a list of job states that includes queued, got %', at_, bad.spec -> 'unique_while'
                USING ERRCODE = '22023',
                      HINT = 'E.g. ["queued", "processing"]: the key is free again once its job is done or failed. States: queued, processing, enqueue_failed, done, failed.';
        ELSIF bad.problem = 'unique_for_value' THEN
            RAISE EXCEPTION '%: unique_for must be a positive interval of at most 100 years, got %', at_, bad.spec -> 'unique_for'
                USING ERRCODE = '22023', HINT = 'E.g. "1 hour": the key is free again an hour after its job was submitted.';
        ELSIF bad.problem = 'debounce_value' THEN
            RAISE EXCEPTION '%: debounce must be "payload", "run_after" or "payload_and_run_after", got %', at_, bad.spec -> 'debounce'
                USING ERRCODE = '22023',
                      HINT = 'A repeat of the key while its job is queued replaces the payload, pushes run_after later, or both.';
        ELSIF bad.problem = 'traceparent_value' THEN
            RAISE EXCEPTION '%: traceparent must be a W3C traceparent, got %', at_, bad.spec -> 'traceparent'
                USING ERRCODE = '22023',
                      HINT = 'E.g. "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": what the producer''s tracing library injects as "traceparent".';
        ELSIF bad.problem = 'depends_on_value' THEN
            RAISE EXCEPTION '%: depends_on must be a list of 1 to 1000 job ids or earlier specs ({"spec": n}, n below this spec''s position), got %', at_, bad.spec -> 'depends_on'
                USING ERRCODE = '22023',
                      HINT = 'E.g. [41, {"spec": 0}]: job 41 and the first spec of this call. A dependency on this spec or a later one would be a cycle.';
        ELSIF bad.problem = 'on_dependency_failure_value' THEN
            RAISE EXCEPTION '%: on_dependency_failure must be "fail", "run" or "wait", with depends_on, got %', at_, bad.spec -> 'on_dependency_failure'
                USING ERRCODE = '22023',
                      HINT = 'What a dependency that fails does to this job: fail it (the default), run it anyway, or wait for a replay of the dependency.';
        ELSIF bad.problem = 'depends_on_unknown' THEN
            RAISE EXCEPTION '%: depends_on names unknown job %', at_, jobs.unknown_dependency(bad.spec -> 'depends_on')
                USING ERRCODE = '22023',
                      HINT = 'Depend on a job that exists (with producer ownership on, one your role submitted), or on an earlier spec of this call: {"spec": n}.';
        ELSIF bad.problem = 'scope_without_key' THEN
            RAISE EXCEPTION '%: unique_while, unique_for and debounce need an idempotency_key', at_
                USING ERRCODE = '22023', HINT = 'They say how long a key is held and what a repeat of it does: name the key.';
        ELSE
            RAISE EXCEPTION '%: notify must be a boolean', at_
                USING ERRCODE = '22023', HINT = 'Pass false when your driver pushes the id itself.';
        END IF;
    END IF;

    -- Ids come from a sequence, so two open transactions could commit an ordering key's
    -- jobs out of id order. Serialising submits per key until commit keeps id order = commit
    -- order; the keys are locked in one sorted pass, before any id is drawn, so two batches
    -- sharing keys wait for each other instead of deadlocking.
    PERFORM pg_advisory_xact_lock(hashtext('jobs.ordering_key'), hashtext(k.key))
       FROM (SELECT DISTINCT e.spec ->> 'ordering_key' AS key
               FROM jsonb_array_elements(specs) AS e(spec)
              WHERE jsonb_typeof(e.spec -> 'ordering_key') = 'string'
              ORDER BY 1) AS k;

    -- Scoped keys (docs/sql-api.md "Scoped keys and debounce"): before the insert, the jobs
    -- of these keys that no longer hold them (their period ended, or they left their states)
    -- are released for good: out of the unique index, and never back into it, so a retry or
    -- a replay of such a job cannot meet the key's next holder (23505 out of a worker's
    -- call). The insert below then takes a key whose holder was released.
    -- In two steps, because an UPDATE judges its WHERE on its snapshot: a holder that a
    -- claim is moving out of its states (uncommitted) still looks in scope to it, and would
    -- be skipped; the insert, waiting on that claim, would then take the key beside a job
    -- that a retry brings back. So the key's held jobs (and, for a debounce, the job in
    -- scope, which the debounce changes) are first locked, in id order like every batch
    -- transition, which waits out such a claim; the release then runs as a statement of its
    -- own, whose snapshot sees the claim's outcome. Until the caller commits, those jobs stay
    -- locked: claims skip them. Batches without keys skip all this; keys without a scope
    -- cost one probe of an empty index range.
    keyed := specs @? '$[*] ? (@.idempotency_key.type() == "string")';
    IF keyed THEN
        WITH k AS (
            SELECT e.spec ->> 'kind' AS kind, e.spec ->> 'idempotency_key' AS key,
                   bool_or(jsonb_typeof(e.spec -> 'debounce') = 'string') AS debounces
              FROM jsonb_array_elements(specs) AS e(spec)
             WHERE jsonb_typeof(e.spec -> 'idempotency_key') = 'string'
             GROUP BY 1, 2
        ), candidates AS (
            SELECT j.id
              FROM k JOIN jobs.job AS j
                ON j.kind = k.kind AND j.idempotency_key = k.key AND j.key_owner IS NOT DISTINCT FROM owner_
             WHERE j.unique_states IS NOT NULL AND j.unique_states <> '{}'
            UNION
            SELECT j.id
              FROM k JOIN jobs.job AS j
                ON j.kind = k.kind AND j.idempotency_key = k.key AND j.key_owner IS NOT DISTINCT FROM owner_
             WHERE k.debounces AND (j.unique_states IS NULL OR j.status = ANY (j.unique_states))
        )
        SELECT coalesce(array_agg(l.id), '{}') INTO held_ids
          FROM (SELECT j.id FROM jobs.job AS j
                 WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
                 ORDER BY j.id
                   FOR NO KEY UPDATE) AS l;
        IF cardinality(held_ids) > 0 THEN
            UPDATE jobs.job AS j
               SET unique_states = '{}'
             WHERE j.id = ANY (held_ids)
               AND j.unique_states IS NOT NULL AND j.unique_states <> '{}'
               AND (j.unique_until <= now() OR j.status <> ALL (j.unique_states));
        END IF;
    END IF;

    -- Ids are drawn in spec order up front so each row knows its spec; a spec that meets
    -- an existing idempotency key leaves a gap, as any rolled-back insert does.
    -- How the relay learns of new jobs (jobs.relay_feed), read before any id is drawn. A
    -- submit that may go unannounced takes its transaction id before it draws, too: both
    -- are what jobs.poll_submitted counts on to read every id only once it is final
    -- (docs/design.md §6). One that notifies needs neither.
    feed_source := (SELECT f.source FROM jobs.relay_feed AS f WHERE f.singleton);
    IF feed_source = 'table' THEN
        PERFORM pg_current_xact_id();
    END IF;
    new_ids := ARRAY(SELECT nextval('jobs.job_id_seq'::regclass) FROM generate_series(1, n));

    -- Specs without an idempotency key cannot conflict: they skip ON CONFLICT, whose
    -- speculative insertion costs an extra WAL record per row.
    -- NOT MATERIALIZED: read by both inserts, src would otherwise be written to a store and
    -- read back, every spec with its jsonb, once per call (3 % of a submit's instructions).
    -- Inlined, each insert reads the specs itself and computes the columns only for the
    -- specs it keeps; src holds nothing volatile (the ids were drawn above), so both agree.
    WITH src AS NOT MATERIALIZED (
        SELECT new_ids[e.ord] AS id, e.spec, e.ord, t.kind, t.queue, t.max_retries, t.lease_timeout, t.timeout,
               coalesce((e.spec ->> 'priority')::smallint, t.priority) AS priority,
               coalesce(nullif(e.spec -> 'payload', 'null'), '{}') AS payload,
               -- A run_after in the past is now(): a late timestamp must not jump the queue.
               -- A plain cast: the validation above parsed every run_after string, and each
               -- call of parse_timestamptz is a subtransaction (its exception block).
               CASE WHEN jsonb_typeof(e.spec -> 'run_after') = 'string'
                    THEN greatest((e.spec ->> 'run_after')::timestamptz, now())
                    ELSE now() END AS run_after,
               e.spec ->> 'idempotency_key' AS idempotency_key, e.spec ->> 'ordering_key' AS ordering_key,
               -- A period alone scopes every state: NULL is kept for no scope at all.
               -- enqueue_failed is queued with its signal lost (the relay sends it again):
               -- a scope that holds queued holds it too, or a lost signal would free the key.
               CASE WHEN jsonb_typeof(e.spec -> 'unique_while') = 'array'
                    THEN ARRAY(SELECT w::jobs.status FROM jsonb_array_elements_text(e.spec -> 'unique_while') AS w
                               UNION SELECT 'enqueue_failed' ORDER BY 1)
                    WHEN jsonb_typeof(e.spec -> 'unique_for') = 'string'
                    THEN enum_range(NULL::jobs.status) END AS unique_states,
               now() + (e.spec ->> 'unique_for')::interval AS unique_until,
               e.spec ->> 'traceparent' AS traceparent,
               e.spec ->> 'concurrency_key' AS concurrency_key
          FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
          JOIN jobs.job_type AS t ON t.kind = e.spec ->> 'kind'
    ), keyless AS (
        INSERT INTO jobs.job AS j (id, kind, queue, payload, max_retries, lease_timeout, timeout, run_after,
                                   due_at, idempotency_key, ordering_key, parent_id, priority, traceparent,
                                   concurrency_key, submitted_by)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.kind, s.queue, s.payload, s.max_retries, s.lease_timeout, s.timeout, s.run_after,
               s.run_after, NULL, s.ordering_key, insert_job_rows.parent_id, s.priority, s.traceparent,
               s.concurrency_key, submitter
          FROM src AS s
         WHERE s.idempotency_key IS NULL
         ORDER BY s.ord
        RETURNING j.*
    ), keyed AS (
        INSERT INTO jobs.job AS j (id, kind, queue, payload, max_retries, lease_timeout, timeout, run_after,
                                   due_at, idempotency_key, ordering_key, parent_id, priority, key_owner,
                                   unique_states, unique_until, traceparent, concurrency_key, submitted_by)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.kind, s.queue, s.payload, s.max_retries, s.lease_timeout, s.timeout, s.run_after,
               s.run_after, s.idempotency_key, s.ordering_key, insert_job_rows.parent_id, s.priority, owner_,
               s.unique_states, s.unique_until, s.traceparent, s.concurrency_key, submitter
          FROM src AS s
         WHERE s.idempotency_key IS NOT NULL
         ORDER BY s.ord
        ON CONFLICT (kind, idempotency_key, key_owner)
           WHERE idempotency_key IS NOT NULL AND (unique_states IS NULL OR status = ANY (unique_states))
           DO NOTHING
        RETURNING j.*
    ), inserted AS (
        SELECT * FROM keyless UNION ALL SELECT * FROM keyed
    )
    -- No transition row: the job row is the record of its submission (created_at,
    -- submitted_by, lease_version 0), which jobs.history reads (docs/design.md "What is
    -- recorded where").
    -- i::jobs.job: the CTE's rows are anonymous records, and assigning a record[] to a
    -- jobs.job[] variable converts every row through its text form (record_out, record_in:
    -- a fifth of a 1,000-spec submit's time).
    SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}'), coalesce(array_agg(i::jobs.job ORDER BY i.id), '{}'),
           array_agg(i.kind)
      INTO created_ids, created_rows, created_kinds
      FROM inserted AS i;
    PERFORM jobs.tally(created_kinds, array_fill('submitted'::text, ARRAY[cardinality(created_ids)]));

    -- Dependencies (docs/sql-api.md "Dependencies"), for the jobs just created (a repeat of a
    -- key adds no edge to the job it returns). A position names the job its spec created or
    -- met. The parents are locked (in id order) before their states are read, so a
    -- finish in flight on one either committed first, and is seen, or waits for this
    -- transaction and then finds the edge (jobs.release_dependents). The dependents were
    -- inserted unblocked: nobody sees them before commit, and only jobs with dependencies pay
    -- for the second write.
    IF specs @? '$[*] ? (@.depends_on.type() == "array")' AND cardinality(created_ids) > 0 THEN
        SELECT coalesce(array_agg(g.job_id ORDER BY g.job_id, g.depends_on), '{}'),
               coalesce(array_agg(g.depends_on ORDER BY g.job_id, g.depends_on), '{}'),
               coalesce(array_agg(g.on_failure ORDER BY g.job_id, g.depends_on), '{}')
          INTO edge_jobs, edge_parents, edge_policies
          FROM (SELECT DISTINCT ON (new_ids[e.ord], t.id) new_ids[e.ord] AS job_id, t.id AS depends_on,
                       coalesce(e.spec ->> 'on_dependency_failure', 'fail') AS on_failure
                  FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
                 CROSS JOIN LATERAL jsonb_array_elements(e.spec -> 'depends_on') AS d(v)
                 CROSS JOIN LATERAL (
                       SELECT CASE WHEN jsonb_typeof(d.v) = 'number' THEN (d.v::text)::bigint
                                   WHEN new_ids[(d.v ->> 'spec')::integer + 1] = ANY (created_ids)
                                   THEN new_ids[(d.v ->> 'spec')::integer + 1]
                                   -- The earlier spec met its key: the job holding it, as answered.
                                   ELSE (SELECT h.id FROM jobs.job AS h
                                          WHERE h.kind = specs -> (d.v ->> 'spec')::integer ->> 'kind'
                                            AND h.idempotency_key = specs -> (d.v ->> 'spec')::integer ->> 'idempotency_key'
                                            AND h.key_owner IS NOT DISTINCT FROM owner_
                                          ORDER BY (h.unique_states IS NULL OR h.status = ANY (h.unique_states)) DESC, h.id DESC
                                          LIMIT 1) END AS id) AS t
                 WHERE jsonb_typeof(e.spec -> 'depends_on') = 'array' AND new_ids[e.ord] = ANY (created_ids)
                 ORDER BY new_ids[e.ord], t.id) AS g;
        -- The parents are locked in id order, and flagged: their finish then looks for
        -- dependents. FOR NO KEY UPDATE, the lock the flag's write takes anyway: two submits
        -- holding a shared lock on one parent would deadlock upgrading it.
        PERFORM 1 FROM jobs.job AS p WHERE p.id = ANY (edge_parents) ORDER BY p.id FOR NO KEY UPDATE;
        UPDATE jobs.job AS p SET has_dependents = true
         WHERE p.id = ANY (edge_parents) AND NOT p.has_dependents;
        -- A new statement: its snapshot sees what the finishers waited out committed.
        WITH added AS (
            INSERT INTO jobs.job_dependency (job_id, depends_on, on_failure, released_at)
            SELECT x.job_id, x.depends_on, x.on_failure,
                   CASE WHEN jobs.edge_outcome(p.status, x.on_failure) IS NOT NULL THEN now() END
              FROM unnest(edge_jobs, edge_parents, edge_policies) AS x(job_id, depends_on, on_failure)
              JOIN jobs.job AS p ON p.id = x.depends_on
            RETURNING job_id, depends_on, released_at IS NULL AS waits,
                      jobs.edge_outcome((SELECT f.status FROM jobs.job AS f WHERE f.id = depends_on), on_failure)
                          IS NOT DISTINCT FROM 'fails' AS fails
        ), waiting AS (
            UPDATE jobs.job AS j
               SET pending_children = j.pending_children + w.n
              FROM (SELECT a.job_id, count(*)::integer AS n FROM added AS a WHERE a.waits GROUP BY a.job_id) AS w
             WHERE j.id = w.job_id
        )
        SELECT coalesce(array_agg(a.job_id ORDER BY a.job_id), '{}'),
               coalesce(array_agg(format('dependency %s failed', a.depends_on) ORDER BY a.job_id), '{}')
          INTO doomed_ids, doomed_errors
          FROM (SELECT DISTINCT ON (a.job_id) a.job_id, a.depends_on FROM added AS a WHERE a.fails
                 ORDER BY a.job_id, a.depends_on) AS a;
        -- A dependency already failed, under fail: the jobs end at once, through the one door.
        IF cardinality(doomed_ids) > 0 THEN
            PERFORM jobs.end_unheld(doomed_ids, 'dependency_failed', doomed_errors);
        END IF;
        created_rows := ARRAY(SELECT j FROM jobs.job AS j WHERE j.id = ANY (created_ids) ORDER BY j.id);
    END IF;

    IF cardinality(created_ids) = n THEN
        -- No spec met an existing key (the common case): ids follow spec order, and the
        -- rows are the ones just inserted.
        job_rows := created_rows;
        created := array_fill(true, ARRAY[n]);
    ELSE
    -- Debounce: a repeat that asks for it changes the key's job while the job is still
    -- queued (the UPDATE's row lock and re-check make a claim that gets there first win: the
    -- job then runs as it was, and the repeat returns it). A batch repeating a key several
    -- times acts as its last repeat. run_after only moves later, and due_at with it: the
    -- job's latency counts from when it was meant to run.
    IF specs @? '$[*] ? (@.debounce.type() == "string")' THEN
        WITH repeats AS (
            SELECT DISTINCT ON (e.spec ->> 'kind', e.spec ->> 'idempotency_key')
                   e.spec ->> 'kind' AS kind, e.spec ->> 'idempotency_key' AS key,
                   e.spec ->> 'debounce' IN ('payload', 'payload_and_run_after') AS replaces,
                   e.spec ->> 'debounce' IN ('run_after', 'payload_and_run_after') AS pushes,
                   coalesce(nullif(e.spec -> 'payload', 'null'), '{}') AS payload,
                   CASE WHEN jsonb_typeof(e.spec -> 'run_after') = 'string'
                        THEN greatest((e.spec ->> 'run_after')::timestamptz, now()) ELSE now() END AS run_after,
                   coalesce((e.spec ->> 'notify')::boolean, true) AS notify
              FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
             WHERE jsonb_typeof(e.spec -> 'debounce') = 'string' AND new_ids[e.ord] <> ALL (created_ids)
             ORDER BY e.spec ->> 'kind', e.spec ->> 'idempotency_key', e.ord DESC
        ), targets AS (
            -- Each key's holder found through the unique index, then updated by id: left to
            -- itself, the planner walks every queued job of the queue for "status = queued".
            SELECT r.*, h.id AS job_id
              FROM repeats AS r
              JOIN jobs.job AS h
                ON h.kind = r.kind AND h.idempotency_key = r.key AND h.key_owner IS NOT DISTINCT FROM owner_
               AND (h.unique_states IS NULL OR h.status = ANY (h.unique_states))
        ), moved AS (
            UPDATE jobs.job AS j
               SET payload = CASE WHEN r.replaces THEN r.payload ELSE j.payload END,
                   run_after = CASE WHEN r.pushes THEN greatest(j.run_after, r.run_after) ELSE j.run_after END,
                   due_at = CASE WHEN r.pushes AND r.run_after > j.run_after THEN r.run_after ELSE j.due_at END,
                   updated_at = now()
              FROM targets AS r
             WHERE j.id = r.job_id
               AND (j.unique_states IS NULL OR j.status = ANY (j.unique_states))
               AND j.status = 'queued'
            RETURNING j AS job_row, j.id, j.queue, j.run_after, j.lease_version, r.pushes AND r.notify AS signal
        ), logged AS (
            INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
            SELECT m.id, now(), 'queued', 'queued', m.lease_version, 'debounced'
              FROM moved AS m
        ), signalled AS (
            -- A pushed run_after needs a signal for its new time: the relay re-scores the
            -- job's delayed entry (a signal at the old time only finds it not yet due).
            SELECT count(pg_notify('jobs_submitted', json_build_object('id', m.id, 'queue', m.queue,
                                                                       'run_after', m.run_after)::text)) AS n
              FROM moved AS m
             WHERE m.signal
        )
        SELECT coalesce(array_agg(m.job_row), '{}')
          INTO debounced_rows
          FROM moved AS m, signalled;
    END IF;
    -- A repeated key returns the job of the caller's key namespace that holds it (with
    -- producer ownership on, only a job the caller submitted), as a debounce left it. ON
    -- CONFLICT waited for a concurrent inserter to commit, so under READ COMMITTED this new
    -- statement sees its row. With scoped keys several jobs may share a key: the one in scope
    -- answers, or, if it left the scope since the insert met it, the newest.
    SELECT array_agg(CASE WHEN mine.id IS NOT NULL THEN mine
                          WHEN moved.id IS NOT NULL THEN moved
                          ELSE theirs.holder END ORDER BY e.ord),
           array_agg(mine.id IS NOT NULL ORDER BY e.ord)
      INTO job_rows, created
      FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
      LEFT JOIN jobs.job AS mine ON mine.id = new_ids[e.ord] AND mine.id = ANY (created_ids)
      LEFT JOIN LATERAL (
           -- The holder through the unique index; the newest only when none is in scope
           -- (UNION ALL with LIMIT stops at the first branch that answers).
           (SELECT h AS holder FROM jobs.job AS h
             WHERE mine.id IS NULL
               AND h.kind = e.spec ->> 'kind'
               AND h.idempotency_key = e.spec ->> 'idempotency_key'
               AND h.key_owner IS NOT DISTINCT FROM owner_
               AND (h.unique_states IS NULL OR h.status = ANY (h.unique_states))
             LIMIT 1)
           UNION ALL
           (SELECT h AS holder FROM jobs.job AS h
             WHERE mine.id IS NULL
               AND h.kind = e.spec ->> 'kind'
               AND h.idempotency_key = e.spec ->> 'idempotency_key'
               AND h.key_owner IS NOT DISTINCT FROM owner_
             ORDER BY h.id DESC
             LIMIT 1)
           LIMIT 1) AS theirs ON true
      LEFT JOIN unnest(debounced_rows) AS moved ON moved.id = (theirs.holder).id;
    END IF;

    IF cardinality(created_ids) = 0 THEN
        RETURN;
    END IF;
    -- Submits notify unless the relay reads the table. A source of table is trusted only
    -- if it held both before the ids were drawn and now, so a switch either way while this
    -- transaction runs leaves its jobs to be notified or to be read (jobs.configure_relay).
    IF feed_source = 'table' AND (SELECT f.source FROM jobs.relay_feed AS f WHERE f.singleton) = 'table' THEN
        RETURN;
    END IF;
    IF single THEN
        -- A job waiting for its dependencies (or ended by one) is signalled when released.
        IF coalesce((specs -> 0 ->> 'notify')::boolean, true)
           AND (created_rows[1]).pending_children = 0 AND (created_rows[1]).status = 'queued' THEN
            PERFORM pg_notify('jobs_submitted', json_build_object('id', (created_rows[1]).id, 'queue', (created_rows[1]).queue,
                                                                  'run_after', (created_rows[1]).run_after)::text);
        END IF;
        RETURN;
    END IF;
    -- Drivers that push the ids themselves say "notify": false on every spec.
    SELECT bool_or(coalesce((e.spec ->> 'notify')::boolean, true)) INTO wants_notify
      FROM jsonb_array_elements(specs) AS e(spec);
    IF NOT wants_notify THEN
        RETURN;
    END IF;
    -- One message per queue (and per future run_after), chunked to stay well under
    -- PostgreSQL's 8000-byte notification limit (300 ids of at most 20 digits + a queue name).
    FOR batch IN
        WITH n AS (
            -- The rows just inserted, held in memory: no second lookup of each by id. A
            -- row's spec is the one its id was drawn for (new_ids is in spec order).
            SELECT r.id, r.queue, CASE WHEN r.run_after > now() THEN r.run_after END AS due, x.ord
              FROM unnest(created_rows) AS r
              JOIN unnest(new_ids) WITH ORDINALITY AS x(id, ord) ON x.id = r.id
             WHERE coalesce((specs -> (x.ord::integer - 1) ->> 'notify')::boolean, true)
               AND r.pending_children = 0 AND r.status = 'queued'
        ), numbered AS (
            SELECT n.*, (row_number() OVER (PARTITION BY n.queue, n.due ORDER BY n.ord) - 1) / 300 AS chunk
              FROM n
        )
        SELECT nb.queue, nb.due, array_agg(nb.id ORDER BY nb.ord) AS ids
          FROM numbered AS nb
         GROUP BY nb.queue, nb.due, nb.chunk
         ORDER BY min(nb.ord)
    LOOP
        IF batch.due IS NULL THEN
            PERFORM pg_notify('jobs_submitted', json_build_object('queue', batch.queue, 'ids', batch.ids)::text);
        ELSE
            PERFORM pg_notify('jobs_submitted', json_build_object(
                'queue', batch.queue, 'ids', batch.ids, 'run_after', batch.due)::text);
        END IF;
    END LOOP;
END $$;
COMMENT ON FUNCTION jobs.insert_job_rows(text, jsonb, bigint, boolean) IS
    'Internal: validate job specs and insert them as queued (idempotency, ordering, events, outbox notify); the jobs as arrays in spec order. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.insert_job_rows(text, jsonb, bigint, boolean) FROM PUBLIC;

-- The same transition as a set of (job, created), in spec order: what the callers of one
-- job (submit, fan_out, enqueue_tick) and compensate read.
CREATE OR REPLACE FUNCTION jobs.insert_jobs(caller text, specs jsonb, parent_id bigint, single boolean)
RETURNS TABLE (job jobs.job, created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    inserted record;
BEGIN
    SELECT r.job_rows, r.created INTO inserted
      FROM jobs.insert_job_rows(insert_jobs.caller, insert_jobs.specs, insert_jobs.parent_id, insert_jobs.single) AS r;
    -- In the select list the two run in step, and each job stays one value (unnest in FROM
    -- would spread it into its columns).
    RETURN QUERY SELECT unnest(inserted.job_rows), unnest(inserted.created);
END $$;
COMMENT ON FUNCTION jobs.insert_jobs(text, jsonb, bigint, boolean) IS
    'Internal: jobs.insert_job_rows as a set of (job, created), in spec order. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.insert_jobs(text, jsonb, bigint, boolean) FROM PUBLIC;
COMMIT;

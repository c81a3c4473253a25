-- Revert jobfence:insert_jobs from pg: back to the body released in v0.1.0
BEGIN;
-- The (new) -> queued transition shared by submit, submit_many and fan_out: validates the
-- specs, honours idempotency keys, serialises ordering keys, logs events and sends the outbox
-- notifications (delivered by PostgreSQL only if the caller's transaction commits).
-- Set-based: a batch of any size is a fixed number of statements, not two INSERTs per spec.
CREATE OR REPLACE FUNCTION jobs.insert_jobs(caller text, specs jsonb, parent_id bigint, single boolean)
RETURNS TABLE (job jobs.job, created boolean)
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
    batch record;
    -- Once per batch: every spec of one call is in the caller's key namespace.
    owner_ regrole := jobs.key_owner();
BEGIN
    IF specs IS NULL OR jsonb_typeof(specs) <> 'array' THEN
        RAISE EXCEPTION '%: expected a JSON array of job specs, got %', caller, coalesce(jsonb_typeof(specs), 'NULL')
            USING ERRCODE = '22023', HINT = 'Pass [{"kind": "...", "payload": {...}}, ...].';
    END IF;
    n := jsonb_array_length(specs);
    IF n = 0 THEN
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
                       WHEN e.spec - '{kind,payload,idempotency_key,run_after,ordering_key,notify,priority}'::text[] <> '{}' THEN 'extra_keys'
                       WHEN jsonb_typeof(e.spec -> 'kind') IS DISTINCT FROM 'string' THEN 'kind_type'
                       -- A declared kind passed define_type's name check: the pattern only
                       -- needs testing on names that are not declared.
                       WHEN t.kind IS NULL AND (e.spec ->> 'kind') !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN 'kind_format'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'payload'), 'null') NOT IN ('object', 'null') THEN 'payload_type'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'idempotency_key'), 'null') NOT IN ('string', 'null') THEN 'idempotency_key_type'
                       WHEN e.spec ->> 'idempotency_key' = '' OR octet_length(e.spec ->> 'idempotency_key') > 1000 THEN 'idempotency_key_length'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'ordering_key'), 'null') NOT IN ('string', 'null') THEN 'ordering_key_type'
                       WHEN e.spec ->> 'ordering_key' = '' OR octet_length(e.spec ->> 'ordering_key') > 1000 THEN 'ordering_key_length'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'run_after'), 'null') NOT IN ('string', 'null') THEN 'run_after_type'
                       -- infinity would never come due; -infinity is merely in the past (now(), below).
                       -- The bound keeps run_after readable by every client: Python's datetime
                       -- ends at year 9999, and a reader's time zone (up to +15:59) may add a day.
                       WHEN jsonb_typeof(e.spec -> 'run_after') = 'string'
                        AND coalesce(jobs.parse_timestamptz(e.spec ->> 'run_after') >= '9999-12-30T00:00:00Z', true) THEN 'run_after_value'
                       WHEN coalesce(jsonb_typeof(e.spec -> 'notify'), 'null') NOT IN ('boolean', 'null') THEN 'notify_type'
                       -- One Redis band per priority: the range is small on purpose.
                       WHEN coalesce(jsonb_typeof(e.spec -> 'priority'), 'null') NOT IN ('number', 'null')
                         OR (jsonb_typeof(e.spec -> 'priority') = 'number'
                             AND (e.spec ->> 'priority') NOT IN ('0', '1', '2', '3', '4', '5', '6', '7', '8', '9')) THEN 'priority_value'
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
              CROSS JOIN LATERAL (SELECT coalesce(nullif(e.spec -> 'payload', 'null'), '{}')::text AS payload_text
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
                    - '{kind,payload,idempotency_key,run_after,ordering_key,notify,priority}'::text[]) AS k)
                USING ERRCODE = '22023',
                      HINT = 'Allowed keys: kind, payload, idempotency_key, run_after, ordering_key, notify, priority.';
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

    -- Ids are drawn in spec order up front so each row knows its spec; a spec that meets
    -- an existing idempotency key leaves a gap, as any rolled-back insert does.
    new_ids := ARRAY(SELECT nextval('jobs.job_id_seq'::regclass) FROM generate_series(1, n));

    -- Specs without an idempotency key cannot conflict: they skip ON CONFLICT, whose
    -- speculative insertion costs an extra WAL record per row.
    WITH src AS (
        SELECT new_ids[e.ord] AS id, e.spec, e.ord, t.kind, t.queue, t.max_retries, t.lease_timeout, t.timeout,
               coalesce((e.spec ->> 'priority')::smallint, t.priority) AS priority,
               coalesce(nullif(e.spec -> 'payload', 'null'), '{}') AS payload,
               -- A run_after in the past is now(): a late timestamp must not jump the queue.
               -- A plain cast: the validation above parsed every run_after string, and each
               -- call of parse_timestamptz is a subtransaction (its exception block).
               CASE WHEN jsonb_typeof(e.spec -> 'run_after') = 'string'
                    THEN greatest((e.spec ->> 'run_after')::timestamptz, now())
                    ELSE now() END AS run_after,
               e.spec ->> 'idempotency_key' AS idempotency_key, e.spec ->> 'ordering_key' AS ordering_key
          FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
          JOIN jobs.job_type AS t ON t.kind = e.spec ->> 'kind'
    ), keyless AS (
        INSERT INTO jobs.job AS j (id, kind, queue, payload, max_retries, lease_timeout, timeout, run_after,
                                   due_at, idempotency_key, ordering_key, parent_id, priority)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.kind, s.queue, s.payload, s.max_retries, s.lease_timeout, s.timeout, s.run_after,
               s.run_after, NULL, s.ordering_key, insert_jobs.parent_id, s.priority
          FROM src AS s
         WHERE s.idempotency_key IS NULL
         ORDER BY s.ord
        RETURNING j.*
    ), keyed AS (
        INSERT INTO jobs.job AS j (id, kind, queue, payload, max_retries, lease_timeout, timeout, run_after,
                                   due_at, idempotency_key, ordering_key, parent_id, priority, key_owner)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.kind, s.queue, s.payload, s.max_retries, s.lease_timeout, s.timeout, s.run_after,
               s.run_after, s.idempotency_key, s.ordering_key, insert_jobs.parent_id, s.priority, owner_
          FROM src AS s
         WHERE s.idempotency_key IS NOT NULL
         ORDER BY s.ord
        ON CONFLICT (kind, idempotency_key, key_owner) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING j.*
    ), inserted AS (
        SELECT * FROM keyless UNION ALL SELECT * FROM keyed
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
        SELECT i.id, now(), NULL, 'queued', i.lease_version, 'submitted'
          FROM inserted AS i
    )
    -- i::jobs.job: the CTE's rows are anonymous records, and assigning a record[] to a
    -- jobs.job[] variable converts every row through its text form (record_out, record_in:
    -- a fifth of a 1,000-spec submit's time).
    SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}'), coalesce(array_agg(i::jobs.job ORDER BY i.id), '{}'),
           array_agg(i.kind)
      INTO created_ids, created_rows, created_kinds
      FROM inserted AS i;
    PERFORM jobs.tally(created_kinds, array_fill('submitted'::text, ARRAY[cardinality(created_ids)]));

    IF cardinality(created_ids) = n THEN
        -- No spec met an existing key (the common case): ids follow spec order, and the
        -- rows are the ones just inserted.
        RETURN QUERY SELECT r, true FROM unnest(created_rows) AS r;
    ELSE
    -- A repeated key returns the existing job of the caller's key namespace, unchanged
    -- (with producer ownership on, only a job the caller submitted). ON CONFLICT waited for a
    -- concurrent inserter to commit, so under READ COMMITTED this new statement sees its row.
    RETURN QUERY
    SELECT CASE WHEN mine.id IS NOT NULL THEN mine ELSE theirs END, mine.id IS NOT NULL
      FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
      LEFT JOIN jobs.job AS mine ON mine.id = new_ids[e.ord] AND mine.id = ANY (created_ids)
      LEFT JOIN jobs.job AS theirs
             ON mine.id IS NULL
            AND theirs.kind = e.spec ->> 'kind'
            AND theirs.idempotency_key = e.spec ->> 'idempotency_key'
            AND theirs.key_owner IS NOT DISTINCT FROM owner_
     ORDER BY e.ord;
    END IF;

    IF cardinality(created_ids) = 0 THEN
        RETURN;
    END IF;
    IF single THEN
        IF coalesce((specs -> 0 ->> 'notify')::boolean, true) THEN
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
COMMENT ON FUNCTION jobs.insert_jobs(text, jsonb, bigint, boolean) IS
    'Internal: validate job specs and insert them as queued (idempotency, ordering, events, outbox notify). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.insert_jobs(text, jsonb, bigint, boolean) FROM PUBLIC;
-- The array form came with this rework; the body above no longer calls it.
DROP FUNCTION jobs.insert_job_rows(text, jsonb, bigint, boolean);
COMMIT;

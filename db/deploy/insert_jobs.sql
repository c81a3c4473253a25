-- Deploy jobfence:insert_jobs to pg
-- requires: job
-- requires: event
BEGIN;
-- The (new) -> queued transition shared by submit, submit_many and fan_out: validates each
-- spec, honours idempotency keys, serialises ordering keys, logs events and sends the outbox
-- notifications (delivered by PostgreSQL only if the caller's transaction commits).
CREATE OR REPLACE FUNCTION jobs.insert_jobs(caller text, specs jsonb, parent_id bigint, single boolean)
RETURNS TABLE (job jobs.job, created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    spec jsonb;
    pos bigint;
    at_ text;
    extra text;
    kind_name text;
    body jsonb;
    idem_key text;
    due timestamptz;
    order_key text;
    wants_notify boolean;
    definition jobs.job_type;
    size integer;
    notify_ids bigint[] := '{}';
    notify_queues text[] := '{}';
    notify_due timestamptz[] := '{}';
    batch record;
BEGIN
    IF specs IS NULL OR jsonb_typeof(specs) <> 'array' THEN
        RAISE EXCEPTION '%: expected a JSON array of job specs, got %', caller, coalesce(jsonb_typeof(specs), 'NULL')
            USING ERRCODE = '22023', HINT = 'Pass [{"kind": "...", "payload": {...}}, ...].';
    END IF;

    FOR spec, pos IN SELECT e.value, e.ordinality - 1 FROM jsonb_array_elements(specs) WITH ORDINALITY AS e LOOP
        at_ := CASE WHEN single THEN caller ELSE format('%s: %s[%s]', caller,
                   CASE WHEN parent_id IS NULL THEN 'specs' ELSE 'children' END, pos) END;
        IF jsonb_typeof(spec) <> 'object' THEN
            RAISE EXCEPTION '%: a job spec must be a JSON object, got %', at_, jsonb_typeof(spec)
                USING ERRCODE = '22023', HINT = 'Each element looks like {"kind": "...", "payload": {...}}.';
        END IF;
        SELECT string_agg(k, ', ' ORDER BY k) INTO extra
          FROM jsonb_object_keys(spec) AS k
         WHERE k NOT IN ('kind', 'payload', 'idempotency_key', 'run_after', 'ordering_key', 'notify');
        IF extra IS NOT NULL THEN
            RAISE EXCEPTION '%: unknown key(s) in job spec: %', at_, extra
                USING ERRCODE = '22023',
                      HINT = 'Allowed keys: kind, payload, idempotency_key, run_after, ordering_key, notify.';
        END IF;

        IF jsonb_typeof(spec -> 'kind') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION '%: kind must be a string', at_
                USING ERRCODE = '22023', HINT = 'Declare kinds with jobs.define_type and pass the name.';
        END IF;
        kind_name := spec ->> 'kind';
        IF kind_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
            RAISE EXCEPTION '%: kind % is malformed', at_, quote_literal(kind_name)
                USING ERRCODE = '22023',
                      HINT = 'Kind names are 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit.';
        END IF;

        body := coalesce(spec -> 'payload', '{}'::jsonb);
        IF jsonb_typeof(body) = 'null' THEN
            body := '{}'::jsonb;
        END IF;
        IF jsonb_typeof(body) <> 'object' THEN
            RAISE EXCEPTION '%: payload must be a JSON object, got %', at_, jsonb_typeof(body)
                USING ERRCODE = '22023', HINT = 'Wrap values in an object, e.g. {"invoice_id": 42}.';
        END IF;

        idem_key := NULL;
        IF jsonb_typeof(spec -> 'idempotency_key') = 'string' THEN
            idem_key := spec ->> 'idempotency_key';
        ELSIF coalesce(jsonb_typeof(spec -> 'idempotency_key'), 'null') <> 'null' THEN
            RAISE EXCEPTION '%: idempotency_key must be a string or null', at_
                USING ERRCODE = '22023', HINT = 'Use a stable business key, e.g. "invoice:42:send".';
        END IF;
        IF idem_key = '' OR octet_length(idem_key) > 1000 THEN
            RAISE EXCEPTION '%: idempotency_key must be 1 to 1000 bytes long, got %', at_, octet_length(idem_key)
                USING ERRCODE = '22023', HINT = 'Pass null for no key; hash long keys, e.g. md5(...).';
        END IF;

        order_key := NULL;
        IF jsonb_typeof(spec -> 'ordering_key') = 'string' THEN
            order_key := spec ->> 'ordering_key';
        ELSIF coalesce(jsonb_typeof(spec -> 'ordering_key'), 'null') <> 'null' THEN
            RAISE EXCEPTION '%: ordering_key must be a string or null', at_
                USING ERRCODE = '22023', HINT = 'Use the entity id, e.g. "account:7".';
        END IF;
        IF order_key = '' OR octet_length(order_key) > 1000 THEN
            RAISE EXCEPTION '%: ordering_key must be 1 to 1000 bytes long, got %', at_, octet_length(order_key)
                USING ERRCODE = '22023', HINT = 'Pass null for no ordering; use the entity id, e.g. "account:7".';
        END IF;

        due := now();
        IF jsonb_typeof(spec -> 'run_after') = 'string' THEN
            BEGIN
                due := (spec ->> 'run_after')::timestamptz;
            EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_parameter_value THEN
                due := NULL;
            END;
            -- infinity would never come due; -infinity is merely in the past (now(), below).
            IF due IS NULL OR due = 'infinity' THEN
                RAISE EXCEPTION '%: run_after % is not a finite timestamp', at_, spec -> 'run_after'
                    USING ERRCODE = '22023', HINT = 'Use ISO 8601 with a zone, e.g. "2030-01-01T09:00:00Z".';
            END IF;
            due := greatest(due, now());
        ELSIF coalesce(jsonb_typeof(spec -> 'run_after'), 'null') <> 'null' THEN
            RAISE EXCEPTION '%: run_after must be a timestamp string or null', at_
                USING ERRCODE = '22023', HINT = 'Use ISO 8601 with a zone, e.g. "2030-01-01T09:00:00Z".';
        END IF;

        IF jsonb_typeof(spec -> 'notify') = 'boolean' THEN
            wants_notify := (spec -> 'notify')::boolean;
        ELSIF coalesce(jsonb_typeof(spec -> 'notify'), 'null') = 'null' THEN
            wants_notify := true;
        ELSE
            RAISE EXCEPTION '%: notify must be a boolean', at_
                USING ERRCODE = '22023', HINT = 'Pass false when your driver pushes the id itself.';
        END IF;

        SELECT * INTO definition FROM jobs.job_type AS t WHERE t.kind = kind_name;
        IF NOT FOUND THEN
            RAISE EXCEPTION '%: unknown kind %', at_, quote_literal(kind_name)
                USING ERRCODE = 'JB005', HINT = 'Declare it first: SELECT jobs.define_type(''<kind>'', ...).';
        END IF;

        size := octet_length(body::text);
        IF size > definition.max_payload_bytes THEN
            RAISE EXCEPTION '%: payload of % bytes exceeds the % byte limit of kind %',
                at_, size, definition.max_payload_bytes, kind_name
                USING ERRCODE = 'JB004',
                      HINT = 'Pass a reference (an id or an object-storage key) and load the data when the job runs.';
        END IF;

        -- Ids come from a sequence, so two open transactions could commit an ordering key's
        -- jobs out of id order. Serialising submits per key until commit keeps id order = commit order.
        IF order_key IS NOT NULL THEN
            PERFORM pg_advisory_xact_lock(hashtext('jobs.ordering_key'), hashtext(order_key));
        END IF;

        INSERT INTO jobs.job AS j (kind, queue, payload, max_retries, lease_timeout, timeout, run_after,
                                   idempotency_key, ordering_key, parent_id)
        VALUES (kind_name, definition.queue, body, definition.max_retries, definition.lease_timeout,
                definition.timeout, due, idem_key, order_key, insert_jobs.parent_id)
        ON CONFLICT (kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING * INTO job;

        IF job.id IS NULL THEN
            -- Repeated key: the existing job, unchanged. ON CONFLICT waited for a concurrent
            -- inserter to commit, so under READ COMMITTED this statement sees its row.
            SELECT * INTO job FROM jobs.job AS j WHERE j.kind = kind_name AND j.idempotency_key = idem_key;
            created := false;
            RETURN NEXT;
            CONTINUE;
        END IF;

        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
        VALUES (job.id, now(), NULL, 'queued', job.lease_version, 'submitted');
        IF wants_notify THEN
            notify_ids := notify_ids || job.id;
            notify_queues := notify_queues || job.queue;
            notify_due := notify_due || job.run_after;
        END IF;
        created := true;
        RETURN NEXT;
    END LOOP;

    IF cardinality(notify_ids) = 0 THEN
        RETURN;
    END IF;
    IF single THEN
        PERFORM pg_notify('jobs_submitted', json_build_object(
            'id', notify_ids[1], 'queue', notify_queues[1], 'run_after', notify_due[1])::text);
        RETURN;
    END IF;
    -- One message per queue (and per future run_after), chunked to stay well under
    -- PostgreSQL's 8000-byte notification limit (300 ids of at most 20 digits + a queue name).
    FOR batch IN
        WITH n AS (
            SELECT u.id, u.queue, CASE WHEN u.due > now() THEN u.due END AS due, u.ord
              FROM unnest(notify_ids, notify_queues, notify_due) WITH ORDINALITY AS u(id, queue, due, ord)
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
COMMIT;

-- Deploy jobfence:fan_out to pg
-- requires: insert_jobs
BEGIN;
CREATE OR REPLACE FUNCTION jobs.fan_out(children jsonb, then_spec jsonb)
RETURNS jobs.job
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    coordinator jobs.job;
    inserted record;
    child record;
    child_count integer;
    clash bigint;
    twin bigint;
BEGIN
    IF children IS NULL OR jsonb_typeof(children) <> 'array' THEN
        RAISE EXCEPTION 'jobs.fan_out: children must be a JSON array of job specs'
            USING ERRCODE = '22023', HINT = 'Pass [{"kind": "...", "payload": {...}}, ...]; [] makes the coordinator claimable at once.';
    END IF;
    IF then_spec IS NULL OR jsonb_typeof(then_spec) <> 'object' THEN
        RAISE EXCEPTION 'jobs.fan_out: then_spec must be a JSON object (the coordinator''s job spec)'
            USING ERRCODE = '22023', HINT = 'Pass {"kind": "...", "payload": {...}, "idempotency_key": "..."}.';
    END IF;
    child_count := jsonb_array_length(children);
    -- Before the passes over the children below: each of them is work per child.
    IF child_count > 10000 THEN
        RAISE EXCEPTION 'jobs.fan_out: % children in one call; the limit is 10000', child_count
            USING ERRCODE = '22023',
                  HINT = 'Give one coordinator at most 10000 children; split larger work into several fan-outs, or let each child cover a range of items.';
    END IF;
    -- The coordinator is created first (smaller id): a child with the coordinator's
    -- ordering_key would wait for the coordinator, which waits for the child. Forever.
    SELECT c.ordinality - 1 INTO clash
      FROM jsonb_array_elements(children) WITH ORDINALITY AS c
     WHERE jsonb_typeof(c.value) = 'object' AND jsonb_typeof(then_spec -> 'ordering_key') = 'string'
       AND c.value -> 'ordering_key' = then_spec -> 'ordering_key'
     ORDER BY c.ordinality
     LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.fan_out: children[%] has the coordinator''s ordering_key %', clash, then_spec ->> 'ordering_key'
            USING ERRCODE = '22023',
                  HINT = 'The coordinator runs after its children; give them no ordering_key or another one.';
    END IF;

    -- Two children with one key would be one job: the second spec would silently name the
    -- first child (a job this call then rolls back). Refuse it by position, before any insert.
    SELECT min(c.ordinality) - 1, max(c.ordinality) - 1 INTO clash, twin
      FROM jsonb_array_elements(children) WITH ORDINALITY AS c
     WHERE jsonb_typeof(c.value) = 'object' AND jsonb_typeof(c.value -> 'idempotency_key') = 'string'
     GROUP BY c.value ->> 'kind', c.value ->> 'idempotency_key'
    HAVING count(*) > 1
     ORDER BY 1
     LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.fan_out: children[%] and children[%] have the same kind and idempotency_key %',
                        clash, twin, quote_literal(children -> clash::integer ->> 'idempotency_key')
            USING ERRCODE = '22023',
                  HINT = 'Each child is its own job: give each a key of its own, or none (the key on then_spec makes the fan-out replay-safe).';
    END IF;

    -- The coordinator first: its idempotency key makes the whole fan-out replay-safe, and
    -- it only becomes claimable once its last child ends, so it is not announced now
    -- unless it has no children.
    SELECT r.job, r.created INTO inserted
      FROM jobs.insert_jobs('jobs.fan_out: then_spec',
               jsonb_build_array(CASE WHEN child_count > 0
                                      THEN then_spec || '{"notify": false}' ELSE then_spec END),
               NULL, true) AS r;
    coordinator := inserted.job;
    IF NOT inserted.created OR child_count = 0 THEN
        RETURN coordinator;
    END IF;

    FOR child IN SELECT r.job, r.created FROM jobs.insert_jobs('jobs.fan_out', children, coordinator.id, false) AS r LOOP
        IF NOT child.created THEN
            RAISE EXCEPTION 'jobs.fan_out: child idempotency_key % of kind % already belongs to job %',
                quote_literal((child.job).idempotency_key), (child.job).kind, (child.job).id
                USING ERRCODE = '22023',
                      HINT = 'A child belongs to exactly one coordinator: put the idempotency key on then_spec to make the fan-out replay-safe.';
        END IF;
    END LOOP;

    UPDATE jobs.job AS j SET pending_children = child_count, updated_at = now()
     WHERE j.id = coordinator.id
    RETURNING * INTO coordinator;
    RETURN coordinator;
END $$;
COMMENT ON FUNCTION jobs.fan_out(jsonb, jsonb) IS
    'Fan-out/fan-in: create the children and a coordinator job atomically. The coordinator is claimable once every child is terminal (done or failed); the last child''s outcome wakes it. An idempotency_key on then_spec makes the call replay-safe. At most 10000 children (more: 22023).';
REVOKE ALL ON FUNCTION jobs.fan_out(jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fan_out(jsonb, jsonb) TO jobs_producer, jobs_admin;
COMMIT;

-- Deploy jobfence:define_type to pg
-- requires: job_type
-- requires: kind_limit
BEGIN;
CREATE OR REPLACE FUNCTION jobs.define_type(
    kind              text,
    queue             text DEFAULT 'default',
    lease_timeout     interval DEFAULT '15 seconds',
    timeout           interval DEFAULT '30 seconds',
    max_retries       integer DEFAULT 3,
    backoff_base      interval DEFAULT '1 second',
    backoff_max       interval DEFAULT '5 minutes',
    max_payload_bytes integer DEFAULT 262144,
    slo_latency       interval DEFAULT '25 seconds',
    slo_target        numeric DEFAULT 0.95,
    slo_success       numeric DEFAULT 0.99,
    max_backlog       bigint DEFAULT 10000,
    run_time_budget   interval DEFAULT NULL,
    max_failure_rate  numeric DEFAULT 0.05,
    priority          integer DEFAULT 0,
    max_running       integer DEFAULT NULL,
    rate_limit        integer DEFAULT NULL,
    rate_period       interval DEFAULT NULL,
    on_dead           text DEFAULT NULL)
RETURNS jobs.job_type
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    problem text;
    defined jobs.job_type;
BEGIN
    -- Names end up in Redis keys (jobfence:{queue}:ready) and log lines: keep them plain.
    -- Upper bounds keep now() + interval arithmetic far from timestamp overflow; a job that
    -- needs more than a month per attempt should be split, not given a longer lease.
    problem := CASE
        WHEN kind IS NULL OR kind !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
            format('kind %s is malformed', coalesce(quote_literal(kind), 'NULL'))
        WHEN queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
            format('queue %s is malformed', coalesce(quote_literal(queue), 'NULL'))
        WHEN lease_timeout IS NULL OR lease_timeout <= interval '0' OR lease_timeout > interval '30 days' THEN
            'lease_timeout must be a positive interval of at most 30 days'
        WHEN timeout IS NULL OR timeout <= interval '0' OR timeout > interval '30 days' THEN
            'timeout must be a positive interval of at most 30 days'
        WHEN max_retries IS NULL OR max_retries NOT BETWEEN 0 AND 1000 THEN 'max_retries must be between 0 and 1000'
        WHEN backoff_base IS NULL OR backoff_base <= interval '0' THEN 'backoff_base must be a positive interval'
        WHEN backoff_max IS NULL OR backoff_max < backoff_base OR backoff_max > interval '30 days' THEN
            'backoff_max must be at least backoff_base and at most 30 days'
        WHEN max_payload_bytes IS NULL OR max_payload_bytes <= 0 THEN 'max_payload_bytes must be positive'
        WHEN slo_latency IS NULL OR slo_latency <= interval '0' OR slo_latency > interval '30 days' THEN
            'slo_latency must be a positive interval of at most 30 days'
        -- Below 1: an objective of 100 % leaves no error budget to burn or alert on.
        WHEN slo_target IS NULL OR slo_target <= 0 OR slo_target >= 1 THEN 'slo_target must be in (0, 1), e.g. 0.95'
        WHEN slo_success IS NULL OR slo_success <= 0 OR slo_success >= 1 THEN 'slo_success must be in (0, 1), e.g. 0.999'
        WHEN max_backlog IS NULL OR max_backlog < 1 THEN 'max_backlog must be at least 1'
        WHEN run_time_budget <= interval '0' OR run_time_budget > interval '30 days' THEN
            'run_time_budget must be NULL (half the timeout) or a positive interval of at most 30 days'
        WHEN max_failure_rate IS NULL OR max_failure_rate < 0 OR max_failure_rate > 1 THEN
            'max_failure_rate must be in [0, 1]'
        WHEN priority IS NULL OR priority NOT BETWEEN 0 AND 9 THEN 'priority must be between 0 (first) and 9'
        WHEN max_running < 1 THEN 'max_running must be NULL (unlimited) or at least 1'
        WHEN (rate_limit IS NULL) <> (rate_period IS NULL) THEN
            'rate_limit and rate_period go together: both NULL (unlimited) or both set'
        WHEN rate_limit < 1 THEN 'rate_limit must be NULL (unlimited) or at least 1'
        WHEN rate_period < interval '1 millisecond' OR rate_period > interval '30 days' THEN
            'rate_period must be an interval from 1 millisecond to 30 days'
        -- Declared first, so a dead letter never meets a compensating kind that is missing.
        WHEN on_dead = kind THEN 'on_dead must name another kind than the one it compensates'
        WHEN on_dead IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobs.job_type AS c WHERE c.kind = define_type.on_dead) THEN
            format('on_dead names kind %s, which is not declared: declare the compensating kind first', quote_literal(on_dead))
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.define_type: %', problem
            USING ERRCODE = '22023',
                  HINT = 'Names: 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit. Intervals: positive and at most 30 days, e.g. ''30 seconds''.';
    END IF;

    INSERT INTO jobs.job_type AS t (kind, queue, lease_timeout, timeout, max_retries, backoff_base,
                                    backoff_max, max_payload_bytes, slo_latency, slo_target,
                                    slo_success, max_backlog, run_time_budget, max_failure_rate,
                                    priority, max_running, rate_limit, rate_period, on_dead)
    VALUES (define_type.kind, define_type.queue, define_type.lease_timeout, define_type.timeout,
            define_type.max_retries, define_type.backoff_base, define_type.backoff_max,
            define_type.max_payload_bytes, define_type.slo_latency, define_type.slo_target,
            define_type.slo_success, define_type.max_backlog, define_type.run_time_budget,
            define_type.max_failure_rate, define_type.priority, define_type.max_running,
            define_type.rate_limit, define_type.rate_period, define_type.on_dead)
    ON CONFLICT ON CONSTRAINT job_type_pkey DO UPDATE
       SET queue = excluded.queue, lease_timeout = excluded.lease_timeout, timeout = excluded.timeout,
           max_retries = excluded.max_retries, backoff_base = excluded.backoff_base,
           backoff_max = excluded.backoff_max, max_payload_bytes = excluded.max_payload_bytes,
           slo_latency = excluded.slo_latency, slo_target = excluded.slo_target,
           slo_success = excluded.slo_success, max_backlog = excluded.max_backlog,
           run_time_budget = excluded.run_time_budget, max_failure_rate = excluded.max_failure_rate,
           priority = excluded.priority, max_running = excluded.max_running,
           rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,
           on_dead = excluded.on_dead, updated_at = now()
    RETURNING * INTO defined;

    -- The claim path reads jobs.kind_limit only: a row there is what makes a kind limited,
    -- so an unlimited kind costs the claims nothing.
    IF defined.max_running IS NULL AND defined.rate_limit IS NULL THEN
        DELETE FROM jobs.kind_slot AS s WHERE s.kind = defined.kind;
        DELETE FROM jobs.kind_limit AS l WHERE l.kind = defined.kind;
    ELSE
        -- Locked like a claim locks it, so a redefinition waits for claims in flight. A full
        -- bucket to start with; a changed rate keeps the tokens already earned (capped).
        INSERT INTO jobs.kind_limit AS l (kind, max_running, rate_limit, rate_period, tokens, refilled_at)
        VALUES (defined.kind, defined.max_running, defined.rate_limit, defined.rate_period,
                coalesce(defined.rate_limit, 0), now())
        ON CONFLICT ON CONSTRAINT kind_limit_pkey DO UPDATE
           SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
               rate_period = excluded.rate_period,
               tokens = CASE WHEN l.rate_limit IS NULL THEN excluded.tokens
                             ELSE least(l.tokens, excluded.tokens) END;
        -- Jobs already running count against a new max_running: their slots are taken now.
        INSERT INTO jobs.kind_slot (kind, job_id, lease_version)
        SELECT j.kind, j.id, j.lease_version
          FROM jobs.job AS j
         WHERE j.status = 'processing' AND j.kind = defined.kind
        ON CONFLICT ON CONSTRAINT kind_slot_pkey DO UPDATE SET lease_version = excluded.lease_version;
    END IF;
    RETURN defined;
END $$;
COMMENT ON FUNCTION jobs.define_type(text, text, interval, interval, integer, interval, interval, integer, interval, numeric, numeric, bigint, interval, numeric, integer, integer, integer, interval, text) IS
    'Declare or replace a job kind: queue, lease and execution timeouts, retry budget, backoff, payload limit, SLOs (latency, success), alert bounds (backlog, run-time budget, failure rate), default priority (0..9, lower first) global claim limits (max_running, rate_limit per rate_period; NULL unlimited) and the compensating kind submitted when a job dead-letters (on_dead). Omitted arguments take their defaults; existing jobs keep the values copied at submit.';
REVOKE ALL ON FUNCTION jobs.define_type(text, text, interval, interval, integer, interval, interval, integer, interval, numeric, numeric, bigint, interval, numeric, integer, integer, integer, interval, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.define_type(text, text, interval, interval, integer, interval, interval, integer, interval, numeric, numeric, bigint, interval, numeric, integer, integer, integer, interval, text) TO jobs_admin;
COMMIT;

-- Deploy jobfence:poll_submitted to pg
-- requires: relay_feed
-- requires: signals
-- requires: jobs_admin
BEGIN;
-- The relay's reading of new jobs when submits do not notify (jobs.relay_feed.source =
-- table). Ids are drawn from a sequence, so a smaller id may commit after a larger one has
-- been read: reading "everything above the last id seen" would skip it. Instead a stretch of
-- ids is read only once it is final. A horizon records the last id drawn, then a transaction
-- id taken after that: a submit that drew an id up to it held a transaction id before it drew
-- (insert_jobs takes one first), so an older one. Once the oldest running transaction is
-- newer than the horizon's, every such submit has ended, and the stretch is read once,
-- through jobs.signals (the same rule as any other signal). Nothing is read twice, and a
-- transaction that stays open holds the reading back instead of losing its jobs.
CREATE OR REPLACE FUNCTION jobs.poll_submitted(max_ids integer DEFAULT 10000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    f jobs.relay_feed;
    matured boolean;
    upto bigint;
    last_id bigint;
    stop boolean := false;
    next_id bigint;
    next_xid xid8;
    next_source text;
BEGIN
    IF poll_submitted.max_ids IS NULL OR poll_submitted.max_ids NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'jobs.poll_submitted: max_ids must be between 1 and 100000, not %', coalesce(poll_submitted.max_ids::text, 'NULL')
              USING ERRCODE = '22023', HINT = 'The relay reads at most this many ids per call.';
    END IF;
    -- The feed row must be read as it is once the lock is held: a REPEATABLE READ or
    -- SERIALIZABLE snapshot may be older than the last reader's write.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'jobs.poll_submitted: must run in a READ COMMITTED transaction, not %', current_setting('transaction_isolation')
              USING ERRCODE = '22023', HINT = 'Call it on its own (autocommit), as jobfence relay does.';
    END IF;
    -- One reader at a time (several relays may run): the others get nothing this time. An
    -- advisory lock, not a row lock, so that an idle poll writes nothing, not even a lock.
    IF NOT pg_try_advisory_xact_lock(hashtext('jobs.relay_feed')) THEN
        RETURN;
    END IF;
    SELECT * INTO f FROM jobs.relay_feed AS r WHERE r.singleton;
    IF f.read_upto IS NULL THEN
        RETURN;  -- submits notify, and nothing from a table period is left to read
    END IF;
    upto := f.read_upto;
    next_id := f.horizon_id;
    next_xid := f.horizon_xid;
    next_source := f.horizon_source;
    -- This session holds no transaction id yet (it takes one only with a new horizon,
    -- below), so the oldest running transaction is someone else's.
    matured := f.horizon_id IS NOT NULL AND pg_snapshot_xmin(pg_current_snapshot()) > f.horizon_xid;
    IF matured AND f.horizon_id > upto THEN
        upto := least(f.horizon_id, f.read_upto + poll_submitted.max_ids);
        RETURN QUERY SELECT * FROM jobs.signals(ARRAY(SELECT generate_series(f.read_upto + 1, upto)));
    END IF;
    IF f.horizon_id IS NULL OR (matured AND upto >= f.horizon_id) THEN
        IF f.source = 'notify' AND f.horizon_source = 'notify' THEN
            -- Back to notify: this horizon was taken after the switch, so it covers every
            -- submit that still saw table when it drew its ids. Nothing more to read.
            stop := true;
        ELSE
            SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
              INTO last_id FROM jobs.job_id_seq AS s;
            IF last_id <= upto THEN
                -- Nothing drawn since: no horizon, so an idle poll writes nothing.
                stop := f.source = 'notify';
                next_id := NULL; next_xid := NULL; next_source := NULL;
            ELSE
                -- Transaction ids are handed out in order: one taken now, after last_id was
                -- read, is newer than that of every submit that drew an id up to it. (A
                -- snapshot's xmax would not do: it is one past the newest *ended*
                -- transaction, and a running one may hold a newer id.) The row is written
                -- below anyway, which would take one.
                next_xid := pg_current_xact_id();
                next_id := last_id;
                next_source := f.source;
            END IF;
        END IF;
    END IF;
    IF stop THEN
        UPDATE jobs.relay_feed AS r
           SET read_upto = NULL, horizon_id = NULL, horizon_xid = NULL, horizon_source = NULL, changed_at = now()
         WHERE r.singleton;
    ELSIF upto IS DISTINCT FROM f.read_upto OR next_id IS DISTINCT FROM f.horizon_id
          OR next_xid IS DISTINCT FROM f.horizon_xid THEN
        UPDATE jobs.relay_feed AS r
           SET read_upto = upto, horizon_id = next_id, horizon_xid = next_xid, horizon_source = next_source,
               changed_at = now()
         WHERE r.singleton;
    END IF;
END $$;
COMMENT ON FUNCTION jobs.poll_submitted(integer) IS
    'The relay''s reading of new jobs when submits do not notify (configure_relay source table): where to push the queued jobs of the next stretch of ids that no running transaction can still add to, at most max_ids (1-100000) ids per call, each stretch once; (job_id, queue, run_after, priority), by id. Empty while another session polls, while submits notify and nothing is left to read, or while a transaction older than the stretch runs. Must run in a READ COMMITTED transaction. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.poll_submitted(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.poll_submitted(integer) TO jobs_admin;
COMMIT;

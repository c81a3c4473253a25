-- Deploy jobfence:raise_lease_lost to pg
-- requires: job
-- requires: event
BEGIN;
-- Called after an authority-predicate UPDATE matched no row: tell the caller whether the job
-- does not exist (JB002) or its lease is not the caller's (JB001), and why. Who holds the job
-- now and at which lease_version is said only to the session role that claimed it: anyone
-- else would learn exactly the fence a forged write needs. A job nobody holds (queued, failed,
-- enqueue_failed, done) has no lease to forge, so its status and lease_version are told to
-- every caller, with what became of the lease the caller named.
CREATE OR REPLACE FUNCTION jobs.raise_lease_lost(caller text, job_id bigint, worker text, lease_version bigint)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    current jobs.job;
    me regrole := quote_ident(session_user)::regrole;
    claimed record;
    ended record;
    ending text;
    by_reaper boolean;
BEGIN
    SELECT * INTO current FROM jobs.job AS j WHERE j.id = raise_lease_lost.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: job % not found', caller, raise_lease_lost.job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;
    IF current.status = 'processing' AND current.claim_role IS DISTINCT FROM me THEN
        RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): this session''s role does not hold that lease',
            caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version
            USING ERRCODE = 'JB001',
                  HINT = 'Another worker or the reaper took this job over, or the lease was claimed by another role. Discard this result: the current owner''s write wins.';
    END IF;
    IF current.claim_role = me THEN
        IF current.status = 'done' AND current.lease_version = raise_lease_lost.lease_version THEN
            -- The caller's own lease, already ended: a repeated or late write, not a takeover.
            RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): that lease already ended, the job is %',
                caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version, current.status
                USING ERRCODE = 'JB001',
                      HINT = 'The job finished under this lease (see jobs.events); a second write to it changes nothing.';
        END IF;
        RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %; now: status %, owned_by %, lease_version %)',
            caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
            current.status, coalesce(current.owned_by, 'nobody'), current.lease_version
            USING ERRCODE = 'JB001',
                  HINT = 'Another worker of your role or the reaper took this job over, or the lease token did not match. Discard this result: the current owner''s write wins.';
    END IF;
    -- A job done under the named lease ended it by a completion, which with its claim may be
    -- recorded by the row alone (docs/design.md "What is recorded where").
    IF current.status = 'done' AND current.lease_version = raise_lease_lost.lease_version THEN
        ending := 'completed';
    ELSE
        -- Nobody holds the job, and a lease that ended no longer names its role on the row
        -- (finish_leases clears claim_role unless the job is done), so the row cannot tell a
        -- lease the reaper took back from one never granted. The history can: a kept job
        -- keeps all of it (drop_event_partitions), and a lease that ended otherwise than in
        -- a completion has its claim and its ending as rows of jobs.event (finish_leases).
        SELECT e.id, e.session_role INTO claimed
          FROM jobs.event AS e
         WHERE e.job_id = raise_lease_lost.job_id AND e.reason = 'claimed'
           AND e.lease_version = raise_lease_lost.lease_version
         ORDER BY e.id
         LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): the job was never claimed at that lease_version; it is now %, lease_version %',
                caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
                current.status, current.lease_version
                USING ERRCODE = 'JB001',
                      HINT = 'Write with the job_id and lease_version a claim returned (jobs.lease); no lease was granted at this one. Discard this result.';
        END IF;
        SELECT e.reason, e.error, e.session_role INTO ended
          FROM jobs.event AS e
         WHERE e.job_id = raise_lease_lost.job_id AND e.id > claimed.id
           AND e.from_status = 'processing' AND e.to_status <> 'processing'
         ORDER BY e.id
         LIMIT 1;
        -- The event keeps the reason, not the verdict: a lease the reaper ended as exhausted
        -- or cancelled shows through the errors only jobs.reap writes, from a role other than
        -- the claimant's (a worker failing its own lease with such an error stays its own
        -- ending).
        by_reaper := ended.reason IN ('reaped', 'timed_out')
                     OR (ended.reason IN ('exhausted', 'cancelled')
                         AND (ended.error = 'lease expired' OR ended.error LIKE 'timeout after %')
                         AND ended.session_role IS DISTINCT FROM claimed.session_role);
        IF by_reaper THEN
            RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): that lease ended, the reaper took it back (%, reason %); the job is now %, lease_version %',
                caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
                ended.error, ended.reason, current.status, current.lease_version
                USING ERRCODE = 'JB001',
                      HINT = 'The reaper ends a lease whose heartbeats stopped or whose timeout passed (see jobs.events). Discard this result: a job queued again runs under a new lease.';
        END IF;
        ending := ended.reason;
    END IF;
    RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): that lease already ended (reason %); the job is now %, lease_version %',
        caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
        coalesce(ending, 'unknown'), current.status, current.lease_version
        USING ERRCODE = 'JB001',
              HINT = 'An earlier write ended this lease (see jobs.events); a second write to it changes nothing.';
END $$;
COMMENT ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) IS
    'Internal: raise JB002 (no such job) or JB001 (lease lost: held by another session role; or how the named lease ended, reaped, finished or never claimed, with the status and lease_version of a job nobody holds; the current owner and lease_version of a held lease only for the session role that claimed the job). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) FROM PUBLIC;
COMMIT;

-- Deploy jobfence:release_dependents to pg
-- requires: claimable
-- requires: job_dependency
-- requires: edge_outcome
-- requires: event_reason_dependencies
-- requires: end_unheld
BEGIN;
-- Called right after jobs reached a terminal status. Three kinds of jobs may become
-- claimable: a fan-in coordinator whose last pending child just ended, a job whose last
-- unmet dependency ended (docs/sql-api.md "Dependencies"), and the next job of an ordering
-- key. Returns (source_id, woken_id) pairs; the caller reports woken ids so drivers signal them.
CREATE OR REPLACE FUNCTION jobs.release_dependents(job_ids bigint[])
RETURNS TABLE (source_id bigint, woken_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    parent record;
    keyed record;
    remaining integer;
    next_id bigint;
    waiting_ids bigint[];
    doomed_ids bigint[];
    doomed_errors text[];
    first_failed bigint;
    freed_ids bigint[];
    freed_by bigint[];
    freed_versions bigint[];
BEGIN
    -- Dependencies: the unreleased edges out of these jobs, each judged by jobs.edge_outcome
    -- (released when met or failing the dependent; under wait a failed dependency holds it
    -- until a replay of the dependency is done). The dependents' counters go down in id
    -- order, like every batch update, so concurrent finishers cannot deadlock; the decrement
    -- that reaches zero happens once, and records the release. The lock list is the probe:
    -- one index range per ended job, empty when nothing depends on it.
    waiting_ids := ARRAY(SELECT d.job_id FROM jobs.job_dependency AS d
                          WHERE d.depends_on = ANY (release_dependents.job_ids) AND d.released_at IS NULL);
    IF cardinality(waiting_ids) > 0 THEN
        PERFORM 1 FROM jobs.job AS o WHERE o.id = ANY (waiting_ids) ORDER BY o.id FOR NO KEY UPDATE;
        WITH ended AS (
            SELECT p.id, p.status FROM jobs.job AS p
             WHERE p.id = ANY (release_dependents.job_ids) AND p.status IN ('done', 'failed')
        ), released AS (
            UPDATE jobs.job_dependency AS d
               SET released_at = now()
              FROM ended AS e
             WHERE d.depends_on = e.id AND d.released_at IS NULL
               AND jobs.edge_outcome(e.status, d.on_failure) IS NOT NULL
            RETURNING d.job_id, d.depends_on, jobs.edge_outcome(e.status, d.on_failure) = 'fails' AS fails
        ), counted AS (
            SELECT r.job_id, count(*)::integer AS met, max(r.depends_on) AS last_parent,
                   min(r.depends_on) FILTER (WHERE r.fails) AS failed_parent
              FROM released AS r
             GROUP BY r.job_id
        ), lowered AS (
            UPDATE jobs.job AS j
               SET pending_children = j.pending_children - c.met, updated_at = now()
              FROM counted AS c
             WHERE j.id = c.job_id
            RETURNING j.id, j.pending_children, j.status, j.lease_version, c.last_parent, c.failed_parent
        )
        SELECT coalesce(array_agg(l.id ORDER BY l.id) FILTER (WHERE l.failed_parent IS NOT NULL), '{}'),
               coalesce(array_agg(format('dependency %s failed', l.failed_parent) ORDER BY l.id)
                        FILTER (WHERE l.failed_parent IS NOT NULL), '{}'),
               min(l.failed_parent),
               -- Released: a job that ended meanwhile (cancelled) has nothing left to wait for.
               coalesce(array_agg(l.id ORDER BY l.id)
                        FILTER (WHERE l.failed_parent IS NULL AND l.pending_children = 0 AND l.status = 'queued'), '{}'),
               coalesce(array_agg(l.last_parent ORDER BY l.id)
                        FILTER (WHERE l.failed_parent IS NULL AND l.pending_children = 0 AND l.status = 'queued'), '{}'),
               coalesce(array_agg(l.lease_version ORDER BY l.id)
                        FILTER (WHERE l.failed_parent IS NULL AND l.pending_children = 0 AND l.status = 'queued'), '{}')
          INTO doomed_ids, doomed_errors, first_failed, freed_ids, freed_by, freed_versions
          FROM lowered AS l;
        IF cardinality(freed_ids) > 0 THEN
            INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
            SELECT u.id, now(), 'queued', 'queued', u.lease_version, 'released'
              FROM unnest(freed_ids, freed_versions) AS u(id, lease_version);
            RETURN QUERY SELECT u.source_id, u.id FROM unnest(freed_ids, freed_by) AS u(id, source_id)
                          WHERE EXISTS (SELECT 1 FROM jobs.claimable AS c WHERE c.id = u.id);
        END IF;
        IF cardinality(doomed_ids) > 0 THEN
            -- The one door for ending a waiting job, in one call; it releases the doomed jobs'
            -- own dependents. What that wakes is reported as woken by the first failed
            -- dependency: the caller needs a source among the jobs it ended, to report the
            -- wake with (jobs.finish_leases).
            RETURN QUERY SELECT first_failed, w
              FROM unnest(jobs.end_unheld(doomed_ids, 'dependency_failed', doomed_errors)) AS w;
        END IF;
    END IF;

    -- pending_children counts unfinished children exactly (replay adds one back), so the
    -- decrement that reaches zero happens once: that caller alone wakes the coordinator.
    -- Parents are updated in id order so concurrent batches cannot deadlock on them.
    FOR parent IN
        SELECT c.parent_id AS id, count(*)::integer AS ended, max(c.id) AS last_child
          FROM jobs.job AS c
         WHERE c.id = ANY (release_dependents.job_ids) AND c.parent_id IS NOT NULL
         GROUP BY c.parent_id
         ORDER BY c.parent_id
    LOOP
        UPDATE jobs.job AS p
           SET pending_children = p.pending_children - parent.ended, updated_at = now()
         WHERE p.id = parent.id
        RETURNING p.pending_children INTO remaining;
        IF remaining = 0 AND EXISTS (SELECT 1 FROM jobs.claimable AS c WHERE c.id = parent.id) THEN
            source_id := parent.last_child;
            woken_id := parent.id;
            RETURN NEXT;
        END IF;
    END LOOP;

    FOR keyed IN
        SELECT j.id, j.ordering_key
          FROM jobs.job AS j
         WHERE j.id = ANY (release_dependents.job_ids) AND j.ordering_key IS NOT NULL
         ORDER BY j.id
    LOOP
        SELECT n.id INTO next_id
          FROM jobs.job AS n
         WHERE n.ordering_key = keyed.ordering_key
           AND n.status IN ('queued', 'processing', 'enqueue_failed')
         ORDER BY n.id
         LIMIT 1;
        -- Only a successor can have been waiting on this job; an older head was never blocked by it.
        -- Normally the next of the key is younger than the one that ended. An older one is a
        -- replayed job that waited for this younger one to finish (see jobs.claimable); any
        -- other older one was claimable, and signalled, already.
        IF (next_id > keyed.id OR EXISTS (SELECT 1 FROM jobs.event AS e
                                           WHERE e.job_id = next_id AND e.reason = 'replayed'))
           AND EXISTS (SELECT 1 FROM jobs.claimable AS c WHERE c.id = next_id) THEN
            source_id := keyed.id;
            woken_id := next_id;
            RETURN NEXT;
        END IF;
    END LOOP;
END $$;
COMMENT ON FUNCTION jobs.release_dependents(bigint[]) IS
    'Internal: after jobs ended, update fan-in counters and dependency edges (releasing or failing dependents) and find coordinators, dependents and ordering-key successors that became claimable. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.release_dependents(bigint[]) FROM PUBLIC;
COMMIT;

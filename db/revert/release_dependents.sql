-- Revert jobfence:release_dependents from pg: back to the body released in v0.1.0
BEGIN;
-- Called right after jobs reached a terminal status. Two kinds of jobs may become claimable:
-- a fan-in coordinator whose last pending child just ended, and the next job of an ordering
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
BEGIN
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
    'Internal: after jobs ended, update fan-in counters and find coordinators and ordering-key successors that became claimable. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.release_dependents(bigint[]) FROM PUBLIC;
COMMIT;

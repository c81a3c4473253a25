-- Revert jobfence:job_dependency from pg
-- The first release has no dependencies: jobs still waiting on one would wait for good, so
-- their counters lose the edges' share.
BEGIN;
UPDATE jobs.job AS j
   SET pending_children = j.pending_children - w.n
  FROM (SELECT d.job_id, count(*)::integer AS n FROM jobs.job_dependency AS d
         WHERE d.released_at IS NULL GROUP BY d.job_id) AS w
 WHERE j.id = w.job_id;
DROP TABLE jobs.job_dependency;
ALTER TABLE jobs.job DROP COLUMN has_dependents;
COMMIT;

-- Revert jobfence:jobs_producer from pg
-- Roles are cluster-wide: other databases on this cluster may still use jobs_producer,
-- and login roles may be members of it. Revert leaves it in place on purpose.
SELECT 1;  -- nothing to undo

-- Revert jobfence:edge_outcome from pg
BEGIN;
DROP FUNCTION jobs.edge_outcome(jobs.status, text);
COMMIT;

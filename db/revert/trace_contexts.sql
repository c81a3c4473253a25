-- Revert jobfence:trace_contexts from pg
BEGIN;
DROP FUNCTION jobs.trace_contexts(bigint[]);
COMMIT;

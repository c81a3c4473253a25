-- Verify jobfence:contract_text_verdicts on pg
-- Raises when a text-verdict form is still there.
SELECT 1 / (count(*) = 0)::int FROM pg_catalog.pg_proc
 WHERE oid IN (to_regprocedure('jobs.finish_lease(text, bigint, text, bigint, text, jsonb, text, uuid, interval)'),
               to_regprocedure('jobs.finish_leases(bigint[], text[], bigint[], text[], jsonb[], text[], uuid[], text, interval[])'));

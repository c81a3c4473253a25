-- Deploy jobfence:complete_many to pg
-- requires: complete_many_with_token
-- requires: verdict
BEGIN;
-- One token convention (docs/design.md, "Lease tokens"): a write to a held lease takes
-- the token as its last parameter, DEFAULT NULL. The released token-less overload goes
-- in the same transaction as the default arrives, so a call without a token always
-- resolves, by position or by name, to this one body.
DROP FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]);
CREATE OR REPLACE FUNCTION jobs.complete_many(job_ids bigint[], worker text, lease_versions bigint[], results jsonb[], tokens uuid[] DEFAULT NULL)
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := cardinality(job_ids);
BEGIN
    PERFORM jobs.check_worker('jobs.complete_many', worker);
    IF job_ids IS NULL OR lease_versions IS NULL
       OR n <> cardinality(lease_versions) OR (tokens IS NOT NULL AND cardinality(tokens) <> n)
       OR (results IS NOT NULL AND cardinality(results) <> n) THEN
        RAISE EXCEPTION 'jobs.complete_many: job_ids (%), lease_versions (%), results (%) and tokens (%) must be arrays of the same length',
            coalesce(cardinality(job_ids)::text, 'NULL'), coalesce(cardinality(lease_versions)::text, 'NULL'),
            coalesce(cardinality(results)::text, 'NULL'), coalesce(cardinality(tokens)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i], results[i], tokens[i]); results may be NULL for no results, tokens NULL for none.';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM jobs.finish_leases(job_ids, array_fill(worker, ARRAY[n]), lease_versions,
                                     array_fill('done'::jobs.verdict, ARRAY[n]),
                                     coalesce(results, array_fill(NULL::jsonb, ARRAY[n])),
                                     array_fill(NULL::text, ARRAY[n]), tokens, 'jobs.complete_many');
END $$;
COMMENT ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[], uuid[]) IS
    'Complete many jobs in one round trip. One outcome per item in input order: accepted = false (nothing written) where worker no longer holds that lease_version under the claiming session role. 22023 (nothing written) when a result exceeds 1 MiB, 22003 when one holds a number beyond the IEEE-754 double range. tokens: each lease''s token from claim_*_with_token (NULL: none; required when jobs.configure_leases requires them): the item is not accepted where tokens[i] is not that lease''s.';
REVOKE ALL ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[], uuid[]) TO jobs_worker, jobs_admin;
COMMIT;

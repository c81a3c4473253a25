-- Deploy jobfence:snooze_many to pg
-- requires: outcome
-- requires: finish_leases
-- requires: check_worker
-- requires: finish_lease
-- requires: verdict
BEGIN;
-- jobs.snooze for a batch, in one statement: the worker reports its snoozes with the rest
-- of a flush. Like complete_many, a lost lease is accepted = false, not an error.
CREATE OR REPLACE FUNCTION jobs.snooze_many(job_ids bigint[], worker text, lease_versions bigint[], delays interval[],
                                            tokens uuid[] DEFAULT NULL)
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := cardinality(job_ids);
BEGIN
    PERFORM jobs.check_worker('jobs.snooze_many', worker);
    IF job_ids IS NULL OR lease_versions IS NULL OR delays IS NULL
       OR n <> cardinality(lease_versions) OR n <> cardinality(delays)
       OR (tokens IS NOT NULL AND cardinality(tokens) <> n) THEN
        RAISE EXCEPTION 'jobs.snooze_many: job_ids (%), lease_versions (%), delays (%) and tokens (%) must be arrays of the same length',
            coalesce(cardinality(job_ids)::text, 'NULL'), coalesce(cardinality(lease_versions)::text, 'NULL'),
            coalesce(cardinality(delays)::text, 'NULL'), coalesce(cardinality(tokens)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i], delays[i], tokens[i]); tokens may be NULL for none.';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM jobs.finish_leases(job_ids, array_fill(worker, ARRAY[n]), lease_versions,
                                     array_fill('snooze'::jobs.verdict, ARRAY[n]), array_fill(NULL::jsonb, ARRAY[n]),
                                     array_fill(NULL::text, ARRAY[n]), tokens, 'jobs.snooze_many', delays);
END $$;
COMMENT ON FUNCTION jobs.snooze_many(bigint[], text, bigint[], interval[], uuid[]) IS
    'jobs.snooze for many leases in one statement: one outcome per item, accepted = false (nothing written) where the lease is not held. 22023 (nothing written) for arrays of different lengths or a delay out of range.';
REVOKE ALL ON FUNCTION jobs.snooze_many(bigint[], text, bigint[], interval[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.snooze_many(bigint[], text, bigint[], interval[], uuid[]) TO jobs_worker, jobs_admin;
COMMIT;

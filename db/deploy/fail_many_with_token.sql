-- Deploy jobfence:fail_many_with_token to pg
-- requires: outcome
-- requires: finish_leases
-- requires: check_worker
BEGIN;
-- jobs.fail_many with the lease token of each item.
CREATE OR REPLACE FUNCTION jobs.fail_many(job_ids bigint[], worker text, lease_versions bigint[],
                                          errors text[], retryable boolean[], tokens uuid[])
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := cardinality(job_ids);
    bad bigint;
BEGIN
    PERFORM jobs.check_worker('jobs.fail_many', worker);
    IF job_ids IS NULL OR lease_versions IS NULL OR errors IS NULL OR retryable IS NULL
       OR n <> cardinality(lease_versions) OR n <> cardinality(errors) OR n <> cardinality(retryable)
       OR (tokens IS NOT NULL AND cardinality(tokens) <> n) THEN
        RAISE EXCEPTION 'jobs.fail_many: job_ids (%), lease_versions (%), errors (%), retryable (%) and tokens (%) must be arrays of the same length',
            coalesce(cardinality(job_ids)::text, 'NULL'), coalesce(cardinality(lease_versions)::text, 'NULL'),
            coalesce(cardinality(errors)::text, 'NULL'), coalesce(cardinality(retryable)::text, 'NULL'),
            coalesce(cardinality(tokens)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i], errors[i], retryable[i], tokens[i]); tokens NULL for none.';
    END IF;
    SELECT e.ord - 1 INTO bad
      FROM unnest(errors, retryable) WITH ORDINALITY AS e(error, retry, ord)
     WHERE e.error IS NULL OR btrim(e.error) = '' OR e.retry IS NULL
     ORDER BY e.ord
     LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.fail_many: item % needs a non-empty error and a non-NULL retryable', bad
            USING ERRCODE = '22023', HINT = 'Items are numbered from 0; pass the exception text and true/false.';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM jobs.finish_leases(job_ids, array_fill(worker, ARRAY[n]), lease_versions,
                                     ARRAY(SELECT CASE WHEN r THEN 'retry' ELSE 'fatal' END
                                             FROM unnest(retryable) WITH ORDINALITY AS u(r, ord) ORDER BY u.ord),
                                     array_fill(NULL::jsonb, ARRAY[n]), errors, tokens, 'jobs.fail_many');
END $$;
COMMENT ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[], uuid[]) IS
    'jobs.fail_many presenting each lease''s token: accepted = false (nothing written) also where tokens[i] is not that lease''s. 22023 (nothing written) when an error exceeds 64 KiB.';
REVOKE ALL ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[], uuid[]) TO jobs_worker, jobs_admin;
COMMIT;

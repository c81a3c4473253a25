-- Deploy jobfence:contract_text_verdicts to pg
-- requires: finish_leases
-- requires: finish_lease
-- requires: complete
-- requires: complete_many
-- requires: fail
-- requires: fail_many
-- requires: snooze_many
-- requires: reap
BEGIN;
-- The contract step of the verdict type (docs/upgrading.md, "Changing a signature: expand
-- and contract"): every caller now passes jobs.verdict, so the released forms that took
-- verdicts as text, where a misspelt one became a retry, go.
DROP FUNCTION jobs.finish_lease(text, bigint, text, bigint, text, jsonb, text, uuid, interval);
DROP FUNCTION jobs.finish_leases(bigint[], text[], bigint[], text[], jsonb[], text[], uuid[], text, interval[]);
COMMIT;

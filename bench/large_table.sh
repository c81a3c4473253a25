#!/usr/bin/env bash
# Do the hot paths stay flat when jobs.job holds millions of terminal rows and a backlog of
# queued ones? Measures per-call latency of claim_next, reap (nothing expired) and
# stale_queued on an empty table and on a loaded one, in the same run, and prints the ratio
# loaded/empty (about 1 means the partial indexes keep terminal rows out of the way).
#
#   bench/large_table.sh                 # 1,000,000 done + 50,000 queued
#   TERMINAL=5000000 QUEUED=200000 bench/large_table.sh
set -euo pipefail
cd "$(dirname "$0")/.."

terminal=${TERMINAL:-1000000}
queued=${QUEUED:-50000}
calls=${CALLS:-2000}
. bench/scratch_db.sh
scratch_db jobfence_large

echo "SELECT count(*) FROM jobs.claim_next('bench', ARRAY['default'], 1);" > "$work/claim_next.sql"
echo "SELECT count(*) FROM jobs.reap(100);" > "$work/reap.sql"
echo "SELECT count(*) FROM jobs.stale_queued('default', '5 seconds', 10);" > "$work/stale_queued.sql"

latency() { # script -> average ms per call, single client
    pgbench -n -M prepared -c 1 -t "$calls" -f "$1" "$url" 2>/dev/null | awk '/^latency average/ {print $4; exit}'
}
measure() { for op in claim_next reap stale_queued; do latency "$work/$op.sql"; done; }
backlog() { # a few thousand claimable jobs, submitted through the API, untouched for a while
    psql -X -q "$url" -c "SELECT count(*) FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'bench', 'notify', false)) FROM generate_series(1, $calls + 100)))" >/dev/null
    psql -X -q "$url" -c "UPDATE jobs.job SET updated_at = now() - interval '1 minute' WHERE status = 'queued'" -c "VACUUM ANALYZE jobs.job" >/dev/null
}

backlog
read -r -a empty <<< "$(measure | tr '\n' ' ')"

echo "loading $terminal done jobs and $queued queued (not yet due) jobs..."
psql -X -q "$url" <<SQL >/dev/null
-- Bulk load straight into the table (as its owner) so the bench sets up in seconds;
-- the shape is what the functions would have written.
INSERT INTO jobs.job (kind, queue, payload, status, result, created_at, updated_at, claimed_at,
                      finished_at, owned_by, lease_version, max_retries, lease_timeout, timeout, run_after)
SELECT 'bench', 'default', jsonb_build_object('n', g), 'done', '{"ok": true}', now() - interval '2 days',
       now() - interval '1 day', now() - interval '1 day', now() - interval '1 day', 'w', 1, 3, '15 s', '30 s',
       now() - interval '2 days'
  FROM generate_series(1, $terminal) AS g;
INSERT INTO jobs.job (kind, queue, payload, max_retries, lease_timeout, timeout, run_after)
SELECT 'bench', 'default', jsonb_build_object('n', g), 3, '15 s', '30 s', now() + interval '1 day'
  FROM generate_series(1, $queued) AS g;
VACUUM ANALYZE jobs.job;
SQL
backlog
read -r -a loaded <<< "$(measure | tr '\n' ' ')"

printf '%-14s %12s %12s %8s\n' "call" "empty ms" "loaded ms" "ratio"
i=0
for op in claim_next reap stale_queued; do
    printf '%-14s %12s %12s %8s\n' "$op" "${empty[$i]}" "${loaded[$i]}" \
        "$(awk -v a="${loaded[$i]}" -v b="${empty[$i]}" 'BEGIN {printf "%.2f", a / b}')"
    i=$((i + 1))
done
echo "table: $(psql -X -qAt "$url" -c "SELECT status || ' ' || count(*) FROM jobs.job GROUP BY status ORDER BY 1" | tr '\n' ' ')"

#!/usr/bin/env bash
# Throughput of the jobs.* hot path against a baseline measured in the same run: the bare
# statements a hand-rolled queue would run on a plain table of the same shape (no fencing,
# no events, no validation). Prints transactions per second and the ratio jobfence/baseline.
#
#   bench/sql_throughput.sh            # defaults: 4 clients, 5000 transactions each
#   CLIENTS=8 TXNS=20000 bench/sql_throughput.sh
#
# Uses a scratch database on JOBFENCE_BENCH_SERVER (default postgresql://root@127.0.0.1:5432)
# and drops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-4}
txns=${TXNS:-5000}
. bench/scratch_db.sh
scratch_db jobfence_bench
total=$((clients * txns))

psql -X -q "$url" <<SQL
-- Baseline: the same columns a job row has, the same claim index, nothing else.
CREATE TABLE plain_job (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL, queue text NOT NULL,
    payload jsonb NOT NULL, status text NOT NULL DEFAULT 'queued', result jsonb, owned_by text,
    lease_version bigint NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), claimed_at timestamptz, finished_at timestamptz,
    run_after timestamptz NOT NULL DEFAULT now());
CREATE INDEX plain_job_queued_idx ON plain_job (queue, run_after, id) WHERE status = 'queued';
SQL

cat > "$work/submit_jobfence.sql" <<'SQL'
SELECT id FROM jobs.submit('bench', '{"invoice_id": 42}', notify => false);
SQL
cat > "$work/submit_plain.sql" <<'SQL'
INSERT INTO plain_job (kind, queue, payload) VALUES ('bench', 'default', '{"invoice_id": 42}') RETURNING id;
SQL
cat > "$work/cycle_jobfence.sql" <<'SQL'
SELECT job_id, lease_version FROM jobs.claim_next('bench-' || :client_id, ARRAY['default'], 1) \gset
SELECT accepted FROM jobs.complete(:job_id, 'bench-' || :client_id, :lease_version, '{"ok": true}');
SQL
cat > "$work/cycle_plain.sql" <<'SQL'
UPDATE plain_job SET status = 'processing', owned_by = 'bench-' || :client_id, lease_version = lease_version + 1,
       claimed_at = now(), updated_at = now()
 WHERE id = (SELECT id FROM plain_job WHERE queue = 'default' AND status = 'queued' AND run_after <= now()
              ORDER BY run_after, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id AS job_id, lease_version \gset
UPDATE plain_job SET status = 'done', result = '{"ok": true}', finished_at = now(), updated_at = now()
 WHERE id = :job_id AND owned_by = 'bench-' || :client_id AND lease_version = :lease_version;
SQL

tps() { # script -> transactions per second (excluding connection time)
    pgbench -n -M prepared -c "$clients" -j "$clients" -t "$txns" -f "$1" "$url" 2>/dev/null \
        | awk '/^tps = / {print $3; exit}'
}
row() { printf '%-34s %12s %12s %8s\n' "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "jobfence SQL throughput: $clients clients x $txns transactions ($(psql -X -qAt "$url" -c 'SHOW server_version'))"
row "operation" "jobfence/s" "baseline/s" "ratio"
s_j=$(tps "$work/submit_jobfence.sql"); s_p=$(tps "$work/submit_plain.sql")
row "submit (1 job per transaction)" "$s_j" "$s_p" "$(ratio "$s_j" "$s_p")"
# Both queues now hold $total queued jobs: the claim+complete cycle drains exactly those.
c_j=$(tps "$work/cycle_jobfence.sql"); c_p=$(tps "$work/cycle_plain.sql")
row "claim_next + complete (1 job)" "$c_j" "$c_p" "$(ratio "$c_j" "$c_p")"
left=$(psql -X -qAt "$url" -c "SELECT count(*) FROM jobs.job WHERE status <> 'done'")
echo "jobs not done after the cycle: $left (expected 0); events written: $(psql -X -qAt "$url" -c 'SELECT count(*) FROM jobs.event')"

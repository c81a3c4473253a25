#!/usr/bin/env bash
# History at scale: jobs.event partitioned by day (the working tree) against one unpartitioned
# table, in the same run, on the same generated data. The unpartitioned database runs the same
# plan but for jobs.event (the same table without its partitions) and jobs.prune (the version
# of the last commit, which deletes each pruned job's events row by row), so the figures differ
# by the partitioning alone.
# Both scratch databases get JOBS done jobs spread over DAYS past days, two events each
# (claimed, completed, as release 0.1 wrote them and as a completion by another role than the
# claimant's still does; the job row records the submission), bulk-loaded as the owner. Then, in each:
#   - table and index bytes of jobs.job and jobs.event (all partitions);
#   - per-statement latency of submit_many / claim_many / complete_many of 100 (pgbench -r),
#     and of jobs.events(job_id) for random ids; HOT updates of jobs.job during that run;
#   - retention of the oldest day: jobs.prune in slices of 5000 until caught up (what the
#     reaper does), plus jobs.drop_event_partitions where there are partitions; the time, WAL
#     bytes, dead tuples left for vacuum (n_dead_tup), and how long a VACUUM of them takes.
#
#   bench/partitions.sh                    # 10,000,000 jobs over 10 days
#   JOBS=2000000 DAYS=10 bench/partitions.sh
# Autovacuum is off on the bench tables, so n_dead_tup is what pruning left, not what a
# concurrent autovacuum happened to have cleaned yet.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${JOBS:-10000000}
days=${DAYS:-10}
calls=${CALLS:-300}
server=${JOBFENCE_BENCH_SERVER:-postgresql://root@127.0.0.1:5432}
work=$(mktemp -d)
part_db="jobfence_part_$$"
flat_db="jobfence_flat_$$"
trap 'for d in $part_db $flat_db; do psql -X -q "$server/postgres" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done; rm -rf "$work"' EXIT
log() { echo "$(date -u +%H:%M:%S) $*" >&2; }

# The unpartitioned design: this tree's plan without the partitions and their two functions.
mkdir "$work/flat"
cp -r sqitch.conf db "$work/flat/"
grep -v -E '^(create|drop)_event_partitions ' sqitch.plan > "$work/flat/sqitch.plan"
sed -e 's/^) PARTITION BY RANGE (at);$/);/' -e '/^-- Catches what no day partition covers/,/^CREATE INDEX event_default_at_idx/d' \
    db/deploy/event.sql > "$work/flat/db/deploy/event.sql"
git show HEAD:db/deploy/prune.sql > "$work/flat/db/deploy/prune.sql"
git show HEAD:db/verify/event.sql > "$work/flat/db/verify/event.sql"
for d in $part_db $flat_db; do psql -X -q "$server/postgres" -c "CREATE DATABASE $d"; done
sqitch --quiet deploy "db:pg://${server#*://}/$part_db" >/dev/null
(cd "$work/flat" && sqitch --quiet deploy "db:pg://${server#*://}/$flat_db" >/dev/null)

load() { # url: DAYS days of JOBS done jobs, the oldest first, with their events
    local url=$1 per_day=$((jobs / days)) d
    psql -X -q "$url" -c "SELECT jobs.define_type('bench')" >/dev/null
    # Day partitions for the past days, as the reaper would have created them day by day.
    psql -X -q "$url" <<SQL
DO \$\$
DECLARE lo timestamptz;
BEGIN
    IF to_regclass('jobs.event_default') IS NULL THEN RETURN; END IF;
    FOR d IN 1..$days LOOP
        lo := date_trunc('day', now(), 'UTC') - make_interval(hours => 24 * d);
        EXECUTE format('CREATE TABLE IF NOT EXISTS jobs.%I PARTITION OF jobs.event FOR VALUES FROM (%L) TO (%L)',
                       'event_' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'), lo, lo + interval '24 hours');
    END LOOP;
END \$\$;
SQL
    psql -X -q "$url" -c "ALTER TABLE jobs.job SET (autovacuum_enabled = false)"
    psql -X -qAt "$url" -c "SELECT c.oid::regclass FROM pg_class c WHERE c.oid = 'jobs.event'::regclass AND c.relkind = 'r'
                            UNION ALL SELECT relid::regclass FROM pg_partition_tree('jobs.event') WHERE isleaf" |
        while read -r rel; do psql -X -q "$url" -c "ALTER TABLE $rel SET (autovacuum_enabled = false)"; done
    for d in $(seq "$days" -1 1); do
        psql -X -q "$url" <<SQL
-- One day's jobs, created through the day (UTC), each finished two seconds later.
INSERT INTO jobs.job (kind, queue, payload, status, result, created_at, updated_at, claimed_at,
                      finished_at, owned_by, lease_version, max_retries, lease_timeout, timeout, run_after)
SELECT 'bench', 'default', jsonb_build_object('n', g), 'done', '{"ok": true}', t, t + interval '2 s',
       t + interval '1 s', t + interval '2 s', 'w', 1, 3, '15 s', '30 s', t
  FROM generate_series(1, $per_day) AS g,
       LATERAL (SELECT date_trunc('day', now(), 'UTC') - make_interval(days => $d)
                       + make_interval(secs => (g::float8 / $per_day) * 86390) AS t) AS x;
INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason)
SELECT j.id, j.created_at + e.dt, e.f::jobs.status, e.t::jobs.status, e.v, e.w, e.r
  FROM jobs.job AS j
  CROSS JOIN (VALUES ('queued', 'processing', 1, 'w', 'claimed', interval '1 s'),
                     ('processing', 'done', 1, 'w', 'completed', interval '2 s')) AS e(f, t, v, w, r, dt)
 WHERE j.id > (SELECT coalesce(max(job_id), 0) FROM jobs.event);
SQL
        log "  $url: day -$d loaded"
    done
    psql -X -q "$url" -c "VACUUM ANALYZE jobs.job" -c "VACUUM ANALYZE jobs.event" -c "CHECKPOINT"
}

# jobs.event and its partitions (pg_partition_tree names no table that is not partitioned).
event_tables="(SELECT 'jobs.event'::regclass AS relid UNION SELECT relid FROM pg_partition_tree('jobs.event'))"

sizes() { # url -> job_heap job_idx event_heap event_idx (bytes)
    psql -X -qAt -F ' ' "$1" -c "
SELECT pg_relation_size('jobs.job'), pg_indexes_size('jobs.job'),
       (SELECT sum(pg_relation_size(relid)) FROM $event_tables AS t),
       (SELECT sum(pg_indexes_size(relid)) FROM $event_tables AS t)"
}

path_latency() { # url -> ms per submit_many, claim_many, complete_many of 100; events(id); hot%
    local url=$1
    cat > "$work/path.sql" <<'SQL'
SELECT min(id) AS lo, max(id) AS hi FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'bench', 'notify', false)) FROM generate_series(1, 100))) \gset
SELECT count(*) FROM jobs.claim_many(ARRAY(SELECT generate_series(:lo::bigint, :hi::bigint)), 'w');
SELECT count(*) FROM jobs.complete_many(ARRAY(SELECT generate_series(:lo::bigint, :hi::bigint)), 'w', array_fill(1::bigint, ARRAY[100]), NULL);
SQL
    printf '\\set id random(1, %s)\nSELECT count(*) FROM jobs.events(:id);\n' "$jobs" > "$work/events.sql"
    psql -X -q "$url" -c "SELECT pg_stat_reset_single_table_counters('jobs.job'::regclass)" >/dev/null
    pgbench -n -r -c 1 -t "$calls" -f "$work/path.sql" "$url" 2>/dev/null |
        awk '/jobs.submit_many/ {s=$1} /jobs.claim_many/ {c=$1} /jobs.complete_many/ {f=$1} END {printf "%s %s %s ", s, c, f}'
    pgbench -n -M prepared -c 1 -t "$((calls * 10))" -f "$work/events.sql" "$url" 2>/dev/null |
        awk '/^latency average/ {printf "%s ", $4}'
    sleep 1   # the statistics of the pgbench sessions reach pg_stat_user_tables when they end
    psql -X -qAt "$url" -c "SELECT round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0), 1) FROM pg_stat_user_tables WHERE relid = 'jobs.job'::regclass"
}

prune_day() { # url -> seconds_prune seconds_drop jobs_pruned partitions_dropped wal_bytes dead_job dead_event vacuum_s
    local url=$1
    psql -X -qAt -F ' ' -v days="$days" "$url" <<'SQL'
\set QUIET on
CREATE TEMP TABLE r AS SELECT pg_current_wal_lsn() AS lsn, clock_timestamp() AS t0,
       -- the oldest day's jobs finished before the start of the next day
       now() - (date_trunc('day', now(), 'UTC') - make_interval(days => :days - 1)) AS older_than,
       0::bigint AS pruned, 0 AS dropped, NULL::timestamptz AS t1, NULL::timestamptz AS t2;
DO $$
DECLARE n bigint; total bigint := 0; age interval := (SELECT older_than FROM r);
BEGIN
    LOOP
        n := jobs.prune(age, 5000);
        total := total + n;
        COMMIT;
        EXIT WHEN n < 5000;
    END LOOP;
    UPDATE r SET pruned = total, t1 = clock_timestamp();
    COMMIT;
    IF to_regprocedure('jobs.drop_event_partitions(interval)') IS NOT NULL THEN
        UPDATE r SET dropped = jobs.drop_event_partitions(age);
    END IF;
    UPDATE r SET t2 = clock_timestamp();
END $$;
SELECT round(extract(epoch FROM t1 - t0)::numeric, 2), round(extract(epoch FROM t2 - t1)::numeric, 3), pruned, dropped,
       pg_wal_lsn_diff(pg_current_wal_lsn(), lsn) FROM r;
SQL
    sleep 1
    psql -X -qAt -F ' ' "$url" -c "
SELECT (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobs.job'::regclass),
       (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM $event_tables AS t))"
    local t0 t1
    t0=$(date +%s.%N)
    psql -X -q "$url" -c "VACUUM jobs.event"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", b - a}'
}

declare -A out
for kind in flat part; do
    db_var="${kind}_db"
    url="$server/${!db_var}"
    log "$kind: loading $jobs jobs over $days days..."
    load "$url"
    out[$kind.sizes]=$(sizes "$url")
done
# The hot path in turns, twice each, the faster run kept: the machine is shared.
for round in 1 2; do
    for kind in flat part; do
        db_var="${kind}_db"
        log "$kind: hot path and jobs.events (round $round)..."
        run=$(path_latency "$server/${!db_var}")
        prev=${out[$kind.path]:-}
        out[$kind.path]=$(awk -v a="$prev" -v b="$run" 'BEGIN {
            n = split(b, y, " "); if (a == "") { print b; exit }
            split(a, x, " "); line = ""
            for (i = 1; i <= n; i++) { v = (i < n && x[i] + 0 < y[i] + 0) ? x[i] : y[i]; line = line v " " }
            print line }')
    done
done
for kind in flat part; do
    db_var="${kind}_db"
    url="$server/${!db_var}"
    log "$kind: pruning the oldest day..."
    out[$kind.prune]=$(prune_day "$url" | tr '\n' ' ')
    out[$kind.after]=$(sizes "$url")
done
psql -X -q "$server/$part_db" -c "EXPLAIN (COSTS OFF) SELECT * FROM jobs.event WHERE job_id = 12345 ORDER BY id" > "$work/plan.txt"

mib() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1048576}'; }
echo "jobs: $jobs done over $days days ($((jobs / days)) a day), 3 events each"
printf '%-40s %14s %14s\n' "" "unpartitioned" "partitioned"
row() { printf '%-40s %14s %14s\n' "$1" "$2" "$3"; }
read -r fjh fji feh fei <<< "${out[flat.sizes]}"; read -r pjh pji peh pei <<< "${out[part.sizes]}"
row "jobs.job heap / indexes MiB" "$(mib "$fjh") / $(mib "$fji")" "$(mib "$pjh") / $(mib "$pji")"
row "jobs.event heap / indexes MiB" "$(mib "$feh") / $(mib "$fei")" "$(mib "$peh") / $(mib "$pei")"
read -r fs fc ff fe fh <<< "${out[flat.path]}"; read -r ps pc pf pe ph <<< "${out[part.path]}"
row "submit_many of 100, ms" "$fs" "$ps"
row "claim_many of 100, ms" "$fc" "$pc"
row "complete_many of 100, ms" "$ff" "$pf"
row "jobs.events(job_id), ms" "$fe" "$pe"
row "jobs.job HOT updates, % of updates" "$fh" "$ph"
read -r fpt fdt fpn fdn fwal fdj fde fvac <<< "${out[flat.prune]}"; read -r ppt pdt ppn pdn pwal pdj pde pvac <<< "${out[part.prune]}"
row "prune the oldest day: jobs" "$fpn" "$ppn"
row "  jobs.prune slices, s" "$fpt" "$ppt"
row "  drop_event_partitions, s" "-" "$pdt ($pdn dropped)"
row "  WAL MiB" "$(mib "$fwal")" "$(mib "$pwal")"
row "  n_dead_tup jobs.job / jobs.event" "$fdj / $fde" "$pdj / $pde"
row "  VACUUM jobs.event afterwards, s" "$fvac" "$pvac"
read -r _ _ feh2 fei2 <<< "${out[flat.after]}"; read -r _ _ peh2 pei2 <<< "${out[part.after]}"
row "jobs.event after, heap / indexes MiB" "$(mib "$feh2") / $(mib "$fei2")" "$(mib "$peh2") / $(mib "$pei2")"
echo "plan of a history read (partitioned):"
sed 's/^/  /' "$work/plan.txt"

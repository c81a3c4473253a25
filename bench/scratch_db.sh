# Sourced by the bench scripts: a scratch database with the plan deployed, dropped (with the
# work directory) when the script exits. Sets server, db, url and work.
# Argument: a name prefix, e.g. scratch_db jobfence_bench
scratch_db() {
    server=${JOBFENCE_BENCH_SERVER:-postgresql://root@127.0.0.1:5432}
    db="$1_$$"
    work=$(mktemp -d)
    trap 'psql -X -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; rm -rf "$work"' EXIT
    psql -X -q "$server/postgres" -c "CREATE DATABASE $db"
    sqitch --quiet deploy "db:pg://${server#*://}/$db" >/dev/null
    url="$server/$db"
    psql -X -q "$url" -c "SELECT jobs.define_type('bench')" >/dev/null
}

"""The README's psql tour runs as written in a database that other jobs have used."""

from __future__ import annotations

import re
import subprocess

import psycopg

from conftest import REPO


def _tour_sql() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## A psql tour"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def test_the_psql_tour_runs_after_other_jobs_took_the_first_ids(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("SELECT jobs.define_type('noop')")
        # What scripts/run leaves behind: the first ids are taken.
        conn.execute("SELECT count(*) FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'noop'))"
                     " FROM generate_series(1, 5)))")
    ran = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", clean_db], input=_tour_sql(),
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    with psycopg.connect(clean_db, autocommit=True) as conn:
        (job_id, status), = conn.execute(
            "SELECT id, status FROM jobs.job WHERE idempotency_key = 'invoice:42'").fetchall()
        assert job_id > 5 and status == "done"
        reasons = [r[0] for r in conn.execute("SELECT reason FROM jobs.events(%s)", (job_id,))]
        assert reasons == ["submitted", "claimed", "completed"]

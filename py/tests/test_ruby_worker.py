"""Workers in another language, tested (examples/ruby): a Ruby worker and producer on the SQL
contract and the Redis keys alone (Debian's ruby-pg and ruby-redis), against this session's
fresh database and its own Redis database: 500 jobs done once each, a stale completion refused
with JB001, a killed worker's job reaped and finished by another."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import REPO

RUBY = REPO / "examples" / "ruby"


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby not installed (scripts/setup --test)")
def test_the_ruby_worker_passes_its_tests(clean_db, redis_url):
    done = subprocess.run(["ruby", "test/worker_test.rb"], cwd=RUBY, capture_output=True,
                          text=True, timeout=240,
                          env=dict(os.environ, JOBFENCE_DATABASE_URL=clean_db,
                                   JOBFENCE_REDIS_URL=redis_url))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 runs" in done.stdout and " 0 failures, 0 errors, 0 skips" in done.stdout, done.stdout

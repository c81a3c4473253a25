"""Workers in another language, tested (examples/node): `npm test` there runs a Node worker
and producer on the SQL contract and the Redis keys alone, against this session's fresh
database and its own Redis database: 500 jobs done once each, a stale completion refused with
JB001, a crashed worker's job reaped and finished by another."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import REPO

NODE = REPO / "examples" / "node"


@pytest.mark.skipif(shutil.which("npm") is None, reason="node and npm not installed (scripts/setup)")
def test_the_node_worker_passes_its_tests(clean_db, redis_url):
    if not (NODE / "node_modules").is_dir():
        installed = subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund"], cwd=NODE,
                                   capture_output=True, text=True, timeout=300)
        assert installed.returncode == 0, installed.stdout + installed.stderr
    done = subprocess.run(["npm", "test", "--silent"], cwd=NODE, capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, JOBFENCE_DATABASE_URL=clean_db,
                                                JOBFENCE_REDIS_URL=redis_url))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# pass 3" in done.stdout, done.stdout[-2000:]

"""Shared fixtures: a fresh PostgreSQL database per test session (deployed with sqitch)
and a dedicated Redis database, both real servers, both cleaned up afterwards."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis as redis_lib

REPO = Path(__file__).resolve().parents[2]
ADMIN_URL = os.environ.get("JOBFENCE_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("JOBFENCE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def _server_url(admin_url: str) -> str:
    return admin_url.rsplit("/", 1)[0]


@pytest.fixture(scope="session")
def database_url():
    """A database created for this session, with the sqitch plan deployed and verified."""
    name = f"jobfence_py_{int(time.time())}_{uuid.uuid4().hex[:8]}"
    url = f"{_server_url(ADMIN_URL)}/{name}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        subprocess.run(
            ["sqitch", "deploy", "--verify", "-q", f"db:{url}"],
            cwd=REPO, check=True, capture_output=True, text=True,
        )
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clean_db(database_url):
    """Empty job tables before each test; returns the database URL."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs.event, jobs.job, jobs.job_type RESTART IDENTITY CASCADE")
    return database_url


@pytest.fixture
def conn(clean_db):
    """An autocommit connection to the clean test database."""
    with psycopg.connect(clean_db, autocommit=True) as c:
        yield c


@pytest.fixture
def redis_url():
    """A dedicated Redis database, flushed before and after each test."""
    client = redis_lib.Redis.from_url(REDIS_URL)
    client.flushdb()
    try:
        yield REDIS_URL
    finally:
        client.flushdb()
        client.close()

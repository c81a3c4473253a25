"""What docs/design.md says about the schema is what the catalog holds: the internal
helpers it lists are exactly the functions of schema jobs granted to no role (as the
error-code test holds docs/errors.md to the registry)."""

from __future__ import annotations

import fnmatch
import re

import psycopg

from conftest import REPO

# Granted to no role: EXECUTE for nobody but the owner.
INTERNAL = """
SELECT DISTINCT p.proname::text
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'jobs'::regnamespace
   AND NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a
                    WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner)
"""


def documented_internal_helpers() -> list[str]:
    text = (REPO / "docs" / "design.md").read_text()
    m = re.search(r"^Internal helpers \((.*?)\) are granted to no role", text, re.M | re.S)
    assert m, "docs/design.md has no 'Internal helpers (...) are granted to no role' sentence"
    return re.findall(r"`([a-z_*]+)`", m.group(1))


def test_the_internal_helpers_of_docs_design_md_are_the_ungranted_functions(database_url):
    with psycopg.connect(database_url) as conn:
        ungranted = {row[0] for row in conn.execute(INTERNAL)}
    patterns = documented_internal_helpers()
    covered = {name for name in ungranted if any(fnmatch.fnmatchcase(name, p) for p in patterns)}
    assert covered == ungranted, f"granted to no role but not listed: {sorted(ungranted - covered)}"
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in ungranted)]
    assert not unmatched, f"listed as internal but granted to a role, or gone: {unmatched}"


def test_the_sql_language_exceptions_of_docs_decisions_md_are_the_catalogs(database_url):
    text = (REPO / "docs" / "decisions.md").read_text()
    m = re.search(r"The exceptions are \w+ small\s+read-only or arithmetic functions \((.*?)\)",
                  text, re.S)
    assert m, "docs/decisions.md no longer names the functions written in SQL"
    documented = set(re.findall(r"`([a-z_]+)`", m.group(1)))
    with psycopg.connect(database_url) as conn:
        in_sql = {row[0] for row in conn.execute(
            "SELECT p.proname::text FROM pg_catalog.pg_proc AS p JOIN pg_catalog.pg_language AS l "
            "ON l.oid = p.prolang WHERE p.pronamespace = 'jobs'::regnamespace AND l.lanname = 'sql'")}
    assert documented == in_sql, (sorted(documented - in_sql), sorted(in_sql - documented))

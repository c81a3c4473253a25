"""What a deployed jobs schema is, read from the catalog: two databases whose rows are equal
hold the same schema, however it got there (sqitch, one psql script, an upgrade)."""

from __future__ import annotations

import psycopg

# What a deployed schema is, as the catalog says: objects, signatures, bodies, settings,
# grants, columns, constraints, indexes and types of the jobs schema.
CATALOG = """
SELECT 'function', p.oid::regprocedure::text,
       concat_ws(' | ', pg_get_function_result(p.oid), p.prosecdef, p.provolatile, p.proconfig::text,
                 md5(p.prosrc), p.proacl::text, obj_description(p.oid, 'pg_proc') IS NOT NULL)
  FROM pg_proc AS p WHERE p.pronamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'relation', c.relname, concat_ws(' | ', c.relkind, c.relacl::text)
  FROM pg_class AS c WHERE c.relnamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       concat_ws(' | ', format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
  FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = 'jobs'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'index', indexrelid::regclass::text, pg_get_indexdef(indexrelid)
  FROM pg_index WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'jobs'::regnamespace)
UNION ALL
SELECT 'type', t.typname, concat_ws(' | ', t.typtype, t.typacl::text)
  FROM pg_type AS t WHERE t.typnamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'enum', t.typname, string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
  FROM pg_type AS t JOIN pg_enum AS e ON e.enumtypid = t.oid
 WHERE t.typnamespace = 'jobs'::regnamespace GROUP BY t.typname
UNION ALL
SELECT 'schema', n.nspname, concat_ws(' | ', n.nspacl::text, pg_get_userbyid(n.nspowner) IS NOT NULL)
  FROM pg_namespace AS n WHERE n.nspname = 'jobs'
ORDER BY 1, 2
"""


def catalog(url: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(CATALOG).fetchall()

-- pgTAP tests for the lease token's form (docs/security.md, "Lease tokens"): the first 128
-- bits of SHA-256 over the key block of jobs.lease_policy and the fence (job id and
-- lease_version, 8 bytes each, big-endian), as a uuid; and the writes' check (finish_leases
-- and extend_leases, each with the same rule), which also accepts the HMAC-SHA256 form that
-- releases up to 0.1 handed out, so a lease claimed before an upgrade ends and beats
-- normally. Nothing else about the token may change: one per lease, never stored, checked
-- only where given unless required (lease_binding.sql).
BEGIN;
SELECT plan(18);
\ir helpers/lease_helpers.psql

CREATE ROLE lt_worker LOGIN;
GRANT jobs_worker TO lt_worker;
GRANT ALL ON ids, snap TO PUBLIC;
-- The two forms, computed here from the key (this test runs as the owner, which may read it).
CREATE FUNCTION pg_temp.single(bigint, bigint) RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT encode(substring(sha256(p.token_key_outer || int8send($1) || int8send($2)) FROM 1 FOR 16), 'hex')::uuid
      FROM jobs.lease_policy AS p $$;
CREATE FUNCTION pg_temp.hmac(bigint, bigint) RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT encode(substring(sha256(p.token_key_outer || sha256(p.token_key_inner || int8send($1) || int8send($2)))
                            FROM 1 FOR 16), 'hex')::uuid
      FROM jobs.lease_policy AS p $$;
-- The outer block from the inner one: the key is the inner block XOR 0x36 (RFC 2104's ipad),
-- the outer block that key XOR 0x5c (opad). Equal to the stored one: pg_temp.hmac above is
-- HMAC-SHA256 under that key, the form releases up to 0.1 handed out.
CREATE FUNCTION pg_temp.outer_from_inner() RETURNS bytea LANGUAGE plpgsql STABLE AS $$
DECLARE
    inner_key bytea := (SELECT p.token_key_inner FROM jobs.lease_policy AS p);
    outer_key bytea := inner_key;
BEGIN
    FOR i IN 0 .. 63 LOOP
        outer_key := set_byte(outer_key, i, get_byte(inner_key, i) # 54 # 92);
    END LOOP;
    RETURN outer_key;
END $$;

SELECT jobs.define_type('lt.t', max_retries => 3);
SELECT pg_temp.job(n, 'lt.t') FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e']) AS n;
-- Both forms of every job's first two leases, for the worker role, which cannot read the key.
CREATE TEMP TABLE forms AS
SELECT i.name, v.v AS lease_version, pg_temp.single(i.id, v.v) AS single, pg_temp.hmac(i.id, v.v) AS hmac
  FROM ids AS i CROSS JOIN (VALUES (1::bigint), (2)) AS v(v);
GRANT SELECT ON forms TO PUBLIC;
CREATE FUNCTION pg_temp.s(text, bigint DEFAULT 1) RETURNS uuid LANGUAGE sql STABLE
    AS $$ SELECT f.single FROM forms AS f WHERE f.name = $1 AND f.lease_version = $2 $$;
CREATE FUNCTION pg_temp.h(text, bigint DEFAULT 1) RETURNS uuid LANGUAGE sql STABLE
    AS $$ SELECT f.hmac FROM forms AS f WHERE f.name = $1 AND f.lease_version = $2 $$;

SELECT is((SELECT p.token_key_outer FROM jobs.lease_policy AS p), pg_temp.outer_from_inner(),
          'key: the two stored blocks are one key XORed with the two pads');

SET SESSION AUTHORIZATION lt_worker;
CREATE TEMP TABLE granted AS
SELECT g.job_id, g.lease_version, g.token
  FROM jobs.claim_many_with_token(ARRAY[pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('c'), pg_temp.id('d')], 'host:1') AS g;
RESET SESSION AUTHORIZATION;

SELECT is((SELECT count(*) FROM granted), 4::bigint, 'claims: four leases granted');
SELECT is_empty($$ SELECT 1 FROM granted AS g WHERE g.token IS DISTINCT FROM pg_temp.single(g.job_id, g.lease_version) $$,
                'form: every token is the first 128 bits of SHA-256(key block || job id || lease_version)');
SELECT isnt((SELECT pg_temp.single(g.job_id, g.lease_version) FROM granted AS g WHERE g.job_id = pg_temp.id('a')),
            (SELECT pg_temp.hmac(g.job_id, g.lease_version) FROM granted AS g WHERE g.job_id = pg_temp.id('a')),
            'form: the single hash is not the HMAC form');
SELECT is((SELECT g.token FROM jobs.claim_with_token(pg_temp.id('e'), 'host:1') AS g),
          pg_temp.s('e', 1), 'form: claim_with_token hands out the same form');
-- claim_many_with_token and finish_leases compute the form in their own queries, per item:
-- held here to jobs.lease_tokens', the one the single claims and the heartbeats use.
SELECT is(ARRAY(SELECT g.token FROM granted AS g ORDER BY g.job_id),
          jobs.lease_tokens(ARRAY(SELECT g.job_id FROM granted AS g ORDER BY g.job_id),
                            ARRAY(SELECT g.lease_version FROM granted AS g ORDER BY g.job_id)),
          'form: claim_many_with_token hands out jobs.lease_tokens'' tokens');
SELECT is(jobs.lease_tokens(ARRAY[pg_temp.id('e')], ARRAY[1::bigint]), ARRAY[pg_temp.s('e', 1)],
          'form: jobs.lease_tokens is the same form');
SELECT is(jobs.lease_tokens(ARRAY[pg_temp.id('a'), NULL, pg_temp.id('b')], ARRAY[1, 1, NULL]::bigint[]),
          ARRAY[pg_temp.s('a', 1), NULL, NULL],
          'lease_tokens: in input order, NULL where the fence is incomplete');

-- A lease claimed before the upgrade presents the HMAC form: every write still holds it.
SET SESSION AUTHORIZATION lt_worker;
SELECT is((jobs.heartbeat(pg_temp.id('a'), 'host:1', 1, pg_temp.h('a', 1))).alive, true,
          'upgrade: heartbeat with the HMAC form of the lease''s token');
SELECT is(ARRAY(SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('a'), pg_temp.id('b')], 'host:1', ARRAY[1, 1]::bigint[],
                                                     ARRAY[pg_temp.h('a', 1), pg_temp.s('b', 1)])),
          ARRAY[true, true], 'upgrade: heartbeat_many with one token of each form');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('b')], 'host:1', ARRAY[1::bigint], ARRAY[pg_temp.h('b', 2)])),
          false, 'upgrade: the HMAC form of another lease_version -> held = false');
SELECT is((jobs.complete(pg_temp.id('a'), 'host:1', 1, '{"ok": 1}', pg_temp.h('a', 1))).accepted, true,
          'upgrade: complete with the HMAC form');
SELECT is(ARRAY(SELECT accepted FROM jobs.complete_many(ARRAY[pg_temp.id('b'), pg_temp.id('c')], 'host:1', ARRAY[1, 1]::bigint[], NULL,
                                                        ARRAY[pg_temp.h('b', 1), pg_temp.s('c', 1)])),
          ARRAY[true, true], 'upgrade: complete_many with one token of each form');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.snap(pg_temp.id('d'));
SET SESSION AUTHORIZATION lt_worker;
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('d'), 'host:1', 1, 'x', true, pg_temp.h('c', 1)) $$, 'JB001', NULL,
                 'upgrade: the HMAC form of another lease''s token -> JB001');
SELECT is((SELECT accepted FROM jobs.fail_many(ARRAY[pg_temp.id('d')], 'host:1', ARRAY[1::bigint], ARRAY['x'], ARRAY[true],
                                               ARRAY[pg_temp.s('d', 2)])),
          false, 'check: the token of the next lease_version -> accepted = false');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'check: the refused writes changed nothing');
SELECT is((SELECT status::text FROM jobs.job WHERE id = pg_temp.id('a')), 'done', 'upgrade: the job of the old token is done');

SET SESSION AUTHORIZATION lt_worker;
SELECT throws_ok($$ SELECT jobs.lease_tokens(ARRAY[1::bigint], ARRAY[1::bigint]) $$, '42501', NULL,
                 'form: a worker cannot compute tokens itself');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;

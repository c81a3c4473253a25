// Run by py/tests/test_node_worker.py against a fresh, deployed database and its own Redis
// database (JOBFENCE_DATABASE_URL, JOBFENCE_REDIS_URL): `npm test` in examples/node.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { connect, submitMany, work } = require('../jobfence');

const DB = process.env.JOBFENCE_DATABASE_URL;
const REDIS = process.env.JOBFENCE_REDIS_URL;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what, predicate, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function status(conn, id) {
  const { rows } = await conn.pg.query('SELECT status, lease_version FROM jobs.get($1)', [id]);
  return rows[0];
}

test('500 jobs submitted from Node are done by the Node worker, each once', async () => {
  const conn = await connect(DB, REDIS);
  try {
    await conn.pg.query("SELECT jobs.define_type('node.add')");
    const ids = await submitMany(conn, Array.from({ length: 500 }, (_, n) => ({ kind: 'node.add', payload: { a: n, b: 1 } })));
    let done = false;
    const working = work(conn, { name: 'node-w1', handlers: { 'node.add': async (p) => ({ sum: p.a + p.b }) }, stop: () => done });
    await until('500 jobs done', async () => {
      const { rows } = await conn.pg.query(
        "SELECT count(*)::int AS n FROM unnest($1::bigint[]) AS i CROSS JOIN LATERAL jobs.get(i) AS j WHERE j.status = 'done'", [ids]);
      return rows[0].n === 500;
    });
    done = true;
    await working;
    const { rows } = await conn.pg.query(
      "SELECT count(*)::int AS n FROM unnest($1::bigint[]) AS i CROSS JOIN LATERAL jobs.events(i) AS e WHERE e.reason = 'completed'", [ids]);
    assert.strictEqual(rows[0].n, 500, 'one accepted completion per job');
    const { rows: [one] } = await conn.pg.query('SELECT result FROM jobs.get($1)', [ids[41]]);
    assert.deepStrictEqual(one.result, { sum: 42 });
  } finally {
    await conn.close();
  }
});

test('a stale completion is refused with JB001 after the reaper took the lease', async () => {
  const conn = await connect(DB, REDIS);
  try {
    await conn.pg.query("SELECT jobs.define_type('node.stale', lease_timeout => '1 second')");
    const [id] = await submitMany(conn, [{ kind: 'node.stale' }]);
    const { rows: [lease] } = await conn.pg.query("SELECT * FROM jobs.claim_with_token($1, 'node-old', ARRAY['default'])", [id]);
    assert.ok(lease, 'claimed');
    await until('the lease expired and was reaped', async () => {
      await conn.pg.query('SELECT * FROM jobs.reap(100)');
      return (await status(conn, id)).status === 'queued';
    }, 10);
    await assert.rejects(
      conn.pg.query('SELECT * FROM jobs.complete($1, $2, $3, $4::jsonb, $5::uuid)',
        [id, 'node-old', lease.lease_version, '{"late": true}', lease.token]),
      (err) => err.code === 'JB001');
    assert.strictEqual((await status(conn, id)).status, 'queued', 'the stale result changed nothing');
  } finally {
    await conn.close();
  }
});

test('a Node worker killed mid-job leaves it to the reaper, and another worker finishes it', async () => {
  const conn = await connect(DB, REDIS);
  try {
    await conn.pg.query("SELECT jobs.define_type('node.sleep', lease_timeout => '1 second')");
    const [id] = await submitMany(conn, [{ kind: 'node.sleep', payload: { ms: 60000 } }]);
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'jobfence.js'), 'worker', 'node-doomed'],
      { env: process.env, stdio: 'ignore' });
    await until('the child claimed the job', async () => (await status(conn, id)).status === 'processing');
    const before = Number((await status(conn, id)).lease_version);
    child.kill('SIGKILL');
    await until('the reaper requeued it', async () => {
      await conn.pg.query('SELECT * FROM jobs.reap(100)');
      return (await status(conn, id)).status === 'queued';
    }, 15);
    assert.strictEqual(Number((await status(conn, id)).lease_version), before + 1, 'the fence moved on');
    let done = false;
    const working = work(conn, { name: 'node-w2', handlers: { 'node.sleep': async () => ({ slept: 0 }) }, stop: () => done });
    await until('the survivor finished it', async () => (await status(conn, id)).status === 'done');
    done = true;
    await working;
    const { rows } = await conn.pg.query('SELECT reason FROM jobs.events($1) ORDER BY id', [id]);
    assert.deepStrictEqual(rows.map((r) => r.reason), ['submitted', 'claimed', 'reaped', 'claimed', 'completed']);
  } finally {
    await conn.close();
  }
});

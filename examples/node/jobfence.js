// A jobfence worker and producer in Node, on the SQL contract alone (docs/sql-api.md,
// "Write a worker in your language"): PostgreSQL decides every transition and fences every
// write with (lease_version, token); Redis only carries ids that say "look at this job".
'use strict';
const { Pool } = require('pg');
const { createClient } = require('redis');

const BANDS = 10; // priorities 0..9: NS:{queue}:ready, then NS:{queue}:ready:p1 .. :p9

function readyKeys(ns, queue) {
  return Array.from({ length: BANDS }, (_, b) => `${ns}:{${queue}}:ready${b ? `:p${b}` : ''}`);
}

async function connect(databaseUrl, redisUrl) {
  const pg = new Pool({ connectionString: databaseUrl, max: 4 });
  const redis = createClient({ url: redisUrl });
  await redis.connect();
  // Every key carries the deployment's namespace, asked once (jobs.redis_namespace).
  const { rows } = await pg.query('SELECT jobs.redis_namespace() AS ns');
  return { pg, redis, ns: rows[0].ns, close: async () => { await redis.quit(); await pg.end(); } };
}

// Producer: one jobs.submit_many (commit), then one push per job of its band; a failed push
// leaves the job to the reaper's re-push (or mark it with jobs.mark_enqueue_failed).
async function submitMany(conn, specs) {
  const { rows } = await conn.pg.query(
    'SELECT id, queue, priority, run_after FROM jobs.submit_many($1::jsonb)',
    [JSON.stringify(specs.map((s) => ({ ...s, notify: false })))]);
  const multi = conn.redis.multi();
  for (const r of rows) {
    const band = r.priority ? `:p${r.priority}` : '';
    if (r.run_after > new Date()) {
      multi.zAdd(`${conn.ns}:{${r.queue}}:delayed${band}`, { score: r.run_after / 1000, value: String(r.id) });
    } else {
      multi.lPush(`${conn.ns}:{${r.queue}}:ready${band}`, String(r.id));
    }
  }
  await multi.exec();
  return rows.map((r) => Number(r.id));
}

// Worker: pop ids (one BLMPOP over the bands, most urgent first), claim them with tokens,
// run each handler with heartbeats, complete or fail with the lease's token. JB001 means the
// lease is no longer ours (reaped, or finished elsewhere): drop the result, never retry it.
async function work(conn, { name, queue = 'default', handlers, batch = 50, stop, onLeaseLost }) {
  const keys = readyKeys(conn.ns, queue);
  while (!stop()) {
    // BLMPOP timeout numkeys key... RIGHT COUNT n: [key, [ids]] or null after 1 s.
    const popped = await conn.redis.sendCommand(
      ['BLMPOP', '1', String(keys.length), ...keys, 'RIGHT', 'COUNT', String(batch)]);
    const ids = (popped ? popped[1] : []).filter((x) => /^[1-9][0-9]{0,18}$/.test(x));
    // A signal lost in Redis is no job lost: with nothing popped, ask PostgreSQL directly.
    const { rows: leases } = ids.length
      ? await conn.pg.query('SELECT * FROM jobs.claim_many_with_token($1::bigint[], $2, $3::text[])', [ids, name, [queue]])
      : await conn.pg.query('SELECT * FROM jobs.claim_next_with_token($1, $2::text[], $3)', [name, [queue], batch]);
    await Promise.all(leases.map((lease) => runOne(conn, name, lease, handlers, onLeaseLost)));
  }
}

async function runOne(conn, name, lease, handlers, onLeaseLost) {
  const fence = [lease.job_id, name, lease.lease_version];
  const beat = setInterval(() => {
    conn.pg.query('SELECT * FROM jobs.heartbeat($1, $2, $3, $4::uuid)', [...fence, lease.token])
      .catch(() => {}); // a missed beat is retried by the next one; the lease says the rest
  }, 1000);
  try {
    const handler = handlers[lease.kind];
    if (!handler) throw Object.assign(new Error(`no handler for kind ${lease.kind}`), { fatal: true });
    const result = await handler(lease.payload, lease);
    await conn.pg.query('SELECT * FROM jobs.complete($1, $2, $3, $4::jsonb, $5::uuid)',
      [...fence, JSON.stringify(result ?? null), lease.token]);
  } catch (err) {
    if (err.code === 'JB001') return onLeaseLost && onLeaseLost(lease, err);
    try {
      await conn.pg.query('SELECT * FROM jobs.fail($1, $2, $3, $4, $5, $6::uuid)',
        [...fence, String(err.message || err), !err.fatal, lease.token]);
    } catch (failErr) {
      if (failErr.code !== 'JB001') throw failErr;
      if (onLeaseLost) onLeaseLost(lease, failErr);
    }
  } finally {
    clearInterval(beat);
  }
}

module.exports = { connect, submitMany, work, readyKeys };

// `node jobfence.js worker NAME`: serve the demo kinds until SIGTERM (the tests crash it).
if (require.main === module) {
  const [, , role, name = `node-${process.pid}`] = process.argv;
  const handlers = {
    'node.add': async (p) => ({ sum: p.a + p.b }),
    'node.sleep': (p) => new Promise((resolve) => setTimeout(() => resolve({ slept: p.ms }), p.ms)),
  };
  (async () => {
    if (role !== 'worker') throw new Error('usage: node jobfence.js worker [NAME]');
    const conn = await connect(process.env.JOBFENCE_DATABASE_URL, process.env.JOBFENCE_REDIS_URL);
    let stopping = false;
    process.on('SIGTERM', () => { stopping = true; });
    console.log(JSON.stringify({ event: 'worker_ready', worker: name }));
    await work(conn, { name, handlers, stop: () => stopping });
    await conn.close();
  })().catch((err) => { console.error(err.message); process.exit(1); });
}

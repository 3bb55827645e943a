/**
 * The audit schema: migrations run at start, twice is a no-op, a schema a newer
 * control plane migrated is refused with a clear message; retention by age; database settings
 * validated like every other setting.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { silentLogger } from '@headroom/common';
import { connected, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { testSchema } from '@headroom/unleash-local';
import { createControlPlane, type ControlPlaneOptions } from '../src/index';
import { AuditStore } from '../src/record/audit-store';
import { openDatabase } from '../src/record/database';
import { migrate, migrations } from '../src/record/migrations';

const cli = path.join(__dirname, '..', 'src', 'cli.js');
const newest = migrations.at(-1)!.name;
/** Nothing listens there: the control plane keeps retrying Unleash in the background, which these tests do not need. */
const noUnleash = { url: 'http://127.0.0.1:9', adminToken: 'admin-token' };
const tokens = [{ name: 'olga', role: 'operator' as const, token: 'operator-token-0123456789abcdef' }];

function database(t: import('node:test').TestContext) {
  const schema = testSchema();
  const opened = openDatabase({ url: schema.url, schema: schema.schema, poolMax: 3, connectTimeoutMs: 2000, statementTimeoutMs: 5000 }, silentLogger);
  // After hooks run in the order registered: the pool closes, then the schema goes.
  t.after(() => opened.close());
  t.after(() => schema.drop());
  return { schema, opened };
}

async function startControlPlane(
  t: import('node:test').TestContext,
  options: Partial<ControlPlaneOptions> & Pick<ControlPlaneOptions, 'database'>,
  keyPrefix = uniquePrefix('audit-schema'),
) {
  const redis = await connected();
  const subscriber = await connected(undefined, true);
  const disconnect = () => {
    redis.disconnect();
    subscriber.disconnect();
  };
  const controlPlane = await createControlPlane({ unleash: noUnleash, tokens, ...options }, { redis, subscriber, keyPrefix }).catch((error: unknown) => {
    disconnect();
    throw error;
  });
  t.after(async () => {
    await controlPlane.close();
    disconnect();
  });
  return controlPlane;
}

test('migrations: the first run creates the schema, a second is a no-op, replicas starting together migrate once', async (t) => {
  const { schema, opened } = database(t);
  assert.deepEqual(
    await migrate(opened),
    migrations.map((m) => m.name),
  );
  const shape = async () =>
    (
      await schema.query(
        `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
        [schema.schema],
      )
    ).rows;
  const applied = async () => (await schema.query(`SELECT name, applied_at FROM "${schema.schema}".schema_migrations ORDER BY name`)).rows;
  const [shapeBefore, appliedBefore] = [await shape(), await applied()];
  assert.ok(
    shapeBefore.some((c) => c.table_name === 'audit_entries' && c.column_name === 'request'),
    JSON.stringify(shapeBefore),
  );
  assert.deepEqual(await migrate(opened), []);
  assert.deepEqual([await shape(), await applied()], [shapeBefore, appliedBefore], 'nothing changed');

  const fresh = database(t);
  const together = await Promise.all([migrate(fresh.opened), migrate(fresh.opened)]);
  assert.deepEqual(together.map((names) => names.length).sort(), [0, migrations.length], 'one applied them, the other found nothing to do');
});

test('a schema migrated by a newer control plane is refused at start, naming the migration; nothing is changed', async (t) => {
  const { schema, opened } = database(t);
  await migrate(opened);
  await schema.query(`INSERT INTO "${schema.schema}".schema_migrations (name) VALUES ('9999-from-a-newer-control-plane')`);
  await assert.rejects(migrate(opened), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'HR_ERR_DATABASE_SCHEMA_TOO_NEW');
    assert.match(
      error.message,
      new RegExp(`9999-from-a-newer-control-plane that this control plane does not know \\(it knows up to ${newest}\\): a newer control plane migrated it`),
    );
    return true;
  });
  await assert.rejects(startControlPlane(t, { database: { url: schema.url, schema: schema.schema } }), { code: 'HR_ERR_DATABASE_SCHEMA_TOO_NEW' });

  // The CLI stops with the message and exit code 1.
  const run = spawnSync(
    process.execPath,
    [
      cli,
      '--unleash-url',
      noUnleash.url,
      '--unleash-admin-token',
      'x',
      '--operator-tokens',
      `olga=${tokens[0]!.token}`,
      '--ui-dir',
      'none',
      '--port',
      '0',
      '--database-url',
      schema.url,
      '--database-schema',
      schema.schema,
      '--redis-url',
      testRedisUrl,
      '--key-prefix',
      uniquePrefix('audit-cli'),
    ],
    { encoding: 'utf8', timeout: 30_000, env: { ...process.env, LOG_LEVEL: 'silent' } },
  );
  assert.equal(run.status, 1, run.stderr);
  assert.match(
    run.stderr,
    /^headroom-control-plane: the audit schema "hr_audit_\w+" .* has migration\(s\) 9999-from-a-newer-control-plane .*Run that version or a newer one/m,
  );
  assert.deepEqual(
    (await schema.query(`SELECT name FROM "${schema.schema}".schema_migrations ORDER BY name`)).rows.map((r) => r.name),
    [...migrations.map((m) => m.name), '9999-from-a-newer-control-plane'],
  );
});

test('retention: entries older than auditRetentionDays are deleted at start, newer ones stay', async (t) => {
  const { schema, opened } = database(t);
  await migrate(opened);
  const store = new AuditStore(opened);
  const day = 24 * 3_600_000;
  const entry = (daysAgo: number) => ({
    atUnixMs: Date.now() - daysAgo * day,
    actor: 'olga',
    action: 'rollback' as const,
    target: 'all',
    before: null,
    after: { daysAgo },
    outcome: 'ok' as const,
  });
  for (const daysAgo of [40, 31, 29, 1]) await store.insert(opened.pool, entry(daysAgo));
  const controlPlane = await startControlPlane(t, { database: { url: schema.url, schema: schema.schema }, auditRetentionDays: 30 });
  const kept = await controlPlane.audit.list({ limit: 10 });
  assert.deepEqual(
    kept.map((e) => (e.after as { daysAgo: number }).daysAgo),
    [1, 29],
  );
});

test('database settings are checked at start: the message names the setting and what is accepted, and a password is never echoed', async (t) => {
  const redis = await connected();
  t.after(() => redis.disconnect());
  const start = (options: Record<string, unknown>) =>
    createControlPlane({ unleash: noUnleash, tokens, ...options } as ControlPlaneOptions, {
      redis,
      subscriber: redis,
      keyPrefix: uniquePrefix('audit-config'),
    });
  const schema = testSchema();
  for (const [options, message] of [
    [{}, /database: missing \(required\)/],
    [
      { database: { url: 'mysql://root@127.0.0.1/test' } },
      /database\.url: got "mysql:\/\/root@127\.0\.0\.1\/test", expected a PostgreSQL URL such as postgres:\/\/user:password@host:5432\/database/,
    ],
    [{ database: { url: schema.url, schema: 'public' } }, /database\.schema: got "public", expected a schema of its own: not public/],
    [{ database: { url: schema.url, schema: 'Audit Log' } }, /database\.schema: got "Audit Log", expected 1-63 characters of a-z, 0-9, "_"/],
    [{ database: { url: schema.url, poolMax: 0 } }, /database\.poolMax: got 0, expected a number >= 1/],
    [{ database: { url: schema.url, colour: 'red' } }, /database: unknown setting\(s\) "colour"/],
    [{ database: { url: schema.url }, auditRetentionDays: 0 }, /auditRetentionDays: got 0, expected a number >= 1/],
    [{ database: { url: schema.url }, auditOutboxMaxEntries: 'many' }, /auditOutboxMaxEntries: got "many", expected a whole number/],
  ] as const) {
    await assert.rejects(start(options), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'HR_ERR_CONFIG', error.message);
      assert.match(error.message, message);
      return true;
    });
  }
  const exists = await schema.query(`SELECT 1 FROM information_schema.schemata WHERE schema_name = $1`, [schema.schema]);
  assert.equal(exists.rowCount, 0, 'nothing was created');

  const runCli = (...args: string[]) =>
    spawnSync(process.execPath, [cli, '--unleash-url', noUnleash.url, '--unleash-admin-token', 'x', '--operator-tokens', `olga=${tokens[0]!.token}`, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
    });
  const missing = runCli();
  assert.equal(missing.status, 2, missing.stderr);
  assert.match(missing.stderr, /--database-url: required/);
  const bad = runCli('--database-url', 'postgres://olga:s3cret-pw@/nowhere', '--audit-retention-days=0');
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /--database-url: got "postgres:\/\/olga:\*\*\*@\/nowhere", expected a PostgreSQL URL/);
  assert.match(bad.stderr, /--audit-retention-days: got "0", expected a number >= 1/);
  assert.doesNotMatch(bad.stderr, /s3cret-pw/);
  const unreachable = runCli(
    '--database-url',
    'postgres://olga:s3cret-pw@127.0.0.1:9/nowhere',
    '--ui-dir',
    'none',
    '--port',
    '0',
    '--redis-url',
    testRedisUrl,
    '--key-prefix',
    uniquePrefix('audit-cli'),
  );
  assert.equal(unreachable.status, 1, unreachable.stderr);
  assert.match(
    unreachable.stderr,
    /PostgreSQL \(postgres:\/\/olga:\*\*\*@127\.0\.0\.1:9\/nowhere\) could not be reached for the audit schema migrations at start/,
  );
  assert.doesNotMatch(unreachable.stderr, /s3cret-pw/);
});

test('the Redis stream the audit log was before is copied into PostgreSQL at start, once, oldest first with its own times; then it is deleted', async (t) => {
  const { schema, opened } = database(t);
  const keyPrefix = uniquePrefix('audit-legacy');
  const key = `{${keyPrefix}:control}:audit`;
  const redis = await connected();
  t.after(async () => {
    await redis.del(key);
    redis.disconnect();
  });
  const old = [
    {
      id: '1700000000000-0',
      entry: {
        atUnixMs: 1700000000000,
        actor: 'olga',
        action: 'traffic.set',
        target: 'default',
        before: { defaultPercent: 0 },
        after: { defaultPercent: 5 },
        outcome: 'ok',
      },
    },
    {
      id: '1700000060000-0',
      entry: {
        atUnixMs: 1700000060000,
        actor: 'olga',
        action: 'rollback',
        target: 'all',
        before: null,
        after: { durable: 'done' },
        outcome: 'ok',
        reason: 'p95 ratio 2',
      },
    },
    { id: '1700000120000-0', entry: 'not JSON' },
    {
      id: '1700000180000-0',
      entry: {
        atUnixMs: 1700000180000,
        actor: 'rita',
        action: 'resume',
        target: 'all',
        before: null,
        after: null,
        outcome: 'failed',
        error: 'Unleash could not be reached',
      },
    },
  ];
  const seed = async () => {
    for (const { id, entry } of old) await redis.xadd(key, id, 'entry', typeof entry === 'string' ? entry : JSON.stringify(entry));
  };
  await seed();
  // Long ago: a retention that would delete them is not what this test is about.
  const first = await startControlPlane(t, { database: { url: schema.url, schema: schema.schema }, auditRetentionDays: 36_500 }, keyPrefix);
  const copied = await first.audit.list({ limit: 10 });
  assert.deepEqual(
    copied.map((e) => [e.atUnixMs, e.actor, e.action, e.target, e.outcome, e.reason ?? null, e.error ?? null]),
    [
      [1700000180000, 'rita', 'resume', 'all', 'failed', null, 'Unleash could not be reached'],
      [1700000060000, 'olga', 'rollback', 'all', 'ok', 'p95 ratio 2', null],
      [1700000000000, 'olga', 'traffic.set', 'default', 'ok', null, null],
    ],
  );
  assert.deepEqual(copied[2]!.after, { defaultPercent: 5 });
  assert.ok(Number(copied[0]!.id) > Number(copied[2]!.id), 'oldest first');
  assert.equal(await redis.exists(key), 0, 'the stream is deleted once copied');

  // The same stream again (a replica that had not seen the delete, a start that died before it): nothing is copied twice.
  await seed();
  await startControlPlane(t, { database: { url: schema.url, schema: schema.schema }, auditRetentionDays: 36_500 }, keyPrefix);
  assert.equal((await opened.pool.query(`SELECT count(*)::int AS n FROM "${schema.schema}".audit_entries`)).rows[0].n, 3);
});

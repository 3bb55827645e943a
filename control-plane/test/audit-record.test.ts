/**
 * The audit log is the record: in PostgreSQL, not in Redis. It survives Redis losing
 * its data; while PostgreSQL is away a change to Unleash is refused with a coded 503 and changes
 * nothing, while a rollback still takes effect and its entry is written once PostgreSQL is back.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { connected, eventually, type Stack, startPrivateRedis, startStack, viewerToken } from '@headroom/testkit';
import { startTestUnleash, testPostgresUrl, testSchema, type TestUnleash } from '@headroom/unleash-local';
import { tcpProxy } from './tcp-proxy';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

interface Entry {
  id: string;
  atUnixMs: number;
  actor: string;
  action: string;
  target: string;
  request?: unknown;
  before: unknown;
  after: unknown;
  outcome: string;
  reason?: string;
}

async function auditEntries(stack: Stack, query = ''): Promise<Entry[]> {
  const answer = await stack.api('GET', `/audit?limit=1000${query}`);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.entries as Entry[];
}

function metric(text: string, name: string): number {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  assert.ok(match, `metric ${name} in ${text.slice(0, 200)}`);
  return Number(match[1]);
}

test('audit entries are kept in PostgreSQL: they survive a Redis restart and a FLUSHALL, and GET /audit pages and filters them', async (t) => {
  const redis = await startPrivateRedis();
  const stack = await startStack(t, unleash, {}, redis.url).catch(async (error: unknown) => {
    await redis.stop(true);
    throw error;
  });
  // After hooks run in the order registered: Redis goes last, once the stack has stopped.
  t.after(() => redis.stop(true));

  assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 10 })).status, 200);
  assert.equal((await stack.api('PUT', '/parallelism', { clusters: { candidate: 8 } })).status, 200);
  assert.equal((await stack.api('POST', '/rollback', { integration: 'bank-a', reason: 'p95 ratio 1.6' })).status, 200);
  await eventually('the rollback is audited once Unleash has it', 5000, async () =>
    (await auditEntries(stack)).some((e) => e.action === 'rollback') ? true : undefined,
  );
  assert.equal((await stack.api('POST', '/resume', { integration: 'bank-a' })).status, 200);
  await eventually('the resume is audited', 5000, async () => ((await auditEntries(stack)).some((e) => e.action === 'resume') ? true : undefined));

  const recorded = await auditEntries(stack);
  assert.deepEqual(
    recorded.map((e) => [e.action, e.target, e.actor, e.outcome]),
    [
      ['resume', 'bank-a', 'olga', 'ok'],
      ['rollback', 'bank-a', 'olga', 'ok'],
      ['parallelism.set', 'candidate', 'olga', 'ok'],
      ['traffic.set', 'default', 'olga', 'ok'],
    ],
  );
  // What was asked, before and after, and why.
  assert.deepEqual(recorded[3]!.request, { defaultPercent: 10 });
  assert.deepEqual(
    [(recorded[3]!.before as { defaultPercent: number }).defaultPercent, (recorded[3]!.after as { defaultPercent: number }).defaultPercent],
    [0, 10],
  );
  assert.deepEqual(recorded[2]!.request, { clusters: { candidate: 8 } });
  assert.deepEqual(recorded[1]!.request, { integration: 'bank-a', reason: 'p95 ratio 1.6' });
  assert.equal(recorded[1]!.reason, 'p95 ratio 1.6');
  const rows = await stack.database.query<{ count: string }>(`SELECT count(*) FROM "${stack.database.schema}".audit_entries`);
  assert.equal(Number(rows.rows[0]!.count), 4, 'in PostgreSQL, in the schema of this control plane');

  // Redis loses everything twice: a restart (it runs without persistence), then a FLUSHALL.
  const kept = (entries: Entry[]) => entries.filter((e) => recorded.some((r) => r.id === e.id));
  await redis.stop();
  await redis.start();
  assert.deepEqual(kept(await auditEntries(stack)), recorded, 'the same entries after a Redis restart');
  const flusher = await connected(redis.url);
  t.after(() => flusher.disconnect());
  await flusher.flushall();
  assert.equal(await flusher.dbsize(), 0);
  const afterFlush = await auditEntries(stack);
  assert.deepEqual(kept(afterFlush), recorded, 'the same entries after a FLUSHALL');
  // What came after (the control plane rebuilt the override Redis lost) is added, never in place of them.
  assert.ok(
    afterFlush.every((e) => kept([e]).length === 1 || e.action === 'override.rebuild'),
    JSON.stringify(afterFlush.map((e) => e.action)),
  );

  // Paging and filters, as a viewer.
  const firstPage = (await stack.api('GET', '/audit?limit=2&action=rollback', undefined, viewerToken)).body.entries as Entry[];
  assert.deepEqual(
    firstPage.map((e) => e.id),
    [recorded[1]!.id],
  );
  const page = (await stack.api('GET', `/audit?limit=2&before=${recorded[1]!.id}`)).body.entries as Entry[];
  assert.deepEqual(
    page.map((e) => e.id),
    [recorded[2]!.id, recorded[3]!.id],
  );
  assert.deepEqual(await auditEntries(stack, '&actor=victor'), []);
  for (const [query, field] of [
    ['?action=delete', 'query.action'],
    ['?before=1700000000000-0', 'query.before'],
    ['?actor=a%20b', 'query.actor'],
    ['?colour=red', 'query.colour'],
  ] as const) {
    const answer = await stack.api('GET', `/audit${query}`);
    assert.equal(answer.status, 400, query);
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST');
    assert.ok(
      answer.body.error.fields.some((f: { field: string }) => f.field === field),
      `${query}: ${JSON.stringify(answer.body.error.fields)}`,
    );
  }
});

test('PostgreSQL away: a traffic change gets 503 HR_ERR_DATABASE_UNAVAILABLE and changes nothing; a rollback takes effect, and its entry is written once PostgreSQL is back', async (t) => {
  const target = new URL(testPostgresUrl);
  const proxy = await tcpProxy(t, { host: target.hostname, port: Number(target.port || 5432) });
  const proxied = new URL(testPostgresUrl);
  proxied.host = `127.0.0.1:${proxy.port}`;
  const schema = testSchema();
  const stack = await startStack(t, unleash, {
    database: { url: proxied.toString(), schema: schema.schema, connectTimeoutMs: 1000 },
    auditOutboxMaxEntries: 2,
  });
  t.after(() => schema.drop());
  const metrics = async () => (await stack.api('GET', '/metrics', undefined, null)).body as string;

  assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 10 })).status, 200);
  const flagBefore = (await stack.api('GET', '/traffic')).body.flag;
  const parallelismBefore = (await stack.api('GET', '/parallelism')).body.clusters;

  await proxy.cut();
  for (const [path, body] of [
    ['/traffic', { defaultPercent: 40, integrations: { 'bank-a': 60 } }],
    ['/parallelism', { clusters: { candidate: 12 } }],
  ] as const) {
    const refused = await stack.api('PUT', path, body);
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'HR_ERR_DATABASE_UNAVAILABLE');
    assert.match(refused.body.error.message, /PostgreSQL .* could not be reached .*nothing was changed/);
    assert.ok(refused.body.error.retryAfterMs > 0);
  }
  assert.deepEqual((await stack.api('GET', '/traffic')).body.flag, flagBefore, 'Unleash unchanged');
  assert.deepEqual((await stack.api('GET', '/parallelism')).body.clusters, parallelismBefore);
  const readyz = await stack.api('GET', '/readyz', undefined, null);
  assert.deepEqual([readyz.status, readyz.body.database], [503, false]);
  assert.equal((await stack.api('GET', '/audit')).body.error.code, 'HR_ERR_DATABASE_UNAVAILABLE');

  // A rollback is not stopped for bookkeeping: it takes effect through Redis, and Unleash is
  // switched off too (one write, made without the lock).
  const rolledBackAt = Date.now();
  const rollback = await stack.api('POST', '/rollback', { reason: 'error rate' });
  assert.equal(rollback.status, 200, JSON.stringify(rollback.body));
  assert.equal(rollback.body.override.all, true);
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.deepEqual(traffic.effectivePercent, { default: 0, integrations: { 'bank-a': 0, 'bank-b': 0 } });
  await eventually('Unleash has the rollback', 5000, async () => ((await stack.api('GET', '/traffic')).body.flag.enabled === false ? true : undefined));
  await eventually('its entry waits in the outbox', 5000, async () =>
    metric(await metrics(), 'headroom_control_audit_outbox_entries') === 1 ? true : undefined,
  );
  // The outbox is bounded (2 here): a resume fills it, the next rollback's entry is dropped, counted and logged.
  assert.equal((await stack.api('POST', '/resume', {})).status, 200);
  await eventually('the resume waits too', 5000, async () => (metric(await metrics(), 'headroom_control_audit_outbox_entries') === 2 ? true : undefined));
  assert.equal((await stack.api('POST', '/rollback', { reason: 'dropped' })).status, 200);
  await eventually('the third is dropped', 5000, async () => (metric(await metrics(), 'headroom_control_audit_outbox_dropped_total') === 1 ? true : undefined));
  assert.equal(metric(await metrics(), 'headroom_control_audit_outbox_entries'), 2);

  await proxy.restore();
  const entries = await eventually('the outbox is written once PostgreSQL is back', 10_000, async () => {
    const answer = await stack.api('GET', '/audit');
    return answer.status === 200 && answer.body.entries.length === 3 ? (answer.body.entries as Entry[]) : undefined;
  });
  assert.deepEqual(
    entries.map((e) => [e.action, e.outcome, e.reason ?? null]),
    [
      ['resume', 'ok', null],
      ['rollback', 'ok', 'error rate'],
      ['traffic.set', 'ok', null],
    ],
  );
  assert.ok(entries[1]!.atUnixMs >= rolledBackAt && entries[1]!.atUnixMs < entries[0]!.atUnixMs, 'each keeps the time it happened');
  assert.equal(metric(await metrics(), 'headroom_control_audit_outbox_entries'), 0);
  assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 20 })).status, 200, 'changes are accepted again');
  assert.equal((await stack.api('GET', '/readyz', undefined, null)).body.database, true);
});

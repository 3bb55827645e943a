/**
 * One writer at a time across control-plane replicas: changes to Unleash hold a
 * PostgreSQL advisory lock for their read-modify-write, and write their audit entry under it.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { startTestUnleash, testPostgresUrl, type TestUnleash } from '@headroom/unleash-local';
import { ControlPlaneApi, connected, operatorToken, type Stack, startStack } from '@headroom/testkit';
import { createControlPlane } from '../src/index';
import { advisoryLockKey } from '../src/record/database';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

type Body = { defaultPercent: number; integrations: Record<string, number> };
type FlagState = { enabled: boolean; defaultPercent: number; integrations: Record<string, { percent: number; rolledBack: boolean }> };
interface Entry {
  id: string;
  action: string;
  outcome: string;
  request: Body;
  before: FlagState;
  after: FlagState;
}

/** The flag as a body would leave it. */
function flagOf(body: Body): FlagState {
  return {
    enabled: true,
    defaultPercent: body.defaultPercent,
    integrations: Object.fromEntries(Object.entries(body.integrations).map(([name, percent]) => [name, { percent, rolledBack: false }])),
  };
}

async function put(url: string, body: Body): Promise<{ status: number; body: unknown }> {
  const { status, body: answered } = await new ControlPlaneApi({ apiUrl: `${url}/api/v1`, token: operatorToken, timeoutMs: 60_000 }).send({
    method: 'PUT',
    path: '/traffic',
    body,
  });
  return { status, body: answered };
}

/** A second control plane on the same flags, Redis prefix and PostgreSQL schema: a replica. */
async function replicaOf(t: import('node:test').TestContext, stack: Stack, options: { changeLockWaitMs?: number } = {}) {
  const subscriber = await connected(undefined, true);
  const replica = await createControlPlane(
    {
      integrations: ['bank-a', 'bank-b'],
      unleash: {
        url: unleash.url,
        adminToken: unleash.adminToken,
        candidateFlag: stack.flagNames.candidateCluster,
        parallelismFlag: stack.flagNames.maxParallelism,
      },
      tokens: [{ name: 'rita', role: 'operator', token: operatorToken }],
      database: { url: stack.database.url, schema: stack.database.schema },
      ...options,
    },
    { redis: stack.fleet.redis, subscriber, keyPrefix: stack.fleet.ledgerOptions.keyPrefix! },
  );
  t.after(async () => {
    await replica.close();
    subscriber.disconnect();
  });
  return replica;
}

test('two control planes given conflicting PUT /traffic at the same moment, 50 times: the flag is always one of the bodies exactly, both are audited in the order applied, none is lost', async (t) => {
  const stack = await startStack(t, unleash);
  const replica = await replicaOf(t, stack);
  const bodies: [Body, Body] = [
    { defaultPercent: 10, integrations: { 'bank-a': 20, 'bank-b': 30 } },
    { defaultPercent: 70, integrations: { 'bank-a': 80, 'bank-b': 90 } },
  ];
  const urls = [stack.controlPlane.url, replica.url];
  let lastId = 0n;
  for (let round = 0; round < 50; round++) {
    // Each control plane gets each body in turn.
    const [first, second] = round % 2 === 0 ? bodies : [bodies[1], bodies[0]];
    const answers = await Promise.all([put(urls[0]!, first), put(urls[1]!, second)]);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200],
      JSON.stringify(answers),
    );

    const flag = (await stack.api('GET', '/traffic')).body.flag;
    const { name: _name, ...state } = flag as FlagState & { name: string };
    const equalTo = bodies.findIndex((body) => isDeepStrictEqual(flagOf(body), state));
    assert.ok(equalTo >= 0, `round ${round}: the flag ${JSON.stringify(state)} is one of the bodies exactly`);

    const entries = ((await stack.api('GET', '/audit?action=traffic.set&limit=2')).body.entries as Entry[]).reverse();
    assert.equal(entries.length, 2);
    assert.ok(BigInt(entries[0]!.id) > lastId, `round ${round}: two new entries`);
    assert.deepEqual(
      entries.map((e) => e.outcome),
      ['ok', 'ok'],
    );
    assert.ok(
      bodies.every((body) => entries.some((e) => isDeepStrictEqual(e.request, body))),
      `round ${round}: both bodies audited: ${JSON.stringify(entries.map((e) => e.request))}`,
    );
    // Applied one after the other: the second read what the first wrote (no stale read), and the
    // flag is what the last applied left.
    assert.deepEqual(entries[1]!.before, entries[0]!.after, `round ${round}: the second change read the first one's result`);
    assert.deepEqual(entries[0]!.after, flagOf(entries[0]!.request));
    assert.deepEqual(entries[1]!.after, state);
    assert.deepEqual(entries[1]!.request, bodies[equalTo]);
    lastId = BigInt(entries[1]!.id);
  }
  const all = (await stack.api('GET', '/audit?action=traffic.set&limit=1000')).body.entries as Entry[];
  assert.equal(all.length, 100, 'none lost');
});

test('a change waits for the lock another control plane holds; past changeLockWaitMs it gets 503 HR_ERR_BUSY and changes nothing', async (t) => {
  const stack = await startStack(t, unleash, { changeLockWaitMs: 300 });
  const before = (await stack.api('GET', '/traffic')).body.flag;
  // Another control plane in the middle of a change: its transaction holds the lock.
  const other = new pg.Client({ connectionString: testPostgresUrl });
  await other.connect();
  t.after(() => other.end());
  await other.query('BEGIN');
  await other.query('SELECT pg_advisory_xact_lock($1)', [
    advisoryLockKey(`headroom.unleash-changes:default/development/${stack.flagNames.candidateCluster}/${stack.flagNames.maxParallelism}`),
  ]);

  const busy = await stack.api('PUT', '/traffic', { defaultPercent: 25 });
  assert.equal(busy.status, 503, JSON.stringify(busy.body));
  assert.equal(busy.body.error.code, 'HR_ERR_BUSY');
  assert.match(busy.body.error.message, /another control plane .*changeLockWaitMs.*nothing was changed/);
  assert.deepEqual((await stack.api('GET', '/traffic')).body.flag, before);
  assert.deepEqual((await stack.api('GET', '/audit')).body.entries, []);

  // Released while a change waits: the change goes ahead.
  const waiting = stack.api('PUT', '/traffic', { defaultPercent: 25 });
  await new Promise((resolve) => setTimeout(resolve, 100));
  await other.query('COMMIT');
  const done = await waiting;
  assert.equal(done.status, 200, JSON.stringify(done.body));
  assert.equal(done.body.flag.defaultPercent, 25);
});

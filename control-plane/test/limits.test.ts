import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { BalancerErrorRecorder, LatencyRecorder, OverrideStore, clusterKeys, integrationField } from '@headroom/fleet';
import { eventually, startStack, viewerToken, type Stack } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

type Row = {
  integration: string;
  source: string;
  limit: unknown;
  maxInFlight: number | null;
  maxStartsPerSecond: number | null;
  inflight: number;
  waiting: number;
  refused: number | null;
};
const rowOf = async (stack: Stack, cluster: string, integration: string): Promise<Row | undefined> => {
  const view = (await stack.api('GET', '/limits')).body as { clusters: { cluster: string; integrations: Row[] }[] };
  return view.clusters.find((c) => c.cluster === cluster)?.integrations.find((i) => i.integration === integration);
};
const ownLimit = async (stack: Stack, cluster: string, integration: string) =>
  (await stack.fleet.ledger.integrationLimits(cluster)).find((s) => s.integration === integration)?.limit ?? null;
const auditOf = async (stack: Stack, action: string) => (await stack.api('GET', `/audit?action=${action}`)).body.entries as Record<string, unknown>[];

/** A stack with 10 baseline slots and 4 candidate slots, as the ledger counts them. */
async function limitsStack(t: Parameters<typeof startStack>[0]): Promise<Stack> {
  const stack = await startStack(t, unleash, { limitsCheckIntervalMs: 200 });
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 10 });
  await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  await eventually('both clusters have capacity', 5000, async () => {
    const view = (await stack.api('GET', '/limits')).body as { clusters: { capacitySlots: number }[] };
    return view.clusters.every((c) => c.capacitySlots > 0) ? true : undefined;
  });
  return stack;
}

test('an operator sets, reads and removes a limit; the ledger holds it; each change is audited; a viewer reads but cannot change', async (t) => {
  const stack = await limitsStack(t);
  const put = await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 3 }, reason: 'bank-a is slow today' });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 3 });
  assert.deepEqual(await rowOf(stack, 'baseline', 'bank-a'), {
    integration: 'bank-a',
    source: 'own',
    limit: { maxInFlight: 3 },
    maxInFlight: 3,
    maxStartsPerSecond: null,
    inflight: 0,
    waiting: 0,
    refused: 0,
  });
  // Balancers count refused tasks in Redis as errors of their cluster and integration.
  const recorder = new BalancerErrorRecorder(stack.fleet.redis, { keyPrefix: stack.fleet.ledgerOptions.keyPrefix! });
  for (let i = 0; i < 3; i++) recorder.record('baseline', 'bank-a', 'HR_ERR_INTEGRATION_AT_LIMIT');
  recorder.record('baseline', 'bank-a', 'HR_ERR_DEADLINE_EXCEEDED');
  await recorder.flush();
  assert.equal((await rowOf(stack, 'baseline', 'bank-a'))?.refused, 3, 'only the refusals at the limit');
  // Balancers say in their heartbeats how many tasks wait for an integration's limit: the view adds up the live ones.
  const balancers = new OverrideStore(stack.fleet.redis, stack.fleet.ledgerOptions.keyPrefix!);
  const heartbeat = (balancerId: string, waiting: number) =>
    balancers.balancerHeartbeat(balancerId, {
      address: '127.0.0.1:1',
      queued: { userPresent: 0, background: waiting },
      trafficFlag: null,
      waitingAtLimit: [
        { cluster: 'baseline', integration: 'bank-a', waiting },
        { cluster: 'candidate', integration: 'bank-a', waiting: 1 },
      ],
    });
  await heartbeat('b1', 4);
  await heartbeat('b2', 2);
  assert.equal((await rowOf(stack, 'baseline', 'bank-a'))?.waiting, 6, 'both balancers');
  assert.equal((await rowOf(stack, 'candidate', 'bank-a'))?.waiting, 2);
  assert.equal((await rowOf(stack, 'baseline', 'bank-b'))?.waiting, 0);
  assert.match(
    (await stack.api('GET', '/metrics', undefined, null)).body as string,
    /^headroom_control_integration_waiting_at_limit_tasks\{cluster="baseline",integration="bank-a"\} 6$/m,
  );
  const share = await stack.api('PUT', '/limits/candidate/bank-b', { limit: { shareOfCapacity: 0.5 } });
  assert.equal(share.status, 200, JSON.stringify(share.body));
  assert.equal((await rowOf(stack, 'candidate', 'bank-b'))?.maxInFlight, 2, 'half of 4 slots');

  const [entry] = await auditOf(stack, 'limit.set');
  assert.equal(entry?.target, 'candidate/bank-b');
  const first = (await auditOf(stack, 'limit.set')).find((e) => e.target === 'baseline/bank-a');
  assert.deepEqual(
    { actor: first?.actor, before: first?.before, after: first?.after, reason: first?.reason, outcome: first?.outcome },
    { actor: 'olga', before: null, after: { maxInFlight: 3 }, reason: 'bank-a is slow today', outcome: 'ok' },
  );

  const viewer = await stack.api('GET', '/limits', undefined, viewerToken);
  assert.equal(viewer.status, 200);
  assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 5 } }, viewerToken)).status, 403);
  assert.equal((await stack.api('DELETE', '/limits/baseline/bank-a', undefined, viewerToken)).status, 403);
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 3 }, 'a viewer changed nothing');

  const removed = await stack.api('DELETE', '/limits/baseline/bank-a', { reason: 'recovered' });
  assert.equal(removed.status, 200, JSON.stringify(removed.body));
  assert.equal(await ownLimit(stack, 'baseline', 'bank-a'), null);
  const row = await rowOf(stack, 'baseline', 'bank-a');
  assert.equal(row?.source, 'default');
  assert.equal(row?.maxInFlight, 8, 'half of 10 slots, at least 8');
  const [removal] = await auditOf(stack, 'limit.remove');
  assert.deepEqual(
    { before: removal?.before, after: removal?.after, reason: removal?.reason },
    { before: { maxInFlight: 3 }, after: null, reason: 'recovered' },
  );
});

test('bad limits, names and fields are refused with 400 naming the field, and change nothing', async (t) => {
  const stack = await limitsStack(t);
  assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 3 } })).status, 200);
  const stateBefore = (await stack.api('GET', '/limits')).body;
  const auditBefore = (await stack.api('GET', '/audit?limit=1000')).body.entries.length;
  const cases: { path: string; body: unknown; field: string }[] = [
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: 0 } }, field: 'body.limit.maxInFlight' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: -2 } }, field: 'body.limit.maxInFlight' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: 1.5 } }, field: 'body.limit.maxInFlight' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: '4' } }, field: 'body.limit.maxInFlight' },
    { path: 'baseline/bank-a', body: '{"limit": {"maxInFlight": NaN}}', field: 'body' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: 11 } }, field: 'body.limit.maxInFlight' },
    { path: 'baseline/bank-a', body: { limit: { shareOfCapacity: 1.5 } }, field: 'body.limit.shareOfCapacity' },
    { path: 'baseline/bank-a', body: { limit: { off: false } }, field: 'body.limit.off' },
    { path: 'baseline/bank-a', body: '{"limit": {"__proto__": {"maxInFlight": 2}}}', field: 'body.limit' },
    { path: 'baseline/bank-a', body: { limit: { constructor: 2 } }, field: 'body.limit' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: 2, shareOfCapacity: 0.5 } }, field: 'body.limit' },
    { path: 'baseline/bank-a', body: { limit: 'max:2' }, field: 'body.limit' },
    { path: 'baseline/bank-a', body: { limit: null }, field: 'body.limit' },
    { path: 'baseline/bank-a', body: {}, field: 'body.limit' },
    { path: 'baseline/bank-a', body: { limit: { maxInFlight: 2 }, frobnicate: 1 }, field: 'body.frobnicate' },
    { path: 'baseline/bank-a', body: '{"limit": {"maxInFlight": 2}, "__proto__": {"x": 1}}', field: 'body.__proto__' },
    { path: 'baseline/Bank_A', body: { limit: { maxInFlight: 2 } }, field: 'path.integration' },
    { path: 'baseline/constructor', body: { limit: { maxInFlight: 2 } }, field: 'path.integration' },
    { path: 'baseline/__proto__', body: { limit: { maxInFlight: 2 } }, field: 'path.integration' },
    { path: `baseline/${'a'.repeat(65)}`, body: { limit: { maxInFlight: 2 } }, field: 'path.integration' },
  ];
  for (const bad of cases) {
    const answer = await stack.api('PUT', `/limits/${bad.path}`, bad.body);
    const where = `PUT ${bad.path} ${JSON.stringify(bad.body)} → ${answer.status} ${JSON.stringify(answer.body)}`;
    assert.equal(answer.status, 400, where);
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST', where);
    assert.ok(
      (answer.body.error.fields as { field: string }[]).some((f) => f.field === bad.field),
      `${where}: expected the field ${bad.field}`,
    );
  }
  const unknownCluster = await stack.api('PUT', '/limits/nope/bank-a', { limit: { maxInFlight: 2 } });
  assert.equal(unknownCluster.status, 404, JSON.stringify(unknownCluster.body));
  assert.equal((await stack.api('DELETE', '/limits/nope/bank-a')).status, 404);
  assert.deepEqual((await stack.api('GET', '/limits')).body, stateBefore);
  assert.equal((await stack.api('GET', '/audit?limit=1000')).body.entries.length, auditBefore);
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 3 });
});

test('a start rate is set, shown, audited and re-applied over REST; bad rates get a 400 naming the field and change nothing', async (t) => {
  const stack = await limitsStack(t);
  const put = await stack.api('PUT', '/limits/baseline/bank-a', {
    limit: { maxInFlight: 6, maxStartsPerSecond: 1000 },
    reason: 'the bank allows 1,000 calls/s',
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 6, maxStartsPerSecond: 1000 });
  const row = await rowOf(stack, 'baseline', 'bank-a');
  assert.deepEqual([row?.limit, row?.maxInFlight, row?.maxStartsPerSecond], [{ maxInFlight: 6, maxStartsPerSecond: 1000 }, 6, 1000]);
  // A rate alone keeps the default in flight (half of 10 slots, at least 8).
  assert.equal((await stack.api('PUT', '/limits/baseline/bank-b', { limit: { maxStartsPerSecond: 2.5 } })).status, 200);
  const rateAlone = await rowOf(stack, 'baseline', 'bank-b');
  assert.deepEqual([rateAlone?.source, rateAlone?.maxInFlight, rateAlone?.maxStartsPerSecond], ['own', 8, 2.5]);
  assert.match(
    (await stack.api('GET', '/metrics', undefined, null)).body as string,
    /^headroom_control_integration_max_starts_per_second\{cluster="baseline",integration="bank-a"\} 1000$/m,
  );
  const audited = (await auditOf(stack, 'limit.set')).find((e) => e.target === 'baseline/bank-a');
  assert.deepEqual(
    { request: audited?.request, after: audited?.after },
    { request: { limit: { maxInFlight: 6, maxStartsPerSecond: 1000 } }, after: { maxInFlight: 6, maxStartsPerSecond: 1000 } },
  );

  const stateBefore = (await stack.api('GET', '/limits')).body;
  const auditBefore = (await stack.api('GET', '/audit?limit=1000')).body.entries.length;
  const field = 'body.limit.maxStartsPerSecond';
  const bad: { body: unknown; field: string }[] = [
    { body: { limit: { maxInFlight: 6, maxStartsPerSecond: -5 } }, field },
    { body: { limit: { maxInFlight: 6, maxStartsPerSecond: 0 } }, field },
    { body: { limit: { maxInFlight: 6, maxStartsPerSecond: '1000' } }, field },
    { body: { limit: { maxInFlight: 6, maxStartsPerSecond: 1e12 } }, field },
    { body: { limit: { maxStartsPerSecond: null } }, field },
    { body: '{"limit": {"maxInFlight": 6, "maxStartsPerSecond": NaN}}', field: 'body' },
    { body: '{"limit": {"maxInFlight": 6, "maxStartsPerSecond": 1e999}}', field },
    { body: { limit: { maxInFlight: 6, shareOfCapacity: 0.5, maxStartsPerSecond: 10 } }, field: 'body.limit' },
    { body: { limit: { auto: { minInFlight: 1, maxInFlight: 4 }, maxStartsPerSecond: 10 } }, field: 'body.limit.auto' },
  ];
  for (const { body, field: expected } of bad) {
    const answer = await stack.api('PUT', '/limits/baseline/bank-a', body);
    const where = `PUT ${JSON.stringify(body)} → ${answer.status} ${JSON.stringify(answer.body)}`;
    assert.equal(answer.status, 400, where);
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST', where);
    assert.ok(
      (answer.body.error.fields as { field: string }[]).some((f) => f.field === expected),
      `${where}: expected the field ${expected}`,
    );
  }
  assert.deepEqual((await stack.api('GET', '/limits')).body, stateBefore);
  assert.equal((await stack.api('GET', '/audit?limit=1000')).body.entries.length, auditBefore);

  // Redis lost it: PostgreSQL gives the rate back.
  await stack.fleet.redis.hdel(clusterKeys(stack.fleet.ledgerOptions.keyPrefix!, 'baseline').totals, integrationField('bank-a'));
  await eventually('the rate is back in the ledger', 10_000, async () => ((await ownLimit(stack, 'baseline', 'bank-a')) ? true : undefined));
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 6, maxStartsPerSecond: 1000 });
});

test('a limit the ledger lost (Redis lost its data) is re-applied from PostgreSQL, counted and audited', async (t) => {
  const stack = await limitsStack(t);
  assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 4 } })).status, 200);
  assert.equal((await stack.api('PUT', '/limits/candidate/bank-b', { limit: { off: true } })).status, 200);
  const prefix = stack.fleet.ledgerOptions.keyPrefix!;
  await stack.fleet.redis.hdel(clusterKeys(prefix, 'baseline').totals, integrationField('bank-a'));
  await stack.fleet.redis.hdel(clusterKeys(prefix, 'candidate').totals, integrationField('bank-b'));
  // Not checked gone here: the control plane looks every 200 ms and may have put them back already. The audit below says it had to.
  await eventually('the limits are back in the ledger', 10_000, async () =>
    (await ownLimit(stack, 'baseline', 'bank-a')) && (await ownLimit(stack, 'candidate', 'bank-b')) ? true : undefined,
  );
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 4 });
  assert.deepEqual(await ownLimit(stack, 'candidate', 'bank-b'), { off: true });
  const metrics = String((await stack.api('GET', '/metrics')).body);
  const reapplied = /headroom_control_integration_limit_reapplies_total\{outcome="ok"\} (\d+)/.exec(metrics);
  assert.ok(reapplied && Number(reapplied[1]) >= 2, metrics.slice(0, 200));
  assert.match(metrics, /headroom_control_integration_limit_changes_total\{action="limit.set",outcome="ok"\} 2/);
  const entries = await auditOf(stack, 'limit.reapply');
  assert.deepEqual(entries.map((e) => e.target).sort(), ['baseline/bank-a', 'candidate/bank-b']);

  // A removed limit is removed from PostgreSQL too: a later loss does not bring it back.
  assert.equal((await stack.api('DELETE', '/limits/baseline/bank-a')).status, 200);
  await stack.fleet.redis.hdel(clusterKeys(prefix, 'candidate').totals, integrationField('bank-b'));
  await eventually('bank-b is back', 10_000, async () => ((await ownLimit(stack, 'candidate', 'bank-b')) ? true : undefined));
  assert.equal(await ownLimit(stack, 'baseline', 'bank-a'), null);
});

test('auto mode: bounds are validated; the control plane lowers the limit when the integration runs slow and shows why', async (t) => {
  const stack = await startStack(t, unleash, { limitsCheckIntervalMs: 200, autoLimitTickMs: 200 });
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 10 });
  await eventually('capacity', 5000, async () =>
    (await rowOf(stack, 'baseline', 'bank-a')) && (await stack.fleet.ledger.snapshot('baseline')).totalCapacity === 10 ? true : undefined,
  );
  const bad: [unknown, string][] = [
    [{ auto: { minInFlight: 6, maxInFlight: 4 } }, 'body.limit.auto.minInFlight'],
    [{ auto: { minInFlight: 1, maxInFlight: 11 } }, 'body.limit.auto.maxInFlight'],
    [{ auto: { minInFlight: 0, maxInFlight: 4 } }, 'body.limit.auto.minInFlight'],
    [{ auto: { minInFlight: 1, maxInFlight: 4.5 } }, 'body.limit.auto.maxInFlight'],
    [{ auto: { minInFlight: 1, maxInFlight: 4, step: 2 } }, 'body.limit.auto'],
    [{ auto: { minInFlight: 1, maxInFlight: 4 }, maxInFlight: 3 }, 'body.limit.auto'],
    [{ auto: [1, 4] }, 'body.limit.auto'],
  ];
  for (const [limit, field] of bad) {
    const answer = await stack.api('PUT', '/limits/baseline/bank-a', { limit });
    assert.equal(answer.status, 400, JSON.stringify(answer.body));
    assert.ok(
      (answer.body.error.fields as { field: string }[]).some((f) => f.field === field),
      `${JSON.stringify(answer.body)}: expected ${field}`,
    );
  }
  assert.equal(await ownLimit(stack, 'baseline', 'bank-a'), null, 'nothing was changed');

  const put = await stack.api('PUT', '/limits/baseline/bank-a', { limit: { auto: { minInFlight: 2, maxInFlight: 8 } }, reason: 'follow the bank' });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual((await rowOf(stack, 'baseline', 'bank-a'))?.limit, { auto: { minInFlight: 2, maxInFlight: 8 } });
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 8 }, 'it starts at its maximum');
  // bank-a's tasks ran in 100 ms, now they take 2 s: the limiter lowers the limit to its minimum.
  const recorder = new LatencyRecorder(stack.fleet.redis, { keyPrefix: stack.fleet.ledgerOptions.keyPrefix!, cluster: 'baseline' });
  for (let i = 0; i < 40; i++) recorder.record('bank-a', 100);
  await recorder.flush();
  await eventually('a baseline', 10_000, async () =>
    ((await stack.api('GET', '/limits/baseline/bank-a/history')).body.points as { reason: string }[]).some((p) => p.reason === 'first reading')
      ? true
      : undefined,
  );
  // Three times as many slow ones: the window's p50 is theirs.
  for (let i = 0; i < 120; i++) recorder.record('bank-a', 2000);
  await recorder.flush();
  await eventually('the limit at its minimum', 20_000, async () => {
    const limit = await ownLimit(stack, 'baseline', 'bank-a');
    return limit && 'maxInFlight' in limit && limit.maxInFlight === 2 ? true : undefined;
  });
  const points = (await stack.api('GET', '/limits/baseline/bank-a/history')).body.points as { limitInFlight: number; reason: string; runTimeP50Ms: number }[];
  assert.ok(
    points.some((p) => p.reason === 'in trouble' && p.runTimeP50Ms > 1000),
    JSON.stringify(points),
  );
  const changes = await auditOf(stack, 'limit.auto');
  assert.ok(changes.length >= 2 && changes.every((e) => e.actor === 'auto-limit' && e.target === 'baseline/bank-a'), JSON.stringify(changes));
  // A fixed limit takes over: the auto limiter forgets bank-a and leaves the ledger's count alone.
  assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 5 } })).status, 200);
  assert.deepEqual((await stack.api('GET', '/limits/baseline/bank-a/history')).body.points, []);
  assert.deepEqual(await ownLimit(stack, 'baseline', 'bank-a'), { maxInFlight: 5 });
  assert.deepEqual((await rowOf(stack, 'baseline', 'bank-a'))?.limit, { maxInFlight: 5 });
});
